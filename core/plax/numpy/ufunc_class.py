"""``jnp.ufunc``: a universal function object, and ``jnp.frompyfunc`` that makes one.

``jnp.add``, ``jnp.multiply``, ``jnp.maximum`` ... are instances (see ``plax.numpy.ufuncs``),
as in JAX. Calling one applies it elementwise; its methods follow NumPy's ufunc methods:

- ``reduce``: fold along an axis, left to right (``add.reduce`` is ``sum``);
- ``accumulate``: the running fold (``add.accumulate`` is ``cumsum``);
- ``at``: apply at indices, unbuffered (a repeated index is applied once per occurrence);
- ``reduceat``: folds over slices between indices;
- ``outer``: every pair of elements.

A built-in ufunc hands each method a fast implementation (a reduction primitive, a scatter);
any other ufunc runs the generic one here: a loop (``fori_loop``/``scan``) that applies the
function in NumPy's order, so non-associative functions (``subtract``) give NumPy's values.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import numpy as np

from plax.core.trace import get_aval
from plax.numpy.util import asarray_weak, check_arraylike, reject_out, canonicalize_axis


class ufunc:
    """A universal function: an elementwise function with NumPy's ufunc methods.

    Args:
      func: the function on scalars (or elementwise on arrays) of ``nin`` arguments,
        returning ``nout`` values.
      nin: the number of inputs.
      nout: the number of outputs.
      name: the name shown in ``repr`` and messages (default: ``func.__name__``).
      nargs: NumPy's ``nargs`` (default ``nin``).
      identity: the identity of the binary operation (``reduce`` of an empty axis, and the
        start of a ``where``-masked reduce), or None.
      call, reduce, accumulate, at, reduceat: fast implementations of the call and methods;
        where None, the generic one is used (calling ``func`` under ``vectorize``, loops).

    Example:
      >>> add = jnp.ufunc(lambda x, y: x + y, 2, 1, identity=0)
      >>> add.reduce(jnp.arange(4))
      Array(6, dtype=int32)
      >>> jnp.subtract.accumulate(jnp.array([10, 1, 2]))
      Array([10,  9,  7], dtype=int32)
    """

    def __init__(self, func: Callable, /, nin: int, nout: int, *, name: str | None = None,
                 nargs: int | None = None, identity: Any = None,
                 call: Callable | None = None, reduce: Callable | None = None,
                 accumulate: Callable | None = None, at: Callable | None = None,
                 reduceat: Callable | None = None):
        if not callable(func):
            raise TypeError(f"jnp.ufunc needs a callable, got {type(func).__name__}")
        # Read-only properties: a ufunc is hashed as a static argument of jit.
        self._props = (func, operator.index(nin), operator.index(nout),
                       operator.index(nargs if nargs is not None else nin), identity)
        if self.nin < 1 or self.nout < 1:
            raise ValueError(f"a ufunc needs nin >= 1 and nout >= 1, got nin={nin}, nout={nout}")
        self.__name__ = name if name is not None else getattr(func, "__name__", "ufunc")
        self.__doc__ = getattr(func, "__doc__", None)
        self._reduce, self._accumulate = reduce, accumulate
        self._at, self._reduceat = at, reduceat
        self._jitted: dict[str, Callable] = {}
        #: the call without the ``out``/``where`` keywords (what the operators use)
        self.call_positional = call if call is not None else self._call_vectorized

    _func = property(lambda self: self._props[0])
    nin = property(lambda self: self._props[1], doc="The number of inputs.")
    nout = property(lambda self: self._props[2], doc="The number of outputs.")
    nargs = property(lambda self: self._props[3], doc="NumPy's nargs (the inputs).")
    identity = property(lambda self: self._props[4],
                        doc="The identity of the binary operation, or None.")

    def __hash__(self) -> int:
        return hash((self.__name__,) + self._props)

    def __eq__(self, other: Any) -> bool:
        return (isinstance(other, ufunc) and self.__name__ == other.__name__
                and self._props == other._props)

    def __repr__(self) -> str:
        return f"<jnp.ufunc '{self.__name__}'>"

    def __reduce__(self):
        # jnp.add & co. pickle (and copy) by name, as the functions they were did
        import plax.numpy
        if getattr(plax.numpy, self.__name__, None) is self:
            return (_builtin_ufunc, (self.__name__,))
        return super().__reduce__()

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_jitted": {}}  # compiled loops are rebuilt on first use

    def __call__(self, *args, out=None, where=None):
        if out is not None or where is not None:
            reject_out(out, repr(self), where=where)
        return self.call_positional(*args)

    def _jit(self, method: str, fun: Callable, static: tuple[str, ...]) -> Callable:
        """``fun`` jitted once per ufunc (its loops compile once per shape)."""
        jitted = self._jitted.get(method)
        if jitted is None:
            from plax.transforms.jit import jit
            jitted = self._jitted[method] = jit(fun, static_argnames=static)
        return jitted

    def _call_vectorized(self, *args):
        if len(args) != self.nin:
            raise TypeError(f"{self.__name__}() takes {self.nin} positional argument(s) but "
                            f"{len(args)} were given")
        check_arraylike(self.__name__, *args)
        from plax.numpy.vectorization import vectorize
        return self._jit("call", vectorize(self._func), ())(*args)

    def _require_binary(self, method: str) -> None:
        if self.nin != 2:
            raise ValueError(f"{method} only supported for binary ufuncs; {self.__name__} "
                             f"takes {self.nin} input(s)")
        if self.nout != 1:
            raise ValueError(f"{method} only supported for functions returning a single value; "
                             f"{self.__name__} returns {self.nout}")

    def _result_dtype(self, *args) -> np.dtype:
        """The dtype ``func`` gives for scalars of the arguments' dtypes."""
        from plax.transforms.jit import eval_shape
        from plax.core.shaped_array import ShapedArray
        avals = [ShapedArray((), get_aval(a).dtype, weak_type=get_aval(a).weak_type)
                 for a in args]
        return eval_shape(self._func, *avals).dtype

    # ------------------------------------------------------------------ reduce

    def reduce(self, a, axis: int | tuple[int, ...] | None = 0, dtype=None, out=None,
               keepdims: bool = False, initial=None, where=None):
        """Folds the function along ``axis``: ``f(...f(f(a[0], a[1]), a[2])..., a[n-1])``.

        NumPy's ``ufunc.reduce``.

        Args:
          a: the array to reduce.
          axis: the axis (default 0), None for all axes, or a tuple of axes (for the
            built-in reorderable ufuncs: add, multiply, maximum, minimum, the bitwise and
            logical ones, logaddexp and logaddexp2).
          dtype: the dtype the elements are converted to before the fold.
          out: must be None (plax arrays are immutable).
          keepdims: keep the reduced axes with size 1.
          initial: the starting value (default: the ufunc's identity; with no identity, the
            first element).
          where: a boolean mask of the elements taking part (needs an identity or ``initial``).

        Returns:
          The reduced array.

        Raises:
          ValueError: the ufunc is not binary with one output; an empty axis with no identity
            and no ``initial``; a ``where`` mask without an identity or ``initial``, or not
            boolean.

        Example:
          >>> jnp.multiply.reduce(jnp.array([[1, 2], [3, 4]]), axis=1)
          Array([ 2, 12], dtype=int32)
        """
        self._require_binary("reduce")
        check_arraylike(f"{self.__name__}.reduce", a)
        reject_out(out, f"{self.__name__}.reduce()")
        if initial is not None:
            check_arraylike(f"{self.__name__}.reduce", initial)
        if where is not None:
            check_arraylike(f"{self.__name__}.reduce", where)
            if self.identity is None and initial is None:
                raise ValueError(f"reduction operation {self.__name__!r} does not have an "
                                 "identity, so to use a where mask one has to specify "
                                 "'initial'.")
            if get_aval(where).dtype != np.bool_:
                raise ValueError(f"where argument must have dtype=bool; got "
                                 f"dtype={get_aval(where).dtype}")
        dtype = _as_dtype(dtype)
        if self._reduce is not None:
            return self._reduce(a, axis=axis, dtype=dtype, keepdims=keepdims, initial=initial,
                                where=where)
        return self._reduce_by_loop(a, axis, dtype, keepdims, initial, where)

    def _reduce_by_loop(self, a, axis, dtype, keepdims, initial, where):
        a = asarray_weak(a)
        nd = get_aval(a).ndim
        if isinstance(axis, (tuple, list)):
            if len(axis) != 1:
                raise NotImplementedError(
                    f"{self.__name__}.reduce over {len(axis)} axes: plax folds a general ufunc "
                    "along one axis at a time (its function is not known to be reorderable); "
                    "call reduce once per axis")
            axis = axis[0]
        ax = None if axis is None else canonicalize_axis(axis, nd)
        if initial is None:
            initial = self.identity
        return self._jit("reduce", self._reduce_loop, ("axis", "dtype", "keepdims", "has_init"))(
            a, where, initial if initial is not None else 0, axis=ax, dtype=dtype,
            keepdims=keepdims, has_init=initial is not None)

    def _reduce_loop(self, a, where, initial, *, axis, dtype, keepdims, has_init):
        from plax import lax
        from plax.numpy.shape_ops import moveaxis, ravel
        from plax.numpy.util import broadcast_to
        if dtype is None:
            dtype = self._result_dtype(a, a)
        shape = get_aval(a).shape
        if where is not None:
            where = broadcast_to(where, shape)
        if axis is None:
            kept = (1,) * len(shape)
            a, where = ravel(a), None if where is None else ravel(where)
        else:
            kept = shape[:axis] + (1,) + shape[axis + 1:]
            a, where = moveaxis(a, axis, 0), None if where is None else moveaxis(where, axis, 0)
        n, rest = get_aval(a).shape[0], get_aval(a).shape[1:]
        a = lax.convert_element_type(a, dtype)
        if n == 0 and not has_init:
            raise ValueError(f"zero-size array to reduction operation {self.__name__} which "
                             "has no identity")

        def fold(i, acc):
            step = self(acc, a[i])
            return step if where is None else lax.select(where[i], step, acc)

        if has_init:
            acc = lax.full(rest, initial, dtype)
            if n == 0:
                return lax.reshape(acc, kept) if keepdims else acc
            result = lax.fori_loop(0, n, lambda i, acc: _as(fold(i, acc), dtype), acc)
        else:
            result = lax.fori_loop(1, n, lambda i, acc: _as(fold(i, acc), dtype), a[0])
        return lax.reshape(result, kept) if keepdims else result

    # --------------------------------------------------------------- accumulate

    def accumulate(self, a, axis: int = 0, dtype=None, out=None):
        """The running fold along ``axis``: element ``i`` is the reduce of ``a[:i+1]``.

        NumPy's ``ufunc.accumulate``.

        Args:
          a: the array.
          axis: one axis (default 0).
          dtype: the dtype the elements are converted to before the fold.
          out: must be None.

        Returns:
          An array of ``a``'s shape.

        Raises:
          ValueError: the ufunc is not binary with one output, or ``axis`` is None or a tuple.

        Example:
          >>> jnp.maximum.accumulate(jnp.array([1, 3, 2, 5]))
          Array([1, 3, 3, 5], dtype=int32)
        """
        self._require_binary("accumulate")
        check_arraylike(f"{self.__name__}.accumulate", a)
        reject_out(out, f"{self.__name__}.accumulate()")
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError("accumulate does not allow multiple axes; give one integer axis")
        axis = canonicalize_axis(axis, get_aval(asarray_weak(a)).ndim)
        dtype = _as_dtype(dtype)
        if self._accumulate is not None:
            return self._accumulate(a, axis=axis, dtype=dtype)
        return self._jit("accumulate", self._accumulate_scan, ("axis", "dtype"))(
            asarray_weak(a), axis=axis, dtype=dtype)

    def _accumulate_scan(self, a, *, axis, dtype):
        from plax import lax
        from plax.numpy.shape_ops import moveaxis
        if dtype is None:
            dtype = self._result_dtype(a, a)
        a = lax.convert_element_type(moveaxis(a, axis, 0), dtype)
        if get_aval(a).shape[0] == 0:
            return moveaxis(a, 0, axis)

        def step(acc, x):
            acc = _as(self(acc, x), dtype)
            return acc, acc

        _, rest = lax.scan(step, a[0], a[1:])
        return moveaxis(lax.concatenate([a[:1], rest], 0), 0, axis)

    # ----------------------------------------------------------------------- at

    def at(self, a, indices, b=None, /, *, inplace: bool = True):
        """``a`` with the function applied at ``indices``, unbuffered, as a new array.

        NumPy's ``ufunc.at``: ``a[indices] = f(a[indices], b)`` where a repeated index is
        applied once for each time it occurs. plax arrays are immutable, so this needs
        ``inplace=False`` and returns the result.

        Args:
          a: the array.
          indices: any NumPy index of ``a`` (integers, slices, integer arrays, ...).
          b: the second operand of a binary ufunc, broadcast to the shape of ``a[indices]``;
            omitted for a unary one.
          inplace: must be False.

        Returns:
          The updated array, of ``a``'s shape and dtype.

        Raises:
          NotImplementedError: ``inplace`` is not False.
          TypeError: ``b`` is given to a unary ufunc or missing for a binary one.

        Example:
          >>> jnp.add.at(jnp.zeros(4, int), jnp.array([0, 0, 2]), 1, inplace=False)
          Array([2, 0, 1, 0], dtype=int32)
        """
        if inplace:
            raise NotImplementedError(
                "jnp.ufunc.at cannot modify an array in place: plax arrays are immutable. Pass "
                "inplace=False and use the result, e.g. x = jnp.add.at(x, i, v, inplace=False)")
        if self.nout != 1:
            raise ValueError(f"at only supported for functions returning a single value; "
                             f"{self.__name__} returns {self.nout}")
        operands = () if b is None else (b,)
        if len(operands) + 1 != self.nin:
            raise TypeError(f"{self.__name__}.at takes {self.nin - 1} operand(s) after the "
                            f"indices, got {len(operands)}")
        check_arraylike(f"{self.__name__}.at", a, *operands)
        if self._at is not None:
            return self._at(a, indices, *operands)
        return self._at_by_scan(asarray_weak(a), indices, *operands)

    def _at_by_scan(self, a, indices, *operands):
        from plax import lax
        from plax.numpy.util import broadcast_to
        aval = get_aval(a)
        # the flat position of every element a[indices] selects, in NumPy's order and layout
        from plax.numpy.indexing import flat_positions
        positions = flat_positions(aval.shape, indices)
        shape = get_aval(positions).shape
        count = get_aval(positions).size
        if count == 0:
            return a
        positions = lax.reshape(positions, (count,))
        flat = lax.reshape(a, (aval.size,))
        xs = (positions,) + tuple(lax.reshape(broadcast_to(asarray_weak(b), shape), (count,))
                                  for b in operands)

        def step(acc, x):
            p, *vals = x
            acc = lax.dynamic_update_index_in_dim(
                acc, _as(self(lax.dynamic_index_in_dim(acc, p, 0, False), *vals), aval.dtype),
                p, 0)
            return acc, None

        flat, _ = lax.scan(step, flat, xs)
        return lax.reshape(flat, aval.shape)

    # ----------------------------------------------------------------- reduceat

    def reduceat(self, a, indices, axis: int = 0, dtype=None, out=None):
        """Folds over the slices of ``axis`` that ``indices`` start.

        NumPy's ``ufunc.reduceat``: for each ``i``, ``reduce(a[indices[i]:indices[i+1]])``
        along ``axis`` (the last slice runs to the end); where ``indices[i] >=
        indices[i+1]`` the result is ``a[indices[i]]``.

        Args:
          a: an array of at least one dimension.
          indices: a one-dimensional integer array of positions in ``[0, a.shape[axis])``.
          axis: one axis (default 0).
          dtype: the dtype the elements are converted to before the fold.
          out: must be None.

        Returns:
          ``a``'s shape with ``axis`` of length ``len(indices)``.

        Raises:
          ValueError: the ufunc is not binary with one output; ``a`` is a scalar; ``indices``
            is not one-dimensional; ``axis`` is not one integer.
          IndexError: a concrete index is outside ``[0, a.shape[axis])`` (traced indices
            outside the range are clamped to it).

        Example:
          >>> jnp.add.reduceat(jnp.arange(8), jnp.array([0, 4, 1, 5]))
          Array([ 6,  4, 10, 18], dtype=int32)
        """
        self._require_binary("reduceat")
        check_arraylike(f"{self.__name__}.reduceat", a, indices)
        reject_out(out, f"{self.__name__}.reduceat()")
        a, indices = asarray_weak(a), asarray_weak(indices)
        a_aval, i_aval = get_aval(a), get_aval(indices)
        if a_aval.ndim == 0:
            raise ValueError("reduceat: a must have 1 or more dimension, got a.shape=()")
        if i_aval.ndim != 1:
            raise ValueError(f"reduceat: indices must be one-dimensional, got "
                             f"indices.shape={i_aval.shape}")
        if i_aval.dtype.kind not in "iu":
            raise TypeError(f"reduceat: indices must be integers, got dtype {i_aval.dtype}")
        if axis is None or isinstance(axis, (tuple, list)):
            raise ValueError("reduceat requires a single integer axis.")
        axis = canonicalize_axis(axis, a_aval.ndim)
        n = a_aval.shape[axis]
        from plax.core.trace import Tracer
        if not isinstance(indices, Tracer):
            host = np.asarray(indices)
            bad = host[(host < 0) | (host >= n)]
            if bad.size:
                raise IndexError(f"index {int(bad[0])} out-of-bounds in {self.__name__}."
                                 f"reduceat [0, {n})")
        dtype = _as_dtype(dtype)
        if self._reduceat is not None:
            return self._reduceat(a, indices, axis=axis, dtype=dtype)
        return self._jit("reduceat", self._reduceat_loop, ("axis", "dtype"))(
            a, indices, axis=axis, dtype=dtype)

    def _reduceat_loop(self, a, indices, *, axis, dtype):
        from plax import lax
        from plax.numpy.shape_ops import moveaxis
        if dtype is None:
            dtype = self._result_dtype(a, a)
        a = lax.convert_element_type(moveaxis(a, axis, 0), dtype)
        n, m = get_aval(a).shape[0], get_aval(indices).shape[0]
        starts = lax.clamp(np.int32(0), lax.convert_element_type(indices, np.int32),
                           np.int32(n - 1))
        ends = lax.concatenate([starts[1:], lax.full((1,), n, np.int32)], 0)
        result = _as(a[starts], dtype)
        # one sweep over the axis: row j joins every slice that holds it past its start
        col = (m,) + (1,) * (get_aval(a).ndim - 1)
        starts_col, ends_col = lax.reshape(starts, col), lax.reshape(ends, col)

        def fold(j, acc):
            j = lax.convert_element_type(j, np.int32)  # (the loop counts in int64 under x64)
            inside = lax.bitwise_and(lax.lt(starts_col, j), lax.lt(j, ends_col))
            row = lax.broadcast_in_dim(a[j], get_aval(acc).shape,
                                       tuple(range(1, get_aval(acc).ndim)))
            return lax.select(lax.broadcast_in_dim(inside, get_aval(acc).shape,
                                                   tuple(range(get_aval(acc).ndim))),
                              _as(self(acc, row), dtype), acc)

        result = lax.fori_loop(0, n, fold, result)
        return moveaxis(result, 0, axis)

    # -------------------------------------------------------------------- outer

    def outer(self, A, B, /):
        """The function at every pair of elements: ``result[i..., j...] = f(A[i...], B[j...])``.

        NumPy's ``ufunc.outer``.

        Args:
          A, B: arrays.

        Returns:
          An array of shape ``A.shape + B.shape``.

        Raises:
          ValueError: the ufunc is not binary with one output.

        Example:
          >>> jnp.multiply.outer(jnp.arange(1, 3), jnp.arange(1, 4))
          Array([[1, 2, 3],
                 [2, 4, 6]], dtype=int32)
        """
        self._require_binary("outer")
        check_arraylike(f"{self.__name__}.outer", A, B)
        from plax import lax
        A, B = asarray_weak(A), asarray_weak(B)
        A = lax.reshape(A, get_aval(A).shape + (1,) * get_aval(B).ndim)
        return self.call_positional(A, B)


def frompyfunc(func: Callable, /, nin: int, nout: int, *, identity: Any = None) -> ufunc:
    """A :class:`ufunc` from a function of ``nin`` scalars returning ``nout`` values.

    Calling it broadcasts the arguments and maps ``func`` over the elements (with
    ``vectorize``); its methods fold ``func`` with loops.

    Args:
      func: the scalar function (traced by plax, so written with ``jnp``/``lax``).
      nin: the number of inputs.
      nout: the number of outputs.
      identity: the identity of a binary ``func``, if any (used by ``reduce``).

    Returns:
      A ``jnp.ufunc``.

    Example:
      >>> hypot = jnp.frompyfunc(lambda x, y: jnp.sqrt(x * x + y * y), 2, 1)
      >>> hypot.reduce(jnp.array([3.0, 4.0, 12.0]))
      Array(13., dtype=float32)
    """
    return ufunc(func, nin, nout, identity=identity)


def _builtin_ufunc(name: str) -> ufunc:
    """``jnp.<name>`` (what a pickled built-in ufunc loads as)."""
    import plax.numpy
    return getattr(plax.numpy, name)


def _as_dtype(dtype) -> np.dtype | None:
    if dtype is None:
        return None
    from plax import dtypes
    return dtypes.to_numpy_dtype(dtype)


def _as(x, dtype: np.dtype):
    """``x`` converted to ``dtype`` (a loop's carry keeps its type)."""
    from plax import lax
    return x if get_aval(x).dtype == dtype else lax.convert_element_type(x, dtype)

