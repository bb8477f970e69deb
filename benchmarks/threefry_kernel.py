"""Process CPU time of the Numba backend's native ``threefry2x32`` kernels
(``plax_numba.threefry_kernels``), per mix of scalar and array operands.

Times the serial and the parallel kernel alone (operands prepared, outputs allocated once),
best of several rounds, in CPU nanoseconds per hashed pair (all threads counted: on a busy
machine the parallel kernel's threads also spend CPU waiting for each other), and the CPU
seconds their compilation took in this process (0 where numba's disk cache had them).

Usage::

    python benchmarks/threefry_kernel.py [--size 10000000] [--rounds 7]

Run it at two commits (``PYTHONPATH`` pointing at each tree) to compare them.
"""
from __future__ import annotations

import argparse
import time

import numpy as np

MIXES = {"scalar key": (0, 0, 1, 1), "all arrays": (1, 1, 1, 1), "scalar x1": (0, 0, 0, 1),
         "array key, scalar x": (1, 1, 0, 0)}


def _best(call, reps: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(reps):
            call()
        best = min(best, (time.process_time() - start) / reps)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000_000, help="counters per call")
    parser.add_argument("--rounds", type=int, default=7, help="rounds (the best is shown)")
    args = parser.parse_args()
    from plax_numba import threefry, threefry_kernels as kernels
    u32 = np.uint32
    n = args.size
    rng = np.random.default_rng(0)
    words = [rng.integers(0, 2**32, n, dtype=np.uint64).astype(u32) for _ in range(4)]
    print(f"threefry2x32 kernels, {n} counters, CPU ns per pair (best of {args.rounds})")
    compiled = 0.0
    for label, kinds in MIXES.items():
        ops = [threefry._operand(w if k else u32(w[0]), (n,), n) for w, k in zip(words, kinds)]
        out0, out1 = np.empty(n, u32), np.empty(n, u32)
        row = []
        for kernel in (kernels.hash_serial, kernels.hash_parallel):
            start = time.process_time()
            kernel(*ops, out0, out1)  # (compiles or loads on first use)
            compiled += time.process_time() - start
            row.append(_best(lambda: kernel(*ops, out0, out1), 1, args.rounds) / n * 1e9)
        print(f"{label:20s} serial {row[0]:6.3f}   parallel {row[1]:6.3f}")
    print(f"first calls (compilation or loading): {compiled:.2f} CPU s")


if __name__ == "__main__":
    main()
