"""Selection primitives: select_n (choose among cases elementwise) and clamp."""
from __future__ import annotations

import numpy as np

import plax.lax.binary as B
from plax import dtypes
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.lax.base import ORDERED, asarray, check_dtype, same_dtypes, same_shapes_or_scalar
from plax.transforms.batching import defbroadcasting
from plax.transforms.jvp import Zero, defjvp, instantiate

select_n_p = Primitive("select_n")


@select_n_p.def_abstract_eval
def _select_n_abstract_eval(which, *cases):
    if not cases:
        raise TypeError("select_n requires at least one case")
    if which.dtype != np.dtype(bool) and which.dtype != np.dtype(np.int32):
        raise TypeError(f"select_n's selector must be bool or int32, got {which.dtype.name}")
    if which.dtype == np.dtype(bool) and len(cases) > 2:
        raise TypeError(f"select_n with a bool selector takes at most 2 cases, got {len(cases)}")
    dt = same_dtypes("select_n", cases)
    case_shape = cases[0].shape
    for c in cases[1:]:
        if c.shape != case_shape:
            raise TypeError(f"select_n cases must have the same shapes, got "
                            f"{[c.shape for c in cases]}.")
    if which.shape and which.shape != case_shape:
        raise TypeError(f"select_n's selector must be a scalar or have the cases' shape "
                        f"{case_shape}, got {which.shape}.")
    return ShapedArray(case_shape, dt, all(c.weak_type for c in cases))


def select_n(which, *cases):
    """Elementwise ``cases[which]``: ``which`` is bool (two cases) or int32, scalar or case-shaped.

    Example:
      >>> select_n(jnp.array([True, False]), jnp.zeros(2), jnp.ones(2))
      Array([1., 0.], dtype=float32)
    """
    return select_n_p.bind(asarray(which), *map(asarray, cases))


def select(pred, on_true, on_false):
    """``on_true`` where ``pred`` is True, else ``on_false`` (JAX's lax.select)."""
    return select_n(pred, on_false, on_true)


def _select_n_batch(vals, dims):
    # The cases must share one shape and the selector must be rank 0 or have that shape, so
    # every case gets the batch axis in front (materialised if unbatched), and so does the
    # selector unless it is an unbatched scalar.
    from plax.core.trace import get_aval
    from plax.lax.shape import broadcast_in_dim
    from plax.transforms.batching import axis_size, move_axis_to
    size = axis_size(vals, dims)
    which, *cases = vals
    which_dim, *case_dims = dims
    cases = [move_axis_to(c, d, 0, size) for c, d in zip(cases, case_dims)]
    full_shape = get_aval(cases[0]).shape
    if which_dim is not None or get_aval(which).ndim:
        which = move_axis_to(which, which_dim, 0, size)
        if get_aval(which).shape != full_shape:  # a batched scalar selector
            which = broadcast_in_dim(which, full_shape, (0,))
    return select_n_p.bind(which, *cases), 0


register_rule("batch", select_n_p)(_select_n_batch)


@register_rule("jvp", select_n_p)
def _select_n_jvp(primals, tangents):
    which, *cases = primals
    out = select_n(which, *cases)
    case_tangents = tangents[1:]
    if all(type(t) is Zero for t in case_tangents):
        return out, Zero.from_primal(out)
    return out, select_n(which, *[instantiate(t) for t in case_tangents])


@register_rule("transpose", select_n_p)
def _select_n_transpose(ct, which, *cases):
    from plax.transforms.transpose import is_undefined_primal
    if is_undefined_primal(which):
        raise TypeError("select_n is not linear in its selector")
    if type(ct) is Zero:
        return [None] * (len(cases) + 1)
    zeros = B.zeros_like(ct)
    out = [None]
    for i, c in enumerate(cases):
        if is_undefined_primal(c):
            branches = [zeros] * len(cases)
            branches[i] = ct
            out.append(select_n(which, *branches))
        else:
            out.append(None)
    return out


clamp_p = Primitive("clamp")


@clamp_p.def_abstract_eval
def _clamp_abstract_eval(lo, x, hi):
    check_dtype("clamp", x, ORDERED)
    same_dtypes("clamp", [lo, x, hi])
    for bound, what in ((lo, "min"), (hi, "max")):
        if bound.shape and bound.shape != x.shape:
            raise TypeError(f"clamp requires {what} to be a scalar or have the operand's shape "
                            f"{x.shape}, got {bound.shape}.")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def clamp(min, x, max):
    """Elementwise ``minimum(maximum(x, min), max)``; ``min``/``max`` are scalars or x-shaped."""
    return clamp_p.bind(asarray(min), asarray(x), asarray(max))


defbroadcasting(clamp_p)


def _zeros_of(x):
    return B.zeros_like(x)


def _clamp_jvp_min(t, lo, x, hi):
    t = _fit(t, x)
    return select(B.bitwise_and(B.gt(lo, x), B.lt(lo, hi)), t, _zeros_of(t))


def _clamp_jvp_x(t, lo, x, hi):
    return select(B.bitwise_and(B.gt(x, lo), B.lt(x, hi)), t, _zeros_of(t))


def _clamp_jvp_max(t, lo, x, hi):
    t = _fit(t, x)
    return select(B.lt(hi, x), t, _zeros_of(t))


def _fit(t, x):
    from plax.lax.shape import broadcast_in_dim
    if t.shape != x.shape:
        return broadcast_in_dim(t, x.shape, ())
    return t


defjvp(clamp_p, _clamp_jvp_min, _clamp_jvp_x, _clamp_jvp_max)
