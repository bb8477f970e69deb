"""JAX's order of signed zeros in max and min, for the backends' array kernels.

XLA's ``maximum``/``minimum`` follow IEEE 754-2019: NaN propagates and ``-0.0 < +0.0``, so
``max(-0.0, +0.0)`` is ``+0.0`` and ``min(-0.0, +0.0)`` is ``-0.0`` in either order. NumPy's
``maximum``/``minimum`` (and their reductions and accumulations) return one of two equal
operands by position instead. The kernels here compute NumPy's result, then fix only the
zeros in it, so an array with no zero in its result costs one compare more than NumPy's.

Every function takes ``xp`` (NumPy by default; CuPy for device arrays): the fixes are
whole-array operations that both modules provide.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["has_signed_zeros", "maximum", "minimum", "fix_reduced_zeros"]


def has_signed_zeros(dtype) -> bool:
    """Whether ``dtype`` is a real floating type (NumPy's, or ml_dtypes' bfloat16/float8).

    Example:
      >>> has_signed_zeros(np.float32), has_signed_zeros(np.int32)
      (True, False)
    """
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or (dtype.kind == "V" and dtype.itemsize <= 2)


def _bits(dtype) -> np.dtype:
    return np.dtype(f"u{np.dtype(dtype).itemsize}")


def _elementwise(ufunc_name: str, merge_name: str):
    def combine(x, y, xp: Any = np):
        f = getattr(xp, ufunc_name)
        out = xp.asarray(f(x, y))
        if not has_signed_zeros(out.dtype):
            return out
        zeros = out == 0
        if not bool(zeros.any()):
            return out
        # A zero result comes from two equal operands (or one zero and one NaN-free other):
        # the AND of two zeros' bits is -0 only when both are -0 (max), their OR is -0 when
        # either is (min). Equal nonzero operands have equal bits, so the merge keeps them.
        bits = _bits(out.dtype)
        x = xp.asarray(x, out.dtype)
        y = xp.asarray(y, out.dtype)
        getattr(xp, merge_name)(x.view(bits), y.view(bits), out=out.view(bits), where=zeros)
        return out
    return combine


maximum: Callable = _elementwise("maximum", "bitwise_and")
maximum.__name__ = "maximum"
maximum.__doc__ = """``xp.maximum(x, y)`` with ``-0.0 < +0.0`` (IEEE 754-2019 ``maximum``, as XLA).

Args:
  x, y: arrays (broadcast together).
  xp: their array module (default NumPy).

Returns:
  The elementwise maximum; NaN propagates as in NumPy.

Example:
  >>> np.signbit(maximum(np.float32([-0.0, 0.0]), np.float32([0.0, -0.0])))
  array([False, False])
"""

minimum: Callable = _elementwise("minimum", "bitwise_or")
minimum.__name__ = "minimum"
minimum.__doc__ = """``xp.minimum(x, y)`` with ``-0.0 < +0.0`` (IEEE 754-2019 ``minimum``, as XLA).

Args:
  x, y: arrays (broadcast together).
  xp: their array module (default NumPy).

Returns:
  The elementwise minimum; NaN propagates as in NumPy.

Example:
  >>> np.signbit(minimum(np.float32([-0.0, 0.0]), np.float32([0.0, -0.0])))
  array([ True,  True])
"""


def fix_reduced_zeros(out, x, which: str, reduce_any: Callable, xp: Any = np):
    """Gives the zeros of a max/min reduction (or scan, or window) of ``x`` JAX's sign.

    A zero maximum is ``+0.0`` when some reduced element is ``+0.0``, else ``-0.0``; a zero
    minimum is ``-0.0`` when some reduced element is ``-0.0``, else ``+0.0``. NaN and nonzero
    results are left as they are.

    Args:
      out: the reduction's result as NumPy computes it (any sign on its zeros), of ``x``'s
        dtype; returned fixed (in place when it is a writable array).
      x: the reduced operand.
      which: ``"max"`` or ``"min"``.
      reduce_any: maps a boolean array shaped like ``x`` to one shaped like ``out``: whether
        any element that the reduction combined into each result is true (the same axes,
        scan or windows as the reduction).
      xp: the array module of ``out`` and ``x`` (default NumPy).

    Returns:
      ``out`` with JAX's sign on every zero.

    Example:
      >>> x = np.float32([[-0.0, 0.0], [-0.0, -0.0]])
      >>> out = fix_reduced_zeros(x.max(axis=1), x, "max", lambda b: b.any(axis=1))
      >>> np.signbit(out)
      array([False,  True])
    """
    out = xp.asarray(out)
    if not has_signed_zeros(out.dtype):
        return out
    zeros = out == 0
    if not bool(zeros.any()):
        return out
    x = xp.asarray(x)
    # max prefers +0 (a +0 anywhere wins), min prefers -0 (a -0 anywhere wins)
    preferred_sign = xp.signbit(x) if which == "min" else ~xp.signbit(x)
    found = xp.asarray(reduce_any((x == 0) & preferred_sign))
    negative = found if which == "min" else ~found
    fixed = xp.where(negative, xp.asarray(-0.0, out.dtype), xp.asarray(0.0, out.dtype))
    if out.ndim == 0 or not out.flags.writeable:
        return xp.where(zeros, fixed, out).astype(out.dtype)
    xp.copyto(out, fixed, where=zeros)
    return out
