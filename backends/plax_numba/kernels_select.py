"""``top_k`` by selection instead of a full sort: the Numba backend's kernel for small ``k``.

The reference kernel sorts every row (a stable ``argsort`` of n entries) to keep k of them;
for k much smaller than n, a selection finds the k-th largest entry of each row
(``np.partition``, linear time), keeps the entries above it and, in index order, as many
entries equal to it as are still wanted, and sorts only those k. The values and indices are
the reference kernel's: descending, NaN counting as largest, ties (-0 and +0 among them)
keeping the lower index first.
"""
from __future__ import annotations

import numpy as np

from plax.lax.top_k import top_k_by_sorting, top_k_p
from plax.lowering import fresh_result

#: selection is used while ``k * SELECT_MAX_FRACTION <= n`` (a larger k sorts nearly all the
#: row anyway: the reference kernel's full sort)
SELECT_MAX_FRACTION = 8
#: dtypes NumPy's partition and comparisons order as the reference's argsort does
#: (float16 and bfloat16 keep the reference kernel)
SELECTABLE = frozenset(np.dtype(t) for t in (np.float32, np.float64, np.int8, np.int16,
                                              np.int32, np.int64, np.uint8, np.uint16,
                                              np.uint32, np.uint64, np.bool_))


def _stable_argsort(v):
    return np.argsort(v, axis=-1, kind="stable")


@fresh_result
def top_k_kernel(x, *, k: int, axis: int) -> list:
    """The value of ``top_k`` (:data:`plax.lax.top_k.top_k_p`) on a host array: by selection
    where ``k`` is small beside the axis, else as the reference kernel computes it.

    Args:
      x: a NumPy array.
      k, axis: the primitive's parameters (``axis`` non-negative).

    Returns:
      ``[values, indices]`` (int32), C-contiguous, ``axis`` of length ``k``.

    Example:
      >>> top_k_kernel(np.array([1., np.nan, 3., 3.] * 4), k=2, axis=0)
      [array([nan, nan]), array([1, 5], dtype=int32)]
    """
    x = np.asarray(x)
    n = x.shape[axis]
    if x.dtype not in SELECTABLE or k == 0 or k * SELECT_MAX_FRACTION > n:
        return top_k_by_sorting(x, k, axis, _stable_argsort)
    rows = np.moveaxis(x, axis, -1)
    top = np.partition(rows, n - k, axis=-1)[..., n - k:]  # each row's k largest; NaN last
    kth = top[..., :1]
    # (a NaN of a row is among its k largest: none there, none anywhere)
    nans = x.dtype.kind == "f" and bool(np.isnan(top).any())
    keep = None
    if not nans:  # one pass where no row holds more entries equal to its k-th than it wants
        keep = rows >= kth
        if not (np.count_nonzero(keep, axis=-1) == k).all():
            keep = None
    if keep is None:
        above, equal = rows > kth, rows == kth
        if nans:  # NaN above every number, equal to NaN
            nan, kth_nan = np.isnan(rows), np.isnan(kth)
            above |= nan & ~kth_nan
            equal |= nan & kth_nan
        wanted = k - np.count_nonzero(above, axis=-1, keepdims=True)
        if np.array_equal(np.count_nonzero(equal, axis=-1, keepdims=True), wanted):
            keep = above | equal  # (no row has more entries equal to its k-th than it wants)
        else:
            keep = above | (equal & (np.cumsum(equal, axis=-1, dtype=np.int32) <= wanted))
    # exactly k kept per row, found in row-major (index) order
    index = (np.flatnonzero(keep) % n).reshape(rows.shape[:-1] + (k,))
    values = np.take_along_axis(rows, index, axis=-1)
    values, order = top_k_by_sorting(values, k, values.ndim - 1, _stable_argsort)
    index = np.take_along_axis(index, order.astype(np.intp), axis=-1).astype(np.int32)
    return [np.ascontiguousarray(np.moveaxis(values, -1, axis)),
            np.ascontiguousarray(np.moveaxis(index, -1, axis))]


def kernels() -> dict:
    """This module's kernels, by primitive (for the backend's kernel table)."""
    return {top_k_p: top_k_kernel}
