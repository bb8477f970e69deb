"""float16/bfloat16 reductions and native loops: plax on Numba beside JAX, interleaved.

    python benchmarks/low_float_ratio.py

Rows: a fused ``reduce_sum``/``reduce_max`` of an elementwise chain over a (1000, 1000)
float16 array, and a ``scan`` of a float16 RNN-like cell (16 wide, 2000 steps). Each cell is
the fastest of alternating batches of calls (as benchmarks/scan_rows.py times them), compiled
before timing (``PLAX_NUMBA_SYNC=1``). To compare with an earlier commit, put that commit's
backend first on the path: ``git archive <commit> backends/plax_numba | tar -x -C /tmp/base``
and ``PYTHONPATH=/tmp/base/backends:$PYTHONPATH python benchmarks/low_float_ratio.py``.
Without JAX the plax column is printed alone.
"""
from __future__ import annotations

import os
import time

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # compile before timing

import numpy as np  # noqa: E402


def _reductions(lax, v):
    w = v * 2.0 - 0.5
    return lax.reduce_sum(w, (1,)), lax.reduce_max(w, (0,))


def _scan(lax, np_, h, xs):
    def cell(c, x):
        c = np_.tanh(c * 0.75 + x) * 1.5
        return c, c.sum()
    return lax.scan(cell, h, xs)


def _best(fn, args, batches: int = 15) -> float:
    """The fastest time per call over ``batches`` batches of about 5 ms."""
    def call():
        out = fn(*args)
        for leaf in (out if isinstance(out, tuple) else (out,)):
            getattr(leaf, "block_until_ready", lambda: None)()
    call()
    t0 = time.perf_counter()
    call()
    size = max(1, int(0.005 / max(time.perf_counter() - t0, 1e-7)))
    best = float("inf")
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(size):
            call()
        best = min(best, (time.perf_counter() - t0) / size)
    return best


def main() -> None:
    import plax
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1000, 1000)).astype(np.float16)
    h = np.zeros(16, np.float16)
    xs = rng.standard_normal((2000, 16)).astype(np.float16)
    rows = {
        "reduce_sum/max f16 1000x1000": (
            lambda m: (lambda v: _reductions(m.lax, v)), (x,)),
        "scan f16 16 wide x 2000 steps": (
            lambda m: (lambda c, s: _scan(m.lax, m.numpy, c, s)), (h, xs)),
    }
    try:
        import jax
    except ImportError:
        jax = None
    print("| program | plax-numba | JAX | plax / JAX |\n|---|---:|---:|---:|")
    for name, (make, args) in rows.items():
        ours = plax.jit(make(plax), backend="numba")
        t_plax = _best(ours, args)
        if jax is None:
            print(f"| {name} | {t_plax * 1e3:.3f} ms | (no JAX) | |")
            continue
        theirs = jax.jit(make(jax))
        jargs = tuple(jax.numpy.asarray(a) for a in args)
        t_jax = _best(theirs, jargs)
        t_plax = min(t_plax, _best(ours, args))  # interleaved
        print(f"| {name} | {t_plax * 1e3:.3f} ms | {t_jax * 1e3:.3f} ms | "
              f"{t_plax / t_jax:.2f} |")


if __name__ == "__main__":
    main()
