"""NumPy implementation of top_k: the core's :func:`plax.lax.top_k.top_k_by_sorting` over NumPy's
stable argsort (descending, NaN first, ties by index)."""
from __future__ import annotations

import numpy as np

from plax.lax.top_k import top_k_by_sorting, top_k_p
from plax_numpy.registry import impl


@impl(top_k_p, fresh=True)  # (take_along_axis, ascontiguousarray of new arrays)
def _top_k(x, *, k, axis):
    return top_k_by_sorting(np.asarray(x), k, axis, _stable_argsort)


def _stable_argsort(v):
    return np.argsort(v, axis=-1, kind="stable")
