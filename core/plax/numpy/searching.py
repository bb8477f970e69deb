"""Sorting and searching: sort, argsort, nonzero, argwhere, flatnonzero, searchsorted, unique
(eager only where the result shape depends on values)."""
from __future__ import annotations

import numpy as np

from plax import dtypes, errors, lax
from plax.core.trace import Tracer, get_aval
from plax.lax.base import canonicalize_axis
from plax.numpy.util import asarray_weak, check_arraylike


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


def argsort(a, axis: int | None = -1, *, kind=None, order=None, stable: bool = True,
            descending: bool = False):
    """Indices that sort ``a`` along ``axis`` (stable by default)."""
    check_arraylike("argsort", a)
    a = asarray_weak(a)
    if axis is None:
        from plax.numpy.shape_ops import ravel
        a, axis = ravel(a), 0
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    shape = get_aval(a).shape
    iota = lax.broadcasted_iota(np.int32, shape, axis)
    if descending:
        n = shape[axis]
        rev_a = lax.rev(a, (axis,))
        _, perm = lax.sort([rev_a, iota], axis, is_stable=stable, num_keys=1)
        return lax.rev(lax.sub(lax.full((), n - 1, np.int32), perm), (axis,))
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
    """Indices of the non-zero elements, one array per axis. Under jit, pass ``size``."""
    check_arraylike("nonzero", a)
    a = asarray_weak(a)
    if size is None:
        host = _concrete(a, "nonzero")
        return tuple(asarray_weak(i.astype(np.int32)) for i in np.nonzero(host))
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
    out = []
    flat = order
    strides = np.cumprod((1,) + shape[::-1])[:-1][::-1] if shape else ()
    for dim, stride in zip(shape, strides):
        idx = lax.rem(lax.div(flat, lax.full((), int(stride), np.int32)), lax.full((), max(dim, 1), np.int32))
        fill = 0 if fill_value is None else fill_value
        out.append(lax.select(valid, idx, lax.full((size,), fill, np.int32)))
    return tuple(out)


def flatnonzero(a, *, size: int | None = None, fill_value=None):
    """Indices of the non-zero elements of the flattened array."""
    from plax.numpy.shape_ops import ravel
    return nonzero(ravel(a), size=size, fill_value=fill_value)[0]


def argwhere(a, *, size: int | None = None, fill_value=None):
    """Indices of non-zero elements as a ``(N, ndim)`` array."""
    from plax.numpy.shape_ops import stack
    a = asarray_weak(a)
    nz = nonzero(a, size=size, fill_value=fill_value)
    if not nz:
        return lax.full((0, 0), 0, np.int32)
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
    cmp = lax.le if side == "right" else lax.lt
    vv = lax.expand_dims(v, (get_aval(v).ndim,))
    aa = lax.broadcast_in_dim(a, get_aval(v).shape + get_aval(a).shape, (get_aval(v).ndim,))
    hits = cmp(aa, lax.broadcast_in_dim(vv, get_aval(aa).shape, tuple(range(get_aval(vv).ndim))))
    return lax.reduce_sum(lax.convert_element_type(hits, np.int32), (get_aval(aa).ndim - 1,))


def unique(ar, return_index: bool = False, return_inverse: bool = False,
           return_counts: bool = False, axis=None, *, size=None, fill_value=None):
    """The sorted unique values (eager: the result shape depends on the values)."""
    host = _concrete(asarray_weak(ar), "unique")
    res = np.unique(host, return_index=return_index, return_inverse=return_inverse,
                    return_counts=return_counts, axis=axis)
    if isinstance(res, tuple):
        return tuple(asarray_weak(r.astype(np.int32) if r.dtype.kind in "iu" and i else r)
                     for i, r in enumerate(res))
    return asarray_weak(res)


del dtypes
