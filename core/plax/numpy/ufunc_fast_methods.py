"""The fast methods of the built-in ufunc objects (``jnp.add.reduce`` is ``jnp.sum`` ...).

Each function here has the signature :class:`plax.numpy.ufunc_class.ufunc` calls its
``reduce``/``accumulate``/``at`` hook with. A built-in without a hook for a method (say
``subtract.reduce``) uses the ufunc's generic loop, which applies the function in NumPy's
order. The reductions here serve only reorderable operations, so they accept several axes.
"""

from __future__ import annotations

import math

import numpy as np

from plax import dtypes, lax
from plax.core.trace import get_aval
from plax.numpy.util import asarray_weak, broadcast_to, canonicalize_axis_tuple


def _converted(a, dtype):
    a = asarray_weak(a)
    return a if dtype is None else lax.convert_element_type(a, dtype)


def _finish(result, axes: tuple[int, ...], keepdims: bool, initial, combine):
    """``combine(result, initial)`` where ``initial`` is given, then the kept axes."""
    if initial is not None:
        result = combine(result, initial)
    if keepdims:
        result = lax.expand_dims(result, axes)
    return result


def extremum_reduce(name: str):
    """``maximum.reduce``/``minimum.reduce``: ``jnp.max``/``jnp.min``, after ``dtype``."""
    def reduce(a, *, axis, dtype, keepdims, initial, where):
        from plax.numpy import reductions
        fn = reductions.max if name == "max" else reductions.min
        return fn(_converted(a, dtype), axis=axis, keepdims=keepdims, initial=initial,
                  where=where)
    return reduce


def bitwise_reduce(ufunc_name: str, lax_reduce, identity: int, *, logical: bool = False):
    """``bitwise_{and,or,xor}.reduce`` (integers and booleans) and, with ``logical``,
    ``logical_{and,or,xor}.reduce`` (any dtype, compared with zero, a boolean result)."""
    def reduce(a, *, axis, dtype, keepdims, initial, where):
        from plax.numpy import ufuncs
        a = _converted(a, dtype)
        if logical:
            a = ufuncs._as_bool(a)
        elif get_aval(a).dtype.kind not in "biu":
            raise TypeError(f"{ufunc_name}.reduce needs integer or boolean input, got "
                            f"{get_aval(a).dtype}")
        aval = get_aval(a)
        if where is not None:
            fill = lax.full(aval.shape, bool(identity) if aval.dtype == np.bool_ else identity,
                            aval.dtype)
            a = lax.select(broadcast_to(where, aval.shape), a, fill)
        axes = canonicalize_axis_tuple(axis, aval.ndim)
        return _finish(lax_reduce(a, axes), axes, keepdims, initial,
                       getattr(ufuncs, ufunc_name))
    return reduce


def logaddexp_reduce(base2: bool):
    """``logaddexp.reduce`` (``logsumexp``) and ``logaddexp2.reduce`` (the same in base 2)."""
    def reduce(a, *, axis, dtype, keepdims, initial, where):
        from plax.numpy import ufuncs
        from plax.numpy.util import promote_args_inexact
        from plax.scipy.special import logsumexp
        (a,) = promote_args_inexact("logaddexp.reduce", _converted(a, dtype))
        aval = get_aval(a)
        axes = canonicalize_axis_tuple(axis, aval.ndim)
        if base2:
            ln2 = lax.full((), math.log(2.0), aval.dtype)
            result = lax.div(logsumexp(lax.mul(a, ln2), axis=axes, where=where), ln2)
        else:
            result = logsumexp(a, axis=axes, where=where)
        return _finish(result, axes, keepdims, initial,
                       ufuncs.logaddexp2 if base2 else ufuncs.logaddexp)
    return reduce


def cumulative(name: str):
    """``add.accumulate`` (``cumsum``), ``multiply.accumulate`` (``cumprod``), and
    ``maximum``/``minimum.accumulate`` (``lax.cummax``/``cummin``, which propagate NaN as
    ``maximum`` does; booleans go through uint8)."""
    def accumulate(a, *, axis, dtype):
        from plax.numpy import reductions
        if name in ("cumsum", "cumprod"):
            return getattr(reductions, name)(a, axis=axis, dtype=dtype)
        a = _converted(a, dtype)
        scan = lax.cummax if name == "cummax" else lax.cummin
        if get_aval(a).dtype == np.bool_:
            return lax.convert_element_type(scan(lax.convert_element_type(a, np.uint8), axis),
                                            np.bool_)
        return scan(a, axis)
    return accumulate


def scatter_at(ufunc_name: str, method: str):
    """``add.at`` and friends as one scatter (``a.at[indices].add(b)`` ...): the scatter
    applies every occurrence of a repeated index, as NumPy's unbuffered ``at`` does.
    Booleans go through the ufunc's generic loop (a scatter-add has no boolean form)."""
    def at(a, indices, b):
        from plax.numpy import ufuncs
        a = asarray_weak(a)
        if get_aval(a).dtype == np.bool_ or dtypes.dtype(b) == np.bool_:
            return getattr(ufuncs, ufunc_name)._at_by_scan(a, indices, b)
        return getattr(a.at[indices], method)(b)
    return at


# the segment reduction of each built-in's reduceat, and the dtype kinds it serves (booleans
# and complex extremes keep the generic loop)
_SEGMENT_REDUCTIONS = {"add": ("segment_sum", "iufc"), "multiply": ("segment_prod", "iufc"),
                       "maximum": ("segment_max", "iuf"), "minimum": ("segment_min", "iuf")}


def segment_reduceat(ufunc_name: str):
    """``add.reduceat`` and friends as one segment reduction when the indices do not
    decrease (the common case: slice starts), instead of the generic loop's sweep that
    visits every (slice, row) pair: each row's segment is the number of starts at or before
    it, less one (rows before the first start belong to none), and where a start repeats,
    the result is ``a[start]``, NumPy's rule for ``indices[i] >= indices[i+1]``. Decreasing
    indices (seen when concrete; traced ones through a ``cond``) take the generic loop."""
    segment_name, kinds = _SEGMENT_REDUCTIONS[ufunc_name]

    def reduceat(a, indices, *, axis, dtype):
        from plax.core.trace import Tracer
        from plax.numpy import ufuncs
        ufunc = getattr(ufuncs, ufunc_name)
        work = dtype if dtype is not None else ufunc._result_dtype(a, a)
        loop = ufunc._jit("reduceat", ufunc._reduceat_loop, ("axis", "dtype"))
        m = get_aval(indices).shape[0]
        if np.dtype(work).kind not in kinds or m == 0:
            return loop(a, indices, axis=axis, dtype=dtype)
        if not isinstance(indices, Tracer):
            if np.any(np.diff(np.asarray(indices)) < 0):
                return loop(a, indices, axis=axis, dtype=dtype)
            return _segments_jit(ufunc_name)(a, indices, axis=axis, dtype=work)
        # traced indices: which path runs is decided when they are known
        rising = lax.reduce_and(lax.le(indices[:-1], indices[1:]), (0,)) if m > 1 else True
        if rising is True:
            return _segments_jit(ufunc_name)(a, indices, axis=axis, dtype=work)
        return lax.cond(rising,
                        lambda a, i: _segments_jit(ufunc_name)(a, i, axis=axis, dtype=work),
                        lambda a, i: loop(a, i, axis=axis, dtype=work), a, indices)
    return reduceat


_SEGMENT_JITS: dict = {}


def _segments_jit(ufunc_name: str):
    jitted = _SEGMENT_JITS.get(ufunc_name)
    if jitted is None:
        from plax.transforms.jit import jit
        jitted = _SEGMENT_JITS[ufunc_name] = jit(
            lambda a, indices, *, axis, dtype: _reduceat_by_segments(
                ufunc_name, a, indices, axis, dtype), static_argnames=("axis", "dtype"))
    return jitted


def _reduceat_by_segments(ufunc_name, a, indices, axis, dtype):
    from plax import ops
    from plax.numpy.reductions import cumsum
    from plax.numpy.shape_ops import moveaxis
    a = lax.convert_element_type(moveaxis(a, axis, 0), dtype)
    n, m = get_aval(a).shape[0], get_aval(indices).shape[0]
    # clamped into the axis, as the generic loop clamps traced indices
    starts = lax.clamp(np.int32(0), lax.convert_element_type(indices, np.int32), np.int32(n - 1))
    marks = lax.full((n,), 0, np.int32).at[starts].add(np.int32(1))
    segment_ids = lax.sub(cumsum(marks), np.int32(1))
    reduce = getattr(ops, _SEGMENT_REDUCTIONS[ufunc_name][0])
    result = reduce(a, segment_ids, num_segments=m, indices_are_sorted=True)
    if m > 1:
        repeated = lax.concatenate([lax.ge(starts[:-1], starts[1:]),
                                    lax.full((1,), False, np.bool_)], 0)
        shape = get_aval(result).shape
        result = lax.select(lax.broadcast_in_dim(repeated, shape, (0,)), a[starts], result)
    return moveaxis(result, 0, axis)
