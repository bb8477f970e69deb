"""NumPy-style indexing on top of slice/gather/scatter: ``x[idx]`` and ``x.at[idx].op(y)``.

``x[idx]`` takes a static fast path (slice, rev, squeeze, expand_dims) when the
index has only Python ints, slices, None and Ellipsis; otherwise integer array
indices (and traced scalars) become one ``gather``, placed as NumPy places
advanced-index dimensions. Out-of-bounds integer array indices are clamped on the way
forward and get a zero gradient, as in JAX (the gather's mode is "promise_in_bounds"). An
index whose only arrays are scalars (0-d or traced) reads one window with ``dynamic_slice``
instead, as JAX does: clamped both ways, the gradient going to the clamped element.

``x.at[idx].set(y)`` with integer arrays is one scatter of windows with the start indices
and dimension numbers of the gather ``x[idx]`` reads with (one plan for both, as JAX stages
them), out-of-bounds windows dropped (or clamped with ``mode="clip"``); a static box is a
``dynamic_update_slice``; what neither covers (a scalar boolean index) scatters into the
flattened array at the flat positions of ``x[idx]``, found by indexing an iota.
"""
from __future__ import annotations

import math
import warnings
from typing import Any, NamedTuple

import numpy as np

from plax import dtypes, errors, lax
from plax.array import Array
from plax.core import varying as _varying
from plax.core.trace import Tracer, get_aval
from plax.numpy.jax_array_protocol import has_jax_array
from plax.lax.slicing import (GatherDimensionNumbers, GatherScatterMode, ScatterDimensionNumbers,
                              slice_size_out_of_range,
                              dynamic_update_slice_unchecked)
from plax.sharding import mesh_maybe_set as _mesh_maybe_set
from plax.sharding_eager import placed_as_scatter, update_typed_as_scatter
from plax.sharding_indexing import index_typed
from plax.sharding_types import explicit_type, is_untyped, with_out_sharding
from plax.state.indexing import has_slice, read_with_slices, update_with_slices


NonConcreteBooleanIndexError = errors.NonConcreteBooleanIndexError


# entries that index no axis of the operand: a new axis, and the separator an empty Ellipsis
# leaves between advanced indices
_NO_AXIS = ("none", "sep")


def _is_int_scalar(i) -> bool:
    return isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))


def _index_error_for(i) -> TypeError | ValueError:
    refused = errors.jax_array_operand(i)  # JAX 0.10 reads no __jax_array__ of an index
    if refused is not None:
        return refused
    if isinstance(i, str):
        return TypeError(f"JAX does not support string indexing; got idx={i!r}")
    dt = getattr(i, "dtype", None)
    if dt is not None:
        return TypeError(f"Indexer must have integer or boolean type, got indexer with type {dt}")
    return TypeError(f"Indexer must have integer or boolean type, got indexer with type "
                     f"{type(i).__name__}: {i!r}")


def _normalize_entries(x_shape: tuple, idx: Any) -> list:
    """Expands the index into entries ('none',), ('slice', s), ('int', i), ('array', a)
    (a bool mask becomes one 'array' entry per masked axis)."""
    from plax.numpy.creation import array as jnp_array
    if isinstance(idx, list):
        # NumPy's old "a list may be a tuple" rule is ambiguous; JAX refuses it, and so do we
        hint = "arr[tuple(seq)]" if any(isinstance(i, (slice, list, type(None), type(Ellipsis)))
                                        or hasattr(i, "__len__") for i in idx) else "arr[array(seq)]"
        raise TypeError(f"Using a non-tuple sequence for multidimensional indexing is not "
                        f"allowed; use {hint} instead of arr[seq] (got index {idx!r}).")
    if not isinstance(idx, tuple):
        idx = (idx,)
    entries: list = []
    for i in idx:
        if i is None:
            entries.append(("none",))
        elif i is Ellipsis:
            entries.append(("ellipsis",))
        elif isinstance(i, slice):
            for part in (i.start, i.stop, i.step):
                if part is not None and not _is_int_scalar(part) and not (
                        isinstance(part, (Array, Tracer)) and get_aval(part).shape == ()
                        and dtypes.is_integer(get_aval(part).dtype)):
                    raise TypeError(f"Slice entries must be static integers or None, got {i}")
            if any(isinstance(p, Tracer) for p in (i.start, i.stop, i.step)):
                raise errors.ConcretizationTypeError(
                    i, "Array slice indices must have static start/stop/step to be used with "
                       "NumPy indexing syntax. Use lax.dynamic_slice for traced starts.")
            entries.append(("slice", slice(*(None if p is None else int(p)
                                              for p in (i.start, i.stop, i.step)))))
        elif isinstance(i, (bool, np.bool_)):
            entries.append(("bool", bool(i)))
        elif _is_int_scalar(i):
            entries.append(("int", int(i)))
        elif isinstance(i, (list, tuple)):
            # a sequence inside an index tuple is an array index (integer or boolean)
            arr = jnp_array(i) if len(i) else jnp_array(i, dtype=np.int32)
            if get_aval(arr).dtype == np.bool_:
                entries.append(("mask", np.asarray(arr)))
            elif dtypes.is_integer(get_aval(arr).dtype):
                entries.append(("array", arr))
            else:
                raise _index_error_for(arr)
        elif isinstance(i, (Array, Tracer, np.ndarray)):
            aval = get_aval(i) if not isinstance(i, np.ndarray) else None
            dt = aval.dtype if aval is not None else i.dtype
            if dt == np.bool_:
                if isinstance(i, Tracer) and i.to_concrete_value() is None:
                    raise NonConcreteBooleanIndexError(aval)
                entries.append(("mask", np.asarray(i)))
            elif np.issubdtype(dt, np.integer):
                entries.append(("array", i))
            else:
                raise _index_error_for(i)
        else:
            raise _index_error_for(i)
    # expand Ellipsis and masks
    n_ell = sum(e[0] == "ellipsis" for e in entries)
    if n_ell > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 if e[0] in ("slice", "int", "array") else
                   np.ndim(e[1]) if e[0] == "mask" else 0 for e in entries)
    if consumed > len(x_shape):
        raise IndexError(f"Too many indices: array is {len(x_shape)}-dimensional, but "
                         f"{consumed} were indexed")
    out: list = []
    dim = 0  # the axis of x the next entry indexes
    for e in entries:
        if e[0] == "ellipsis":
            n = len(x_shape) - consumed
            # an Ellipsis of no axes still separates advanced indices (NumPy's placement rule)
            out.extend([("slice", slice(None))] * n if n else [("sep",)])
            dim += n
        elif e[0] == "mask":
            mask = e[1]
            if mask.ndim == 0:
                out.append(("bool", bool(mask)))
                continue
            covered = tuple(x_shape[dim:dim + mask.ndim])
            # a mask with no elements selects nothing whatever the axes' sizes, as NumPy and JAX
            if mask.shape != covered and mask.size != 0:
                raise IndexError(f"boolean index did not match indexed array: the mask has "
                                 f"shape {mask.shape} but indexes axes {dim}.."
                                 f"{dim + mask.ndim - 1} of shape {covered} (array shape "
                                 f"{tuple(x_shape)})")
            out.extend(("array", jnp_array(nz.astype(np.int32))) for nz in np.nonzero(mask))
            dim += mask.ndim
        else:
            out.append(e)
            dim += e[0] != "none" and e[0] != "bool"
    if n_ell == 0:
        out.extend([("slice", slice(None))] * (len(x_shape) - consumed))
    return out


def getitem(x, idx, *, mode=None, fill_value=None, ints_as_arrays: bool = False):
    """``x[idx]`` with NumPy semantics (see the module docstring).

    Args:
      x: the array.
      idx: the index: ints, slices, None, Ellipsis, integer arrays, boolean masks (concrete)
        and tuples of them.
      mode: how out-of-bounds integer array indices behave: None or "promise_in_bounds"
        (JAX's default for reads: clamped on the way forward, while the gradient, a
        scatter-add that drops out-of-bounds updates, is zero there), "clip" (clamped, the
        gradient going to the clamped element) or "fill" (read ``fill_value``, zero gradient).
        Scalar array indices (without "fill") are clamped both ways, like "clip".
      fill_value: the value read out of bounds in "fill" mode (default NaN for inexact
        types, the extreme value for integers).
      ints_as_arrays: treat integer scalars as advanced indices (used by ``.at[]``).

    Returns:
      The indexed array.

    Raises:
      IndexError: too many indices, a mask of the wrong shape, or an index into an empty axis.
      TypeError: an index of the wrong type (float, string, a top-level list).
      NonConcreteBooleanIndexError: a boolean mask that is traced.
    """
    from plax.numpy.creation import asarray
    x = asarray(x)
    if has_slice(idx):  # jax.ds(i, n): cut the window first, then index it statically
        return read_with_slices(x, idx, lambda w, rest: getitem(
            w, rest, mode=mode, fill_value=fill_value, ints_as_arrays=ints_as_arrays))
    entries = _normalize_entries(get_aval(x).shape, idx)
    sharding = explicit_type(x)
    if sharding is not None and not is_untyped():
        # explicit sharding: JAX's errors and types (the read itself is the same)
        return index_typed(lambda: _read(x, entries, mode, fill_value, ints_as_arrays),
                           x, entries, sharding, update=False)
    return _read(x, entries, mode, fill_value, ints_as_arrays)


def _read(x, entries, mode, fill_value, ints_as_arrays):
    if any(e[0] == "bool" for e in entries):
        x, entries = _bools_as_arrays(x, entries)
    if mode is not None and GatherScatterMode.from_any(mode) == GatherScatterMode.FILL_OR_DROP:
        ints_as_arrays = True  # out-of-bounds ints read fill_value, so they must be gathered
    if not ints_as_arrays and _scalar_indices_only(entries):
        return _dynamic_index(x, entries)
    if ints_as_arrays or any(e[0] == "array" for e in entries):
        # static ints join the advanced indices as Python ints (normalized while tracing, as
        # JAX does: no comparison is staged for them)
        entries = [("array", int(e[1])) if e[0] == "int" else e for e in entries]
    out, _ = _index(x, entries, mode, fill_value)
    return out


def _scalar_indices_only(entries) -> bool:
    """Whether the integer array indices are all scalars (0-d arrays, traced scalars) beside
    static ints, unit-step slices, None and Ellipsis: such an index reads one window, with
    ``dynamic_slice`` (as JAX does), so an out-of-bounds scalar is clamped both ways (its
    gradient goes to the clamped element), unlike a gathered index array's."""
    found = False
    for e in entries:
        if e[0] == "array":
            i = e[1]
            if (np.ndim(i) if isinstance(i, np.ndarray) else get_aval(i).ndim) != 0:
                return False
            found = True
        elif e[0] == "slice":
            if e[1].step not in (None, 1, -1):
                return False
        elif e[0] not in ("int", "none", "sep"):
            return False
    return found


def _dynamic_index(x, entries):
    """``x[idx]`` for an index of scalar integers (some traced), slices, None and Ellipsis:
    static slices, then one ``dynamic_slice`` of size 1 along the integer-indexed axes (negative
    indices count from the end; out-of-bounds ones are clamped), then a squeeze."""
    from plax.numpy.creation import asarray
    axis, scalar_axes, slices = 0, [], []
    for e in entries:
        if e[0] in _NO_AXIS:
            continue
        if e[0] == "slice":
            slices.append((axis, e[1]))
        else:
            scalar_axes.append((axis, e[1]))
        axis += 1
    x = _static_slices(x, slices, [])
    shape = get_aval(x).shape
    starts, sizes = [np.int32(0)] * len(shape), list(shape)
    for a, i in scalar_axes:
        d = shape[a]
        if d == 0:
            raise IndexError(f"index is out of bounds for axis {a} with size 0")
        if isinstance(i, int):  # static: dynamic_slice wraps it once if negative, then clamps
            i = np.int32(i)
        else:  # int32, like the other starts (dynamic_slice wraps it if negative, then clamps)
            i = asarray(i)
            if get_aval(i).dtype != np.int32:
                i = lax.convert_element_type(i, np.int32)
        starts[a], sizes[a] = i, 1
    x = lax.dynamic_slice(x, starts, sizes)
    x = lax.squeeze(x, [a for a, _ in scalar_axes])
    # the scalar indices removed their axes, as static ints do
    return _insert_new_axes(x, [("int", 0) if e[0] == "array" else e for e in entries], None)[0]


def _bools_as_arrays(x, entries):
    """A scalar boolean index is NumPy's 0-d boolean array: an advanced index that adds an axis
    of size 1 (True) or 0 (False). Insert that axis and index it with ``[0]`` or ``[]``."""
    new_entries, insert_at, axis = [], [], 0
    for e in entries:
        if e[0] == "bool":
            insert_at.append(axis)
            new_entries.append(("array", np.zeros(1 if e[1] else 0, np.int32)))
            axis += 1
        elif e[0] in _NO_AXIS:
            new_entries.append(e)
        else:
            new_entries.append(e)
            axis += 1
    return lax.expand_dims(x, insert_at), new_entries


def _static_slices(x, slices, int_axes):
    """``x`` indexed by static Python slices ``[(axis, slice)]`` and in-range static ints
    ``[(axis, index)]`` as JAX 0.10.2 stages it: one lax.slice over every axis (unless it keeps
    everything), whose limit is each slice's stop (not its last element plus one), strides None
    unless some step is not 1; a negative step slices the elements it keeps with the positive
    step, then one lax.rev; then one squeeze of the int axes."""
    shape = get_aval(x).shape
    lo, hi = [0] * len(shape), list(shape)
    strides, rev, cut = None, [], bool(int_axes)
    for axis, s in slices:
        d = shape[axis]
        start, stop, step = s.indices(d)
        if step > 0:
            lo[axis], hi[axis] = start, max(start, stop)
        else:
            lo[axis] = min(d, stop + 1 + abs(start - stop - 1) % -step)
            hi[axis] = max(lo[axis], start + 1)
            rev.append(axis)
        cut = cut or lo[axis] != 0 or hi[axis] != d
        if abs(step) != 1:
            strides = strides or [1] * len(shape)
            strides[axis] = abs(step)
    for axis, i in int_axes:
        lo[axis], hi[axis] = i, i + 1
    if cut or strides is not None:
        x = lax.slice(x, lo, hi, strides)
    if rev:
        x = lax.rev(x, tuple(rev))
    if int_axes:
        x = lax.squeeze(x, [a for a, _ in int_axes])
    return x


def _index(x, entries, mode, fill_value):
    from plax.numpy.creation import asarray
    x = whole = asarray(x)
    # 1. static slices and static ints (when no arrays) along the consumed axes
    axis = 0
    int_axes, slices = [], []
    for e in entries:
        if e[0] in _NO_AXIS:
            continue
        if e[0] == "slice":
            slices.append((axis, e[1]))
        elif e[0] == "int":
            d = get_aval(x).shape[axis]
            if d == 0:
                raise IndexError(f"index {e[1]} is out of bounds for axis {axis} with size 0")
            if not -d <= e[1] < d:
                # an int outside its axis (ints are static only when no arrays index): JAX
                # reads it with dynamic_slice, clamped when it runs (where checkify sees it),
                # not with a static slice clamped while tracing
                return _dynamic_index(whole, entries), None
            int_axes.append((axis, e[1] + d if e[1] < 0 else e[1]))
        axis += 1
    adv = [k for k, e in enumerate(entries) if e[0] == "array"]
    if not adv:  # (one slice for every static slice and int, as JAX)
        return _insert_new_axes(_static_slices(x, slices, int_axes), entries, None)
    if 0 in get_aval(x).shape:  # (an empty axis: slice first, then the padded gather below)
        return _advanced(_static_slices(x, slices, []), entries, adv, mode, fill_value,
                         sliced=True)
    # the slices folded into the one gather, as JAX stages a mixed index
    return _advanced(x, entries, adv, mode, fill_value)


def _empty_axis_gather_error(axis: int, batch_shape: tuple) -> Exception:
    """The error of reading an empty ``axis`` at integer array indices of ``batch_shape``.

    JAX 0.10.2 stages such an index as a gather that takes a one-element slice of the empty
    axis, which its shape rule refuses with this TypeError (a scalar index into an empty axis
    is an IndexError instead, raised before any gather is built).
    """
    if not batch_shape:  # (scalar indices only: JAX's IndexError)
        return IndexError(f"index is out of bounds for axis {axis} with size 0")
    return TypeError(slice_size_out_of_range(axis, 0, 1))


def _insert_new_axes(x, entries, adv_block):
    """Inserts the axes of 'none' entries. ``adv_block`` is None, or (placement, rank) of the
    advanced-index block: placement "front" (non-adjacent advanced indices, NumPy moves their
    axes first) or "inline" (at the first advanced index). Returns (array, [(entry, axis)])."""
    new_axes = _new_axis_positions(entries, adv_block)
    if new_axes:
        x = lax.expand_dims(x, [a for _, a in new_axes])
    return x, new_axes


def _new_axis_positions(entries, adv_block) -> list:
    """Where the 'none' entries' axes stand in ``x[idx]``, as [(entry, axis)] (``adv_block``
    as for :func:`_insert_new_axes`)."""
    new_axes, pos, placed = [], 0, False
    if adv_block is not None and adv_block[0] == "front":
        pos, placed = adv_block[1], True
    for k, e in enumerate(entries):
        if e[0] == "none":
            new_axes.append((k, pos))
            pos += 1
        elif e[0] == "slice":
            pos += 1
        elif e[0] == "array" and not placed:
            pos += adv_block[1]
            placed = True
    return new_axes


class _IndexPlan(NamedTuple):
    """How an index of integer arrays (and static ints and slices among them) reads as one
    ``gather`` and writes as one ``scatter`` with the same start indices and dimension numbers,
    as JAX 0.10.2 stages both (the scatter's update_window_dims, inserted_window_dims and
    scatter_dims_to_operand_dims are the gather's offset_dims, collapsed_slice_dims and
    start_index_map)."""
    indices: Any          # the start indices: (*batch, columns)
    dnums: GatherDimensionNumbers
    slice_sizes: tuple    # the window read (and written) at each start
    shape: tuple          # the shape the gather reads, which the scatter's updates have
    reversed_dims: tuple  # axes of ``shape`` gathered ascending for a negative-step slice
    block: tuple          # where the advanced indices' batch axes stand (_insert_new_axes)


def _plan_index(x, entries, adv, sliced: bool = False):
    """The gather/scatter plan of an index with integer arrays ``adv`` (entry numbers; ints
    among them as Python ints), as JAX 0.10.2 stages it: a unit-step slice is a window (its
    start, unless 0 with the whole axis kept, one more column of the start indices), a slice
    with another step gathers ``start + step * iota`` (a negative step gathers those positions
    ascending; the plan says which axes to reverse). The advanced indices' batch axes stand
    where the first of them is when they are adjacent, else in front. ``sliced``: ``x`` is
    already cut by the slices (each then keeps its whole axis).

    Returns ``(x, plan)``: ``x`` padded where integer arrays index an empty axis (a read of
    nothing, which needs a well-formed gather), and the :class:`_IndexPlan`; or ``(x, None)``
    for an index with no start column at all (whole axes only: nothing to gather by)."""
    from plax.numpy.creation import asarray
    from plax.numpy.shape_ops import broadcast_arrays
    from plax.numpy.util import broadcast_shapes
    contiguous = not adv or adv == list(range(adv[0], adv[-1] + 1))
    shape = get_aval(x).shape
    # operand axis of each entry (None and advanced entries consume/skip as usual)
    axes, axis = {}, 0
    for k, e in enumerate(entries):
        if e[0] in _NO_AXIS:
            continue
        axes[k] = axis
        axis += 1
    adv_axes = [axes[k] for k in adv]
    idx_arrays = []
    index_dtype = np.int32
    for k in adv:
        raw = entries[k][1]
        d = shape[axes[k]]
        if isinstance(raw, int):  # a static int: normalized now, converted once broadcast
            idx_arrays.append(asarray(raw + d if raw < 0 else raw))
            continue
        i = asarray(raw)
        if not dtypes.is_integer(get_aval(i).dtype):
            raise _index_error_for(raw)
        dt = get_aval(i).dtype
        if dt.kind == "i":  # NumPy's negative indices count from the end
            # in the index's own dtype, as JAX normalizes them (an axis longer than that
            # dtype counts is added in the gather's index dtype instead)
            if d > np.iinfo(dt).max:
                i, dt = lax.convert_element_type(i, index_dtype), np.dtype(index_dtype)
            i = lax.select(lax.lt(i, np.zeros((), dt)), lax.add(i, np.array(d, dt)), i)
        idx_arrays.append(i)
    batch_shape = broadcast_shapes(*(get_aval(i).shape for i in idx_arrays)) if adv else ()
    empty_axes = [a for a in adv_axes if shape[a] == 0]
    if empty_axes:
        if math.prod(batch_shape):
            raise _empty_axis_gather_error(empty_axes[0], batch_shape)
        # nothing is read: give the empty axes one (unused) element so the gather is well formed
        x = lax.pad(x, lax.full((), 0, get_aval(x).dtype),
                    [(0, 1 if a in empty_axes else 0, 0) for a in range(len(shape))])
        shape = get_aval(x).shape
    # walk the entries: each start-index column (an array and the index axes its axes fill,
    # or a scalar start), the batch axes, the window
    columns, batch, start_map, collapsed, offset_dims, reverse = [], [], [], [], [], []
    slice_sizes = list(shape)
    out_shape = []
    y = 0  # output axis (before new axes are inserted)
    adv_at = (adv[0] if contiguous else 0) if adv else None
    for k, e in enumerate(entries):
        if k == adv_at:  # the advanced indices' batch axes, all at once
            # broadcast and converted to the gather's index dtype here, as JAX does
            idx_arrays = [lax.convert_element_type(i, index_dtype)
                          for i in broadcast_arrays(*idx_arrays)]
            first = len(batch)
            columns += [(i, tuple(range(first, first + len(batch_shape)))) for i in idx_arrays]
            batch += list(batch_shape)
            out_shape += list(batch_shape)
            start_map += adv_axes
            collapsed += adv_axes
            for a in adv_axes:
                slice_sizes[a] = 1
            y += len(batch_shape)
        if e[0] != "slice":
            continue
        a, d = axes[k], shape[axes[k]]
        start, stop, step = (0, d, 1) if sliced else e[1].indices(d)
        n = len(range(start, stop, step))
        if step == 1:  # a window
            if start != 0 or n != d:
                columns.append((np.int32(start), ()))
                start_map.append(a)
            slice_sizes[a] = n
            offset_dims.append(y)
        else:  # gathered positions: start + step * iota, ascending
            pos = lax.add(np.int32(start), lax.mul(np.int32(step), lax.iota(index_dtype, n)))
            if step < 0:
                pos = lax.rev(pos, (0,))
                reverse.append(y)
            columns.append((pos, (len(batch),)))
            batch.append(n)
            start_map.append(a)
            collapsed.append(a)
            slice_sizes[a] = 1
        out_shape.append(n)
        y += 1
    if not columns:
        return x, None
    nb = len(batch)
    indices = lax.concatenate([lax.broadcast_in_dim(c, tuple(batch) + (1,), dims)
                               for c, dims in columns], nb)
    dnums = GatherDimensionNumbers(offset_dims=tuple(offset_dims),
                                   collapsed_slice_dims=tuple(sorted(collapsed)),
                                   start_index_map=tuple(start_map))
    block = ("inline" if contiguous else "front", len(batch_shape))
    return x, _IndexPlan(indices, dnums, tuple(slice_sizes), tuple(out_shape), tuple(reverse),
                         block)


def _advanced(x, entries, adv, mode, fill_value, sliced: bool = False):
    """One gather for an index of integer arrays (advanced indices), static ints among them,
    and static slices, as JAX 0.10.2 stages it (see :func:`_plan_index`)."""
    x, plan = _plan_index(x, entries, adv, sliced)
    gmode = GatherScatterMode.from_any(mode) if mode is not None else GatherScatterMode.PROMISE_IN_BOUNDS
    out = lax.gather(x, plan.indices, plan.dnums, plan.slice_sizes, mode=gmode,
                     fill_value=fill_value)
    if plan.reversed_dims:
        out = lax.rev(out, plan.reversed_dims)
    return _insert_new_axes(out, entries, plan.block)


# ------------------------------------------------------------------ .at[] updates

_SCATTERS = {"set": lax.scatter, "add": lax.scatter_add, "multiply": lax.scatter_mul,
             "min": lax.scatter_min, "max": lax.scatter_max}


def scatter_update(x, idx, y, op: str, *, indices_are_sorted=False, unique_indices=False,
                   mode=None):
    """``x.at[idx].<op>(y)`` for op in set/add/multiply/min/max.

    ``y`` is cast to ``x``'s dtype and broadcast to the shape of ``x[idx]``. Out-of-bounds
    indices are dropped (the default, ``mode="drop"``, and ``"promise_in_bounds"``) or
    clamped (``mode="clip"``); repeated
    indices accumulate for add/multiply/min/max, and one of them wins for set.
    """
    from plax.numpy.creation import asarray
    x = asarray(x)
    if has_slice(idx):  # jax.ds(i, n): update the window, then write it back
        return update_with_slices(x, idx, lambda w, rest: scatter_update(
            w, rest, y, op, indices_are_sorted=indices_are_sorted,
            unique_indices=unique_indices, mode=mode))
    aval = get_aval(x)
    sharding = explicit_type(x)
    if sharding is not None and not is_untyped():  # explicit sharding: typed as JAX types it
        return index_typed(lambda: scatter_update(x, idx, y, op,
                                                  indices_are_sorted=indices_are_sorted,
                                                  unique_indices=unique_indices, mode=mode),
                           x, _normalize_entries(aval.shape, idx), sharding, update=True,
                           values=y)
    if op not in _SCATTERS:
        raise ValueError(f"unknown .at[] update {op!r}; expected one of {sorted(_SCATTERS)}")
    if isinstance(y, (list, tuple)) or has_jax_array(y):  # (JAX: jnp.asarray(y))
        from plax.numpy.creation import array
        y = array(y)
    work_dtype = _scatter_dtype(x, y, aval)
    if work_dtype != aval.dtype:
        # As JAX does: scatter in the promoted type, then cast back (so bool.at[i].add(-2)
        # is a logical or, and int.at[i].multiply(0.5) halves before truncating).
        out = scatter_update(lax.convert_element_type(x, work_dtype), idx, y, op,
                             indices_are_sorted=indices_are_sorted,
                             unique_indices=unique_indices, mode=mode)
        return lax.convert_element_type(out, aval.dtype, aval.weak_type)
    if op in ("add", "multiply") and aval.dtype == np.bool_:
        raise TypeError(f"x.at[idx].{op}() does not accept a bool array with a bool update (as "
                        "in JAX); use set, min or max, or cast to an integer type first.")
    y = _as_update(y, aval)
    gmode = GatherScatterMode.FILL_OR_DROP if mode is None else GatherScatterMode.from_any(mode)
    if aval.size == 0:
        return _update_empty(x, idx, y, op, gmode, indices_are_sorted, unique_indices)
    # a box of static bounds is written with dynamic_update_slice, unless an operand holds
    # partial sums (unreduced, inside shard_map): JAX's scatter types its result as not
    # unreduced where slice, add and dynamic_update_slice would refuse or keep them
    # (placed as JAX's scatter under a mesh with an Explicit axis: update_typed_as_scatter)
    region = None if _any_unreduced(x, y) else _static_region(aval.shape, idx)
    if region is not None:
        if 0 in region[1]:
            return x  # an empty box: x as it is, as JAX's scatter leaves it (its placement too)
        out = _update_region(x, region, y, op)
        if _mesh_maybe_set[0] and update_typed_as_scatter(x, y):
            return placed_as_scatter(out)
        return out
    out = _windowed_update(x, idx, y, op, gmode, indices_are_sorted, unique_indices)
    if out is not None:
        return out
    n = aval.size
    if n >= np.iinfo(np.int32).max:
        raise ValueError("arrays with 2**31 or more elements cannot be updated with .at[]")
    # The flat positions x[idx] reads: index an iota with the same machinery as getitem, so
    # every index form that reads also writes. Out-of-bounds positions read as n, which the
    # scatter drops (in "drop" mode, and in "promise_in_bounds" mode as XLA's scatter does);
    # "clip" clamps them instead.
    if gmode == GatherScatterMode.CLIP:
        target = flat_positions(aval.shape, idx, mode=gmode, ints_as_arrays=True)
    else:
        target = flat_positions(aval.shape, idx, mode=GatherScatterMode.FILL_OR_DROP,
                                fill_value=n, ints_as_arrays=True)
    tshape = get_aval(target).shape
    if 0 in tshape:
        return x  # nothing selected: x as it is, as JAX leaves it (``y`` is not broadcast)
    y = _broadcast_update(y, tshape, idx)
    size = math.prod(tshape)
    flat_x = lax.reshape(x, (n,))
    flat_ids = lax.reshape(target, (size, 1))
    flat_y = lax.reshape(y, (size,))
    dnums = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
                                    scatter_dims_to_operand_dims=(0,))
    out = _SCATTERS[op](flat_x, flat_ids, flat_y, dnums, indices_are_sorted=indices_are_sorted,
                        unique_indices=unique_indices, mode=gmode)
    out = lax.reshape(out, aval.shape)
    if aval.weak_type:
        out = lax.convert_element_type(out, aval.dtype, True)
    return out


def flat_positions(shape: tuple, idx, **read_options):
    """The flat (C-order) position of each element ``x[idx]`` selects, for an ``x`` of
    ``shape``, laid out as ``x[idx]`` is: an iota indexed by the same machinery as
    :func:`getitem` (``read_options`` are its keywords), so every index form that reads can
    also write.

    Example:
      >>> flat_positions((2, 3), (slice(None), 1))
      Array([1, 4], dtype=int32)
    """
    ids = lax.reshape(lax.iota(np.int32, math.prod(shape)), tuple(shape))
    return getitem(ids, idx, **read_options)


def _windowed_update(x, idx, y, op, mode, indices_are_sorted, unique_indices):
    """``x.at[idx].<op>(y)`` as one scatter of windows, built from the same plan as the gather
    ``x[idx]`` reads with (:func:`_plan_index`), as JAX 0.10.2 stages it: ``x.at[rows]``
    scatters whole rows, ``x.at[:, cols]`` columns, ``x.at[i, j]`` (a matrix) single elements,
    with no iota of all of ``x``'s positions. Static ints count as integer arrays (out of
    bounds, they are dropped or clipped with the rest). Returns None for an index this does
    not cover (a scalar boolean, or whole axes only), which the flat-position plan serves."""
    aval = get_aval(x)
    entries = _normalize_entries(aval.shape, idx)
    if any(e[0] == "bool" for e in entries):
        return None
    entries = [("array", int(e[1])) if e[0] == "int" else e for e in entries]
    adv = [k for k, e in enumerate(entries) if e[0] == "array"]
    _, plan = _plan_index(x, entries, adv)
    if plan is None:
        return None
    new_axes = [a for _, a in _new_axis_positions(entries, plan.block)]
    selected = list(plan.shape)  # the shape of x[idx]: the gathered shape, new axes inserted
    for a in new_axes:
        selected.insert(a, 1)
    if 0 in selected:
        return x  # nothing selected: x as it is, as JAX leaves it (``y`` is not broadcast)
    y = _broadcast_update(y, tuple(selected), idx)
    if new_axes:
        y = lax.squeeze(y, new_axes)
    if plan.reversed_dims:  # (the positions of a negative-step slice are scattered ascending)
        y = lax.rev(y, plan.reversed_dims)
    dnums = ScatterDimensionNumbers(update_window_dims=plan.dnums.offset_dims,
                                    inserted_window_dims=plan.dnums.collapsed_slice_dims,
                                    scatter_dims_to_operand_dims=plan.dnums.start_index_map)
    out = _SCATTERS[op](x, plan.indices, y, dnums, indices_are_sorted=indices_are_sorted,
                        unique_indices=unique_indices, mode=mode)
    if aval.weak_type:
        out = lax.convert_element_type(out, aval.dtype, True)
    return out


def _update_empty(x, idx, y, op, mode, indices_are_sorted, unique_indices):
    """``x.at[idx].<op>(y)`` for an ``x`` with no elements: ``x`` itself, as in JAX 0.10.2.

    As JAX does, a scalar integer index into an empty axis (beside no integer array) raises
    IndexError; and where integer arrays index every empty axis and select something, the
    update is staged as a scatter into the empty operand (which returns it), so that
    differentiating it fails as JAX's does: its rules gather a one-element slice of the
    empty axis, which the gather's shape rule refuses (TypeError).
    """
    shape = get_aval(x).shape
    parts = idx if isinstance(idx, tuple) else (idx,)
    entries = _normalize_entries(shape, idx)
    if any(e[0] == "bool" for e in entries):
        return x  # (a mask of an empty axis selects nothing)
    advanced = any(e[0] == "array" and _index_ndim(e[1]) for e in entries)
    axis, empty_scalar, adv_axes = 0, None, set()
    for e in entries:
        if e[0] in _NO_AXIS:
            continue
        if e[0] == "int" or e[0] == "array":
            if advanced:
                adv_axes.add(axis)
            elif shape[axis] == 0 and empty_scalar is None:
                empty_scalar = axis
        axis += 1
    if empty_scalar is not None:
        raise IndexError(f"index is out of bounds for axis {empty_scalar} with size 0")
    if not adv_axes or any(d == 0 and a not in adv_axes for a, d in enumerate(shape)):
        return x  # an empty window (JAX's scatter is skipped): nothing is staged
    # the shape x[idx] has: the same as in a stand-in whose empty axes have one element,
    # since only the integer arrays (which the stand-in's reads ignore) index those axes
    stand_in = np.broadcast_to(np.zeros((), np.bool_), tuple(max(d, 1) for d in shape))
    selected = stand_in[tuple(np.broadcast_to(np.intp(0), np.shape(p) if isinstance(p, np.ndarray)
                                              else get_aval(p).shape)
                              if _is_index_array(p) else 0 if _is_int_scalar(p) else p
                              for p in parts)].shape
    if 0 in selected:
        return x
    y = lax.reshape(_broadcast_update(y, selected, idx), (math.prod(selected),))
    everywhere = tuple(range(len(shape)))
    dnums = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=everywhere,
                                    scatter_dims_to_operand_dims=everywhere)
    starts = lax.full((math.prod(selected), len(shape)), 0, np.int32)
    return _SCATTERS[op](x, starts, y, dnums, indices_are_sorted=indices_are_sorted,
                         unique_indices=unique_indices, mode=mode)


def _index_ndim(i) -> int:
    return np.ndim(i) if isinstance(i, (np.ndarray, np.generic, int)) else get_aval(i).ndim


def _is_index_array(p) -> bool:
    """Whether an index component is an integer array (NumPy's, an Array or a tracer)."""
    if isinstance(p, (slice, type(None), type(Ellipsis))) or _is_int_scalar(p):
        return False
    return isinstance(p, (np.ndarray, Array, Tracer))


def _scatter_dtype(x, y, aval) -> np.dtype:
    """The dtype an ``.at[]`` update runs in: ``x``'s own when ``y`` casts to it safely, else
    the promotion of both, with JAX's FutureWarning about the unsafe cast."""
    kind = aval.dtype.kind
    t = type(y)
    # the common safe cases without a promotion: a Python scalar of a lower or equal kind, or
    # an array of the operand's dtype
    if (t is float and kind in "fcV") or (t is int and kind in "iufcV") or t is bool or \
            (t is complex and kind == "c"):
        return aval.dtype
    if isinstance(y, (Array, Tracer)) and y.aval.dtype == aval.dtype:
        return aval.dtype
    from plax.numpy.util import check_arraylike
    check_arraylike(".at[] update", y)
    if dtypes.result_type(y, aval.dtype) == aval.dtype:
        return aval.dtype
    y_dtype = dtypes.dtype(y)
    warnings.warn("scatter inputs have incompatible types: cannot safely cast value from "
                  f"dtype={y_dtype} to dtype={aval.dtype} with "
                  "jax_numpy_dtype_promotion=standard. In future JAX releases this will "
                  "result in an error.", FutureWarning, stacklevel=4)
    return dtypes.result_type(x, y)


def _as_update(y, aval):
    """The update values as an array of the operand's dtype (and weak type)."""
    from plax.numpy.util import check_arraylike, to_dtype
    if isinstance(y, (list, tuple)):
        from plax.numpy.creation import array
        y = array(y)
    check_arraylike(".at[] update", y)
    return to_dtype(y, aval.dtype, aval.weak_type)


def _broadcast_update(y, shape, idx):
    """``y`` broadcast to ``shape`` (the shape of ``x[idx]``), dropping leading size-1 axes of
    ``y`` first, as NumPy's assignment does."""
    from plax.numpy.util import broadcast_to
    yshape = get_aval(y).shape
    while len(yshape) > len(shape) and yshape[0] == 1:
        yshape = yshape[1:]
        y = lax.reshape(y, yshape)
    try:
        return broadcast_to(y, shape)
    except ValueError:
        raise ValueError(f"Incompatible shapes for .at[] update: values of shape "
                         f"{get_aval(y).shape} cannot be broadcast to the indexed shape {shape} "
                         f"(index {idx!r})") from None


def _any_unreduced(*values) -> bool:
    return _varying.active() and any(_varying.unreduced_of(get_aval(v)) for v in values)


def _static_region(shape, idx):
    """For an index of static in-bounds ints, unit-step slices, None and Ellipsis only: the
    box it selects, as (starts, sizes, result shape); otherwise None. Such updates need no
    scatter: a dynamic_update_slice writes the box."""
    parts = idx if isinstance(idx, tuple) else (idx,)
    if isinstance(idx, list):
        return None
    for p in parts:
        if not (p is None or p is Ellipsis or _is_int_scalar(p) or
                isinstance(p, slice) and all(v is None or _is_int_scalar(v)
                                             for v in (p.start, p.stop, p.step))):
            return None
    if sum(p is Ellipsis for p in parts) > 1:
        return None
    consumed = sum(1 for p in parts if p is not None and p is not Ellipsis)
    if consumed > len(shape):
        return None  # let getitem raise its IndexError
    starts, sizes, out_shape, dim = [], [], [], 0
    for p in parts:
        if p is None:
            out_shape.append(1)
            continue
        if p is Ellipsis:
            for _ in range(len(shape) - consumed):
                starts.append(0)
                sizes.append(shape[dim])
                out_shape.append(shape[dim])
                dim += 1
            continue
        d = shape[dim]
        if isinstance(p, slice):
            start, stop, step = p.indices(d)
            if step != 1:
                return None
            n = max(stop - start, 0)
            starts.append(start)
            sizes.append(n)
            out_shape.append(n)
        else:
            i = int(p) + d if int(p) < 0 else int(p)
            if not 0 <= i < d:
                return None  # out of bounds: the general path drops (or clips) it
            starts.append(i)
            sizes.append(1)
        dim += 1
    for d in shape[dim:]:
        starts.append(0)
        sizes.append(d)
        out_shape.append(d)
    return tuple(starts), tuple(sizes), tuple(out_shape)


def _update_region(x, region, y, op):
    """Applies ``op`` with ``y`` to the static box ``region`` of ``x``."""
    starts, sizes, out_shape = region
    y = _broadcast_update(y, out_shape, "static box")
    y = lax.reshape(y, sizes)
    if op != "set":
        limits = [s + n for s, n in zip(starts, sizes)]
        old = lax.slice(x, starts, limits)
        combine = {"add": lax.add, "multiply": lax.mul, "min": lax.min, "max": lax.max}[op]
        y = combine(old, y)
    if sizes == get_aval(x).shape:
        return y
    return dynamic_update_slice_unchecked(x, y, [np.int32(s) for s in starts])


def _untyped_with(compute, out_sharding):
    from plax.sharding_types import untyped
    with untyped():
        return with_out_sharding(compute, out_sharding)


class _IndexUpdateHelper:
    """The object behind ``x.at``: ``x.at[idx]`` returns an :class:`_IndexUpdateRef`."""

    __slots__ = ("array",)

    def __init__(self, array):
        self.array = array

    def __getitem__(self, index) -> "_IndexUpdateRef":
        return _IndexUpdateRef(self.array, index)

    def __repr__(self) -> str:
        return f"_IndexUpdateHelper({self.array!r})"


class _IndexUpdateRef:
    """``x.at[idx]``: functional updates of the indexed elements, returning new arrays.

    Example:
      >>> jnp.zeros(3).at[1].set(5.)
      Array([0., 5., 0.], dtype=float32)
    """

    __slots__ = ("array", "index")

    def __init__(self, array, index):
        self.array = array
        self.index = index

    def __repr__(self) -> str:
        return f"_IndexUpdateRef({self.array!r}, {self.index!r})"

    def get(self, *, indices_are_sorted=False, unique_indices=False, mode=None, fill_value=None,
            out_sharding=None):
        """``x[idx]``; ``mode="fill"`` returns ``fill_value`` for out-of-bounds indices;
        ``out_sharding=`` (explicit sharding) says how the result is split."""
        if out_sharding is not None:
            return _untyped_with(lambda: self.get(mode=mode, fill_value=fill_value),
                                 out_sharding)
        return getitem(self.array, self.index, mode=mode, fill_value=fill_value)

    def set(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            out_sharding=None):
        """``x[idx] = values``, as a new array."""
        if out_sharding is not None:  # explicit sharding: how the result is split
            return _untyped_with(lambda: self.set(values, mode=mode), out_sharding)
        return scatter_update(self.array, self.index, values, "set",
                              indices_are_sorted=indices_are_sorted,
                              unique_indices=unique_indices, mode=mode)

    def add(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            out_sharding=None):
        """``x[idx] += values`` (repeated indices accumulate), as a new array."""
        if out_sharding is not None:  # explicit sharding: how the result is split
            return _untyped_with(lambda: self.add(values, mode=mode), out_sharding)
        return scatter_update(self.array, self.index, values, "add",
                              indices_are_sorted=indices_are_sorted,
                              unique_indices=unique_indices, mode=mode)

    def subtract(self, values, **kwargs):
        """``x[idx] -= values``, as a new array."""
        from plax.numpy.ufuncs import negative
        return self.add(negative(values), **kwargs)

    def multiply(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            out_sharding=None):
        """``x[idx] *= values``, as a new array."""
        if out_sharding is not None:  # explicit sharding: how the result is split
            return _untyped_with(lambda: self.multiply(values, mode=mode), out_sharding)
        return scatter_update(self.array, self.index, values, "multiply",
                              indices_are_sorted=indices_are_sorted,
                              unique_indices=unique_indices, mode=mode)

    mul = multiply

    def divide(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """``x[idx] /= values``, as a new array (true division: integers become floats;
        repeated indices divide by each of their values)."""
        from plax.numpy.creation import ones_like
        from plax.numpy.ufuncs import divide
        divisor = scatter_update(ones_like(self.array), self.index, values, "multiply",
                                 indices_are_sorted=indices_are_sorted,
                                 unique_indices=unique_indices, mode=mode)
        return divide(self.array, divisor)

    def power(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None):
        """``x[idx] **= values``, as a new array (repeated indices multiply their exponents)."""
        from plax.numpy.creation import ones_like
        from plax.numpy.ufuncs import power
        exponent = scatter_update(ones_like(self.array), self.index, values, "multiply",
                                  indices_are_sorted=indices_are_sorted,
                                  unique_indices=unique_indices, mode=mode)
        return power(self.array, exponent)

    def min(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            out_sharding=None):
        """``x[idx] = minimum(x[idx], values)``, as a new array."""
        if out_sharding is not None:  # explicit sharding: how the result is split
            return _untyped_with(lambda: self.min(values, mode=mode), out_sharding)
        return scatter_update(self.array, self.index, values, "min",
                              indices_are_sorted=indices_are_sorted,
                              unique_indices=unique_indices, mode=mode)

    def max(self, values, *, indices_are_sorted=False, unique_indices=False, mode=None,
            out_sharding=None):
        """``x[idx] = maximum(x[idx], values)``, as a new array."""
        if out_sharding is not None:  # explicit sharding: how the result is split
            return _untyped_with(lambda: self.max(values, mode=mode), out_sharding)
        return scatter_update(self.array, self.index, values, "max",
                              indices_are_sorted=indices_are_sorted,
                              unique_indices=unique_indices, mode=mode)

    def apply(self, func, **kwargs):
        """``x[idx] = func(x[idx])``, as a new array."""
        return self.set(func(self.get()), **kwargs)
