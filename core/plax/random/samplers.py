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

from plax.random._util import takes_out_sharding
from plax import dtypes, lax
from plax.core.trace import get_aval
from plax import numpy as jnp
from plax.random._util import (canonical_shape, check_shape, concrete_value, float_dtype,
                               int_dtype, resolve_shape, shape_of, staged)
from plax.random._fma import fma
from plax.random._special import erf_inv, erf_inv_open
from plax.random.keys import UINT_DTYPES, bits_data, check_key, split_data
from plax.sharding_types import with_out_sharding


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
            maxval: Any = 1.0, *, out_sharding=None):
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
      Array([0.895334  , 0.95715976], dtype=float32)
    """
    if out_sharding is not None:
        return with_out_sharding(lambda: uniform(key, shape, dtype, minval, maxval), out_sharding)
    data, _ = check_key("uniform", key)
    dt = float_dtype(dtype, "uniform")
    shape = canonical_shape(shape, "uniform")
    check_shape("uniform", shape, shape_of(minval), shape_of(maxval))
    _check_ordered("uniform", minval, maxval, "minval", "maxval")
    return _uniform(data, shape, dt, minval, maxval)


@staged("shape", "dtype")
def _uniform(data, shape: tuple[int, ...], dtype: np.dtype, minval: Any = 0.0, maxval: Any = 1.0):
    exact_product = _span_is_power_of_two(minval, maxval, dtype)
    minval = _param(minval, dtype)
    maxval = _param(maxval, dtype)
    floats = _unit_floats(data, shape, dtype)
    span = jnp.subtract(maxval, minval)
    if exact_product:
        # floats * span is exact, so one rounding happens either way
        scaled = jnp.add(jnp.multiply(floats, span), minval)
    else:
        # JAX's compiler fuses this multiply-add into one FMA (a single rounding); match it
        span_b, min_b = jnp.broadcast_to(span, shape), jnp.broadcast_to(minval, shape)
        scaled = fma(floats, span_b, min_b)
    return jnp.maximum(minval, scaled)


def _span_is_power_of_two(minval: Any, maxval: Any, dtype: np.dtype) -> bool:
    """Whether the bounds are concrete and ``maxval - minval`` (in ``dtype``) is a power of two
    (or zero) everywhere, so that scaling a uniform float by it is exact."""
    low, high = concrete_value(minval), concrete_value(maxval)
    if low is None or high is None:
        return False
    with np.errstate(all="ignore"):
        span = high.astype(dtype) - low.astype(dtype)
        mantissa, _ = np.frexp(span.astype(np.float64))
    return bool(np.all((np.abs(mantissa) == 0.5) | (span == 0)))


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

def normal(key: Any, shape: Any = (), dtype: Any = None, *, out_sharding=None):
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
      Array([ 1.6226422 ,  2.0252647 , -0.43359444], dtype=float32)
    """
    if out_sharding is not None:
        return with_out_sharding(lambda: normal(key, shape, dtype), out_sharding)
    data, _ = check_key("normal", key)
    dt = dtypes.check_user_dtype(float if dtype is None else dtype, None)
    if not dtypes.is_inexact(dt):
        raise ValueError(f"dtype argument to `normal` must be a float or complex dtype, got "
                         f"{dt.name}")
    shape = canonical_shape(shape, "normal")
    return _normal(data, shape, dt)


@staged("shape", "dtype")
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
    u = _uniform(data, shape, dtype, low, 1.0)  # in [low, 1): never +-1
    return lax.mul(lax.full((), np.sqrt(2), dtype), erf_inv_open(u))


# ------------------------------------------------------------------ truncated normal

def truncated_normal(key: Any, lower: Any, upper: Any, shape: Any = None, dtype: Any = None, *,
                     out_sharding=None):
    """Standard normal values truncated to the open interval ``(lower, upper)``.

    Inverts the normal CDF on a uniform draw between ``erf(lower/√2)`` and
    ``erf(upper/√2)``, then clamps into the open interval (JAX's algorithm).

    Args:
      key: a single PRNG key.
      lower, upper: bounds, broadcast-compatible with each other and with ``shape``.
      shape: the result's shape (default: the bounds' broadcast shape).
      dtype: a float dtype.

    Raises:
      ValueError: for a non-float dtype, incompatible shapes, or ``lower > upper``.

    Example:
      >>> jnp.round(random.truncated_normal(random.PRNGKey(0), -1.0, 2.0, (3,)), 4)
      Array([ 1.5095,  1.7474, -0.1747], dtype=float32)
    """
    if out_sharding is not None:
        return with_out_sharding(lambda: truncated_normal(key, lower, upper, shape, dtype),
                                 out_sharding)
    data, _ = check_key("truncated_normal", key)
    dt = float_dtype(dtype, "truncated_normal")
    shape = resolve_shape("truncated_normal", shape, lower, upper)
    _check_ordered("truncated_normal", lower, upper, "lower", "upper")
    return _truncated_normal(data, lower, upper, shape, dt)


@staged("shape", "dtype")
def _truncated_normal(data, lower, upper, shape, dtype):
    sqrt2 = lax.full((), np.sqrt(2), dtype)
    lower = _param(lower, dtype)
    upper = _param(upper, dtype)
    a = lax.erf(jnp.divide(lower, sqrt2))
    b = lax.erf(jnp.divide(upper, sqrt2))
    u = _uniform(data, shape, dtype, a, b)
    out = jnp.multiply(sqrt2, erf_inv(u))
    low = lax.nextafter(lax.stop_gradient(lower), lax.full_like(lower, np.inf))
    high = lax.nextafter(lax.stop_gradient(upper), lax.full_like(upper, -np.inf))
    return jnp.clip(out, low, high)


# ------------------------------------------------------------------ bernoulli / rademacher

def bernoulli(key: Any, p: Any = 0.5, shape: Any = None, mode: str = "low", *, out_sharding=None):
    """Booleans that are True with probability ``p``.

    Args:
      key: a single PRNG key.
      p: the probability (a float or float array), broadcast-compatible with ``shape``.
      shape: the result's shape (default: the shape of ``p``).
      mode: ``"low"`` (one uniform per value) or ``"high"`` (two, exact for tiny ``p``).

    Raises:
      TypeError: if ``p`` is not a float.
      ValueError: for an unknown mode or incompatible shapes.

    Example:
      >>> random.bernoulli(random.PRNGKey(0), 0.3, (5,))
      Array([False, False, False, False, False], dtype=bool)
    """
    if out_sharding is not None:
        return with_out_sharding(lambda: bernoulli(key, p, shape, mode), out_sharding)
    if mode not in ("high", "low"):
        raise ValueError(f"got mode={mode!r}, expected 'high' or 'low'")
    data, _ = check_key("bernoulli", key)
    p_dtype = dtypes.dtype(p)
    if not dtypes.is_float(p_dtype):
        raise TypeError(f"bernoulli probability `p` must have a floating dtype, got "
                        f"{p_dtype.name}.")
    shape = resolve_shape("bernoulli", shape, p)
    return _bernoulli(data, jnp.asarray(p), shape, mode)


@staged("shape", "mode")
def _bernoulli(data, p, shape, mode: str = "low"):
    dtype = get_aval(p).dtype
    if mode == "high":
        pair = _uniform(data, (2,) + tuple(shape), dtype)
        u1, u2 = pair[0], pair[1]
        u2 = jnp.multiply(u2, lax.full((), 2.0 ** -dtypes.finfo(dtype).nmant, dtype))
        return jnp.less(u2, jnp.subtract(p, u1))
    return jnp.less(_uniform(data, shape, dtype), p)


@takes_out_sharding
def rademacher(key: Any, shape: Any = (), dtype: Any = None):
    """Random signs: -1 or +1 with equal probability.

    Example:
      >>> random.rademacher(random.PRNGKey(0), (4,))
      Array([-1, -1,  1,  1], dtype=int32)
    """
    data, _ = check_key("rademacher", key)
    dt = dtypes.check_user_dtype(int if dtype is None else dtype, None)
    shape = canonical_shape(shape, "rademacher")
    return _rademacher(data, shape, dt)


def _rademacher(data, shape, dtype):
    flips = _bernoulli(data, jnp.asarray(0.5), shape)
    signs = jnp.subtract(jnp.multiply(2, flips.astype(jnp.int32)), 1)
    return signs.astype(dtype)


# ------------------------------------------------------------------ randint

def randint(key: Any, shape: Any, minval: Any, maxval: Any, dtype: Any = None, *,
            out_sharding=None):
    """Uniform random integers in ``[minval, maxval)``.

    Like JAX, twice the needed random bits are reduced modulo the range, so the
    bias is negligible unless the range is close to the dtype's size.

    Args:
      key: a single PRNG key.
      shape: the result's shape.
      minval, maxval: integer bounds (inclusive, exclusive), broadcast-compatible with shape.
        ``minval == maxval`` returns ``minval``; values are clipped to the dtype's range.
      dtype: an integer dtype (default int32, int64 with x64).

    Raises:
      ValueError: for a non-integer dtype, incompatible shapes, or ``minval > maxval``.

    Example:
      >>> random.randint(random.PRNGKey(0), (3,), 0, 10)
      Array([9, 0, 2], dtype=int32)
    """
    if out_sharding is not None:
        return with_out_sharding(lambda: randint(key, shape, minval, maxval, dtype), out_sharding)
    data, _ = check_key("randint", key)
    dt = int_dtype(dtype, "randint")
    shape = canonical_shape(shape, "randint")
    check_shape("randint", shape, shape_of(minval), shape_of(maxval))
    _check_ordered("randint", minval, maxval, "minval", "maxval")
    return _randint_any(data, shape, minval, maxval, dt)


def _randint_any(data, shape, minval, maxval, dtype):
    info = dtypes.iinfo(dtype)
    if info.bits < 32:
        # sample in 32 bits (less bias), after clipping the bounds to the target's range
        minval = jnp.clip(jnp.asarray(minval).astype(jnp.int32), int(info.min), int(info.max))
        maxval = jnp.clip(jnp.asarray(maxval).astype(jnp.int32), int(info.min), int(info.max) + 1)
        return _randint(data, shape, minval, maxval, np.dtype(np.int32)).astype(dtype)
    return _randint(data, shape, minval, maxval, dtype)


def _clip_to(val, dtype):
    """``val`` (an integer array) converted to ``dtype``, clipping instead of wrapping."""
    src = dtypes.iinfo(get_aval(val).dtype)
    dst = dtypes.iinfo(dtype)
    low = lax.full((), max(int(dst.min), int(src.min)), get_aval(val).dtype)
    high = lax.full((), min(int(dst.max), int(src.max)), get_aval(val).dtype)
    return lax.convert_element_type(lax.clamp(low, val, high), dtype)


@staged("shape", "dtype")
def _randint(data, shape, minval, maxval, dtype):
    minval, maxval = jnp.asarray(minval), jnp.asarray(maxval)
    if not dtypes.is_integer(get_aval(minval).dtype):
        minval = minval.astype(int)
    if not dtypes.is_integer(get_aval(maxval).dtype):
        maxval = maxval.astype(int)
    # maxval above the dtype's range (e.g. 256 for uint8) means "up to and including its max"
    top = _clip_to(lax.full((), int(dtypes.iinfo(dtype).max), dtype), get_aval(maxval).dtype)
    maxval_out_of_range = jnp.greater(maxval, top)
    minval = jnp.broadcast_to(_clip_to(minval, dtype), shape)
    maxval = jnp.broadcast_to(_clip_to(maxval, dtype), shape)
    maxval_out_of_range = jnp.broadcast_to(maxval_out_of_range, shape)
    nbits = dtypes.iinfo(dtype).bits
    k1, k2 = _subkeys(data, 2)
    higher = bits_data(k1, nbits, shape)
    lower = bits_data(k2, nbits, shape)
    unsigned = UINT_DTYPES[nbits]
    span = lax.convert_element_type(lax.sub(maxval, minval), unsigned)
    one = lax.full((), 1, unsigned)
    empty = lax.le(maxval, minval)
    span = lax.select(empty, lax.full_like(span, 1), span)
    span = lax.select(lax.bitwise_and(maxval_out_of_range, lax.bitwise_not(empty)),
                      lax.add(span, jnp.broadcast_to(one, shape)), span)
    # (hi * 2**nbits + lo) mod span, without overflow: 2**nbits mod span via its square root
    half = lax.full(shape, 2 ** (nbits // 2), unsigned)
    multiplier = lax.rem(half, span)
    multiplier = lax.rem(lax.mul(multiplier, multiplier), span)
    offset = lax.add(lax.mul(lax.rem(higher, span), multiplier), lax.rem(lower, span))
    offset = lax.rem(offset, span)
    return lax.add(minval, lax.convert_element_type(offset, dtype))


# ------------------------------------------------------------------ one-uniform transforms

@takes_out_sharding
def exponential(key: Any, shape: Any = (), dtype: Any = None):
    """Exponential random values (rate 1): ``-log1p(-u)``.

    Example:
      >>> random.exponential(random.PRNGKey(0), (3,))
      Array([2.950128  , 3.8434246 , 0.40390354], dtype=float32)
    """
    data, _ = check_key("exponential", key)
    dt = float_dtype(dtype, "exponential")
    return _exponential(data, canonical_shape(shape, "exponential"), dt)


@staged("shape", "dtype")
def _exponential(data, shape, dtype):
    u = _uniform(data, shape, dtype)
    return lax.neg(lax.log1p(lax.neg(u)))


@takes_out_sharding
def laplace(key: Any, shape: Any = (), dtype: Any = None):
    """Laplace random values: density ``exp(-|x|) / 2``.

    Example:
      >>> jnp.round(random.laplace(random.PRNGKey(0), (3,)), 4)
      Array([-2.257 , -3.1503,  0.4086], dtype=float32)
    """
    data, _ = check_key("laplace", key)
    dt = float_dtype(dtype, "laplace")
    return _laplace(data, canonical_shape(shape, "laplace"), dt)


def _laplace(data, shape, dtype):
    low = -1.0 + float(dtypes.finfo(dtype).epsneg)
    u = _uniform(data, shape, dtype, np.array(low, dtype), 1.0)
    return lax.mul(lax.sign(u), lax.log1p(lax.neg(lax.abs(u))))


@takes_out_sharding
def logistic(key: Any, shape: Any = (), dtype: Any = None):
    """Logistic random values: ``log(u) - log1p(-u)``.

    Example:
      >>> random.logistic(random.PRNGKey(0), (3,))
      Array([ 2.896376 ,  3.8217716, -0.6978392], dtype=float32)
    """
    data, _ = check_key("logistic", key)
    dt = float_dtype(dtype, "logistic")
    return _logistic(data, canonical_shape(shape, "logistic"), dt)


def _logistic(data, shape, dtype):
    u = _uniform(data, shape, dtype, np.array(dtypes.finfo(dtype).tiny, dtype), 1.0)
    return lax.sub(lax.log(u), lax.log1p(lax.neg(u)))


@takes_out_sharding
def cauchy(key: Any, shape: Any = (), dtype: Any = None):
    """Cauchy random values: ``tan(pi * (u - 1/2))``.

    Example:
      >>> random.cauchy(random.PRNGKey(0), (3,))
      Array([ 6.0274944 , 14.837895  , -0.58172226], dtype=float32)
    """
    data, _ = check_key("cauchy", key)
    dt = float_dtype(dtype, "cauchy")
    return _cauchy(data, canonical_shape(shape, "cauchy"), dt)


def _cauchy(data, shape, dtype):
    u = _uniform(data, shape, dtype, np.array(dtypes.finfo(dtype).eps, dtype), 1.0)
    pi = lax.full((), np.pi, dtype)
    return lax.tan(lax.mul(pi, lax.sub(u, lax.full((), 0.5, dtype))))


# ------------------------------------------------------------------ gumbel

@takes_out_sharding
def gumbel(key: Any, shape: Any = (), dtype: Any = None, mode: str | None = None):
    """Gumbel random values: ``-log(-log(u))``.

    Args:
      key: a single PRNG key.
      shape: the result's shape. Default ``()``.
      dtype: a float dtype.
      mode: ``"low"`` (default), ``"high"`` (two uniforms, a wider range) or ``"highest"``
        (float32 only: 64 random bits per value).

    Example:
      >>> random.gumbel(random.PRNGKey(0), (3,))
      Array([ 2.9233725 ,  3.8326178 , -0.09689324], dtype=float32)
    """
    data, _ = check_key("gumbel", key)
    dt = float_dtype(dtype, "gumbel")
    mode = "low" if mode is None else mode
    if mode not in ("highest", "high", "low"):
        raise ValueError(f"Must provide valid mode for gumbel got: {mode}")
    return _gumbel(data, canonical_shape(shape, "gumbel"), dt, mode)


def _gumbel(data, shape, dtype, mode: str = "low"):
    info = dtypes.finfo(dtype)
    if dtype == np.float32 and mode == "highest":
        return _gumbel_highest(data, shape)
    if mode in ("high", "highest"):
        pair = _uniform(data, (2,) + tuple(shape), dtype)
        high, low = pair[0], pair[1]
        refined = jnp.add(jnp.add(high, jnp.multiply(lax.full((), 2.0 ** -info.nmant, dtype), low)),
                          lax.full((), float(info.tiny), dtype))
        x = jnp.where(jnp.greater_equal(high, 0.5), high, refined)
        return lax.neg(lax.log(lax.neg(lax.log1p(lax.neg(x)))))
    u = _uniform(data, shape, dtype, np.array(info.tiny, dtype), 1.0)
    return lax.neg(lax.log(lax.neg(lax.log(u))))


def _count_leading_zeros(x):
    """Leading zero bits of each uint32 (32 for 0)."""
    u32 = np.dtype(np.uint32)
    smeared = x
    for s in (1, 2, 4, 8, 16):
        smeared = lax.bitwise_or(smeared, lax.shift_right_logical(smeared, lax.full((), s, u32)))
    return lax.sub(lax.full((), 32, u32), lax.population_count(smeared))


def _gumbel_highest(data, shape):
    """Float32 gumbel from 64 random bits per value, as a fixed-point number in (0, 1)."""
    u32 = np.dtype(np.uint32)
    raw = bits_data(data, 32, (2,) + tuple(shape))
    hi, lo = raw[0], raw[1]
    all_ones = lax.full((), 0xFFFFFFFF, u32)
    # 1 - bits in 64-bit fixed point: the complement plus one, with the carry into the high word
    neg_hi = lax.add(lax.bitwise_not(hi),
                     lax.convert_element_type(lax.eq(lax.bitwise_not(lo), all_ones), u32))
    neg_lo = lax.add(lax.bitwise_not(lo), lax.full((), 1, u32))
    flip = lax.lt(hi, lax.full((), 1 << 31, u32))
    sel_hi = lax.select(flip, hi, neg_hi)
    sel_lo = lax.select(flip, lo, neg_lo)
    x = _fixed_point_to_float32(sel_hi, sel_lo)
    small = lax.neg(lax.log(lax.neg(lax.log1p(lax.neg(x)))))
    large = lax.neg(lax.log(lax.neg(lax.log(x))))
    return lax.select(flip, small, large)


def _fixed_point_to_float32(hi, lo):
    """The float32 nearest below the 64-bit fixed-point fraction ``hi:lo`` in (0, 1)."""
    u32 = np.dtype(np.uint32)
    finfo = dtypes.finfo(np.float32)
    hi_clz = _count_leading_zeros(hi)
    lo_clz = _count_leading_zeros(lo)
    hi_all_zero = lax.eq(hi_clz, lax.full((), 32, u32))
    mantissa = lax.bitwise_or(
        lax.shift_left(hi, hi_clz),
        lax.select(hi_all_zero, lax.shift_left(lo, lo_clz),
                   lax.shift_right_logical(lo, lax.sub(lax.full((), 32, u32), hi_clz))))
    mantissa = lax.shift_right_logical(mantissa, lax.full((), 32 - finfo.nmant - 1, u32))
    mantissa = lax.bitwise_and(mantissa, lax.full((), (1 << finfo.nmant) - 1, u32))
    leading = lax.select(hi_all_zero, lax.add(lax.full((), 32, u32), lo_clz), hi_clz)
    exponent = lax.shift_left(lax.sub(lax.full((), -finfo.minexp, u32), leading),
                              lax.full((), finfo.nmant, u32))
    exponent = lax.bitwise_and(exponent, lax.full((), (1 << 30) - (1 << (finfo.nmant - 1)), u32))
    return lax.bitcast_convert_type(lax.bitwise_or(exponent, mantissa), np.float32)
