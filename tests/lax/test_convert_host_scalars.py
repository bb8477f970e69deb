"""Host scalars converted to a strongly typed dtype, as JAX 0.10.2 converts them.

JAX converts a Python int with NumPy's ``astype`` (it wraps: ``-1`` is 255 as uint8), any
other host scalar with ``np.asarray(value, dtype)`` (a Python float truncates toward zero; a
Python complex to a real dtype is NumPy's TypeError), and falls back to the saturating
``convert_element_type`` primitive where NumPy overflows (a Python float out of the integer
range) and for NaN and infinities (NaN is 0). ``lax.full`` and what reaches it (``jnp.full``,
``full_like``, the typed-key fill) wrapped floats instead (``jnp.full(3, 300.0, uint8)`` was
44, JAX's is 255). Only values whose conversion is defined on every CPU are used: NumPy's
cast of an out-of-range float is C's undefined behaviour.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
import plax.numpy as pnp
from plax import lax as plax_lax
from plax import random as prandom

INT_TYPES = (np.uint8, np.int8, np.uint16, np.int32, np.uint32)
FLOATS = (-1.5, 300.0, 255.7, -0.5, 1e20, -1e20, 2.0 ** 31, float("inf"), float("-inf"),
          float("nan"))


def _saturated(value: float, dtype) -> np.ndarray:
    """The float64 reference of a float converted to an integer type: truncated toward zero,
    clamped to the type's range, NaN as 0."""
    info = np.iinfo(dtype)
    t = np.trunc(np.nan_to_num(np.float64(value), nan=0.0, posinf=np.inf, neginf=-np.inf))
    return np.array(info.max if t > info.max else info.min if t < info.min else int(t), dtype)


FILLERS = {
    "lax.full": lambda v, dt: plax_lax.full((3,), v, dt),
    "jnp.full": lambda v, dt: pnp.full(3, v, dt),
    "jnp.full_like": lambda v, dt: pnp.full_like(pnp.zeros(3, dt), v),
    "jnp.full_like dtype": lambda v, dt: pnp.full_like(pnp.zeros(3), v, dtype=dt),
    "lax.full_like": lambda v, dt: plax_lax.full_like(pnp.zeros(3, dt), v),
    "convert_element_type": lambda v, dt: plax_lax.convert_element_type(v, dt),
    "jit full": lambda v, dt: plax.jit(lambda f: pnp.full(3, f, dt))(v),
}


@pytest.mark.parametrize("how", list(FILLERS))
def test_float_fills_of_integer_types_saturate(how):
    for dt in INT_TYPES if how != "jit full" else INT_TYPES[:2]:  # (a compilation per type)
        for v in FLOATS:
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)  # (NumPy's cast warned)
                got = np.asarray(FILLERS[how](v, dt))
            assert got.dtype == dt
            np.testing.assert_array_equal(got, np.broadcast_to(_saturated(v, dt), got.shape),
                                          err_msg=f"{how}({v}, {np.dtype(dt).name})")


@pytest.mark.parametrize("how", ["lax.full", "jnp.full", "convert_element_type"])
def test_python_ints_wrap_as_numpy_casts_them(how):
    for dt in INT_TYPES:
        for v in (-1, 300, 2 ** 40 + 5, -(2 ** 33)):
            got = np.asarray(FILLERS[how](v, dt))
            want = np.asarray(v).astype(dt)  # NumPy's int64 cast: modular
            np.testing.assert_array_equal(got, np.broadcast_to(want, got.shape),
                                          err_msg=f"{how}({v}, {np.dtype(dt).name})")


def test_python_complex_to_a_real_type_is_numpys_type_error():
    for make in (lambda dt: plax_lax.full((2,), 3 + 1j, dt),
                 lambda dt: pnp.full(2, 3 + 1j, dt),
                 lambda dt: plax_lax.convert_element_type(3 + 1j, dt)):
        for dt, word in ((np.uint8, "int"), (np.float32, "float")):
            with pytest.warns(np.exceptions.ComplexWarning):
                with pytest.raises(TypeError, match=rf"{word}\(\) argument must be"):
                    make(dt)
    # a NumPy complex scalar and a complex Array keep their real part, as in JAX
    with pytest.warns(np.exceptions.ComplexWarning):
        got = plax_lax.full((2,), np.complex64(3 + 1j), np.uint8)
    np.testing.assert_array_equal(np.asarray(got), [3, 3])


def test_typed_key_fills_convert_as_lax_full():
    kd = prandom.key(0).dtype
    for v in (-1.5, 1e20, float("nan"), -1):
        data = np.asarray(prandom.key_data(pnp.full((2,), v, kd)))
        want = (np.asarray(v).astype(np.uint32) if isinstance(v, int)
                else _saturated(v, np.uint32))
        np.testing.assert_array_equal(data, np.broadcast_to(want, (2, 2)), err_msg=str(v))
    # a complex number is refused (JAX: NumPy's TypeError, after a ComplexWarning)
    for make in (lambda: pnp.full((2,), 1 + 2j, kd),
                 lambda: pnp.full_like(prandom.split(prandom.key(0)), 1 + 0j)):
        with pytest.warns(np.exceptions.ComplexWarning):
            with pytest.raises(TypeError, match=r"int\(\) argument must be"):
                make()


def test_array_fills_of_jnp_full_convert_as_jnp_asarray():
    # an array fill is converted as jnp.asarray converts it (NumPy's cast for a NumPy array,
    # the saturating primitive for an Array), as in JAX
    fill = np.array([100.0, -2.0, 7.9], np.float32)
    np.testing.assert_array_equal(np.asarray(pnp.full((2, 3), fill, np.int8)),
                                  np.broadcast_to(fill.astype(np.int8), (2, 3)))
    with pytest.raises(TypeError, match="full requires ndarray or scalar arguments"):
        pnp.full((2, 3), [1.0, 2.0, 3.0], np.int8)


def test_as_jax():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    # (JAX compiles each conversion: a few values of each kind)
    cases = [(v, np.uint8) for v in (-1.5, 300.0, float("nan"), -1)]
    cases += [(1e20, np.int32), (2 ** 40 + 5, np.int32), (2 ** 40 + 5, np.float32)]
    for v, dt in cases:
        for want, got in ((jnp.full(3, v, dt), pnp.full(3, v, dt)),
                          (jax.lax.convert_element_type(v, dt),
                           plax_lax.convert_element_type(v, dt))):
            assert got.dtype == want.dtype and got.weak_type == want.weak_type, (v, dt)
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want),
                                          err_msg=f"{v} {np.dtype(dt).name}")
