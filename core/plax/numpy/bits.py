"""Bit packing: packbits and unpackbits (uint8 <-> bits), written on shifts and sums."""
from __future__ import annotations

import numpy as np

from plax import dtypes, lax
from plax.core.trace import get_aval
from plax.numpy.util import asarray_weak, canonicalize_axis, check_arraylike


def _check_bitorder(bitorder: str) -> None:
    if bitorder not in ("big", "little"):
        raise ValueError("'order' must be either 'little' or 'big'")


def _bit_weights(bitorder: str, shape, axis: int):
    """1, 2, 4, ... 128 (little) or 128, ..., 1 (big) along ``axis`` of ``shape``."""
    shifts = lax.iota(np.uint8, 8)
    if bitorder == "big":
        shifts = lax.sub(lax.full((), 7, np.uint8), shifts)
    return lax.broadcast_in_dim(shifts, shape, (axis,))


def packbits(a, axis: int | None = None, bitorder: str = "big"):
    """Packs the truth values of ``a`` into the bits of uint8 bytes along ``axis``.

    Args:
      a: an integer or boolean array (non-zero means a set bit).
      axis: the axis to pack along (default: the flattened array). Its length is padded
        with zeros to a multiple of 8.
      bitorder: ``"big"`` (first element in the highest bit) or ``"little"``.

    Returns:
      A uint8 array whose ``axis`` has ``ceil(n / 8)`` entries.

    Example:
      >>> jnp.packbits(jnp.array([1, 0, 1]))
      Array([160], dtype=uint8)
    """
    check_arraylike("packbits", a)
    _check_bitorder(bitorder)
    a = asarray_weak(a)
    dt = get_aval(a).dtype
    if not (dt == np.bool_ or dtypes.issubdtype(dt, np.integer)):
        raise TypeError("Expected an input array of integer or boolean data type")
    if axis is None:
        a, axis = lax.reshape(a, (get_aval(a).size,)), 0
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    bits = lax.convert_element_type(lax.ne(a, lax.full((), 0, dt)), np.uint8)
    shape = get_aval(bits).shape
    n = shape[axis]
    nbytes = -(-n // 8)
    pad = [(0, 0, 0)] * len(shape)
    pad[axis] = (0, nbytes * 8 - n, 0)
    bits = lax.pad(bits, lax.full((), 0, np.uint8), pad)
    split = shape[:axis] + (nbytes, 8) + shape[axis + 1:]
    bits = lax.reshape(bits, split)
    shifted = lax.shift_left(bits, _bit_weights(bitorder, split, axis + 1))
    # the bits are disjoint, so their sum is their bitwise or
    return lax.reduce_sum(shifted, (axis + 1,))


def unpackbits(a, axis: int | None = None, count: int | None = None, bitorder: str = "big"):
    """Unpacks the bits of uint8 array ``a`` into a uint8 array of 0s and 1s.

    Args:
      a: a uint8 array.
      axis: the axis to unpack along (default: the flattened array).
      count: how many bits to keep along ``axis`` (negative: drop that many from the end;
        more than available pads with zeros).
      bitorder: ``"big"`` or ``"little"``.

    Returns:
      A uint8 array with 8 times as many entries along ``axis`` (then adjusted by ``count``).

    Example:
      >>> jnp.unpackbits(jnp.array([160], dtype=jnp.uint8))
      Array([1, 0, 1, 0, 0, 0, 0, 0], dtype=uint8)
    """
    check_arraylike("unpackbits", a)
    _check_bitorder(bitorder)
    a = asarray_weak(a)
    if get_aval(a).dtype != np.uint8:
        raise TypeError("Expected an input array of unsigned byte data type")
    if axis is None:
        a, axis = lax.reshape(a, (get_aval(a).size,)), 0
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    shape = get_aval(a).shape
    split = shape[:axis + 1] + (8,) + shape[axis + 1:]
    wide = lax.broadcast_in_dim(a, split, tuple(i for i in range(len(split)) if i != axis + 1))
    bits = lax.bitwise_and(lax.shift_right_logical(wide, _bit_weights(bitorder, split, axis + 1)),
                           lax.full((), 1, np.uint8))
    n = shape[axis] * 8
    out_shape = shape[:axis] + (n,) + shape[axis + 1:]
    bits = lax.reshape(bits, out_shape)
    if count is None:
        return bits
    count = int(count)
    keep = n + count if count < 0 else count
    keep = max(keep, 0)
    if keep <= n:
        return lax.slice_in_dim(bits, 0, keep, axis=axis)
    pad = [(0, 0, 0)] * len(out_shape)
    pad[axis] = (0, keep - n, 0)
    return lax.pad(bits, lax.full((), 0, np.uint8), pad)
