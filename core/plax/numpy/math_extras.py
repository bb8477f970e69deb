"""Elementwise extras of plax.numpy beside the ufuncs: frexp, ldexp, gcd, lcm, modf, spacing,
fabs, pow, bitwise_count, i0, and the small products matvec and vecmat, plus sort_complex.

frexp and ldexp work on the bits of IEEE floats (exact, subnormals included); gcd runs
Euclid's algorithm in a ``while_loop`` so it stays jittable and batchable.
"""
from __future__ import annotations

import numpy as np

from plax import dtypes, lax
from plax.core.trace import get_aval
from plax.transforms.jit import jit_when_traced
from plax.numpy.ufuncs import power as pow  # noqa: A001 - NumPy 2's name for power
from plax.numpy.util import (asarray_weak, check_arraylike, promote_args, promote_args_inexact,
                             reject_out, to_dtype, to_inexact_dtype)

__all__ = ["frexp", "ldexp", "gcd", "lcm", "modf", "spacing", "fabs", "pow", "bitwise_count",
           "i0", "sort_complex", "matvec", "vecmat"]

# IEEE layout per float dtype: (unsigned int type of the same width, mantissa bits, bias)
_LAYOUT = {np.dtype(np.float16): (np.uint16, 10, 15), np.dtype(np.float32): (np.uint32, 23, 127),
           np.dtype(np.float64): (np.uint64, 52, 1023)}


def _layout(dt: np.dtype):
    if dt in _LAYOUT:
        return _LAYOUT[dt]
    if dt == dtypes.bfloat16:
        return np.uint16, 7, 127
    raise TypeError(f"no IEEE layout for {dt}")


def _reject_complex(name: str, x) -> None:
    if dtypes.is_complex(get_aval(x).dtype):
        raise TypeError(f"jnp.{name} does not support complex-valued inputs.")


def _pow2(k, dt: np.dtype):
    """``2.0 ** k`` of float dtype ``dt`` for integer ``k`` in the normal exponent range, built
    from its bits (exact, unlike exp2)."""
    uint, mant, bias = _layout(dt)
    k = lax.convert_element_type(lax.add(k, lax.full((), bias, get_aval(k).dtype)), uint)
    bits = lax.shift_left(k, lax.full((), mant, uint))
    return lax.bitcast_convert_type(bits, dt)


@jit_when_traced(name="frexp")
def frexp(x, /):
    """Splits ``x`` into mantissa and exponent: ``x == mantissa * 2**exponent``.

    Args:
      x: a real array (integers are converted to float).

    Returns:
      ``(mantissa, exponent)``: the mantissa in ``[0.5, 1)`` in magnitude (0, inf and NaN pass
      through with exponent 0) and an int32 exponent.

    Example:
      >>> jnp.frexp(jnp.array([8., 0.75]))
      (Array([0.5 , 0.75], dtype=float32), Array([4, 0], dtype=int32))
    """
    check_arraylike("frexp", x)
    x = asarray_weak(x)
    _reject_complex("frexp", x)
    dt = to_inexact_dtype(get_aval(x).dtype)
    x = to_dtype(x, dt, False)
    uint, mant, bias = _layout(dt)
    # subnormals: scale into the normal range first, and remember the shift
    tiny = lax.lt(lax.abs(x), lax.full((), np.finfo(dt).tiny, dt))
    shift = mant + 1
    scaled = lax.select(tiny, lax.mul(x, lax.full((), 2.0 ** shift, dt)), x)
    bits = lax.bitcast_convert_type(scaled, uint)
    exp_field = lax.bitwise_and(lax.shift_right_logical(bits, lax.full((), mant, uint)),
                                lax.full((), (1 << (np.dtype(uint).itemsize * 8 - 1 - mant)) - 1,
                                         uint))
    exponent = lax.sub(lax.convert_element_type(exp_field, np.int32),
                       lax.full((), bias - 1, np.int32))
    exponent = lax.select(tiny, lax.sub(exponent, lax.full((), shift, np.int32)), exponent)
    special = lax.bitwise_or(lax.eq(x, lax.full((), 0, dt)),
                             lax.bitwise_not(lax.is_finite(x)))
    # x scaled by an exact power of two: bit-exact, and differentiable in x as in JAX
    safe_exp = lax.select(special, lax.full(get_aval(exponent).shape, 0, np.int32), exponent)
    mantissa = ldexp(x, lax.neg(safe_exp))
    mantissa = lax.select(special, x, mantissa)
    exponent = lax.select(special, lax.full(get_aval(exponent).shape, 0, np.int32), exponent)
    return mantissa, exponent


@jit_when_traced(name="ldexp")
def ldexp(x1, x2, /):
    """``x1 * 2**x2``, exactly (the result is rounded once, to a subnormal or to inf).

    Args:
      x1: the mantissas (integers are converted to float).
      x2: integer exponents.

    Returns:
      An array of ``x1``'s inexact dtype.

    Example:
      >>> jnp.ldexp(jnp.array([0.5, 3.]), jnp.array([4, -1]))
      Array([8. , 1.5], dtype=float32)
    """
    check_arraylike("ldexp", x1, x2)
    x2a = asarray_weak(x2)
    if (not dtypes.is_integer(get_aval(x2a).dtype)
            or dtypes.is_complex(get_aval(asarray_weak(x1)).dtype)):
        raise ValueError(f"ldexp not supported for input types {(get_aval(asarray_weak(x1)).dtype, get_aval(x2a).dtype)}")
    (x1,) = promote_args_inexact("ldexp", x1)
    dt = get_aval(x1).dtype
    # 16-bit floats are scaled in float32 (exact), so the result is rounded only once
    compute = np.dtype(np.float32) if dt.itemsize == 2 else dt
    x1 = to_dtype(x1, compute, False)
    _, _, bias = _layout(compute)
    from plax.numpy.util import promote_shapes
    x1, e = promote_shapes("ldexp", x1, lax.convert_element_type(x2a, np.int32))
    # three factors, each a normal power of two, cover every exponent that can matter
    limit = 3 * (bias - 3)
    e = lax.clamp(lax.full((), -limit, np.int32), e, lax.full((), limit, np.int32))
    third = lax.div(e, lax.full((), 3, np.int32))
    rest = lax.sub(e, lax.mul(third, lax.full((), 2, np.int32)))
    out = lax.mul(lax.mul(x1, _pow2(third, compute)), _pow2(third, compute))
    return lax.convert_element_type(lax.mul(out, _pow2(rest, compute)), dt)


def _int_args(name: str, x1, x2):
    check_arraylike(name, x1, x2)
    x1, x2 = promote_args(name, x1, x2)
    if not dtypes.is_integer(get_aval(x1).dtype) or get_aval(x1).dtype == np.bool_:
        raise ValueError(f"Arguments to jax.numpy.{name} must be integers.")
    return x1, x2


def _int_abs(x):
    if np.dtype(get_aval(x).dtype).kind == "u":
        return x
    return lax.abs(x)


def _gcd(x1, x2):
    """Euclid on ``|x1|, |x2|`` (already of one integer dtype and shape)."""
    from plax.numpy.util import broadcast_shapes, broadcast_to
    shape = broadcast_shapes(get_aval(x1).shape, get_aval(x2).shape)
    a, b = broadcast_to(_int_abs(x1), shape), broadcast_to(_int_abs(x2), shape)
    zero = lax.full(shape, 0, get_aval(a).dtype)
    one = lax.full(shape, 1, get_aval(a).dtype)

    def cond(ab):
        return lax.reduce_or(lax.ne(ab[1], zero), tuple(range(len(shape))))

    def body(ab):
        a, b = ab
        nz = lax.ne(b, zero)
        return lax.select(nz, b, a), lax.select(nz, lax.rem(a, lax.select(nz, b, one)), zero)

    return lax.while_loop(cond, body, (a, b))[0]


@jit_when_traced(name="gcd")
def gcd(x1, x2):
    """Greatest common divisor of ``|x1|`` and ``|x2|`` (``gcd(0, 0) == 0``).

    Args:
      x1, x2: integer arrays, broadcast together.

    Returns:
      The non-negative GCD in the promoted integer dtype.

    Example:
      >>> jnp.gcd(jnp.array([12, -8, 0]), 18)
      Array([ 6,  2, 18], dtype=int32)
    """
    x1, x2 = _int_args("gcd", x1, x2)
    a = get_aval(x1)
    return lax.convert_element_type(_gcd(x1, x2), a.dtype, a.weak_type)


@jit_when_traced(name="lcm")
def lcm(x1, x2):
    """Least common multiple of ``|x1|`` and ``|x2|`` (0 if either is 0).

    Example:
      >>> jnp.lcm(jnp.array([4, -6, 0]), 6)
      Array([12,  6,  0], dtype=int32)
    """
    x1, x2 = _int_args("lcm", x1, x2)
    d = _gcd(x1, x2)
    zero = lax.full((), 0, get_aval(d).dtype)
    is_zero = lax.eq(d, zero)
    from plax.numpy.util import broadcast_to
    shape = get_aval(d).shape
    a, b = broadcast_to(_int_abs(x1), shape), broadcast_to(_int_abs(x2), shape)
    safe = lax.select(is_zero, lax.full(shape, 1, get_aval(d).dtype), d)
    out = lax.select(is_zero, lax.full(shape, 0, get_aval(d).dtype),
                     lax.mul(a, lax.div(b, safe)))
    return lax.convert_element_type(out, get_aval(x1).dtype, get_aval(x1).weak_type)


@jit_when_traced(name="modf")
def modf(x, /, out=None):
    """Fractional and integral parts of ``x``, both with ``x``'s sign.

    Returns:
      ``(x - trunc(x), trunc(x))`` as floats (as JAX, an infinite ``x`` gives a NaN
      fraction, where NumPy gives 0).

    Example:
      >>> jnp.modf(jnp.array([2.5, -1.25]))
      (Array([ 0.5 , -0.25], dtype=float32), Array([ 2., -1.], dtype=float32))
    """
    reject_out(out, "modf")
    check_arraylike("modf", x)
    (x,) = promote_args_inexact("modf", x)
    _reject_complex("modf", x)
    from plax.numpy.ufuncs import trunc
    whole = trunc(x)
    return lax.sub(x, whole), whole


@jit_when_traced(name="spacing")
def spacing(x, /):
    """Distance from ``x`` to the next representable float away from zero (the ULP).

    Returns:
      A float array of ``x``'s inexact dtype; negative for negative ``x``; NaN for inf/NaN.

    Example:
      >>> jnp.spacing(jnp.array([1., -1.]))
      Array([ 1.1920929e-07, -1.1920929e-07], dtype=float32)
    """
    check_arraylike("spacing", x)
    (x,) = promote_args_inexact("spacing", x)
    if dtypes.is_complex(get_aval(x).dtype):
        raise ValueError("jnp.spacing is not defined for complex inputs.")
    dt = get_aval(x).dtype
    x = to_dtype(x, dt, False)
    from plax.numpy.ufuncs import copysign
    inf = lax.full(get_aval(x).shape, np.inf, dt)
    if dt == np.float16:  # as NumPy (and JAX): float16 spacing always points up
        return lax.sub(lax.nextafter(x, inf), x)
    step = lax.sub(lax.nextafter(x, copysign(inf, x)), x)
    # a zero step (flushed subnormals) becomes the smallest subnormal, signed like x
    tiniest = copysign(lax.full(get_aval(x).shape, dtypes.finfo(dt).smallest_subnormal, dt), x)
    return lax.select(lax.eq(step, lax.full((), 0, dt)), tiniest, step)


@jit_when_traced(name="fabs")
def fabs(x, /):
    """Absolute value as a float (integers are converted; complex is rejected).

    Example:
      >>> jnp.fabs(jnp.array([-2, 3]))
      Array([2., 3.], dtype=float32)
    """
    check_arraylike("fabs", x)
    (x,) = promote_args_inexact("fabs", x)
    _reject_complex("fabs", x)
    return lax.abs(x)


@jit_when_traced(name="bitwise_count")
def bitwise_count(x, /):
    """Number of 1 bits in ``|x|`` (NumPy's popcount of the absolute value).

    Returns:
      A uint8 array.

    Example:
      >>> jnp.bitwise_count(jnp.array([7, -3, 0]))
      Array([3, 2, 0], dtype=uint8)
    """
    check_arraylike("bitwise_count", x)
    x = asarray_weak(x)
    dt = get_aval(x).dtype
    if not (dtypes.is_integer(dt) or dt == np.bool_):
        raise TypeError(f"bitwise_count requires integer or boolean input, got {dt}")
    x = to_dtype(x, np.dtype(np.uint8) if dt == np.bool_ else dt, False)
    return lax.convert_element_type(lax.population_count(_int_abs(x)), np.uint8)


@jit_when_traced(name="i0")
def i0(x):
    """Modified Bessel function of the first kind, order 0, of a real ``x``.

    Computed as ``exp(|x|) * i0e(|x|)``; its derivative is ``i1(x)``.

    Example:
      >>> jnp.round(jnp.i0(jnp.array([0., 1.])), 5)
      Array([1.     , 1.26607], dtype=float32)
    """
    check_arraylike("i0", x)
    (x,) = promote_args_inexact("i0", x)
    if dtypes.is_complex(get_aval(x).dtype):
        raise ValueError("i0 does not support complex-valued inputs.")
    ax = lax.abs(x)
    return lax.mul(lax.exp(ax), lax.bessel_i0e(ax))


@jit_when_traced(name="sort_complex")
def sort_complex(a):
    """``a`` sorted along its last axis (real part, then imaginary part) as complex numbers.

    Example:
      >>> jnp.sort_complex(jnp.array([3, 1, 2]))
      Array([1.+0.j, 2.+0.j, 3.+0.j], dtype=complex64)
    """
    check_arraylike("sort_complex", a)
    a = asarray_weak(a)
    if get_aval(a).ndim == 0:
        raise ValueError("sort_complex requires an array of rank >= 1")
    from plax.numpy.searching import sort
    out = sort(a, axis=-1)
    dt = dtypes.canonicalize_dtype(np.promote_types(np.dtype(get_aval(out).dtype).name
                                                    if get_aval(out).dtype != dtypes.bfloat16
                                                    else "float32", np.complex64))
    return lax.convert_element_type(out, dt)


@jit_when_traced(name="matvec")
def matvec(x1, x2, /):
    """Matrix-vector product over the last two axes of ``x1`` and the last of ``x2``, leading
    axes broadcast (NumPy 2.2's matvec).

    Args:
      x1: an array of shape ``(..., m, n)``.
      x2: an array of shape ``(..., n)``.

    Returns:
      An array of shape ``(..., m)``.

    Example:
      >>> jnp.matvec(jnp.eye(2) * 2, jnp.array([1., 3.]))
      Array([2., 6.], dtype=float32)
    """
    check_arraylike("matvec", x1, x2)
    from plax.numpy.products import matmul
    x1, x2 = asarray_weak(x1), asarray_weak(x2)
    if get_aval(x1).ndim < 2 or get_aval(x2).ndim < 1:
        raise ValueError("matvec requires x1 of rank >= 2 and x2 of rank >= 1, got shapes "
                         f"{get_aval(x1).shape} and {get_aval(x2).shape}")
    out = matmul(x1, lax.expand_dims(x2, (get_aval(x2).ndim,)))
    return lax.squeeze(out, (get_aval(out).ndim - 1,))


@jit_when_traced(name="vecmat")
def vecmat(x1, x2, /):
    """Vector-matrix product ``conj(x1) @ x2`` over the last axis of ``x1`` and the last two
    of ``x2``, leading axes broadcast (NumPy 2.2's vecmat).

    Args:
      x1: an array of shape ``(..., m)`` (conjugated if complex).
      x2: an array of shape ``(..., m, n)``.

    Returns:
      An array of shape ``(..., n)``.

    Example:
      >>> jnp.vecmat(jnp.array([1., 3.]), jnp.eye(2) * 2)
      Array([2., 6.], dtype=float32)
    """
    check_arraylike("vecmat", x1, x2)
    from plax.numpy.products import matmul
    x1, x2 = asarray_weak(x1), asarray_weak(x2)
    if get_aval(x1).ndim < 1 or get_aval(x2).ndim < 2:
        raise ValueError("vecmat requires x1 of rank >= 1 and x2 of rank >= 2, got shapes "
                         f"{get_aval(x1).shape} and {get_aval(x2).shape}")
    if dtypes.is_complex(get_aval(x1).dtype):
        x1 = lax.conj(x1)
    out = matmul(lax.expand_dims(x1, (get_aval(x1).ndim - 1,)), x2)
    return lax.squeeze(out, (get_aval(out).ndim - 2,))
