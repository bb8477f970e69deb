"""Shape manipulation of plax.numpy: reshape, transpose, stacking and splitting, flips,
broadcasting, diagonals and triangles, take and friends."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from plax import dtypes, lax
from plax.array import Array
from plax.core.trace import Tracer, get_aval, state as _trace_state
from plax.transforms.jit import jit_when_traced
from plax.numpy.util import canonicalize_axis, reject_out
from plax.numpy.util import (asarray_weak, broadcast_shapes, broadcast_to, canonicalize_axis_tuple,
                             check_arraylike, converted_first, promote_dtypes)
from plax.sharding_types import with_out_sharding


def _shape(x) -> tuple:
    return get_aval(x).shape


def reshape(a, shape=None, order: str = "C", *, newshape=None, copy=None, out_sharding=None):
    """Gives ``a`` a new shape with the same number of elements (one entry may be -1).

    As in JAX, a NumPy array (or scalar) is reshaped by its own ``reshape`` method: the
    result is a NumPy array (a constant folded on the host under ``jit``).

    Example:
      >>> jnp.arange(6).reshape(2, 3).shape
      (2, 3)
    """
    if shape is None:
        shape = newshape
    check_arraylike("reshape", a)
    if out_sharding is None and isinstance(a, (np.ndarray, np.generic)):
        # as JAX: a NumPy value's own reshape method (a NumPy array, never placed on a mesh)
        return a.reshape(shape, order=order)
    if order != "C":
        raise NotImplementedError(f"reshape(order={order!r}): plax supports only order='C'")
    a = asarray_weak(a)
    shape = _reshape_sizes(shape)
    size = get_aval(a).size
    # TypeError throughout, as JAX's reshape of a JAX array raises
    if shape.count(-1) > 1:
        raise TypeError(f"reshape: can only specify one unknown axis size with a `-1` value, "
                        f"got {tuple(shape)}")
    if any(s < -1 for s in shape):
        raise TypeError(f"reshape: cannot reshape array of shape {_shape(a)} into shape "
                        f"{tuple(shape)}: sizes must be non-negative (or -1 for one unknown size)")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known == 0 or size % known:
            raise TypeError(f"reshape: cannot reshape array of shape {_shape(a)} (size {size}) "
                            f"into shape {tuple(shape)}: the product of the specified sizes "
                            f"({known}) does not evenly divide {size}")
        shape[shape.index(-1)] = size // known
    if math.prod(shape) != size:
        raise TypeError(f"reshape: cannot reshape array of shape {_shape(a)} (size {size}) into "
                        f"shape {tuple(shape)} (size {math.prod(shape)})")
    return lax.reshape(a, tuple(shape), out_sharding=out_sharding)


def _reshape_sizes(shape) -> list:
    """The requested sizes of ``reshape`` as a list of Python ints (-1 allowed)."""
    import operator
    if (isinstance(shape, (tuple, list)) and len(shape) == 1
            and isinstance(shape[0], (np.ndarray, Array)) and np.ndim(shape[0]) == 1):
        shape = shape[0]  # x.reshape(array_of_sizes)
    if isinstance(shape, (np.ndarray, Array)) and np.ndim(shape) == 1:
        seq = np.asarray(shape)
        if not np.issubdtype(seq.dtype, np.integer):
            seq = None
        else:
            seq = seq.tolist()
    elif isinstance(shape, (tuple, list)):
        seq = shape
    elif hasattr(shape, "__index__"):
        seq = (shape,)
    else:
        seq = None
    try:
        if seq is None:
            raise TypeError
        return [operator.index(s) for s in seq]
    except TypeError:
        shown = list(shape) if isinstance(shape, (tuple, list)) else shape  # as JAX shows it
        raise TypeError(f"Shapes must be 1D sequences of concrete values of integer type, got "
                        f"{shown!r}.\nreshape needs concrete sizes: under jit, compute them "
                        f"from shapes (x.size, x.shape), which are static.") from None


def ravel(a, order: str = "C", out_sharding=None):
    """``a`` flattened to one dimension (``out_sharding``: the result's explicit sharding)."""
    if out_sharding is not None:
        return with_out_sharding(lambda: ravel(a, order), out_sharding)
    a = asarray_weak(a)
    return reshape(a, (get_aval(a).size,), order)


def transpose(a, axes: Sequence[int] | None = None):
    """Permutes the axes (reverses them by default)."""
    check_arraylike("transpose", a)
    # converted first, as JAX's (placed under a mesh: typed P(None, ...) where
    # lax.transpose, swapaxes and rollaxis keep a host operand's P())
    a = asarray_weak(converted_first(a)[0])
    nd = get_aval(a).ndim
    if axes is None:
        axes = tuple(range(nd))[::-1]
    axes = tuple(canonicalize_axis(i, nd) for i in axes)
    if sorted(axes) != list(range(nd)):
        # a TypeError, as JAX raises (from lax.transpose)
        raise TypeError(f"transpose: axes {axes} are not a permutation of the dimensions of an "
                        f"array of shape {_shape(a)}")
    return lax.transpose(a, axes)


permute_dims = transpose


def matrix_transpose(x):
    """Swaps the last two axes."""
    x = asarray_weak(converted_first(x)[0])
    nd = get_aval(x).ndim
    if nd < 2:
        raise ValueError(f"matrix_transpose requires at least 2 dimensions, got {nd}")
    return lax.transpose(x, tuple(range(nd - 2)) + (nd - 1, nd - 2))


def moveaxis(a, source, destination):
    """Moves axes ``source`` to positions ``destination``."""
    a = asarray_weak(converted_first(a)[0])
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
    a = asarray_weak(converted_first(a)[0])  # (as JAX's: lax.squeeze keeps a host P())
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
    """Inserts axes of size one at positions ``axis`` of the result.

    Args:
      a: the array.
      axis: an int or a tuple of ints, positions in the result (negative from its end).

    Returns:
      ``a`` reshaped with a size-one axis at each position of ``axis``.

    Raises:
      ValueError: for an axis outside the result's rank, as JAX (the Array API asks for an
        ``IndexError``; see docs/design_decisions.md).

    Example:
      >>> jnp.expand_dims(jnp.ones((2, 3)), -1).shape
      (2, 3, 1)
    """
    a = asarray_weak(a)
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return lax.expand_dims(a, axes)


def _with_ndmin(a, ndmin: int):
    """``a`` with leading size-1 axes up to rank ``ndmin`` (``jnp.array(a, ndmin=...)``)."""
    shape = _shape(a)
    missing = ndmin - len(shape)
    if missing <= 0:
        return a
    return lax.broadcast_in_dim(a, (1,) * missing + shape, tuple(range(missing, ndmin)))


@jit_when_traced
def atleast_1d(*arys):
    """The inputs, each with at least one dimension (a scalar becomes shape ``(1,)``).

    Staged as one ``jit`` call named ``atleast_1d``, as in JAX.

    Args:
      *arys: arrays or scalars.

    Returns:
      One array for one input, else a list of arrays.

    Example:
      >>> jnp.atleast_1d(1.0)
      Array([1.], dtype=float32, weak_type=True)
    """
    check_arraylike("atleast_1d", *arys)
    out = [_with_ndmin(a, 1) for a in map(asarray_weak, arys)]
    return out[0] if len(out) == 1 else out


@jit_when_traced
def atleast_2d(*arys):
    """The inputs, each with at least two dimensions (size-1 axes added in front).

    Staged as one ``jit`` call named ``atleast_2d``, as in JAX.

    Args:
      *arys: arrays or scalars.

    Returns:
      One array for one input, else a list of arrays.

    Example:
      >>> jnp.atleast_2d(jnp.ones(3)).shape
      (1, 3)
    """
    check_arraylike("atleast_2d", *arys)
    out = [_with_ndmin(a, 2) for a in map(asarray_weak, arys)]
    return out[0] if len(out) == 1 else out


#: where atleast_3d puts the new size-1 axes of an operand of rank 0, 1, 2 (NumPy's rule)
_ATLEAST_3D_AXES = {0: (0, 1, 2), 1: (0, 2), 2: (2,)}


@jit_when_traced
def atleast_3d(*arys):
    """The inputs, each with at least three dimensions: ``(N,)`` becomes ``(1, N, 1)`` and
    ``(M, N)`` becomes ``(M, N, 1)``, as NumPy.

    Staged as one ``jit`` call named ``atleast_3d`` (several inputs: one per input inside
    it), as in JAX.

    Args:
      *arys: arrays or scalars.

    Returns:
      One array for one input, else a list of arrays.

    Example:
      >>> jnp.atleast_3d(jnp.ones(3)).shape
      (1, 3, 1)
    """
    check_arraylike("atleast_3d", *arys)
    if len(arys) != 1:
        return [atleast_3d(a) for a in arys]
    a = asarray_weak(arys[0])
    axes = _ATLEAST_3D_AXES.get(get_aval(a).ndim)
    return a if axes is None else lax.expand_dims(a, axes)


def concatenate(arrays, axis: int | None = 0, dtype=None):
    """Joins arrays along an existing axis (flattening them first if ``axis`` is None).

    Example:
      >>> jnp.concatenate([jnp.zeros(2), jnp.ones(1)])
      Array([0., 0., 1.], dtype=float32)
    """
    if isinstance(arrays, (np.ndarray,)) or hasattr(arrays, "aval"):
        return _concatenate_array(arrays, axis, dtype)
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
            raise TypeError(f"Cannot concatenate arrays with different numbers of dimensions: got "
                            f"shapes {[_shape(x) for x in arrays]}")
    axis = canonicalize_axis(axis, nd)
    arrays = promote_dtypes(*arrays)
    if dtype is not None:
        arrays = [lax.convert_element_type(a, dtypes.check_user_dtype(dtype, "concatenate")) for a in arrays]
    for a in arrays:
        s = _shape(a)
        if any(x != y for i, (x, y) in enumerate(zip(s, _shape(arrays[0]))) if i != axis):
            raise TypeError(f"all the input array dimensions except for the concatenation axis "
                            f"must match exactly, got shapes {[_shape(x) for x in arrays]}")
    return lax.concatenate(arrays, axis)


def _concatenate_array(arr, axis, dtype):
    """``concatenate(list(arr), axis)`` for an array ``arr`` as one reshape (its leading axis
    moved beside ``axis`` and merged into it), as JAX stages it."""
    arr = asarray_weak(arr)
    if dtype is not None:
        arr = lax.convert_element_type(arr, dtypes.check_user_dtype(dtype, "concatenate"))
    shape = _shape(arr)
    if not shape or shape[0] == 0:
        raise ValueError("Need at least one array to concatenate.")
    if axis is None:
        return lax.reshape(arr, (math.prod(shape),))
    if len(shape) == 1:
        raise ValueError("Zero-dimensional arrays cannot be concatenated.")
    axis = canonicalize_axis(axis, len(shape) - 1)
    new = shape[1:axis + 1] + (shape[0] * shape[axis + 1],) + shape[axis + 2:]
    return lax.reshape(arr, new, (*range(1, axis + 1), 0, *range(axis + 1, len(shape))))


concat = concatenate


def stack(arrays, axis: int = 0, out=None, dtype=None):
    """Joins arrays of equal shape along a new axis (one ``stack`` equation, as JAX).

    Args:
      arrays: a sequence of arrays of one shape, or an array (stacked along its first axis).
      axis: where the new axis goes in the result.
      out: unsupported (NotImplementedError, as JAX).
      dtype: the result's dtype (default: the operands' promoted dtype).

    Returns:
      The stacked array, of rank one more than the operands'.

    Example:
      >>> jnp.stack([jnp.zeros(2), jnp.ones(2)]).shape
      (2, 2)
    """
    if not len(arrays):
        raise ValueError("Need at least one array to stack.")
    reject_out(out, "stack")
    if hasattr(arrays, "aval") or isinstance(arrays, np.ndarray):
        # an array: its slices, stacked, are a transpose of it (JAX: expand + concatenate)
        arrays = asarray_weak(arrays)
        axis = canonicalize_axis(axis, get_aval(arrays).ndim)
        return concatenate(lax.expand_dims(arrays, (axis + 1,)), axis, dtype)
    check_arraylike("stack", *arrays)
    arrays = [asarray_weak(a) for a in arrays]
    if dtype is not None:
        dtype = dtypes.check_user_dtype(dtype, "stack")
        arrays = [lax.convert_element_type(a, dtype) for a in arrays]
    else:
        arrays = promote_dtypes(*arrays)
    return lax.stack(arrays, axis)


def unstack(x, axis: int = 0) -> tuple:
    """Splits ``x`` along ``axis`` into a tuple of arrays without that axis."""
    check_arraylike("unstack", x)
    return lax.unstack(asarray_weak(x), axis)


def _is_array(tup) -> bool:
    return hasattr(tup, "aval") or isinstance(tup, np.ndarray)


def hstack(tup, dtype=None):
    """Stacks arrays horizontally: along axis 1, or axis 0 for 1-D arrays.

    Args:
      tup: a sequence of arrays, or an array (its slices along axis 0).
      dtype: the result's dtype (default: the promoted dtype).

    Returns:
      The concatenated array.

    Example:
      >>> jnp.hstack([jnp.zeros(2), jnp.ones(1)])
      Array([0., 0., 1.], dtype=float32)
    """
    arrs = _each_made_at_least("hstack", tup, atleast_1d)
    first_ndim = get_aval(arrs).ndim - 1 if _is_array(tup) else get_aval(arrs[0]).ndim
    return concatenate(arrs, 0 if first_ndim == 1 else 1, dtype)


def _each_made_at_least(name: str, tup, atleast):
    """``tup``'s arrays through ``atleast`` (``atleast_2d``, ...); an array stands for its
    slices along axis 0, mapped as one batched array (as JAX stages it)."""
    from plax.transforms.vmap_api import vmap
    if _is_array(tup):
        return vmap(atleast)(asarray_weak(tup))
    check_arraylike(name, *tup)
    return [atleast(a) for a in tup]


def vstack(tup, dtype=None):
    """Stacks arrays vertically: each made at least 2-D, then joined along axis 0.

    Args:
      tup: a sequence of arrays, or an array (its slices along axis 0).
      dtype: the result's dtype (default: the promoted dtype).

    Returns:
      The concatenated array.

    Example:
      >>> jnp.vstack([jnp.zeros(2), jnp.ones(2)]).shape
      (2, 2)
    """
    return concatenate(_each_made_at_least("vstack", tup, atleast_2d), 0, dtype)


row_stack = vstack


def dstack(tup, dtype=None):
    """Stacks arrays along the third axis, each made at least 3-D first.

    Args:
      tup: a sequence of arrays, or an array (its slices along axis 0).
      dtype: the result's dtype (default: the promoted dtype).

    Returns:
      The concatenated array.

    Example:
      >>> jnp.dstack([jnp.zeros(2), jnp.ones(2)]).shape
      (1, 2, 2)
    """
    return concatenate(_each_made_at_least("dstack", tup, atleast_3d), 2, dtype)


def column_stack(tup):
    """Stacks 1-D arrays as the columns of a 2-D array (arrays of rank 2 or more as they are).

    Args:
      tup: a sequence of arrays, or an array (its slices along axis 0).

    Returns:
      The concatenated array, joined along axis 1.

    Example:
      >>> jnp.column_stack([jnp.zeros(2), jnp.ones(2)]).shape
      (2, 2)
    """
    from plax.transforms.vmap_api import vmap
    if _is_array(tup):
        tup = asarray_weak(tup)
        arrs = (vmap(lambda x: atleast_2d(x).T)(tup) if get_aval(tup).ndim < 3 else tup)
    else:
        check_arraylike("column_stack", *tup)
        arrs = [a if get_aval(a).ndim >= 2 else atleast_2d(a).T for a in map(asarray_weak, tup)]
    return concatenate(arrs, 1)


def _split_sizes(op: str, size: int, indices_or_sections) -> list:
    """The pieces' lengths for ``jnp.split``/``array_split`` of an axis of length ``size``, as
    JAX computes them: indices give the differences of ``[0, *indices, size]`` (an index out of
    order or range is a negative size, which ``lax.split`` refuses, where NumPy clamps), and a
    number of sections ``n`` gives ``n`` equal pieces (``array_split``: the first ``size % n``
    one longer). The sizes are NumPy ints, as JAX binds them (its jaxprs print
    ``np.int64(2)``)."""
    import operator
    if isinstance(indices_or_sections, (tuple, list)) or np.ndim(indices_or_sections) > 0:
        try:
            points = [operator.index(i) for i in indices_or_sections]
        except TypeError:
            raise TypeError(f"jnp.{op}: split indices must be integers, got "
                            f"{indices_or_sections!r}") from None
        return [np.int64(b - a) for a, b in zip([0] + points, points + [size])]
    try:
        sections = int(indices_or_sections)  # int(), as JAX (2.5 sections are 2)
    except TypeError:
        raise TypeError(f"jnp.{op}: indices_or_sections must be an integer or a sequence of "
                        f"integers, got {indices_or_sections!r}") from None
    part, rest = divmod(size, sections)  # 0 sections: ZeroDivisionError, as JAX
    if rest and op != "array_split":
        raise ValueError(f"array split does not result in an equal division: rest is {rest}")
    return [np.int64(part + 1)] * rest + [np.int64(part)] * (sections - rest)


def _split(op: str, ary, indices_or_sections, axis: int) -> list:
    check_arraylike(op, ary)
    ary = asarray_weak(ary)
    axis = canonicalize_axis(axis, get_aval(ary).ndim)
    return lax.split(ary, _split_sizes(op, _shape(ary)[axis], indices_or_sections), axis)


def split(ary, indices_or_sections, axis: int = 0) -> list:
    """Splits ``ary`` into equal sections, or at the given indices, along ``axis`` (one
    ``split`` equation, as JAX stages it).

    Args:
      ary: the array to split.
      indices_or_sections: a number of equal sections, or the indices to cut at (in order,
        within the axis: JAX refuses what NumPy would clamp).
      axis: the axis to split along.

    Returns:
      A list of arrays.

    Raises:
      ValueError: the sections are not equal, or an index is out of order or range.

    Example:
      >>> [a.shape for a in jnp.split(jnp.ones(6), [2])]
      [(2,), (4,)]
    """
    return _split("split", ary, indices_or_sections, axis)


def array_split(ary, indices_or_sections, axis: int = 0) -> list:
    """Like :func:`split`, allowing unequal sections (the first ones one longer).

    Example:
      >>> [a.shape for a in jnp.array_split(jnp.ones(5), 2)]
      [(3,), (2,)]
    """
    return _split("array_split", ary, indices_or_sections, axis)


def hsplit(ary, indices_or_sections):
    """Splits horizontally: along axis 1 (axis 0 for 1-D arrays). See :func:`split`.

    Example:
      >>> [a.shape for a in jnp.hsplit(jnp.ones((2, 4)), 2)]
      [(2, 2), (2, 2)]
    """
    return split(ary, indices_or_sections, 1 if get_aval(asarray_weak(ary)).ndim > 1 else 0)


def vsplit(ary, indices_or_sections):
    """Splits vertically: along axis 0. See :func:`split`.

    Example:
      >>> [a.shape for a in jnp.vsplit(jnp.ones((4, 2)), [1])]
      [(1, 2), (3, 2)]
    """
    return split(ary, indices_or_sections, 0)


def dsplit(ary, indices_or_sections):
    """Splits along the third axis. See :func:`split`.

    Example:
      >>> [a.shape for a in jnp.dsplit(jnp.ones((1, 1, 4)), 2)]
      [(1, 1, 2), (1, 1, 2)]
    """
    return split(ary, indices_or_sections, 2)


def broadcast_arrays(*args) -> list:
    """Broadcasts arrays against each other."""
    arrays = [asarray_weak(a) for a in args]
    shape = broadcast_shapes(*[_shape(a) for a in arrays])
    return [broadcast_to(a, shape) for a in arrays]


def tile(A, reps):
    """Repeats ``A`` ``reps`` times along each axis."""
    import operator
    check_arraylike("tile", A)
    A = asarray_weak(A)
    try:
        reps = tuple(iter(reps))
    except TypeError:
        reps = (reps,)
    try:
        reps = tuple(operator.index(r) for r in reps)
    except TypeError:
        raise TypeError(f"tile: reps must be integers (or a sequence of them), got "
                        f"{reps!r}") from None
    if any(r < 0 for r in reps):
        raise ValueError(f"tile: reps must be non-negative, got {reps}")
    shape = _shape(A)
    nd = max(len(shape), len(reps))
    shape = (1,) * (nd - len(shape)) + shape
    reps = (1,) * (nd - len(reps)) + reps
    A = lax.reshape(A, shape)
    big = lax.broadcast_in_dim(A, tuple(x for r, d in zip(reps, shape) for x in (r, d)),
                               tuple(range(1, 2 * nd, 2)))
    return lax.reshape(big, tuple(r * d for r, d in zip(reps, shape)))


def repeat(a, repeats, axis: int | None = None, *, total_repeat_length: int | None = None,
           out_sharding=None):
    """Repeats each element of ``a`` along ``axis``.

    Args:
      a: the array.
      repeats: a count for all elements, or one count per element along ``axis``. It may be
        traced only when ``total_repeat_length`` is given (the result's length).
      axis: the axis to repeat along (default: the flattened array).
      total_repeat_length: the length of the result: extra elements are dropped, missing ones
        repeat the last element.

    Returns:
      The repeated array.

    Example:
      >>> jnp.repeat(jnp.array([1, 2]), 2)
      Array([1, 1, 2, 2], dtype=int32)
    """
    if out_sharding is not None:
        return with_out_sharding(
            lambda: repeat(a, repeats, axis, total_repeat_length=total_repeat_length),
            out_sharding)
    if isinstance(repeats, (int, np.integer)) and not isinstance(repeats, (bool, np.bool_)):
        check_arraylike("repeat", a)
    else:
        check_arraylike("repeat", a, repeats)
    a = asarray_weak(a)
    if axis is None:
        a = ravel(a)
        axis = 0
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    n = _shape(a)[axis]
    concrete = repeats
    if isinstance(repeats, Tracer):
        concrete = repeats.to_concrete_value()
        if concrete is None:
            if total_repeat_length is None:
                from plax import errors
                raise errors.ConcretizationTypeError(
                    repeats, "jnp.repeat with traced repeats needs a static total_repeat_length "
                             "(the length of the result).")
            return _repeat_traced(a, repeats, axis, n, int(total_repeat_length))
    reps = np.asarray(concrete)
    if not np.issubdtype(reps.dtype, np.integer):
        raise TypeError(f"repeats must be integers, got dtype {reps.dtype}")
    if np.any(reps < 0):
        if reps.ndim == 0:  # as JAX (the size of a broadcast)
            raise TypeError(f"repeat: repeats must be non-negative, got {int(reps)}")
        raise ValueError(f"repeats may not contain negative values, got {reps}")
    if reps.ndim == 0 and total_repeat_length is None:
        r = int(reps)
        shape = _shape(a)
        big = lax.broadcast_in_dim(a, shape[:axis + 1] + (r,) + shape[axis + 1:],
                                   tuple(range(axis + 1)) + tuple(range(axis + 2, len(shape) + 1)))
        return lax.reshape(big, shape[:axis] + (n * r,) + shape[axis + 1:])
    reps = np.ravel(reps)
    reps = np.broadcast_to(reps, (n,)) if reps.size == 1 else reps
    if reps.shape != (n,):
        raise ValueError(f"repeats must be a scalar or have length {n} (the size of axis {axis}), "
                         f"got shape {reps.shape}")
    idx = np.repeat(np.arange(n), reps)
    if total_repeat_length is not None:
        total = int(total_repeat_length)
        idx = idx[:total]
        if idx.size < total:
            idx = np.concatenate([idx, np.full(total - idx.size, idx[-1] if idx.size else 0)])
    return take(a, idx.astype(np.int32), axis=axis, mode="clip")


def _repeat_traced(a, repeats, axis, n, total):
    """``repeat`` with traced counts: output position j takes the element whose cumulative
    count first exceeds j."""
    from plax.numpy.reductions import cumsum
    from plax.numpy.searching import searchsorted
    reps = broadcast_to(lax.convert_element_type(repeats, np.int32), (n,))
    ends = cumsum(reps)
    idx = searchsorted(ends, lax.iota(np.int32, total), side="right")
    return take(a, idx, axis=axis, mode="clip")


@jit_when_traced(name="_flip", static_argnames=("axis",))
def flip(m, axis=None):
    """Reverses the order of elements along ``axis`` (all axes by default)."""
    m = asarray_weak(m)
    axes = canonicalize_axis_tuple(axis, get_aval(m).ndim)
    return lax.rev(m, axes)


def fliplr(m):
    """Reverses the order of the columns (axis 1).

    Example:
      >>> jnp.fliplr(jnp.array([[1, 2, 3]]))
      Array([[3, 2, 1]], dtype=int32)
    """
    return flip(m, 1)


def flipud(m):
    """Reverses the order of the rows (axis 0).

    Example:
      >>> jnp.flipud(jnp.array([[1], [2]]))
      Array([[2],
             [1]], dtype=int32)
    """
    return flip(m, 0)


def roll(a, shift, axis=None):
    """Rolls elements along ``axis``; those shifted past the end come back at the start.

    As in JAX, the roll itself is staged as one ``jit`` call named ``_roll_static`` (of the
    flattened array when ``axis`` is None).

    Example:
      >>> jnp.roll(jnp.array([1, 2, 3]), 1)
      Array([3, 1, 2], dtype=int32)
    """
    a = asarray_weak(a)
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), _shape(a))
    # (the common single int shift and axis without NumPy's conversions: eager cost)
    shifts = (shift,) if type(shift) is int else tuple(int(s) for s in np.atleast_1d(shift))
    axes = (axis,) if type(axis) is int else tuple(int(ax) for ax in np.atleast_1d(axis))
    if len(shifts) == 1 and len(axes) > 1:
        shifts *= len(axes)
    return _roll_static(a, shifts, axes)


@jit_when_traced(name="_roll_static", static_argnames=("shift", "axis"))
def _roll_static(a, shift: tuple, axis: tuple):
    for s, ax in zip(shift, axis):
        ax = canonicalize_axis(ax, get_aval(a).ndim)
        n = _shape(a)[ax]
        if n == 0:
            continue
        s %= n
        if s:
            a = lax.concatenate([lax.slice_in_dim(a, n - s, n, 1, ax),
                                 lax.slice_in_dim(a, 0, n - s, 1, ax)], ax)
    return a


def rot90(m, k: int = 1, axes: tuple = (0, 1)):
    """Rotates by 90 degrees ``k`` times in the plane of ``axes``."""
    check_arraylike("rot90", m)
    m = asarray_weak(m)
    nd = get_aval(m).ndim
    if nd < 2:
        raise ValueError(f"rot90 requires an array of at least two dimensions, got shape "
                         f"{_shape(m)}")
    a0, a1 = (canonicalize_axis(a, nd) for a in axes)
    if a0 == a1:
        raise ValueError(f"rot90: axes must be different, got axes={tuple(axes)}")
    k %= 4
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


@jit_when_traced(name="_diag", static_argnames=("k",))
def diag(v, k: int = 0):
    """The ``k``-th diagonal of a 2-D array, or a 2-D array with 1-D ``v`` on diagonal ``k``."""
    check_arraylike("diag", v)
    v = asarray_weak(v)
    shape = _shape(v)
    k = int(k)
    if len(shape) == 1:
        n = shape[0] + abs(k)
        from plax.numpy.creation import eye
        on_diagonal = eye(n, k=k, dtype=np.bool_)
        dt = get_aval(v).dtype
        padded = lax.pad(v, lax.full((), 0, dt), [(0, abs(k), 0)]) if k else v
        # diagonal entry (r, r + k) holds v[r] for k >= 0; entry (c - k, c) holds v[c] for k < 0
        vals = lax.broadcast_in_dim(padded, (n, n), (0,) if k >= 0 else (1,))
        return lax.select(on_diagonal, vals, lax.full((n, n), 0, dt, weak_type=get_aval(v).weak_type))
    if len(shape) == 2:
        return diagonal(v, k)
    raise ValueError("diag input must be 1d or 2d")


@jit_when_traced(static_argnames=("offset", "axis1", "axis2", "dtype"))
def trace(a, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype=None, out=None):
    """Sum along a diagonal (``out``: only None, as in JAX)."""
    reject_out(out, "trace")
    from plax.numpy.reductions import sum as jsum
    return jsum(diagonal(a, offset, axis1, axis2), axis=-1, dtype=dtype)


def _tri_mask(shape, k, lower):
    # staged in JAX's order: the rows' iota shifted by k, then the columns' iota
    shifted = lax.add(lax.broadcasted_iota(np.int32, shape[-2:], 0), lax.full((), k, np.int32))
    cols = lax.broadcasted_iota(np.int32, shape[-2:], 1)
    return lax.ge(shifted, cols) if lower else lax.le(shifted, cols)


@jit_when_traced(static_argnames=("k",))
def tril(m, k: int = 0):
    """Zeros above diagonal ``k`` of the last two axes."""
    m = asarray_weak(m)
    shape = _shape(m)
    if len(shape) < 2:
        raise ValueError("tril requires an array of at least two dimensions")
    mask = lax.broadcast_in_dim(_tri_mask(shape, k, True), shape, (len(shape) - 2, len(shape) - 1))
    return lax.select(mask, m, lax.full(shape, 0, get_aval(m).dtype))


@jit_when_traced(static_argnames=("k",))
def triu(m, k: int = 0):
    """Zeros below diagonal ``k`` of the last two axes."""
    m = asarray_weak(m)
    shape = _shape(m)
    if len(shape) < 2:
        raise ValueError("triu requires an array of at least two dimensions")
    mask = lax.broadcast_in_dim(_tri_mask(shape, k - 1, True), shape,
                                (len(shape) - 2, len(shape) - 1))
    return lax.select(mask, lax.full(shape, 0, get_aval(m).dtype), m)


@jit_when_traced(name="_take", static_argnames=("axis", "out", "mode", "unique_indices",
                                                  "indices_are_sorted", "fill_value"))
def take(a, indices, axis: int | None = None, out=None, mode=None, unique_indices: bool = False,
         indices_are_sorted: bool = False, fill_value=None):
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flattened array if None).
    Out-of-bounds indices give ``fill_value`` (NaN for floats) unless ``mode="clip"``."""
    reject_out(out, "take")
    check_arraylike("take", a, indices)
    a = asarray_weak(a)
    if axis is None:
        a = ravel(a)
        axis = 0
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    indices = asarray_weak(indices)
    if not dtypes.is_integer(get_aval(indices).dtype):
        raise ValueError(f"take: indices must have an integer type, got dtype "
                         f"{get_aval(indices).dtype}")
    mode = _take_mode(mode)
    n = _shape(a)[axis]
    if n == 0 and math.prod(get_aval(indices).shape):
        raise IndexError("Cannot do a non-empty jnp.take() from an empty axis.")  # (JAX's words)
    if mode == "wrap":
        from plax.numpy.ufuncs import remainder
        indices = remainder(indices, lax.full((), max(n, 1), get_aval(indices).dtype))
        mode = "clip"
    elif mode == "clip":
        # as NumPy's take (and JAX's): negative indices clip to 0, they do not count from the end
        from plax.numpy.ufuncs import clip
        indices = clip(indices, 0, max(n - 1, 0))
    from plax.numpy.indexing import getitem
    idx = (slice(None),) * axis + (indices,)
    return getitem(a, idx, mode=mode, fill_value=fill_value)


def _take_mode(mode):
    """JAX's modes of take: out-of-bounds indices 'fill' (the default: NaN for inexact types,
    the most negative value for signed, the largest for unsigned), 'clip' or 'wrap'."""
    if mode is None:
        return "fill"
    if mode == "raise":
        raise NotImplementedError("The 'raise' mode to jnp.take is not supported: indices are "
                                  "not checked at run time. Use mode='fill', 'clip' or 'wrap'.")
    if mode not in ("fill", "clip", "wrap"):
        raise ValueError(f"Invalid mode {mode!r} for jnp.take: expected 'fill', 'clip' or "
                         "'wrap'.")
    return mode


@jit_when_traced(static_argnames=("axis", "mode", "fill_value", "wrap_negative_indices"))
def take_along_axis(arr, indices, axis: int | None = -1, mode=None, fill_value=None, *,
                    wrap_negative_indices: bool | None = None):
    """``arr`` reindexed along ``axis`` by ``indices`` (broadcast against ``arr``'s other axes).

    Args:
      arr: the array.
      indices: integer array of ``arr``'s rank (1-D if ``axis`` is None, which flattens ``arr``).
      axis: the axis the indices index.
      mode: a gather mode: ``"fill"`` (the default: out-of-bounds indices read ``fill_value``,
        NaN for inexact types), ``"clip"`` or ``"promise_in_bounds"``.
      wrap_negative_indices: whether negative indices count from the end. By default they do,
        except in ``"promise_in_bounds"`` mode (as JAX).

    Raises:
      TypeError: for non-integer indices.
      ValueError: for indices of another rank, shapes that do not broadcast, or an unknown mode.
    """
    check_arraylike("take_along_axis", arr, indices)
    a = asarray_weak(arr)
    indices = asarray_weak(indices)
    idt = get_aval(indices).dtype
    if not dtypes.is_integer(idt):
        raise TypeError(f"take_along_axis indices must be of integer type, got {idt}")
    if axis is None:
        if get_aval(indices).ndim != 1:
            raise ValueError(f"take_along_axis indices must be 1D if axis=None, got shape "
                             f"{_shape(indices)}")
        a = ravel(a)
        axis = 0
    nd = get_aval(a).ndim
    if get_aval(indices).ndim != nd:
        raise ValueError(f"indices and arr must have the same number of dimensions; "
                         f"{get_aval(indices).ndim} vs. {nd}")
    axis = canonicalize_axis(axis, nd)
    from plax.lax.slicing import GatherDimensionNumbers, GatherScatterMode
    gmode = GatherScatterMode.from_any("fill" if mode is None else mode)
    if wrap_negative_indices is None:
        wrap_negative_indices = mode != "promise_in_bounds"
    ashape, ishape = _shape(a), _shape(indices)
    out_shape = broadcast_shapes(ishape, ashape[:axis] + (1,) + ashape[axis + 1:])
    n = ashape[axis]
    if n == 0:
        return lax.full(out_shape, 0, get_aval(a).dtype)
    if idt.itemsize < 4:
        indices = lax.convert_element_type(indices, np.int32)
    if wrap_negative_indices and idt.kind == "i":
        it = get_aval(indices).dtype
        indices = lax.select(lax.lt(indices, lax.full((), 0, it)),
                             lax.add(indices, lax.full((), n, it)), indices)
    indices = broadcast_to(indices, out_shape)
    # arr's size-1 axes that the indices broadcast over are squeezed away; its other axes
    # (besides ``axis``) pair one-to-one with the indices' axes as gather batching axes
    squeezed = [i for i in range(nd) if i != axis and ashape[i] == 1 and out_shape[i] != 1]
    kept = [i for i in range(nd) if i not in squeezed]
    operand = lax.squeeze(a, squeezed) if squeezed else a
    new_axis = kept.index(axis)
    batch = [i for i in kept if i != axis]
    dnums = GatherDimensionNumbers(
        offset_dims=(), collapsed_slice_dims=(new_axis,), start_index_map=(new_axis,),
        operand_batching_dims=tuple(kept.index(i) for i in batch),
        start_indices_batching_dims=tuple(batch))
    slice_sizes = tuple(1 if ashape[i] else 0 for i in kept)
    return lax.gather(operand, lax.expand_dims(indices, (nd,)), dnums, slice_sizes, mode=gmode,
                      fill_value=fill_value)


def append(arr, values, axis: int | None = None):
    """``arr`` with ``values`` appended along ``axis`` (flattened if None)."""
    if axis is None:
        return concatenate([ravel(arr), ravel(values)], 0)
    return concatenate([arr, values], axis)


_INDEX_PAD_MODES = ("edge", "reflect", "symmetric", "wrap")
_PAD_MODES = frozenset(("constant", "empty") + _INDEX_PAD_MODES)


def pad(array, pad_width, mode: str = "constant", *, constant_values=0, **kwargs):
    """Pads an array along each axis.

    Args:
      array: the array.
      pad_width: ``n``, ``(before, after)`` or one ``(before, after)`` pair per axis.
      mode: ``"constant"`` (the default, with ``constant_values``), ``"empty"`` (zeros),
        ``"edge"``, ``"reflect"``, ``"symmetric"`` or ``"wrap"`` (as in NumPy).
      constant_values: the value of the padding in ``"constant"`` mode: a scalar, or
        ``(before, after)`` values (for every axis, or one pair per axis).

    Returns:
      The padded array.

    Example:
      >>> jnp.pad(jnp.array([1, 2]), (1, 2))
      Array([0, 1, 2, 0, 0], dtype=int32)
    """
    check_arraylike("pad", array)
    array = asarray_weak(array)
    pw = _pad_widths(pad_width, get_aval(array).ndim)
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"jnp.pad mode {mode!r} is not supported; use one of "
                                  f"{('constant', 'empty') + _INDEX_PAD_MODES}.")
    if kwargs.get("reflect_type", "even") != "even":
        raise NotImplementedError("jnp.pad: only reflect_type='even' is supported")
    if mode == "constant" and np.ndim(constant_values) != 0:
        return _pad_per_axis(array, pw, constant_values)
    # as JAX: one jit call named _pad, the widths static (NumPy integers when staged, as
    # JAX's padding_config holds them; Python ints eagerly, cheaper to dispatch) and the
    # padding value its second operand
    widths = tuple((np.int64(lo), np.int64(hi)) for lo, hi in pw) if _trace_state.depth \
        else tuple(pw)
    return _pad(array, 0 if mode == "empty" else constant_values, widths, mode)


@jit_when_traced(name="_pad", static_argnames=("pad_width", "mode"))
def _pad(array, constant_values, pad_width: tuple, mode: str):
    if mode in ("constant", "empty"):
        from plax.numpy.util import to_dtype
        aval = get_aval(array)
        cv = to_dtype(constant_values, aval.dtype, aval.weak_type)
        return lax.pad(array, cv, [(lo, hi, 0) for lo, hi in pad_width])
    for axis, (lo, hi) in enumerate(pad_width):
        if lo or hi:
            n = _shape(array)[axis]
            if n == 0:
                raise ValueError(f"can't extend empty axis {axis} using modes other than "
                                 "'constant' or 'empty'")
            # the padded axis reads source positions that NumPy's own pad gives for an iota
            src = np.pad(np.arange(n), (int(lo), int(hi)), mode=mode).astype(np.int32)
            array = take(array, src, axis=axis, mode="clip")
    return array


def _pad_per_axis(array, pw: list, constant_values):
    """``constant`` mode with a ``(before, after)`` value for every axis, or one pair per
    axis: one ``pad`` per side, axis by axis, as NumPy fills the corners (later axes'
    values win)."""
    if isinstance(constant_values, Tracer):
        raise NotImplementedError("jnp.pad: traced constant_values must be a scalar")
    from plax.numpy.util import to_dtype
    aval = get_aval(array)
    nd = aval.ndim
    host = np.asarray(constant_values)
    try:
        per_axis = np.broadcast_to(host, (nd, 2))
    except ValueError:
        raise ValueError(f"jnp.pad: constant_values of shape {host.shape} cannot be "
                         f"broadcast to one (before, after) pair for each of the "
                         f"array's {nd} axes") from None
    for axis, ((lo, hi), (before, after)) in enumerate(zip(pw, per_axis)):
        for width, value, side in ((lo, before, 0), (hi, after, 1)):
            if width:
                cfg = [(0, 0, 0)] * nd
                cfg[axis] = (width, 0, 0) if side == 0 else (0, width, 0)
                array = lax.pad(array, to_dtype(value[()], aval.dtype, aval.weak_type), cfg)
    return array


def _pad_widths(pad_width, nd: int) -> list[tuple[int, int]]:
    """``pad_width`` as one non-negative ``(before, after)`` pair per axis."""
    try:
        pw = np.asarray(pad_width)
        if not np.issubdtype(pw.dtype, np.integer):
            raise TypeError(f"jnp.pad: pad_width must be integers, got {pad_width!r}")
        pw = np.broadcast_to(pw.reshape(-1, 2) if pw.ndim else np.array([[pw, pw]]), (nd, 2))
    except ValueError:
        raise ValueError(f"jnp.pad: pad_width {pad_width!r} cannot be broadcast to one "
                         f"(before, after) pair for each of the array's {nd} axes") from None
    if np.any(pw < 0):
        raise ValueError(f"jnp.pad: index can't contain negative values, got pad_width="
                         f"{pad_width!r}")
    return [(int(lo), int(hi)) for lo, hi in pw]


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

