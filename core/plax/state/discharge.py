"""State discharge: turning a jaxpr that uses refs into a pure one that threads their values.

A jaxpr with refs among its inputs (or that makes refs of its own) is rewritten into one
that takes each ref's *value* where it took the ref, and returns, after its own outputs,
the final value of each ref input. Reads become indexing, writes ``.at[idx].set``, ``+=``
``.at[idx].add``; a ref passed to a ``jit``, ``scan``, ``while`` or ``cond`` becomes a value
passed in and returned (a loop carry for loops). This is how JAX compiles programs with
refs, and it means a backend never sees a ref primitive.

``jit`` (through :func:`compile_closed`) discharges what it compiles; a call reading and
writing refs then runs as the pure program between reading the refs' values and writing
the results back (:func:`compile_stateful`). Reverse mode discharges the staged tangent
program before transposing it.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable, Sequence

from plax.core.interpret import eval_jaxpr, literal_array
from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Literal, sub_jaxprs
from plax.state.primitives import (addupdate_p, empty_ref_p, free_ref_p, freeze_p, get_p,
                                   new_ref_p, read_value, ref_primitives, swap_p,
                                   written_value)
from plax.state.types import Ref, is_ref_aval

# ------------------------------------------------------------------ detection

_has_refs: "weakref.WeakKeyDictionary[Jaxpr, bool]" = weakref.WeakKeyDictionary()


def jaxpr_has_refs(jaxpr: Jaxpr | ClosedJaxpr) -> bool:
    """Whether ``jaxpr`` takes or holds a ref, or one of its equations (or sub-jaxprs) uses
    refs: whether it must be discharged before a backend compiles it."""
    consts = ()
    if isinstance(jaxpr, ClosedJaxpr):
        consts, jaxpr = jaxpr.consts, jaxpr.jaxpr
    if any(type(c) is Ref for c in consts):
        return True
    hit = _has_refs.get(jaxpr)
    if hit is None:
        hit = (any(is_ref_aval(v.aval) for v in jaxpr.invars)
               or any(e.primitive in ref_primitives
                      or any(is_ref_aval(v.aval) for v in e.invars if not isinstance(v, Literal))
                      or any(jaxpr_has_refs(s) for s in sub_jaxprs(e.params))
                      for e in jaxpr.eqns))
        _has_refs[jaxpr] = hit
    return hit


# ------------------------------------------------------------------ the pass

_discharge_rules: dict = {}
_memo: "weakref.WeakKeyDictionary[ClosedJaxpr, tuple]" = weakref.WeakKeyDictionary()


def register_discharge_rule(primitive, rule: Callable) -> None:
    """Registers ``rule(invals, is_ref, **params) -> (new_invals, outs)`` for ``primitive``:
    ``invals`` hold each ref operand's current value (``is_ref`` marks them); ``new_invals``
    has, per operand, the ref's value after the equation or None; ``outs`` the results."""
    _discharge_rules[primitive] = rule


def discharge_closed(closed: ClosedJaxpr, ref_consts_as_values: bool = False
                     ) -> tuple[ClosedJaxpr, list[int]]:
    """The pure form of ``closed`` (see the module docstring) and the positions of its ref
    inputs, whose final values follow the outputs in that order. Cached per jaxpr.

    With ``ref_consts_as_values``, Ref constants stand for their current values and what is
    written into them is dropped (reverse mode's tangent refs, made when the linear program
    was staged); otherwise they are an error (see :func:`hoist_ref_consts`).

    Example:
      >>> def f(r): r[0] += 1.0
      >>> closed = jax.make_jaxpr(f)(jax.new_ref(jnp.zeros(2)))
      >>> print(discharge_closed(closed)[0])  # doctest: +SKIP
    """
    hit = _memo.get(closed)
    if hit is not None:
        return hit
    from plax.transforms.staging import trace_to_jaxpr
    jaxpr = closed.jaxpr
    consts = closed.consts
    if ref_consts_as_values:
        consts = [c._value if type(c) is Ref else c for c in consts]
    elif any(type(c) is Ref for c in consts):
        raise TypeError("discharge_closed needs a jaxpr whose refs are inputs, not constants "
                        "(hoist them with hoist_ref_consts).")
    ref_in = [i for i, v in enumerate(jaxpr.invars) if is_ref_aval(v.aval)]
    in_avals = [v.aval.inner_aval if is_ref_aval(v.aval) else v.aval for v in jaxpr.invars]

    def pure(*args):
        outs, env = _interpret(jaxpr, consts, args)
        return outs + [_Freed.unwrap(env[jaxpr.invars[i]]) for i in ref_in]

    out, _ = trace_to_jaxpr(pure, in_avals, where="the discharged program")
    _memo[closed] = result = (out, ref_in)
    return result


def _interpret(jaxpr: Jaxpr, consts: Sequence[Any], args: Sequence[Any]):
    """Evaluates ``jaxpr`` with each ref variable standing for its current value."""
    env: dict = dict(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))

    def read(v):
        return literal_array(v) if isinstance(v, Literal) else env[v]

    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        if any(type(x) is _Freed for x in invals):
            raise ValueError(f"`{eqn.primitive.name}` on a mutable array reference that "
                             "free_ref has freed: free a ref only after its last use.")
        is_ref = [not isinstance(v, Literal) and is_ref_aval(v.aval) for v in eqn.invars]
        rule = _discharge_rules.get(eqn.primitive)
        if rule is not None and (any(is_ref) or eqn.primitive in ref_primitives
                                 or any(jaxpr_has_refs(s) for s in sub_jaxprs(eqn.params))):
            new_invals, outs = rule(invals, is_ref, **eqn.params)
            for v, new in zip(eqn.invars, new_invals):
                if new is not None:
                    env[v] = new
        elif any(is_ref) or any(jaxpr_has_refs(s) for s in sub_jaxprs(eqn.params)):
            raise NotImplementedError(f"The primitive {eqn.primitive.name!r} does not support "
                                      "mutable array references (no discharge rule).")
        else:
            outs = eqn.primitive.bind(*invals, **eqn.params)
            if not eqn.primitive.multiple_results:
                outs = [outs]
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars], env


# ------------------------------------------------------------------ rules of the ref primitives

class _Freed:
    """What a ref freed by ``free_ref`` holds while a program is discharged: any later use
    is an error; a ref input's final value is what it held when freed."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    @staticmethod
    def unwrap(x):
        return x.value if type(x) is _Freed else x


def _empty_ref_rule(invals, is_ref, *, ty, memory_space=None):
    from plax import lax
    # XLA leaves an empty buffer uninitialised; plax starts it as zeros (deterministic)
    return [], [lax.full(ty.shape, 0, ty.dtype)]


def _free_ref_rule(invals, is_ref):
    return [_Freed(invals[0])], []


def _new_ref_rule(invals, is_ref, **params):
    return [None], [invals[0]]


def _freeze_rule(invals, is_ref):
    return [None], [invals[0]]


def _get_rule(invals, is_ref, *, indexer):
    ref, *dyn = invals
    return [None] * len(invals), [read_value(ref, indexer, dyn)]


def _swap_rule(invals, is_ref, *, indexer):
    ref, val, *dyn = invals
    new = written_value(ref, indexer, dyn, val)
    return [new] + [None] * (len(invals) - 1), [read_value(ref, indexer, dyn)]


def _addupdate_rule(invals, is_ref, *, indexer):
    ref, val, *dyn = invals
    new = written_value(ref, indexer, dyn, val, accumulate=True)
    return [new] + [None] * (len(invals) - 1), []


register_discharge_rule(new_ref_p, _new_ref_rule)
register_discharge_rule(empty_ref_p, _empty_ref_rule)
register_discharge_rule(free_ref_p, _free_ref_rule)
register_discharge_rule(freeze_p, _freeze_rule)
register_discharge_rule(get_p, _get_rule)
register_discharge_rule(swap_p, _swap_rule)
register_discharge_rule(addupdate_p, _addupdate_rule)


# ------------------------------------------------------------------ rules of calls and control flow

def _trace_pure(fun: Callable, in_avals) -> ClosedJaxpr:
    """``fun`` traced into a ClosedJaxpr of its own (nothing captured from the caller)."""
    from plax.transforms.staging import convert_tracer_consts, trace_to_jaxpr
    closed, _ = trace_to_jaxpr(lambda *a: list(fun(*a)), list(in_avals),
                               where="the discharged program")
    closed, captured = convert_tracer_consts(closed.jaxpr, closed.consts)
    assert not captured
    return closed


def _jit_rule(invals, is_ref, *, jaxpr, name, **placement):
    from plax.transforms.call import jit_p
    pure, ref_in = discharge_closed(jaxpr)
    outs = jit_p.bind(*invals, jaxpr=pure, name=name, **placement)
    n = len(jaxpr.out_avals)
    new = [None] * len(invals)
    for i, v in zip(ref_in, outs[n:]):
        new[i] = v
    return new, outs[:n]


def _inner(aval):
    return aval.inner_aval if is_ref_aval(aval) else aval


def _scan_rule(invals, is_ref, *, jaxpr, num_consts, num_carry, **params):
    from plax.lax.control_flow.scan import scan_p
    if any(is_ref[num_consts:]):
        raise TypeError("scan carries and scanned-over values cannot be mutable array "
                        "references; close over the ref (or pass it as a constant) instead.")
    pure, ref_in = discharge_closed(jaxpr)
    refs = [i for i in range(num_consts) if is_ref[i]]
    plain = [i for i in range(num_consts) if not is_ref[i]]
    n_out = len(jaxpr.out_avals)
    body_avals = pure.in_avals

    def body(*args):
        # (plain consts, ref values, carry, xs) -> (ref values, carry out, ys)
        k, m = len(plain), len(refs)
        consts = [None] * num_consts
        for i, a in zip(plain, args[:k]):
            consts[i] = a
        for i, a in zip(refs, args[k:k + m]):
            consts[i] = a
        outs = eval_jaxpr(pure.jaxpr, pure.consts, *consts, *args[k + m:])
        finals = outs[n_out:]
        return finals + outs[:n_out]

    avals = ([body_avals[i] for i in plain] + [body_avals[i] for i in refs]
             + list(body_avals[num_consts:]))
    new_body = _trace_pure(body, avals)
    operands = ([invals[i] for i in plain] + [invals[i] for i in refs]
                + list(invals[num_consts:]))
    outs = scan_p.bind(*operands, jaxpr=new_body, num_consts=len(plain),
                       num_carry=len(refs) + num_carry, **params)
    new = [None] * len(invals)
    for i, v in zip(refs, outs[:len(refs)]):
        new[i] = v
    assert ref_in == refs
    return new, outs[len(refs):]


def _while_rule(invals, is_ref, *, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    from plax.lax.control_flow.loops import while_p
    nc, nb = cond_nconsts, body_nconsts
    if any(is_ref[nc + nb:]):
        raise TypeError("while_loop carries cannot be mutable array references; close over "
                        "the ref instead.")
    # distinct refs by the operand's value identity (one ref may serve both functions)
    ref_vals: list = []

    def slot(x):
        for k, r in enumerate(ref_vals):
            if r is x:
                return k
        ref_vals.append(x)
        return len(ref_vals) - 1

    cond_slots = {i: slot(invals[i]) for i in range(nc) if is_ref[i]}
    body_slots = {i - nc: slot(invals[i]) for i in range(nc, nc + nb) if is_ref[i]}
    m = len(ref_vals)
    pure_cond, _ = discharge_closed(cond_jaxpr)
    pure_body, body_ref_in = discharge_closed(body_jaxpr)
    cond_plain = [i for i in range(nc) if not is_ref[i]]
    body_plain = [i for i in range(nb) if not is_ref[nc + i]]
    n_carry = len(invals) - nc - nb

    def rebuild(plain_idx, slots, n, plain_vals, refs):
        consts = [None] * n
        for i, a in zip(plain_idx, plain_vals):
            consts[i] = a
        for i, k in slots.items():
            consts[i] = refs[k]
        return consts

    def cond(*args):
        plain, refs, carry = args[:len(cond_plain)], args[len(cond_plain):][:m], args[len(cond_plain) + m:]
        consts = rebuild(cond_plain, cond_slots, nc, plain, refs)
        return eval_jaxpr(pure_cond.jaxpr, pure_cond.consts, *consts, *carry)[:1]

    def body(*args):
        plain, refs, carry = args[:len(body_plain)], args[len(body_plain):][:m], args[len(body_plain) + m:]
        consts = rebuild(body_plain, body_slots, nb, plain, refs)
        outs = eval_jaxpr(pure_body.jaxpr, pure_body.consts, *consts, *carry)
        finals = list(refs)
        for i, v in zip(body_ref_in, outs[n_carry:]):
            finals[body_slots[i]] = v
        return finals + outs[:n_carry]

    ref_avals = [_inner(_aval_of(x)) for x in ref_vals]
    carry_avals = [_aval_of(x) for x in invals[nc + nb:]]
    new_cond = _trace_pure(cond, [_aval_of(invals[i]) for i in cond_plain] + ref_avals
                           + carry_avals)
    new_body = _trace_pure(body, [_aval_of(invals[nc + i]) for i in body_plain] + ref_avals
                           + carry_avals)
    outs = while_p.bind(*[invals[i] for i in cond_plain],
                        *[invals[nc + i] for i in body_plain], *ref_vals, *invals[nc + nb:],
                        cond_jaxpr=new_cond, body_jaxpr=new_body,
                        cond_nconsts=len(cond_plain), body_nconsts=len(body_plain))
    new = [None] * len(invals)
    for i, k in cond_slots.items():
        new[i] = outs[k]
    for i, k in body_slots.items():
        new[nc + i] = outs[k]
    return new, outs[m:]


def _cond_rule(invals, is_ref, *, branches, **params):
    from plax.lax.control_flow.cond import cond_p
    index, ops = invals[0], invals[1:]
    pures = [discharge_closed(b) for b in branches]
    ref_in = pures[0][1]
    n_out = len(branches[0].out_avals)
    outs = cond_p.bind(index, *ops, branches=tuple(p for p, _ in pures), **params)
    new = [None] * len(invals)
    for i, v in zip(ref_in, outs[n_out:]):
        new[1 + i] = v
    return new, outs[:n_out]


def _aval_of(x):
    from plax.core.trace import get_aval
    return get_aval(x)


def _register_control_flow() -> None:
    from plax.lax.control_flow.cond import cond_p
    from plax.lax.control_flow.loops import while_p
    from plax.lax.control_flow.scan import scan_p
    from plax.transforms.call import jit_p
    register_discharge_rule(jit_p, _jit_rule)
    register_discharge_rule(scan_p, _scan_rule)
    register_discharge_rule(while_p, _while_rule)
    register_discharge_rule(cond_p, _cond_rule)


# ------------------------------------------------------------------ running programs with refs

_hoisted: "weakref.WeakKeyDictionary[ClosedJaxpr, dict]" = weakref.WeakKeyDictionary()


def hoist_ref_consts(closed: ClosedJaxpr, trailing: bool = False) -> tuple[ClosedJaxpr, list]:
    """``closed`` with its Ref constants (refs a jitted function closed over) turned into
    inputs (leading ones, or ``trailing``), and those Ref objects. Cached per jaxpr."""
    per = _hoisted.get(closed)
    if per is None:
        per = _hoisted.setdefault(closed, {})
    hit = per.get(trailing)
    if hit is not None:
        return hit
    j = closed.jaxpr
    refs = [(v, c) for v, c in zip(j.constvars, closed.consts) if type(c) is Ref]
    if not refs:
        per[trailing] = (closed, [])
        return closed, []
    kept = [(v, c) for v, c in zip(j.constvars, closed.consts) if type(c) is not Ref]
    ref_vars = [v for v, _ in refs]
    invars = list(j.invars) + ref_vars if trailing else ref_vars + list(j.invars)
    new = Jaxpr([v for v, _ in kept], invars, j.outvars, j.eqns)
    per[trailing] = out = (ClosedJaxpr(new, [c for _, c in kept]), [c for _, c in refs])
    return out


def compile_stateful(closed: ClosedJaxpr, compile_pure: Callable, device):
    """Compiles a program that reads and writes refs: ``compile_pure(pure_closed)`` compiles
    its discharged form, and the returned executable takes Ref objects where ``closed``
    takes refs, reads their values, runs, and writes the final values back.

    Returns:
      ``(executable, const_bufs)`` as :func:`plax.transforms.call.compile_closed` hands out.
    """
    from plax.array import Array
    hoisted, const_refs = hoist_ref_consts(closed)
    pure, ref_in = discharge_closed(hoisted)
    compiled = compile_pure(pure)
    inner = compiled.executable
    n_const_bufs = len(compiled.const_bufs)
    n_hoisted = len(const_refs)
    n_out = len(closed.out_avals)
    arg_refs = [i - n_hoisted for i in ref_in if i >= n_hoisted]
    final_avals = pure.out_avals[n_out:]
    new = Array._new

    def run(*bufs):
        consts, args = bufs[:n_const_bufs], list(bufs[n_const_bufs:])
        refs = list(const_refs) + [args[i] for i in arg_refs]
        for i in arg_refs:
            args[i] = args[i]._value._buffer_on(device)
        ins = [r._value._buffer_on(device) for r in const_refs] + args
        outs = inner(*consts, *ins)
        for r, b, aval in zip(refs, outs[n_out:], final_avals):
            old = r._value
            r._value = new(b, aval, device, old._committed)
            if type(old) is not Array:  # a ref of a value over a mesh stays placed so
                from plax.sharding_eager import laid_out_as
                r._value = laid_out_as(r._value, old)
        return outs[:n_out]

    return run, compiled.const_bufs


def apply_with_refs(prim, args, params):
    """Runs one primitive eagerly on operands among which are Ref objects (a ``scan`` or
    ``cond`` closing over a ref, outside ``jit``): as a one-equation program, discharged."""
    from plax.core.trace import eager_region, get_aval
    from plax.transforms.call import _jit_impl
    from plax.transforms.staging import trace_to_jaxpr

    # one input per distinct ref: a ref passed twice (to a while's cond and body) is one ref
    unique: list = []
    where = []
    for a in args:
        k = next((i for i, u in enumerate(unique) if u is a), None) if type(a) is Ref else None
        if k is None:
            unique.append(a)
            k = len(unique) - 1
        where.append(k)

    def one(*xs):
        out = prim.bind(*[xs[k] for k in where], **params)
        return list(out) if prim.multiple_results else [out]

    with eager_region():
        closed, _ = trace_to_jaxpr(one, [get_aval(a) for a in unique], where=prim.name)
    outs = _jit_impl(*unique, jaxpr=closed, name=prim.name)
    return outs if prim.multiple_results else outs[0]


_register_control_flow()
