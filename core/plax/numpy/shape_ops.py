"""Shape manipulation of plax.numpy: reshape, transpose, stacking and splitting, flips,
broadcasting, diagonals and triangles, take and friends."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from plax import dtypes, lax
from plax.core.trace import Tracer, get_aval
from plax.lax.base import canonicalize_axis
from plax.numpy.util import (asarray_weak, broadcast_shapes, broadcast_to, canonicalize_axis_tuple,
                             check_arraylike, promote_dtypes)


def _shape(x) -> tuple:
    return get_aval(x).shape


def reshape(a, shape=None, order: str = "C", *, newshape=None, copy=None):
    """Gives ``a`` a new shape with the same number of elements (one entry may be -1).

    Example:
      >>> jnp.arange(6).reshape(2, 3).shape
      (2, 3)
    """
    if shape is None:
        shape = newshape
    if order != "C":
        raise NotImplementedError(f"reshape(order={order!r}): plax supports only order='C'")
    check_arraylike("reshape", a)
    a = asarray_weak(a)
    if isinstance(shape, (int, np.integer)) or (hasattr(shape, "__index__") and not isinstance(shape, (tuple, list))):
        shape = (shape,)
    shape = [int(s) for s in shape]
    size = get_aval(a).size
    if shape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension (-1)")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or size % known:
            raise TypeError(f"cannot reshape array of shape {_shape(a)} (size {size}) into shape "
                            f"{tuple(shape)}")
        shape[shape.index(-1)] = size // known
    if math.prod(shape) != size:
        raise TypeError(f"cannot reshape array of shape {_shape(a)} (size {size}) into shape "
                        f"{tuple(shape)} (size {math.prod(shape)})")
    return lax.reshape(a, tuple(shape))


def ravel(a, order: str = "C"):
    """``a`` flattened to one dimension."""
    a = asarray_weak(a)
    return reshape(a, (get_aval(a).size,), order)


def transpose(a, axes: Sequence[int] | None = None):
    """Permutes the axes (reverses them by default)."""
    check_arraylike("transpose", a)
    a = asarray_weak(a)
    nd = get_aval(a).ndim
    if axes is None:
        axes = tuple(range(nd))[::-1]
    axes = tuple(canonicalize_axis(i, nd) for i in axes)
    if sorted(axes) != list(range(nd)):
        raise ValueError(f"axes {axes} don't match array of dimension {nd}")
    return lax.transpose(a, axes)


permute_dims = transpose


def matrix_transpose(x):
    """Swaps the last two axes."""
    x = asarray_weak(x)
    nd = get_aval(x).ndim
    if nd < 2:
        raise ValueError(f"matrix_transpose requires at least 2 dimensions, got {nd}")
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def moveaxis(a, source, destination):
    """Moves axes ``source`` to positions ``destination``."""
    a = asarray_weak(a)
    nd = get_aval(a).ndim
    src = [canonicalize_axis(s, nd) for s in np.atleast_1d(source)]
    dst = [canonicalize_axis(d, nd) for d in np.atleast_1d(destination)]
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number of elements")
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return lax.transpose(a, tuple(order))


def swapaxes(a, axis1: int, axis2: int):
    """Interchanges two axes."""
    a = asarray_weak(a)
    nd = get_aval(a).ndim
    perm = list(range(nd))
    i, j = canonicalize_axis(axis1, nd), canonicalize_axis(axis2, nd)
    perm[i], perm[j] = perm[j], perm[i]
    return lax.transpose(a, tuple(perm))


def squeeze(a, axis=None):
    """Removes axes of size one (all of them, or those in ``axis``)."""
    a = asarray_weak(a)
    shape = _shape(a)
    if axis is None:
        axes = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        axes = canonicalize_axis_tuple(axis, len(shape))
        for i in axes:
            if shape[i] != 1:
                raise ValueError(f"cannot select an axis to squeeze out which has size not equal "
                                 f"to one, got shape={shape} and dimensions={axes}")
    return lax.squeeze(a, axes)


def expand_dims(a, axis):
    """Inserts axes of size one at positions ``axis`` of the result."""
    a = asarray_weak(a)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return lax.expand_dims(a, axes)


def atleast_1d(*arys):
    """Views of the inputs with at least one dimension."""
    out = [lax.reshape(a, (1,)) if get_aval(a).ndim == 0 else a for a in map(asarray_weak, arys)]
    return out[0] if len(out) == 1 else out


def atleast_2d(*arys):
    """Views of the inputs with at least two dimensions."""
    out = []
    for a in map(asarray_weak, arys):
        nd = get_aval(a).ndim
        out.append(a if nd >= 2 else lax.reshape(a, (1,) * (2 - nd) + _shape(a)))
    return out[0] if len(out) == 1 else out


def atleast_3d(*arys):
    """Views of the inputs with at least three dimensions."""
    out = []
    for a in map(asarray_weak, arys):
        s = _shape(a)
        if len(s) == 0:
            a = lax.reshape(a, (1, 1, 1))
        elif len(s) == 1:
            a = lax.reshape(a, (1, s[0], 1))
        elif len(s) == 2:
            a = lax.reshape(a, s + (1,))
        out.append(a)
    return out[0] if len(out) == 1 else out


def concatenate(arrays, axis: int | None = 0, dtype=None):
    """Joins arrays along an existing axis (flattening them first if ``axis`` is None).

    Example:
      >>> jnp.concatenate([jnp.zeros(2), jnp.ones(1)])
      Array([0., 0., 1.], dtype=float32)
    """
    if isinstance(arrays, (np.ndarray,)) or hasattr(arrays, "aval"):
        arrays = list(arrays)
    if not len(arrays):
        raise ValueError("Need at least one array to concatenate.")
    check_arraylike("concatenate", *arrays)
    arrays = [asarray_weak(a) for a in arrays]
    if axis is None:
        arrays = [ravel(a) for a in arrays]
        axis = 0
    nd = get_aval(arrays[0]).ndim
    if nd == 0:
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    for a in arrays:
        if get_aval(a).ndim != nd:
            raise ValueError(f"All input arrays must have the same number of dimensions, but got "
                             f"shapes {[_shape(x) for x in arrays]}")
    axis = canonicalize_axis(axis, nd)
    arrays = promote_dtypes(*arrays)
    if dtype is not None:
        arrays = [lax.convert_element_type(a, dtypes.check_user_dtype(dtype, "concatenate")) for a in arrays]
    for a in arrays:
        s = _shape(a)
        if any(x != y for i, (x, y) in enumerate(zip(s, _shape(arrays[0]))) if i != axis):
            raise ValueError(f"all the input array dimensions except for the concatenation axis "
                             f"must match exactly, got shapes {[_shape(x) for x in arrays]}")
    return lax.concatenate(arrays, axis)


concat = concatenate


def stack(arrays, axis: int = 0, out=None, dtype=None):
    """Joins arrays of equal shape along a new axis.

    Example:
      >>> jnp.stack([jnp.zeros(2), jnp.ones(2)]).shape
      (2, 2)
    """
    if hasattr(arrays, "aval") or isinstance(arrays, np.ndarray):
        arrays = list(arrays)
    if not len(arrays):
        raise ValueError("Need at least one array to stack.")
    check_arraylike("stack", *arrays)
    arrays = [asarray_weak(a) for a in arrays]
    shape = _shape(arrays[0])
    for a in arrays:
        if _shape(a) != shape:
            raise ValueError(f"All input arrays must have the same shape, got "
                             f"{[_shape(x) for x in arrays]}")
    axis = canonicalize_axis(axis, len(shape) + 1)
    expanded = [lax.expand_dims(a, (axis,)) for a in arrays]
    return concatenate(expanded, axis, dtype)


def unstack(x, axis: int = 0) -> tuple:
    """Splits ``x`` along ``axis`` into a tuple of arrays without that axis."""
    x = asarray_weak(x)
    shape = _shape(x)
    axis = canonicalize_axis(axis, len(shape))
    return tuple(lax.index_in_dim(x, i, axis, keepdims=False) for i in range(shape[axis]))


def hstack(tup, dtype=None):
    """Stacks arrays horizontally (along axis 1, or 0 for 1-D arrays)."""
    arrs = [atleast_1d(a) for a in tup]
    return concatenate(arrs, 0 if get_aval(arrs[0]).ndim == 1 else 1, dtype)


def vstack(tup, dtype=None):
    """Stacks arrays vertically (row-wise)."""
    return concatenate([atleast_2d(a) for a in tup], 0, dtype)


row_stack = vstack


def dstack(tup, dtype=None):
    """Stacks arrays along the third axis."""
    return concatenate([atleast_3d(a) for a in tup], 2, dtype)


def column_stack(tup):
    """Stacks 1-D arrays as columns of a 2-D array."""
    arrs = []
    for a in tup:
        a = asarray_weak(a)
        arrs.append(lax.reshape(a, (get_aval(a).size, 1)) if get_aval(a).ndim < 2 else a)
    return concatenate(arrs, 1)


def _split_points(size, indices_or_sections, strict):
    if isinstance(indices_or_sections, (int, np.integer)):
        n = int(indices_or_sections)
        if n <= 0:
            raise ValueError("number sections must be larger than 0.")
        if strict and size % n:
            raise ValueError(f"array split does not result in an equal division: {size} into {n}")
        q, r = divmod(size, n)
        sizes = [q + 1] * r + [q] * (n - r)
        return list(np.cumsum([0] + sizes))
    pts = [int(i) for i in indices_or_sections]
    return [0] + [min(max(p, 0), size) if p >= 0 else max(size + p, 0) for p in pts] + [size]


def split(ary, indices_or_sections, axis: int = 0) -> list:
    """Splits into equal sections, or at the given indices, along ``axis``."""
    ary = asarray_weak(ary)
    axis = canonicalize_axis(axis, get_aval(ary).ndim)
    pts = _split_points(_shape(ary)[axis], indices_or_sections, True)
    return [lax.slice_in_dim(ary, a, max(a, b), 1, axis) for a, b in zip(pts[:-1], pts[1:])]


def array_split(ary, indices_or_sections, axis: int = 0) -> list:
    """Like :func:`split`, allowing unequal sections."""
    ary = asarray_weak(ary)
    axis = canonicalize_axis(axis, get_aval(ary).ndim)
    pts = _split_points(_shape(ary)[axis], indices_or_sections, False)
    return [lax.slice_in_dim(ary, a, max(a, b), 1, axis) for a, b in zip(pts[:-1], pts[1:])]


def hsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, 1 if get_aval(asarray_weak(ary)).ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, 0)


def dsplit(ary, indices_or_sections):
    return split(ary, indices_or_sections, 2)


def broadcast_arrays(*args) -> list:
    """Broadcasts arrays against each other."""
    arrays = [asarray_weak(a) for a in args]
    shape = broadcast_shapes(*[_shape(a) for a in arrays])
    return [broadcast_to(a, shape) for a in arrays]


def tile(A, reps):
    """Repeats ``A`` ``reps`` times along each axis."""
    A = asarray_weak(A)
    reps = (int(reps),) if isinstance(reps, (int, np.integer)) else tuple(int(r) for r in reps)
    shape = _shape(A)
    nd = max(len(shape), len(reps))
    shape = (1,) * (nd - len(shape)) + shape
    reps = (1,) * (nd - len(reps)) + reps
    A = lax.reshape(A, shape)
    big = lax.broadcast_in_dim(A, tuple(x for r, d in zip(reps, shape) for x in (r, d)),
                               tuple(range(1, 2 * nd, 2)))
    return lax.reshape(big, tuple(r * d for r, d in zip(reps, shape)))


def repeat(a, repeats, axis: int | None = None, *, total_repeat_length: int | None = None):
    """Repeats each element ``repeats`` times (a scalar or one count per element, concrete)."""
    a = asarray_weak(a)
    if axis is None:
        a = ravel(a)
        axis = 0
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    if isinstance(repeats, Tracer) and repeats.to_concrete_value() is None:
        raise NotImplementedError("jnp.repeat with traced repeats is not supported; pass concrete "
                                  "counts.")
    reps = np.asarray(repeats if not hasattr(repeats, "aval") else np.asarray(repeats))
    n = _shape(a)[axis]
    if reps.ndim == 0:
        r = int(reps)
        shape = _shape(a)
        big = lax.broadcast_in_dim(a, shape[:axis + 1] + (r,) + shape[axis + 1:],
                                   tuple(range(axis + 1)) + tuple(range(axis + 2, len(shape) + 1)))
        return lax.reshape(big, shape[:axis] + (n * r,) + shape[axis + 1:])
    if reps.shape != (n,):
        raise ValueError(f"repeats must be a scalar or have length {n}, got shape {reps.shape}")
    idx = np.repeat(np.arange(n), reps).astype(np.int32)
    return take(a, idx, axis=axis)


def flip(m, axis=None):
    """Reverses the order of elements along ``axis`` (all axes by default)."""
    m = asarray_weak(m)
    axes = canonicalize_axis_tuple(axis, get_aval(m).ndim)
    return lax.rev(m, axes)


def fliplr(m):
    return flip(m, 1)


def flipud(m):
    return flip(m, 0)


def roll(a, shift, axis=None):
    """Rolls elements along ``axis``; those shifted past the end come back at the start."""
    a = asarray_weak(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), _shape(a))
    shifts = np.atleast_1d(shift)
    axes = np.atleast_1d(axis)
    if shifts.size == 1 and axes.size > 1:
        shifts = np.repeat(shifts, axes.size)
    for s, ax in zip(shifts, axes):
        ax = canonicalize_axis(int(ax), get_aval(a).ndim)
        n = _shape(a)[ax]
        if n == 0:
            continue
        s = int(s) % n
        if s:
            a = lax.concatenate([lax.slice_in_dim(a, n - s, n, 1, ax),
                                 lax.slice_in_dim(a, 0, n - s, 1, ax)], ax)
    return a


def rot90(m, k: int = 1, axes: tuple = (0, 1)):
    """Rotates by 90 degrees ``k`` times in the plane of ``axes``."""
    m = asarray_weak(m)
    k %= 4
    a0, a1 = axes
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    if k == 1:
        return swapaxes(flip(m, a1), a0, a1)
    return flip(swapaxes(m, a0, a1), a1)


def diagonal(a, offset: int = 0, axis1: int = 0, axis2: int = 1):
    """The ``offset`` diagonal of the 2-D slices spanned by ``axis1`` and ``axis2`` (last axis)."""
    a = asarray_weak(a)
    nd = get_aval(a).ndim
    a1, a2 = canonicalize_axis(axis1, nd), canonicalize_axis(axis2, nd)
    a = moveaxis(a, (a1, a2), (-2, -1))
    n, m = _shape(a)[-2:]
    rows = np.arange(max(0, -offset), min(n, m - offset) if m - offset > 0 else 0)
    if rows.size == 0:
        return lax.full(_shape(a)[:-2] + (0,), 0, get_aval(a).dtype)
    from plax.numpy.indexing import getitem
    return getitem(a, (Ellipsis, rows.astype(np.int32), (rows + offset).astype(np.int32)))


def diag(v, k: int = 0):
    """The ``k``-th diagonal of a 2-D array, or a 2-D array with 1-D ``v`` on diagonal ``k``."""
    v = asarray_weak(v)
    shape = _shape(v)
    if len(shape) == 1:
        n = shape[0] + builtins_abs(k)
        from plax.numpy.creation import eye
        eyek = eye(n, k=k, dtype=np.bool_)
        row = lax.broadcast_in_dim(v, (n, shape[0]), (1,) if k >= 0 else (1,))
        padded = lax.pad(v, lax.full((), 0, get_aval(v).dtype), [(max(-k, 0), max(k, 0), 0)]) if k else v
        if k >= 0:
            vals = lax.broadcast_in_dim(padded, (n, n), (1,))
        else:
            vals = lax.broadcast_in_dim(padded, (n, n), (0,))
        del row
        return lax.select(eyek, vals, lax.full((n, n), 0, get_aval(v).dtype))
    if len(shape) == 2:
        return diagonal(v, k)
    raise ValueError("diag input must be 1d or 2d")


def builtins_abs(k):
    return k if k >= 0 else -k


def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None):
    """Sum along a diagonal."""
    from plax.numpy.reductions import sum as jsum
    return jsum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def _tri_mask(shape, k, lower):
    rows = lax.broadcasted_iota(np.int32, shape[-2:], 0)
    cols = lax.broadcasted_iota(np.int32, shape[-2:], 1)
    kk = lax.full((), k, np.int32)
    if lower:
        return lax.ge(lax.add(rows, kk), cols)
    return lax.le(lax.add(rows, kk), cols)


def tril(m, k: int = 0):
    """Zeros above diagonal ``k`` of the last two axes."""
    m = asarray_weak(m)
    shape = _shape(m)
    if len(shape) < 2:
        raise ValueError("tril requires an array of at least two dimensions")
    mask = lax.broadcast_in_dim(_tri_mask(shape, k, True), shape, (len(shape) - 2, len(shape) - 1))
    return lax.select(mask, m, lax.full(shape, 0, get_aval(m).dtype))


def triu(m, k: int = 0):
    """Zeros below diagonal ``k`` of the last two axes."""
    m = asarray_weak(m)
    shape = _shape(m)
    if len(shape) < 2:
        raise ValueError("triu requires an array of at least two dimensions")
    mask = lax.broadcast_in_dim(_tri_mask(shape, k - 1, True), shape,
                                (len(shape) - 2, len(shape) - 1))
    return lax.select(mask, lax.full(shape, 0, get_aval(m).dtype), m)


def take(a, indices, axis: int | None = None, out=None, mode=None, unique_indices: bool = False,
         indices_are_sorted: bool = False, fill_value=None):
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flattened array if None).
    Out-of-bounds indices give ``fill_value`` (NaN for floats) unless ``mode="clip"``."""
    if out is not None:
        raise NotImplementedError("The 'out' argument to jnp.take is not supported.")
    a = asarray_weak(a)
    if axis is None:
        a = ravel(a)
        axis = 0
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    from plax.numpy.indexing import getitem
    idx = (slice(None),) * axis + (asarray_weak(indices),)
    return getitem(a, idx, mode="fill" if mode is None else mode, fill_value=fill_value)


def take_along_axis(arr, indices, axis: int | None, mode=None, fill_value=None):
    """``arr`` reindexed along ``axis`` by ``indices`` (broadcast against ``arr``'s other axes)."""
    arr = asarray_weak(arr)
    indices = asarray_weak(indices)
    if axis is None:
        arr = ravel(arr)
        indices = ravel(indices)
        axis = 0
    nd = get_aval(arr).ndim
    if get_aval(indices).ndim != nd:
        raise ValueError(f"indices and arr must have the same number of dimensions; "
                         f"{get_aval(indices).ndim} vs. {nd}")
    axis = canonicalize_axis(axis, nd)
    ishape = _shape(indices)
    out_shape = tuple(ishape[i] if i == axis else builtins_max2(ishape[i], _shape(arr)[i])
                      for i in range(nd))
    from plax.numpy.indexing import getitem
    idx = []
    for i in range(nd):
        if i == axis:
            idx.append(broadcast_to(indices, out_shape))
        else:
            shape = [1] * nd
            shape[i] = out_shape[i]
            rng = lax.broadcast_in_dim(lax.iota(np.int32, _shape(arr)[i]), tuple(shape), (i,)) \
                if _shape(arr)[i] == out_shape[i] else lax.full(tuple(shape), 0, np.int32)
            idx.append(broadcast_to(rng, out_shape))
    return getitem(arr, tuple(idx), mode="fill" if mode is None else mode, fill_value=fill_value)


def builtins_max2(a, b):
    return a if a > b else b


def append(arr, values, axis: int | None = None):
    """``arr`` with ``values`` appended along ``axis`` (flattened if None)."""
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


def pad(array, pad_width, mode: str = "constant", *, constant_values=0):
    """Pads with ``constant_values`` (mode ``"constant"``); other modes come with the full numpy
    API."""
    if mode != "constant":
        raise NotImplementedError(f"jnp.pad mode {mode!r} is not supported yet; use 'constant'.")
    array = asarray_weak(array)
    nd = get_aval(array).ndim
    pw = np.broadcast_to(np.asarray(pad_width, dtype=np.int64).reshape(-1, 2)
                         if np.ndim(pad_width) else np.asarray([[pad_width, pad_width]]), (nd, 2))
    if np.any(pw < 0):
        raise ValueError(f"index can't contain negative values, got pad_width={pad_width}")
    from plax.numpy.util import to_dtype
    cv = to_dtype(constant_values, get_aval(array).dtype)
    return lax.pad(array, cv, [(int(lo), int(hi), 0) for lo, hi in pw])


def ndim(a) -> int:
    """Number of dimensions."""
    return len(np.shape(a)) if not hasattr(a, "aval") else get_aval(a).ndim


def shape(a) -> tuple:
    """The shape of an array."""
    return np.shape(a) if not hasattr(a, "aval") else get_aval(a).shape


def size(a, axis: int | None = None) -> int:
    """The number of elements (along ``axis`` if given)."""
    s = shape(a)
    return math.prod(s) if axis is None else s[axis]


del Any
