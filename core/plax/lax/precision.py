"""reduce_precision: round a float array to fewer exponent and mantissa bits, keeping its dtype.

Rounding is to nearest, ties to even; values beyond the reduced exponent range become
infinities, values below its smallest normal number become (signed) zeros, NaN stays NaN.
Its derivative is taken to be the rounding of the tangent (the primitive is treated as
linear, as in JAX), so gradients flow through emulated low-precision casts.
"""
from __future__ import annotations

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


deflinear(reduce_precision_p, lambda ct, x, **params: [
    None if type(ct) is Zero else reduce_precision_p.bind(ct, **params)])
defvectorized(reduce_precision_p)
