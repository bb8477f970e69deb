"""float16/bfloat16 reductions, arg-reductions and cumulative sums: plax on Numba beside plax
on NumPy and JAX, one run.

    python benchmarks/f16_reductions.py [--n 1000] [--repeat 5] [--clock process]

Rows: ``jnp.sum`` (axis None, 0, 1), ``jnp.argmax``/``jnp.argmin``, ``jnp.cumsum`` and
``lax.cummax`` on an ``n x n`` float16 array (bfloat16 for a few), each jitted. Columns: the
Numba backend (kernels compiled before timing, ``PLAX_NUMBA_SYNC=1``), the NumPy backend
(the reference kernels: what the Numba backend ran for the arg-reductions and cumulative ops
before :mod:`plax_numba.codegen_scan`), JAX (skipped with a note when it is not installed)
and the ratio Numba / JAX. Each cell: the median over ``--repeat`` runs of the time per call
(each run makes enough calls to last about 20 ms, after a warm-up call). ``--clock process``
times the process's CPU time instead of the wall clock (every thread of it, JAX's included):
on a host shared with other jobs the wall clock measures the scheduler more than the code.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # compile before timing (read at compile time)

import numpy as np  # noqa: E402


def _per_call(fn, repeat: int, clock=time.perf_counter) -> float:
    fn()
    start, calls = clock(), 0
    while clock() - start < 0.02:
        fn()
        calls += 1
    runs = []
    for _ in range(repeat):
        t0 = clock()
        for _ in range(calls):
            fn()
        runs.append((clock() - t0) / calls)
    return statistics.median(runs)


def _workloads(jnp, lax):
    return [
        ("sum f16 axis=None", np.float16, lambda v: jnp.sum(v)),
        ("sum f16 axis=0", np.float16, lambda v: jnp.sum(v, axis=0)),
        ("sum f16 axis=1", np.float16, lambda v: jnp.sum(v, axis=1)),
        ("argmax f16 axis=0", np.float16, lambda v: jnp.argmax(v, axis=0)),
        ("argmax f16 axis=1", np.float16, lambda v: jnp.argmax(v, axis=1)),
        ("argmin bf16 axis=1", "bfloat16", lambda v: jnp.argmin(v, axis=1)),
        ("cumsum f16 axis=0", np.float16, lambda v: jnp.cumsum(v, axis=0)),
        ("cumsum f16 axis=1", np.float16, lambda v: jnp.cumsum(v, axis=1)),
        ("cumsum bf16 axis=1 reverse", "bfloat16",
         lambda v: lax.cumsum(v, axis=1, reverse=True)),
        ("cummax f16 axis=1", np.float16, lambda v: lax.cummax(v, axis=1)),
    ]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clock", choices=("wall", "process"), default="wall")
    args = parser.parse_args(argv)
    clock = time.process_time if args.clock == "process" else time.perf_counter

    import plax
    from plax import dtypes, lax, numpy as pnp
    try:
        import jax
        import jax.numpy as jjnp
        from jax import lax as jlax
    except ImportError:
        jax = None
    x32 = np.random.default_rng(0).standard_normal((args.n, args.n)).astype(np.float32)
    rows = []
    plax_rows = _workloads(pnp, lax)
    jax_rows = _workloads(jjnp, jlax) if jax is not None else [None] * len(plax_rows)
    for (label, dt, f), jrow in zip(plax_rows, jax_rows):
        dtype = dtypes.bfloat16 if dt == "bfloat16" else np.dtype(dt)
        x = x32.astype(dtype)
        times = []
        for backend in ("numba", "numpy"):
            fn = plax.jit(f, backend=backend)
            xd = plax.device_put(x)
            times.append(_per_call(lambda: fn(xd).block_until_ready(), args.repeat, clock))
        if jax is not None:
            jf = jax.jit(jrow[2])
            xj = jax.device_put(x)
            times.append(_per_call(lambda: jf(xj).block_until_ready(), args.repeat, clock))
        else:
            times.append(None)
        ratio = f"{times[0] / times[2]:.2f}" if times[2] else "-"
        rows.append([label] + [f"{t * 1e3:.3f}" if t else "-" for t in times] + [ratio])
    print(f"n = {args.n} (an n x n operand), ms per call ({args.clock} clock), median of "
          f"{args.repeat}")
    print("| workload | plax-numba | plax-numpy | jax | numba/jax |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if jax is None:
        print("JAX is not installed: its column is empty (pip install -e '.[bench]').")


if __name__ == "__main__":
    main()
