"""JAX's max and min of complex numbers, for the backends' array kernels.

XLA (as JAX 0.10 lowers ``max``/``min`` of complex values) compares two complex numbers
lexicographically, real parts first, and takes the first operand only when it wins that
comparison strictly: ``max(x, y)`` is ``x`` when ``x.real > y.real``, or when the real parts
are equal (``-0 == +0``) and ``x.imag > y.imag``; otherwise ``y``. So a tie gives the second
operand with its own zeros' signs, and a NaN in a compared part never wins a comparison:
NaN does not propagate as it does in NumPy's ``maximum`` of complex values.

A reduction folds that rule from the left over the reduced elements, starting from the
identity (``-inf + 0j`` for max, ``inf + 0j`` for min), as XLA's reduce does;
:func:`reduce_extreme` computes the fold's result with whole-array operations.

Every function takes ``xp`` (NumPy by default): only whole-array operations that CuPy also
provides are used.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["first_wins", "maximum", "minimum", "reduce_extreme", "reverse_scan"]


def first_wins(x, y, is_max: bool, xp: Any = np):
    """Where JAX's ``max(x, y)`` (``min`` when not ``is_max``) of complex values is ``x``.

    Example:
      >>> first_wins(np.complex64([1 + 2j, 0j]), np.complex64([1 + 1j, -0.0 + 0j]), True)
      array([ True, False])
    """
    rx, ry, ix, iy = xp.real(x), xp.real(y), xp.imag(x), xp.imag(y)
    if is_max:
        return xp.where(rx == ry, ix > iy, rx > ry)
    return xp.where(rx == ry, ix < iy, rx < ry)


def maximum(x, y, xp: Any = np):
    """JAX's elementwise ``max`` of complex arrays (see the module's rule).

    Args:
      x, y: complex arrays of one dtype (broadcast together).
      xp: their array module.

    Returns:
      ``x`` where it wins the lexicographic comparison strictly, else ``y``.

    Example:
      >>> x = np.complex64([1 + 1j, 0j])
      >>> y = np.complex64([complex(1, np.nan), complex(-0.0, 0)])   # a NaN, a tie
      >>> maximum(x, y)
      array([ 1.+nanj, -0. +0.j], dtype=complex64)
    """
    x, y = xp.asarray(x), xp.asarray(y)
    return xp.where(first_wins(x, y, True, xp), x, y)


def minimum(x, y, xp: Any = np):
    """JAX's elementwise ``min`` of complex arrays: as :func:`maximum`, the smaller.

    Example:
      >>> minimum(np.complex64([2j]), np.complex64([1j]))
      array([0.+1.j], dtype=complex64)
    """
    x, y = xp.asarray(x), xp.asarray(y)
    return xp.where(first_wins(x, y, False, xp), x, y)


def _last(mask, xp):
    """The last index along the last axis where ``mask`` holds (-1 where it never does)."""
    n = mask.shape[-1]
    found = n - 1 - xp.argmax(mask[..., ::-1], axis=-1)
    return xp.where(mask.any(axis=-1), found, -1)


def reduce_extreme(rows, is_max: bool, xp: Any = np, valid=None):
    """JAX's ``reduce_max`` (``reduce_min``) of complex ``rows`` along their last axis.

    The left fold ``acc = max(acc, e)`` from the identity keeps ``acc`` only while it beats
    the next element strictly, and that relation is transitive (a NaN in a compared part
    fails every test), so its result is the first candidate that beats every later one:
    after the last element whose real part is NaN (which beats nothing and which the next
    element replaces), among the elements with the extreme real part, after the last of them
    whose imaginary part is NaN, the last one with the extreme imaginary part.

    Args:
      rows: a complex array, reduced along its last axis (of any length).
      is_max: max (True) or min.
      xp: its array module.
      valid: where ``rows`` holds an element to fold (None: everywhere); the others are
        skipped, as XLA's ``reduce_window`` skips the padding and the holes of a dilation.

    Returns:
      The reduced array, of ``rows``' dtype and shape without the last axis.

    Example:
      >>> rows = np.complex64([[1j, complex(np.nan, 0), 2j], [0j, complex(-0.0, 0), 1j]])
      >>> reduce_extreme(rows, False)   # after a NaN; the last of tied zeros
      array([ 0.+2.j, -0.+0.j], dtype=complex64)
    """
    rows = xp.asarray(rows)
    bound = np.inf if not is_max else -np.inf
    identity = xp.full(rows.shape[:-1] + (1,), complex(bound, 0.0), rows.dtype)
    z = xp.concatenate([identity, rows], axis=-1)   # the identity takes part, first
    real, imag = xp.real(z), xp.imag(z)
    index = xp.arange(z.shape[-1])
    extreme = xp.max if is_max else xp.min
    folded = True if valid is None else xp.concatenate(
        [xp.ones(identity.shape, bool), xp.asarray(valid, bool)], axis=-1)
    # the last element with a NaN real part is replaced by the next one (when there is one)
    nan_real = _last(xp.isnan(real) & folded, xp)[..., None]
    after = (index > nan_real) & folded
    top = extreme(xp.where(after, real, bound), axis=-1, keepdims=True)
    tied = after & (real == top)
    nan_imag = _last(tied & xp.isnan(imag), xp)[..., None]
    tied = tied & (index > nan_imag)
    top_imag = extreme(xp.where(tied, imag, bound), axis=-1, keepdims=True)
    best = _last(tied & (imag == top_imag), xp)[..., None]
    # no candidate left: the last NaN of the real parts, else of the imaginary parts
    pick = xp.where(~after.any(axis=-1, keepdims=True), nan_real,
                    xp.where(best >= 0, best, nan_imag))
    return xp.take_along_axis(z, pick, axis=-1)[..., 0]


def _lexicographic_keys(re, im, xp):
    """Integers ordered as the NaN-free complex values ``re + im j`` are lexicographically
    (``-0 == +0``): for 32-bit parts both parts' order-preserving bit patterns in one uint64
    (no sort); for 64-bit parts the values' ranks (a sort: 128 bits do not fit)."""
    re, im = re + 0.0, im + 0.0   # (-0 becomes +0: equal values get equal keys)
    if re.dtype == np.float32:
        def ordered(part):
            bits = part.view(np.uint32)
            return xp.where(bits >> np.uint32(31) != 0, ~bits,
                            bits | np.uint32(0x80000000)).astype(np.uint64)
        return (ordered(re) << np.uint64(32)) | ordered(im)
    z = xp.empty(re.shape, np.complex128)
    z.real, z.imag = re, im
    _, rank = xp.unique(z.ravel(), return_inverse=True)   # (NumPy sorts complex values
    return rank.reshape(re.shape)                          # lexicographically)


def _suffix(ufunc, a):
    """``ufunc`` accumulated along the last axis from the end (each suffix's result)."""
    return ufunc.accumulate(a[..., ::-1], axis=-1)[..., ::-1]


def reverse_scan(rows, is_max: bool, xp: Any = np):
    """JAX's reverse ``cummax`` (``cummin``) of complex ``rows`` along their last axis: each
    suffix folded from the identity, its first element first, by the lexicographic max/min
    (what :func:`reduce_extreme` computes for one suffix), for all suffixes in linear work
    for complex64 (complex128: a sort ranks the values).

    The fold of the suffix at ``k`` without the identity is ``x[k]`` when ``x[k]`` beats every
    later element strictly, else the fold of the suffix at ``k + 1``: so it is the element at
    the first such *record* at or after ``k``. ``x[k]`` beats every later element when it
    beats their NaN-free stand-ins' lexicographic extreme (a NaN real part stands as
    ``+-inf + +-inf j``, a NaN imaginary part as ``re +- inf j``: what no operand beats),
    found by accumulating order-preserving keys from the end. The identity, folded first,
    survives where it beats that extreme.

    Args:
      rows: a complex array, scanned along its last axis.
      is_max: cummax (True) or cummin.
      xp: its array module.

    Returns:
      The scan, of ``rows``' dtype and shape.

    Example:
      >>> rows = np.complex64([1j, complex(np.nan, 0), 2j, 0j])
      >>> reverse_scan(rows, True)
      array([0.+2.j, 0.+2.j, 0.+2.j, 0.+0.j], dtype=complex64)
    """
    rows = xp.asarray(rows)
    n = rows.shape[-1]
    if n == 0 or rows.size == 0:
        return rows.copy()
    re, im = xp.real(rows), xp.imag(rows)
    big = np.inf if is_max else -np.inf
    nan_re, nan_im = xp.isnan(re), xp.isnan(im)
    stand_re = xp.where(nan_re, big, re)
    stand_im = xp.where(nan_re | nan_im, big, im)
    key = _lexicographic_keys(stand_re, stand_im, xp)
    if not is_max:  # (the smallest value has the largest key)
        key = ~key if key.dtype == np.uint64 else -key
    better = np.maximum if is_max else np.minimum
    extreme_key = _suffix(np.maximum, key)          # the suffix's extreme, as a key
    extreme_re = _suffix(better, stand_re)          # ... and its real part
    # x[k] beats every later element (the last element always counts as a record)
    beats = xp.zeros(rows.shape, bool)
    later_key, later_re = extreme_key[..., 1:], extreme_re[..., 1:]
    head_re = re[..., :-1]
    beats_re = head_re > later_re if is_max else head_re < later_re
    beats[..., :-1] = ~nan_re[..., :-1] & xp.where(nan_im[..., :-1], beats_re,
                                                   key[..., :-1] > later_key)
    beats[..., -1] = True
    record = _suffix(np.minimum, xp.where(beats, xp.arange(n), n))
    folded = xp.take_along_axis(rows, record, axis=-1)
    # the identity (-inf + 0j for max) beats the extreme only where every real part is its
    # bound, all of them then compared by their imaginary parts
    bound = -np.inf if is_max else np.inf
    extreme_im = _suffix(better, stand_im)
    identity_wins = (extreme_re == bound) & (0 > extreme_im if is_max else 0 < extreme_im)
    return xp.where(identity_wins, rows.dtype.type(complex(bound, 0.0)), folded)
