"""The scalar forms of ``bessel_i0e`` and ``bessel_i1e`` (:mod:`plax_numba.special`): error
bounds in ulps against SciPy in float64 over dense sweeps, powers of two and the edge cases,
both widths; fused into the generated kernels (no fallback) with values matching the NumPy
backend; gradients through the fused kernels against finite differences and JAX."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

import plax
from plax import lax

from numba_vs_numpy import compiled_source, elementwise_loop, jit_both

# name: (float64 reference, float32 bound, float64 bound), measured by this file's sweeps
# (benchmarks/special_bench.py prints them beside JAX's): float32 is float64's result rounded
# once; float64's series sums lose a few ulps near the switch to Hankel's expansion (|x| = 22)
CASES = {"bessel_i0e": (sp.i0e, 0.51, 11.0), "bessel_i1e": (sp.i1e, 0.51, 11.0)}
EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, 11.999, 12.0, 12.001, 21.999, 22.0, 22.001, 1e30]


def _inputs(dtype):
    p = 2.0 ** np.arange(-126 if dtype == np.float32 else -1000, 100)
    with np.errstate(over="ignore"):
        return np.concatenate([np.linspace(-150, 150, 300_001), p, -p, EDGES]).astype(dtype)


def _ulps(got, ref, dtype):
    """Largest error in ulps of ``dtype`` at the exact value; NaN, inf and zero must match."""
    special = ~np.isfinite(ref) | (ref == 0)
    assert np.array_equal(got[special], ref[special].astype(dtype), equal_nan=True)
    r = ref[~special]
    spacing = np.spacing(np.abs(r).astype(dtype)).astype(np.float64)
    return float((np.abs(got[~special].astype(np.float64) - r) / spacing).max())


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_scalar_form_error_bound(name, dtype):
    from plax_numba import special
    ref, bound32, bound64 = CASES[name]
    bits = np.dtype(dtype).itemsize * 8
    x = _inputs(dtype)
    got = elementwise_loop(getattr(special, f"{name}_f{bits}"))(x)
    assert got.dtype == dtype
    assert _ulps(got, ref(x.astype(np.float64)), dtype) <= (bound32 if bits == 32 else bound64)


@pytest.mark.parametrize("name", sorted(CASES))
def test_symmetry_and_signed_zero(name):
    from plax_numba import special
    for bits, dtype in ((32, np.float32), (64, np.float64)):
        loop = elementwise_loop(getattr(special, f"{name}_f{bits}"))
        x = np.array([0.0, -0.0, 0.5, 3.0, 30.0, np.inf], dtype)
        pos, neg = loop(x), loop(-x)
        sign = 1.0 if name == "bessel_i0e" else -1.0
        np.testing.assert_array_equal(neg, sign * pos)
        if name == "bessel_i1e":  # odd: the zero keeps its sign, as SciPy
            assert np.signbit(loop(np.array([-0.0], dtype))[0])


@pytest.mark.parametrize("name", sorted(CASES))
def test_fused_with_neighbours_matches_numpy_backend(name):
    fn = getattr(lax, name)

    def f(x):
        return fn(x * 0.5) * 2.0 + 1.0

    x = np.linspace(-40, 40, 50_001, dtype=np.float32)
    source = compiled_source(f, x)
    # one kernel holding the multiply, the function and the add: fused with its neighbours
    assert f"{name}_f32(" in source
    assert f"generated from the equations (mul {name} add)" in source
    got, want = jit_both(f, x, fallback_is_error=True)
    ref = CASES[name][0](x.astype(np.float64) * 0.5) * 2 + 1
    assert _ulps(got[0], ref, np.float32) <= 2.0
    np.testing.assert_allclose(got[0], want[0], rtol=3e-7, atol=0)


@pytest.mark.parametrize("name", sorted(CASES))
def test_float64_fused(name):
    fn = getattr(lax, name)
    with plax.config.override("jax_enable_x64", True):
        x = np.concatenate([np.linspace(-60, 60, 20_001), EDGES])
        source = compiled_source(lambda v: fn(v) * 3.0, x)
        assert f"{name}_f64(" in source
        got, want = jit_both(lambda v: fn(v) * 3.0, x, fallback_is_error=True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-14, atol=0, equal_nan=True)


@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_through_fused_kernel(name):
    fn = getattr(lax, name)
    x = np.linspace(-25, 25, 2_001)
    with plax.config.override("jax_enable_x64", True):
        g = plax.jit(plax.vmap(plax.grad(fn)), backend="numba")(x)
    h = 1e-6
    fd = (CASES[name][0](x + h) - CASES[name][0](x - h)) / (2 * h)
    np.testing.assert_allclose(np.asarray(g), fd, rtol=1e-6, atol=1e-9)
    jax = pytest.importorskip("jax", reason="comparing with JAX needs jax installed")
    from jax import config as jax_config
    jax_config.update("jax_enable_x64", True)
    try:
        want = jax.vmap(jax.grad(getattr(jax.lax, name)))(x)
    finally:
        jax_config.update("jax_enable_x64", False)
    np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-12, atol=1e-15)


def _psi(x):
    """SciPy's float64 digamma with XLA's NaN at the poles (0, -1, -2, ...)."""
    return np.where((x <= 0) & (x == np.floor(x)), np.nan, sp.psi(x))


def test_digamma_f64_error_bound():
    """Relative error in ulps away from the zeros, absolute next to them; negative arguments
    relative to max(|psi|, 1) where |psi| < 1e3 (near the poles SciPy's own reduction of
    ``pi x`` is the larger error)."""
    from plax_numba import special
    p = 2.0 ** np.arange(-1000, 1000)
    edges = [0.0, -0.0, -1.0, -2.0, -1e15, np.inf, -np.inf, np.nan, 1e-300, -1e-300, 1e300]
    x = np.concatenate([np.linspace(-30, 30, 300_001), np.linspace(1e-3, 1e4, 50_001), p,
                        -p - 0.25, edges])
    got = elementwise_loop(special.digamma_f64)(x)
    ref = _psi(x)
    special_ = ~np.isfinite(ref)
    assert np.array_equal(got[special_], ref[special_], equal_nan=True)
    x, got, ref = x[~special_], got[~special_], ref[~special_]
    err = np.abs(got - ref)
    ulps = err / np.spacing(np.abs(ref))
    away = (x >= 2) | ((x > 0) & (x < 1))
    assert ulps[away].max() <= 16
    near_zero = (x > 0) & ~away
    assert err[near_zero].max() <= 4e-15
    neg = (x < 0) & (np.abs(ref) < 1e3)
    assert (err[neg] / np.maximum(np.abs(ref[neg]), 1)).max() <= 1e-13


def test_digamma_f64_fused():
    with plax.config.override("jax_enable_x64", True):
        x = np.concatenate([np.linspace(0.05, 40, 20_001), [0.0, -1.0, np.inf, np.nan, -2.5]])
        f = lambda v: lax.digamma(v * 2.0) + 1.0  # noqa: E731
        source = compiled_source(f, x)
        assert "digamma_f64(" in source
        assert "generated from the equations (mul digamma add)" in source
        got, want = jit_both(f, x, fallback_is_error=True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13, atol=4e-15, equal_nan=True)
