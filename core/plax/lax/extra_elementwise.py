"""Three elementwise primitives JAX added to lax: ``square`` (``x * x``), ``clz`` (count leading
zeros) and ``mulhi`` (the high half of the double-width integer product).

``square`` is declared fusible (elementwise): the generators write it as ``integer_pow`` with
``y=2`` (:func:`plax.lowering.fusion.integer_exponent`), so ``jnp.hypot`` and ``jnp.square`` stay
in a fused kernel and in the Numba backend's native loops. ``clz`` and ``mulhi`` are not: a
compiling backend runs them on its kernels for one equation (rare integer tricks).
"""
from __future__ import annotations

import numpy as np

from plax.core.primitive import Primitive
from plax.core.shaped_array import ShapedArray
from plax.lax import binary as B
from plax.lowering.fusion import ELEMENTWISE, register_fusible
from plax.lax.base import (COMPLEX, FLOAT, INT, INTEGRAL, UINT, asarray, check_dtype,
                           same_dtypes, broadcasting_shape)
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
    return ShapedArray(broadcasting_shape("mulhi", (x, y)), dt, x.weak_type and y.weak_type)


register_fusible(square_p, ELEMENTWISE)
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


# ---------------------------------------------------------------- the values, for the backends
# Array-module-generic: the NumPy reference kernels and the CuPy kernels both call these with
# their module (``xp``), so the integer tricks are written once.

def _contiguous(x):
    # (not xp.ascontiguousarray: NumPy's makes a rank-0 array rank 1)
    return x if x.flags.c_contiguous else x.copy()


def clz_array(x, xp=None):
    """The value of :data:`clz_p` on a host or device integer array: a binary search for the
    highest set bit, halving the window while its upper half is empty.

    Args:
      x: an integer array.
      xp: the array module of ``x`` (default NumPy).

    Returns:
      The count of leading zero bits of each element, in ``x``'s dtype.

    Example:
      >>> import numpy as np
      >>> clz_array(np.array([1, 0, -1], np.int8))
      array([7, 8, 0], dtype=int8)
    """
    xp = np if xp is None else xp
    bits = 8 * x.dtype.itemsize
    u = _contiguous(x).view(np.dtype(f"u{x.dtype.itemsize}")).astype(np.uint64)
    mask = np.uint64((1 << bits) - 1)
    count = xp.zeros(u.shape, np.uint64)
    width = bits // 2
    while width:
        empty = (u >> np.uint64(bits - width)) == 0
        count = xp.where(empty, count + np.uint64(width), count)
        u = xp.where(empty, u << np.uint64(width), u) & mask
        width //= 2
    count = xp.where((u >> np.uint64(bits - 1)) == 0, count + np.uint64(1), count)
    return count.astype(x.dtype)


def _mulhi_u64(a, b):
    """High 64 bits of the 128-bit products of uint64 arrays, from 32-bit halves."""
    mask, s32 = np.uint64(0xFFFFFFFF), np.uint64(32)
    a_lo, a_hi = a & mask, a >> s32
    b_lo, b_hi = b & mask, b >> s32
    lo_lo, hi_lo, lo_hi, hi_hi = a_lo * b_lo, a_hi * b_lo, a_lo * b_hi, a_hi * b_hi
    cross = (lo_lo >> s32) + (hi_lo & mask) + lo_hi
    return hi_hi + (hi_lo >> s32) + (cross >> s32)


def mulhi_array(x, y, xp=None):
    """The value of :data:`mulhi_p` on host or device integer arrays: below 64 bits the exact
    product in 64 bits, shifted; at 64 bits the product from 32-bit halves (unsigned
    arithmetic wraps, as the signed correction needs).

    Args:
      x, y: integer arrays of one dtype (broadcastable shapes).
      xp: the array module of ``x`` and ``y`` (default NumPy).

    Returns:
      The high half of each double-width product, in the operands' dtype.

    Example:
      >>> import numpy as np
      >>> mulhi_array(np.array([2**31 - 1], np.int32), np.array([4], np.int32))
      array([1], dtype=int32)
    """
    xp = np if xp is None else xp
    dtype = x.dtype
    bits = 8 * dtype.itemsize
    x, y = xp.broadcast_arrays(x, y)
    if bits < 64:
        wide = np.dtype(np.int64 if dtype.kind == "i" else np.uint64)
        return ((x.astype(wide) * y.astype(wide)) >> wide.type(bits)).astype(dtype)
    ux, uy = _contiguous(x).view(np.uint64), _contiguous(y).view(np.uint64)
    hi = _mulhi_u64(ux, uy)
    if dtype.kind == "i":
        # signed high half = unsigned high half - (x < 0 ? y : 0) - (y < 0 ? x : 0), mod 2**64
        zero = np.uint64(0)
        hi = hi - xp.where(x < 0, uy, zero) - xp.where(y < 0, ux, zero)
    return _contiguous(hi).view(dtype)
