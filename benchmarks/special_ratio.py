"""plax-numba / JAX for special functions, best of 5 calls each, interleaved in one process.

    python benchmarks/special_ratio.py zeta,polygamma,erf_inv_f64,bessel_i0e 10000000

Each name is a ``lax`` function timed as ``f(x * 0.5, rest...) * 2 + 1`` jitted on N float32
elements (benchmarks/special_bench.py's programs and inputs; ``erf_inv``, ``lgamma``,
``digamma``, ``erf``, ``erfc`` on the ranges below), or with ``_f64`` on N/10 float64
elements (JAX with x64). Prints one table row per name: elements, plax-numba, JAX, ratio.
The best of 5 calls (not special_bench's median) keeps the ratio usable on a shared host.
To compare with an earlier commit, run it with that commit's backend first on the path:
``git archive <commit> backends/plax_numba | tar -x -C /tmp/base`` and
``PYTHONPATH=/tmp/base/backends:$PYTHONPATH python benchmarks/special_ratio.py ...``.
Needs JAX and SciPy.
"""
from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # compile before timing

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import special_bench  # noqa: E402

#: float32 functions outside special_bench.py's tables: their inputs' range
RANGES = {"erf_inv": (-0.99, 0.99), "lgamma": (0.1, 20.0), "digamma": (0.1, 20.0),
          "erf": (-4.0, 4.0), "erfc": (-4.0, 4.0)}


def best_seconds(fn, args, calls: int = 5) -> float:
    """The shortest of ``calls`` timed calls of ``fn(*args)`` (after one warm-up call)."""
    def run():
        out = fn(*args)
        getattr(out, "block_until_ready", lambda: None)()
    run()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def inputs(name: str, n: int, rng) -> tuple:
    """The operands of ``name`` (special_bench.py's, or uniform over :data:`RANGES`);
    float64 on ``n // 10`` elements for ``<name>_f64``."""
    if name.endswith("_f64"):
        lo, hi = (-0.999, 0.999) if name == "erf_inv_f64" else (0.1, 20.0)
        return (rng.uniform(lo, hi, n // 10),)
    if name in special_bench.UNARY:
        return (rng.uniform(*special_bench.UNARY[name][1], n).astype(np.float32),)
    if name in special_bench.ITERATIVE:
        return tuple(a.astype(np.float32) for a in special_bench.ITERATIVE[name][0](rng, n))
    return (rng.uniform(*RANGES[name], n).astype(np.float32),)


def ratio_row(name: str, n: int, rng) -> str:
    """One markdown row: name, elements, plax-numba time, JAX time, their ratio."""
    import jax
    import plax
    wide = name.endswith("_f64")
    fn_name = name[:-4] if wide else name
    args = inputs(name, n, rng)
    jax.config.update("jax_enable_x64", wide)
    try:
        with plax.config.override("jax_enable_x64", wide):
            scale = (lambda v: v) if wide else np.float32
            ours = plax.jit(special_bench._program(getattr(plax.lax, fn_name), scale),
                            backend="numba")
            ours_args = tuple(plax.numpy.asarray(a) for a in args)
            theirs = jax.jit(special_bench._program(getattr(jax.lax, fn_name), float))
            their_args = tuple(jax.numpy.asarray(a) for a in args)
            t_plax = best_seconds(ours, ours_args)
            t_jax = best_seconds(theirs, their_args)
            t_plax = min(t_plax, best_seconds(ours, ours_args))   # interleaved
    finally:
        jax.config.update("jax_enable_x64", False)
    return (f"| {name} | {len(args[0]):,} | {t_plax * 1e3:.1f} ms | {t_jax * 1e3:.1f} ms "
            f"| {t_plax / t_jax:.2f} |")


def main() -> None:
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else ["zeta"]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000_000
    rng = np.random.default_rng(0)
    print(f"load {os.getloadavg()[0]:.1f}; best of 5 calls")
    print("| function | elements | plax-numba | JAX | numba / JAX |")
    print("|---|---:|---:|---:|---:|")
    for name in names:
        print(ratio_row(name, n, rng), flush=True)


if __name__ == "__main__":
    main()
