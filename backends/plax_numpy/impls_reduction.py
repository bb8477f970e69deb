"""NumPy implementations of reductions, argmax/argmin, cumulative ops and sort.

Every kernel here allocates its results on every path (``fresh_result``: a jitted program
need not keep their operands from in-place reuse while the results live).
"""
from __future__ import annotations

import math

import numpy as np

from plax import lax
from plax.dtypes import bfloat16
from plax.lax.cumulative import blocked_scan
from plax.lowering import complex_extremes, signed_zeros
from plax_numpy.registry import impl as _impl


def impl(*primitives):
    """Registers the decorated kernel for ``primitives``, marked fresh (see
    :func:`plax_numpy.registry.impl`)."""
    return _impl(*primitives, fresh=True)


def _upcast(x):
    return x.astype(np.float32) if x.dtype.itemsize == 2 and x.dtype.kind in "fV" else x


@impl(lax.reduce_sum_p)
def _reduce_sum(x, *, axes):
    with np.errstate(all="ignore"):
        return np.asarray(np.sum(_upcast(x), axis=axes, dtype=None if x.dtype == bfloat16 or
                                 x.dtype == np.float16 else x.dtype)).astype(x.dtype)


@impl(lax.reduce_prod_p)
def _reduce_prod(x, *, axes):
    with np.errstate(all="ignore"):
        return np.asarray(np.prod(_upcast(x), axis=axes, dtype=None if x.dtype.itemsize == 2 and
                                  x.dtype.kind in "fV" else x.dtype)).astype(x.dtype)


def _lowest(dtype):
    if dtype.kind == "b":
        return False
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    return -np.inf


def _highest(dtype):
    if dtype.kind == "b":
        return True
    if dtype.kind in "iu":
        return np.iinfo(dtype).max
    return np.inf


def _extreme(fn, identity):
    def reduce(x, *, axes):
        x = np.asarray(x)
        if x.dtype.kind == "c":
            # XLA's fold of its lexicographic (real, imag) max/min
            return _complex_extreme(x, axes, fn is np.max)
        y = _upcast(x)
        out = np.asarray(fn(y, axis=axes, initial=identity(x.dtype))).astype(x.dtype)
        return signed_zeros.fix_reduced_zeros(out, x, "max" if fn is np.max else "min",
                                              lambda found: found.any(axis=axes))
    return reduce


def _complex_extreme(x, axes, is_max):
    kept = [i for i in range(x.ndim) if i not in axes]
    kept_shape = [x.shape[i] for i in kept]
    moved = np.transpose(x, kept + list(axes)).reshape(kept_shape + [math.prod(x.shape[i] for i in axes)])
    return complex_extremes.reduce_extreme(moved, is_max)


impl(lax.reduce_max_p)(_extreme(np.max, _lowest))
impl(lax.reduce_min_p)(_extreme(np.min, _highest))


@impl(lax.reduce_and_p)
def _reduce_and(x, *, axes):
    if x.dtype == np.bool_:
        return np.all(x, axis=axes)
    return np.bitwise_and.reduce(x, axis=axes, initial=-1 if x.dtype.kind == "i" else
                                 np.iinfo(x.dtype).max).astype(x.dtype)


@impl(lax.reduce_or_p)
def _reduce_or(x, *, axes):
    if x.dtype == np.bool_:
        return np.any(x, axis=axes)
    return np.bitwise_or.reduce(x, axis=axes).astype(x.dtype)


@impl(lax.reduce_xor_p)
def _reduce_xor(x, *, axes):
    if x.dtype == np.bool_:
        return np.logical_xor.reduce(x, axis=axes)
    return np.bitwise_xor.reduce(x, axis=axes).astype(x.dtype)


@impl(lax.argmax_p)
def _argmax(x, *, axes, index_dtype):
    return np.argmax(_upcast(x), axis=axes[0]).astype(index_dtype)


@impl(lax.argmin_p)
def _argmin(x, *, axes, index_dtype):
    return np.argmin(_upcast(x), axis=axes[0]).astype(index_dtype)


def _cumulative(accumulate):
    def fn(x, *, axis, reverse):
        x = np.asarray(x)
        y = np.flip(x, axis) if reverse else x
        with np.errstate(all="ignore"):
            out = np.asarray(accumulate(_upcast(y), axis)).astype(x.dtype)
        return np.flip(out, axis) if reverse else out
    return fn


def _xla_ordered(combine, identity, exact):
    """cumsum/cumprod: integers and bools (exact in any order) with NumPy's scan, floating
    types in XLA's order (:func:`plax.lax.cumulative.blocked_scan`), so the last digits agree with JAX."""
    def fn(x, *, axis, reverse):
        x = np.asarray(x)
        if x.dtype.kind in "biu":
            return exact(x, axis=axis, reverse=reverse)
        with np.errstate(all="ignore"):
            return blocked_scan(x, axis, reverse, combine, identity)
    return fn


impl(lax.cumsum_p)(_xla_ordered(np.add, 0, _cumulative(
    lambda y, a: np.cumsum(y, axis=a, dtype=y.dtype))))
impl(lax.cumprod_p)(_xla_ordered(np.multiply, 1, _cumulative(
    lambda y, a: np.cumprod(y, axis=a, dtype=y.dtype))))
def _signed_zero_scan(which, accumulate):
    # JAX's zero sign (plax.lowering.signed_zeros): +0 once a +0 was seen (max), -0 (min)
    def scan(y, a):
        out = np.asarray(accumulate(y, axis=a))
        return signed_zeros.fix_reduced_zeros(out, y, which,
                                              lambda found: np.logical_or.accumulate(found, a))
    real = _cumulative(scan)

    def fn(x, *, axis, reverse):
        if np.asarray(x).dtype.kind == "c":
            return _complex_scan(np.asarray(x), axis, reverse, which == "max")
        return real(x, axis=axis, reverse=reverse)
    return fn


def _complex_scan(x, axis: int, reverse: bool, is_max: bool):
    """cummax/cummin of complex values as XLA computes them, a window reduction: each
    prefix (``reverse``: each suffix) folded in its own order by JAX's lexicographic
    max/min from the identity (plax.lowering.complex_extremes). Forward, the fold carries
    from one prefix to the next; a suffix's fold starts anew (its first element comes
    first): ``reverse`` finds every suffix's result at once (complex_extremes.reverse_scan)."""
    moved = np.moveaxis(x, axis, -1)
    if reverse:
        return np.moveaxis(complex_extremes.reverse_scan(moved, is_max), -1, axis)
    out = np.empty_like(moved)
    n = moved.shape[-1]
    acc = np.full(moved.shape[:-1], complex(-np.inf if is_max else np.inf, 0.0), x.dtype)
    for k in range(n):
        step = moved[..., k]
        acc = np.where(complex_extremes.first_wins(acc, step, is_max), acc, step)
        out[..., k] = acc
    return np.moveaxis(out, -1, axis)


impl(lax.cummax_p)(_signed_zero_scan("max", np.maximum.accumulate))
impl(lax.cummin_p)(_signed_zero_scan("min", np.minimum.accumulate))


def _sort_key(k):
    k = _upcast(np.asarray(k))
    if k.dtype.kind == "c":
        return [k.imag, k.real]  # lexsort: last key is primary
    return [k]


@impl(lax.sort_p)
def _sort(*operands, dimension, is_stable, num_keys):
    ops = [np.moveaxis(np.asarray(o), dimension, -1) for o in operands]
    if num_keys == 1 and ops[0].dtype.kind != "c":
        perm = np.argsort(_upcast(ops[0]), axis=-1, kind="stable")
    else:
        keys = []
        for k in reversed(ops[:num_keys]):  # np.lexsort's primary key is the last
            keys.extend(_sort_key(k))
        perm = np.lexsort(keys, axis=-1)
    return [np.moveaxis(np.take_along_axis(o, perm, axis=-1), -1, dimension) for o in ops]
