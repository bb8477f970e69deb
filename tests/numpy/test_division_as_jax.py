"""``floor_divide`` (integers), ``remainder`` and ``fmod`` written as JAX 0.10.2 writes them
(issue 25: their jaxprs are compared with JAX's in ``test_staging_as_jax.py``, cases
``floor_divide_*``, ``remainder*``, ``fmod_int``, ``divmod_int``); here their values against
NumPy at the edges (negative divisors, zeros, the integer minimum, NaN and infinities), eager
and compiled on the NumPy and Numba backends."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp

INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint32]


def _int_grid(dt):
    info = np.iinfo(dt)
    vals = sorted({0, 1, -1, 2, -2, 3, -7, 7, info.min, info.min + 1, info.max, info.max - 1})
    vals = np.array([v for v in vals if info.min <= v <= info.max], dt)
    x, y = np.meshgrid(vals, vals)
    return x.ravel(), y.ravel()


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("dt", INT_DTYPES, ids=lambda d: np.dtype(d).name)
def test_integer_division_against_numpy(dt, backend):
    x, y = _int_grid(dt)
    with plax.enable_x64(), np.errstate(all="ignore"):
        for name in ("floor_divide", "remainder", "fmod"):
            fn = getattr(jnp, name)
            want = getattr(np, name)(x, y)
            # an integer divided by zero: the quotient is implementation-defined (JAX's, not
            # NumPy's 0); the remainders are 0 in both
            keep = y != 0 if name == "floor_divide" else slice(None)
            for got in (fn(x, y), plax.jit(fn, backend=backend)(x, y)):
                np.testing.assert_array_equal(np.asarray(got)[keep], want[keep], err_msg=name)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_float_remainder_against_numpy(dt):
    vals = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 7.0, -7.0, 1e30, -1e30, np.inf, -np.inf,
                     np.nan, 0.1], dt)
    x, y = (a.ravel() for a in np.meshgrid(vals, vals))
    with plax.enable_x64(), np.errstate(all="ignore"):
        got = np.asarray(jnp.remainder(x, y))
        np.testing.assert_array_equal(got, np.remainder(x, y))
        got = np.asarray(jnp.remainder(x[:, None], y[None, :14]))  # size-1 axes broadcast
        np.testing.assert_array_equal(got, np.remainder(x[:, None], y[None, :14]))
