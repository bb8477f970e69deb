#!/usr/bin/env bash
# The real-GPU check of the CuPy backend (issue 24) in one command, within one time budget.
#
#   bash benchmarks/gpu_check.sh            # from the repository root, on the GPU machine
#   TOTAL_S=540 OUT=/some/dir bash benchmarks/gpu_check.sh
#
# Installs this checkout over what the machine has (no network: --no-index --no-deps), then
# runs, each under what is left of TOTAL_S seconds (default 540) and logging to $OUT
# (default ./gpu_check_out):
#   00-env.log       nvidia-smi, the Python packages that matter
#   01-install.log   pip install -e . and the four plugins
#   02-kit.log       the conformance kit on the GPU: --plax-backend=cupy -n 12
#   03-tests.log     pytest tests/cupy -q (the simulated-GPU tests skip where the GPU is real)
#   03-info.log      python -m plax info (after the install: the devices plax sees)
#   04-bench.log     python benchmarks/gpu.py (the GPU table beside JAX, launches, host copies)
#   05-tune.log      python benchmarks/gpu_tune.py (the thresholds' tables, docs/gpu.md)
#   summary.txt      one line per step: exit status and seconds (124: its time ran out)
# A step that fails does not stop the others; the script's exit status is the first failure's.
# JAX (used by the tests for comparisons only) must not take the card: it is kept from
# preallocating, and the kit's 12 workers each cap plax's CuPy pool at 6% of the card
# (PLAX_GPU_MEMORY_FRACTION; tests/conftest.py does the same for tests/cupy).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_check_out}"
TOTAL_S="${TOTAL_S:-540}"
mkdir -p "$OUT"
START=$(date +%s)
STATUS=0
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONUNBUFFERED=1
: > "$OUT/summary.txt"

left() { echo $(( TOTAL_S - ($(date +%s) - START) )); }

step() {  # step NAME MIN_SECONDS COMMAND...: runs COMMAND with what is left, logs it
  local name=$1 need=$2; shift 2
  local budget t0 rc
  budget=$(left)
  if [ "$budget" -lt "$need" ]; then
    echo "$name: skipped (${budget}s left, needs ${need}s)" | tee -a "$OUT/summary.txt"
    [ "$STATUS" -eq 0 ] && STATUS=124
    return
  fi
  t0=$(date +%s)
  timeout --kill-after=10 "$budget" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  echo "$name: rc=$rc $(( $(date +%s) - t0 ))s" | tee -a "$OUT/summary.txt"
  if [ "$rc" -ne 0 ] && [ "$STATUS" -eq 0 ]; then STATUS=$rc; fi
  tail -n 5 "$OUT/$name.log"
}

step 00-env 10 bash -c "nvidia-smi; python3 -m pip list 2>/dev/null | grep -iE \
  '^(cupy|numpy|numba|jax|jaxlib|ml.dtypes|torch|pytest|hypothesis|plax)'; true"
step 01-install 30 python3 -m pip install --no-index --no-deps --no-build-isolation \
  -e . -e plugins/plax_checkify -e plugins/plax_jet -e plugins/plax_cost_analysis -e plugins/plax_pmap
step 02-kit 60 env PLAX_GPU_MEMORY_FRACTION=0.06 python3 -m pytest -q -n 12 -p no:cacheprovider \
  --pyargs plax.testing.conformance --plax-backend=cupy
step 03-tests 60 python3 -m pytest -q -p no:cacheprovider tests/cupy
step 03-info 10 python3 -m plax info
step 04-bench 60 python3 benchmarks/gpu.py
step 05-tune 30 python3 benchmarks/gpu_tune.py --repeat 3
echo "total: $(( $(date +%s) - START ))s of ${TOTAL_S}s; status $STATUS" | tee -a "$OUT/summary.txt"
exit "$STATUS"
