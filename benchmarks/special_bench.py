"""Special functions with scalar forms of their own (``plax_numba.special*``) on the Numba
backend beside JAX: time on float32 and error in ulps against SciPy in float64.

    python benchmarks/special_bench.py [--size N] [--repeat R] [--only NAME ...]

For each function ``f``: the jitted program ``f(first * 0.5, rest...) * 2 + 1`` on ``N``
float32 elements (one fused loop on plax-numba, XLA's on JAX), the ratio plax-numba / JAX,
and each library's largest error of ``f`` alone (jitted) in float32 ulps, against SciPy's
float64 function (the NumPy backend's float64 kernel for the gamma derivatives): the Bessel
functions over a dense sweep of ``[-200, 200]``, powers of two and the edge cases; the
iterative functions over the first 200k timing inputs. plax's float64 error in float64 ulps
beside it. Then float64 ``digamma`` and ``erf_inv`` on a tenth of the elements, and the
samplers (``--only samplers``): ``random.normal`` on ``N`` float32 samples, ``random.gamma``
and ``random.beta`` on ``max(N / 10, 1M)``. Times are medians of
``R`` runs (benchmarks/ulp_error.py). Noisy on a shared host: compare the columns of one
run, and note ``uptime``'s load.
"""
from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # compile before timing

import numpy as np  # noqa: E402
import scipy.special as sp  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from ulp_error import fused_errors, max_ulps, median_time  # noqa: E402

#: one-operand functions: (float64 reference, timing range, sweep range)
UNARY = {
    "bessel_i0e": (sp.i0e, (-30, 30), (-200, 200)),
    "bessel_i1e": (sp.i1e, (-30, 30), (-200, 200)),
}


def _gamma_inputs(rng, n):
    return rng.uniform(0.5, 10, n), rng.uniform(0.01, 15, n)


def _numpy_backend(name):
    """The NumPy backend's float64 kernel of ``lax.<name>`` (no SciPy function of its own)."""
    def ref(*args):
        import plax
        from plax import lax
        with plax.config.override("jax_enable_x64", True):
            return np.asarray(plax.jit(getattr(lax, name), backend="numpy")(*args))
    return ref


#: several operands: (timing inputs, float64 reference)
ITERATIVE = {
    "igamma": (_gamma_inputs, sp.gammainc),
    "igammac": (_gamma_inputs, sp.gammaincc),
    "igamma_grad_a": (_gamma_inputs, _numpy_backend("igamma_grad_a")),
    "random_gamma_grad": (_gamma_inputs, _numpy_backend("random_gamma_grad")),
    "zeta": (lambda rng, n: (rng.uniform(1.5, 10, n), rng.uniform(0.5, 10, n)), sp.zeta),
    "polygamma": (lambda rng, n: (np.floor(rng.uniform(1, 4, n)), rng.uniform(0.5, 10, n)),
                  lambda m, x: sp.polygamma(m.astype(int), x)),
    "betainc": (lambda rng, n: (rng.uniform(0.5, 10, n), rng.uniform(0.5, 10, n),
                                rng.uniform(0, 1, n)), sp.betainc),
}
_ERROR_POINTS = 200_000


def sweep(lo, hi, dtype):
    """A dense grid of ``[lo, hi]``, +-powers of two and the edge cases, as ``dtype``."""
    p = 2.0 ** np.arange(-120 if dtype == np.float32 else -1000, 100)
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan]
    with np.errstate(over="ignore"):
        return np.concatenate([np.linspace(lo, hi, 2_000_001), p, -p, edges]).astype(dtype)


def _program(fn, scale):
    """``fn(first * 0.5, rest...) * 2 + 1`` (constants of the operands' dtype)."""
    half, two, one = (scale(v) for v in (0.5, 2, 1))
    return lambda first, *rest: fn(first * half, *rest) * two + one


def unary_row(name, opts, rng, plax, jax):
    import plax.lax as plax_lax
    ref, (lo, hi), (slo, shi) = UNARY[name]
    x = rng.uniform(lo, hi, opts.size).astype(np.float32)
    pf = getattr(plax_lax, name)
    t_plax = median_time(plax.jit(_program(pf, np.float32), backend="numba"),
                         (plax.numpy.asarray(x),), opts.repeat)
    xs = sweep(slo, shi, np.float32)
    jf = None if jax is None else getattr(jax.lax, name)
    err_plax, err_jax = fused_errors(pf, jf, (xs,), ref(xs.astype(np.float64)))
    t_jax = None if jax is None else median_time(
        jax.jit(_program(jf, float)), (jax.numpy.asarray(x),), opts.repeat)
    with plax.config.override("jax_enable_x64", True):
        xs64 = sweep(slo, shi, np.float64)
        err64, _ = fused_errors(pf, None, (xs64,), ref(xs64), np.float64)
    return t_plax, t_jax, err_plax, err_jax, err64


def iterative_row(name, opts, rng, plax, jax):
    import plax.lax as plax_lax
    inputs, ref = ITERATIVE[name]
    args64 = inputs(rng, opts.size)
    args = tuple(a.astype(np.float32) for a in args64)
    pf = getattr(plax_lax, name)
    t_plax = median_time(plax.jit(_program(pf, np.float32), backend="numba"),
                         tuple(plax.numpy.asarray(a) for a in args), opts.repeat)
    jf = None if jax is None else getattr(jax.lax, name)
    t_jax = None if jax is None else median_time(
        jax.jit(_program(jf, float)), tuple(jax.numpy.asarray(a) for a in args), opts.repeat)
    few = tuple(a[:_ERROR_POINTS] for a in args)
    want = ref(*(a.astype(np.float64) for a in few))
    err_plax, err_jax = fused_errors(pf, jf, few, want)
    with plax.config.override("jax_enable_x64", True):
        few64 = tuple(a[:_ERROR_POINTS] for a in args64)
        err64, _ = fused_errors(pf, None, few64, ref(*few64), np.float64)
    return t_plax, t_jax, err_plax, err_jax, err64


def float64_rows(opts, rng, plax, jax):
    """float64 ``digamma`` and ``erf_inv`` on a tenth of the elements: (name, plax time, JAX
    time, plax error, JAX error, what the error was measured over)."""
    import plax.lax as plax_lax
    n64 = max(opts.size // 10, 1)
    psi_sweep = np.concatenate([np.linspace(1e-3, 1e4, 1_000_001), 2.0 ** np.arange(-1000, 1000)])
    away = (psi_sweep >= 2) | (psi_sweep < 1)  # relative error means nothing next to 1.46...
    k = np.arange(1, 53)
    inv_sweep = np.concatenate([np.linspace(-1, 1, 1_000_001)[1:-1], 1 - 2.0 ** -k,
                                2.0 ** -np.arange(1, 1000)])
    cases = [("digamma", rng.uniform(0.1, 20, n64), psi_sweep[away], sp.psi,
              "[1e-3, 1e4] and powers of two, away from the zero at 1.46"),
             ("erf_inv", rng.uniform(-0.999, 0.999, n64), inv_sweep,
              lambda y: np.where(np.abs(y) < 0.5, sp.erfinv(y),
                                 np.copysign(sp.erfcinv(1 - np.abs(y)), y)),
              "(-1, 1), 1 - 2**-k and powers of two")]
    rows = []
    for name, x, xs, ref, where in cases:
        pf = getattr(plax_lax, name)
        with plax.config.override("jax_enable_x64", True):
            t = median_time(plax.jit(_program(pf, float), backend="numba"),
                            (plax.numpy.asarray(x),), opts.repeat)
            err, _ = fused_errors(pf, None, (xs,), ref(xs), np.float64)
        tj = ej = None
        if jax is not None:
            jax.config.update("jax_enable_x64", True)
            try:
                jf = getattr(jax.lax, name)
                tj = median_time(jax.jit(_program(jf, float)), (jax.numpy.asarray(x),),
                                 opts.repeat)
                ej = max_ulps(np.asarray(jax.jit(jf)(xs)), ref(xs), np.float64)
            finally:
                jax.config.update("jax_enable_x64", False)
        rows.append((name, t, tj, err, ej, where))
    return n64, rows


#: the samplers timed beside JAX: name -> program(random module, key, n), the same for both
SAMPLERS = {
    "random.normal": lambda r, k, n: r.normal(k, (n,)),
    "random.gamma": lambda r, k, n: r.gamma(k, 2.0, (n,)),
    "random.beta": lambda r, k, n: r.beta(k, 2.0, 3.0, (n,)),
}


def sampler_rows(opts, plax, jax):
    """Each sampler of :data:`SAMPLERS` jitted: ``(name, n, plax-numba time, JAX time)``;
    ``random.normal`` on ``--size`` samples, the rejection samplers on a tenth of them
    (at least 1M: their while loops run a batch until every sample is accepted)."""
    rows = []
    for name, make in SAMPLERS.items():
        if opts.only and name not in opts.only and "samplers" not in opts.only:
            continue
        n = opts.size if name == "random.normal" else max(opts.size // 10, 1_000_000)
        fn = plax.jit(lambda k, make=make, n=n: make(plax.random, k, n), backend="numba")
        t_plax = median_time(fn, (plax.random.PRNGKey(0),), opts.repeat)
        t_jax = None
        if jax is not None:
            jfn = jax.jit(lambda k, make=make, n=n: make(jax.random, k, n))
            t_jax = median_time(jfn, (jax.random.PRNGKey(0),), opts.repeat)
        rows.append((name, n, t_plax, t_jax))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", nargs="*", help="function names (default: all rows)")
    opts = parser.parse_args()

    import plax
    try:
        import jax
    except ImportError:
        jax = None
        print("(JAX is not installed: its columns are empty; pip install jax)")

    rng = np.random.default_rng(0)
    wanted = lambda name: not opts.only or name in opts.only  # noqa: E731
    ms = lambda t: "-" if t is None else f"{t * 1e3:.1f} ms"  # noqa: E731
    ratio = lambda a, b: "-" if b is None else f"{a / b:.2f}"  # noqa: E731
    num = lambda e, f: "-" if e is None else format(e, f)  # noqa: E731
    print(f"{opts.size:,} float32 elements; f(x * 0.5, ...) * 2 + 1 jitted; "
          f"median of {opts.repeat}; load {os.getloadavg()[0]:.1f}")
    print("| function | plax-numba | JAX | numba / JAX | plax f32 error (ulp) "
          "| JAX f32 error (ulp) | plax f64 error (f64 ulp) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name in [*UNARY, *ITERATIVE]:
        if not wanted(name):
            continue
        row = (unary_row if name in UNARY else iterative_row)(name, opts, rng, plax, jax)
        tp, tj, ep, ej, e64 = row
        print(f"| {name} | {ms(tp)} | {ms(tj)} | {ratio(tp, tj)} | {ep:.2f} "
              f"| {num(ej, '.2f')} | {e64:.1f} |", flush=True)

    if wanted("float64"):
        n64, rows64 = float64_rows(opts, rng, plax, jax)
        print(f"\nfloat64, {n64:,} elements; errors in float64 ulps")
        print("| function | plax-numba | JAX | numba / JAX | plax error (ulp) "
              "| JAX error (ulp) | measured over |")
        print("|---|---:|---:|---:|---:|---:|---|")
        for name, t, tj, err, ej, where in rows64:
            print(f"| {name} (f64) | {ms(t)} | {ms(tj)} | {ratio(t, tj)} | {err:.1f} "
                  f"| {num(ej, '.1f')} | {where} |")
    samplers = sampler_rows(opts, plax, jax)
    if samplers:
        print("\n| sampler | samples | plax-numba | JAX | numba / JAX |")
        print("|---|---:|---:|---:|---:|")
        for name, n, tp, tj in samplers:
            print(f"| {name} | {n:,} | {ms(tp)} | {ms(tj)} | {ratio(tp, tj)} |", flush=True)

if __name__ == "__main__":
    main()
