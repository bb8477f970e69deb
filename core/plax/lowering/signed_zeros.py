"""JAX's order of signed zeros in max and min, for the backends' array kernels.

XLA's ``maximum``/``minimum`` follow IEEE 754-2019: NaN propagates and ``-0.0 < +0.0``, so
``max(-0.0, +0.0)`` is ``+0.0`` and ``min(-0.0, +0.0)`` is ``-0.0`` in either order. NumPy's
``maximum``/``minimum`` (and their reductions and accumulations) return one of two equal
operands by position instead. The kernels here compute NumPy's result, then fix only the
zeros in it: a result with no zero costs one compare more than NumPy's, a 0-d zero operand
(a relu's) one pass, and other results with zeros a few whole-array passes more.

Every function takes ``xp`` (NumPy by default; CuPy for device arrays): the fixes are
whole-array operations that both modules provide.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plax import dtypes
from plax.lowering import complex_extremes

__all__ = ["maximum", "minimum", "fix_reduced_zeros", "preferred_zeros", "signed"]


def _bits(dtype) -> np.dtype:
    return np.dtype(f"u{np.dtype(dtype).itemsize}")


def _elementwise(ufunc_name: str):
    is_max = ufunc_name == "maximum"
    lexicographic = complex_extremes.maximum if is_max else complex_extremes.minimum

    def combine(x, y, xp: Any = np):
        f = getattr(xp, ufunc_name)
        x, y = xp.asarray(x), xp.asarray(y)
        if x.dtype.kind == "c" or y.dtype.kind == "c":
            # complex values: JAX's lexicographic order (not NumPy's maximum, computed first
            # and thrown away before), decided here, off the float path
            return lexicographic(x, y, xp)
        out = xp.asarray(f(x, y))
        if not dtypes.is_float(out.dtype):  # (real floats have two zeros)
            return out
        if y.ndim == 0 and x.ndim > 0 or x.ndim == 0 and y.ndim > 0:
            done = _with_scalar(out, is_max, y if y.ndim == 0 else x, xp)
            if done is not None:
                return done
        zeros = out == 0
        if not bool(zeros.any()):
            return out
        return xp.where(zeros, _zero_bits(x, y, out.dtype, is_max, xp).view(out.dtype), out)
    return combine


def _zero_bits(x, y, dtype, is_max: bool, xp):
    """The bits of JAX's ``max(x, y)`` (``min``) wherever NumPy's is a zero (which zero
    NumPy returns for two equal operands depends on its loop, SIMD or not). A zero maximum
    comes from a zero and an operand at most zero: the AND of their bits is that zero, and
    -0 only when both have the sign. A zero minimum comes from a zero and an operand at
    least zero: the OR of their sign bits is its sign. ``dtype``: the result's (x's and y's
    promoted)."""
    bits = _bits(dtype)
    bx, by = x.astype(dtype, copy=False).view(bits), y.astype(dtype, copy=False).view(bits)
    if is_max:
        return xp.asarray(xp.bitwise_and(bx, by))
    merged = xp.asarray(xp.bitwise_or(bx, by))   # (0-d operands: a NumPy scalar, made 0-d)
    return xp.bitwise_and(merged, bits.type(1 << (8 * bits.itemsize - 1)), out=merged)


def _with_scalar(out, is_max: bool, scalar, xp):
    """JAX's zeros of ``out = f(x, scalar)`` for a 0-d ``scalar`` (a relu's 0, a clamp's
    bounds), in place: none for a nonzero scalar, one pass for max with +0, three for min
    with -0; or None where the general case must run."""
    if bool(scalar != 0):
        return out  # a zero result is x's own zero (or NaN's absence): exact
    if is_max == bool(xp.signbit(scalar)):
        return None  # max with -0, min with +0: the zero's sign depends on x
    if is_max:  # max with +0: every zero result is +0, and -0 + 0 is +0 (x + 0 is x else)
        return xp.add(out, xp.asarray(0, out.dtype), out=out)
    # min with -0: every zero result is -0; negate, add +0, negate turns +0 into -0 alone
    xp.negative(out, out=out)
    xp.add(out, xp.asarray(0, out.dtype), out=out)
    return xp.negative(out, out=out)


_maximum, _minimum = _elementwise("maximum"), _elementwise("minimum")


def maximum(x, y, xp: Any = np):
    """``xp.maximum(x, y)`` with ``-0.0 < +0.0`` (IEEE 754-2019 ``maximum``, as XLA).

    Args:
      x, y: arrays (broadcast together).
      xp: their array module (default NumPy).

    Returns:
      The elementwise maximum; NaN propagates as in NumPy. Complex operands follow JAX's
      lexicographic order instead (:func:`plax.lowering.complex_extremes.maximum`).

    Example:
      >>> np.signbit(maximum(np.float32([-0.0, 0.0]), np.float32([0.0, -0.0])))
      array([False, False])
    """
    return _maximum(x, y, xp)


def minimum(x, y, xp: Any = np):
    """``xp.minimum(x, y)`` with ``-0.0 < +0.0``: as :func:`maximum`, two zeros give ``-0.0``
    when either is ``-0.0``, and complex operands JAX's lexicographic minimum.

    Example:
      >>> np.signbit(minimum(np.float32([-0.0, 0.0]), np.float32([0.0, -0.0])))
      array([ True,  True])
    """
    return _minimum(x, y, xp)


def fix_reduced_zeros(out, x, which: str, reduce_any: Callable, xp: Any = np):
    """Gives the zeros of a max/min reduction (or scan, or window) of ``x`` JAX's sign.

    A zero maximum is ``+0.0`` when some reduced element is ``+0.0``, else ``-0.0``; a zero
    minimum is ``-0.0`` when some reduced element is ``-0.0``, else ``+0.0``. NaN and nonzero
    results are left as they are.

    Args:
      out: the reduction's result as NumPy computes it (any sign on its zeros), of ``x``'s
        dtype.
      x: the reduced operand.
      which: ``"max"`` or ``"min"``.
      reduce_any: maps a boolean array shaped like ``x`` to one shaped like ``out``: whether
        any element that the reduction combined into each result is true (the same axes,
        scan or windows as the reduction).
      xp: the array module of ``out`` and ``x`` (default NumPy).

    Returns:
      ``out`` with JAX's sign on every zero (``out`` itself when it has no zero, else a new
      array).

    Example:
      >>> x = np.float32([[-0.0, 0.0], [-0.0, -0.0]])
      >>> out = fix_reduced_zeros(x.max(axis=1), x, "max", lambda b: b.any(axis=1))
      >>> np.signbit(out)
      array([False,  True])
    """
    out = xp.asarray(out)
    if not dtypes.is_float(out.dtype):
        return out
    zeros = out == 0
    if not bool(zeros.any()):
        return out
    return signed(out, zeros, xp.asarray(reduce_any(preferred_zeros(x, which, xp))), which, xp)


def preferred_zeros(x, which: str, xp: Any = np):
    """Where ``x`` holds the zero that wins a tie of zeros: ``+0.0`` for ``"max"``, ``-0.0``
    for ``"min"``.

    Example:
      >>> preferred_zeros(np.float32([0.0, -0.0, 1.0]), "max")
      array([ True, False, False])
    """
    x = xp.asarray(x)
    return (x == 0) & (xp.signbit(x) if which == "min" else ~xp.signbit(x))


def signed(out, zeros, found, which: str, xp: Any = np):
    """``out`` with JAX's zero where ``zeros``: the preferred zero of ``which`` where
    ``found`` (some combined element was that zero, :func:`preferred_zeros`), else the other.

    Example:
      >>> out = signed(np.float32([0.0, 0.0, 2.0]), np.array([True, True, False]),
      ...              np.array([True, False, False]), "min")
      >>> np.signbit(out)
      array([ True, False, False])
    """
    negative = found if which == "min" else ~found
    fixed = xp.where(negative, xp.asarray(-0.0, out.dtype), xp.asarray(0.0, out.dtype))
    return xp.where(zeros, fixed, out).astype(out.dtype, copy=False)
