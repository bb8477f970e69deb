"""top_k: the ``k`` largest entries along an axis, with their indices."""
from __future__ import annotations

from typing import Callable

import numpy as np

from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.lax.base import ORDERED, asarray, aval_of, canonicalize_axis, check_dtype
from plax.transforms.jvp import Zero

top_k_p = Primitive("top_k", multiple_results=True)


@top_k_p.def_abstract_eval
def _top_k_abstract_eval(x, *, k, axis):
    check_dtype("top_k", x, ORDERED)
    if x.ndim == 0 or not 0 <= axis < x.ndim:
        raise ValueError(f"top_k axis {axis} is out of bounds for operand shape {x.shape}")
    if k < 0:
        raise ValueError(f"k argument to top_k must be nonnegative, got {k}")
    if k > x.shape[axis]:
        raise ValueError(f"k argument to top_k must be no larger than size along axis; got "
                         f"k={k} with shape={list(x.shape)} and axis={axis}")
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    return ShapedArray(shape, x.dtype, x.weak_type), ShapedArray(shape, np.dtype(np.int32))


def top_k(operand, k: int, *, axis: int = -1) -> list:
    """The ``k`` largest entries of ``operand`` along ``axis``, in descending order, and
    their indices (int32). Ties keep the lower index first; NaN counts as largest.

    Args:
      operand: a real, integer or boolean array of rank at least 1.
      k: how many entries to keep (at most the axis' length).
      axis: the axis to search (default: the last).

    Returns:
      ``[values, indices]`` (a list, as in JAX), each with ``axis`` of length ``k``.

    Example:
      >>> lax.top_k(jnp.array([1., 3., 2.]), 2)
      [Array([3., 2.], dtype=float32), Array([1, 2], dtype=int32)]
    """
    x = asarray(operand)
    a = aval_of(x)
    if np.dtype(a.dtype).kind == "c":
        raise ValueError("top_k is not compatible with complex inputs.")
    axis = canonicalize_axis(axis, a.ndim)
    if int(k) != k:
        raise TypeError(f"k argument to top_k must be an integer, got {k!r}")
    return list(top_k_p.bind(x, k=int(k), axis=axis))  # a list, as JAX returns


def top_k_by_sorting(x, k: int, axis: int, ascending_order: Callable, xp=None) -> list:
    """The value of :data:`top_k_p` on a host or device array, from a stable ascending sort:
    the sort of the reversed axis, read backwards, is descending with ties in index order
    (and NaN, which an ascending sort puts last, first). Backends pass their sort.

    Args:
      x: a host or device array.
      k, axis: the primitive's parameters (``axis`` non-negative).
      ascending_order: ``f(v) -> order``, the stable ascending argsort of ``v`` along its
        last axis, NaN last (e.g. ``lambda v: np.argsort(v, axis=-1, kind="stable")``).
      xp: the array module of ``x`` (default NumPy).

    Returns:
      ``[values, indices]`` (int32), C-contiguous, with ``axis`` of length ``k``.

    Example:
      >>> top_k_by_sorting(np.array([1., 3., 3.]), 2, 0,
      ...                  lambda v: np.argsort(v, axis=-1, kind="stable"))
      [array([3., 3.]), array([1, 2], dtype=int32)]
    """
    xp = np if xp is None else xp
    x = xp.moveaxis(x, axis, -1)
    n = x.shape[-1]
    order = ascending_order(x[..., ::-1])[..., ::-1][..., :k]
    idx = (n - 1 - order).astype(np.int32)
    values = xp.take_along_axis(x, idx.astype(np.int64), axis=-1)
    return [xp.ascontiguousarray(xp.moveaxis(values, -1, axis)),
            xp.ascontiguousarray(xp.moveaxis(idx, -1, axis))]


@register_rule("jvp", top_k_p)
def _top_k_jvp(primals, tangents, *, k, axis):
    from plax.lax.sort import take_along_axis_via_gather
    (x,), (t,) = primals, tangents
    values, idx = top_k_p.bind(x, k=k, axis=axis)
    t_idx = Zero.from_primal(idx)
    if type(t) is Zero:
        return [values, idx], [Zero.from_primal(values), t_idx]
    return [values, idx], [take_along_axis_via_gather(t, idx, axis), t_idx]


@register_rule("batch", top_k_p)
def _top_k_batch(vals, dims, *, k, axis):
    (x,), (d,) = vals, dims
    new_axis = axis + (d <= axis)
    return top_k_p.bind(x, k=k, axis=new_axis), [d, d]
