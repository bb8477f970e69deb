"""Array manipulation beyond reshaping: delete/insert/resize/rollaxis/block/trim_zeros,
selection (choose, compress, extract, select, piecewise), functional updates (place, put,
put_along_axis, fill_diagonal), partition/argpartition/lexsort, diagflat, vander, astype and
apply_along_axis/apply_over_axes.

JAX arrays are immutable: the NumPy functions that modify in place (place, put,
put_along_axis, fill_diagonal) need ``inplace=False`` and return the updated array.
"""
from __future__ import annotations

import operator
from typing import Callable, Sequence

import numpy as np

from plax import dtypes, errors, lax
from plax.core.trace import Tracer, get_aval
from plax.sharding import mesh_maybe_set as _mesh_maybe_set
from plax.numpy.util import (asarray_weak, canonicalize_axis, check_arraylike, converted_first,
                             promote_dtypes, reject_out, to_dtype)


def _idx() -> np.dtype:
    return dtypes.default_int_dtype()


def _iconst(v: int, dt=None):
    return lax.full((), v, _idx() if dt is None else dt)


def _is_abstract(x) -> bool:
    return isinstance(x, Tracer) and x.to_concrete_value() is None


def _ravel(x):
    return lax.reshape(x, (int(np.prod(get_aval(x).shape, dtype=np.int64)),))


def _no_inplace(name: str, inplace: bool) -> None:
    if inplace:
        raise ValueError(f"jax.numpy.{name} cannot modify arrays in-place, because JAX arrays "
                         f"are immutable. Pass inplace=False to instead return an updated array.")


def _take(a, idx, axis):
    from plax.numpy.shape_ops import take
    return take(a, idx, axis=axis, mode="clip")


# --- shape changes -----------------------------------------------------------------------

def delete(arr, obj, axis: int | None = None, *, assume_unique_indices: bool = False):
    """``arr`` without the entries at ``obj`` along ``axis`` (flattened if None).

    Args:
      arr: the array.
      obj: an index, a slice, or an array of indices (negative ones count from the end).
        Must be concrete unless ``assume_unique_indices=True``.
      axis: the axis to delete along.
      assume_unique_indices: promise that ``obj`` holds unique in-range indices; then it may
        be traced (under jit).

    Returns:
      The shorter array.

    Example:
      >>> jnp.delete(jnp.arange(5), jnp.array([0, -1]))
      Array([1, 2, 3], dtype=int32)
    """
    check_arraylike("delete", arr)
    a = asarray_weak(arr)
    if axis is None:
        a, axis = _ravel(a), 0
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    n = get_aval(a).shape[axis]
    if isinstance(obj, slice):
        drop = np.arange(n)[obj]
    else:
        obj_arr = asarray_weak(obj)
        if assume_unique_indices:
            return _delete_unique(a, obj_arr, axis, n)
        if _is_abstract(obj_arr):
            raise errors.ConcretizationTypeError(
                obj_arr, "'obj' array argument of jnp.delete(): the indices must be concrete, "
                         "or pass assume_unique_indices=True.")
        # the deleted set fixes the output shape: it is static logic on concrete indices
        host = np.asarray(obj_arr)
        if host.dtype == np.bool_:
            raise ValueError("jnp.delete(arr, obj): obj must be an integer array or slice, not "
                             "a boolean mask")
        if host.dtype.kind not in "iu":
            raise ValueError("jnp.delete(arr, obj): obj must contain integer indices")
        if host.size and (host.max() >= n or host.min() < -n):
            raise IndexError(f"index out of bounds for axis {axis} with size {n}")
        drop = np.unique(np.where(host < 0, host + n, host))
    keep = np.setdiff1d(np.arange(n), drop)
    return _take(a, asarray_weak(keep.astype(np.int32)), axis)


def _delete_unique(a, obj, axis: int, n: int):
    """delete with traced unique indices: kept entry j comes from j + #{i: s_i - i <= j}, with
    s the sorted indices (s_i - i kept entries precede the i-th deleted one)."""
    obj = _ravel(obj)
    k = get_aval(obj).shape[0]
    dt = np.int32
    obj = lax.convert_element_type(obj, dt)
    obj = lax.select(lax.lt(obj, lax.full((), 0, dt)), lax.add(obj, lax.full((k,), n, dt)), obj)
    s = lax.sort(obj, 0)
    thresholds = lax.sub(s, lax.iota(dt, k))
    j = lax.iota(dt, n - k)
    le = lax.le(lax.broadcast_in_dim(thresholds, (n - k, k), (1,)),
                lax.broadcast_in_dim(j, (n - k, k), (0,)))
    src = lax.add(j, lax.reduce_sum(lax.convert_element_type(le, dt), (1,)))
    return _take(a, src, axis)


def insert(arr, obj, values, axis: int | None = None):
    """``arr`` with ``values`` inserted before the indices ``obj`` along ``axis``.

    Args:
      arr: the array (flattened if ``axis`` is None).
      obj: an index (a block of values is inserted there; may be traced), a slice, or an
        array of indices (one value inserted before each; may be traced).
      values: the values, cast to ``arr``'s dtype and broadcast as in NumPy.
      axis: the axis to insert along.

    Returns:
      The longer array.

    Example:
      >>> jnp.insert(jnp.arange(4), 2, jnp.array([7, 8]))
      Array([0, 1, 7, 8, 2, 3], dtype=int32)
    """
    check_arraylike("insert", arr, values)
    if not isinstance(obj, slice):
        check_arraylike("insert", obj)
    a = asarray_weak(arr)
    if axis is None:
        a, axis = _ravel(a), 0
    nd = get_aval(a).ndim
    axis = canonicalize_axis(axis, nd)
    n = get_aval(a).shape[axis]
    dt = get_aval(a).dtype
    vals = to_dtype(asarray_weak(values), dt)
    if isinstance(obj, slice):
        obj = asarray_weak(np.arange(n + 1)[obj].astype(np.int32))
    obj = asarray_weak(obj)
    if not dtypes.issubdtype(get_aval(obj).dtype, np.integer):
        raise ValueError("jnp.insert(): index array must be integer typed")
    vshape = get_aval(vals).shape
    # NumPy's broadcasting rules for values: ndmin=arr.ndim, then for a scalar index the
    # leading axis of values becomes the inserted block along ``axis``
    vals = lax.reshape(vals, (1,) * (nd - len(vshape)) + vshape) if len(vshape) < nd else vals
    if get_aval(obj).ndim == 0 or get_aval(obj).size == 1:
        if get_aval(obj).ndim == 0:
            from plax.numpy.shape_ops import moveaxis
            vals = moveaxis(vals, 0, axis)
        k = get_aval(vals).shape[axis]
        target = list(get_aval(a).shape)
        target[axis] = k
        vals = _broadcast(vals, tuple(target))
        idx = lax.convert_element_type(lax.reshape(obj, ()), np.int32)
        idx = _normalize_index(idx, n)
        j = lax.iota(np.int32, n + k)
        src = lax.select(lax.lt(j, idx), j,
                         lax.select(lax.lt(j, lax.add(idx, lax.full((), k, np.int32))),
                                    lax.add(lax.sub(j, idx), lax.full((), n, np.int32)),
                                    lax.sub(j, lax.full((), k, np.int32))))
    else:
        ind = lax.convert_element_type(_ravel(obj), np.int32)
        k = get_aval(ind).shape[0]
        target = list(get_aval(a).shape)
        target[axis] = k
        vals = _broadcast(vals, tuple(target))
        ind = _normalize_index(ind, n)
        order = lax.sort([ind, lax.iota(np.int32, k)], 0, is_stable=True, num_keys=1)
        s, perm = order
        value_pos = lax.add(s, lax.iota(np.int32, k))
        m = lax.iota(np.int32, n)
        # arr entry m moves right by the number of insertions at or before it
        before = lax.le(lax.broadcast_in_dim(s, (n, k), (1,)), lax.broadcast_in_dim(m, (n, k), (0,)))
        arr_pos = lax.add(m, lax.reduce_sum(lax.convert_element_type(before, np.int32), (1,)))
        from plax.numpy.creation import zeros
        src = zeros((n + k,), np.int32).at[arr_pos].set(m, unique_indices=True)
        src = src.at[value_pos].set(lax.add(perm, lax.full((k,), n, np.int32)),
                                    unique_indices=True)
    from plax.numpy.shape_ops import concatenate
    return _take(concatenate([a, vals], axis), src, axis)


def _normalize_index(i, n: int):
    """An insertion point among ``n`` entries: negative ones count from the end (``-1`` is
    before the last entry, as NumPy); the rest is clipped into ``[0, n]``."""
    zero = lax.full((), 0, np.int32)
    i = lax.select(lax.lt(i, zero), lax.add(i, lax.full(get_aval(i).shape, n, np.int32)), i)
    return lax.clamp(zero, i, lax.full((), n, np.int32))


def _broadcast(x, shape):
    from plax.numpy.util import broadcast_to
    return broadcast_to(x, shape)


def resize(a, new_shape):
    """``a`` repeated (flattened, cyclically) to fill ``new_shape``.

    Example:
      >>> jnp.resize(jnp.arange(3), (2, 4))
      Array([[0, 1, 2, 0],
             [1, 2, 0, 1]], dtype=int32)
    """
    check_arraylike("resize", a)
    a = asarray_weak(a)
    shape = (operator.index(new_shape),) if not isinstance(new_shape, (tuple, list)) else \
        tuple(operator.index(d) for d in new_shape)
    if any(d < 0 for d in shape):
        raise ValueError("all elements of `new_shape` must be non-negative")
    flat = _ravel(a)
    n = get_aval(flat).shape[0]
    total = int(np.prod(shape, dtype=np.int64))
    if n == 0:
        return lax.full(shape, 0, get_aval(a).dtype)
    reps = -(-total // n)
    from plax.numpy.shape_ops import tile
    return lax.reshape(lax.slice(tile(flat, reps), (0,), (total,)), shape)


def rollaxis(a, axis: int, start: int = 0):
    """``a`` with ``axis`` moved to just before position ``start`` (NumPy's older moveaxis).

    Example:
      >>> jnp.rollaxis(jnp.zeros((2, 3, 4)), 2).shape
      (4, 2, 3)
    """
    check_arraylike("rollaxis", a)
    a = asarray_weak(a)
    nd = get_aval(a).ndim
    axis = canonicalize_axis(axis, nd)
    if not -nd <= start <= nd:
        raise ValueError(f"start={start} must satisfy {-nd} <= start <= {nd}")
    start = start + nd if start < 0 else start
    if axis < start:
        start -= 1
    if axis == start:
        return a
    from plax.numpy.shape_ops import moveaxis
    return moveaxis(a, axis, start)


def block(arrays):
    """Assembles an array from nested lists of blocks (the innermost lists along the last
    axis), as ``numpy.block``.

    Example:
      >>> jnp.block([[jnp.ones((1, 2)), jnp.zeros((1, 1))]]).shape
      (1, 3)
    """
    from plax.numpy.shape_ops import concatenate
    if isinstance(arrays, tuple):
        raise TypeError("jax.numpy.block does not allow tuples, got tuple; use lists")
    depth, max_nd = _block_depth(arrays)
    ndim = max(depth, max_nd)

    def build(x, level):
        if isinstance(x, list):
            if not x:
                raise ValueError("jax.numpy.block does not allow empty list arguments")
            parts = [build(e, level + 1) for e in x]
            return concatenate(parts, axis=level - depth)
        x = asarray_weak(x)
        nd = get_aval(x).ndim
        return lax.reshape(x, (1,) * (ndim - nd) + get_aval(x).shape) if nd < ndim else x

    return build(arrays, 0)


def _block_depth(x, level: int = 0) -> tuple[int, int]:
    """(nesting depth of lists, largest rank of a block); inconsistent depths raise."""
    if isinstance(x, tuple):
        raise TypeError("jax.numpy.block does not allow tuples, got tuple; use lists")
    if isinstance(x, list):
        if not x:
            return level + 1, 0
        results = [_block_depth(e, level + 1) for e in x]
        depths = {r[0] for r in results}
        if len(depths) != 1:
            raise ValueError("List depths are mismatched in jax.numpy.block")
        return depths.pop(), max(r[1] for r in results)
    check_arraylike("block", x)
    return level, get_aval(asarray_weak(x)).ndim


def trim_zeros(filt, trim: str = "fb", axis=None):
    """``filt`` without leading (``"f"``) and/or trailing (``"b"``) zeros.

    The result's length depends on the values, so ``filt`` must be concrete (not under jit).

    Args:
      filt: the array.
      trim: ``"f"``, ``"b"`` or ``"fb"``.
      axis: the axes to trim (default: all); along each, slices that are all zero are trimmed.

    Example:
      >>> jnp.trim_zeros(jnp.array([0, 0, 1, 0, 2, 0]))
      Array([1, 0, 2], dtype=int32)
    """
    check_arraylike("trim_zeros", filt)
    a = asarray_weak(filt)
    if _is_abstract(a):
        raise errors.ConcretizationTypeError(
            a, "Error arose in the `filt` argument of trim_zeros(): the result's shape depends "
               "on its values.")
    trim = trim.lower()
    if not set(trim) <= {"f", "b"} or not trim:
        raise ValueError(f"unexpected character(s) in `trim`: {trim!r}")
    nd = get_aval(a).ndim
    if nd == 0:
        raise ValueError("trim_zeros requires an array of at least one dimension")
    axes = range(nd) if axis is None else [canonicalize_axis(ax, nd) for ax in
                                           ((axis,) if isinstance(axis, int) else axis)]
    nz = lax.ne(a, lax.full((), 0, get_aval(a).dtype))
    starts, stops = [0] * nd, list(get_aval(a).shape)
    for ax in axes:
        others = tuple(i for i in range(nd) if i != ax)
        row = np.asarray(lax.reduce_or(nz, others) if others else nz)  # concrete, checked above
        hits = np.flatnonzero(row)
        if hits.size == 0:
            starts[ax] = stops[ax] = 0
            continue
        if "f" in trim:
            starts[ax] = int(hits[0])
        if "b" in trim:
            stops[ax] = int(hits[-1]) + 1
    return lax.slice(a, tuple(starts), tuple(stops))


# --- selection ---------------------------------------------------------------------------

def choose(a, choices, out=None, mode: str = "raise"):
    """For each element of the index array ``a``, the element of ``choices[a]``.

    Args:
      a: integer indices into ``choices`` (broadcast with each choice).
      choices: a sequence of arrays (or an array whose first axis enumerates them).
      out: not supported (must be None).
      mode: ``"raise"`` (indices checked, so ``a`` must be concrete), ``"wrap"`` or ``"clip"``.

    Returns:
      The broadcast result.

    Example:
      >>> jnp.choose(jnp.array([0, 1, 0]), [jnp.array([1, 2, 3]), jnp.array([4, 5, 6])])
      Array([1, 5, 3], dtype=int32)
    """
    reject_out(out, "choose")
    check_arraylike("choose", a)
    a = asarray_weak(a)
    if not dtypes.issubdtype(get_aval(a).dtype, np.integer):
        raise TypeError("choose: a must have an integer dtype")
    if hasattr(choices, "aval") or isinstance(choices, np.ndarray):
        choices = [choices[i] for i in range(get_aval(asarray_weak(choices)).shape[0])]
    choices = list(choices)
    check_arraylike("choose", *choices)
    k = len(choices)
    if mode == "raise":
        if _is_abstract(a):
            raise errors.ConcretizationTypeError(
                a, "The error occurred because jnp.choose was jit-compiled with mode='raise'. "
                   "Use mode='wrap' or mode='clip' instead.")
        host = np.asarray(a)  # a bounds check of concrete indices
        if host.size and (host.min() < 0 or host.max() >= k):
            raise ValueError("invalid entry in choice array")
    elif mode == "wrap":
        from plax.numpy.ufuncs import remainder
        a = remainder(a, lax.full((), k, get_aval(a).dtype))
    elif mode == "clip":
        a = lax.clamp(lax.full((), 0, get_aval(a).dtype), a, lax.full((), k - 1, get_aval(a).dtype))
    else:
        raise ValueError(f"invalid mode {mode!r}: expected 'raise', 'wrap' or 'clip'")
    from plax.numpy.shape_ops import broadcast_arrays
    parts = broadcast_arrays(a, *promote_dtypes(*[asarray_weak(c) for c in choices]))
    return lax.select_n(lax.convert_element_type(parts[0], np.int32), *parts[1:])


def compress(condition, a, axis: int | None = None, *, size: int | None = None,
             fill_value=0, out=None):
    """The slices of ``a`` along ``axis`` where ``condition`` is True.

    Args:
      condition: 1-D boolean array (shorter ones are padded with False; extra entries must
        be False).
      a: the array (flattened if ``axis`` is None).
      axis: the axis to select along.
      size: the static number of selected slices, required under jit; missing ones are
        ``fill_value``.
      fill_value: see ``size``.
      out: not supported.

    Example:
      >>> jnp.compress(jnp.array([True, False, True]), jnp.arange(3))
      Array([0, 2], dtype=int32)
    """
    reject_out(out, "compress")
    check_arraylike("compress", condition, a)
    cond = asarray_weak(condition)
    arr = asarray_weak(a)
    if get_aval(cond).ndim != 1:
        raise ValueError("condition must be a 1D array")
    if axis is None:
        arr, axis = _ravel(arr), 0
    axis = canonicalize_axis(axis, get_aval(arr).ndim)
    n = get_aval(arr).shape[axis]
    cond = lax.ne(cond, lax.full((), 0, get_aval(cond).dtype))
    m = get_aval(cond).shape[0]
    if m > n:
        extra = lax.slice(cond, (n,), (m,))
        if not _is_abstract(extra) and bool(np.asarray(lax.reduce_or(extra, (0,)))):
            raise ValueError("condition contains entries that are out of bounds")
        cond = lax.slice(cond, (0,), (n,))
    elif m < n:
        cond = lax.pad(cond, lax.full((), False, np.bool_), [(0, n - m, 0)])
    from plax.numpy.searching import nonzero
    if size is None:
        if _is_abstract(cond):
            raise errors.ConcretizationTypeError(
                cond, "The error arose in jnp.compress(): its output shape depends on the "
                      "condition. Pass a static `size=` argument to use it under jit or vmap.")
        (idx,) = nonzero(cond)
        return _take(arr, idx, axis)
    (idx,) = nonzero(cond, size=size, fill_value=n)
    from plax.numpy.shape_ops import take
    return take(arr, idx, axis=axis, mode="fill", fill_value=fill_value)


def extract(condition, arr, *, size: int | None = None, fill_value=0):
    """The elements of ``arr`` where ``condition`` is true, flattened.

    Args:
      condition: an array of ``arr``'s size (non-zero means selected).
      arr: the array.
      size: the static number of results, required under jit (padded with ``fill_value``).
      fill_value: see ``size``.

    Example:
      >>> jnp.extract(jnp.array([1, 0, 1]), jnp.array([4, 5, 6]))
      Array([4, 6], dtype=int32)
    """
    check_arraylike("extract", condition, arr)
    return compress(_ravel(asarray_weak(condition)), _ravel(asarray_weak(arr)), size=size,
                    fill_value=fill_value)


def select(condlist: Sequence, choicelist: Sequence, default=0):
    """The element of the first choice whose condition holds, else ``default``.

    Args:
      condlist: boolean arrays.
      choicelist: arrays, one per condition.
      default: the value where no condition holds.

    Example:
      >>> jnp.select([jnp.array([True, False]), jnp.array([True, True])],
      ...            [jnp.array([1, 2]), jnp.array([3, 4])])
      Array([1, 4], dtype=int32)
    """
    if len(condlist) != len(choicelist):
        raise ValueError(f"condlist must have length equal to choicelist ({len(choicelist)} vs "
                         f"{len(condlist)})")
    if len(condlist) == 0:
        raise ValueError("condlist must be non-empty")
    check_arraylike("select", *condlist, *choicelist, default)
    from plax.numpy.ufuncs import where
    out = default
    # the first true condition wins, so later ones are applied first
    for cond, choice in zip(reversed(condlist), reversed(choicelist)):
        cond = asarray_weak(cond)
        if get_aval(cond).dtype != np.bool_:
            raise TypeError(f"condlist arrays must be of boolean type, got "
                            f"{get_aval(cond).dtype}")
        out = where(cond, choice, out)
    return asarray_weak(out)


def piecewise(x, condlist, funclist: list, *args, **kw):
    """``funclist[i](x)`` where ``condlist[i]`` holds (later conditions win); an extra last
    function (or value) applies where no condition holds, else 0.

    Every function runs on the whole of ``x`` (as under JAX), so they must be jittable.

    Example:
      >>> jnp.piecewise(jnp.array([-1.0, 2.0]), [jnp.array([True, False])], [lambda x: -x, 0.5])
      Array([1. , 0.5], dtype=float32)
    """
    check_arraylike("piecewise", x)
    x = asarray_weak(x)
    if hasattr(condlist, "aval") or isinstance(condlist, np.ndarray):
        cl = asarray_weak(condlist)
        condlist = [cl] if get_aval(cl).ndim == get_aval(x).ndim and get_aval(cl).ndim < 2 \
            else [cl[i] for i in range(get_aval(cl).shape[0])]
    condlist = [asarray_weak(c) for c in condlist]
    nc, nf = len(condlist), len(funclist)
    if nf == nc + 1:
        default, funclist = funclist[-1], funclist[:-1]
    elif nf == nc:
        default = 0
    else:
        raise ValueError(f"with {nc} condition(s), either {nc} or {nc + 1} functions are "
                         f"expected; got {nf}")
    dt = get_aval(x).dtype

    def value(f):
        v = f(x, *args, **kw) if callable(f) else f
        return _broadcast(to_dtype(asarray_weak(v), dt), get_aval(x).shape)

    out = value(default)
    for cond, f in zip(condlist, funclist):
        out = lax.select(_broadcast(lax.convert_element_type(cond, np.bool_), get_aval(x).shape),
                         value(f), out)
    return out


# --- functional updates ------------------------------------------------------------------

def place(arr, mask, vals, *, inplace: bool = True):
    """``arr`` with the entries where ``mask`` is true replaced by ``vals``, used cyclically
    (``inplace=False`` is required).

    Example:
      >>> jnp.place(jnp.zeros(4), jnp.array([1, 0, 1, 1]), jnp.array([5., 6.]), inplace=False)
      Array([5., 0., 6., 5.], dtype=float32)
    """
    _no_inplace("place", inplace)
    check_arraylike("place", arr, mask, vals)
    a = asarray_weak(arr)
    m = lax.ne(asarray_weak(mask), lax.full((), 0, get_aval(asarray_weak(mask)).dtype))
    if get_aval(m).shape != get_aval(a).shape:
        m = _broadcast(m, get_aval(a).shape)
    v = _ravel(to_dtype(asarray_weak(vals), get_aval(a).dtype))
    k = get_aval(v).shape[0]
    if k == 0:
        return a
    flat_m = _ravel(m)
    pos = lax.sub(lax.cumsum(lax.convert_element_type(flat_m, np.int32), 0),
                  lax.full((), 1, np.int32))
    pos = lax.rem(lax.max(pos, lax.full((), 0, np.int32)), lax.full((), k, np.int32))
    picked = lax.reshape(_take(v, pos, 0), get_aval(a).shape)
    return lax.select(m, picked, a)


def put(a, ind, v, mode: str | None = None, *, inplace: bool = True):
    """``a`` with the flat positions ``ind`` set to ``v`` (``inplace=False`` is required).

    Args:
      a: the array.
      ind: flat integer indices (negative count from the end).
      v: values, repeated cyclically to the number of indices.
      mode: None or ``"fill"`` (out-of-range indices are dropped), ``"clip"`` or ``"wrap"``.
        ``"raise"`` is not supported.
      inplace: must be False.

    Example:
      >>> jnp.put(jnp.zeros(4), jnp.array([0, 2]), jnp.array([1., 2.]), inplace=False)
      Array([1., 0., 2., 0.], dtype=float32)
    """
    _no_inplace("put", inplace)
    check_arraylike("put", a, ind, v)
    arr = asarray_weak(a)
    flat = _ravel(arr)
    n = get_aval(flat).shape[0]
    idx = _ravel(asarray_weak(ind))
    vals = _ravel(to_dtype(asarray_weak(v), get_aval(arr).dtype))
    k = get_aval(idx).shape[0]
    if k == 0 or get_aval(vals).shape[0] == 0:
        return arr
    vals = resize(vals, (k,))
    it = get_aval(idx).dtype
    if mode is None or mode == "fill":
        smode = "drop"
    elif mode == "clip":
        idx, smode = lax.clamp(lax.full((), 0, it), idx, lax.full((), max(n - 1, 0), it)), "clip"
    elif mode == "wrap":
        from plax.numpy.ufuncs import remainder
        idx, smode = remainder(idx, lax.full((), max(n, 1), it)), "clip"
    elif mode == "raise":
        raise NotImplementedError("The 'raise' mode to jnp.put is not supported.")
    else:
        raise ValueError(f"put: mode must be None, 'fill', 'clip' or 'wrap'; got {mode!r}")
    return lax.reshape(flat.at[idx].set(vals, mode=smode), get_aval(arr).shape)


def put_along_axis(arr, indices, values, axis: int | None, inplace: bool = True, *,
                   mode: str | None = None):
    """``arr`` with ``values`` written at ``indices`` along ``axis`` (the inverse of
    ``take_along_axis``; ``inplace=False`` is required).

    Example:
      >>> jnp.put_along_axis(jnp.zeros((2, 2)), jnp.array([[1], [0]]), 5., axis=1,
      ...                    inplace=False)
      Array([[0., 5.],
             [5., 0.]], dtype=float32)
    """
    _no_inplace("put_along_axis", inplace)
    check_arraylike("put_along_axis", arr, indices, values)
    a = asarray_weak(arr)
    idx = asarray_weak(indices)
    shape = get_aval(a).shape
    if axis is None:
        if get_aval(idx).ndim != 1:
            raise ValueError("put_along_axis: indices must be 1-D when axis=None")
        return lax.reshape(put(a, idx, values, mode=mode, inplace=False), shape)
    nd = len(shape)
    if get_aval(idx).ndim != nd:
        raise ValueError(f"indices and arr must have the same number of dimensions; "
                         f"{get_aval(idx).ndim} vs. {nd}")
    axis = canonicalize_axis(axis, nd)
    from plax.numpy.util import broadcast_shapes
    ishape = broadcast_shapes(get_aval(idx).shape,
                              tuple(1 if i == axis else d for i, d in enumerate(shape)))
    idx = _broadcast(idx, ishape)
    grids = tuple(idx if i == axis else lax.broadcasted_iota(np.int32, ishape, i)
                  for i in range(nd))
    vals = _broadcast(to_dtype(asarray_weak(values), get_aval(a).dtype), ishape)
    return a.at[grids].set(vals, mode=mode)


def fill_diagonal(a, val, wrap: bool = False, *, inplace: bool = True):
    """``a`` with its main diagonal set to ``val`` (cyclically; ``inplace=False`` required).

    Args:
      a: an array of at least 2 dimensions (all equal if more than 2).
      val: the value(s) for the diagonal.
      wrap: not supported (as JAX).
      inplace: must be False.

    Example:
      >>> jnp.fill_diagonal(jnp.zeros((2, 2)), 1., inplace=False)
      Array([[1., 0.],
             [0., 1.]], dtype=float32)
    """
    _no_inplace("fill_diagonal", inplace)
    if wrap:
        raise NotImplementedError("wrap=True is not implemented, must use wrap=False")
    check_arraylike("fill_diagonal", a, val)
    arr = asarray_weak(a)
    shape = get_aval(arr).shape
    if len(shape) < 2:
        raise ValueError("array must be at least 2-d")
    if len(shape) > 2 and len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    n = min(shape)
    vals = resize(_ravel(to_dtype(asarray_weak(val), get_aval(arr).dtype)), (n,))
    i = lax.iota(np.int32, n)
    return arr.at[(i,) * len(shape)].set(vals)


# --- ordering ----------------------------------------------------------------------------

def partition(a, kth: int, axis: int = -1):
    """``a`` reordered so that its ``kth`` element along ``axis`` is where sorting puts it,
    smaller-or-equal values before it and larger-or-equal ones after.

    plax returns the fully sorted array, which satisfies this contract (JAX leaves the
    part after ``kth`` unordered; NumPy leaves both parts unordered).

    Example:
      >>> jnp.partition(jnp.array([5, 3, 1, 4]), 1)[1]
      Array(3, dtype=int32)
    """
    from plax.numpy.searching import sort
    check_arraylike("partition", a)
    a = asarray_weak(a)
    _check_kth(kth, a, axis)
    return sort(a, axis=axis)


def argpartition(a, kth: int, axis: int = -1):
    """Indices that :func:`partition` ``a`` (plax returns the stable sorting permutation).

    Example:
      >>> jnp.argpartition(jnp.array([5, 3, 1, 4]), 1)[1]
      Array(1, dtype=int32)
    """
    from plax.numpy.searching import argsort
    check_arraylike("argpartition", a)
    a = asarray_weak(a)
    _check_kth(kth, a, axis)
    return argsort(a, axis=axis)


def _check_kth(kth, a, axis):
    if not isinstance(kth, (int, np.integer)) or isinstance(kth, bool):
        raise TypeError(f"kth must be an integer, got {kth!r}")
    nd = get_aval(a).ndim
    if nd == 0:
        raise ValueError("partition requires an array of at least one dimension")
    n = get_aval(a).shape[canonicalize_axis(axis, nd)]
    if not -n <= kth < n:
        raise ValueError(f"kth(={kth}) out of bounds {n}")


def lexsort(keys, axis: int = -1):
    """The stable permutation sorting by several keys; the **last** key is the primary one.

    Example:
      >>> jnp.lexsort([jnp.array([1, 0, 1]), jnp.array([0, 0, 1])])
      Array([1, 0, 2], dtype=int32)
    """
    if hasattr(keys, "aval") or isinstance(keys, np.ndarray):
        k = asarray_weak(keys)
        keys = [k[i] for i in range(get_aval(k).shape[0])]
    keys = list(keys)
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    check_arraylike("lexsort", *keys)
    keys = [asarray_weak(k) for k in keys]
    shapes = {get_aval(k).shape for k in keys}
    if len(shapes) != 1:
        raise ValueError("all keys need to be the same shape")
    shape = shapes.pop()
    if len(shape) == 0:
        return lax.full((), 0, _idx())
    axis = canonicalize_axis(axis, len(shape))
    iota = lax.broadcasted_iota(_idx(), shape, axis)
    out = lax.sort(keys[::-1] + [iota], axis, is_stable=True, num_keys=len(keys))
    return out[-1]


# --- construction ------------------------------------------------------------------------

def diagflat(v, k: int = 0):
    """A 2-D array with the flattened ``v`` on diagonal ``k``.

    Example:
      >>> jnp.diagflat(jnp.array([[1, 2]]))
      Array([[1, 0],
             [0, 2]], dtype=int32)
    """
    from plax.numpy.shape_ops import diag
    check_arraylike("diagflat", v)
    return diag(_ravel(asarray_weak(v)), k)


def vander(x, N: int | None = None, increasing: bool = False):
    """The Vandermonde matrix of 1-D ``x``: columns are powers of ``x`` (decreasing unless
    ``increasing``).

    Example:
      >>> jnp.vander(jnp.array([2, 3]), 3)
      Array([[4, 2, 1],
             [9, 3, 1]], dtype=int32)
    """
    check_arraylike("vander", x)
    x = asarray_weak(x)
    if get_aval(x).ndim != 1:
        raise ValueError("x must be a one-dimensional array")
    n = get_aval(x).shape[0]
    N = n if N is None else operator.index(N)
    if N < 0:
        raise ValueError("N must be nonnegative")
    cols, p = [], lax.full_like(x, 1)
    for _ in range(N):
        cols.append(p)
        p = lax.mul(p, x)
    if not increasing:
        cols = cols[::-1]
    if not cols:
        return lax.full((n, 0), 0, get_aval(x).dtype)
    return lax.concatenate([lax.reshape(c, (n, 1)) for c in cols], 1)


def astype(x, dtype, /, *, copy: bool = False, device=None):
    """``x`` cast to ``dtype`` (the Array API's function form of ``x.astype``).

    Example:
      >>> jnp.astype(jnp.array([1.7, -1.2]), jnp.int32)
      Array([ 1, -1], dtype=int32)
    """
    check_arraylike("astype", x)
    x = asarray_weak(converted_first(x)[0])  # (as JAX's: a host x placed, typed P(None, ...))
    if dtype is None:
        dtype = dtypes.default_float_dtype()
    dt = dtypes.check_user_dtype(dtype, "astype")
    out = lax.convert_element_type(x, dt)
    if copy and out is x and _mesh_maybe_set[0]:  # JAX's copy: an eager operation, placed
        from plax.sharding_eager import placed_copy
        out = placed_copy(out)
    if device is not None:
        from plax import device_put
        out = device_put(out, device)
    return out


# --- functional application ----------------------------------------------------------------

def apply_along_axis(func1d: Callable, axis: int, arr, *args, **kwargs):
    """``func1d`` applied to every 1-D slice of ``arr`` along ``axis`` (vectorised with vmap).

    The axes ``func1d`` returns take the place of ``axis`` in the result.

    Example:
      >>> jnp.apply_along_axis(jnp.sum, 1, jnp.ones((2, 3)))
      Array([3., 3.], dtype=float32)
    """
    from plax import vmap
    check_arraylike("apply_along_axis", arr)
    arr = asarray_weak(arr)
    nd = get_aval(arr).ndim
    axis = canonicalize_axis(axis, nd)

    def f(x):
        return func1d(x, *args, **kwargs)

    # vmap over the axes after ``axis`` (their results go last), then those before it
    for _ in range(nd - axis - 1):
        f = vmap(f, in_axes=-1, out_axes=-1)
    for _ in range(axis):
        f = vmap(f, in_axes=0, out_axes=0)
    return f(arr)


def apply_over_axes(func: Callable, a, axes: Sequence[int]):
    """``func(a, axis)`` applied for each axis in turn, keeping the rank (a reduced axis is
    re-inserted with size 1).

    Example:
      >>> jnp.apply_over_axes(jnp.sum, jnp.ones((2, 3)), [0, 1])
      Array([[6.]], dtype=float32)
    """
    check_arraylike("apply_over_axes", a)
    a = asarray_weak(a)
    for axis in ([axis] if isinstance(axis := axes, int) else axes):
        nd = get_aval(a).ndim
        res = asarray_weak(func(a, axis))
        if get_aval(res).ndim == nd - 1:
            res = lax.expand_dims(res, (canonicalize_axis(axis, nd),))
        elif get_aval(res).ndim != nd:
            raise ValueError("function is not returning an array of the correct shape")
        a = res
    return a
