"""Cumulative primitives: cumsum, cumprod, cummax, cummin (with ``reverse``), and associative_scan.

cumsum is linear. The others are differentiated through :func:`associative_scan`,
a parallel prefix scan written with slicing primitives, so their JVP needs no
division and handles zeros and ties exactly.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

import plax.lax.binary as B
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.lax.base import NUMBER, asarray, aval_of, canonicalize_axis, check_dtype
from plax.lowering.fusion import CUMULATIVE, register_fusible
from plax.transforms.jvp import Zero, deflinear


def _cumulative_prim(name: str, allowed) -> Primitive:
    p = Primitive(name)

    def abstract_eval(x, *, axis, reverse):
        check_dtype(name, x, allowed)
        if not 0 <= axis < max(x.ndim, 1) or x.ndim == 0:
            raise ValueError(f"{name} axis {axis} is out of bounds for operand shape {x.shape}")
        return x

    p.def_abstract_eval(abstract_eval)

    def batch(vals, dims, *, axis, reverse):
        (x,), (d,) = vals, dims
        return p.bind(x, axis=axis + (axis >= d), reverse=reverse), d

    register_rule("batch", p)(batch)
    return p


def _cumulative(prim):
    def op(operand, axis: int = 0, reverse: bool = False):
        operand = asarray(operand)
        return prim.bind(operand, axis=canonicalize_axis(axis, aval_of(operand).ndim), reverse=bool(reverse))
    op.__name__ = prim.name
    op.__doc__ = f"Cumulative ``{prim.name[3:]}`` along ``axis``; from the end if ``reverse``."
    return op


cumsum_p = _cumulative_prim("cumsum", NUMBER)
cumprod_p = _cumulative_prim("cumprod", NUMBER)
cummax_p = _cumulative_prim("cummax", NUMBER)  # complex numbers compare lexicographically
cummin_p = _cumulative_prim("cummin", NUMBER)

for _p in (cumsum_p, cumprod_p, cummax_p, cummin_p):
    register_fusible(_p, CUMULATIVE)  # (for a generator that walks the scan axis in order)
del _p

cumsum, cumprod, cummax, cummin = map(_cumulative, (cumsum_p, cumprod_p, cummax_p, cummin_p))

deflinear(cumsum_p, lambda ct, x, *, axis, reverse:
          [None if type(ct) is Zero else cumsum(ct, axis, not reverse)])


# XLA's CPU compiler evaluates a cumulative sum or product of length n > 16 as blocks of 16
# (each scanned in order), a scan of the block totals (blocked the same way) and one combine
# of each block with the totals before it. Rounding depends on that order, so a backend
# reproduces JAX's numbers to the last bit by following it: :func:`blocked_scan`.
SCAN_BLOCK = 16


def blocked_scan(x, axis: int, reverse: bool, combine: Callable, identity, xp=None):
    """The inclusive cumulative ``combine`` (an add or multiply ufunc) of a host or device
    array ``x`` along ``axis``, in the order XLA's CPU compiler uses, every step rounded to
    ``x``'s dtype.

    This is the accumulation order of :data:`cumsum_p` and :data:`cumprod_p` (for floating
    types it decides the last digits, in float16 most of all); backend kernels call it with
    their array module instead of writing their own order.

    Args:
      x: an array of the NumPy API (``numpy.ndarray``, or a device array with ``xp``).
      axis: the axis to scan.
      reverse: scan from the end (each suffix is still combined left to right, as XLA does).
      combine: the binary ufunc, e.g. ``numpy.add``.
      identity: its identity (0 or 1).
      xp: the array module of ``x`` (default NumPy).

    Returns:
      An array of ``x``'s shape and dtype.

    Example:
      >>> import numpy as np
      >>> float(blocked_scan(np.ones(20, np.float16), 0, False, np.add, 0)[-1])
      20.0
    """
    xp = np if xp is None else xp
    moved = xp.moveaxis(x, axis, -1)
    out = _blocked_last_axis(moved, reverse, combine, identity, xp)
    return xp.moveaxis(out, -1, axis)


def _in_order(x, reverse: bool, combine, xp):
    """Inclusive scan along the last axis, one rounded step at a time; for ``reverse``, each
    suffix ``x[i] + x[i+1] + ...`` is combined from its left end, as XLA's reduce_window
    does."""
    n = x.shape[-1]
    out = xp.empty_like(x)
    if not reverse:
        acc = x[..., 0]
        out[..., 0] = acc
        for k in range(1, n):
            acc = combine(acc, x[..., k])
            out[..., k] = acc
        return out
    out[...] = x
    for k in range(1, n):  # out[..., i] for i < k takes x[..., k] next
        out[..., :k] = combine(out[..., :k], x[..., k:k + 1])
    return out


def _blocked_last_axis(x, reverse: bool, combine, identity, xp):
    n = x.shape[-1]
    if not n:  # a new array, as on every other path (the caller may write its result)
        return xp.empty(x.shape, x.dtype)
    if n <= SCAN_BLOCK:
        return _in_order(x, reverse, combine, xp)
    pad = -n % SCAN_BLOCK
    if pad:
        fill = xp.full(x.shape[:-1] + (pad,), identity, dtype=x.dtype)
        x = xp.concatenate([x, fill], axis=-1)
    # (the block count written out: -1 cannot be inferred when another axis is empty)
    blocks = x.reshape(x.shape[:-1] + (x.shape[-1] // SCAN_BLOCK, SCAN_BLOCK))
    inner = _in_order(blocks, reverse, combine, xp)
    totals = inner[..., 0] if reverse else inner[..., -1]
    scanned = _blocked_last_axis(xp.ascontiguousarray(totals), reverse, combine, identity, xp)
    ident = xp.full(scanned.shape[:-1] + (1,), identity, dtype=x.dtype)
    if reverse:  # what the blocks after each one contribute
        before = xp.concatenate([scanned[..., 1:], ident], axis=-1)
    else:  # what the blocks before each one contribute
        before = xp.concatenate([ident, scanned[..., :-1]], axis=-1)
    out = combine(inner, before[..., None]).reshape(x.shape)
    return out[..., :n]


def associative_scan(fn: Callable, elems, reverse: bool = False, axis: int = 0):
    """Inclusive prefix scan of ``elems`` with an associative binary ``fn``, in O(log n) steps.

    Example:
      >>> lax.associative_scan(lax.add, jnp.arange(4))
      Array([0, 1, 3, 6], dtype=int32)
    """
    from plax.lax.shape import concatenate, rev
    from plax.lax.slicing import slice_in_dim
    x = asarray(elems)
    axis = canonicalize_axis(axis, aval_of(x).ndim)
    if reverse:
        x = rev(x, (axis,))

    def scan(x):
        n = aval_of(x).shape[axis]
        if n < 2:
            return x
        evens = slice_in_dim(x, 0, n - 1 if n % 2 else n, 2, axis)
        odds = slice_in_dim(x, 1, n, 2, axis)
        reduced = scan(fn(evens, odds))        # prefix results at odd positions
        m = aval_of(reduced).shape[axis]
        # even positions: x[0], then fn(prefix at 2k-1, x[2k])
        head = slice_in_dim(x, 0, 1, 1, axis)
        tail = fn(slice_in_dim(reduced, 0, m - (n % 2 == 0), 1, axis),
                  slice_in_dim(x, 2, n, 2, axis))
        even_out = concatenate([head, tail], axis)
        return _interleave(even_out, reduced, axis, n)

    out = scan(x)
    return rev(out, (axis,)) if reverse else out


def _interleave(evens, odds, axis: int, n: int):
    """``[e0, o0, e1, o1, ...]`` along ``axis``, cut to length ``n`` (works for any dtype)."""
    from plax.lax.shape import concatenate, expand_dims, pad, reshape
    from plax.lax.slicing import slice_in_dim
    e = aval_of(evens).shape[axis]
    if aval_of(odds).shape[axis] < e:
        cfg = [(0, 0, 0)] * aval_of(odds).ndim
        cfg[axis] = (0, e - aval_of(odds).shape[axis], 0)
        odds = pad(odds, B.full_like_scalar(0, odds), cfg)
    both = concatenate([expand_dims(evens, (axis + 1,)), expand_dims(odds, (axis + 1,))], axis + 1)
    shape = list(aval_of(evens).shape)
    shape[axis] = 2 * e
    return slice_in_dim(reshape(both, tuple(shape)), 0, n, 1, axis)


def _scan_jvp(prim, combine):
    def rule(primals, tangents, *, axis, reverse):
        from plax.transforms.jvp import jvp_flat
        (x,), (t,) = primals, tangents
        out = prim.bind(x, axis=axis, reverse=reverse)
        _, (t_out,) = jvp_flat(lambda y: [associative_scan(combine, y, reverse, axis)], [x], [t])
        return out, t_out
    register_rule("jvp", prim)(rule)


_scan_jvp(cumprod_p, B.mul)
_scan_jvp(cummax_p, B.max)
_scan_jvp(cummin_p, B.min)
