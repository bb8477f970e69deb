"""NumPy implementations of reduce_precision (integer arithmetic on the float's bits) and
cumlogsumexp (``np.logaddexp.accumulate``)."""
from __future__ import annotations

import numpy as np

from plax.lax.cumlogsumexp import cumlogsumexp_p
from plax.lax.precision import reduce_precision_p
from plax_numpy.registry import impl, quiet

# (exponent bits, mantissa bits, unsigned view) by float width and kind
_FORMATS = {("float16", 2): (5, 10, np.uint16), ("bfloat16", 2): (8, 7, np.uint16),
            ("float32", 4): (8, 23, np.uint32), ("float64", 8): (11, 52, np.uint64)}


@impl(reduce_precision_p)
def _reduce_precision(x, *, exponent_bits, mantissa_bits):
    x = np.asarray(x)
    src_exp, src_mant, uint = _FORMATS[(x.dtype.name, x.dtype.itemsize)]
    bits = np.ascontiguousarray(x).view(uint).copy()
    nbits = 8 * x.dtype.itemsize
    u = lambda v: uint(v & ((1 << nbits) - 1))  # noqa: E731
    if mantissa_bits < src_mant:
        drop = src_mant - mantissa_bits
        last = (bits >> u(drop)) & u(1)  # the last kept bit: ties round to even
        bias = u((1 << (drop - 1)) - 1) + last
        bits = (bits + bias) & u(~((1 << drop) - 1))
    if exponent_bits < src_exp:
        exp_mask = ((1 << src_exp) - 1) << src_mant
        src_bias = (1 << (src_exp - 1)) - 1
        new_bias = (1 << (exponent_bits - 1)) - 1
        exponent = bits & u(exp_mask)
        sign = bits & u(1 << (nbits - 1))
        over = exponent > u((src_bias + new_bias) << src_mant)
        under = exponent <= u((src_bias - new_bias) << src_mant)
        bits = np.where(over, sign | u(exp_mask), np.where(under, sign, bits))
    out = np.asarray(bits, uint).view(x.dtype)
    nan = np.isnan(x)
    if nan.any():  # rounding may have carried a NaN's payload into an infinity
        out = np.where(nan, x, out)
    return out.reshape(x.shape)


@impl(cumlogsumexp_p)
@quiet
def _cumlogsumexp(x, *, axis, reverse):
    x = np.asarray(x)
    dt = x.dtype
    work = x.astype(np.float32) if dt.itemsize == 2 else x
    if reverse:
        work = np.flip(work, axis)
    out = np.logaddexp.accumulate(work, axis=axis)
    if reverse:
        out = np.flip(out, axis)
    return np.ascontiguousarray(out.astype(dt, copy=False))
