"""The scalar forms of the iterative special functions (``igamma``, ``igammac``,
``igamma_grad_a``, ``random_gamma_grad``, ``zeta``, ``polygamma``, ``betainc``, float64
``erf_inv``; plax_numba.special_gamma / special_zeta / special_beta / special_erf): error
bounds in ulps against the float64 reference (the NumPy backend's kernels, SciPy underneath)
over the sweeps and edge grids of special_forms_cases.py, both widths; the same NaN and
infinities as the NumPy backend; fused into the generated kernels (no fallback) with values
matching the NumPy backend; and JAX's error on the same inputs, which plax's must not exceed
(skipped without JAX)."""
from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import plax
from plax import lax

from numba_vs_numpy import compiled_source, jit_both
from special_forms_cases import (CASES, elementwise_loop_n, jax_errors, max_ulps, reference,
                                 same_specials)

_N = 4_000   # per part of each sweep: ~10k-25k points with the edge grid
_WIDTHS = [(32, np.float32), (64, np.float64)]
_LOG_MAX32 = math.log(np.finfo(np.float32).max)


def _underflows32(a, x):
    """random_gamma_grad's float32 convention: where the prefactor underflows in float32 the
    derivative is its formula without iterating (as JAX and the NumPy backend), not the
    float64 value."""
    from scipy.special import gammaln
    with np.errstate(all="ignore"):
        return a * np.log(x) - x - gammaln(a) < -_LOG_MAX32


def _measured(case, bits, dtype, n=_N):
    args = [a.astype(dtype) for a in case.inputs(n)]
    got = elementwise_loop_n(case.scalar_form(bits), len(args))(*args)
    ref = reference(case, *[a.astype(np.float64) for a in args])
    return args, got, ref


@pytest.mark.parametrize("bits,dtype", _WIDTHS, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_error_bound_and_edges(name, bits, dtype):
    case = CASES[name]
    if bits == 32 and case.bound32 is None:
        pytest.skip("float32 erf_inv is plax_numba.libm_free's (tests/numba/test_libm_free.py)")
    args, got, ref = _measured(case, bits, dtype)
    assert got.dtype == dtype
    assert same_specials(got, ref), "NaN/inf differ from the NumPy backend"
    if name == "random_gamma_grad" and bits == 32:
        skip = _underflows32(*[a.astype(np.float64) for a in args])
        want = np.asarray(plax.jit(lax.random_gamma_grad, backend="numpy")(*args))
        np.testing.assert_allclose(got[skip], want[skip], rtol=1e-5, atol=0)
        got, ref = got[~skip], ref[~skip]
    bound = case.bound32 if bits == 32 else case.bound64
    assert max_ulps(got, ref, dtype) <= bound


@functools.lru_cache(maxsize=None)
def _erf_inv_f64_loop():
    """One compiled loop of ``erf_inv_f64`` for the tests below (its compile is most of their
    time)."""
    from plax_numba.special_erf import erf_inv_f64
    return elementwise_loop_n(erf_inv_f64, 1)


def test_erf_inv_f64_edges_and_symmetry():
    loop = _erf_inv_f64_loop()
    y = np.array([0.0, -0.0, 1.0, -1.0, 1.5, -1.5, np.nan, 0.3, 0.9, 1 - 2.0 ** -52])
    got = loop(y)
    np.testing.assert_array_equal(got[:7], [0.0, -0.0, np.inf, -np.inf, np.nan, np.nan, np.nan])
    assert np.signbit(got[1])
    np.testing.assert_array_equal(loop(-y[7:]), -got[7:])


def test_erf_inv_f64_dense_error_bound():
    """The fitted polynomials (plax_numba.special_erf) over a dense sweep of ``(-1, 1)``, next
    to +-1 (``1 - 10**-k``, k up to 16) and next to 0: within the module docstring's 4 ulps of
    SciPy's ``erfinv`` (whose own error, up to ~3 ulps, is part of the figure)."""
    from scipy.special import erfinv
    rng = np.random.default_rng(7)
    near_one = 1 - 10 ** rng.uniform(-16, -2, 100_000)
    y = np.concatenate([rng.uniform(-1, 1, 300_000), near_one, -near_one,
                        rng.uniform(-1e-3, 1e-3, 50_000)])
    got = _erf_inv_f64_loop()(y)
    assert max_ulps(got, erfinv(y), np.float64) <= 4


def test_erf_inv_f64_calls_no_libm():
    """The loop calling ``erf_inv_f64`` holds no libm ``log``/``exp``/``erf``/``erfc`` call
    (each would keep it from vectorising): the logarithm is plax's own."""
    import re
    loop = _erf_inv_f64_loop()
    loop(np.zeros(4))
    ir = "".join(loop.inspect_llvm().values())
    assert not re.search(r"@(erfc?|log|exp)\b", ir)


def test_betainc_f64_tiny_a_beside_b_near_171():
    """``Gamma(a) Gamma(b)`` overflows for a tiny ``a`` beside ``b`` near 171 while ``a + b``
    stays below gamma's limit: the prefactor comes from logarithms there (it was inf/inf,
    NaN), matching SciPy."""
    from scipy.special import betainc
    from plax_numba.special_beta import betainc_f64
    a = np.array([1.48137833e-03, 4.41231355e-02, 4.66347765e-03, 0.5])
    b = np.array([1.70953949e+02, 1.71445267e+02, 1.71091949e+02, 171.0])
    x = np.array([1.90746605e-16, 6.15268304e-26, 0.5, 0.5])
    got = elementwise_loop_n(betainc_f64, 3)(a, b, x)
    np.testing.assert_allclose(got, betainc(a, b, x), rtol=1e-13)


def test_betainc_f32_wide_parameters_round_the_float64_form():
    """float32 ``betainc`` (iterated to 2**-40, prefactor from logarithms) over ``a, b`` in
    ``[1e-3, 1e7]`` (log-uniform) and ``x`` down to 1e-30: the float64 form's value rounded
    once (within half an ulp and a hair), with the same NaNs."""
    from plax_numba.special_beta import betainc_f32, betainc_f64
    rng = np.random.default_rng(3)
    n = 40_000
    a = (10 ** rng.uniform(-3, 7, n)).astype(np.float32)
    b = (10 ** rng.uniform(-3, 7, n)).astype(np.float32)
    x = np.concatenate([rng.uniform(0, 1, n // 2),
                        10 ** rng.uniform(-30, 0, n - n // 2)]).astype(np.float32)
    got = elementwise_loop_n(betainc_f32, 3)(a, b, x)
    want = elementwise_loop_n(betainc_f64, 3)(*(v.astype(np.float64) for v in (a, b, x)))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert max_ulps(got, want, np.float32) <= 0.501


def test_polygamma_negative_arguments():
    """Negative non-integer ``x``: relative to ``max(|psi|, 1)`` (digamma's zeros, one per
    unit interval, make a pure relative bound meaningless there), NaN at the poles."""
    from plax_numba.special_zeta import polygamma_f64
    rng = np.random.default_rng(1)
    m = np.floor(rng.uniform(0, 6, 20_000))
    x = rng.uniform(-10, 0, 20_000)
    x = np.concatenate([x, [-1.0, -2.0, -0.0]])
    m = np.concatenate([m, [1.0, 0.0, 2.0]])
    got = elementwise_loop_n(polygamma_f64, 2)(m, x)
    ref = reference(CASES["polygamma"], m, x)
    assert same_specials(got, ref)
    ok = np.isfinite(ref) & (np.abs(ref) < 1e12)
    err = np.abs(got[ok] - ref[ok]) / np.maximum(np.abs(ref[ok]), 1.0)
    assert err.max() <= 1e-12


def test_igamma_large_parameters_against_mpmath():
    """Beyond a ~ 100 SciPy's own error exceeds plax's (its figure dominates the float64
    bounds above); mpmath at 40 digits shows plax's."""
    mpmath = pytest.importorskip("mpmath", reason="the high-precision check needs mpmath")
    from plax_numba.special_gamma import igamma_f64, igammac_f64
    mpmath.mp.dps = 40
    rng = np.random.default_rng(2)
    a = 10 ** rng.uniform(2, 3, 60)
    x = a * rng.uniform(0.3, 1.7, 60)
    p = elementwise_loop_n(igamma_f64, 2)(a, x)
    q = elementwise_loop_n(igammac_f64, 2)(a, x)
    for i in range(a.size):
        for got, upper in ((p[i], False), (q[i], True)):
            lo, hi = (x[i], mpmath.inf) if upper else (0, x[i])
            want = float(mpmath.gammainc(a[i], lo, hi, regularized=True))
            assert abs(got - want) <= 1000 * max(np.spacing(want), np.finfo(float).tiny)


# ---------------------------------------------------------------- fused, beside the NumPy backend

def _program(name):
    """``name`` between neighbours, so that the kernel must fuse it: an operand scaled before
    and the result shifted after."""
    fn = getattr(lax, name)
    if name == "betainc":
        return lambda a, b, x: fn(a * 1.0, b, x) + 1.0
    if name == "polygamma":
        return lambda m, x: fn(lax.floor(m * 0.3), x) + 1.0
    if name == "erf_inv":
        return lambda y: fn(y * 0.5) + 1.0
    return lambda a, x: fn(a * 1.0, x) + 1.0


def _program_inputs(name, dtype, n=20_000):
    rng = np.random.default_rng(3)
    if name == "betainc":
        args = rng.uniform(0.1, 30, n), rng.uniform(0.1, 30, n), rng.uniform(0, 1, n)
    elif name == "polygamma":
        args = rng.uniform(0, 20, n), rng.uniform(0.01, 30, n)
    elif name == "erf_inv":
        args = (rng.uniform(-1, 1, n),)
    elif name == "zeta":
        args = rng.uniform(1.1, 20, n), rng.uniform(0.01, 30, n)
    else:
        args = rng.uniform(0.01, 20, n), rng.uniform(0, 30, n)
    return [a.astype(dtype) for a in args]


@pytest.mark.parametrize("bits,dtype", _WIDTHS, ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_matches_numpy_backend(name, bits, dtype):
    case = CASES[name]
    if bits == 32 and case.bound32 is None:
        pytest.skip("float32 erf_inv is plax_numba.libm_free's")
    f = _program(name)
    with plax.config.override("jax_enable_x64", bits == 64):
        args = _program_inputs(name, dtype)
        source = compiled_source(f, *args)
        prim = f"{case.form}_f{bits}("
        assert prim in source, f"{name} is not in a generated kernel"
        # one kernel holds the function and the add after it
        prim_name = {"betainc": "regularized_incomplete_beta"}.get(name, name)
        headers = [line for line in source.splitlines() if "generated from the equations" in line]
        assert any(f" {prim_name} add" in h for h in headers), headers
        got, want = jit_both(f, *args, fallback_is_error=True)
    got, want = got[0], want[0]
    assert got.dtype == dtype
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = np.isfinite(want)
    # against the float64 program: one rounding of the function and one of the add
    # (random_gamma_grad's float64 reference is itself iterated to its own stopping rule,
    # and its float32 convention differs where the prefactor underflows: its error bound is
    # test_error_bound_and_edges')
    if name != "random_gamma_grad":
        _check_against_float64_program(f, args, got, ok, dtype, bits)
    # beside the NumPy backend at the same width: its float32 betainc is SciPy's
    # single-precision loop (~1e-5 off) and its float32 gamma derivatives iterate in float32
    rtol, atol = _NUMPY_F32_TOLERANCE.get(name, (3e-7, 0.0)) if bits == 32 else (1e-11, 0.0)
    np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=atol)


def _check_against_float64_program(f, args, got, ok, dtype, bits):
    wide = [a.astype(np.float64) for a in args]
    with plax.config.override("jax_enable_x64", True):
        exact = np.asarray(plax.jit(f, backend="numpy")(*wide))
    inner = exact - 1.0
    unit = (np.spacing(np.abs(inner).astype(dtype)).astype(np.float64)
            + np.spacing(np.abs(exact).astype(dtype)).astype(np.float64))
    assert (np.abs(got[ok] - exact[ok]) / unit[ok]).max() <= (1.0 if bits == 32 else 64.0)


#: (rtol, atol) of the NumPy backend's float32 kernels beside the float64 value
_NUMPY_F32_TOLERANCE = {"betainc": (2e-5, 0.0), "random_gamma_grad": (4e-6, 2e-7),
                        "igamma_grad_a": (4e-6, 2e-7)}


def test_gamma_sample_gradient_fuses():
    """``grad`` of ``random.gamma`` in ``a`` goes through ``random_gamma_grad``: its kernel is
    fused with the neighbouring arithmetic, and matches the NumPy backend."""
    from plax import random
    key = random.PRNGKey(0)
    a = np.linspace(0.2, 8.0, 256, dtype=np.float32)

    def f(a):
        return plax.grad(lambda a: random.gamma(key, a).sum())(a)
    source = compiled_source(f, a)
    assert "random_gamma_grad_f32(" in source
    got, want = jit_both(f, a)
    np.testing.assert_allclose(got[0], want[0], rtol=2e-5)


# ---------------------------------------------------------------- beside JAX

@pytest.mark.parametrize("name", sorted(CASES))
def test_error_no_worse_than_jax(name):
    """plax's error on the sweep (both widths) is at most JAX's on the same inputs (plus the
    half ulp of a float32 rounding that JAX's float32 results also carry)."""
    pytest.importorskip("jax", reason="comparing with JAX needs jax installed")
    case = CASES[name]
    j32, j64 = jax_errors(case, n=_N)
    for bits, dtype, theirs in ((32, np.float32, j32), (64, np.float64, j64)):
        if bits == 32 and case.bound32 is None:
            continue
        args = [a.astype(dtype) for a in case.jax_args(np.random.default_rng(0), _N)]
        got = elementwise_loop_n(case.scalar_form(bits), len(args))(*args)
        ref = reference(case, *[a.astype(np.float64) for a in args])
        ours = max_ulps(got, ref, dtype)
        assert ours <= max(theirs, 0.5) + 0.5, (bits, ours, theirs)


def test_gamma_family_samplers_match_numpy_backend():
    """``random.gamma`` and ``dirichlet`` (the log-space sampler ``beta`` also uses) jitted on
    the Numba backend give the NumPy backend's values, each a whole-program kernel holding its
    rejection ``while_loop``. The two programs are those of test_threefry_fusion.py's
    ``test_native_loop_reference_tier_equals_compiled_tier`` and
    ``test_beta_and_dirichlet_are_native[dirichlet]`` (same constants, shapes and dtypes; the key
    is an argument): a session compiles each kernel once (~30 CPU s each) and loads it from its
    cache for the other test."""
    from plax import random
    k1, k2 = random.split(random.PRNGKey(1))
    alpha = np.array([0.3, 1.0, 4.0], np.float32)
    samplers = (lambda key: random.gamma(key, np.float32(1.5), (64,)),
                lambda key: random.dirichlet(key, alpha, (100,)))
    for sample, key in zip(samplers, (k1, k2)):
        got, want = jit_both(sample, key)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype == np.float32
            # the same draws; each sample's arithmetic may round differently in the fused
            # kernels (a few float32 ulps through log/exp/pow)
            np.testing.assert_allclose(g, w, rtol=4e-6, atol=1e-30)
