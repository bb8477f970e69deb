"""Three elementwise primitives JAX added to lax: ``square`` (``x * x``), ``clz`` (count leading
zeros) and ``mulhi`` (the high half of the double-width integer product).

They are not declared fusible: a compiling backend that does not know them runs them on the
reference kernels (``square`` is one multiply; ``clz``/``mulhi`` are rare integer tricks).
"""
from __future__ import annotations

from plax.core.primitive import Primitive
from plax.core.shaped_array import ShapedArray
from plax.lax import binary as B
from plax.lax.base import (COMPLEX, FLOAT, INT, INTEGRAL, UINT, asarray, check_dtype,
                           same_dtypes, same_shapes_or_scalar)
from plax.transforms.batching import defbroadcasting, defvectorized
from plax.transforms.jvp import defjvp, defzero

__all__ = ["square", "clz", "mulhi", "square_p", "clz_p", "mulhi_p"]

square_p = Primitive("square")
clz_p = Primitive("clz")
mulhi_p = Primitive("mulhi")


@square_p.def_abstract_eval
def _square_abstract_eval(x):
    check_dtype("square", x, (INT, UINT, FLOAT, COMPLEX))
    return ShapedArray(x.shape, x.dtype, x.weak_type)


@clz_p.def_abstract_eval
def _clz_abstract_eval(x):
    check_dtype("clz", x, INTEGRAL)
    return ShapedArray(x.shape, x.dtype, x.weak_type)


@mulhi_p.def_abstract_eval
def _mulhi_abstract_eval(x, y):
    for a in (x, y):
        check_dtype("mulhi", a, INTEGRAL)
    dt = same_dtypes("mulhi", (x, y))
    return ShapedArray(same_shapes_or_scalar("mulhi", (x, y)), dt, x.weak_type and y.weak_type)


defvectorized(square_p)
defvectorized(clz_p)
defbroadcasting(mulhi_p)
# d(x^2) = 2 x dx (for complex x too: square is holomorphic)
defjvp(square_p, lambda t, x: B.mul(t, B.mul(B.full_like_scalar(2, x), x)))
defzero(clz_p)
defzero(mulhi_p)


def square(x):
    """Elementwise square ``x * x``.

    Args:
      x: an integer, float or complex array.

    Returns:
      ``x * x`` in ``x``'s dtype (integers wrap around).

    Example:
      >>> lax.square(jnp.array([1.5, -2.0]))
      Array([2.25, 4.  ], dtype=float32)
    """
    return square_p.bind(asarray(x))


def clz(x):
    """Elementwise count of leading zero bits in ``x``'s two's complement representation.

    Args:
      x: an integer array (signed or unsigned).

    Returns:
      An array of ``x``'s dtype: the bit width for 0, 0 for negative values.

    Example:
      >>> lax.clz(jnp.array([0, 1, 255, -1], dtype=jnp.int32))
      Array([32, 31, 24,  0], dtype=int32)
    """
    return clz_p.bind(asarray(x))


def mulhi(x, y, /):
    """Elementwise high half of the double-width product ``x * y``.

    For ``N``-bit integers, the top ``N`` bits of the exact ``2N``-bit product (signed for
    signed dtypes, unsigned for unsigned ones), as in JAX.

    Args:
      x, y: integer arrays of one dtype (shapes equal or one of them rank 0).

    Returns:
      ``(x * y) >> N`` computed without overflow, in the operands' dtype.

    Example:
      >>> lax.mulhi(jnp.array([2**31 - 1], jnp.int32), jnp.array([4], jnp.int32))
      Array([1], dtype=int32)
    """
    return mulhi_p.bind(asarray(x), asarray(y))
