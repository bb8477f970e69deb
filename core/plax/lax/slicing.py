"""Slicing and indexing primitives: slice, dynamic_slice, dynamic_update_slice, gather, scatter.

``gather`` and the ``scatter`` family follow XLA's semantics, with the index
vector in the last axis of ``indices`` and optional batching dimensions (which
is how ``vmap`` batches them). Out-of-bounds starts are clamped (``CLIP``,
``PROMISE_IN_BOUNDS``) or give ``fill_value`` / drop the update (``FILL_OR_DROP``).
"""
from __future__ import annotations

import enum
from typing import NamedTuple, Sequence

import numpy as np

import plax.lax.binary as B
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.lax.base import (ANY, INTEGRAL, NUMBER, asarray, aval_of, canonicalize_shape,
                           check_dtype, same_dtypes)
from plax.transforms.batching import move_axis_to
from plax.transforms.jvp import Zero, deflinear, instantiate


def _undefined(x) -> bool:
    from plax.transforms.transpose import is_undefined_primal
    return is_undefined_primal(x)


# ------------------------------------------------------------------ slice

slice_p = Primitive("slice")


@slice_p.def_abstract_eval
def _slice_abstract_eval(x, *, start_indices, limit_indices, strides):
    nd = x.ndim
    if len(start_indices) != nd or len(limit_indices) != nd:
        raise TypeError(f"slice start_indices and limit_indices must have length equal to the "
                        f"operand rank {nd}, got start_indices={start_indices}, "
                        f"limit_indices={limit_indices}")
    if strides is not None and (len(strides) != nd or any(s < 1 for s in strides)):
        raise TypeError(f"slice strides must be positive and of length {nd}, got {strides}")
    shape = []
    for i, (lo, hi, d) in enumerate(zip(start_indices, limit_indices, x.shape)):
        if not 0 <= lo <= hi <= d:
            raise TypeError(f"slice indices must satisfy 0 <= start <= limit <= shape, got "
                            f"start_indices={start_indices}, limit_indices={limit_indices} for "
                            f"operand shape {x.shape}")
        s = 1 if strides is None else strides[i]
        shape.append((hi - lo + s - 1) // s)
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def slice(x, start_indices: Sequence[int], limit_indices: Sequence[int],
          strides: Sequence[int] | None = None):
    """The static slice ``x[start:limit:stride]`` along every axis.

    Example:
      >>> slice(jnp.arange(5), (1,), (4,))
      Array([1, 2, 3], dtype=int32)
    """
    x = asarray(x)
    start = tuple(int(i) for i in start_indices)
    limit = tuple(int(i) for i in limit_indices)
    strides = None if strides is None or all(s == 1 for s in strides) else tuple(int(s) for s in strides)
    if strides is None and start == (0,) * len(start) and limit == aval_of(x).shape:
        return x
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=strides)


def slice_in_dim(x, start: int | None, limit: int | None, stride: int = 1, axis: int = 0):
    """``slice`` along one axis."""
    shape = aval_of(asarray(x)).shape
    lo = [0] * len(shape)
    hi = list(shape)
    st = [1] * len(shape)
    lo[axis] = 0 if start is None else start
    hi[axis] = shape[axis] if limit is None else limit
    st[axis] = stride
    return slice(x, lo, hi, st)


def index_in_dim(x, index: int, axis: int = 0, keepdims: bool = True):
    """Element ``index`` along ``axis`` (keeping the axis if ``keepdims``)."""
    from plax.lax.shape import squeeze
    out = slice_in_dim(x, index, index + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    if type(ct) is Zero:
        return [None]
    from plax.lax.shape import pad
    shape = x.aval.shape
    strides = strides or (1,) * len(shape)
    ct_shape = aval_of(ct).shape
    cfg = []
    for lo, d, s, n in zip(start_indices, shape, strides, ct_shape):
        real_hi = lo + (n - 1) * s + 1 if n else lo
        cfg.append((lo, d - real_hi, s - 1))
    return [pad(ct, B.full_like_scalar(0, ct), cfg)]


deflinear(slice_p, _slice_transpose)


@register_rule("batch", slice_p)
def _slice_batch(vals, dims, *, start_indices, limit_indices, strides):
    (x,), (d,) = vals, dims
    size = aval_of(x).shape[d]
    start = start_indices[:d] + (0,) + start_indices[d:]
    limit = limit_indices[:d] + (size,) + limit_indices[d:]
    st = None if strides is None else strides[:d] + (1,) + strides[d:]
    return slice_p.bind(x, start_indices=start, limit_indices=limit, strides=st), d


# ------------------------------------------------------------------ dynamic_slice

dynamic_slice_p = Primitive("dynamic_slice")


def _check_start_indices(name, operand, indices):
    if len(indices) != operand.ndim:
        raise TypeError(f"{name} needs one start index per operand axis: got {len(indices)} for "
                        f"operand shape {operand.shape}")
    for i in indices:
        check_dtype(name, i, INTEGRAL, "start index")
        if i.shape != ():
            raise TypeError(f"{name} start indices must be scalars, got shape {i.shape}")


@dynamic_slice_p.def_abstract_eval
def _dynamic_slice_abstract_eval(x, *indices, slice_sizes):
    _check_start_indices("dynamic_slice", x, indices)
    if len(slice_sizes) != x.ndim or any(not 0 <= s <= d for s, d in zip(slice_sizes, x.shape)):
        raise TypeError(f"dynamic_slice slice_sizes must be non-negative and at most the operand "
                        f"shape {x.shape}, got {slice_sizes}")
    return ShapedArray(tuple(slice_sizes), x.dtype, x.weak_type)


def dynamic_slice(x, start_indices: Sequence, slice_sizes: Sequence[int]):
    """The slice of ``slice_sizes`` starting at traced ``start_indices`` (clamped to fit).

    Example:
      >>> dynamic_slice(jnp.arange(5), (jnp.int32(3),), (2,))
      Array([3, 4], dtype=int32)
    """
    x = asarray(x)
    idx = [asarray(i) for i in start_indices]
    return dynamic_slice_p.bind(x, *idx, slice_sizes=canonicalize_shape(slice_sizes))


def dynamic_index_in_dim(x, index, axis: int = 0, keepdims: bool = True):
    """Element ``index`` (possibly traced) along ``axis``."""
    from plax.lax.shape import squeeze
    a = aval_of(asarray(x))
    starts = [np.int32(0)] * a.ndim
    starts[axis] = index
    sizes = list(a.shape)
    sizes[axis] = 1
    out = dynamic_slice(x, starts, sizes)
    return out if keepdims else squeeze(out, (axis,))


@register_rule("jvp", dynamic_slice_p)
def _dynamic_slice_jvp(primals, tangents, *, slice_sizes):
    x, *idx = primals
    out = dynamic_slice_p.bind(x, *idx, slice_sizes=slice_sizes)
    t = tangents[0]
    if type(t) is Zero:
        return out, Zero.from_primal(out)
    return out, dynamic_slice_p.bind(t, *idx, slice_sizes=slice_sizes)


@register_rule("transpose", dynamic_slice_p)
def _dynamic_slice_transpose(ct, x, *idx, slice_sizes):
    if type(ct) is Zero:
        return [None] * (1 + len(idx))
    from plax.lax.shape import full
    zeros = full(x.aval.shape, 0, x.aval.dtype)
    return [dynamic_update_slice_p.bind(zeros, ct, *idx)] + [None] * len(idx)


def _index_vector(indices, dims, size):
    """Stacks scalar start indices (some batched) into int32 index vectors, batched at axis 0."""
    from plax.lax.convert import convert_element_type
    from plax.lax.shape import concatenate, reshape
    cols = []
    batched = any(d is not None for d in dims)
    for i, d in zip(indices, dims):
        i = convert_element_type(i, np.int32)
        if batched:
            i = move_axis_to(i, d, 0, size)
            cols.append(reshape(i, (size, 1)))
        else:
            cols.append(reshape(i, (1,)))
    return concatenate(cols, 1 if batched else 0), (0 if batched else None)


@register_rule("batch", dynamic_slice_p)
def _dynamic_slice_batch(vals, dims, *, slice_sizes):
    x, *idx = vals
    dx, *didx = dims
    size = next(aval_of(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    if not idx:  # a rank-0 operand: the slice is the operand
        return x, dx
    index_vec, dvec = _index_vector(idx, didx, size)
    nd = len(slice_sizes)
    dnums = GatherDimensionNumbers(offset_dims=tuple(range(nd)), collapsed_slice_dims=(),
                                   start_index_map=tuple(range(nd)))
    return _gather_batch([x, index_vec], [dx, dvec], dimension_numbers=dnums,
                         slice_sizes=tuple(slice_sizes), indices_are_sorted=True,
                         unique_indices=True, mode=GatherScatterMode.CLIP, fill_value=None)


# ------------------------------------------------------------------ dynamic_update_slice

dynamic_update_slice_p = Primitive("dynamic_update_slice")


@dynamic_update_slice_p.def_abstract_eval
def _dus_abstract_eval(x, update, *indices):
    _check_start_indices("dynamic_update_slice", x, indices)
    same_dtypes("dynamic_update_slice", [x, update])
    if update.ndim != x.ndim or any(u > d for u, d in zip(update.shape, x.shape)):
        raise TypeError(f"dynamic_update_slice update shape {update.shape} must have the "
                        f"operand's rank and fit inside its shape {x.shape}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def dynamic_update_slice(x, update, start_indices: Sequence):
    """``x`` with ``update`` written at traced ``start_indices`` (clamped so it fits)."""
    return dynamic_update_slice_p.bind(asarray(x), asarray(update), *[asarray(i) for i in start_indices])


@register_rule("jvp", dynamic_update_slice_p)
def _dus_jvp(primals, tangents):
    x, u, *idx = primals
    tx, tu = tangents[0], tangents[1]
    out = dynamic_update_slice_p.bind(x, u, *idx)
    if type(tx) is Zero and type(tu) is Zero:
        return out, Zero.from_primal(out)
    return out, dynamic_update_slice_p.bind(instantiate(tx), instantiate(tu), *idx)


@register_rule("transpose", dynamic_update_slice_p)
def _dus_transpose(ct, x, update, *idx):
    if type(ct) is Zero:
        return [None] * (2 + len(idx))
    ushape = update.aval.shape
    ct_x = ct_u = None
    if _undefined(x):
        ct_x = dynamic_update_slice_p.bind(ct, B.zeros_like_shape(ushape, aval_of(ct).dtype), *idx)
    if _undefined(update):
        ct_u = dynamic_slice_p.bind(ct, *idx, slice_sizes=ushape)
    return [ct_x, ct_u] + [None] * len(idx)


@register_rule("batch", dynamic_update_slice_p)
def _dus_batch(vals, dims):
    x, u, *idx = vals
    dx, du, *didx = dims
    size = next(aval_of(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    if not idx:  # rank-0 operands: the update replaces the operand
        return move_axis_to(u, du, 0, size), 0
    index_vec, dvec = _index_vector(idx, didx, size)
    nd = aval_of(u).ndim - (du is not None)
    dnums = ScatterDimensionNumbers(update_window_dims=tuple(range(nd)), inserted_window_dims=(),
                                    scatter_dims_to_operand_dims=tuple(range(nd)))
    return _scatter_batch(scatter_p, [x, index_vec, u], [dx, dvec, du], dimension_numbers=dnums,
                          indices_are_sorted=True, unique_indices=True,
                          mode=GatherScatterMode.CLIP)


# ------------------------------------------------------------------ gather

class GatherScatterMode(enum.Enum):
    """How gather and scatter treat out-of-bounds indices."""

    CLIP = 0                # clamp each start index so the slice is in bounds
    FILL_OR_DROP = 1        # gather returns fill_value; scatter skips the update
    PROMISE_IN_BOUNDS = 2   # the caller promises in-bounds indices (implemented as CLIP)

    @staticmethod
    def from_any(mode) -> "GatherScatterMode":
        if isinstance(mode, GatherScatterMode):
            return mode
        if mode is None:
            return GatherScatterMode.FILL_OR_DROP
        names = {"clip": GatherScatterMode.CLIP, "fill": GatherScatterMode.FILL_OR_DROP,
                 "drop": GatherScatterMode.FILL_OR_DROP,
                 "promise_in_bounds": GatherScatterMode.PROMISE_IN_BOUNDS}
        try:
            return names[str(mode).lower()]
        except KeyError:
            raise ValueError(f"Unknown gather/scatter mode {mode!r}; expected one of "
                             f"{sorted(names)}") from None

    def __repr__(self) -> str:
        return f"GatherScatterMode.{self.name}"

    __str__ = __repr__


class GatherDimensionNumbers(NamedTuple):
    """How gather's index vectors and slices map to operand and output axes (XLA's).

    Attributes:
      offset_dims: output axes that hold the slice's (non-collapsed) axes.
      collapsed_slice_dims: operand axes of slice size 1 dropped from the output.
      start_index_map: operand axis addressed by each entry of an index vector.
      operand_batching_dims: operand axes matched one-to-one with ``start_indices_batching_dims``.
      start_indices_batching_dims: axes of ``indices`` paired with ``operand_batching_dims``.
    """

    offset_dims: tuple
    collapsed_slice_dims: tuple
    start_index_map: tuple
    operand_batching_dims: tuple = ()
    start_indices_batching_dims: tuple = ()


class ScatterDimensionNumbers(NamedTuple):
    """How scatter's updates and index vectors map to operand axes (XLA's)."""

    update_window_dims: tuple
    inserted_window_dims: tuple
    scatter_dims_to_operand_dims: tuple
    operand_batching_dims: tuple = ()
    scatter_indices_batching_dims: tuple = ()


gather_p = Primitive("gather")


def _sorted_unique(name, what, dims, bound):
    if list(dims) != sorted(set(dims)) or any(not 0 <= d < bound for d in dims):
        raise TypeError(f"{name} {what} must be sorted, unique and in [0, {bound}), got {dims}")


@gather_p.def_abstract_eval
def _gather_abstract_eval(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
                          unique_indices, mode, fill_value):
    dn = dimension_numbers
    check_dtype("gather", indices, INTEGRAL, "indices")
    if indices.ndim < 1:
        raise TypeError("gather indices must have at least one axis (the index vector axis, last)")
    if indices.shape[-1] != len(dn.start_index_map):
        raise TypeError(f"gather indices' last axis has size {indices.shape[-1]} but "
                        f"start_index_map {dn.start_index_map} has {len(dn.start_index_map)} entries")
    if len(slice_sizes) != operand.ndim:
        raise TypeError(f"gather slice_sizes {slice_sizes} must have one entry per operand axis "
                        f"(shape {operand.shape})")
    for s, d in zip(slice_sizes, operand.shape):
        if not 0 <= s <= d:
            raise TypeError(f"gather slice_sizes {slice_sizes} must be within operand shape "
                            f"{operand.shape}")
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    for d in dropped:
        if slice_sizes[d] > 1:
            raise TypeError(f"gather collapsed/batching axis {d} must have slice size <= 1, got "
                            f"slice_sizes {slice_sizes}")
    if len(dn.collapsed_slice_dims) + len(dn.operand_batching_dims) + len(dn.offset_dims) != operand.ndim:
        raise TypeError(f"gather: offset_dims {dn.offset_dims}, collapsed_slice_dims "
                        f"{dn.collapsed_slice_dims} and operand_batching_dims "
                        f"{dn.operand_batching_dims} must together cover the operand's "
                        f"{operand.ndim} axes")
    batch_shape = indices.shape[:-1]
    out_rank = len(batch_shape) + len(dn.offset_dims)
    _sorted_unique("gather", "offset_dims", dn.offset_dims, out_rank)
    _sorted_unique("gather", "collapsed_slice_dims", dn.collapsed_slice_dims, operand.ndim)
    if len(dn.operand_batching_dims) != len(dn.start_indices_batching_dims):
        raise TypeError("gather operand_batching_dims and start_indices_batching_dims must have "
                        "the same length")
    for od, idim in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
        if operand.shape[od] != indices.shape[idim]:
            raise TypeError(f"gather batching axes must match in size: operand axis {od} has "
                            f"{operand.shape[od]}, indices axis {idim} has {indices.shape[idim]}")
    offset_sizes = [s for i, s in enumerate(slice_sizes) if i not in dropped]
    shape, o, b = [], iter(offset_sizes), iter(batch_shape)
    for i in range(out_rank):
        shape.append(next(o) if i in dn.offset_dims else next(b))
    return ShapedArray(tuple(shape), operand.dtype, operand.weak_type)


def gather(operand, start_indices, dimension_numbers: GatherDimensionNumbers,
           slice_sizes: Sequence[int], *, unique_indices: bool = False,
           indices_are_sorted: bool = False, mode=None, fill_value=None):
    """XLA's gather: one slice of ``slice_sizes`` per index vector in the last axis of indices.

    Args:
      operand: the array to gather from.
      start_indices: integer array; its last axis holds index vectors.
      dimension_numbers: a :class:`GatherDimensionNumbers`.
      slice_sizes: the size of the slice taken at each index.
      mode: ``"clip"``, ``"fill"`` (default) or ``"promise_in_bounds"``.
      fill_value: the value of out-of-bounds slices in fill mode (default NaN / the type's extreme).

    Returns:
      The gathered array.
    """
    mode = GatherScatterMode.from_any(mode)
    return gather_p.bind(asarray(operand), asarray(start_indices),
                         dimension_numbers=GatherDimensionNumbers(*map(tuple, dimension_numbers)),
                         slice_sizes=canonicalize_shape(slice_sizes),
                         indices_are_sorted=bool(indices_are_sorted),
                         unique_indices=bool(unique_indices), mode=mode, fill_value=fill_value)


def _gather_to_scatter_dnums(dn: GatherDimensionNumbers) -> ScatterDimensionNumbers:
    return ScatterDimensionNumbers(update_window_dims=dn.offset_dims,
                                   inserted_window_dims=dn.collapsed_slice_dims,
                                   scatter_dims_to_operand_dims=dn.start_index_map,
                                   operand_batching_dims=dn.operand_batching_dims,
                                   scatter_indices_batching_dims=dn.start_indices_batching_dims)


def _scatter_to_gather_dnums(dn: ScatterDimensionNumbers) -> GatherDimensionNumbers:
    return GatherDimensionNumbers(offset_dims=dn.update_window_dims,
                                  collapsed_slice_dims=dn.inserted_window_dims,
                                  start_index_map=dn.scatter_dims_to_operand_dims,
                                  operand_batching_dims=dn.operand_batching_dims,
                                  start_indices_batching_dims=dn.scatter_indices_batching_dims)


@register_rule("jvp", gather_p)
def _gather_jvp(primals, tangents, **params):
    operand, indices = primals
    out = gather_p.bind(operand, indices, **params)
    t = tangents[0]
    if type(t) is Zero:
        return out, Zero.from_primal(out)
    p = dict(params)
    if p["mode"] == GatherScatterMode.FILL_OR_DROP:
        p["fill_value"] = 0  # out-of-bounds slices are constants: their tangent is zero
    return out, gather_p.bind(t, indices, **p)


@register_rule("transpose", gather_p)
def _gather_transpose(ct, operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
                      unique_indices, mode, fill_value):
    if type(ct) is Zero:
        return [None, None]
    from plax.lax.shape import full
    zeros = full(operand.aval.shape, 0, aval_of(ct).dtype)
    out = scatter_add_p.bind(zeros, indices, ct,
                             dimension_numbers=_gather_to_scatter_dnums(dimension_numbers),
                             indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                             mode=mode)
    return [out, None]


def _batch_all_at_front(vals, dims):
    size = next(aval_of(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    return [move_axis_to(v, d, 0, size) for v, d in zip(vals, dims)]


def _gather_batch(vals, dims, *, dimension_numbers, slice_sizes, indices_are_sorted,
                  unique_indices, mode, fill_value):
    operand, indices = _batch_all_at_front(vals, dims)
    dn = dimension_numbers
    up = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
    new_dn = GatherDimensionNumbers(
        offset_dims=up(dn.offset_dims), collapsed_slice_dims=up(dn.collapsed_slice_dims),
        start_index_map=up(dn.start_index_map),
        operand_batching_dims=(0,) + up(dn.operand_batching_dims),
        start_indices_batching_dims=(0,) + up(dn.start_indices_batching_dims))
    out = gather_p.bind(operand, indices, dimension_numbers=new_dn,
                        slice_sizes=(1,) + tuple(slice_sizes),
                        indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                        mode=mode, fill_value=fill_value)
    return out, 0


register_rule("batch", gather_p)(_gather_batch)


# ------------------------------------------------------------------ scatter

def _scatter_abstract_eval_for(name, allowed):
    def abstract_eval(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                      unique_indices, mode):
        dn = dimension_numbers
        check_dtype(name, operand, allowed)
        check_dtype(name, indices, INTEGRAL, "indices")
        same_dtypes(name, [operand, updates])
        if indices.ndim < 1 or indices.shape[-1] != len(dn.scatter_dims_to_operand_dims):
            raise TypeError(f"{name} indices' last axis must have size "
                            f"{len(dn.scatter_dims_to_operand_dims)} (scatter_dims_to_operand_dims "
                            f"{dn.scatter_dims_to_operand_dims}), got indices shape {indices.shape}")
        batch_shape = indices.shape[:-1]
        if updates.ndim != len(batch_shape) + len(dn.update_window_dims):
            raise TypeError(f"{name} updates must have rank {len(batch_shape)} (index batch) + "
                            f"{len(dn.update_window_dims)} (window) , got shape {updates.shape}")
        dropped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
        if len(dropped) + len(dn.update_window_dims) != operand.ndim:
            raise TypeError(f"{name}: update_window_dims {dn.update_window_dims}, "
                            f"inserted_window_dims {dn.inserted_window_dims} and "
                            f"operand_batching_dims {dn.operand_batching_dims} must together cover "
                            f"the operand's {operand.ndim} axes")
        window_operand_dims = [i for i in range(operand.ndim) if i not in dropped]
        scatter_dims = [i for i in range(updates.ndim) if i not in dn.update_window_dims]
        for ud, od in zip(dn.update_window_dims, window_operand_dims):
            if updates.shape[ud] > operand.shape[od]:
                raise TypeError(f"{name} update window of shape {updates.shape} does not fit the "
                                f"operand shape {operand.shape}")
        for ud, bd in zip(scatter_dims, batch_shape):
            if updates.shape[ud] != bd:
                raise TypeError(f"{name} updates' scatter axes {tuple(updates.shape[d] for d in scatter_dims)} "
                                f"must match the index batch shape {batch_shape}")
        return ShapedArray(operand.shape, operand.dtype, operand.weak_type)
    return abstract_eval


def _scatter_prim(name: str, allowed) -> Primitive:
    p = Primitive(name)
    p.def_abstract_eval(_scatter_abstract_eval_for(name, allowed))
    return p


scatter_p = _scatter_prim("scatter", ANY)
scatter_add_p = _scatter_prim("scatter-add", NUMBER)
scatter_mul_p = _scatter_prim("scatter-mul", NUMBER)
scatter_min_p = _scatter_prim("scatter-min", ANY)  # complex numbers compare lexicographically
scatter_max_p = _scatter_prim("scatter-max", ANY)


def _scatter_binder(prim):
    def op(operand, scatter_indices, updates, dimension_numbers: ScatterDimensionNumbers, *,
           indices_are_sorted: bool = False, unique_indices: bool = False, mode=None):
        return prim.bind(asarray(operand), asarray(scatter_indices), asarray(updates),
                         dimension_numbers=ScatterDimensionNumbers(*map(tuple, dimension_numbers)),
                         indices_are_sorted=bool(indices_are_sorted),
                         unique_indices=bool(unique_indices),
                         mode=GatherScatterMode.from_any(mode))
    op.__name__ = prim.name.replace("-", "_")
    op.__doc__ = (f"XLA's {prim.name}: combines ``updates`` into ``operand`` at the windows given "
                  "by the index vectors (last axis of ``scatter_indices``). Out-of-bounds updates "
                  "are dropped by default (mode 'drop'), or clamped with mode 'clip'.")
    return op


scatter = _scatter_binder(scatter_p)
scatter_add = _scatter_binder(scatter_add_p)
scatter_mul = _scatter_binder(scatter_mul_p)
scatter_min = _scatter_binder(scatter_min_p)
scatter_max = _scatter_binder(scatter_max_p)


def _gather_window_of(ct, indices, updates_aval, dn, mode):
    """Gathers from ``ct`` the windows a scatter with ``dn`` wrote (transpose of the updates)."""
    dropped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    ct_shape = aval_of(ct).shape
    window_sizes = iter(updates_aval.shape[d] for d in dn.update_window_dims)
    slice_sizes = tuple(1 if i in dropped else next(window_sizes) for i in range(len(ct_shape)))
    gmode = GatherScatterMode.FILL_OR_DROP if mode == GatherScatterMode.FILL_OR_DROP else mode
    return gather_p.bind(ct, indices, dimension_numbers=_scatter_to_gather_dnums(dn),
                         slice_sizes=slice_sizes, indices_are_sorted=False,
                         unique_indices=False, mode=gmode, fill_value=0)


def _scatter_add_transpose(ct, operand, indices, updates, *, dimension_numbers,
                           indices_are_sorted, unique_indices, mode):
    if type(ct) is Zero:
        return [None, None, None]
    ct_op = ct if _undefined(operand) else None
    ct_up = None
    if _undefined(updates):
        ct_up = _gather_window_of(ct, indices, updates.aval, dimension_numbers, mode)
    return [ct_op, None, ct_up]


@register_rule("jvp", scatter_add_p)
def _scatter_add_jvp(primals, tangents, **params):
    operand, indices, updates = primals
    out = scatter_add_p.bind(operand, indices, updates, **params)
    to, tu = tangents[0], tangents[2]
    if type(to) is Zero and type(tu) is Zero:
        return out, Zero.from_primal(out)
    return out, scatter_add_p.bind(instantiate(to), indices, instantiate(tu), **params)


register_rule("transpose", scatter_add_p)(_scatter_add_transpose)


@register_rule("jvp", scatter_p)
def _scatter_jvp(primals, tangents, *, dimension_numbers, indices_are_sorted, unique_indices, mode):
    operand, indices, updates = primals
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode)
    out = scatter_p.bind(operand, indices, updates, **params)
    to, tu = tangents[0], tangents[2]
    if type(to) is Zero and type(tu) is Zero:
        return out, Zero.from_primal(out)
    to, tu = instantiate(to), instantiate(tu)
    if unique_indices:
        return out, scatter_p.bind(to, indices, tu, **params)
    # With repeated indices one update wins each position. Scatter distinct ids to learn which,
    # then route each position's tangent from the operand or from the winning update.
    from plax.lax.shape import broadcasted_iota, full
    from plax.lax.select import select
    u_aval = aval_of(updates)
    scatter_axes = [i for i in range(u_aval.ndim) if i not in dimension_numbers.update_window_dims]
    ids = full(u_aval.shape, 1, np.int32)
    stride = 1
    for ax in reversed(scatter_axes):
        ids = B.add(ids, B.mul(broadcasted_iota(np.int32, u_aval.shape, ax), full((), stride, np.int32)))
        stride *= u_aval.shape[ax]
    zeros_ids = full(aval_of(operand).shape, 0, np.int32)
    scattered_ids = scatter_p.bind(zeros_ids, indices, ids, **params)
    won = B.eq(_gather_window_of(scattered_ids, indices, u_aval, dimension_numbers, mode), ids)
    tu_won = select(won, tu, B.zeros_like(tu))
    untouched = B.eq(scattered_ids, full((), 0, np.int32))
    t_out = B.add(select(untouched, to, B.zeros_like(to)),
                  scatter_add_p.bind(B.zeros_like(to), indices, tu_won, **params))
    return out, t_out


@register_rule("transpose", scatter_p)
def _scatter_transpose(ct, operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                       unique_indices, mode):
    if type(ct) is Zero:
        return [None, None, None]
    params = dict(dimension_numbers=dimension_numbers, indices_are_sorted=indices_are_sorted,
                  unique_indices=unique_indices, mode=mode)
    ct_op = ct_up = None
    if _undefined(operand):
        u_aval = updates.aval
        ct_op = scatter_p.bind(ct, indices, B.zeros_like_shape(u_aval.shape, aval_of(ct).dtype), **params)
    if _undefined(updates):
        ct_up = _gather_window_of(ct, indices, updates.aval, dimension_numbers, mode)
    return [ct_op, None, ct_up]


@register_rule("jvp", scatter_mul_p)
def _scatter_mul_jvp(primals, tangents, **params):
    operand, indices, updates = primals
    out = scatter_mul_p.bind(operand, indices, updates, **params)
    to, tu = tangents[0], tangents[2]
    t_out = Zero.from_primal(out)
    if type(to) is not Zero:
        t_out = scatter_mul_p.bind(to, indices, updates, **params)
    if type(tu) is not Zero:
        if not params["unique_indices"]:
            raise NotImplementedError("scatter_mul gradients with respect to the updates are only "
                                      "implemented if `unique_indices=True`.")
        # d(out) = operand * d(update) at scattered positions.
        du = B.mul(scatter_p.bind(B.zeros_like(operand), indices, tu, **params), operand)
        t_out = du if type(t_out) is Zero else B.add(t_out, du)
    return out, t_out


@register_rule("transpose", scatter_mul_p)
def _scatter_mul_transpose(ct, operand, indices, updates, **params):
    if _undefined(updates):
        raise NotImplementedError("scatter_mul is not linear in its updates")
    if type(ct) is Zero:
        return [None, None, None]
    return [scatter_mul_p.bind(ct, indices, updates, **params), None, None]


def _scatter_extremal_jvp(prim):
    def rule(primals, tangents, **params):
        operand, indices, updates = primals
        out = prim.bind(operand, indices, updates, **params)
        to, tu = instantiate(tangents[0]), instantiate(tangents[2])
        from plax.lax.convert import convert_element_type
        from plax.lax.select import select
        dt = aval_of(out).dtype
        u_aval = aval_of(updates)
        from_operand = B.eq(operand, out)
        from_updates = B.eq(updates, _gather_window_of(out, indices, u_aval,
                                                       params["dimension_numbers"], params["mode"]))
        zeros = B.zeros_like(out)
        count = B.add(convert_element_type(from_operand, dt),
                      scatter_add_p.bind(zeros, indices, convert_element_type(from_updates, dt),
                                         **params))
        total = B.add(select(from_operand, to, B.zeros_like(to)),
                      scatter_add_p.bind(B.zeros_like(to), indices,
                                         select(from_updates, tu, B.zeros_like(tu)), **params))
        return out, B.div(total, count)
    return rule


register_rule("jvp", scatter_min_p)(_scatter_extremal_jvp(scatter_min_p))
register_rule("jvp", scatter_max_p)(_scatter_extremal_jvp(scatter_max_p))


def _scatter_batch(prim, vals, dims, *, dimension_numbers, indices_are_sorted, unique_indices, mode):
    operand, indices, updates = _batch_all_at_front(vals, dims)
    dn = dimension_numbers
    up = lambda ds: tuple(d + 1 for d in ds)  # noqa: E731
    new_dn = ScatterDimensionNumbers(
        update_window_dims=up(dn.update_window_dims), inserted_window_dims=up(dn.inserted_window_dims),
        scatter_dims_to_operand_dims=up(dn.scatter_dims_to_operand_dims),
        operand_batching_dims=(0,) + up(dn.operand_batching_dims),
        scatter_indices_batching_dims=(0,) + up(dn.scatter_indices_batching_dims))
    out = prim.bind(operand, indices, updates, dimension_numbers=new_dn,
                    indices_are_sorted=indices_are_sorted, unique_indices=unique_indices, mode=mode)
    return out, 0


for _p in (scatter_p, scatter_add_p, scatter_mul_p, scatter_min_p, scatter_max_p):
    register_rule("batch", _p)(lambda vals, dims, _p=_p, **params: _scatter_batch(_p, vals, dims, **params))
