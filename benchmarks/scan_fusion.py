"""Arg-reductions and cumulative ops fused with their producers on the Numba backend, before
and after, beside plax on NumPy and JAX, one run.

    python benchmarks/scan_fusion.py [--n 1000] [--repeat 5] [--clock process]

Rows: ``argmax(abs(x - y), axis=1)``, ``argmin(x * x, axis=0)``, ``cumsum(exp(x), axis=1)``,
``cummax(x + 1, axis=0)`` and ``cumsum(x, axis=0)`` alone on ``n x n`` float32 and bfloat16
operands, each jitted.
Columns: the Numba backend with the scan fused into its producers' kernel
(:attr:`plax.lowering.Emitter.fuses_arg_reductions`, ``fuses_cumulative``), the Numba
backend without (the producers' kernel, then the scan on its own: the reference kernel for
float32, :mod:`plax_numba.codegen_scan`'s for bfloat16), the NumPy backend, JAX (skipped with
a note when it is not installed) and the ratios fused / JAX and fused / unfused. Each cell:
the median over ``--repeat`` runs of the time per call (each run makes enough calls to last
about 20 ms, after a warm-up call); kernels are compiled before timing
(``PLAX_NUMBA_SYNC=1``). ``--clock process`` (the default) times the process's CPU time,
every thread of it: on a host shared with other jobs the wall clock measures the scheduler.
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # compile before timing (read at compile time)

import numpy as np  # noqa: E402
from f16_reductions import _per_call  # noqa: E402  (same timing; a script's folder is on sys.path)


def _workloads(jnp, lax):
    return [
        ("argmax(abs(x-y), axis=1)", lambda x, y: jnp.argmax(jnp.abs(x - y), axis=1)),
        ("argmin(x*x, axis=0)", lambda x, y: jnp.argmin(x * x, axis=0)),
        ("cumsum(exp(x), axis=1)", lambda x, y: jnp.cumsum(jnp.exp(x), axis=1)),
        ("cummax(x+1, axis=0)", lambda x, y: lax.cummax(x + 1, axis=0)),
        # no producer: a lone equation either way (float32: the one-equation fused kernel,
        # bfloat16: codegen_scan's); before, float32 ran the NumPy backend's kernel
        ("cumsum(x, axis=0) alone", lambda x, y: jnp.cumsum(x, axis=0)),
    ]


def _compiled_unfused(f, args):
    """``f`` jitted on the Numba backend and compiled (first call) with the scans kept out
    of its clusters, as before the opt-in."""
    import plax
    from plax_numba.emitter import NumbaEmitter
    fn = plax.jit(lambda *a: f(*a), backend="numba")
    saved = NumbaEmitter.fuses_arg_reductions, NumbaEmitter.fuses_cumulative
    NumbaEmitter.fuses_arg_reductions = NumbaEmitter.fuses_cumulative = False
    try:
        fn(*args).block_until_ready()
    finally:
        NumbaEmitter.fuses_arg_reductions, NumbaEmitter.fuses_cumulative = saved
    return fn


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clock", choices=("wall", "process"), default="process")
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
    rng = np.random.default_rng(0)
    x32 = rng.standard_normal((args.n, args.n)).astype(np.float32)
    y32 = rng.standard_normal((args.n, args.n)).astype(np.float32)
    rows = []
    plax_rows = _workloads(pnp, lax)
    jax_rows = _workloads(jjnp, jlax) if jax is not None else [None] * len(plax_rows)
    for dt_name, dtype in (("f32", np.dtype(np.float32)), ("bf16", dtypes.bfloat16)):
        x, y = x32.astype(dtype), y32.astype(dtype)
        xd, yd = plax.device_put(x), plax.device_put(y)
        for (label, f), jrow in zip(plax_rows, jax_rows):
            fused = plax.jit(f, backend="numba")
            unfused = _compiled_unfused(f, (xd, yd))
            reference = plax.jit(f, backend="numpy")
            times = [_per_call(lambda: g(xd, yd).block_until_ready(), args.repeat, clock)
                     for g in (fused, unfused, reference)]
            if jax is not None:
                jf = jax.jit(jrow[1])
                xj, yj = jax.device_put(x), jax.device_put(y)
                times.append(_per_call(lambda: jf(xj, yj).block_until_ready(), args.repeat,
                                       clock))
            else:
                times.append(None)
            vs_jax = f"{times[0] / times[3]:.2f}" if times[3] else "-"
            rows.append([f"{label} {dt_name}"] + [f"{t * 1e3:.3f}" if t else "-" for t in times]
                        + [vs_jax, f"{times[0] / times[1]:.2f}"])
    print(f"n = {args.n} (n x n operands), ms per call ({args.clock} clock), median of "
          f"{args.repeat}")
    print("| workload | numba fused | numba unfused | plax-numpy | jax | fused/jax "
          "| fused/unfused |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    if jax is None:
        print("JAX is not installed: its column is empty (pip install -e '.[bench]').")


if __name__ == "__main__":
    main()
