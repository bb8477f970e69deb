"""``checkpoint`` (remat): a function whose intermediates reverse mode recomputes instead of
saving, as a primitive holding a sub-jaxpr.

``checkpoint(f)(*args)`` binds ``checkpoint_p`` once, with ``f`` traced to a ClosedJaxpr
(``jaxpr``) and its ``policy``. Its rules:

* eager (``impl``) and compiled (the lowering splices the body): the body, as it is;
* ``batch``: the batched body, bound again;
* ``jvp``, forward mode: the JVP body, bound again (``differentiated=True``);
* ``jvp``, reverse mode (tangents staged by ``LinearizeTrace``): the JVP body is split. The
  primal equations run now and return the outputs, plus the intermediates the tangent part
  reads *and* the policy saves. One ``checkpoint`` equation is staged for the backward pass:
  it takes the saved values, the primal inputs and the tangents, and its body recomputes
  every other intermediate the tangents need before the linear equations;
* ``transpose``: one ``checkpoint`` equation again (``differentiated=True``, as JAX stages
  the backward pass of a remat), whose body runs the recomputation forward, then the linear
  equations backwards.

A policy is ``policy(primitive, *avals, **params) -> bool`` (or ``Saveable``/``Recompute``),
asked about each primal equation whose output the tangent part reads. ``policy=None`` saves
nothing but the inputs, as in JAX.
"""
from __future__ import annotations

import contextvars
import functools
import threading
import weakref
from typing import Any, Callable, Sequence

from plax.core import registry, varying
from plax.core.effects import eqn_has_effects
from plax.core.interpret import eval_jaxpr, jaxpr_as_fun, literal_array
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Literal, Var
from plax.core.primitive import Primitive
from plax.core.trace import get_aval
from plax.transforms.batching import register_program_primitive


class _CheckpointPrimitive(Primitive):
    """``checkpoint``: its body is ``params["jaxpr"]``; the passes and the printer treat it
    as a call (its body inlined for custom rules, pruned by dead-code elimination)."""

    __slots__ = ()
    call_param = "jaxpr"
    # printed as JAX 0.10 prints it: ``remat2[...]``, its body's variables named afresh
    pp_name = "remat2"
    pp_body_named_after_operands = False
    pp_params = {"policy": lambda policy: _policies().pp_policy(policy)}  # as JAX's str


def _policies():
    # the policies' module loads on first use (printing, jax.checkpoint_policies): import time
    import plax.transforms.checkpoint_policies as module
    return module


def __getattr__(name: str):
    if name == "checkpoint_policies":
        return _policies().checkpoint_policies
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


checkpoint_p = _CheckpointPrimitive("checkpoint", multiple_results=True)
varying.register_self_typed(checkpoint_p)  # its results are typed by its traced body
register_program_primitive(checkpoint_p)
name_p = Primitive("name")


# ------------------------------------------------------------------ checkpoint_name's primitive

name_p.def_abstract_eval(lambda x, *, name: x)
registry.register_rule("impl", name_p)(lambda x, *, name: x)
registry.register_rule("jvp", name_p)(
    lambda primals, tangents, *, name: (name_p.bind(primals[0], name=name), tangents[0]))
registry.register_rule("batch", name_p)(
    lambda vals, dims, *, name: (name_p.bind(vals[0], name=name), dims[0]))
registry.register_rule("transpose", name_p)(lambda ct, x, *, name: [ct])


# ------------------------------------------------------------------ the public function

class _Removed:
    """The default of JAX's removed ``concrete=`` option: any value passed is refused."""

    def __repr__(self) -> str:
        return "Deprecated"


_REMOVED = _Removed()


def checkpoint(fun: Callable | None = None, *, prevent_cse: bool = True, policy=None,
               static_argnums: int | Sequence[int] = (), static_argnames: str | Sequence[str] = (),
               concrete: Any = _REMOVED) -> Callable:
    """Makes ``fun`` rematerialised: reverse mode recomputes its intermediates in the backward
    pass instead of saving them, except those ``policy`` saves.

    Results and derivatives are those of ``fun``; what changes is what the backward pass
    keeps alive (see :func:`plax.ad_checkpoint.print_saved_residuals`).

    Args:
      fun: the function (pytrees of arrays in and out).
      prevent_cse: accepted for compatibility (plax does no common-subexpression
        elimination).
      policy: which intermediates to save: a function of ``(primitive, *avals, **params)``,
        e.g. :attr:`checkpoint_policies.dots_saveable`; None saves none.
      static_argnums: positional arguments that are not arrays (passed as they are).
      static_argnames: keyword arguments that are not arrays (passed as they are).
      concrete: JAX's removed option; passing it raises NotImplementedError, as in JAX 0.10.

    Returns:
      The rematerialised function.

    Example:
      >>> jax.grad(jax.checkpoint(jnp.sin))(0.0)
      Array(1., dtype=float32, weak_type=True)
    """
    if concrete is not _REMOVED:
        raise NotImplementedError(
            "The `concrete` option to `jax.checkpoint` was removed in JAX v0.10.0; use "
            "`static_argnums` (or `static_argnames`) for arguments Python control flow reads.")
    if fun is None:
        return functools.partial(checkpoint, prevent_cse=prevent_cse, policy=policy,
                                 static_argnums=static_argnums, static_argnames=static_argnames)
    if not callable(fun):
        raise TypeError(f"checkpoint expects a callable, got {fun!r}")
    static = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    static_names = ((static_argnames,) if isinstance(static_argnames, str)
                    else tuple(static_argnames))

    @functools.wraps(fun)
    def remat_f(*args, **kwargs):
        from plax import tree_util
        from plax.lax.base import asarray
        from plax.transforms.staging import abstractify, trace_to_jaxpr
        n = len(args)
        fixed = {i % n: args[i % n] for i in static} if n else {}
        dyn = [a for i, a in enumerate(args) if i not in fixed]
        fixed_kw = {k: v for k, v in kwargs.items() if k in static_names}
        kwargs = {k: v for k, v in kwargs.items() if k not in static_names}
        leaves, in_tree = tree_util.tree_flatten((dyn, kwargs))
        leaves = [asarray(x) for x in leaves]
        out_tree: list = []

        def flat(*xs):
            d, kw = tree_util.tree_unflatten(in_tree, list(xs))
            it = iter(d)
            full = [fixed[i] if i in fixed else next(it) for i in range(n)]
            out = fun(*full, **kw, **fixed_kw)
            outs, tree = tree_util.tree_flatten(out)
            out_tree[:] = [tree]
            return outs

        closed, _ = trace_to_jaxpr(flat, [abstractify(x) for x in leaves],
                                   where=getattr(fun, "__name__", "the function"))
        # as JAX: everything the function closed over (arrays and tracers of enclosing
        # transforms) is a leading operand; the body prints without constants of its own
        j = closed.jaxpr
        extra = list(closed.consts)
        closed = ClosedJaxpr(Jaxpr([], list(j.constvars) + list(j.invars), j.outvars, j.eqns),
                             [])
        outs = checkpoint_p.bind(*extra, *leaves, jaxpr=closed, prevent_cse=bool(prevent_cse),
                                 differentiated=False, policy=policy)
        return tree_util.tree_unflatten(out_tree[0], list(outs))

    return remat_f


remat = checkpoint


# ------------------------------------------------------------------ policies

def _saves(policy, prim, *avals, **params) -> bool:
    if policy is None:
        return False
    answer = policy(prim, *avals, **params)
    return repr(answer) != "Recompute" and bool(answer)


# ------------------------------------------------------------------ rules

@checkpoint_p.def_abstract_eval
def _abstract_eval(*avals, jaxpr: ClosedJaxpr, **_):
    return list(jaxpr.out_avals)


def _impl(*args, jaxpr: ClosedJaxpr, **_):
    return eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)


registry.register_rule("impl", checkpoint_p)(_impl)


def _batch(vals, dims, *, jaxpr, axis_data, **params):
    from plax.transforms.batching import batch_flat_fun
    from plax.transforms.call import batch_jaxpr
    made = batch_jaxpr(jaxpr, tuple(dims), axis_data)
    if made is None:
        return batch_flat_fun(jaxpr_as_fun(jaxpr), dims, axis_data)(*vals), 0
    b_closed, out_dims = made
    return checkpoint_p.bind(*vals, jaxpr=b_closed, **params), list(out_dims)


_batch.needs_axis_data = True
registry.register_rule("batch", checkpoint_p)(_batch)


class _PoliciesSeen(threading.local):
    """``policies``: the policies of the checkpoints differentiated while
    ``ad_checkpoint.saved_residuals`` traces in the running thread (None otherwise): it asks
    them which residuals they offload to host memory. Per thread, as the trace."""

    def __init__(self) -> None:
        self.policies: list | None = None


policies_seen = _PoliciesSeen()


def _jvp(primals, tangents, *, jaxpr: ClosedJaxpr, prevent_cse, differentiated, policy):
    from plax.transforms.call import _is_zero_tangent, _jvp_inline, _with_zeros, jvp_jaxpr
    seen = policies_seen.policies
    if seen is not None and policy is not None:
        seen.append(policy)
    from plax.transforms.staging import is_linearize_tracer
    nonzeros = tuple(not _is_zero_tangent(t) for t in tangents)
    nz = [t for t, z in zip(tangents, nonzeros) if z]
    t_avals = tuple(get_aval(t) for t in nz)
    linear = any(is_linearize_tracer(t) for t in nz)
    made = jvp_jaxpr(jaxpr, nonzeros, t_avals, linear=linear)
    if made is None:
        return _jvp_inline(jaxpr, primals, tangents)
    jvp_closed, out_nz = made
    n_out = len(jaxpr.out_avals)
    if not linear:
        outs = checkpoint_p.bind(*primals, *nz, jaxpr=jvp_closed, prevent_cse=prevent_cse,
                                 differentiated=True, policy=policy)
        return outs[:n_out], _with_zeros(outs[n_out:], out_nz, jaxpr.out_avals)
    known, unknown, what = _cached_split(jvp_closed, len(primals), n_out, policy)
    known_outs = eval_jaxpr(known.jaxpr, known.consts, *primals)
    primal_outs, saved = known_outs[:n_out], known_outs[n_out:]
    described = describe_saved.get()
    if described is not None:  # print_saved_residuals is asking
        described.update((id(v), w) for v, w in zip(saved, what))
    tangent_outs = (checkpoint_p.bind(*saved, *primals, *nz, jaxpr=unknown,
                                      prevent_cse=prevent_cse, differentiated=True,
                                      policy=policy)
                    if unknown.jaxpr.outvars else [])
    return primal_outs, _with_zeros(tangent_outs, out_nz, jaxpr.out_avals)


registry.register_rule("jvp", checkpoint_p)(_jvp)


# Set by print_saved_residuals: id(saved value) -> where it comes from.
describe_saved: "contextvars.ContextVar[dict | None]" = contextvars.ContextVar(
    "describe_saved", default=None)

# JVP body -> {(n_primals, n_out, policy): (known, unknown, what)}, so a repeated grad splits once
_splits: "weakref.WeakKeyDictionary[ClosedJaxpr, dict]" = weakref.WeakKeyDictionary()


def _cached_split(closed: ClosedJaxpr, n_primals: int, n_out: int, policy):
    table = _splits.get(closed)
    if table is None:
        table = _splits.setdefault(closed, {})
    key = (n_primals, n_out, policy)
    try:
        hit = table.get(key)
    except TypeError:  # an unhashable policy
        return remat_split(closed, n_primals, n_out, policy)
    if hit is None:
        hit = table[key] = remat_split(closed, n_primals, n_out, policy)
    return hit


def remat_split(closed: ClosedJaxpr, n_primals: int, n_out: int, policy):
    """Splits a JVP jaxpr (primals, tangents -> primal outputs, tangent outputs) for reverse
    mode under ``policy``.

    Returns:
      ``(known, unknown, what)``: ``known`` maps the primals to the primal outputs and the
      saved intermediates; ``unknown`` maps the saved intermediates, the primals and the
      tangents to the tangent outputs, recomputing the intermediates that were not saved;
      ``what`` says where each saved intermediate comes from (``"output of sin"``,
      ``"named 'a'"``).
    """
    j = closed.jaxpr
    unknown_vars = set(j.invars[n_primals:])
    primal_in = j.invars[:n_primals]
    known_eqns, lin_eqns = [], []
    for e in j.eqns:
        if any(isinstance(v, Var) and v in unknown_vars for v in e.invars):
            lin_eqns.append(e)
            unknown_vars.update(e.outvars)
        else:
            known_eqns.append(e)
    producer = {v: e for e in known_eqns for v in e.outvars}
    # the known intermediates the tangent part reads
    needed = []
    for v in [v for e in lin_eqns for v in e.invars] + list(j.outvars[n_out:]):
        if isinstance(v, Var) and v in producer and v not in needed:
            needed.append(v)
    # Walk back from what the tangent part reads: a value whose equation the policy saves
    # is saved (and the walk stops there); any other is recomputed from its operands.
    available = set(primal_in) | set(j.constvars)
    saved: list = []
    recompute: set = set()
    stack = list(reversed(needed))
    while stack:
        v = stack.pop()
        if v in available or v in saved:
            continue
        e = producer[v]
        if id(e) in recompute:
            continue
        if _saves(policy, e.primitive, *[x.aval for x in e.invars], **e.params):
            saved.append(v)
            continue
        recompute.add(id(e))
        stack.extend(x for x in reversed(e.invars) if isinstance(x, Var) and x in producer)
    # Effectful equations (debug prints) run again in the backward pass, as in JAX.
    for e in known_eqns:
        if id(e) not in recompute and eqn_has_effects(e):
            recompute.add(id(e))
            stack = [x for x in e.invars if isinstance(x, Var) and x in producer]
            while stack:
                v = stack.pop()
                if v in available or v in saved or id(producer[v]) in recompute:
                    continue
                recompute.add(id(producer[v]))
                stack.extend(x for x in producer[v].invars if isinstance(x, Var) and x in producer)
    from plax.core.passes import dce
    known = dce(Jaxpr(j.constvars, primal_in, list(j.outvars[:n_out]) + saved, known_eqns))
    rec_eqns = [e for e in known_eqns if id(e) in recompute]
    unknown = Jaxpr(j.constvars, saved + list(primal_in) + list(j.invars[n_primals:]),
                    list(j.outvars[n_out:]), rec_eqns + lin_eqns)
    what = tuple(f"named {producer[v].params['name']!r}" if producer[v].primitive is name_p
                 else f"output of {producer[v].primitive.name}" for v in saved)
    return ClosedJaxpr(known, closed.consts), ClosedJaxpr(unknown, closed.consts), what


def _transpose(cts, *args, jaxpr: ClosedJaxpr, prevent_cse, differentiated, policy):
    """The backward pass of a staged ``checkpoint`` equation: one ``checkpoint`` equation
    again (printed ``remat2[differentiated=True ...]`` as in JAX), whose body recomputes
    what the linear equations need and runs them backwards (:func:`_transpose_inline`). It
    takes the known operands and the nonzero output cotangents, and returns the cotangents
    of the linear operands."""
    from plax.transforms.jvp import Zero
    from plax.transforms.transpose import is_undefined_primal
    known = [a for a in args if not is_undefined_primal(a)]
    linear_at = [i for i, a in enumerate(args) if is_undefined_primal(a)]
    if not linear_at:
        return [None] * len(args)
    nz_at = [i for i, c in enumerate(cts) if type(c) is not Zero]
    if not nz_at:
        return [Zero(args[i].aval) if i in linear_at else None for i in range(len(args))]
    nz_cts = [cts[i] for i in nz_at]
    closed, used = _transposed_body(jaxpr, tuple(is_undefined_primal(a) for a in args),
                                    tuple(nz_at), tuple(get_aval(x) for x in known),
                                    tuple(get_aval(c) for c in nz_cts))
    operands = [x for x, u in zip(known + nz_cts, used) if u]
    outs = iter(checkpoint_p.bind(*operands, jaxpr=closed, prevent_cse=prevent_cse,
                                  differentiated=True, policy=policy))
    return [next(outs) if i in linear_at else None for i in range(len(args))]


# body -> {(linear mask, nonzero cotangents, known avals, cotangent avals): transposed body}
_transposed: "weakref.WeakKeyDictionary[ClosedJaxpr, dict]" = weakref.WeakKeyDictionary()


def _transposed_body(jaxpr: ClosedJaxpr, linear: tuple, nz_at: tuple, known_avals: tuple,
                     ct_avals: tuple) -> tuple[ClosedJaxpr, tuple]:
    """``(known operands, nonzero cotangents) -> cotangents of the linear operands`` traced
    into a ClosedJaxpr of its own, without the inputs it does not read (a primal the saved
    residuals made unnecessary), and which inputs it kept (cached per body and signature)."""
    table = _transposed.get(jaxpr)
    if table is None:
        table = _transposed.setdefault(jaxpr, {})
    key = (linear, nz_at, known_avals, ct_avals)
    hit = table.get(key)
    if hit is not None:
        return hit
    from plax.transforms.jvp import Zero, instantiate
    from plax.transforms.staging import convert_tracer_consts, trace_to_jaxpr
    from plax.transforms.transpose import UndefinedPrimal
    invars = jaxpr.jaxpr.invars
    n_known = len(known_avals)

    def body(*flat):
        known_vals, ct_vals = iter(flat[:n_known]), iter(flat[n_known:])
        full_args = [UndefinedPrimal(v.aval) if lin else next(known_vals)
                     for v, lin in zip(invars, linear)]
        full_cts = [Zero(aval) for aval in jaxpr.out_avals]
        for i in nz_at:
            full_cts[i] = next(ct_vals)
        outs = _transpose_inline(full_cts, *full_args, jaxpr=jaxpr)
        return [instantiate(o) if type(o) is Zero else o
                for o, lin in zip(outs, linear) if lin]

    traced, _ = trace_to_jaxpr(body, list(known_avals) + list(ct_avals),
                               where="the transposed checkpoint")
    closed, captured = convert_tracer_consts(traced.jaxpr, traced.consts)
    assert not captured
    j = closed.jaxpr
    read = {v for e in j.eqns for v in e.invars if isinstance(v, Var)}
    read.update(v for v in j.outvars if isinstance(v, Var))
    used = tuple(v in read for v in j.invars)
    if not all(used):
        closed = ClosedJaxpr(Jaxpr(j.constvars, [v for v, u in zip(j.invars, used) if u],
                                   j.outvars, j.eqns), closed.consts)
    table[key] = hit = (closed, used)
    return hit


def _transpose_inline(cts, *args, jaxpr: ClosedJaxpr):
    """Recompute forward what does not depend on the linear inputs, then run the linear
    equations backwards."""
    from plax.transforms.transpose import backward_pass, is_undefined_primal
    j = jaxpr.jaxpr
    env: dict = dict(zip(j.constvars, jaxpr.consts))
    env.update((v, a) for v, a in zip(j.invars, args) if not is_undefined_primal(a))

    def read(v):
        return literal_array(v) if isinstance(v, Literal) else env[v]

    lin = []
    for e in j.eqns:
        if all(isinstance(v, Literal) or v in env for v in e.invars):
            outs = e.primitive.bind(*[read(v) for v in e.invars], **e.params)
            env.update(zip(e.outvars, outs if e.primitive.multiple_results else [outs]))
        else:
            lin.append(e)
    consts = sorted({v for e in lin for v in e.invars if isinstance(v, Var) and v in env},
                    key=lambda v: v.count)
    undefined = [v for v, a in zip(j.invars, args) if is_undefined_primal(a)]
    lin_jaxpr = Jaxpr(consts, undefined, j.outvars, lin)
    cts_in = iter(backward_pass(lin_jaxpr, [env[v] for v in consts], list(cts)))
    return [next(cts_in) if is_undefined_primal(a) else None for a in args]


registry.register_rule("transpose", checkpoint_p)(_transpose)


def _register_lowering() -> None:
    from plax.lowering import register_call_primitive
    register_call_primitive(checkpoint_p, "jaxpr")


_register_lowering()
