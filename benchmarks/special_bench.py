"""Special functions with scalar forms of their own (:mod:`plax_numba.special`) on the Numba
backend beside JAX: time on float32 and error in ulps against SciPy in float64.

    python benchmarks/special_bench.py [--size N] [--repeat R]

For each function ``f``: the jitted program ``f(x * 0.5) * 2 + 1`` on ``N`` float32 elements
(one fused loop on plax-numba, XLA's on JAX), the ratio plax-numba / JAX, and each library's
largest error of ``f`` alone (jitted) in float32 ulps over a dense sweep of ``[-lo, hi]`` plus
powers of two and the edge cases, against SciPy's float64 function; plax's float64 error in
float64 ulps beside it. Times are medians of ``R`` runs (the helpers of
``benchmarks/transcendental.py``). Noisy on a shared host: compare the columns of one run.
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # compile before timing

import numpy as np  # noqa: E402
import scipy.special as sp  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from transcendental import _max_ulps, _median_time  # noqa: E402

# lax name: (float64 reference, timing range, sweep range)
FUNCTIONS = {
    "bessel_i0e": (sp.i0e, (-30, 30), (-200, 200)),
    "bessel_i1e": (sp.i1e, (-30, 30), (-200, 200)),
}


def sweep(lo, hi, dtype):
    """A dense grid of ``[lo, hi]``, +-powers of two and the edge cases, as ``dtype``."""
    p = 2.0 ** np.arange(-120 if dtype == np.float32 else -1000, 100)
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan]
    with np.errstate(over="ignore"):
        return np.concatenate([np.linspace(lo, hi, 2_000_001), p, -p, edges]).astype(dtype)


def max_ulps64(got, ref):
    ok = np.isfinite(ref) & np.isfinite(got)
    spacing = np.spacing(np.maximum(np.abs(ref[ok]), np.finfo(np.float64).tiny))
    return float((np.abs(got[ok] - ref[ok]) / spacing).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()

    import plax
    from plax import lax as plax_lax
    try:
        import jax
        from jax import lax as jax_lax
    except ImportError:
        jax = None
        print("(JAX is not installed: its columns are empty; pip install jax)")

    rng = np.random.default_rng(0)
    rows = {}
    for name, (ref, (lo, hi), (slo, shi)) in FUNCTIONS.items():
        x = rng.uniform(lo, hi, opts.size).astype(np.float32)
        pf = getattr(plax_lax, name)
        fn = plax.jit(lambda v: pf(v * np.float32(0.5)) * np.float32(2) + np.float32(1),
                      backend="numba")
        t_plax = _median_time(fn, (plax.numpy.asarray(x),), opts.repeat)
        xs = sweep(slo, shi, np.float32)
        want = ref(xs.astype(np.float64))
        fused = plax.jit(lambda v: pf(v) * np.float32(1), backend="numba")
        err_plax = _max_ulps(np.asarray(fused(xs)), want)
        t_jax = err_jax = None
        if jax is not None:
            jf = getattr(jax_lax, name)
            t_jax = _median_time(jax.jit(lambda v: jf(v * 0.5) * 2 + 1),
                                 (jax.numpy.asarray(x),), opts.repeat)
            err_jax = _max_ulps(np.asarray(jax.jit(jf)(xs)), want)
        with plax.config.override("jax_enable_x64", True):
            xs64 = sweep(slo, shi, np.float64)
            got64 = np.asarray(plax.jit(lambda v: pf(v) * 1.0, backend="numba")(xs64))
        err64 = max_ulps64(got64, ref(xs64))
        rows[name] = (t_plax, t_jax, err_plax, err_jax, err64)

    # float64 digamma (plax_numba.special.digamma_f64), on a tenth of the elements
    n64 = max(opts.size // 10, 1)
    x64 = rng.uniform(0.1, 20, n64)
    xs64 = np.concatenate([np.linspace(1e-3, 1e4, 1_000_001), 2.0 ** np.arange(-1000, 1000)])
    want64 = sp.psi(xs64)
    with plax.config.override("jax_enable_x64", True):
        fn = plax.jit(lambda v: plax_lax.digamma(v * 0.5) * 2.0 + 1.0, backend="numba")
        t64 = _median_time(fn, (plax.numpy.asarray(x64),), opts.repeat)
        got = np.asarray(plax.jit(lambda v: plax_lax.digamma(v) * 1.0, backend="numba")(xs64))
    away = (xs64 >= 2) | (xs64 < 1)   # relative error is meaningless next to the zero 1.46...
    err_psi = max_ulps64(got[away], want64[away])
    tj64 = ej64 = None
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        try:
            tj64 = _median_time(jax.jit(lambda v: jax_lax.digamma(v * 0.5) * 2.0 + 1.0),
                                (jax.numpy.asarray(x64),), opts.repeat)
            ej64 = max_ulps64(np.asarray(jax.jit(jax_lax.digamma)(xs64))[away], want64[away])
        finally:
            jax.config.update("jax_enable_x64", False)

    print(f"{opts.size:,} float32 elements; f(x * 0.5) * 2 + 1 jitted; median of {opts.repeat}")
    print("| function | plax-numba | JAX | numba / JAX | plax f32 error (ulp) "
          "| JAX f32 error (ulp) | plax f64 error (f64 ulp) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    ms = lambda t: "-" if t is None else f"{t * 1e3:.1f} ms"  # noqa: E731
    for name, (tp, tj, ep, ej, e64) in rows.items():
        ratio = "-" if tj is None else f"{tp / tj:.2f}"
        print(f"| {name} | {ms(tp)} | {ms(tj)} | {ratio} | {ep:.2f} "
              f"| {'-' if ej is None else f'{ej:.2f}'} | {e64:.1f} |")
    print(f"\nfloat64 digamma, {n64:,} elements of [0.1, 20] (error in float64 ulps over "
          "[1e-3, 1e4] and powers of two, away from the zero at 1.46)")
    print("| function | plax-numba | JAX | numba / JAX | plax f64 error (ulp) "
          "| JAX f64 error (ulp) |")
    print("|---|---:|---:|---:|---:|---:|")
    ratio = "-" if tj64 is None else f"{t64 / tj64:.2f}"
    print(f"| digamma (f64) | {ms(t64)} | {ms(tj64)} | {ratio} | {err_psi:.1f} "
          f"| {'-' if ej64 is None else f'{ej64:.1f}'} |")


if __name__ == "__main__":
    main()
