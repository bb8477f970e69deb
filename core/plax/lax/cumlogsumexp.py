"""cumlogsumexp: the running ``log(sum(exp(x)))`` along an axis (optionally from the end).

Its JVP differentiates a parallel prefix scan of a stable pairwise ``logaddexp`` built from
lax primitives, so tangents never pass through ``exp`` of large values.
"""
from __future__ import annotations

import numpy as np

import plax.lax.binary as B
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.lax.base import FLOAT, asarray, aval_of, canonicalize_axis, check_dtype
from plax.lowering.fusion import CUMULATIVE, register_fusible

cumlogsumexp_p = Primitive("cumlogsumexp")
register_fusible(cumlogsumexp_p, CUMULATIVE)  # (for a generator that walks the axis in order)


@cumlogsumexp_p.def_abstract_eval
def _cumlogsumexp_abstract_eval(x, *, axis, reverse):
    check_dtype("cumlogsumexp", x, (FLOAT,))
    if x.ndim == 0 or not 0 <= axis < x.ndim:
        raise ValueError(f"cumlogsumexp axis {axis} is out of bounds for operand shape "
                         f"{x.shape}")
    return x


def cumlogsumexp(operand, axis: int = 0, reverse: bool = False):
    """Cumulative ``log(sum(exp(x)))`` along ``axis``; from the end if ``reverse``.

    Args:
      operand: a floating-point array of rank at least 1.
      axis: the axis to accumulate along.
      reverse: accumulate from the last element towards the first.

    Returns:
      An array like ``operand``.

    Example:
      >>> lax.cumlogsumexp(jnp.array([0., 0., 0.]))
      Array([0.       , 0.6931472, 1.0986123], dtype=float32)
    """
    x = asarray(operand)
    return cumlogsumexp_p.bind(x, axis=canonicalize_axis(axis, aval_of(x).ndim),
                               reverse=bool(reverse))


def _logaddexp(a, b):
    """``log(exp(a) + exp(b))`` without overflow; ``-inf`` when both are ``-inf``."""
    from plax.lax.select import select
    from plax.lax.shape import full_like
    from plax.lax.unary import exp, log1p
    hi, lo = B.max(a, b), B.min(a, b)
    both_neg_inf = B.eq(hi, B.full_like_scalar(-np.inf, hi))
    # (-inf) - (-inf) is NaN: feed a zero there instead, the result is hi (-inf) anyway
    safe_diff = select(both_neg_inf, full_like(hi, 0), B.sub(lo, hi))
    return select(both_neg_inf, hi, B.add(hi, log1p(exp(safe_diff))))


@register_rule("jvp", cumlogsumexp_p)
def _cumlogsumexp_jvp(primals, tangents, *, axis, reverse):
    from plax.lax.cumulative import associative_scan
    from plax.transforms.jvp import Zero, jvp_flat
    (x,), (t,) = primals, tangents
    out = cumlogsumexp_p.bind(x, axis=axis, reverse=reverse)
    if type(t) is Zero:
        return out, Zero.from_primal(out)
    _, (t_out,) = jvp_flat(lambda y: [associative_scan(_logaddexp, y, reverse, axis)], [x], [t])
    return out, t_out


@register_rule("batch", cumlogsumexp_p)
def _cumlogsumexp_batch(vals, dims, *, axis, reverse):
    (x,), (d,) = vals, dims
    return cumlogsumexp_p.bind(x, axis=axis + (d <= axis), reverse=reverse), d
