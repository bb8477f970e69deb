"""Functions plax composes from other primitives (``lax.linalg``'s tridiagonal_solve,
householder_product, cholesky_update, ...; the ufunc methods ``subtract.accumulate``,
``add.at``, ``add.reduceat``; ``.at[]`` updates with integer arrays), jitted, beside JAX in
one run.

    python benchmarks/compositions.py [--repeat 5] [--clock process]

Each cell: the median over ``--repeat`` runs of the time per call (each run makes enough calls
to last about 20 ms, after a warm-up call). The Numba backend's kernels are compiled before
timing (``PLAX_NUMBA_SYNC=1``: without it the first calls run the reference path while a
background worker compiles, see docs/performance.md). ``--clock process`` (the default) is the
process's CPU time, every thread of it: on a shared host the wall clock measures the
scheduler.
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # compile before timing (read at compile time)

import numpy as np  # noqa: E402
from f16_reductions import _per_call  # noqa: E402  (same timing; a script's folder is on sys.path)


def _workloads(m, rng):
    """``(name, f(lib) -> function of the operands, operands)``."""
    n = 1000
    dl, du = rng.normal(size=n).astype(np.float32), rng.normal(size=n).astype(np.float32)
    dl[0] = du[-1] = 0
    d = (rng.normal(size=n) + 6).astype(np.float32)
    b = rng.normal(size=(n, 4)).astype(np.float32)
    a = rng.normal(size=(256, 256)).astype(np.float32)
    spd = (a @ a.T + 256 * np.eye(256)).astype(np.float32)
    chol = np.linalg.cholesky(spd).T.astype(np.float32)
    v = rng.normal(size=256).astype(np.float32)
    taus = rng.uniform(1, 2, size=64).astype(np.float32)
    refl = np.tril(rng.normal(size=(256, 64)), -1).astype(np.float32)
    x = rng.normal(size=(512, 512)).astype(np.float32)
    idx = rng.integers(0, 512, size=4096).astype(np.int32)
    cols = rng.integers(-512, 512, size=4096).astype(np.int32)  # (negative ones among them)
    starts = np.sort(rng.choice(512, size=64, replace=False)).astype(np.int32)
    return [
        ("tridiagonal_solve 1000x4", lambda lib: lib.lax.linalg.tridiagonal_solve,
         (dl, d, du, b)),
        ("householder_product 256x64", lambda lib: lib.lax.linalg.householder_product,
         (refl, taus)),
        ("cholesky_update 256", lambda lib: lib.lax.linalg.cholesky_update, (chol, v)),
        ("subtract.accumulate 512x512 axis 1",
         lambda lib: lambda t: lib.numpy.subtract.accumulate(t, axis=1), (x,)),
        ("add.at 512x512, 4096 rows",
         lambda lib: lambda t, i: lib.numpy.add.at(t, i, 1.0, inplace=False), (x, idx)),
        ("x.at[rows, cols].add 512x512, 4096",
         lambda lib: lambda t, i, j: t.at[i, j].add(1.0), (x, idx, cols)),
        ("x.at[:, cols].set 512x512, 4096",
         lambda lib: lambda t, j: t.at[:, j].set(0.0), (x, cols)),
        ("add.reduceat 512x512, 64 slices",
         lambda lib: lambda t, i: lib.numpy.add.reduceat(t, i, axis=0), (x, starts)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clock", choices=("process", "wall"), default="process")
    args = parser.parse_args()
    clock = time.process_time if args.clock == "process" else time.perf_counter
    import plax
    try:
        import jax
        jax.config.update("jax_platforms", "cpu")
    except ImportError:
        jax = None
    print(f"plax {plax.__version__} on backend {plax.default_backend()!r}; "
          f"JAX {jax.__version__ if jax else '(not installed)'}; clock: {args.clock}")
    print(f"{'workload':36s} {'plax ms':>9s} {'JAX ms':>9s} {'plax/JAX':>9s}")
    for name, make, operands in _workloads(None, np.random.default_rng(0)):
        fp = plax.jit(make(plax))
        tp = _per_call(lambda: fp(*operands).block_until_ready(), args.repeat, clock)
        if jax is not None:
            fj = jax.jit(make(jax))
            tj = _per_call(lambda: fj(*operands).block_until_ready(), args.repeat, clock)
            print(f"{name:36s} {tp * 1e3:9.3f} {tj * 1e3:9.3f} {tp / tj:9.2f}")
        else:
            print(f"{name:36s} {tp * 1e3:9.3f} {'-':>9s} {'-':>9s}")


if __name__ == "__main__":
    main()
