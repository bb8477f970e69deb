"""NumPy implementations of slicing, gather and the scatter family (XLA semantics)."""
from __future__ import annotations

import math

import numpy as np

from plax import dtypes, lax
from plax.lax.slicing import GatherScatterMode, gather_fill_value
from plax.lowering import complex_extremes, signed_zeros
from plax.lowering.emitter import update_target, updates_in_place
from plax_numpy.registry import impl


@impl(lax.slice_p)
def _slice(x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * len(start_indices)
    return np.asarray(x)[tuple(slice(a, b, s) for a, b, s in zip(start_indices, limit_indices, strides))]


def _clamped_starts(shape, sizes, starts):
    return [min(max(int(s), 0), d - n) for s, d, n in zip(starts, shape, sizes)]


@impl(lax.dynamic_slice_p)
def _dynamic_slice(x, *starts, slice_sizes):
    x = np.asarray(x)
    lo = _clamped_starts(x.shape, slice_sizes, starts)
    return x[tuple(slice(a, a + n) for a, n in zip(lo, slice_sizes))]


@impl(lax.dynamic_update_slice_p, fresh=True)  # (a copy, updated, or the dead operand)
@updates_in_place
def _dynamic_update_slice(x, update, *starts, out=None):
    update = np.asarray(update)
    out = update_target(np.asarray(x), out, update)
    lo = _clamped_starts(out.shape, update.shape, starts)
    out[tuple(slice(a, a + n) for a, n in zip(lo, update.shape))] = update
    return out


def _full_starts(operand_shape, indices, index_map, operand_batching_dims, indices_batching_dims):
    """(n, rank) start positions of every index vector, batching axes filled in."""
    batch_shape = indices.shape[:-1]
    n = math.prod(batch_shape)
    flat = indices.reshape(n, indices.shape[-1])
    if flat.dtype == np.uint64:
        # a start of 2**63 or more is out of bounds on the high side (clamped to the top, or
        # dropped): saturate rather than let the int64 conversion wrap it negative
        flat = np.minimum(flat, np.uint64(np.iinfo(np.int64).max))
    flat = flat.astype(np.int64)
    starts = np.zeros((n, len(operand_shape)), np.int64)
    for k, d in enumerate(index_map):
        starts[:, d] = flat[:, k]
    if operand_batching_dims:
        grid = np.indices(batch_shape).reshape(len(batch_shape), n)
        for od, idim in zip(operand_batching_dims, indices_batching_dims):
            starts[:, od] = grid[idim]
    return starts


def _window_index(starts, window):
    """Advanced-index tuple addressing ``window`` (a full-rank shape) at each start."""
    rank = len(window)
    idx = []
    for d in range(rank):
        shape = [starts.shape[0]] + [1] * rank
        shape[d + 1] = window[d]
        offs = np.arange(window[d]).reshape([1] + [window[d] if i == d else 1 for i in range(rank)])
        idx.append(starts[:, d].reshape([-1] + [1] * rank) + offs)
    return tuple(idx)


@impl(lax.gather_p, fresh=True)  # (advanced indexing copies)
def _gather(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
            unique_indices, mode, fill_value):
    dn = dimension_numbers
    operand, indices = np.asarray(operand), np.asarray(indices)
    shape = np.array(operand.shape)
    sizes = np.array(slice_sizes)
    starts = _full_starts(operand.shape, indices, dn.start_index_map, dn.operand_batching_dims,
                          dn.start_indices_batching_dims)
    in_bounds = np.all((starts >= 0) & (starts <= shape - sizes), axis=1)
    starts = np.clip(starts, 0, shape - sizes)
    window = operand[_window_index(starts, slice_sizes)]            # (n, *slice_sizes)
    if mode == GatherScatterMode.FILL_OR_DROP and not np.all(in_bounds):
        window = np.where(in_bounds.reshape((-1,) + (1,) * len(slice_sizes)), window,
                          gather_fill_value(operand.dtype, fill_value))
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    kept = [i for i in range(operand.ndim) if i not in dropped]
    batch_shape = indices.shape[:-1]
    window = window.reshape(batch_shape + tuple(slice_sizes[i] for i in kept))
    # Place offset axes at offset_dims, batch axes in the remaining output positions.
    out_rank = len(batch_shape) + len(kept)
    nb = len(batch_shape)
    batch_positions = [i for i in range(out_rank) if i not in dn.offset_dims]
    perm = [0] * out_rank
    for src, dst in enumerate(batch_positions):
        perm[dst] = src
    for k, dst in enumerate(dn.offset_dims):
        perm[dst] = nb + k
    return np.transpose(window, perm)


def _scatter(combine):
    @updates_in_place
    def scatter(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                unique_indices, mode, out=None):
        dn = dimension_numbers
        indices, updates = np.asarray(indices), np.asarray(updates)
        out = update_target(np.asarray(operand), out, indices, updates)
        dropped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
        scatter_axes = [i for i in range(updates.ndim) if i not in dn.update_window_dims]
        # updates as (n, *window) with size-1 axes at the inserted/batching operand axes
        u = np.transpose(updates, scatter_axes + list(dn.update_window_dims))
        win = iter(updates.shape[d] for d in dn.update_window_dims)
        window = tuple(1 if i in dropped else next(win) for i in range(out.ndim))
        n = math.prod(updates.shape[a] for a in scatter_axes)
        u = u.reshape((n,) + window)
        starts = _full_starts(out.shape, indices, dn.scatter_dims_to_operand_dims,
                              dn.operand_batching_dims, dn.scatter_indices_batching_dims)
        shape, sizes = np.array(out.shape), np.array(window)
        if mode != GatherScatterMode.CLIP:
            # FILL_OR_DROP skips out-of-bounds windows; so does PROMISE_IN_BOUNDS, as XLA's
            # native scatter does (while its native gather clamps, as the gather kernel does)
            keep = np.all((starts >= 0) & (starts <= shape - sizes), axis=1)
            starts, u = starts[keep], u[keep]
        else:
            starts = np.clip(starts, 0, shape - sizes)
        if not starts.shape[0]:
            return out
        axis = _one_axis(out.shape, window) if combine is _assign else None
        if axis is not None:
            _assign_along(out, axis, starts[:, axis], u)
        else:
            combine(out, _window_index(starts, window), u)
        return out
    return scatter


def _assign(out, idx, u):
    out[idx] = u


def _one_axis(shape: tuple, window: tuple) -> int | None:
    """The one axis along which windows of ``window`` are one element wide where the others
    cover their axes whole (``x.at[:, cols].set(v)``, ``x.at[rows].set(v)``); None
    otherwise."""
    partial = [d for d, (n, w) in enumerate(zip(shape, window)) if n != w]
    return partial[0] if len(partial) == 1 and window[partial[0]] == 1 else None


def _assign_along(out, axis: int, positions, u) -> None:
    """``scatter`` of whole slices along ``axis`` at ``positions``: one assignment of the
    slices to the operand's view with ``axis`` first, each position's last update only (the
    last update wins, as the advanced-index tuple's assignment gives it; 4096 columns of a
    512x512 array: ~20 -> ~3 ms)."""
    n = positions.shape[0]
    values = u.reshape((n,) + tuple(d for a, d in enumerate(u.shape[1:]) if a != axis))
    if n > 1:
        _, first = np.unique(positions[::-1], return_index=True)
        last = n - 1 - first
        positions, values = positions[last], values[last]
    np.moveaxis(out, axis, 0)[positions] = values


impl(lax.scatter_p, fresh=True)(_scatter(_assign))
impl(lax.scatter_add_p, fresh=True)(_scatter(lambda out, idx, u: np.add.at(out, idx, u)))
impl(lax.scatter_mul_p, fresh=True)(_scatter(lambda out, idx, u: np.multiply.at(out, idx, u)))
def _extreme_at(which: str):
    ufunc = np.maximum if which == "max" else np.minimum

    def combine(out, idx, u):
        if out.dtype.kind == "c":
            _complex_extreme_at(out, idx, u, which == "max")
            return
        if not dtypes.is_float(out.dtype):
            ufunc.at(out, idx, u)
            return
        before = out[idx]
        ufunc.at(out, idx, u)
        if not bool((out[idx] == 0).any()):
            return
        # a zero where updates landed gets XLA's sign (-0 < +0): the preferred zero wins if
        # the operand or any update there held it (plax.lowering.signed_zeros)
        touched = np.zeros(out.shape, bool)
        touched[idx] = True
        found = np.zeros(out.shape, bool)
        found[idx] = signed_zeros.preferred_zeros(before, which)
        np.logical_or.at(found, idx, signed_zeros.preferred_zeros(u, which))
        out[...] = signed_zeros.signed(out, touched & (out == 0), found, which)
    return combine


def _complex_extreme_at(out, idx, u, is_max: bool) -> None:
    """XLA's scatter max/min of complex values: each update in turn is combined into what
    its window holds by JAX's lexicographic max/min (plax.lowering.complex_extremes), whose
    ties and NaNs make the order matter; one window at a time (a window's own positions
    are distinct)."""
    for k in range(u.shape[0]):
        at = tuple(i[k] for i in idx)
        held = out[at]
        out[at] = np.where(complex_extremes.first_wins(held, u[k], is_max), held, u[k])


impl(lax.scatter_min_p, fresh=True)(_scatter(_extreme_at("min")))
impl(lax.scatter_max_p, fresh=True)(_scatter(_extreme_at("max")))
