"""Sorting and searching: sort, argsort, nonzero, argwhere, flatnonzero, searchsorted, unique
(eager only where the result shape depends on values)."""
from __future__ import annotations

import functools
import math

import numpy as np

from plax import dtypes, errors, lax
from plax.core.trace import Tracer, get_aval
from plax.sharding import mesh_maybe_set as _mesh_maybe_set
from plax.sharding_eager import placed_host_results
from plax.sharding_types import explicit_type
from plax.transforms.jit import jit_when_traced
from plax.numpy.util import canonicalize_axis
from plax.numpy.util import asarray_weak, check_arraylike


@jit_when_traced(static_argnames=("axis", "kind", "order", "stable", "descending"))
def sort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True,
         descending: bool = False):
    """Sorted copy of ``a`` along ``axis`` (flattened if None). NaNs go last."""
    if order is not None:
        raise ValueError("'order' argument to sort is not supported.")
    check_arraylike("sort", a)
    a = asarray_weak(a)
    if axis is None:
        from plax.numpy.shape_ops import ravel
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    if descending:
        return lax.rev(lax.sort(lax.rev(a, (axis,)), axis, is_stable=stable), (axis,))
    return lax.sort(a, axis, is_stable=stable)


@jit_when_traced(static_argnames=("axis", "kind", "order", "stable", "descending"))
def argsort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True,
            descending: bool = False, dtype=None):
    """Indices that sort ``a`` along ``axis`` (stable by default).

    Args:
      a: the array.
      axis: the axis to sort along (None: the flattened array).
      kind, order: NumPy's; ``kind`` is ignored (``stable`` decides) and ``order`` only None.
      stable: whether equal elements keep their order.
      descending: sort from largest to smallest.
      dtype: the dtype of the indices (default: the default integer dtype).

    Returns:
      The indices, of ``a``'s shape (flattened for ``axis=None``).

    Example:
      >>> jnp.argsort(jnp.array([3, 1, 2]), dtype=jnp.int8)
      Array([1, 2, 0], dtype=int8)
    """
    check_arraylike("argsort", a)
    a = asarray_weak(a)
    if axis is None:
        from plax.numpy.shape_ops import ravel
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    shape = get_aval(a).shape
    index_dtype = (dtypes.default_int_dtype() if dtype is None  # JAX: int64 with x64
                   else dtypes.check_user_dtype(dtype, "argsort"))  # (JAX allows floats)
    iota = lax.broadcasted_iota(index_dtype, shape, axis)
    if descending:
        n = shape[axis]
        rev_a = lax.rev(a, (axis,))
        _, perm = lax.sort([rev_a, iota], axis, is_stable=stable, num_keys=1)
        return lax.rev(lax.sub(lax.full((), n - 1, index_dtype), perm), (axis,))
    _, perm = lax.sort([a, iota], axis, is_stable=stable, num_keys=1)
    return perm


def _concrete(x, name):
    if isinstance(x, Tracer):
        v = x.to_concrete_value()
        if v is None:
            raise errors.ConcretizationTypeError(
                x, f"The size argument of jnp.{name} must be statically specified to use "
                   f"jnp.{name} within JAX transformations.")
        return np.asarray(v)
    return np.asarray(x)


def nonzero(a, *, size: int | None = None, fill_value=None):
    """Indices of the non-zero elements, one array per axis.

    Args:
      a: the array (at least 1-D).
      size: the static length of the result, required under jit/vmap: extra indices are
        dropped, missing ones are ``fill_value``.
      fill_value: the index (or one per axis) for padding when ``size`` is given (default 0).

    Returns:
      A tuple of ``a.ndim`` int32 index arrays.

    Example:
      >>> jnp.nonzero(jnp.array([0, 3, 0, 5]))
      (Array([1, 3], dtype=int32),)
    """
    check_arraylike("nonzero", a)
    a = asarray_weak(a)
    if get_aval(a).ndim == 0:
        raise ValueError("Calling nonzero on 0d arrays is not allowed. Use "
                         "jnp.atleast_1d(scalar).nonzero() instead.")
    if size is None:
        host = _concrete(a, "nonzero")
        return _placed(tuple(asarray_weak(i.astype(dtypes.default_int_dtype()))
                             for i in np.nonzero(host)), a, "nonzero", _cumulative_mask)
    from plax.numpy.ufuncs import _as_bool
    from plax.numpy.shape_ops import ravel
    mask = ravel(_as_bool(a))
    n = get_aval(mask).shape[0]
    shape = get_aval(a).shape
    # stable sort puts True positions first, in order
    keys = lax.convert_element_type(lax.bitwise_not(mask), np.int32)
    _, order = lax.sort([keys, lax.iota(np.int32, n)], 0, is_stable=True, num_keys=1)
    count = lax.reduce_sum(lax.convert_element_type(mask, np.int32), (0,))
    if size > n:
        order = lax.pad(order, lax.full((), 0, np.int32), [(0, size - n, 0)])
    else:
        order = lax.slice(order, (0,), (size,))
    valid = lax.lt(lax.iota(np.int32, size), count)
    fills = _per_axis_fill(fill_value, len(shape))
    out = []
    flat = order
    strides = np.cumprod((1,) + shape[::-1])[:-1][::-1] if shape else ()
    for dim, stride, fill in zip(shape, strides, fills):
        idx = lax.rem(lax.div(flat, lax.full((), int(stride), np.int32)), lax.full((), max(dim, 1), np.int32))
        fill = lax.convert_element_type(asarray_weak(fill), np.int32)
        out.append(lax.select(valid, idx, lax.broadcast_in_dim(fill, (size,), ())))
    index_dtype = dtypes.default_int_dtype()  # as JAX: int64 indices with x64
    return tuple(lax.convert_element_type(o, index_dtype) for o in out)


def _per_axis_fill(fill_value, ndim: int) -> list:
    """``fill_value`` of nonzero: None (zeros), a scalar, or one scalar per axis."""
    if fill_value is None:
        return [0] * ndim
    if isinstance(fill_value, (tuple, list)):
        if len(fill_value) != ndim:
            raise ValueError(f"nonzero: fill_value must be a scalar or a tuple of length "
                             f"{ndim} (one per axis), got {fill_value!r}")
        return list(fill_value)
    if hasattr(fill_value, "aval") and get_aval(fill_value).shape not in ((), (ndim,)):
        raise ValueError(f"nonzero: fill_value must be a scalar or have shape ({ndim},), got "
                         f"shape {get_aval(fill_value).shape}")
    if hasattr(fill_value, "aval") and get_aval(fill_value).shape == (ndim,):
        return [lax.index_in_dim(fill_value, i, 0, keepdims=False) for i in range(ndim)]
    return [fill_value] * ndim


def flatnonzero(a, *, size: int | None = None, fill_value=None):
    """Indices of the non-zero elements of the flattened array."""
    from plax.numpy.shape_ops import ravel
    return nonzero(ravel(a), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size: int | None = None, fill_value=None):
    """Indices of non-zero elements as a ``(N, ndim)`` array."""
    from plax.numpy.shape_ops import stack
    check_arraylike("argwhere", a)
    a = asarray_weak(a)
    if get_aval(a).ndim == 0:
        # a scalar has one (empty) index if it is non-zero
        found = nonzero(lax.reshape(a, (1,)), size=size, fill_value=fill_value)[0]
        return lax.full((get_aval(found).shape[0], 0), 0, dtypes.default_int_dtype())
    nz = nonzero(a, size=size, fill_value=fill_value)
    return stack(nz, axis=1)


def searchsorted(a, v, side: str = "left", sorter=None, *, method: str = "scan"):
    """Indices where ``v`` would be inserted into sorted 1-D ``a`` to keep it sorted."""
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    a, v = asarray_weak(a), asarray_weak(v)
    if get_aval(a).ndim != 1:
        raise ValueError("searchsorted: a must be 1-D")
    if sorter is not None:
        from plax.numpy.shape_ops import take
        a = take(a, sorter)
    from plax.numpy.util import promote_dtypes
    a, v = promote_dtypes(a, v)
    vv = lax.expand_dims(v, (get_aval(v).ndim,))
    aa = lax.broadcast_in_dim(a, get_aval(v).shape + get_aval(a).shape, (get_aval(v).ndim,))
    hits = _sort_order_before(aa, lax.broadcast_in_dim(vv, get_aval(aa).shape,
                                                       tuple(range(get_aval(vv).ndim))),
                              strict=side == "left")
    return lax.reduce_sum(lax.convert_element_type(hits, np.int32), (get_aval(aa).ndim - 1,))


def _sort_order_before(x, y, strict: bool):
    """``x < y`` (or ``<=``) in the order ``sort`` uses: NaNs after every number (and complex
    numbers ordered lexicographically)."""
    from plax.numpy.ufuncs import isnan, less, less_equal
    out = (less if strict else less_equal)(x, y)
    if dtypes.is_inexact(get_aval(x).dtype):
        x_nan, y_nan = isnan(x), isnan(y)
        if strict:  # a number is before NaN
            out = lax.bitwise_or(out, lax.bitwise_and(y_nan, lax.bitwise_not(x_nan)))
        else:  # everything is at or before NaN
            out = lax.bitwise_or(out, y_nan)
    return out


def unique(ar, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis=None, *, equal_nan: bool = True, size=None,
           fill_value=None, sorted: bool = True):
    """The sorted unique values of ``ar`` (NaNs count as one value unless ``equal_nan``
    is False).

    Args:
      ar: the array (flattened unless ``axis`` is given).
      return_index, return_inverse, return_counts: also return the first index of each
        unique value, the index of each element's value, and the counts (as NumPy).
      axis: unique slices along this axis instead of unique elements.
      equal_nan: whether all NaNs count as one value (True, the default) or each NaN as its
        own (as NumPy's ``equal_nan``).
      size: a static result length, required under jit: the values are padded with
        ``fill_value`` (default: the smallest unique value) or truncated.
      fill_value: see ``size``.
      sorted: accepted for the array API; the values are always sorted (as in JAX).

    Returns:
      The unique values, or a tuple with the requested extras.

    Example:
      >>> jnp.unique(jnp.array([3, 1, 3]))
      Array([1, 3], dtype=int32)
    """
    check_arraylike("unique", ar)
    a = asarray_weak(ar)
    if size is not None and axis is None and isinstance(a, Tracer):
        # (a concrete tracer too, as JAX computes it: jvp differentiates the values)
        if not (return_index or return_inverse):
            return _unique_traced(a, int(size), fill_value, return_counts, equal_nan)
        if a.to_concrete_value() is None:
            raise NotImplementedError("jnp.unique with traced input and return_index or "
                                      "return_inverse is not supported; call it outside jit.")
    host = _concrete(a, "unique")
    ax = None if axis is None else canonicalize_axis(axis, host.ndim)
    length = host.size if ax is None else host.shape[ax]
    if length == 0:
        _check_fill_of_empty(size, fill_value)
    if host.size == 0:
        res = _unique_of_no_elements(host, ax, None if size is None else int(size), fill_value)
    else:
        # (only what is asked for: an index or an inverse costs NumPy a stable argsort of
        # the whole input, many times the values' sort)
        wanted = (return_index, return_inverse, return_counts)
        if ax is not None and equal_nan and _has_nan(host):
            res = _unique_slices_equal_nan(host, ax, wanted)
        else:
            got = np.unique(host, return_index=return_index, return_inverse=return_inverse,
                            return_counts=return_counts, axis=ax, equal_nan=bool(equal_nan))
            got = iter(got if isinstance(got, tuple) else (got,))
            res = (next(got),) + tuple(next(got) if w else None for w in wanted)
        if size is not None:
            res = _sized_unique(res, int(size), fill_value, 0 if ax is None else ax)
    values, index, inverse, counts = res
    if ax is None and return_inverse:
        inverse = inverse.reshape(host.shape)  # as JAX: the inverse has the input's shape
    int_dtype = dtypes.default_int_dtype()
    res = [values] + [r.astype(int_dtype) for r, wanted in
                      ((index, return_index), (inverse, return_inverse),
                       (counts, return_counts)) if wanted]
    # JAX sorts the slices along the axis first: its sort rule refuses that axis split over
    # an Explicit mesh axis, and the values (a gather of whole slices) keep the operand's
    # type on the other axes
    out = _placed(tuple(asarray_weak(r) for r in res), a, "unique",
                  _sorted_flat if ax is None else functools.partial(_sorted_first_keys, ax=ax),
                  keeps_type=(ax is not None,))
    return out if len(out) > 1 else out[0]


def _placed(outs: tuple, operand, name: str, typing_steps=None, keeps_type=()) -> tuple:
    """``outs``, computed on the host from ``operand``, placed under a set mesh as JAX's
    results of ``jnp.{name}`` are (:func:`plax.sharding_eager.placed_host_results`).
    ``typing_steps``: the first steps of JAX's own computation of them, a function of
    ``operand``; when its type has an explicit sharding they are typed abstractly, so their
    sharding rules refuse it as JAX's do (``unique`` of a value split ``P('x')`` is
    ``sort``'s ShardingTypeError). ``keeps_type``: which outputs keep an explicitly typed
    operand's sharding (see :func:`plax.sharding_eager.placed_host_results`)."""
    if not _mesh_maybe_set[0]:
        return outs
    if typing_steps is not None and explicit_type(operand) is not None:
        from plax.transforms.jit import eval_shape
        eval_shape(typing_steps, operand)
    return tuple(placed_host_results(outs, [operand], name, keeps_type))


def _sorted_flat(a):
    """What JAX's ``unique`` of no axis computes first: the flattened values sorted."""
    from plax.numpy.shape_ops import ravel
    return sort(ravel(a))


def _sorted_first_keys(a, ax: int):
    """What JAX's ``unique`` along ``ax`` sorts first: keys along that axis (one of them
    stands for all: each has the axis's sharding)."""
    from plax.numpy.shape_ops import moveaxis
    moved = moveaxis(a, ax, 0)
    return sort(moved[(slice(None),) + (0,) * (get_aval(moved).ndim - 1)])


def _cumulative_mask(a):
    """What JAX's ``nonzero`` computes first: a cumulative sum of the flattened mask."""
    from plax.numpy.reductions import cumsum
    return cumsum(lax.ne(a, lax.full_like(a, 0)))


def _check_fill_of_empty(size, fill_value) -> None:
    """JAX's refusal to pad ``unique`` of an input of no elements to a nonzero ``size``
    without a ``fill_value`` (``jnp.unique`` and the ``unique_*`` functions of
    ``plax.numpy.sets``)."""
    if size and fill_value is None:
        raise ValueError("jnp.unique: for zero-sized input with nonzero size argument, "
                         "fill_value must be specified")


def _unique_of_no_elements(host: np.ndarray, ax: int | None, size: int | None, fill_value):
    """``unique``'s four results for an input of no elements, as JAX 0.10 gives them: along
    an axis of length ``n`` whose slices hold no elements every slice is the same one, so
    one unique slice (its first index 0, counted ``n`` times, every inverse 0); with no
    slices (or no axis: the flattened empty array) no unique value. With ``size`` and a
    ``fill_value`` the values are ``size`` slices of ``fill_value`` (the index and counts
    are not padded, as JAX's are not); without one they are the unique slices as they are."""
    flat = host.reshape(-1) if ax is None else np.moveaxis(host, ax, 0)
    n, rest = flat.shape[0], flat.shape[1:]
    kept = 1 if ax is not None and math.prod(rest) == 0 else 0
    values = np.zeros((kept,) + rest, host.dtype)
    if size is not None and fill_value is not None:
        values = np.full((size,) + rest, fill_value, host.dtype)
    if ax is not None:
        values = np.moveaxis(values, 0, ax)
    counts = np.full((1,), n) if n and kept else np.zeros((0,), int)
    return values, np.zeros((kept,), int), np.zeros((n,), int), counts


def _has_nan(host: np.ndarray) -> bool:
    return dtypes.is_inexact(host.dtype) and bool(np.isnan(host).any())


def _unique_slices_equal_nan(host: np.ndarray, ax: int, wanted: tuple) -> tuple:
    """``np.unique``'s ``(values, index, inverse, counts)`` of the slices of ``host`` along
    ``ax``, two slices equal where each pair of their elements is equal or both NaN, as
    JAX's ``equal_nan=True`` (NumPy ignores ``equal_nan`` when given an axis). The slices
    are sorted lexicographically, stably, NaN last (a complex element with a NaN part is
    NaN + 0j first, as JAX); each run of equal slices keeps its first. Results not in
    ``wanted`` (index, inverse, counts) are None."""
    moved = np.moveaxis(host, ax, 0)
    if dtypes.is_complex(moved.dtype):
        moved = np.where(np.isnan(moved), moved.dtype.type(np.nan), moved)
    rows = moved.reshape(moved.shape[0], -1)
    keys = rows if rows.dtype.kind in "fc" else rows.astype(np.float32)  # (bfloat16, f8)
    order = np.lexsort(keys.T[::-1])  # (host has elements: every row has a column)
    ordered = keys[order]
    with np.errstate(invalid="ignore"):
        differs = (ordered[1:] != ordered[:-1]) & ~(np.isnan(ordered[1:])
                                                      & np.isnan(ordered[:-1]))
    starts = np.concatenate([[True], differs.any(axis=1)])
    first = order[starts]
    values = np.moveaxis(moved[first], 0, ax)
    group = np.cumsum(starts) - 1
    inverse = np.empty(len(rows), np.intp)
    inverse[order] = group
    counts = np.diff(np.append(np.flatnonzero(starts), len(rows)))
    return tuple(r if w else None for r, w in
                 ((values, True), (first, wanted[0]), (inverse, wanted[1]),
                  (counts, wanted[2])))


def _sized_unique(res: tuple, size: int, fill_value, ax: int) -> tuple:
    """``np.unique``'s ``(values, index, inverse, counts)`` of a non-empty input cut or
    padded to ``size`` unique values along ``ax`` as JAX's ``size`` gives them: padding
    repeats the first unique value (or is ``fill_value``) with the first value's index, and
    counts 0; the inverse is unchanged. Results not asked for are None, and stay None."""
    values, index, inverse, counts = res
    kept = min(size, values.shape[ax])
    pad = size - kept

    def cut_pad(r, axis, filler):
        r = np.take(r, np.arange(kept), axis=axis)
        if pad <= 0:
            return r
        return np.concatenate([r, np.repeat(filler, pad, axis=axis)], axis=axis)

    first = np.take(values, [0], axis=ax)
    filler = first if fill_value is None else np.full_like(first, fill_value)
    return (cut_pad(values, ax, filler),
            None if index is None else cut_pad(index, 0, index[:1]), inverse,
            None if counts is None else cut_pad(counts, 0, np.zeros(1, counts.dtype)))


def _unique_traced(a, size: int, fill_value, return_counts: bool = False,
                   equal_nan: bool = True):
    """Sorted unique values with a static ``size``, for traced input: sort, keep the first of
    each run of equal values, compact them to the front. ``return_counts``: also each value's
    count (0 for the padding), as ``(values, counts)``. ``equal_nan``: whether the NaNs
    (sorted together at the end) make one value."""
    from plax.numpy.shape_ops import ravel
    from plax.numpy.ufuncs import isnan, logical_and, not_equal
    flat = lax.sort(ravel(a), 0)
    n = get_aval(flat).shape[0]
    if n == 0:  # (no unique value: the counts are empty, as JAX's, not padded)
        _check_fill_of_empty(size, fill_value)
        values = lax.full((size,), 0 if fill_value is None else fill_value,
                          get_aval(flat).dtype)
        return (values, lax.full((0,), 0, dtypes.default_int_dtype())) if return_counts \
            else values
    differs = not_equal(lax.slice(flat, (1,), (n,)), lax.slice(flat, (0,), (n - 1,)))
    if equal_nan and dtypes.is_inexact(get_aval(flat).dtype):  # NaNs sort together: one value
        differs = lax.bitwise_and(differs, lax.bitwise_not(
            logical_and(isnan(lax.slice(flat, (1,), (n,))), isnan(lax.slice(flat, (0,), (n - 1,))))))
    first = lax.concatenate([lax.full((1,), True, np.bool_), differs], 0)
    # where each run starts (one more for the counts: where the last kept run ends; n past
    # the last run)
    (starts,) = nonzero(first, size=size + return_counts, fill_value=n)
    pos = lax.slice(starts, (0,), (size,))
    count = lax.reduce_sum(lax.convert_element_type(first, np.int32), (0,))
    from plax.numpy.shape_ops import take
    values = take(flat, pos, mode="clip")
    fill = lax.slice(flat, (0,), (1,)) if fill_value is None else \
        lax.full((1,), fill_value, get_aval(flat).dtype)
    keep = lax.lt(lax.iota(np.int32, size), count)
    values = lax.select(keep, values, lax.broadcast_in_dim(lax.reshape(fill, ()), (size,), ()))
    if not return_counts:
        return values
    # (nonzero's positions are of the default int dtype, the counts' own)
    ends = lax.slice(starts, (1,), (size + 1,))
    counts = lax.select(keep, lax.sub(ends, pos), lax.full((size,), 0, get_aval(pos).dtype))
    return values, counts

