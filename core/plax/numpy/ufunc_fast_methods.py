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
