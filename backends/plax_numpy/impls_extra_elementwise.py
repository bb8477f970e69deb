"""Kernels of plax.lax.extra_elementwise: square, clz, mulhi."""
from __future__ import annotations

import numpy as np

from plax.lax.extra_elementwise import clz_p, mulhi_p, square_p
from plax_numpy.registry import impl, quiet


@impl(square_p)
@quiet
def _square(x):
    return np.multiply(x, x, dtype=x.dtype)


def _unsigned(dtype: np.dtype) -> np.dtype:
    return np.dtype(f"u{dtype.itemsize}")


@impl(clz_p)
def _clz(x):
    bits = 8 * x.dtype.itemsize
    u = np.array(x, copy=True).view(_unsigned(x.dtype)).astype(np.uint64)
    # binary search for the highest set bit: halve the window while its upper half is empty
    count = np.zeros(u.shape, np.uint64)
    width = bits // 2
    while width:
        empty = (u >> np.uint64(bits - width)) == 0
        count = np.where(empty, count + np.uint64(width), count)
        u = np.where(empty, u << np.uint64(width), u)
        u &= np.uint64((1 << bits) - 1) if bits < 64 else np.uint64(0xFFFFFFFFFFFFFFFF)
        width //= 2
    count = np.where(u >> np.uint64(bits - 1) == 0, count + np.uint64(1), count)
    return count.astype(x.dtype)


def _mulhi_u64(a, b):
    """High 64 bits of the 128-bit product of uint64 arrays, from 32-bit halves."""
    mask = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    a_lo, a_hi = a & mask, a >> s32
    b_lo, b_hi = b & mask, b >> s32
    lo_lo = a_lo * b_lo
    hi_lo = a_hi * b_lo
    lo_hi = a_lo * b_hi
    hi_hi = a_hi * b_hi
    cross = (lo_lo >> s32) + (hi_lo & mask) + lo_hi
    return hi_hi + (hi_lo >> s32) + (cross >> s32)


@impl(mulhi_p)
def _mulhi(x, y):
    dtype = x.dtype
    bits = 8 * dtype.itemsize
    x, y = np.broadcast_arrays(x, y)
    if bits < 64:
        wide = np.int64 if dtype.kind == "i" else np.uint64
        prod = x.astype(wide) * y.astype(wide)
        return (prod >> wide(bits)).astype(dtype)
    ux, uy = np.array(x).view(np.uint64), np.array(y).view(np.uint64)
    with np.errstate(over="ignore"):
        hi = _mulhi_u64(ux, uy)
        if dtype.kind == "i":
            # signed high half = unsigned high half - (x < 0 ? y : 0) - (y < 0 ? x : 0), mod 2^64
            hi = hi - np.where(x < 0, uy, np.uint64(0)) - np.where(y < 0, ux, np.uint64(0))
    return np.asarray(hi).view(dtype)
