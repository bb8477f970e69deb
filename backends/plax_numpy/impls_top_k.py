"""NumPy implementation of top_k: a stable descending argsort (NaN first, ties by index)."""
from __future__ import annotations

import numpy as np

from plax.lax.top_k import top_k_p
from plax_numpy.registry import impl


@impl(top_k_p)
def _top_k(x, *, k, axis):
    x = np.moveaxis(np.asarray(x), axis, -1)
    n = x.shape[-1]
    # an ascending stable sort of the reversed axis, read backwards, is descending with ties
    # in index order (and NaN, which sorts last, comes first)
    order = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1][..., :k]
    idx = (n - 1 - order).astype(np.int32)
    values = np.take_along_axis(x, idx.astype(np.intp), axis=-1)
    return [np.ascontiguousarray(np.moveaxis(values, -1, axis)),
            np.ascontiguousarray(np.moveaxis(idx, -1, axis))]
