"""Index helpers: the ``r_``/``c_`` concatenators, ``s_``/``index_exp``, ``mgrid``/``ogrid``,
``ix_``, the ``*_indices`` families and ``ravel_multi_index``/``unravel_index``."""
from __future__ import annotations

import math
import operator
from typing import Callable, Sequence

import numpy as np

from plax import dtypes, errors, lax
from plax.core.trace import Tracer, get_aval
from plax.numpy.util import asarray_weak, check_arraylike


def _index_dtype() -> np.dtype:
    return dtypes.default_int_dtype()


def _slice_to_range(s: slice):
    """A slice of r_/mgrid as an array: ``a:b:c`` is arange, ``a:b:Nj`` is linspace of N points
    with the end included (NumPy's convention)."""
    from plax.numpy.creation import arange, linspace
    start = 0 if s.start is None else s.start
    step = 1 if s.step is None else s.step
    if isinstance(step, complex):
        return linspace(start, s.stop, int(abs(step)), endpoint=True)
    return arange(start, s.stop, step)


class _AxisConcatenator:
    """``r_`` and ``c_``: concatenation with slice and directive sugar, as NumPy's.

    A leading string item is a directive: ``"r"``/``"c"`` (row/column matrix) or
    ``"axis[,ndmin[,trans1d]]"``.
    """

    def __init__(self, axis: int, ndmin: int, trans1d: int, name: str):
        self.axis, self.ndmin, self.trans1d, self._name = axis, ndmin, trans1d, name

    def __getitem__(self, key):
        from plax.numpy.creation import array
        from plax.numpy.shape_ops import concatenate
        items = key if isinstance(key, tuple) else (key,)
        axis, ndmin, trans1d, matrix = self.axis, self.ndmin, self.trans1d, None
        if items and isinstance(items[0], str):
            directive, items = items[0], items[1:]
            if directive in ("r", "c"):
                matrix = directive
            else:
                parts = directive.split(",")
                if len(parts) > 3:
                    raise ValueError(f"{self._name}: directive {directive!r} has too many parts")
                try:
                    vals = [int(p) for p in parts]
                except ValueError:
                    raise ValueError(f"{self._name}: could not understand directive "
                                     f"{directive!r}") from None
                axis = vals[0]
                if len(vals) > 1:
                    ndmin = vals[1]
                if len(vals) > 2:
                    trans1d = vals[2]
        arrays = []
        for item in items:
            if isinstance(item, slice):
                arr = _slice_to_range(item)
            elif isinstance(item, str):
                raise ValueError(f"{self._name}: a string directive must come first, got "
                                 f"{item!r}")
            else:
                arr = array(item) if not isinstance(item, (list, tuple)) else array(item)
            arrays.append(self._promote_ndim(arr, ndmin, trans1d))
        result = concatenate(arrays, axis=axis)
        if matrix is not None:
            if get_aval(result).ndim == 1:
                n = get_aval(result).shape[0]
                return lax.reshape(result, (1, n) if matrix == "r" else (n, 1))
            return lax.transpose(result, (1, 0)) if matrix == "c" else result
        return result

    @staticmethod
    def _promote_ndim(arr, ndmin: int, trans1d: int):
        """``arr`` with leading unit axes up to ``ndmin``; ``trans1d`` says where the original
        axes go (NumPy's rule: -1 puts them last)."""
        nd = get_aval(arr).ndim
        if nd >= ndmin:
            return arr
        shape = (1,) * (ndmin - nd) + get_aval(arr).shape
        out = lax.reshape(arr, shape)
        if trans1d != -1:
            k2 = ndmin - nd
            k1 = trans1d + k2 + 1 if trans1d < 0 else trans1d
            axes = list(range(ndmin))
            out = lax.transpose(out, tuple(axes[:k1] + axes[k2:] + axes[k1:k2]))
        return out

    def __len__(self) -> int:
        return 0


r_ = _AxisConcatenator(0, 1, -1, "r_")
r_.__doc__ = """Concatenates along the first axis with slice sugar: ``jnp.r_[1:4, 0, x]``.

Example:
  >>> jnp.r_[0:3, 7]
  Array([0, 1, 2, 7], dtype=int32)
"""
c_ = _AxisConcatenator(-1, 2, 0, "c_")
c_.__doc__ = """Concatenates along the last axis, 1-D items becoming columns: ``jnp.c_[x, y]``.

Example:
  >>> jnp.c_[jnp.array([1, 2]), jnp.array([3, 4])]
  Array([[1, 3],
         [2, 4]], dtype=int32)
"""


class _IndexExpression:
    """``s_`` (the index itself) and ``index_exp`` (always a tuple)."""

    def __init__(self, maketuple: bool):
        self._maketuple = maketuple

    def __getitem__(self, item):
        if self._maketuple and not isinstance(item, tuple):
            return (item,)
        return item


s_ = _IndexExpression(False)
index_exp = _IndexExpression(True)


class _Grid:
    """``mgrid`` (dense) and ``ogrid`` (open, broadcastable) grids from slices."""

    def __init__(self, sparse: bool, name: str):
        self._sparse, self._name = sparse, name

    def __getitem__(self, key):
        from plax.numpy.creation import meshgrid
        from plax.numpy.shape_ops import stack
        if isinstance(key, slice):
            return _slice_to_range(key)
        if not isinstance(key, tuple) or not all(isinstance(k, slice) for k in key):
            raise TypeError(f"{self._name} takes slices, e.g. {self._name}[0:3, 0:4]")
        ranges = [_slice_to_range(k) for k in key]
        # one dtype for all axes: float if any axis is (JAX's rule)
        dt = dtypes.result_type(*ranges)
        ranges = [lax.convert_element_type(r, dt) for r in ranges]
        grids = meshgrid(*ranges, indexing="ij", sparse=self._sparse)
        if self._sparse:
            return list(grids)
        return stack(grids, 0) if grids else lax.full((0,), 0, _index_dtype())


mgrid = _Grid(False, "mgrid")
ogrid = _Grid(True, "ogrid")


def ix_(*args) -> tuple:
    """An open mesh from 1-D index arrays, for outer indexing: ``a[jnp.ix_(rows, cols)]``.

    Args:
      *args: 1-D integer arrays (boolean arrays are not supported, as in JAX).

    Returns:
      A tuple of arrays; the ``i``-th has shape ``(1, ..., len(args[i]), ..., 1)``.

    Example:
      >>> [a.shape for a in jnp.ix_(jnp.array([0, 1]), jnp.array([2, 0, 1]))]
      [(2, 1), (1, 3)]
    """
    check_arraylike("ix_", *args)
    n = len(args)
    out = []
    for i, a in enumerate(args):
        a = asarray_weak(a)
        aval = get_aval(a)
        if aval.ndim != 1:
            raise ValueError(f"Arguments to jax.numpy.ix_ must be 1-dimensional, got shape "
                             f"{aval.shape}")
        if aval.dtype == np.bool_:
            raise NotImplementedError("Boolean arguments to jax.numpy.ix_ are not implemented")
        shape = [1] * n
        shape[i] = aval.shape[0]
        out.append(lax.reshape(a, tuple(shape)))
    return tuple(out)


def _static_indices(host: tuple) -> tuple:
    # The *_indices functions depend only on static ints: their results are constants, like
    # those of arange, so building them on the host is shape logic, not array computation.
    return tuple(asarray_weak(np.asarray(h, dtype=_index_dtype())) for h in host)


def diag_indices(n: int, ndim: int = 2) -> tuple:
    """Indices of the main diagonal of an ``ndim``-dimensional array of side ``n``.

    Example:
      >>> jnp.diag_indices(3)
      (Array([0, 1, 2], dtype=int32), Array([0, 1, 2], dtype=int32))
    """
    n, ndim = operator.index(n), operator.index(ndim)
    if n < 0:
        raise ValueError(f"n argument to diag_indices must be nonnegative, got {n}")
    if ndim < 0:
        raise ValueError(f"ndim argument to diag_indices must be nonnegative, got {ndim}")
    return (lax.iota(_index_dtype(), n),) * ndim


def diag_indices_from(arr) -> tuple:
    """:func:`diag_indices` for a square array ``arr`` (all sides equal, at least 2-D).

    Example:
      >>> len(jnp.diag_indices_from(jnp.zeros((2, 2, 2))))
      3
    """
    check_arraylike("diag_indices_from", arr)
    shape = get_aval(asarray_weak(arr)).shape
    if len(shape) < 2:
        raise ValueError("input array must be at least 2-d")
    if len(set(shape)) != 1:
        raise ValueError("All dimensions of input must be of equal length")
    return diag_indices(shape[0], len(shape))


def tril_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """Row and column indices of the lower triangle (diagonal offset ``k``) of an n×m array.

    Example:
      >>> jnp.tril_indices(2)
      (Array([0, 1, 1], dtype=int32), Array([0, 0, 1], dtype=int32))
    """
    n, k = operator.index(n), operator.index(k)
    m = n if m is None else operator.index(m)
    return _static_indices(np.tril_indices(n, k, m))


def triu_indices(n: int, k: int = 0, m: int | None = None) -> tuple:
    """Row and column indices of the upper triangle (diagonal offset ``k``) of an n×m array.

    Example:
      >>> jnp.triu_indices(2)
      (Array([0, 0, 1], dtype=int32), Array([0, 1, 1], dtype=int32))
    """
    n, k = operator.index(n), operator.index(k)
    m = n if m is None else operator.index(m)
    return _static_indices(np.triu_indices(n, k, m))


def _shape_2d(name: str, arr) -> tuple:
    check_arraylike(name, arr)
    shape = get_aval(asarray_weak(arr)).shape
    if len(shape) != 2:
        raise ValueError(f"Input array must be 2D, got shape {shape}")
    return shape


def tril_indices_from(arr, k: int = 0) -> tuple:
    """:func:`tril_indices` for the shape of the 2-D array ``arr``.

    Example:
      >>> jnp.tril_indices_from(jnp.zeros((2, 3)), k=1)[1]
      Array([0, 1, 0, 1, 2], dtype=int32)
    """
    n, m = _shape_2d("tril_indices_from", arr)
    return tril_indices(n, k, m)


def triu_indices_from(arr, k: int = 0) -> tuple:
    """:func:`triu_indices` for the shape of the 2-D array ``arr``.

    Example:
      >>> jnp.triu_indices_from(jnp.zeros((2, 3)))[1]
      Array([0, 1, 2, 1, 2], dtype=int32)
    """
    n, m = _shape_2d("triu_indices_from", arr)
    return triu_indices(n, k, m)


def mask_indices(n: int, mask_func: Callable, k: int = 0, *, size: int | None = None) -> tuple:
    """Indices where ``mask_func(ones((n, n)), k)`` is non-zero (e.g. ``jnp.triu``).

    Args:
      n: the side of the square mask.
      mask_func: a function like ``jnp.triu`` or ``jnp.tril``.
      k: passed to ``mask_func``.
      size: the static number of indices, required when the mask is traced.

    Returns:
      ``(rows, cols)``.

    Example:
      >>> jnp.mask_indices(2, jnp.triu)
      (Array([0, 0, 1], dtype=int32), Array([0, 1, 1], dtype=int32))
    """
    from plax.numpy.creation import ones
    from plax.numpy.searching import nonzero
    mask = mask_func(ones((n, n), dtype=np.int32), k)
    return nonzero(mask, size=size)


def ravel_multi_index(multi_index: Sequence, dims: Sequence[int], mode: str = "raise",
                      order: str = "C", *, dtype=None):
    """Flat indices of the coordinates ``multi_index`` into an array of shape ``dims``.

    Args:
      multi_index: one integer array per dimension (broadcast together).
      dims: the array's shape.
      mode: ``"raise"`` (out-of-range coordinates raise ValueError; needs concrete input, so
        not under jit), ``"clip"`` or ``"wrap"``.
      order: ``"C"`` (row-major) or ``"F"``.
      dtype: the integer dtype of the result (default: the default integer dtype); it must
        hold ``prod(dims) - 1``.

    Returns:
      An integer array of the broadcast shape.

    Example:
      >>> jnp.ravel_multi_index((jnp.array([0, 1]), jnp.array([2, 0])), (2, 3))
      Array([2, 3], dtype=int32)
    """
    from plax.numpy.shape_ops import broadcast_arrays
    dims = tuple(operator.index(d) for d in dims)
    if len(multi_index) != len(dims):
        raise ValueError(f"parameter multi_index must be a sequence of length {len(dims)}")
    if mode not in ("raise", "clip", "wrap"):
        raise ValueError(f"invalid mode={mode!r}. Expected 'raise', 'wrap', or 'clip'")
    if order not in ("C", "F"):
        raise ValueError("only 'C' or 'F' order is permitted")
    check_arraylike("ravel_multi_index", *multi_index)
    out_dt = _result_index_dtype(dtype, dims)
    idx_dt = _index_dtype()
    parts = []
    for i in multi_index:
        i = asarray_weak(i)
        if not dtypes.issubdtype(get_aval(i).dtype, np.integer):
            raise TypeError("only int indices permitted")
        parts.append(lax.convert_element_type(i, idx_dt))
    parts = broadcast_arrays(*parts) if parts else parts
    if mode == "raise":
        for p in parts:
            if isinstance(p, Tracer) and p.to_concrete_value() is None:
                raise errors.ConcretizationTypeError(
                    p, "The error occurred because ravel_multi_index was jit-compiled with "
                       "mode='raise'. Use mode='wrap' or mode='clip' instead.")
        for p, d in zip(parts, dims):
            host = np.asarray(p)  # a bounds check of concrete indices, as NumPy's
            if host.size and (host.min() < 0 or host.max() >= d):
                raise ValueError("invalid entry in coordinates array")
    elif mode == "clip":
        parts = [lax.clamp(lax.full((), 0, idx_dt), p, lax.full((), max(d - 1, 0), idx_dt))
                 for p, d in zip(parts, dims)]
    else:
        parts = [_wrap(p, d, idx_dt) for p, d in zip(parts, dims)]
    strides = _strides(dims, order)
    out = lax.full(get_aval(parts[0]).shape if parts else (), 0, idx_dt)
    for p, s in zip(parts, strides):
        out = lax.add(out, lax.mul(p, lax.full((), s, idx_dt)))
    # (every clipped or wrapped flat index fits out_dt, so converting last is exact)
    return out if out_dt == idx_dt else lax.convert_element_type(out, out_dt)


def _result_index_dtype(dtype, dims: tuple) -> np.dtype:
    """ravel_multi_index's ``dtype=``: an integer dtype that holds every flat index."""
    if dtype is None:
        return _index_dtype()
    dt = dtypes.check_user_dtype(dtype, "ravel_multi_index")
    if not dtypes.issubdtype(dt, np.integer):
        raise ValueError(f"dtype={dt!r} is not an integer type.")
    if math.prod(dims) - 1 > np.iinfo(dt).max:
        raise ValueError(f"jnp.ravel_multi_index: dtype={dt!r} not large enough to hold the "
                         f"flat indices for dims={dims}; pass a larger integer dtype (e.g. "
                         f"np.min_scalar_type(prod(dims))).")
    return dt


def _wrap(p, d, dt):
    r = lax.rem(p, lax.full((), d, dt))
    return lax.select(lax.lt(r, lax.full((), 0, dt)), lax.add(r, lax.full(get_aval(r).shape, d, dt)), r)


def _strides(dims: tuple, order: str) -> list[int]:
    seq = dims[::-1] if order == "C" else dims
    strides, acc = [], 1
    for d in seq:
        strides.append(acc)
        acc *= d
    return strides[::-1] if order == "C" else strides


def unravel_index(indices, shape: Sequence[int]) -> tuple:
    """Coordinates in an array of ``shape`` of the flat ``indices``.

    Negative indices count from the end; out-of-range indices are clipped (JAX's rule;
    NumPy raises).

    Args:
      indices: an integer array of flat indices.
      shape: the array's shape.

    Returns:
      A tuple of ``len(shape)`` integer arrays of ``indices``' shape.

    Example:
      >>> jnp.unravel_index(jnp.array([5, 1]), (2, 3))
      (Array([1, 0], dtype=int32), Array([2, 1], dtype=int32))
    """
    check_arraylike("unravel_index", indices)
    idx = asarray_weak(indices)
    if not dtypes.issubdtype(get_aval(idx).dtype, np.integer):
        raise TypeError("only int indices permitted")
    shape = tuple(operator.index(d) for d in shape)
    dt = get_aval(idx).dtype if not get_aval(idx).weak_type else _index_dtype()
    idx = lax.convert_element_type(idx, dt)
    total = int(np.prod(shape, dtype=np.int64))
    zero = lax.full((), 0, dt)
    idx = lax.select(lax.lt(idx, zero), lax.add(idx, lax.full(get_aval(idx).shape, total, dt)),
                     idx)
    idx = lax.clamp(zero, idx, lax.full((), max(total - 1, 0), dt))
    out = []
    for s in _strides(shape, "C"):
        out.append(lax.div(idx, lax.full((), s, dt)))
        idx = lax.rem(idx, lax.full((), s, dt))
    return tuple(out)
