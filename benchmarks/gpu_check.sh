#!/usr/bin/env bash
# The real-GPU check of the CuPy backend (issue 24) in one command, within one time budget.
#
#   bash benchmarks/gpu_check.sh            # from the repository root, on the GPU machine
#   TOTAL_S=600 OUT=/some/dir bash benchmarks/gpu_check.sh
#   GRAPH_SIZES=tiny bash benchmarks/gpu_check.sh   # (04-graphs at minute sizes)
#
# Installs this checkout over what the machine has (no network: --no-index --no-deps), then
# runs these steps, logging each to $OUT (default ./gpu_check_out). Each step has a time cap
# (seconds, the second column) so that one slow step cannot starve those after it; a step runs
# under min(cap, time left of TOTAL_S, default 420) and is skipped if less than its minimum
# (the first column) is left. Most informative first:
#   step          min  cap
#   00-env          5   10   nvidia-smi, the Python packages that matter
#   01-install     10   40   pip install -e . and the four plugins
#   02-info         5   15   python -m plax info (the devices plax sees)
#   03-graphs      10   75   the MLP step's, the conv's, a PCA's (svd) and a covariance eigh's
#                            "# CUDA graph:" lines (captured, replayed, plain calls and why),
#                            launches per call; then one small
#                            program per capture path (cuBLAS gemm/trsm, cuSOLVER potrf/getrf/
#                            geqrf+orgqr, cuFFT plans, the one-kernel scan, the look-back
#                            cumsum, the column scans' single pass and look-back, a column
#                            argmax): "verified" (each plan's first two launches equal to a
#                            plain run, plax_cupy.graph_check) or "WRONG REPLAY caught" with the
#                            first difference -- which bindings work in a graph on this GPU
#   04-tests       30  110   pytest tests/cupy -n 12 (the simulated-GPU tests skip where the
#                            GPU is real; their launchers run them on the simulated one)
#   05-kit         30  120   the conformance kit: --plax-backend=cupy -n 12 (115 s on the H200)
#   06-bench       60  150   python benchmarks/gpu.py (the GPU table beside JAX)
#   07-scans       15   45   python benchmarks/scan_kernel_coverage.py --run --gpu: which of 66
#                            realistic scans run as one kernel on the GPU, each checked against
#                            the NumPy backend (max err column), if time is left
#   08-tune        30   60   python benchmarks/gpu_tune.py --repeat 3 --budget 0.03, if time is
#                            left: the rows table first (softmax/layer norm around the
#                            row-local bounds, ~40 s estimated), then conv (~30 s: cut off
#                            part way), then reductions (each row printed as it is done)
# The caps of 00-06 add up to 520 s, but the steps seldom use theirs; 06-bench gets what is
# left (at least 60 s); 07-scans and 08-tune run only in what remains.
#   summary.txt    per step its exit status and seconds (124: its cap or the total ran out),
#                  and for a pytest step the FAILED/ERROR test ids with their first error line
#                  (and 03-graphs' lines, 07-scans' count, 08-tune's rows table)
# pytest steps are stopped with SIGINT when their time is up, so pytest still prints the
# failures it has seen; with -v each outcome is also logged as it happens, so the ids of the
# failures survive even a hard kill. A step that fails does not stop the others; the script's
# exit status is the first failure's. JAX (used by the tests for comparisons only) must not take
# the card: it is kept from preallocating, and the kit's 12 workers each cap plax's CuPy pool at
# 6% of the card (PLAX_GPU_MEMORY_FRACTION; tests/conftest.py does the same for tests/cupy).
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-$PWD/gpu_check_out}"
TOTAL_S="${TOTAL_S:-420}"
mkdir -p "$OUT"
START=$(date +%s)
STATUS=0
export XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONUNBUFFERED=1
: > "$OUT/summary.txt"

left() { echo $(( TOTAL_S - ($(date +%s) - START) )); }

failures() {  # failures LOG: each FAILED/ERROR test id with its first error line, at most 40
  local log=$1 ids
  # the short summary (-rfE): "FAILED id - Error: first line"; if pytest was cut off before
  # printing it, the outcomes -v logged as they happened ("[gw3] [ 5%] FAILED id")
  ids=$(grep -E '^(FAILED|ERROR) ' "$log" | cut -c1-240)
  [ -n "$ids" ] || ids=$(grep -oE '(FAILED|ERROR) [^ ]+::[^ ]+' "$log" | sort -u)
  [ -n "$ids" ] && echo "$ids" | head -n 40 | sed 's/^/    /'
  local n
  n=$(echo "$ids" | grep -c . )
  [ "$n" -gt 40 ] && echo "    ... and $(( n - 40 )) more (see $(basename "$log"))"
  grep -E '^=+ .*(passed|failed|error).* =+$' "$log" | tail -n 1 | sed 's/^/    /'
  return 0
}

step() {  # step NAME MIN_SECONDS CAP_SECONDS COMMAND...: runs COMMAND within its time, logs it
  local name=$1 need=$2 cap=$3; shift 3
  local budget t0 rc signal=TERM
  budget=$(left)
  if [ "$budget" -lt "$need" ]; then
    echo "$name: skipped (${budget}s left, needs ${need}s)" | tee -a "$OUT/summary.txt"
    [ "$STATUS" -eq 0 ] && STATUS=124
    return
  fi
  [ "$budget" -gt "$cap" ] && budget=$cap
  case " $* " in *" pytest "*) signal=INT ;; esac   # (pytest reports what it saw on SIGINT)
  t0=$(date +%s)
  timeout -s "$signal" --kill-after=15 "$budget" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  echo "$name: rc=$rc $(( $(date +%s) - t0 ))s (cap ${budget}s)" | tee -a "$OUT/summary.txt"
  case " $* " in *" pytest "*) failures "$OUT/$name.log" | tee -a "$OUT/summary.txt" ;; esac
  if [ "$rc" -ne 0 ] && [ "$STATUS" -eq 0 ]; then STATUS=$rc; fi
  tail -n 5 "$OUT/$name.log"
}

# 03-graphs: the bench's MLP step and conv, each compiled once and called four times (results
# dropped, as the bench does); prints launches per call and the program's "# CUDA graph:" line
read -r -d '' GRAPHS <<'PY'
import os, sys
import numpy as np
import plax, plax_cupy
from plax import lax
sys.path.insert(0, "benchmarks")
import compare, gpu as gpu_bench  # (the bench's MLP step: compare.mlp_update)
tiny = os.environ.get("GRAPH_SIZES") == "tiny"
gpu = plax.devices("gpu")[0]
r = np.random.default_rng(0)
sizes, batch = ((784, 64, 64, 10), 16) if tiny else ((784, 2048, 2048, 10), 4096)
put = lambda a: plax.device_put(np.asarray(a, np.float32), gpu)
params = [(put(r.standard_normal((i, o)) / np.sqrt(i)), put(np.zeros(o)))
          for i, o in zip(sizes[:-1], sizes[1:])]
images, labels = put(r.standard_normal((batch, 784))), put(np.eye(10)[r.integers(0, 10, batch)])
step = compare.mlp_update(gpu_bench.plax_lib(gpu))
n, hw, c = (2, 12, 16) if tiny else (32, 56, 64)
xc, wc = put(r.standard_normal((n, hw, hw, c))), put(r.standard_normal((3, 3, c, c)) / np.sqrt(9 * c))
conv = lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                             dimension_numbers=("NHWC", "HWIO", "NHWC"))
xp = put(r.standard_normal((512, 64)) * np.linspace(3.0, 0.1, 64))  # (captured gesvd, syevd)
def pca(x):
    u, s, vh = plax.numpy.linalg.svd(x - x.mean(axis=0), full_matrices=False)
    return s, (u[:, :8] * s[:8]) @ vh[:8]
def covariance_eigh(x):
    c = x - x.mean(axis=0)
    w, v = plax.numpy.linalg.eigh(c.T @ c / x.shape[0])
    return w, (v * w) @ v.T
from plax_cupy.backend import CupyBackend
made, compile_ = [], CupyBackend.compile
def recording(self, jaxpr, device):  # (the programs compiled, the jit's own first)
    made.append(compile_(self, jaxpr, device))
    return made[-1]
CupyBackend.compile = recording
status = 0
for name, fn, args in [("MLP step", step, (params, images, labels)), ("conv 3x3", conv, (xc, wc)),
                       ("PCA svd", pca, (xp,)), ("covariance eigh", covariance_eigh, (xp,))]:
    try:
        jitted, first = plax.jit(fn, backend="cupy"), len(made)
        launches = []
        for _ in range(4):
            with plax_cupy.count() as counts:
                out = jitted(*args)
                for leaf in plax.tree_util.tree_leaves(out):
                    leaf.block_until_ready()
            del out, leaf
            launches.append(counts.launches)
        line = [l for l in made[first].as_text().splitlines() if l.startswith("# CUDA graph")]
        print(f"{name}: launches per call {launches}; {gpu_bench.graph_state(made[first])}; "
              f"{line[0] if line else 'no # CUDA graph line'}")
    except Exception as err:  # noqa: BLE001 - the other program still reports
        print(f"{name}: failed: {type(err).__name__}: {str(err)[:300]}")
        status = 1
# one small program per capture path, each more than one launch (a single kernel is not
# captured), called three times on the same inputs: capture + check on the second call
import warnings
import plax.numpy as jnp
from plax.lax import linalg
spd = r.standard_normal((48, 48)); spd = put(spd @ spd.T + 48 * np.eye(48))
mat, rhs = put(r.standard_normal((48, 48))), put(r.standard_normal((48, 4)))
paths = [
    ("gemm (cuBLAS)", lambda a, b: jnp.tanh(a @ b) @ b, (mat, mat)),
    ("potrf+trsm (cuSOLVER, cuBLAS)", lambda s, b: linalg.triangular_solve(
        linalg.cholesky(s), b, left_side=True, lower=True) * 2, (spd, rhs)),
    ("getrf (cuSOLVER)", lambda a: [o * 2 if o.dtype == a.dtype else o
                                    for o in linalg.lu(a)], (mat,)),
    ("geqrf+orgqr (cuSOLVER)", lambda a: [o * 2 for o in linalg.qr(a)], (mat,)),
    ("fft (cuFFT plans)", lambda x: jnp.fft.ifft(jnp.fft.fft(x) * 2).real, (mat,)),
    ("scan kernel", lambda x: lax.scan(lambda c, v: (jnp.tanh(c * 0.5 + v), c), jnp.zeros(48),
                                       x)[1] * 2, (mat,)),
    ("look-back cumsum", lambda x: jnp.cumsum(x) * 2, (put(r.standard_normal(1 << 20)),)),
    ("columns single-pass cumsum", lambda x: jnp.cumsum(x, axis=0) * 2,
     (put(r.standard_normal((1 << 17, 4))),)),
    ("columns look-back cumsum", lambda x: jnp.cumsum(x, axis=0) * 2,
     (put(r.standard_normal((1 << 15, 64))),)),
    ("column argmax", lambda x: jnp.argmax(x, axis=0) * 2, (put(r.standard_normal((4096, 512))),)),
]
for name, fn, args in paths:
    try:
        jitted, first = plax.jit(fn, backend="cupy"), len(made)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(3):
                out = jitted(*args)
                for leaf in plax.tree_util.tree_leaves(out):
                    leaf.block_until_ready()
                del out, leaf
        wrong = [str(w.message)[:300] for w in caught if "CUDA graph replay" in str(w.message)]
        print(f"binding {name}: {gpu_bench.graph_state(made[first])}"
              + (f"; warned: {wrong[0]}" if wrong else ""))
    except Exception as err:  # noqa: BLE001 - the other programs still report
        print(f"binding {name}: failed: {type(err).__name__}: {str(err)[:300]}")
        status = 1
sys.exit(status)
PY

step 00-env 5 10 bash -c "nvidia-smi; python3 -m pip list 2>/dev/null | grep -iE \
  '^(cupy|numpy|numba|jax|jaxlib|ml.dtypes|torch|pytest|hypothesis|plax)'; true"
step 01-install 10 40 python3 -m pip install --no-index --no-deps --no-build-isolation \
  -e . -e plugins/plax_checkify -e plugins/plax_jet -e plugins/plax_cost_analysis -e plugins/plax_pmap
step 02-info 5 15 python3 -m plax info
step 03-graphs 10 75 python3 -c "$GRAPHS"
grep -E '^(MLP step|conv 3x3|PCA svd|covariance eigh|binding [^:]*):' "$OUT/03-graphs.log" 2>/dev/null | cut -c1-400 \
  | sed 's/^/    /' >> "$OUT/summary.txt"
step 04-tests 30 110 python3 -m pytest -v -rfE --tb=short -n 12 -p no:cacheprovider tests/cupy
step 05-kit 30 120 env PLAX_GPU_MEMORY_FRACTION=0.06 python3 -m pytest -v -rfE --tb=short -n 12 \
  -p no:cacheprovider --pyargs plax.testing.conformance --plax-backend=cupy
step 06-bench 60 150 python3 benchmarks/gpu.py
if [ "$(left)" -ge 15 ]; then  # (optional: skipping it is no failure)
  step 07-scans 15 45 python3 benchmarks/scan_kernel_coverage.py --run --gpu
  grep -E 'scans are one kernel' "$OUT/07-scans.log" 2>/dev/null | sed 's/^/    /' >> "$OUT/summary.txt"
else
  echo "07-scans: skipped ($(left)s left)" | tee -a "$OUT/summary.txt"
fi
if [ "$(left)" -ge 30 ]; then  # (optional: skipping it is no failure)
  step 08-tune 30 60 python3 benchmarks/gpu_tune.py --repeat 3 --budget 0.03
  # (the rows table's verdicts: which plan the row-local bounds pick, and whether it won)
  grep -E '^(softmax|layer_norm) ' "$OUT/08-tune.log" 2>/dev/null | sed -E 's/ +/ /g' \
    | cut -c1-200 | sed 's/^/    /' >> "$OUT/summary.txt"
else
  echo "08-tune: skipped ($(left)s left)" | tee -a "$OUT/summary.txt"
fi
echo "total: $(( $(date +%s) - START ))s of ${TOTAL_S}s; status $STATUS" | tee -a "$OUT/summary.txt"
exit "$STATUS"
