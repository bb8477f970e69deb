"""The float32 ``log``, ``expm1``, ``erf``, ``erfc``, ``erf_inv``, ``sin`` and ``cos`` of the
generated kernels (:mod:`plax_numba.libm_free`): error bounds against NumPy/SciPy in float64
over dense sweeps, powers of two and random bit patterns, the IEEE special cases, and the
kernels end to end in jitted programs against the NumPy backend."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.special as sp

import plax
from plax import lax

from numba_vs_numpy import compiled_source, elementwise_loop, jit_both

F32 = np.float32


def _vectorised(name):
    from plax_numba import libm_free
    return elementwise_loop(getattr(libm_free, name))


def _max_ulps(got, ref):
    """The largest error of ``got`` (float32) in units of the float32 spacing at the exact
    value; results below float32's smallest normal count in units of 2**-149."""
    with np.errstate(over="ignore"):                         # huge references: inf in float32
        ref32 = ref.astype(F32)
    finite = np.isfinite(ref32)
    assert np.array_equal(got[~finite], ref32[~finite], equal_nan=True)
    spacing = np.spacing(np.maximum(np.abs(ref32[finite]), np.finfo(F32).tiny))
    return (np.abs(got[finite].astype(np.float64) - ref[finite]) / spacing).max()


def _powers_of_two(limit=128):
    p = np.ldexp(1.0, np.arange(-149, limit))
    return np.concatenate([p, p * 1.3, p * 0.77]).astype(F32)


def _sweep(lo, hi, n=1_000_001):
    return np.linspace(lo, hi, n, dtype=F32)


def _every_size(n=200_000):
    """Random float32 bit patterns of both signs over every finite exponent (huge arguments
    test sin/cos's reduction)."""
    bits = np.random.default_rng(3).integers(0, 0x7F800000, n, dtype=np.int64)
    x = bits.astype(np.uint32).view(F32)
    return np.concatenate([x, -x])


def _erf_inv(y):
    """float64 erfinv keeping its precision near ±1 (``1 - |y|`` is exact for float32 ``y``)."""
    a = np.abs(y)
    with np.errstate(invalid="ignore"):
        return np.copysign(np.where(a < 0.5, sp.erfinv(a), sp.erfcinv(1 - a)), y)


CASES = {
    # name: (float64 reference, inputs, bound in ulps)
    "log_f32": (np.log, lambda: np.concatenate(
        [_sweep(1e-30, 10), _sweep(0.5, 2.0), _sweep(0.99, 1.01), _sweep(1.41, 1.42),
         _powers_of_two(), np.abs(_every_size())]), 0.84),
    "expm1_f32": (np.expm1, lambda: np.concatenate(
        [_sweep(-20, 88.7), _sweep(-1, 1), _sweep(-1e-3, 1e-3), _powers_of_two(6),
         -_powers_of_two()]), 0.501),
    "erf_f32": (sp.erf, lambda: np.concatenate(
        [_sweep(-5, 5), _sweep(0.9, 1.1), _sweep(-1e-3, 1e-3), _powers_of_two(),
         -_powers_of_two()]), 1.05),
    "erfc_f32": (sp.erfc, lambda: np.concatenate(
        [_sweep(-5, 10.1), _sweep(0.9, 1.1), _sweep(-1e-3, 1e-3), _powers_of_two(),
         -_powers_of_two()]), 1.06),
    "erf_inv_f32": (_erf_inv, lambda: np.concatenate(
        [_sweep(-1, 1, 2_000_001), _sweep(0.999, 1), F32(1) - _powers_of_two(-1)[:-2],
         _powers_of_two(0), -_powers_of_two(0)]), 0.87),
    "sin_f32": (np.sin, lambda: np.concatenate(
        [_sweep(-100, 100, 2_000_001), _every_size(), _powers_of_two(), -_powers_of_two()]), 0.501),
    "cos_f32": (np.cos, lambda: np.concatenate(
        [_sweep(-100, 100, 2_000_001), _every_size(), _powers_of_two(), -_powers_of_two()]), 0.501),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_error_bound(name):
    reference, inputs, bound = CASES[name]
    x = inputs()
    with np.errstate(all="ignore"):
        ref = reference(x.astype(np.float64))
    assert _max_ulps(_vectorised(name)(x), ref) <= bound


@pytest.mark.parametrize("name", sorted(CASES))
def test_special_values(name):
    reference = CASES[name][0]
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -1.0, 1.0, 1e-45, -1e-45, 3.4028235e38,
                  -3.4028235e38, 88.8, -104.0, 10.06, 3.9], F32)
    with np.errstate(all="ignore"):
        want = reference(x.astype(np.float64)).astype(F32)
    got = _vectorised(name)(x)
    np.testing.assert_array_equal(got, want)                 # NaN where NaN, infinities
    zero = want == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]))  # signed zeros


@pytest.mark.parametrize("fn, reference", [(lax.log, np.log), (lax.expm1, np.expm1),
                                           (lax.erf, sp.erf), (lax.erfc, sp.erfc),
                                           (lax.sin, np.sin), (lax.cos, np.cos),
                                           (lax.erf_inv, _erf_inv), (lax.lgamma, None),
                                           (lax.digamma, None)])
def test_fused_in_jitted_programs(fn, reference):
    # a cluster (the function between two multiplies) on float32: the libm-free kernel, close to
    # the NumPy backend's SciPy/NumPy result; float64 stays on libm's functions
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(5000) * 3).astype(F32)
    if reference is np.log:
        x = np.abs(x) + F32(1e-3)
    if reference is _erf_inv:
        x = np.tanh(x).astype(F32)
    if reference is None:                                 # lgamma, digamma: defined below
        reference = {"lgamma": _lgamma, "digamma": _digamma}[fn.__name__]

    def f(v):
        return fn(v * 0.5) * 2.0

    source = compiled_source(f, x)
    assert f"{fn.__name__}_f32(" in source, source
    got, want = jit_both(f, x)
    ref = reference((x * F32(0.5)).astype(np.float64)) * 2.0
    assert _max_ulps(np.asarray(got[0]), ref) <= 1.5
    np.testing.assert_allclose(got[0], want[0], rtol=3e-7, atol=3e-38)


def test_scalar_erf_matches_numpy_backend_bits():
    # truncated_normal's bounds: erf of float32 scalars rounds libm's float64 erf, as SciPy
    xs = F32([-3.7, -1.0, -0.3, 0.0, 1e-20, 0.51, 1.5, 2.9, 3.86])

    def f(v):
        return [lax.erf(v[i] / np.float32(np.sqrt(2))) for i in range(len(xs))]
    got, want = jit_both(f, xs)
    for g, w in zip(got, want):
        assert np.asarray(g).tobytes() == np.asarray(w).tobytes()


def test_lgamma_and_float64_special_functions_fuse():
    rng = np.random.default_rng(1)
    x = rng.uniform(-6, 30, 4000)

    def f(v):
        return lax.lgamma(v * 1.0) + lax.erf(v * 0.1) - lax.erfc(v * 0.2)

    with plax.config.override("jax_enable_x64", True):
        got, want = jit_both(f, x, fallback_is_error=True)
        got32, want32 = jit_both(f, x.astype(F32), fallback_is_error=True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(got32[0], want32[0], rtol=2e-6, atol=1e-6)


def _lgamma(x):
    return np.where(np.isneginf(x), np.inf, sp.gammaln(x))   # C's lgamma(-inf) = +inf, as plax


def _digamma(x):
    return np.where((x <= 0) & (x == np.floor(x)), np.nan, sp.psi(x))  # NaN at poles (XLA)


def test_lgamma_error_bound():
    x = np.concatenate([_sweep(1e-6, 50, 2_000_001), _sweep(-20, 0, 2_000_001),
                        _powers_of_two(), -_powers_of_two()[::7] - F32(0.5)])
    with np.errstate(all="ignore"):
        ref = _lgamma(x.astype(np.float64))
    got = _vectorised("lgamma_f32")(x)
    # next to the zeros at 1 and 2 the shifted series cancels: absolute error there
    near = (np.abs(x - 1) < 3e-7) | (np.abs(x - 2) < 3e-7)
    assert _max_ulps(got[~near], ref[~near]) <= 1.2
    assert np.abs(got[near] - ref[near]).max() <= 1e-13
    assert _vectorised("lgamma_f32")(F32([1, 2])).tolist() == [0.0, 0.0]


def test_digamma_error_bound():
    root = 1.4616321449683622                                  # psi's only positive zero
    x = np.concatenate([_sweep(1e-6, 50, 2_000_001), _sweep(1.4616, 1.4617, 20_001),
                        _powers_of_two()])
    with np.errstate(all="ignore"):
        ref = _digamma(x.astype(np.float64))
    got = _vectorised("digamma_f32")(x)
    near = np.abs(x - root) < 1e-6
    assert _max_ulps(got[~near], ref[~near]) <= 0.501
    assert np.abs(got[near] - ref[near]).max() <= 1e-13
    # below 0 through the reflection formula: relative 1e-6 (zeros and poles on every unit)
    xn = _sweep(-20, -1e-6, 2_000_001)
    with np.errstate(all="ignore"):
        refn = _digamma(xn.astype(np.float64))
    gotn = _vectorised("digamma_f32")(xn)
    finite = np.isfinite(refn)
    np.testing.assert_array_equal(np.isnan(gotn), ~finite)
    assert np.all(np.abs(gotn[finite] - refn[finite]) <= 1e-6 * np.abs(refn[finite]) + 1e-12)


@pytest.mark.parametrize("name, reference", [("lgamma_f32", _lgamma), ("digamma_f32", _digamma)])
def test_gamma_special_values(name, reference):
    x = F32([0.0, -0.0, 1.0, 2.0, -1.0, -2.5, 0.5, np.inf, -np.inf, np.nan, 1e-45, 3.4e38,
             -3.4e38, -1e7 + 0.5])
    with np.errstate(all="ignore"):
        want = reference(x.astype(np.float64)).astype(F32)
    np.testing.assert_allclose(_vectorised(name)(x), want, rtol=1e-6)   # NaN/inf where theirs
