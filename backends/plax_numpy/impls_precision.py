"""NumPy implementations of reduce_precision (the core's integer arithmetic on the float's
bits, :func:`plax.lax.precision.reduce_precision_array`) and cumlogsumexp
(``np.logaddexp.accumulate``)."""
from __future__ import annotations

import numpy as np

from plax.lax.cumlogsumexp import cumlogsumexp_p
from plax.lax.precision import reduce_precision_array, reduce_precision_p
from plax_numpy.registry import impl, quiet

@impl(reduce_precision_p, fresh=True)  # (ends in a where)
def _reduce_precision(x, *, exponent_bits, mantissa_bits):
    return reduce_precision_array(np.asarray(x), exponent_bits, mantissa_bits)


@impl(cumlogsumexp_p, fresh=True)  # (an accumulate, made contiguous)
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
