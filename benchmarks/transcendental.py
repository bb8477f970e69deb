"""float32 transcendental functions on the Numba backend beside JAX and NumPy: time and error.

    python benchmarks/transcendental.py [--size N] [--repeat R]

For each function ``f``: the jitted program ``f(x * 0.5) * 2 + 1`` on ``N`` float32 elements
(one fused loop on plax-numba, :mod:`plax_numba.libm_free`; XLA's fused loop on JAX), NumPy's
eager ``f`` alone (its own SIMD loop where it has one, SciPy's for the special functions), the
ratio plax-numba / JAX, and each library's largest error in float32 ulps of ``f`` alone over a
dense sweep of the function's domain (plax's and JAX's jitted ``f``), against NumPy/SciPy in
float64. Times are medians of ``R`` runs, each as many calls as fill ~50 ms (the helpers of
``benchmarks/ulp_error.py``). Noisy on a shared 2-core host: compare the columns of one run.
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # compile before timing

import numpy as np  # noqa: E402
import scipy.special as sp  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from ulp_error import fused_errors, median_time  # noqa: E402


def _erf_inv64(y):
    a = np.abs(y)
    return np.copysign(np.where(a < 0.5, sp.erfinv(a), sp.erfcinv(1 - a)), y)


# name: (float64 reference, NumPy/SciPy float32 eager, timing inputs, sweep for the error)
FUNCTIONS = {
    "exp": (np.exp, np.exp, (-5, 5), (-87, 88)),
    "log": (np.log, np.log, (0.01, 10), (1e-30, 1e4)),
    "log1p": (np.log1p, np.log1p, (0, 10), (-0.99, 1e4)),
    "expm1": (np.expm1, np.expm1, (-5, 5), (-20, 88)),
    "tanh": (np.tanh, np.tanh, (-5, 5), (-10, 10)),
    "logistic": (sp.expit, sp.expit, (-10, 10), (-80, 20)),
    "sin": (np.sin, np.sin, (-10, 10), (-1e4, 1e4)),
    "cos": (np.cos, np.cos, (-10, 10), (-1e4, 1e4)),
    "erf": (sp.erf, sp.erf, (-4, 4), (-5, 5)),
    "erfc": (sp.erfc, sp.erfc, (-2, 8), (-5, 10)),
    "erf_inv": (_erf_inv64, sp.erfinv, (-0.99, 0.99), (-1, 1)),
    "lgamma": (sp.gammaln, sp.gammaln, (0.1, 20), (0.01, 100)),
    "digamma": (sp.psi, sp.psi, (0.1, 20), (0.01, 100)),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=7)
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
    inputs = {name: rng.uniform(lo, hi, opts.size).astype(np.float32)
              for name, (_, _, (lo, hi), _) in FUNCTIONS.items()}
    times: dict[str, dict[str, float]] = {"plax": {}, "jax": {}, "numpy": {}}
    # one library at a time: XLA's and numba's worker threads spin for a while after a call,
    # and interleaving them would time each library against the other's spinning threads
    for name in FUNCTIONS:
        pf = getattr(plax_lax, name)
        fn = plax.jit(lambda v: pf(v * np.float32(0.5)) * np.float32(2) + np.float32(1),
                      backend="numba")
        times["plax"][name] = median_time(fn, (plax.numpy.asarray(inputs[name]),), opts.repeat)
    for name, (_, eager, _, _) in FUNCTIONS.items():
        times["numpy"][name] = median_time(eager, (inputs[name],), opts.repeat)
    if jax is not None:
        for name in FUNCTIONS:
            jf = getattr(jax_lax, name)
            fn = jax.jit(lambda v: jf(v * 0.5) * 2 + 1)
            times["jax"][name] = median_time(fn, (jax.numpy.asarray(inputs[name]),), opts.repeat)

    print(f"{opts.size:,} float32 elements; f(x * 0.5) * 2 + 1 jitted; median of {opts.repeat}")
    print("| function | plax-numba | JAX | NumPy/SciPy eager | numba / JAX "
          "| plax error (ulp) | JAX error (ulp) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, (ref, _, _, (lo, hi)) in FUNCTIONS.items():
        xs = np.linspace(lo, hi, 2_000_001, dtype=np.float32)
        with np.errstate(all="ignore"):
            want = ref(xs.astype(np.float64))
        jf = None if jax is None else getattr(jax_lax, name)
        err_plax, err_jax = fused_errors(getattr(plax_lax, name), jf, (xs,), want)
        t_plax, t_jax, t_np = (times[k].get(name) for k in ("plax", "jax", "numpy"))
        us = lambda t: "-" if t is None else f"{t * 1e6:,.0f} µs"  # noqa: E731
        ratio = "-" if t_jax is None else f"{t_plax / t_jax:.2f}"
        ej = "-" if err_jax is None else f"{err_jax:.2f}"
        print(f"| {name} | {us(t_plax)} | {us(t_jax)} | {us(t_np)} | {ratio} "
              f"| {err_plax:.2f} | {ej} |")


if __name__ == "__main__":
    main()
