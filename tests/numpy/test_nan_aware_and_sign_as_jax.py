"""``fmax``/``fmin``, ``isclose``, ``signbit``/``copysign`` and the complex order comparisons
written as JAX 0.10.2 writes them (issue 25: jaxprs compared with JAX's in
``test_staging_as_jax.py``, cases ``fmax*``, ``fmin``, ``isclose*``, ``copysign*``,
``greater_complex``); here their values against NumPy at the edges (NaN, infinities, signed
zeros, subnormals, complex ties), eager and compiled on the NumPy and Numba backends."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp

EDGES = [0.0, -0.0, 1.0, -1.0, 2.5, -3.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3e38]


def _grid(dt):
    with np.errstate(over="ignore"):  # (3e38 is inf in 16 bits)
        v = np.array(EDGES, np.float64).astype(dt)
    x, y = np.meshgrid(v, v)
    return x.ravel(), y.ravel()


def _same(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    np.testing.assert_array_equal(got, want)  # (NaN equal to NaN)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (NumPy's, comparing NaN)
@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("dt", [np.float32, np.float64, np.int32])
def test_fmax_fmin_against_numpy(dt, backend):
    x, y = _grid(np.float64)
    x, y = (x.astype(dt), y.astype(dt)) if dt != np.int32 else (
        np.arange(-3, 3, dtype=dt), np.arange(2, -4, -1, dtype=dt))
    with plax.enable_x64(), np.errstate(all="ignore"):
        for name in ("fmax", "fmin"):
            fn = getattr(jnp, name)
            want = getattr(np, name)(x, y)
            keep = ~((x == 0) & (y == 0))  # which zero of a signed pair: JAX's (y), not NumPy's
            for got in (fn(x, y), plax.jit(fn, backend=backend)(x, y)):
                _same(np.asarray(got)[keep], want[keep])
    c = np.array([1 + 2j, 1 + 1j, np.nan + 0j, 2 + 0j, 3 + 1j], np.complex64)
    d = np.array([1 + 1j, 1 + 2j, 1 + 0j, np.nan * 1j, 3 + 1j], np.complex64)
    np.testing.assert_array_equal(np.asarray(jnp.fmax(c, d)), np.fmax(c, d))
    np.testing.assert_array_equal(np.asarray(jnp.fmin(c, d)), np.fmin(c, d))
    for name in ("less", "less_equal", "greater", "greater_equal"):
        np.testing.assert_array_equal(np.asarray(getattr(jnp, name)(c, d)),
                                      getattr(np, name)(c, d), err_msg=name)


@pytest.mark.parametrize("equal_nan", [False, True])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # (NumPy's, at inf and NaN)
def test_isclose_against_numpy(equal_nan):
    x, y = _grid(np.float32)
    got = jnp.isclose(x, y, equal_nan=equal_nan)
    np.testing.assert_array_equal(np.asarray(got), np.isclose(x, y, equal_nan=equal_nan))
    got = plax.jit(lambda a, b: jnp.isclose(a, b, rtol=0.5, atol=0.0))(x, y)
    np.testing.assert_array_equal(np.asarray(got), np.isclose(x, y, rtol=0.5, atol=0.0))
    c = (x + 1j * y[::-1]).astype(np.complex64)
    np.testing.assert_array_equal(np.asarray(jnp.isclose(c, c[::-1], equal_nan=equal_nan)),
                                  np.isclose(c, c[::-1], equal_nan=equal_nan))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_signbit_and_copysign_against_numpy(dt, backend):
    x, y = _grid(dt)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    with plax.enable_x64():
        for got in (jnp.signbit(x), plax.jit(jnp.signbit, backend=backend)(x)):
            np.testing.assert_array_equal(np.asarray(got), np.signbit(x64))
        for got in (jnp.copysign(x, y), plax.jit(jnp.copysign, backend=backend)(x, y)):
            got = np.asarray(got, np.float64)
            _same(got, np.copysign(x64, y64))
            np.testing.assert_array_equal(np.signbit(got), np.signbit(np.copysign(x64, y64)))
