"""Slicing and indexing primitives: slice, dynamic_slice, dynamic_update_slice, gather, scatter.

``gather`` and the ``scatter`` family follow XLA's semantics, with the index
vector in the last axis of ``indices`` and optional batching dimensions (which
is how ``vmap`` batches them). Out-of-bounds windows are handled per mode, as XLA does:
``CLIP`` clamps the start so the window fits; ``FILL_OR_DROP`` gathers ``fill_value`` and
drops the scatter update; ``PROMISE_IN_BOUNDS`` clamps gathers and drops scatter updates (so
the gradient of an out-of-bounds read, a scatter-add, is zero). ``lax.gather`` defaults to
``PROMISE_IN_BOUNDS``, the scatters to ``FILL_OR_DROP``.

``dynamic_slice`` and ``dynamic_update_slice`` first wrap negative start indices (``-1`` is
the last position) unless ``allow_negative_indices=False``, then clamp so the window fits.
"""
from __future__ import annotations

import enum
import operator
from typing import NamedTuple, Sequence

import numpy as np

import plax.lax.binary as B
from plax.array import Array
from plax.core.passes import register_value_identity
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.trace import Tracer
from plax.core.shaped_array import ShapedArray
from plax.sharding import mesh_maybe_set as _mesh_maybe_set
from plax.lax.base import (ANY, INTEGRAL, NUMBER, asarray, aval_of, lax_shape,
                           check_dtype, same_dtypes)
from plax.transforms.batching import move_axis_to
from plax.transforms.jvp import Zero, deflinear, instantiate, linear_in_first_jvp
from plax.lowering.fusion import STRUCTURAL, register_fusible


def _undefined(x) -> bool:
    from plax.transforms.transpose import is_undefined_primal
    return is_undefined_primal(x)


# ------------------------------------------------------------------ slice

slice_p = Primitive("slice")
register_fusible(slice_p, STRUCTURAL)  # (a generator reads its operand at the mapped index)


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


def slice(operand, start_indices: Sequence[int], limit_indices: Sequence[int],
          strides: Sequence[int] | None = None):
    """The static slice ``x[start:limit:stride]`` along every axis.

    Example:
      >>> lax.slice(jnp.arange(5), (1,), (4,))
      Array([1, 2, 3], dtype=int32)
    """
    operand = asarray(operand)
    start = tuple(_static_int(i, "slice start_indices") for i in start_indices)
    limit = tuple(_static_int(i, "slice limit_indices") for i in limit_indices)
    if strides is not None and len(strides) != aval_of(operand).ndim:
        raise TypeError(f"slice strides must have length equal to the number of dimensions of "
                        f"the operand, got strides {tuple(strides)} for operand shape "
                        f"{aval_of(operand).shape}.")
    # strides stay as given, all ones included (JAX prints them, and its batching rule keeps
    # them: vmap of slice_in_dim shows strides=(1, 1))
    strides = None if strides is None else tuple(int(s) for s in strides)
    if strides is None and start == (0,) * len(start) and limit == aval_of(operand).shape:
        return operand
    return slice_p.bind(operand, start_indices=start, limit_indices=limit, strides=strides)


def slice_in_dim(operand, start_index: int | None, limit_index: int | None, stride: int = 1,
                 axis: int = 0):
    """``slice`` along one axis; negative ``start_index`` / ``limit_index`` count from the end."""
    shape = aval_of(asarray(operand)).shape
    axis = int(axis)
    d = shape[axis]
    lo = [0] * len(shape)
    hi = list(shape)
    st = [1] * len(shape)
    start = 0 if start_index is None else _static_int(start_index, "slice_in_dim start_index")
    limit = d if limit_index is None else _static_int(limit_index, "slice_in_dim limit_index")
    lo[axis] = start + d if start < 0 else start
    hi[axis] = limit + d if limit < 0 else limit
    st[axis] = _static_int(stride, "slice_in_dim stride")
    return slice(operand, lo, hi, st)


def index_in_dim(operand, index: int, axis: int = 0, keepdims: bool = True):
    """Element ``index`` along ``axis`` (keeping the axis if ``keepdims``).

    Raises:
      IndexError: if ``index`` is outside ``[-size, size)`` for the axis.
    """
    from plax.lax.shape import squeeze
    operand = asarray(operand)
    index, axis = _static_int(index, "index_in_dim index"), int(axis)
    d = aval_of(operand).shape[axis]
    i = index + d if index < 0 else index
    if not 0 <= i < d:
        raise IndexError(f"index_in_dim: index {index} is out of bounds for axis {axis} with "
                         f"size {d}")
    out = slice_in_dim(operand, i, i + 1, 1, axis)
    return out if keepdims else squeeze(out, (axis,))


def _static_int(v, what: str) -> int:
    if type(v) is int:
        return v
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"{what} must be a static integer, got {v!r}") from None


def _slice_transpose(ct, x, *, start_indices, limit_indices, strides):
    if type(ct) is Zero:
        return [None]
    from plax.lax.shape import pad_p
    shape = x.aval.shape
    # the padding computed with NumPy as JAX's rule computes it, so the high and interior
    # paddings are NumPy ints and the jaxpr prints ``np.int64(2)`` where JAX's does
    if strides is None or all(s == 1 for s in strides):
        cfg = zip(start_indices, np.subtract(shape, limit_indices), (0,) * len(shape))
    else:
        ct_shape = np.array(aval_of(ct).shape)
        real_limits = np.add(start_indices, np.where(
            ct_shape == 0, 0, np.add(1, np.multiply(np.subtract(ct_shape, 1), strides))))
        cfg = zip(start_indices, np.subtract(shape, real_limits), np.subtract(strides, 1))
    return [pad_p.bind(ct, B.full_like_scalar(0, ct), padding_config=tuple(cfg))]


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
register_fusible(dynamic_slice_p, STRUCTURAL)  # (a generator reads its operand at the clamped start)


def _check_start_indices(name, operand, indices):
    if len(indices) != operand.ndim:
        raise TypeError(f"{name} needs one start index per operand axis: got {len(indices)} for "
                        f"operand shape {operand.shape}")
    for i in indices:
        check_dtype(name, i, INTEGRAL, "start index")
        if i.shape != ():
            raise TypeError(f"{name} start indices must be scalars, got shape {i.shape}")
    if any(i.dtype != indices[0].dtype for i in indices[1:]):
        raise TypeError(f"{name} start indices must all have the same integer type, got "
                        f"{', '.join(i.dtype.name for i in indices)}")


@dynamic_slice_p.def_abstract_eval
def _dynamic_slice_abstract_eval(x, *indices, slice_sizes):
    _check_start_indices("dynamic_slice", x, indices)
    if len(slice_sizes) != x.ndim or any(not 0 <= s <= d for s, d in zip(slice_sizes, x.shape)):
        raise TypeError(f"dynamic_slice slice_sizes must be non-negative and at most the operand "
                        f"shape {x.shape}, got {slice_sizes}")
    return ShapedArray(tuple(slice_sizes), x.dtype, x.weak_type)


def _start_index_list(name, x, start_indices, allow_negative_indices):
    """``start_indices`` as one scalar operand per axis of ``x``, negative ones wrapped.

    Raises:
      ValueError: for the wrong number of start indices (or a non-1-D array of them), for
        ``None``, or for a static negative index with ``allow_negative_indices=False``.
    """
    shape = aval_of(x).shape
    if type(start_indices) not in (tuple, list):
        if isinstance(start_indices, (Array, Tracer, np.ndarray)):  # an array of start indices
            ishape = np.shape(start_indices) if isinstance(start_indices, np.ndarray) \
                else aval_of(start_indices).shape
            if len(ishape) != 1:
                raise ValueError(f"{name}: start_indices must be a 1-D sequence of scalars, got "
                                 f"an array of shape {ishape}")
            start_indices = [start_indices[k] for k in range(ishape[0])]
        else:
            start_indices = list(start_indices)
    if len(start_indices) != len(shape):
        raise ValueError(f"{name}: got {len(start_indices)} start indices for an operand of "
                         f"shape {shape}; it needs one per axis ({len(shape)})")
    per_axis = type(allow_negative_indices) in (tuple, list)
    out = []
    for k, i in enumerate(start_indices):
        wrap = allow_negative_indices[k] if per_axis else allow_negative_indices
        if isinstance(i, (int, np.integer)):  # static (bools are left to the primitive's check)
            if i < 0:
                if not wrap:
                    raise ValueError(f"{name}: start index {int(i)} is out of bounds for axis "
                                     f"{k} of size {shape[k]} with allow_negative_indices=False")
                v = int(i) + shape[k]
                i = v if type(i) is int else np.asarray(v).astype(np.asarray(i).dtype)[()]
            out.append(asarray(i))
            continue
        if i is None:
            raise ValueError(f"{name}: start index {k} is None; start indices must be integer "
                             f"scalars")
        i = asarray(i)
        a = aval_of(i)
        if wrap and a.shape == () and a.dtype.kind == "i":
            # (unsigned indices cannot be negative; other dtypes and shapes are rejected by the
            # primitive's checks)
            from plax.lax.select import select
            zero = asarray(np.zeros((), a.dtype))
            i = select(B.lt(i, zero), B.add(i, asarray(np.asarray(shape[k]).astype(a.dtype))), i)
        out.append(i)
    return out


def dynamic_slice(operand, start_indices: Sequence, slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool | Sequence[bool] = True):
    """The slice of ``slice_sizes`` starting at traced ``start_indices``.

    Negative start indices count from the end of their axis (unless
    ``allow_negative_indices=False``); the start is then clamped so the slice fits.

    Example:
      >>> lax.dynamic_slice(jnp.arange(5), (jnp.int32(3),), (2,))
      Array([3, 4], dtype=int32)
      >>> lax.dynamic_slice(jnp.arange(5), (-2,), (2,))
      Array([3, 4], dtype=int32)

    Raises:
      ValueError: if the number of start indices or of slice sizes is not the operand's rank.
      TypeError: for non-integer or non-scalar start indices, or slice sizes that are
        negative or exceed the operand's shape.
    """
    operand = asarray(operand)
    idx = _start_index_list("dynamic_slice", operand, start_indices, allow_negative_indices)
    sizes = lax_shape(slice_sizes, "dynamic_slice slice_sizes")
    if len(sizes) != len(idx):
        raise ValueError(f"dynamic_slice: slice_sizes {sizes} must have one entry per axis of "
                         f"the operand, of shape {aval_of(operand).shape}")
    return dynamic_slice_p.bind(operand, *idx, slice_sizes=sizes)


def _zero_like_index(i):
    """A zero start index of the type of ``i`` (the start indices must share one type)."""
    from plax import dtypes
    dt = aval_of(i).dtype if isinstance(i, (Array, Tracer)) else dtypes.dtype(i)
    return np.zeros((), dt)[()]


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0, *,
                         allow_negative_indices: bool = True):
    """``dynamic_slice`` of ``slice_size`` elements from ``start_index`` along ``axis``."""
    operand = asarray(operand)
    a = aval_of(operand)
    axis = int(axis)
    starts = [_zero_like_index(start_index)] * a.ndim
    starts[axis] = start_index
    sizes = list(a.shape)
    sizes[axis] = slice_size
    wrap = [False] * a.ndim
    wrap[axis] = allow_negative_indices
    return dynamic_slice(operand, starts, sizes, allow_negative_indices=wrap)


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True, *,
                         allow_negative_indices: bool = True):
    """Element ``index`` (possibly traced; negative counts from the end) along ``axis``."""
    from plax.lax.shape import squeeze
    out = dynamic_slice_in_dim(operand, index, 1, axis, allow_negative_indices=allow_negative_indices)
    return out if keepdims else squeeze(out, (int(axis),))


register_rule("jvp", dynamic_slice_p)(linear_in_first_jvp(dynamic_slice_p))


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


def dynamic_update_slice(operand, update, start_indices: Sequence, *,
                         allow_negative_indices: bool | Sequence[bool] = True):
    """``x`` with ``update`` written at traced ``start_indices`` (negative ones count from the
    end unless ``allow_negative_indices=False``; the start is clamped so the update fits).

    Raises:
      ValueError: if the number of start indices is not the operand's rank.
      TypeError: for an update of another dtype or rank, or larger than the operand.
      ShardingTypeError: eagerly under a set Explicit mesh, for an operand and an update
        typed apart (one typed with no mesh, as a host value or one committed to one device
        is, and one placed on the mesh; or two placed with other specs), as JAX's rule
        refuses.
    """
    if _mesh_maybe_set[0]:
        from plax.sharding_device_typed import check_update_typed_as_operand
        check_update_typed_as_operand(operand, update)
    return dynamic_update_slice_unchecked(operand, update, start_indices, allow_negative_indices)


def dynamic_update_slice_unchecked(x, update, start_indices: Sequence,
                                   allow_negative_indices: bool | Sequence[bool] = True):
    """:func:`dynamic_update_slice` without the check of its operands' placements: for
    plax's own code (``.at[].add``, ref writes), whose operands may be placed apart where
    JAX's single operation (a scatter) is typed well."""
    x = asarray(x)
    idx = _start_index_list("dynamic_update_slice", x, start_indices, allow_negative_indices)
    return dynamic_update_slice_p.bind(x, asarray(update), *idx)


def dynamic_update_slice_in_dim(operand, update, start_index, axis: int, *,
                                allow_negative_indices: bool = True):
    """``dynamic_update_slice`` at ``start_index`` along ``axis`` (0 along the other axes)."""
    operand = asarray(operand)
    nd = aval_of(operand).ndim
    axis = int(axis)
    starts = [_zero_like_index(start_index)] * nd
    starts[axis] = start_index
    wrap = [False] * nd
    wrap[axis] = allow_negative_indices
    return dynamic_update_slice(operand, update, starts, allow_negative_indices=wrap)


def dynamic_update_index_in_dim(operand, update, index, axis: int, *,
                                allow_negative_indices: bool = True):
    """Writes ``update`` (with or without the axis) at ``index`` along ``axis``."""
    from plax.lax.shape import expand_dims
    operand, update = asarray(operand), asarray(update)
    axis = int(axis)
    if aval_of(update).ndim == aval_of(operand).ndim - 1:
        update = expand_dims(update, (axis,))
    return dynamic_update_slice_in_dim(operand, update, index, axis,
                                       allow_negative_indices=allow_negative_indices)


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
    PROMISE_IN_BOUNDS = 2   # the caller promises in-bounds indices; out of bounds, gathers
                            # clamp and scatters skip the update (XLA's native behaviour)

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
register_fusible(gather_p, STRUCTURAL)  # (a generator reads the operand element its index vector picks)


def _check_index_dtype(name, indices):
    # a ValueError, as JAX's gather and scatter raise for non-integer indices
    if indices.dtype.kind not in "iu":
        raise ValueError(f"{name} indices must have an integer type, got {indices.dtype.name}")


def _check_index_map(name, what, dims, rank):
    if len(set(dims)) != len(dims) or any(not 0 <= d < rank for d in dims):
        raise TypeError(f"{name}: invalid {what} {tuple(dims)}: its entries must be distinct "
                        f"operand axes, in [0, {rank})")


def _sorted_unique(name, what, dims, bound):
    if list(dims) != sorted(set(dims)) or any(not 0 <= d < bound for d in dims):
        raise TypeError(f"{name} {what} must be sorted, unique and in [0, {bound}), got {dims}")


def gather_fill_value(dtype, fill_value=None) -> np.ndarray:
    """What a ``FILL_OR_DROP`` gather reads out of bounds, as a host scalar of ``dtype``:
    ``fill_value`` cast to it, else JAX's default (NaN for inexact types, the lowest signed
    or highest unsigned integer, True for booleans). Backends' kernels call it.

    Args:
      dtype: the operand's dtype.
      fill_value: the primitive's ``fill_value`` parameter (None: the default).

    Returns:
      A rank-0 NumPy array of ``dtype`` (``bool`` for booleans).

    Example:
      >>> gather_fill_value(np.int8), gather_fill_value(np.uint8), gather_fill_value(np.float32, 2)
      (array(-128, dtype=int8), array(255, dtype=uint8), array(2., dtype=float32))
    """
    dtype = np.dtype(dtype)
    if fill_value is not None:
        with np.errstate(all="ignore"):  # (a value out of the type's range wraps, as a cast)
            return np.asarray(fill_value).astype(dtype)
    if dtype.kind in "fc" or dtype.name == "bfloat16":
        return np.asarray(np.nan).astype(dtype)
    if dtype.kind == "i":
        return np.asarray(np.iinfo(dtype).min, dtype)
    if dtype.kind == "u":
        return np.asarray(np.iinfo(dtype).max, dtype)
    return np.asarray(True)


def slice_size_out_of_range(axis: int, size: int, slice_size: int) -> str:
    """JAX's words for a gather slice of ``slice_size`` along an ``axis`` of ``size``
    elements (the shape rule's TypeError; ``.at[]`` reads of an empty axis raise it too)."""
    return (f"Slice size at index {axis} in gather op is out of range, must be within "
            f"[0, {size} + 1), got {slice_size}.")


@gather_p.def_abstract_eval
def _gather_abstract_eval(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
                          unique_indices, mode, fill_value):
    dn = dimension_numbers
    _check_index_dtype("gather", indices)
    if indices.ndim < 1:
        raise TypeError("gather indices must have at least one axis (the index vector axis, last)")
    if indices.shape[-1] != len(dn.start_index_map):
        raise TypeError(f"gather indices' last axis has size {indices.shape[-1]} but "
                        f"start_index_map {dn.start_index_map} has {len(dn.start_index_map)} entries")
    _check_index_map("gather", "start_index_map", dn.start_index_map, operand.ndim)
    if len(slice_sizes) != operand.ndim:
        raise TypeError(f"gather slice_sizes {slice_sizes} must have one entry per operand axis "
                        f"(shape {operand.shape})")
    for i, (s, d) in enumerate(zip(slice_sizes, operand.shape)):
        if not 0 <= s <= d:  # (JAX's words, then the sizes)
            raise TypeError(f"{slice_size_out_of_range(i, d, s)} (slice_sizes {slice_sizes}, "
                            f"operand shape {operand.shape})")
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
      mode: ``"promise_in_bounds"`` (the default: out-of-bounds slices are clamped on the
        way forward, and their cotangents dropped on the way back), ``"clip"`` (clamped both
        ways) or ``"fill"`` (out-of-bounds slices read ``fill_value``, with zero gradient).
      fill_value: the value of out-of-bounds slices in fill mode (default NaN / the type's extreme).

    Returns:
      The gathered array.
    """
    mode = GatherScatterMode.PROMISE_IN_BOUNDS if mode is None else GatherScatterMode.from_any(mode)
    return gather_p.bind(asarray(operand), asarray(start_indices),
                         dimension_numbers=GatherDimensionNumbers(*map(tuple, dimension_numbers)),
                         slice_sizes=lax_shape(slice_sizes, "gather slice_sizes"),
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
        _check_index_dtype(name, indices)
        same_dtypes(name, [operand, updates])
        if indices.ndim < 1 or indices.shape[-1] != len(dn.scatter_dims_to_operand_dims):
            raise TypeError(f"{name} indices' last axis must have size "
                            f"{len(dn.scatter_dims_to_operand_dims)} (scatter_dims_to_operand_dims "
                            f"{dn.scatter_dims_to_operand_dims}), got indices shape {indices.shape}")
        _check_index_map(name, "scatter_dims_to_operand_dims", dn.scatter_dims_to_operand_dims,
                         operand.ndim)
        _sorted_unique(name, "inserted_window_dims", dn.inserted_window_dims, operand.ndim)
        batch_shape = indices.shape[:-1]
        if updates.ndim != len(batch_shape) + len(dn.update_window_dims):
            raise TypeError(f"{name} updates must have rank {len(batch_shape)} (index batch) + "
                            f"{len(dn.update_window_dims)} (window) , got shape {updates.shape}")
        _sorted_unique(name, "update_window_dims", dn.update_window_dims, max(updates.ndim, 1))
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


def _into_an_empty_operand(avals, params) -> bool:
    return 0 in avals[0].shape


# A scatter into an empty operand writes nothing, whatever its mode (JAX returns the operand);
# a backend's clamp (mode 'clip') would aim below 0 on the empty axis, so none is asked to.
for _p in (scatter_p, scatter_add_p, scatter_mul_p, scatter_min_p, scatter_max_p):
    register_value_identity(_p, when=_into_an_empty_operand)


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
