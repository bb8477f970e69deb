"""Reduction primitives: reduce_sum/prod/max/min/and/or and argmax/argmin."""
from __future__ import annotations

from typing import Sequence

import numpy as np

import plax.lax.binary as B
from plax import dtypes
from plax.core.pretty_print import pp_param_rules
from plax.core.primitive import Primitive
from plax.lowering.fusion import ARG_REDUCTION, REDUCTION, register_fusible
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.lax.base import (BOOL_OR_INT, NUMBER, ORDERED, asarray, aval_of, canonicalize_axis,
                           check_dtype)
from plax.transforms.jvp import Zero, deflinear, defjvp, defzero


def _check_axes(name, x, axes):
    if len(set(axes)) != len(axes) or any(not 0 <= a < x.ndim for a in axes):
        raise ValueError(f"{name}: axes {axes} must be unique and in [0, {x.ndim}) for operand "
                         f"shape {x.shape}")


def _shifted_past(axes, d: int) -> tuple:
    """``axes`` of an operand batched along ``d``: each at or after ``d`` moves up by one,
    as NumPy ints (JAX's batcher computes them with NumPy, so its jaxprs print
    ``axes=(np.int64(1),)``)."""
    return tuple(np.add(axes, np.greater_equal(axes, d), dtype=np.int64)) if axes else ()


def _reduce_prim(name: str, allowed) -> Primitive:
    p = Primitive(name)

    def abstract_eval(x, *, axes):
        check_dtype(name, x, allowed)
        _check_axes(name, x, axes)
        return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype,
                           x.weak_type)

    p.def_abstract_eval(abstract_eval)

    def batch(vals, dims, *, axes):
        (x,), (d,) = vals, dims
        new_axes = _shifted_past(axes, d)
        out_dim = d - sum(a < d for a in axes)
        return p.bind(x, axes=new_axes), out_dim

    register_rule("batch", p)(batch)
    register_fusible(p, REDUCTION)
    return p


def _reducer(prim):
    def op(operand, axes: Sequence[int], out_sharding=None):
        if out_sharding is not None:  # the result's explicit sharding (JAX: reduce_sum's)
            from plax.lax.base import out_sharded
            return out_sharded(lambda: op(operand, axes), out_sharding)
        operand = asarray(operand)
        nd = aval_of(operand).ndim
        axes = tuple(sorted(canonicalize_axis(a, nd) for a in axes))
        return prim.bind(operand, axes=axes)
    op.__name__ = prim.name
    op.__doc__ = f"``{prim.name}`` of ``x`` over ``axes`` (see jax.lax.{prim.name})."
    return op


reduce_sum_p = _reduce_prim("reduce_sum", NUMBER)
# JAX's reduce_sum alone among the reductions records an ``out_sharding`` (None unless given)
pp_param_rules[reduce_sum_p] = lambda params: {**params, "out_sharding": None}
reduce_prod_p = _reduce_prim("reduce_prod", NUMBER)
reduce_max_p = _reduce_prim("reduce_max", ORDERED + ("complex",))
reduce_min_p = _reduce_prim("reduce_min", ORDERED + ("complex",))
reduce_and_p = _reduce_prim("reduce_and", BOOL_OR_INT)
reduce_or_p = _reduce_prim("reduce_or", BOOL_OR_INT)
reduce_xor_p = _reduce_prim("reduce_xor", BOOL_OR_INT)

reduce_sum, reduce_prod, reduce_max, reduce_min, reduce_and, reduce_or, reduce_xor = map(
    _reducer, (reduce_sum_p, reduce_prod_p, reduce_max_p, reduce_min_p, reduce_and_p,
               reduce_or_p, reduce_xor_p))


def _reduce_sum_transpose(ct, x, *, axes):
    if type(ct) is Zero:
        return [None]
    from plax.lax.shape import broadcast_in_dim
    shape = x.aval.shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    return [broadcast_in_dim(ct, shape, kept)]


deflinear(reduce_sum_p, _reduce_sum_transpose)
for _p in (reduce_and_p, reduce_or_p, reduce_xor_p):
    defzero(_p)


def _expand_back(y, shape, axes):
    from plax.lax.shape import broadcast_in_dim
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    return broadcast_in_dim(y, shape, kept)


def _reduce_chooser_jvp(prim):
    """max/min: the tangent of the chosen element, averaged over ties."""

    def derivative(t, x, *, axes):
        from plax.lax.convert import convert_element_type
        ans = prim.bind(x, axes=axes)
        shape = aval_of(x).shape
        hits = convert_element_type(B.eq(x, _expand_back(ans, shape, axes)), aval_of(t).dtype)
        counts = reduce_sum(hits, axes)
        return B.div(reduce_sum(B.mul(t, hits), axes), counts)

    return derivative


defjvp(reduce_max_p, _reduce_chooser_jvp(reduce_max_p))
defjvp(reduce_min_p, _reduce_chooser_jvp(reduce_min_p))


def _reduce_prod_jvp(t, x, *, axes):
    # sum_i t_i * prod_{j != i} x_j, with the product of the others built from exclusive prefix
    # and suffix products so that zeros in x are handled exactly.
    from plax.lax.cumulative import cumprod
    from plax.lax.shape import pad, reshape, transpose
    a = aval_of(x)
    if not axes:
        return t
    kept = [i for i in range(a.ndim) if i not in axes]
    perm = kept + list(axes)
    kept_shape = tuple(a.shape[i] for i in kept)
    n = int(np.prod([a.shape[i] for i in axes]))
    xs = reshape(transpose(x, perm), kept_shape + (n,))
    ts = reshape(transpose(t, perm), kept_shape + (n,))
    k = len(kept_shape)
    one = B.full_like_scalar(1, xs)
    before = cumprod(pad(xs, one, [(0, 0, 0)] * k + [(1, -1, 0)]), axis=k)
    after = cumprod(pad(xs, one, [(0, 0, 0)] * k + [(-1, 1, 0)]), axis=k, reverse=True)
    return reduce_sum(B.mul(ts, B.mul(before, after)), (k,))


defjvp(reduce_prod_p, _reduce_prod_jvp)


# ------------------------------------------------------------------ argmax / argmin

def _arg_prim(name: str) -> Primitive:
    p = Primitive(name)

    def abstract_eval(x, *, axes, index_dtype):
        check_dtype(name, x, ORDERED)
        if len(axes) != 1:
            raise ValueError(f"{name} takes exactly one axis, got axes={axes}")
        _check_axes(name, x, axes)
        if x.shape[axes[0]] == 0:
            raise ValueError(f"{name} of an empty axis (axis {axes[0]} of shape {x.shape}) has no "
                             "answer")
        if not dtypes.is_integer(index_dtype):
            raise TypeError(f"{name} index_dtype must be an integer type, got {index_dtype}")
        return ShapedArray(tuple(d for i, d in enumerate(x.shape) if i not in axes), index_dtype)

    p.def_abstract_eval(abstract_eval)
    defzero(p)

    def batch(vals, dims, *, axes, index_dtype):
        (x,), (d,) = vals, dims
        (a,) = axes
        return p.bind(x, axes=_shifted_past(axes, d), index_dtype=index_dtype), d - (a < d)

    register_rule("batch", p)(batch)
    return p


argmax_p = _arg_prim("argmax")
argmin_p = _arg_prim("argmin")
register_fusible(argmax_p, ARG_REDUCTION)  # (for a generator that tracks the index)
register_fusible(argmin_p, ARG_REDUCTION)


def argmax(operand, axis: int, index_dtype=np.int32):
    """Index of the largest element along ``axis`` (the first one on ties; NaN counts as largest)."""
    operand = asarray(operand)
    axis = canonicalize_axis(axis, aval_of(operand).ndim)
    return argmax_p.bind(operand, axes=(axis,), index_dtype=dtypes.canonicalize_dtype(index_dtype))


def argmin(operand, axis: int, index_dtype=np.int32):
    """Index of the smallest element along ``axis`` (the first one on ties; NaN counts as smallest)."""
    operand = asarray(operand)
    axis = canonicalize_axis(axis, aval_of(operand).ndim)
    return argmin_p.bind(operand, axes=(axis,), index_dtype=dtypes.canonicalize_dtype(index_dtype))

