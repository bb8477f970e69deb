"""reduce_precision: round a float array to fewer exponent and mantissa bits, keeping its dtype.

Rounding is to nearest, ties to even; values beyond the reduced exponent range become
infinities, values below its smallest normal number become (signed) zeros, NaN stays NaN.
Its derivative is taken to be the rounding of the tangent (the primitive is treated as
linear, as in JAX), so gradients flow through emulated low-precision casts.
"""
from __future__ import annotations

import numpy as np

from plax.core.primitive import Primitive
from plax.lax.base import FLOAT, asarray, check_dtype
from plax.transforms.batching import defvectorized
from plax.transforms.jvp import Zero, deflinear

reduce_precision_p = Primitive("reduce_precision")


@reduce_precision_p.def_abstract_eval
def _reduce_precision_abstract_eval(x, *, exponent_bits, mantissa_bits):
    check_dtype("reduce_precision", x, (FLOAT,))
    if exponent_bits < 1:
        raise ValueError(f"reduce_precision: exponent_bits must be positive; got {exponent_bits}")
    if mantissa_bits < 0:
        raise ValueError(f"reduce_precision: mantissa_bits must be non-negative; got "
                         f"{mantissa_bits}")
    return x


def reduce_precision(operand, exponent_bits: int, mantissa_bits: int):
    """``operand`` rounded to a float format with ``exponent_bits`` and ``mantissa_bits``
    (e.g. 5 and 10 emulate float16), returned in ``operand``'s dtype.

    Args:
      operand: a floating-point array.
      exponent_bits: exponent width of the emulated format (at least 1).
      mantissa_bits: explicit mantissa width of the emulated format (at least 0).

    Returns:
      The rounded values.

    Example:
      >>> lax.reduce_precision(jnp.array([1.3, 70000.]), 5, 10)
      Array([1.2998047,       inf], dtype=float32)
    """
    return reduce_precision_p.bind(asarray(operand), exponent_bits=int(exponent_bits),
                                   mantissa_bits=int(mantissa_bits))


# (exponent bits, explicit mantissa bits) of each float format, by dtype name
FLOAT_FORMATS = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}


def reduce_precision_array(x, exponent_bits: int, mantissa_bits: int, xp=None):
    """The value of :data:`reduce_precision_p` on a host or device array: integer arithmetic
    on the float's bits, shared by the backends' kernels (each passes its array module).

    Unsigned integer arithmetic wraps, so the rounding carry may run into the exponent (which
    is how a value rounds up to the next binade, or to infinity); the exponent is then clamped
    to the narrower range: above it becomes a signed infinity, below its smallest normal a
    signed zero (no subnormals, as XLA).

    Args:
      x: a float16, bfloat16 (where the array module has it), float32 or float64 array.
      exponent_bits: exponent width of the emulated format (at least 1).
      mantissa_bits: explicit mantissa width of the emulated format (at least 0).
      xp: the array module of ``x`` (default NumPy).

    Returns:
      A new array of ``x``'s shape and dtype.

    Example:
      >>> import numpy as np
      >>> reduce_precision_array(np.array([1.3, 70000.], np.float32), 5, 10)
      array([1.2998047,       inf], dtype=float32)
    """
    xp = np if xp is None else xp
    src_exp, src_mant = FLOAT_FORMATS[x.dtype.name]
    uint = np.dtype(f"u{x.dtype.itemsize}")
    nbits = 8 * x.dtype.itemsize
    u = lambda v: uint.type(v & ((1 << nbits) - 1))  # noqa: E731 (a scalar of the bits' type)
    bits = (x if x.flags.c_contiguous else x.copy()).view(uint)
    if mantissa_bits < src_mant:
        drop = src_mant - mantissa_bits
        last = (bits >> u(drop)) & u(1)  # the last kept bit: ties round to even
        bits = (bits + u((1 << (drop - 1)) - 1) + last) & u(~((1 << drop) - 1))
    if exponent_bits < src_exp:
        exp_mask = ((1 << src_exp) - 1) << src_mant
        src_bias = (1 << (src_exp - 1)) - 1
        new_bias = (1 << (exponent_bits - 1)) - 1
        exponent = bits & u(exp_mask)
        sign = bits & u(1 << (nbits - 1))
        over = exponent > u((src_bias + new_bias) << src_mant)
        under = exponent <= u((src_bias - new_bias) << src_mant)
        bits = xp.where(over, sign | u(exp_mask), xp.where(under, sign, bits))
    out = bits.astype(uint).view(x.dtype).reshape(x.shape)  # astype copies: never a view of x
    # Always the select, never a test for NaNs first: on a device that test is a host read.
    return xp.where(xp.isnan(x), x, out)  # rounding may carry a NaN's payload to infinity


deflinear(reduce_precision_p, lambda ct, x, **params: [
    None if type(ct) is Zero else reduce_precision_p.bind(ct, **params)])
defvectorized(reduce_precision_p)
