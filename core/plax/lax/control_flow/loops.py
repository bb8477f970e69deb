"""``while_loop`` and ``fori_loop``: the ``while`` primitive.

``while`` takes the values ``cond_jaxpr`` closed over, those ``body_jaxpr`` closed over,
then the carry; it returns the final carry. Rules:

* JVP (forward mode): the tangents of the carry travel in the carry (which carry
  components have nonzero tangents is found as a fixed point of the body). Reverse mode
  raises JAX's ValueError (the trip count is not known when the loop is staged).
* batching: every carry component is batched; the loop runs while any member's predicate
  holds, and members whose predicate is false keep their carry (``select_n``).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plax import dtypes
from plax.core.interpret import jaxpr_as_fun
from plax.core import varying
from plax.core.jaxpr import ClosedJaxpr
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.trace import get_aval
from plax.lax.base import asarray
from plax.lax.control_flow.common import (batched_fun, carry_types, check_carry,
                                          is_inexact_aval, long_str, promote_weak, same_type,
                                          stage_derived, trace_flat, widen_varying,
                                          with_varying)
from plax.pytrees.engine import tree_flatten, tree_unflatten
from plax.lowering.bodies import register_body_kernel, run_while
from plax.transforms.batching import register_program_primitive
from plax.transforms.jvp import Zero, instantiate, jvp_flat, tangent_aval
from plax.transforms.staging import is_linearize_tracer

while_p = Primitive("while", multiple_results=True)


def _while_abstract_eval(*avals, cond_jaxpr: ClosedJaxpr, body_jaxpr: ClosedJaxpr,
                         cond_nconsts: int, body_nconsts: int):
    carry = avals[cond_nconsts + body_nconsts:]
    outs = body_jaxpr.out_avals
    if len(carry) != len(outs) or any(not same_type(a, b) for a, b in zip(carry, outs)):
        raise TypeError(f"while carry of types {[a.str_short() for a in carry]} does not match "
                        f"the body's outputs {[a.str_short() for a in outs]}")
    pred = cond_jaxpr.out_avals
    if len(pred) != 1 or pred[0].shape != () or pred[0].dtype != np.dtype(bool):
        raise TypeError("while cond_jaxpr must return a boolean scalar, got "
                        f"{[a.str_short() for a in pred]}")
    return carry_types(carry, outs, pred[0].vma)


while_p.def_abstract_eval(_while_abstract_eval)
varying.register_self_typed(while_p)  # results typed by the traced bodies
register_program_primitive(while_p)
# its bodies run with the backend and on the device of the program holding it
register_body_kernel(while_p, run_while)


# ------------------------------------------------------------------ user functions

def _trace_body(body_fun, in_tree, avals, where):
    box = []

    def flat(*xs):
        out_leaves, out_tree = tree_flatten(body_fun(tree_unflatten(in_tree, list(xs))))
        box.append(out_tree)
        return out_leaves

    closed, captured = trace_flat(flat, avals, where, hoist=True)
    return closed, captured, box[0]


def _trace_cond(cond_fun, in_tree, avals):
    def flat(*xs):
        return [cond_fun(tree_unflatten(in_tree, list(xs)))]

    closed, captured = trace_flat(flat, avals, "the while_loop cond_fun", hoist=True)
    out = closed.out_avals
    if len(out) != 1 or out[0].shape != () or out[0].dtype != np.dtype(bool):
        shown = ", ".join(f"ShapedArray({long_str(a)}"
                          + (", weak_type=True)" if a.weak_type else ")") for a in out)
        raise TypeError(f"cond_fun must return a boolean scalar, but got output type(s) "
                        f"[{shown}].")
    return closed, captured


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
    """Repeats ``val = body_fun(val)`` while ``cond_fun(val)`` is true, as one ``while``
    primitive.

    Forward-mode differentiable; reverse mode raises ValueError (use ``lax.scan`` or a
    ``fori_loop`` with static bounds).

    Args:
      cond_fun: ``carry -> bool scalar``.
      body_fun: ``carry -> carry`` of the same structure and types.
      init_val: the initial carry (a pytree).

    Returns:
      The final carry.

    Example:
      >>> lax.while_loop(lambda c: c[0] < 10, lambda c: (c[0] + 1, c[1] * 2), (0, 1.0))
      (Array(10, dtype=int32, weak_type=True), Array(1024., dtype=float32, weak_type=True))
    """
    if not (callable(cond_fun) and callable(body_fun)):
        raise TypeError("lax.while_loop: cond_fun and body_fun arguments should be callable.")
    leaves, in_tree = tree_flatten(init_val)
    leaves = [asarray(x) for x in leaves]
    widen = [frozenset()] * len(leaves)  # carries typed as varying over more mesh axes
    for _ in range(8):
        avals = with_varying([get_aval(x) for x in leaves], widen)
        body, body_consts, out_tree = _trace_body(body_fun, in_tree, avals,
                                                  "the while_loop body_fun")
        if in_tree != out_tree:
            break
        leaves, changed = promote_weak(leaves, avals, list(body.out_avals))
        widen, grown = widen_varying(widen, avals, list(body.out_avals))
        if not (changed or grown):
            break
    avals = with_varying([get_aval(x) for x in leaves], widen)
    check_carry(in_tree, out_tree, avals, list(body.out_avals), "while_loop", body_fun)
    cond, cond_consts = _trace_cond(cond_fun, in_tree, avals)
    outs = while_p.bind(*cond_consts, *body_consts, *leaves, cond_jaxpr=cond, body_jaxpr=body,
                        cond_nconsts=len(cond_consts), body_nconsts=len(body_consts))
    return tree_unflatten(in_tree, outs)


def _static_int(x) -> int | None:
    """``x`` as a Python int when it is one (a trip count known while tracing), else None."""
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    return None


def fori_loop(lower, upper, body_fun: Callable, init_val: Any, *,
              unroll: int | bool | None = None) -> Any:
    """``val = body_fun(i, val)`` for ``i`` in ``range(lower, upper)``.

    With Python-int bounds the loop is a ``scan`` over the trip count, so it is
    reverse-differentiable; otherwise it is a ``while_loop`` (forward mode only).

    Args:
      lower, upper: the loop bounds (integer scalars).
      body_fun: ``(i, carry) -> carry``.
      init_val: the initial carry.
      unroll: how many iterations one step of the loop's ``scan`` runs (``scan``'s
        ``unroll``: the values are the same); only with Python-int bounds, as in JAX.

    Returns:
      The final carry.

    Example:
      >>> lax.fori_loop(0, 5, lambda i, acc: acc + i, 0.0)
      Array(10., dtype=float32, weak_type=True)
    """
    if not callable(body_fun):
        raise TypeError("lax.fori_loop: body_fun argument should be callable.")
    lo, hi = _static_int(lower), _static_int(upper)
    if unroll is not None and (lo is None or hi is None):
        raise ValueError("Can only use `unroll` in `fori_loop` if the loop bounds are "
                         "statically known.")
    if lo is not None and hi is not None:
        from plax.lax.control_flow.scan import scan

        def step(loop_carry, _):  # the name JAX's carry-type errors use
            i, x = loop_carry
            return (i + 1, body_fun(i, x)), None

        # the counter starts as the bound was given (a Python int: weakly typed, as in JAX)
        start = asarray(lower) if isinstance(lower, (int, np.integer)) else np.int32(lo)
        (_, out), _ = scan(step, (start, init_val), None, length=max(hi - lo, 0),
                           unroll=1 if unroll is None else unroll)
        return out
    lower, upper = asarray(lower), asarray(upper)
    la, ua = get_aval(lower), get_aval(upper)
    for name, a in (("lower", la), ("upper", ua)):
        if a.shape != () or not np.issubdtype(a.dtype, np.integer):
            raise TypeError(f"fori_loop {name} must be an integer scalar, got {a.str_short()}.")
    from plax.lax.convert import convert_element_type
    if la.dtype != ua.dtype:  # as JAX: bounds of one type are used as they are
        dt = np.result_type(la.dtype, ua.dtype)
        lower = convert_element_type(lower, dt)
        upper = convert_element_type(upper, dt)

    def cond(c):
        return c[0] < c[1]

    def body(loop_carry):  # the name JAX's carry-type errors use
        i, u, x = loop_carry
        return i + 1, u, body_fun(i, x)  # a weak 1: the counter keeps its type, as in JAX

    return while_loop(cond, body, (lower, upper, init_val))[2]


# ------------------------------------------------------------------ forward mode

def _is_zero(t) -> bool:
    return type(t) is Zero or get_aval(t).dtype == dtypes.float0


def _body_tangent_pattern(body: ClosedJaxpr, nconsts: int, const_nz: list, carry_nz: list
                          ) -> list:
    """Which carry tangents are nonzero: the fixed point of the body's JVP."""
    carry_avals = body.out_avals
    carry_nz = [nz and is_inexact_aval(a) for nz, a in zip(carry_nz, carry_avals)]
    n = len(body.in_avals)
    while True:
        in_nz = list(const_nz) + carry_nz
        t_avals = [tangent_aval(a) for a, nz in zip(body.in_avals, in_nz) if nz]
        out_nz: list = []

        def probe(*args, in_nz=in_nz, out_nz=out_nz):
            it = iter(args[n:])
            ts = [next(it) if nz else Zero(tangent_aval(a)) for a, nz in zip(body.in_avals, in_nz)]
            _, outs_t = jvp_flat(jaxpr_as_fun(body), list(args[:n]), ts)
            out_nz[:] = [not _is_zero(t) for t in outs_t]
            return []

        stage_derived(probe, list(body.in_avals) + t_avals, "JVP of a while_loop body")
        new = [a or (b and is_inexact_aval(av))
               for a, b, av in zip(carry_nz, out_nz, carry_avals)]
        if new == carry_nz:
            return carry_nz
        carry_nz = new


def _while_jvp(primals, tangents, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    nz_t = [t for t in tangents if not _is_zero(t)]
    if any(is_linearize_tracer(t) for t in nz_t):
        raise ValueError("Reverse-mode differentiation does not work for lax.while_loop or "
                         "lax.fori_loop with dynamic start/stop values. Try using lax.scan, "
                         "or using fori_loop with static start/stop.")
    nc, nb = cond_nconsts, body_nconsts
    cconsts, bconsts, carry = primals[:nc], primals[nc:nc + nb], primals[nc + nb:]
    bconst_t, carry_t = tangents[nc:nc + nb], tangents[nc + nb:]
    const_nz = [not _is_zero(t) for t in bconst_t]
    carry_nz = _body_tangent_pattern(body_jaxpr, nb, const_nz,
                                     [not _is_zero(t) for t in carry_t])
    carry_avals = body_jaxpr.out_avals
    bc_t = [t for t, nz in zip(bconst_t, const_nz) if nz]
    c_t = [instantiate(t) if type(t) is Zero else t
           for t, nz in zip(carry_t, carry_nz) if nz]
    n_bc_t = len(bc_t)
    n_carry = len(carry)

    def body_fun(*args):
        consts, ct = args[:nb], args[nb:nb + n_bc_t]
        rest = args[nb + n_bc_t:]
        xs, xt = rest[:n_carry], rest[n_carry:]
        it_c, it_x = iter(ct), iter(xt)
        ts = ([next(it_c) if nz else Zero(tangent_aval(a))
               for a, nz in zip(body_jaxpr.in_avals[:nb], const_nz)]
              + [next(it_x) if nz else Zero(tangent_aval(a))
                 for a, nz in zip(carry_avals, carry_nz)])
        outs, outs_t = jvp_flat(jaxpr_as_fun(body_jaxpr), list(consts) + list(xs), ts)
        return list(outs) + [instantiate(t) for t, nz in zip(outs_t, carry_nz) if nz]

    def cond_fun(*args):
        return jaxpr_as_fun(cond_jaxpr)(*args[:nc + n_carry])

    t_avals = [get_aval(t) for t in c_t]
    body = stage_derived(body_fun, list(body_jaxpr.in_avals[:nb]) + [get_aval(t) for t in bc_t]
                         + list(carry_avals) + t_avals, "JVP of a while_loop body")
    cond = stage_derived(cond_fun, list(cond_jaxpr.in_avals) + t_avals,
                         "cond of a differentiated while_loop")
    outs = while_p.bind(*cconsts, *bconsts, *bc_t, *carry, *c_t, cond_jaxpr=cond,
                        body_jaxpr=body, cond_nconsts=nc, body_nconsts=nb + n_bc_t)
    it = iter(outs[n_carry:])
    return outs[:n_carry], [next(it) if nz else Zero(tangent_aval(a))
                            for a, nz in zip(carry_avals, carry_nz)]


register_rule("jvp", while_p)(_while_jvp)


# ------------------------------------------------------------------ batching

def _while_batch(vals, dims, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts, axis_data):
    from plax.lax.reduction import reduce_or
    from plax.lax.select import select_n
    from plax.lax.shape import broadcast_in_dim
    from plax.transforms.batching import move_axis_to
    size = axis_data.size
    nc, nb = cond_nconsts, body_nconsts
    n_consts = nc + nb
    consts = list(vals[:n_consts])
    const_dims = list(dims[:n_consts])
    # every carry component batched on axis 0 (a member may stop before the others)
    carry = [move_axis_to(v, d, 0, size) for v, d in zip(vals[n_consts:], dims[n_consts:])]
    carry_dims = [0] * len(carry)
    cond_b = batched_fun(cond_jaxpr, const_dims[:nc] + carry_dims, axis_data)
    body_b = batched_fun(body_jaxpr, const_dims[nc:] + carry_dims, axis_data)

    def cond_fun(*args):
        (pred,) = cond_b(*args[:nc], *args[n_consts:])
        return [reduce_or(pred, (0,))]

    def body_fun(*args):
        xs = args[n_consts:]
        (pred,) = cond_b(*args[:nc], *xs)
        new = body_b(*args[nc:n_consts], *xs)
        out = []
        for n_, o in zip(new, xs):
            which = broadcast_in_dim(pred, get_aval(o).shape, (0,))
            out.append(select_n(which, o, n_))
        return out

    in_avals = [get_aval(v) for v in consts + carry]
    # the batched cond and body take all the constants (each ignores the other's)
    cond = stage_derived(cond_fun, in_avals, "batched while_loop cond")
    body = stage_derived(body_fun, in_avals, "batched while_loop body")
    outs = while_p.bind(*consts, *consts, *carry, cond_jaxpr=cond, body_jaxpr=body,
                        cond_nconsts=n_consts, body_nconsts=n_consts)
    return outs, [0] * len(outs)


_while_batch.needs_axis_data = True
register_rule("batch", while_p)(_while_batch)

__all__ = ["while_loop", "fori_loop", "while_p"]
