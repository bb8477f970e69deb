"""The scan rows of ``benchmarks/compare.py`` (issue 26), plax on Numba and JAX interleaved.

    python benchmarks/scan_rows.py [--quick] [--batches B] [--match TEXT]

On a shared host other jobs come and go within a run, and medians of consecutive runs then
measure the load more than the program. Here each side's calls are timed in short batches
(about 2 ms each), plax's and JAX's batches alternating, and each cell is the fastest batch's
time per call: both libraries see the same moments of the host, and the ratio plax / JAX is
comparable from run to run. The workloads are compare.py's own (the same inputs and
functions), compiled before timing (``PLAX_NUMBA_SYNC=1``). Without JAX the plax column is
printed alone, with a note.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # compile before timing (read at compile time)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare  # noqa: E402  (compare.py's workloads, libraries and formatting)

#: seconds one batch of calls lasts
BATCH_SECONDS = 0.002


def fastest_per_call(calls: dict, batches: int) -> dict:
    """``{name: seconds}``: for each zero-argument function of ``calls``, the fastest time
    per call over ``batches`` batches, the functions' batches alternating."""
    sizes = {}
    for name, call in calls.items():
        call()  # warm-up
        t0 = time.perf_counter()
        call()
        sizes[name] = max(1, int(BATCH_SECONDS / max(time.perf_counter() - t0, 1e-7)))
    best = {name: float("inf") for name in calls}
    for _ in range(batches):
        for name, call in calls.items():
            n = sizes[name]
            t0 = time.perf_counter()
            for _ in range(n):
                call()
            best[name] = min(best[name], (time.perf_counter() - t0) / n)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="compare.py's small sizes")
    parser.add_argument("--batches", type=int, default=150,
                        help="timed batches per side and row (default 150)")
    parser.add_argument("--match", default="scan", help="rows whose label contains this")
    args = parser.parse_args()
    libs, notes = compare.libraries()
    columns = [c for c in ("plax-numba", "jax") if c in libs]
    print("| workload | " + " | ".join(columns) + (" | numba / JAX |" if "jax" in libs else " |"))
    print("|---|" + "---:|" * (len(columns) + ("jax" in libs)))
    for label, impls in compare.make_workloads(args.quick):
        if args.match not in label or impls.get("first"):
            continue
        calls = {}
        for column in columns:
            lib = libs[column]
            fn, fargs = impls["plax"](lib)
            calls[column] = (lambda lib=lib, fn=fn, fargs=fargs: lib.block(fn(*fargs)))
        best = fastest_per_call(calls, args.batches)
        cells = [compare.fmt(best[c]) for c in columns]
        if "jax" in libs:
            cells.append(f"{best['plax-numba'] / best['jax']:.2f}")
        print(f"| {label} | " + " | ".join(cells) + " |", flush=True)
    for note in notes:
        print(f"note: {note}")


if __name__ == "__main__":
    main()
