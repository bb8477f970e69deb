"""Gathers and scatter-adds of whole rows (an embedding lookup and its gradient) without
advanced-index tuples: the Numba backend's kernels, the reference kernels' bits.

The reference ``scatter-add`` adds every update window through ``np.add.at`` over a
broadcast index tuple, one element at a time in index order (1024 rows of 128 float32 into
a 10000x128 table: 1.6 ms of CPU). Where the updates are whole rows of the operand, indexed
by one integer per row, the same sums come from a few vectorised passes: the row indices
sorted stably, the rows gathered once, each pass adds the next update of every row that
still has one (the rows ordered by their number of updates, so those are a prefix), so every
row receives its updates in index order, one addition at a time, as ``np.add.at`` gives them
(0.26 ms). A scatter-add of single elements (no update
window: ``take_along_axis``'s gradient, a cross-entropy's) adds at flat positions by one
``np.add.at`` over a 1-D index, in the reference's order (128 updates into 128x1000 float32:
~240 -> ~50 us of CPU). A gather of whole rows is one ``np.take`` (indices clamped, as the
reference kernel clamps them). Other gathers and scatters keep the reference kernels.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from plax import lax
from plax.lowering import fresh_result, update_target, updates_in_place


def _one_index_per_row(indices) -> bool:
    """Whether ``indices`` holds one integer per row that ``intp`` holds exactly (uint64
    indices of 2**63 and more, which the reference kernels clamp or drop as out of range,
    would wrap to negative rows: the reference kernels keep them)."""
    return (indices.ndim >= 1 and indices.shape[-1] == 1 and indices.dtype.kind in "iu"
            and np.can_cast(indices.dtype, np.intp))


def _whole_rows(operand, indices, updates, dn) -> bool:
    """Whether the scatter adds whole rows of ``operand`` (its axis 0 indexed by one integer
    per update window, the window covering every other axis)."""
    rest = operand.ndim - 1
    lead = updates.ndim - rest
    return (not dn.operand_batching_dims and not dn.scatter_indices_batching_dims
            and tuple(dn.inserted_window_dims) == (0,)
            and tuple(dn.scatter_dims_to_operand_dims) == (0,)
            and _one_index_per_row(indices)
            and tuple(dn.update_window_dims) == tuple(range(lead, updates.ndim))
            and updates.shape[lead:] == operand.shape[1:]
            and updates.shape[:lead] == indices.shape[:-1]
            and operand.dtype == updates.dtype and operand.dtype.kind in "fiuc")


def _single_elements(operand, indices, updates, dn) -> bool:
    """Whether every update of the scatter is one element (no update window), each index
    vector naming operand axes of its own, ``updates`` shaped as the index vectors' batch."""
    return (not dn.update_window_dims and indices.ndim >= 1
            and indices.dtype.kind in "iu"
            and indices.shape[-1] == len(dn.scatter_dims_to_operand_dims)
            and updates.shape == indices.shape[:-1]
            and operand.dtype == updates.dtype and operand.dtype.kind in "fiuc")


def _single_element_scatter_add(operand, indices, updates, dn, mode, out=None):
    """``scatter-add`` of single elements: each update's full position from its index
    vector and its batch position, out-of-bounds ones clamped (``CLIP``) or dropped (the
    other modes, as the reference kernel drops them), then one ``np.add.at`` at the flat
    positions, in the updates' order, as the reference's ``np.add.at`` adds them."""
    from plax_numpy.impls_indexing import _full_starts  # (the reference's positions)
    out = update_target(operand, out, indices, updates)
    count = updates.size
    if count == 0 or out.size == 0:
        return out
    starts = _full_starts(out.shape, indices, dn.scatter_dims_to_operand_dims,
                          dn.operand_batching_dims, dn.scatter_indices_batching_dims)
    values = updates.reshape(count)
    limit = np.array(out.shape, np.int64) - 1
    if mode == lax.GatherScatterMode.CLIP:
        starts = np.clip(starts, 0, limit)
    else:
        keep = np.all((starts >= 0) & (starts <= limit), axis=1)
        if not keep.all():
            starts, values = starts[keep], values[keep]
    with np.errstate(all="ignore"):
        np.add.at(out.reshape(-1), np.ravel_multi_index(tuple(starts.T), out.shape), values)
    return out


@fresh_result
@updates_in_place
def scatter_add_kernel(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                       unique_indices, mode, out=None):
    """The value of ``scatter-add`` on host arrays: whole-row scatters by vectorised passes,
    single-element ones by one ``np.add.at`` at flat positions (both the reference kernel's
    bits), others by the reference kernel.

    Args:
      operand, indices, updates: NumPy arrays.
      dimension_numbers, indices_are_sorted, unique_indices, mode: the primitive's
        parameters.
      out: the operand itself where a compiled program hands it over, dead
        (:func:`plax.lowering.update_target`): the updates are added into it.

    Returns:
      ``operand`` with the updates added: a new array, or ``out``.

    Example:
      >>> dn = lax.ScatterDimensionNumbers((1,), (0,), (0,))
      >>> scatter_add_kernel(np.zeros((3, 2)), np.array([[2], [0], [2]]), np.ones((3, 2)),
      ...                    dimension_numbers=dn, indices_are_sorted=False,
      ...                    unique_indices=False, mode=lax.GatherScatterMode.FILL_OR_DROP)
      array([[1., 1.],
             [0., 0.],
             [2., 2.]])
    """
    operand, indices, updates = np.asarray(operand), np.asarray(indices), np.asarray(updates)
    if _single_elements(operand, indices, updates, dimension_numbers):
        return _single_element_scatter_add(operand, indices, updates, dimension_numbers, mode,
                                           out)
    if not _whole_rows(operand, indices, updates, dimension_numbers):
        return _reference()(operand, indices, updates, dimension_numbers=dimension_numbers,
                            indices_are_sorted=indices_are_sorted,
                            unique_indices=unique_indices, mode=mode, out=out)
    out = update_target(operand, out, indices, updates)
    n, width = operand.shape[0], math.prod(operand.shape[1:])
    rows = indices.reshape(-1).astype(np.intp)
    u = updates.reshape(rows.shape[0], width)
    if mode == lax.GatherScatterMode.CLIP:
        rows = np.clip(rows, 0, n - 1)
    else:  # out-of-bounds rows are dropped, as the reference kernel drops them
        keep = (rows >= 0) & (rows < n)
        if not keep.all():
            rows, u = rows[keep], u[keep]
    if rows.shape[0] == 0 or n == 0 or width == 0:
        return out
    table = out.reshape(n, width)
    # the updates sorted stably by row, the rows' groups ordered by their number of updates
    # (most first), so that the rows still receiving an update at pass k are a prefix
    order = np.argsort(rows, kind="stable")
    ranked = rows[order]
    first = np.flatnonzero(np.concatenate(([True], ranked[1:] != ranked[:-1])))
    counts = np.diff(np.concatenate((first, [rows.shape[0]])))
    most = np.argsort(-counts, kind="stable")
    first, counts, targets = first[most], counts[most], ranked[first[most]]
    sums = table[targets]          # each row's running sum, from the operand's row
    # (rows with more than k updates, for every pass k at once: counts are descending)
    lives = np.searchsorted(-counts, -np.arange(int(counts[0])), side="left")
    with np.errstate(all="ignore"):
        for k, live in enumerate(lives.tolist()):
            sums[:live] += u[order[first[:live] + k]]   # (each row's k-th update, in order)
    table[targets] = sums
    return out


@fresh_result
def gather_kernel(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
                  unique_indices, mode, fill_value):
    """The value of ``gather`` on host arrays: whole rows by one ``np.take`` (indices
    clamped into range, as the reference kernel clamps them outside ``FILL_OR_DROP``),
    other gathers by the reference kernel.

    Args:
      operand, indices: NumPy arrays.
      dimension_numbers, slice_sizes, indices_are_sorted, unique_indices, mode,
        fill_value: the primitive's parameters.

    Returns:
      A new array.

    Example:
      >>> dn = lax.GatherDimensionNumbers((1,), (0,), (0,))
      >>> gather_kernel(np.arange(6.).reshape(3, 2), np.array([[2], [0], [7]]),
      ...               dimension_numbers=dn, slice_sizes=(1, 2), indices_are_sorted=False,
      ...               unique_indices=False, mode=lax.GatherScatterMode.CLIP,
      ...               fill_value=None)
      array([[4., 5.],
             [0., 1.],
             [4., 5.]])
    """
    operand, indices = np.asarray(operand), np.asarray(indices)
    dn = dimension_numbers
    lead = indices.ndim - 1
    if (mode != lax.GatherScatterMode.FILL_OR_DROP and operand.ndim >= 1 and operand.shape[0]
            and not dn.operand_batching_dims and not dn.start_indices_batching_dims
            and tuple(dn.collapsed_slice_dims) == (0,) and tuple(dn.start_index_map) == (0,)
            and _one_index_per_row(indices)
            and tuple(slice_sizes) == (1,) + operand.shape[1:]
            and tuple(dn.offset_dims) == tuple(range(lead, lead + operand.ndim - 1))):
        return np.take(operand, indices.reshape(indices.shape[:-1]), axis=0, mode="clip")
    return _reference(lax.gather_p)(operand, indices, dimension_numbers=dimension_numbers,
                                    slice_sizes=slice_sizes,
                                    indices_are_sorted=indices_are_sorted,
                                    unique_indices=unique_indices, mode=mode,
                                    fill_value=fill_value)


@functools.cache
def _reference(primitive=lax.scatter_add_p):
    from plax_numpy import impls
    return impls()[primitive]


def kernels() -> dict:
    """This module's kernels, by primitive (for the backend's kernel table)."""
    return {lax.scatter_add_p: scatter_add_kernel, lax.gather_p: gather_kernel}
