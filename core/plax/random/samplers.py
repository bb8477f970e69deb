"""Continuous and simple discrete samplers built on uniform bits: uniform, normal and friends.

Each public function validates its key and arguments, then calls a private
``_name(data, ...)`` that works on one key's raw ``uint32`` words with
``plax.lax``/``plax.numpy`` operations, so samplers compose with each other
and with ``jit``, ``vmap`` and ``grad``. The float recipes follow JAX exactly,
so the same key gives the same numbers.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from plax import dtypes, lax
from plax import numpy as jnp
from plax.random._util import (canonical_shape, check_shape, concrete_value, float_dtype,
                               int_dtype, resolve_shape, shape_of)
from plax.random._fma import fma
from plax.random._special import erf_inv
from plax.random.keys import UINT_DTYPES, bits_data, check_key, split_data


def _param(x: Any, dtype: np.dtype):
    """A sampler parameter as an array of ``dtype``."""
    return lax.convert_element_type(jnp.asarray(x), dtype)


def _subkeys(data, num: int):
    keys = split_data(data, (num,))
    return [lax.index_in_dim(keys, i, 0, keepdims=False) for i in range(num)]


def _check_ordered(name: str, low: Any, high: Any, low_name: str, high_name: str) -> None:
    lo, hi = concrete_value(low), concrete_value(high)
    if lo is None or hi is None:
        return  # traced bounds cannot be checked; JAX's clamping semantics apply
    with np.errstate(invalid="ignore"):
        bad = np.any(lo > hi)
    if bad:
        raise ValueError(f"{name}: {low_name} must not exceed {high_name}, got {low_name}={lo!r} "
                         f"and {high_name}={hi!r}.")


# ------------------------------------------------------------------ uniform

def uniform(key: Any, shape: Any = (), dtype: Any = None, minval: Any = 0.0,
            maxval: Any = 1.0):
    """Uniform random floats in ``[minval, maxval)``.

    Random bits fill the mantissa of a float in ``[1, 2)``; subtracting 1 and
    scaling gives the result (JAX's construction, bit for bit).

    Args:
      key: a single PRNG key (raw or typed).
      shape: the result's shape. Default ``()``.
      dtype: a float dtype (default float32, float64 with x64).
      minval, maxval: bounds broadcast-compatible with ``shape``. Default 0 and 1.

    Returns:
      An array of ``shape`` and ``dtype``.

    Raises:
      ValueError: for a non-float dtype, incompatible shapes, or ``minval > maxval``.

    Example:
      >>> random.uniform(random.PRNGKey(0), (2,), minval=-1, maxval=1)
    """
    data, _ = check_key("uniform", key)
    dt = float_dtype(dtype, "uniform")
    shape = canonical_shape(shape, "uniform")
    check_shape("uniform", shape, shape_of(minval), shape_of(maxval))
    _check_ordered("uniform", minval, maxval, "minval", "maxval")
    return _uniform(data, shape, dt, minval, maxval)


def _uniform(data, shape: tuple[int, ...], dtype: np.dtype, minval: Any = 0.0, maxval: Any = 1.0):
    minval = _param(minval, dtype)
    maxval = _param(maxval, dtype)
    floats = _unit_floats(data, shape, dtype)
    span = jnp.subtract(maxval, minval)
    if _is_power_of_two(span):
        # floats * span is exact, so one rounding happens either way
        scaled = jnp.add(jnp.multiply(floats, span), minval)
    else:
        # JAX's compiler fuses this multiply-add into one FMA (a single rounding); match it
        span_b, min_b = jnp.broadcast_to(span, shape), jnp.broadcast_to(minval, shape)
        scaled = fma(floats, span_b, min_b)
    return jnp.maximum(minval, scaled)


def _is_power_of_two(x) -> bool:
    """Whether ``x`` is concrete and every element is 0 or a power of two."""
    value = concrete_value(x)
    if value is None:
        return False
    mantissa, _ = np.frexp(value.astype(np.float64))
    return bool(np.all((mantissa == 0.5) | (mantissa == -0.5) | (value == 0)))


def _unit_floats(data, shape: tuple[int, ...], dtype: np.dtype):
    """Uniform floats in ``[0, 1)`` of ``dtype``: random mantissa bits under the exponent of 1.0."""
    finfo = dtypes.finfo(dtype)
    nbits, nmant = finfo.bits, finfo.nmant
    rng_bits = 8 if nmant < 8 else nbits
    uint = UINT_DTYPES[nbits]
    raw = bits_data(data, rng_bits, shape)
    if rng_bits != nbits:
        raw = lax.convert_element_type(raw, uint)
    mantissa = lax.shift_right_logical(raw, lax.full((), rng_bits - nmant, uint))
    one_bits = int(np.array(1.0, dtype).view(uint))
    in_one_two = lax.bitwise_or(mantissa, lax.full((), one_bits, uint))
    return lax.sub(lax.bitcast_convert_type(in_one_two, dtype), lax.full((), 1.0, dtype))


# ------------------------------------------------------------------ normal

def normal(key: Any, shape: Any = (), dtype: Any = None):
    """Standard normal random values (mean 0, variance 1).

    Computed as ``sqrt(2) * erf_inv(u)`` with ``u`` uniform in ``(-1, 1)``; complex
    dtypes draw independent real and imaginary parts, each of variance 1/2.

    Args:
      key: a single PRNG key.
      shape: the result's shape. Default ``()``.
      dtype: a float or complex dtype (default float32, float64 with x64).

    Returns:
      An array of ``shape`` and ``dtype``.

    Example:
      >>> random.normal(random.PRNGKey(0), (3,))
    """
    data, _ = check_key("normal", key)
    dt = dtypes.check_user_dtype(float if dtype is None else dtype, "normal")
    if not dtypes.is_inexact(dt):
        raise ValueError(f"dtype argument to `normal` must be a float or complex dtype, got "
                         f"{dt.name}")
    shape = canonical_shape(shape, "normal")
    return _normal(data, shape, dt)


def _normal(data, shape: tuple[int, ...], dtype: np.dtype):
    if dtypes.is_complex(dtype):
        real_dt = dtypes.real_dtype(dtype)
        key_re, key_im = _subkeys(data, 2)
        re = _normal_real(key_re, shape, real_dt)
        im = _normal_real(key_im, shape, real_dt)
        z = lax.complex(re, im)
        return lax.div(z, lax.full((), np.sqrt(2), dtype))
    return _normal_real(data, shape, dtype)


def _normal_real(data, shape: tuple[int, ...], dtype: np.dtype):
    low = np.nextafter(np.array(-1.0, dtype), np.array(0.0, dtype))
    u = _uniform(data, shape, dtype, low, 1.0)
    return lax.mul(lax.full((), np.sqrt(2), dtype), erf_inv(u))
