"""Set operations: isin, union1d, intersect1d, setdiff1d, setxor1d and the Array API's
unique_all / unique_counts / unique_inverse / unique_values.

Every function works on sorted copies: a sort, a mask of the elements to keep, and a
compaction of the kept ones to the front. The number of kept elements depends on the data,
so under jit/vmap a static ``size=`` is required (padded with ``fill_value``), as in JAX.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from plax import dtypes, errors, lax
from plax.core.trace import Tracer, get_aval
from plax.numpy.util import asarray_weak, check_arraylike, promote_dtypes


class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def _is_abstract(x) -> bool:
    return isinstance(x, Tracer) and x.to_concrete_value() is None


def _require_concrete(name: str, *args) -> None:
    """Raises JAX's concretization error (pointing to ``size=``) for abstract inputs."""
    for a in args:
        if _is_abstract(a):
            raise errors.ConcretizationTypeError(
                a, f"The error arose in jnp.{name}(): its output shape depends on the input "
                   f"values. Pass a static `size=` argument to use jnp.{name} under jit, vmap "
                   f"or other transformations.")


def _index_dtype() -> np.dtype:
    return dtypes.default_int_dtype()


def _count(mask) -> int:
    """The number of True entries of a concrete mask (the static size of an eager result)."""
    return int(np.asarray(lax.reduce_sum(lax.convert_element_type(mask, np.int32), (0,))))


def _ravel(x):
    return lax.reshape(x, (int(np.prod(get_aval(x).shape, dtype=np.int64)),))


def _sorted_runs(flat):
    """``(sorted values, the permutation that sorts, mask of the first element of each run of
    equal values)``. Runs compare with ``!=``, so NaNs are each their own run (as JAX)."""
    n = get_aval(flat).shape[0]
    _, perm = lax.sort([flat, lax.iota(np.int32, n)], 0, is_stable=True, num_keys=1)
    s = lax.sort(flat, 0, is_stable=True)
    if n == 0:
        return s, perm, lax.full((0,), True, np.bool_)
    differs = lax.ne(lax.slice(s, (1,), (n,)), lax.slice(s, (0,), (n - 1,)))
    first = lax.concatenate([lax.full((1,), True, np.bool_), differs], 0)
    return s, perm, first


def _compact(values, keep, size: int, fill=None):
    """The first ``size`` entries of ``values`` where ``keep`` is True, padded with ``fill``
    (default: the first kept entry, i.e. the smallest value of a sorted input)."""
    from plax.numpy.searching import nonzero
    dt = get_aval(values).dtype
    n = get_aval(values).shape[0]
    if n == 0:
        return lax.full((size,), 0 if fill is None else fill, dt)
    (pos,) = nonzero(keep, size=size, fill_value=0)
    out = _take(values, pos)
    count = lax.reduce_sum(lax.convert_element_type(keep, np.int32), (0,))
    valid = lax.lt(lax.iota(np.int32, size), count)
    if fill is None:
        fill_arr = lax.reshape(lax.slice(out, (0,), (1,)), ()) if size else lax.full((), 0, dt)
    else:
        fill_arr = lax.convert_element_type(asarray_weak(fill), dt)
    return lax.select(valid, out, lax.broadcast_in_dim(fill_arr, (size,), ()))


def _take(values, pos):
    from plax.numpy.shape_ops import take
    return take(values, pos, mode="clip")


def _prepare(name: str, *arrays):
    check_arraylike(name, *arrays)
    return [_ravel(a) for a in promote_dtypes(*[asarray_weak(a) for a in arrays])]


def isin(element, test_elements, assume_unique: bool = False, invert: bool = False, *,
         method: str = "auto"):
    """Whether each element of ``element`` occurs in ``test_elements``.

    Args:
      element: the array whose elements are looked up.
      test_elements: the values to look for (any shape; flattened).
      assume_unique: accepted for NumPy compatibility; ignored.
      invert: return the negation (elements *not* in ``test_elements``).
      method: accepted for compatibility ("auto", "compare_all", "binary_search", "sort");
        plax always compares every pair.

    Returns:
      A boolean array of ``element``'s shape. NaN is never found (NaN != NaN).

    Example:
      >>> jnp.isin(jnp.array([1, 2, 3]), jnp.array([3, 1]))
      Array([ True, False,  True], dtype=bool)
    """
    check_arraylike("isin", element, test_elements)
    if method not in ("auto", "compare_all", "binary_search", "sort"):
        raise ValueError(f"isin: method must be one of 'auto', 'compare_all', 'binary_search', "
                         f"'sort'; got {method!r}")
    e, t = promote_dtypes(asarray_weak(element), asarray_weak(test_elements))
    t = _ravel(t)
    shape = get_aval(e).shape
    m = get_aval(t).shape[0]
    ee = lax.broadcast_in_dim(e, shape + (m,), tuple(range(len(shape))))
    tt = lax.broadcast_in_dim(t, shape + (m,), (len(shape),))
    found = lax.reduce_or(lax.eq(ee, tt), (len(shape),))
    return lax.bitwise_not(found) if invert else found


def union1d(ar1, ar2, *, size: int | None = None, fill_value=None):
    """The sorted unique values found in either array (both flattened).

    Args:
      ar1, ar2: the arrays.
      size: static result length, required under jit: padded with ``fill_value``
        (default: the smallest value) or truncated.
      fill_value: see ``size``.

    Returns:
      A 1-D array of the promoted dtype.

    Example:
      >>> jnp.union1d(jnp.array([3, 1]), jnp.array([2, 3]))
      Array([1, 2, 3], dtype=int32)
    """
    a, b = _prepare("union1d", ar1, ar2)
    if size is None:
        _require_concrete("union1d", a, b)
    s, _, first = _sorted_runs(lax.concatenate([a, b], 0))
    return _compact(s, first, _count(first) if size is None else int(size), fill_value)


def setdiff1d(ar1, ar2, assume_unique: bool = False, *, size: int | None = None,
              fill_value=None):
    """The sorted unique values of ``ar1`` that are not in ``ar2``.

    Args:
      ar1, ar2: the arrays (flattened).
      assume_unique: accepted for NumPy compatibility; the result is the same.
      size: static result length, required under jit.
      fill_value: the padding when ``size`` is larger than the result (default 0, as JAX).

    Returns:
      A 1-D array of the promoted dtype.

    Example:
      >>> jnp.setdiff1d(jnp.array([5, 1, 3]), jnp.array([3, 4]))
      Array([1, 5], dtype=int32)
    """
    a, b = _prepare("setdiff1d", ar1, ar2)
    if size is None:
        _require_concrete("setdiff1d", a, b)
    s, _, first = _sorted_runs(a)
    keep = lax.bitwise_and(first, isin(s, b, invert=True))
    return _compact(s, keep, _count(keep) if size is None else int(size),
                    0 if fill_value is None else fill_value)


def setxor1d(ar1, ar2, assume_unique: bool = False, *, size: int | None = None,
             fill_value=None):
    """The sorted unique values that are in exactly one of the two arrays.

    Args:
      ar1, ar2: the arrays (flattened).
      assume_unique: accepted for NumPy compatibility; the result is the same.
      size: static result length, required under jit.
      fill_value: the padding (default: the smallest value of the result).

    Returns:
      A 1-D array of the promoted dtype.

    Example:
      >>> jnp.setxor1d(jnp.array([1, 2, 3]), jnp.array([2, 4]))
      Array([1, 3, 4], dtype=int32)
    """
    a, b = _prepare("setxor1d", ar1, ar2)
    if size is None:
        _require_concrete("setxor1d", a, b)
    s, _, first = _sorted_runs(lax.concatenate([a, b], 0))
    in_both = lax.bitwise_and(isin(s, a), isin(s, b))
    keep = lax.bitwise_and(first, lax.bitwise_not(in_both))
    return _compact(s, keep, _count(keep) if size is None else int(size), fill_value)


def intersect1d(ar1, ar2, assume_unique: bool = False, return_indices: bool = False, *,
                size: int | None = None, fill_value=None):
    """The sorted unique values found in both arrays.

    Args:
      ar1, ar2: the arrays (flattened).
      assume_unique: accepted for NumPy compatibility; the result is the same.
      return_indices: also return the index of the first occurrence of each value in
        ``ar1`` and in ``ar2`` (padded with the arrays' lengths when ``size`` pads).
      size: static result length, required under jit.
      fill_value: the padding (default: the smallest value of the result).

    Returns:
      The values, or ``(values, indices in ar1, indices in ar2)``.

    Example:
      >>> jnp.intersect1d(jnp.array([5, 1, 3, 3]), jnp.array([3, 4, 5]))
      Array([3, 5], dtype=int32)
    """
    a, b = _prepare("intersect1d", ar1, ar2)
    if size is None:
        _require_concrete("intersect1d", a, b)
    s, perm, first = _sorted_runs(a)
    keep = lax.bitwise_and(first, isin(s, b))
    size = _count(keep) if size is None else int(size)
    values = _compact(s, keep, size, fill_value)
    if not return_indices:
        return values
    na, nb = get_aval(a).shape[0], get_aval(b).shape[0]
    idx = _index_dtype()
    ind1 = _compact(lax.convert_element_type(perm, idx), keep, size, na)
    # first index in ar2 of each kept value: argmax of the equality row
    if nb == 0:
        ind2 = lax.full((size,), 0, idx)
    else:
        eq = lax.eq(lax.broadcast_in_dim(values, (size, nb), (0,)),
                    lax.broadcast_in_dim(b, (size, nb), (1,)))
        ind2 = lax.convert_element_type(lax.argmax(eq, 1, np.int32), idx)
    count = lax.reduce_sum(lax.convert_element_type(keep, np.int32), (0,))
    valid = lax.lt(lax.iota(np.int32, size), count)
    ind2 = lax.select(valid, ind2, lax.full((size,), nb, idx))
    return values, ind1, ind2


def _unique_parts(name: str, x, size, fill_value):
    """values, first indices, inverse indices and counts of the unique elements of ``x``
    (NaNs distinct, as the Array API asks)."""
    check_arraylike(name, x)
    x = asarray_weak(x)
    if size is None:
        _require_concrete(name, x)
    shape = get_aval(x).shape
    flat = _ravel(x)
    n = get_aval(flat).shape[0]
    if n == 0:  # as jnp.unique (and JAX): only the values are padded to size
        from plax.numpy.searching import _check_fill_of_empty
        _check_fill_of_empty(size, fill_value)
        none = lax.full((0,), 0, _index_dtype())
        values = lax.full((int(size or 0),), 0 if fill_value is None else fill_value,
                          get_aval(flat).dtype)
        return values, none, lax.reshape(none, shape), none
    s, perm, first = _sorted_runs(flat)
    size = _count(first) if size is None else int(size)
    idx = _index_dtype()
    values = _compact(s, first, size, fill_value)
    indices = _compact(lax.convert_element_type(perm, idx), first, size, None)
    gid = lax.sub(lax.cumsum(lax.convert_element_type(first, idx), 0), lax.full((), 1, idx))
    from plax.numpy.creation import zeros
    counts = zeros((size,), idx).at[gid].add(lax.full((n,), 1, idx), mode="drop")
    inverse = zeros((n,), idx).at[perm].set(gid, unique_indices=True)
    return values, indices, lax.reshape(inverse, shape), counts


def unique_all(x, /, *, size: int | None = None, fill_value=None) -> UniqueAllResult:
    """Unique values with their first indices, inverse indices and counts (Array API).

    Args:
      x: the array (flattened). NaNs are distinct values.
      size: static number of unique values, required under jit: ``values`` is padded with
        ``fill_value`` (default: the smallest value), ``indices`` with the index of the
        smallest value, ``counts`` with 0.
      fill_value: see ``size``.

    Returns:
      ``UniqueAllResult(values, indices, inverse_indices, counts)``; ``inverse_indices`` has
      ``x``'s shape.

    Example:
      >>> jnp.unique_all(jnp.array([3, 1, 3])).counts
      Array([1, 2], dtype=int32)
    """
    return UniqueAllResult(*_unique_parts("unique_all", x, size, fill_value))


def unique_counts(x, /, *, size: int | None = None, fill_value=None) -> UniqueCountsResult:
    """Unique values and how often each occurs (Array API); see :func:`unique_all`.

    Example:
      >>> jnp.unique_counts(jnp.array([3, 1, 3])).values
      Array([1, 3], dtype=int32)
    """
    v, _, _, c = _unique_parts("unique_counts", x, size, fill_value)
    return UniqueCountsResult(v, c)


def unique_inverse(x, /, *, size: int | None = None, fill_value=None) -> UniqueInverseResult:
    """Unique values and, for each element of ``x``, the index of its value (Array API).

    Example:
      >>> jnp.unique_inverse(jnp.array([3, 1, 3])).inverse_indices
      Array([1, 0, 1], dtype=int32)
    """
    v, _, inv, _ = _unique_parts("unique_inverse", x, size, fill_value)
    return UniqueInverseResult(v, inv)


def unique_values(x, /, *, size: int | None = None, fill_value=None):
    """The sorted unique values of ``x`` (Array API; NaNs are distinct).

    Example:
      >>> jnp.unique_values(jnp.array([3, 1, 3]))
      Array([1, 3], dtype=int32)
    """
    return _unique_parts("unique_values", x, size, fill_value)[0]
