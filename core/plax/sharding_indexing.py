"""Sharding rules of slicing, gathers and scatters (JAX 0.10's explicit sharding).

The rules follow JAX 0.10.2's, primitive by primitive:

* ``slice``, ``split`` and ``dynamic_slice`` keep the operand's spec; a split dimension
  whose new size no longer divides over its mesh axes is JAX's :class:`ShardingTypeError` ("slicing on
  sharded dims where out dim (3) is not divisible by mesh axes (2) ...");
* ``pad`` and ``fft`` keep the operand's spec (a padded or transformed dimension's new
  size must still divide over its axes, as in JAX); ``rev`` keeps the operand's spec;
  ``dynamic_update_slice`` requires the update to be
  split as the operand is;
* ``gather`` keeps the spec of the operand dimensions it reads whole and gives the batch
  dimensions the indices' spec; a split dimension it indexes into (or a split index array)
  is ambiguous: JAX's error asks for ``.at[...].get(out_sharding=)``;
* a scatter keeps the operand's spec when every dimension it writes part of is unsplit
  (JAX's error asks for ``.at[...].set(out_sharding=)`` otherwise).

:func:`index_spec` gives the spec of ``x[idx]`` and of ``x.at[idx]`` updates at the level of
NumPy indexing (what JAX's ``jnp`` indexing produces), for the jnp functions that compute
an index one way and type it as JAX does.
"""
from __future__ import annotations

import math

from plax.sharding import NamedSharding
from plax.sharding_types import (ShardingTypeError, cast, check_dims_divide, dims_spec,
                                 explicit_type, register_sharding_rule, sharded_dims_str,
                                 spec_dims, untyped)


def _axes_size(aval, names: tuple) -> int:
    sizes = aval.sharding.mesh.shape
    return math.prod(sizes[a] for a in names)


def _spec_str(names: tuple) -> str:
    return names[0] if len(names) == 1 else repr(tuple(names))


def _type_str(aval, short: bool = True) -> str:
    from plax.core.shaped_array import short_dtype_name
    dims = sharded_dims_str(aval.shape, aval.sharding) if aval.sharding is not None \
        else ",".join(map(str, aval.shape))
    return f"{short_dtype_name(aval.dtype) if short else aval.dtype.name}[{dims}]"


def check_sliced(aval, dims: tuple, out_shape: tuple, what: str = "slicing") -> tuple:
    """``dims`` kept for a result of shape ``out_shape`` cut from ``aval``; JAX's error
    where a split dimension's new size does not divide over its mesh axes."""
    for n_in, n_out, names in zip(aval.shape, out_shape, dims):
        if n_in != n_out and names and n_out % _axes_size(aval, names):
            raise ShardingTypeError(
                f"{what} on sharded dims where out dim ({n_out}) is not divisible by mesh "
                f"axes ({_axes_size(aval, names)}) with spec ({_spec_str(names)}) is not "
                f"implemented. Got input type={_type_str(aval)} and output shape="
                f"{tuple(out_shape)}")
    return dims


@register_sharding_rule("slice")
def _slice(prim, in_dims, in_avals, params):
    strides = params.get("strides") or (1,) * len(in_dims[0])
    out_shape = tuple(len(range(lo, hi, st)) for lo, hi, st in
                      zip(params["start_indices"], params["limit_indices"], strides))
    return check_sliced(in_avals[0], in_dims[0], out_shape)


@register_sharding_rule("split")
def _split(prim, in_dims, in_avals, params):
    aval, dims, axis = in_avals[0], in_dims[0], params["axis"]
    out = []
    for size in params["sizes"]:  # each piece is a slice: JAX's check, piece by piece
        shape = aval.shape[:axis] + (int(size),) + aval.shape[axis + 1:]
        out.append(check_sliced(aval, dims, shape, "split"))
    return out


@register_sharding_rule("dynamic_slice")
def _dynamic_slice(prim, in_dims, in_avals, params):
    return check_sliced(in_avals[0], in_dims[0], tuple(params["slice_sizes"]),
                        "dynamic_slice")


@register_sharding_rule("pad")
def _pad(prim, in_dims, in_avals, params):
    out_shape = tuple(int(lo + hi + n + max(n - 1, 0) * interior) for n, (lo, hi, interior)
                      in zip(in_avals[0].shape, params["padding_config"]))
    return check_sliced(in_avals[0], in_dims[0], out_shape, "padding")


@register_sharding_rule("fft")
def _fft(prim, in_dims, in_avals, params):
    """The operand's spec (JAX keeps it, transformed dimensions included); a split
    dimension whose length the transform changes must still divide over its axes."""
    aval, dims = in_avals[0], in_dims[0]
    from plax.lax.fft import FftType
    lengths, kind = tuple(params["fft_lengths"]), FftType(params["fft_type"])
    out_shape = list(aval.shape)
    if lengths and kind == FftType.RFFT:
        out_shape[-1] = lengths[-1] // 2 + 1
    elif lengths and kind == FftType.IRFFT:
        out_shape[-1] = lengths[-1]
    check_dims_divide(out_shape, dims, aval.sharding)
    return dims


@register_sharding_rule("rev")
def _rev(prim, in_dims, in_avals, params):
    return in_dims[0]


def mesh_axes_str(mesh) -> str:
    """A type's mesh as JAX's sharding errors write it after the type: its axes grouped by
    type, ``{Explicit: ('x',), Auto: ('y',)}``; ``{}`` for no mesh (None)."""
    by_type: dict = {}
    if mesh is not None:
        for name, t in zip(mesh.axis_names, mesh.axis_types):
            by_type.setdefault(t.name, []).append(name)
    return "{" + ", ".join(f"{t}: {tuple(names)!r}" for t, names in by_type.items()) + "}"


def update_sharding_error(operand: str, update: str) -> ShardingTypeError:
    """JAX's error for a ``dynamic_update_slice`` whose ``operand`` and ``update`` (their
    types as the message writes them: ``float32[8@X,4]({Explicit: ('X',)})``) differ."""
    return ShardingTypeError(
        "dynamic_update_slice operand sharding must be equal to update sharding, got "
        f"operand sharding {operand} and update sharding {update}.")


@register_sharding_rule("dynamic_update_slice")
def _dynamic_update_slice(prim, in_dims, in_avals, params):
    operand, update = in_avals[0], in_avals[1]
    if in_dims[0] != in_dims[1]:
        axes = f"({mesh_axes_str((operand.sharding or update.sharding).mesh)})"
        raise update_sharding_error(f"{_type_str(operand, False)}{axes}",
                                    f"{_type_str(update, False)}{axes}")
    return in_dims[0]


def _gather_error(operand, indices) -> ShardingTypeError:
    return ShardingTypeError(
        "Use `.at[...].get(out_sharding=)` to provide output PartitionSpec for the gather "
        "indexing as out sharding could not be resolved unambiguously (or would require "
        f"collectives on inputs). Got operand=ShapedArray({_type_str(operand, False)}), "
        f"indices=ShapedArray({_type_str(indices, False)})")


@register_sharding_rule("gather")
def _gather(prim, in_dims, in_avals, params):
    dn, slice_sizes = params["dimension_numbers"], params["slice_sizes"]
    (op, ix), (operand, indices) = in_dims, in_avals
    batch_pairs = list(zip(dn.operand_batching_dims, dn.start_indices_batching_dims))
    whole_or_unsplit = all(slice_sizes[k] == operand.shape[k] or not op[k]
                           for k in dn.start_index_map)
    batches_agree = all(not op[o] or not ix[i] or op[o] == ix[i] for o, i in batch_pairs)
    index_dims_unsplit = all(not d for k, d in enumerate(ix)
                             if k not in dn.start_indices_batching_dims)
    if not (whole_or_unsplit and batches_agree and index_dims_unsplit):
        raise _gather_error(operand, indices)
    ix = list(ix[:-1])  # the index vector dimension is not a result dimension
    for o, i in batch_pairs:
        ix[i] = ix[i] or op[o]
    window = iter(k for k in range(len(op)) if k not in dn.collapsed_slice_dims
                  and k not in dn.operand_batching_dims)
    batch = iter(ix)
    rank = len(dn.offset_dims) + len(ix)
    return tuple(op[next(window)] if k in dn.offset_dims else next(batch) for k in range(rank))


def _scatter_error(operand, indices, updates) -> ShardingTypeError:
    return ShardingTypeError(
        "Use `.at[...].set/add/mul/...(out_sharding=)` to provide output PartitionSpec for "
        "the scatter update as out sharding could not be resolved unambiguously (or would "
        f"require collectives on inputs). Got operand=ShapedArray({_type_str(operand, False)})"
        f", indices=ShapedArray({_type_str(indices, False)}), updates=ShapedArray("
        f"{_type_str(updates, False)})")


def _scatter(prim, in_dims, in_avals, params):
    dn = params["dimension_numbers"]
    (op, ix, up), (operand, indices, updates) = in_dims[:3], in_avals[:3]
    vector_dim = len(ix) - 1
    update_scatter_dims = [k for k in range(len(up)) if k not in dn.update_window_dims]
    up_batch = [update_scatter_dims[i] for i in dn.scatter_indices_batching_dims]
    window = [k for k in range(len(op)) if k not in dn.inserted_window_dims
              and k not in dn.operand_batching_dims]
    ok = all(len({n for n in (op[o], ix[i], up[u]) if n}) <= 1 for o, i, u in
             zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims, up_batch))
    ok = ok and all((updates.shape[u] == operand.shape[o] and up[u] == op[o])
                    or (not up[u] and not op[o])
                    for u, o in zip(dn.update_window_dims, window))
    ok = ok and all(not op[k] for k in dn.inserted_window_dims)
    ok = ok and all(not up[k] for k in range(len(up))
                    if k not in up_batch and k not in dn.update_window_dims)
    ok = ok and all(not ix[k] for k in range(vector_dim)
                    if k not in dn.scatter_indices_batching_dims)
    ok = ok and not ix[vector_dim]
    if not ok:
        raise _scatter_error(operand, indices, updates)
    out = list(op)
    for o, i, u in zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims, up_batch):
        out[o] = out[o] or ix[i] or up[u]
    for u, o in zip(dn.update_window_dims, window):
        out[o] = out[o] or up[u]
    return tuple(out)


for _name in ("scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max",
              "scatter_add", "scatter_mul", "scatter_min", "scatter_max"):
    register_sharding_rule(_name)(_scatter)


# ------------------------------------------------------------------ jnp indexing

def index_spec(aval, dims: tuple, entries: list, *, traced: bool, update: bool) -> tuple:
    """The dimensions' axes of ``x[idx]`` as JAX's jnp indexing gives them, for the
    normalized index ``entries`` of :mod:`plax.numpy.indexing` (``('slice', s)``,
    ``('int', i)``, ``('array', a)``, ``('none',)``, ...) of an operand of type ``aval``
    split as ``dims``. Raises JAX's :class:`ShardingTypeError` where JAX refuses.

    JAX indexes with static ints and slices by ``slice`` under a trace (a split dimension
    may be cut to a size that still divides over its axes) and by ``gather`` eagerly and for
    ``.at[]`` updates (``update=True``), where a split dimension may only be taken whole --
    but for an eager read of an operand whose every device holds it whole (split over axes
    of size 1 only: ``P('x')`` on a one-device mesh), which it slices as under a trace.

    Returns:
      For a read, the result's dimensions; for an update, the operand's (the result of an
      update is split as its operand).
    """
    arrays = [e for e in entries if e[0] == "array"]
    if not update and arrays:
        from plax.numpy.indexing import _scalar_indices_only
        if _scalar_indices_only(entries):
            return _window_spec(aval, dims, entries)
    gathered = update or bool(arrays) or (not traced and not aval.sharding.is_fully_replicated)
    out_slices, adv_at, dim = [], None, 0
    for e in entries:
        kind = e[0]
        if kind in ("none", "bool"):
            out_slices.append(())
            continue
        if kind == "sep":
            continue
        n, names = aval.shape[dim], dims[dim]
        if kind == "slice":
            lo, hi, st = e[1].indices(n)
            size = len(range(lo, hi, st))
            whole = size == n and (st in (1, -1))
            if names and not whole:
                if gathered:
                    raise _index_error(aval, entries, update)
                check_sliced(aval, dims, _sliced_shape(aval.shape, dim, size))
            out_slices.append(names)
        else:  # an int or an index array: the dimension is indexed into
            if names:
                if gathered:
                    raise _index_error(aval, entries, update)
                check_sliced(aval, dims, _sliced_shape(aval.shape, dim, 1))
            if kind == "array" and adv_at is None:
                adv_at = len(out_slices)
                out_slices.append("adv")
        dim += 1
    if update:
        return dims
    for e in arrays:
        s = explicit_type(e[1])
        if s is not None and any(_dims_of(e[1].aval)):
            raise _index_error(aval, entries, update)
    if adv_at is None:
        return tuple(out_slices)
    import numpy as np
    rank = len(np.broadcast_shapes(*[np.shape(e[1]) for e in arrays]))
    adv_dims = [()] * rank
    if _separated(entries):  # NumPy puts the broadcast index dimensions first
        return tuple(adv_dims + [d for d in out_slices if d != "adv"])
    k = out_slices.index("adv")
    return tuple(out_slices[:k] + adv_dims + out_slices[k + 1:])


def _window_spec(aval, dims: tuple, entries: list) -> tuple:
    """The result's dimensions of a read JAX makes with one ``dynamic_slice`` (scalar index
    arrays, traced or not, beside ints and unit-step slices: ``x[i % 8]``), with that
    primitive's error where a split dimension's window does not divide over its axes."""
    window, kept, dim = [], [], 0
    for e in entries:
        if e[0] in ("none", "bool"):
            kept.append(())
            continue
        if e[0] == "sep":
            continue
        if e[0] == "slice":
            window.append(len(range(*e[1].indices(aval.shape[dim]))))
            kept.append(dims[dim])
        else:
            window.append(1)
        dim += 1
    window += list(aval.shape[dim:])
    check_sliced(aval, dims, tuple(window), "dynamic_slice")
    return tuple(kept) + tuple(dims[dim:])


def _dims_of(aval) -> tuple:
    return spec_dims(aval.sharding.spec, len(aval.shape))


def _separated(entries) -> bool:
    """Whether NumPy puts the advanced-index dimensions first: the integer arrays (and the
    ints indexing beside them) are not adjacent."""
    adv = [k for k, e in enumerate(entries) if e[0] in ("array", "int")]
    return bool(adv) and adv != list(range(adv[0], adv[-1] + 1))


def _sliced_shape(shape, dim, size) -> tuple:
    return tuple(size if k == dim else n for k, n in enumerate(shape))


def _index_error(aval, entries, update: bool) -> ShardingTypeError:
    from plax.core.shaped_array import ShapedArray
    import numpy as np
    # JAX's gather indices: one column per dimension indexed into (an int, an index array,
    # a slice that does not take the dimension whole), a row per element of the broadcast
    # index arrays
    n_indexed, dim, arrays = 0, 0, []
    for e in entries:
        if e[0] not in ("slice", "int", "array"):
            continue
        if e[0] == "array":
            arrays.append(np.shape(e[1]))
        if e[0] != "slice" or e[1].indices(aval.shape[dim]) != (0, aval.shape[dim], 1):
            n_indexed += 1
        dim += 1
    batch = tuple(np.broadcast_shapes(*arrays)) if arrays else ()
    indices = ShapedArray(batch + (n_indexed,), np.dtype("int32"))
    if update:
        return _scatter_error(aval, indices, ShapedArray((), aval.dtype))
    return _gather_error(aval, indices)


def _check_update_split(aval, dims, entries, values) -> None:
    """JAX's ValueError for ``.at[]`` update values split otherwise than the part of the
    operand they update (JAX broadcasts them to that part's sharding)."""
    value_sharding = explicit_type(values)
    if value_sharding is None:
        return
    want = index_spec(aval, dims, entries, traced=True, update=False)
    have = _dims_of(values.aval)
    if any(h and h != w for h, w in zip(reversed(have), reversed(want))):
        from plax.core.shaped_array import ShapedArray
        shape = tuple(len(range(*e[1].indices(n))) for e, n in zip(
            [e for e in entries if e[0] in ("slice", "int", "array")], aval.shape)
            if e[0] == "slice")
        target = ShapedArray(shape, aval.dtype, sharding=NamedSharding(
            aval.sharding.mesh, dims_spec(want))) if len(shape) == len(want) else None
        requested = _type_str(target, False) if target is not None else f"{want}"
        raise ValueError(f"Incompatible types for broadcasting: input type="
                         f"{_type_str(values.aval, False)} and requested type={requested}")


def index_typed(compute, x, entries: list, sharding: NamedSharding, *, update: bool,
                values=None):
    """``compute()`` (an indexing of ``x``, or an ``.at[]`` update of it, by ``entries``)
    with its result typed as JAX's jnp indexing types it (:func:`index_spec`).

    A read is computed with its primitives' own rules (they agree with JAX's for the reads
    :func:`index_spec` accepts, so nothing more is staged); an update is computed untyped
    (plax scatters into the flattened array) and then cast."""
    from plax.core.trace import Tracer, get_aval
    if sharding.spec.unreduced or sharding.spec.reduced:  # JAX's rule unpacks the spec
        raise ValueError("Using *pspec is dangerous when PartitionSpec has non-empty "
                         "unreduced/reduced set. Please use *spec.partitions")
    aval = get_aval(x)
    dims = spec_dims(sharding.spec, len(aval.shape))
    out_dims = index_spec(aval, dims, entries, traced=isinstance(x, Tracer), update=update)
    if update and values is not None:
        _check_update_split(aval, dims, entries, values)
    if update:
        with untyped():
            out = compute()
    else:
        out = compute()
    return cast(out, NamedSharding(sharding.mesh, dims_spec(out_dims)))
