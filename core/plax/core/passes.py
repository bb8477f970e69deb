"""Jaxpr-to-jaxpr passes: what a backend's ``compile`` receives, and the known/unknown split
that reverse mode applies to a call's JVP.

A *call* equation (``jit``) holds its body in ``params[eqn.primitive.call_param]``; the
passes keep calls (a backend compiles each body once, through
:func:`plax.lowering.lower`'s recursive lowering) and work inside their bodies.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

from plax.core.effects import eqn_has_effects
from plax.core.jaxpr import ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Var, sub_jaxprs
from plax.core.registry import rule_table
from plax.core.trace import get_aval


def call_param(eqn: JaxprEqn) -> str | None:
    """The parameter holding the body of a call equation (``"jaxpr"`` for ``jit``), or None."""
    return getattr(eqn.primitive, "call_param", None)


def inline_param(eqn: JaxprEqn) -> str:
    """The parameter holding a body that backends inline: ``call_jaxpr`` (custom_jvp_call,
    custom_vjp_call) or the one the primitive names (linear_call's ``callee``)."""
    return getattr(eqn.primitive, "inline_param", "call_jaxpr")


def inline_calls(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Replaces every equation that carries a ``call_jaxpr`` parameter (custom_jvp_call,
    custom_vjp_call, ...; linear_call's ``callee``) by the equations of that jaxpr, so backends see only primitives
    with implementations, and does the same inside the bodies of ``jit`` calls (which stay
    calls). Constants of inlined jaxprs become constants of the result."""
    jaxpr = closed.jaxpr
    if not any(inline_param(e) in e.params or call_param(e) for e in jaxpr.eqns):
        return closed
    constvars, consts = list(jaxpr.constvars), list(closed.consts)
    eqns: list[JaxprEqn] = []
    rename: dict = {}

    def sub(v):
        return rename.get(v, v) if isinstance(v, Var) else v

    for e in jaxpr.eqns:
        param = call_param(e)
        if param is not None:
            body = e.params[param]
            new_body = inline_calls(body)
            params = e.params if new_body is body else dict(e.params, **{param: new_body})
            eqns.append(JaxprEqn(e.primitive, [sub(v) for v in e.invars], e.outvars, params))
            continue
        inner = e.params.get(inline_param(e))
        if inner is None:
            eqns.append(JaxprEqn(e.primitive, [sub(v) for v in e.invars], e.outvars, e.params))
            continue
        body = inline_calls(inner if isinstance(inner, ClosedJaxpr) else ClosedJaxpr(inner, []))
        local: dict = {}
        for v, c in zip(body.jaxpr.constvars, body.consts):
            fresh = Var(v.aval)
            constvars.append(fresh)
            consts.append(c)
            local[v] = fresh
        local.update(zip(body.jaxpr.invars, [sub(v) for v in e.invars]))

        def lsub(v, local=local):
            return local.get(v, v) if isinstance(v, Var) else v

        for ie in body.jaxpr.eqns:
            outs = [Var(v.aval) for v in ie.outvars]
            local.update(zip(ie.outvars, outs))
            eqns.append(JaxprEqn(ie.primitive, [lsub(v) for v in ie.invars], outs, ie.params))
        for outer, inner_out in zip(e.outvars, body.jaxpr.outvars):
            rename[outer] = lsub(inner_out)
    new = Jaxpr(constvars, jaxpr.invars, [sub(v) for v in jaxpr.outvars], eqns)
    return ClosedJaxpr(new, consts)


def dce(jaxpr: Jaxpr) -> Jaxpr:
    """Drops equations none of whose outputs are used (primitives are pure, except the
    effectful ones of :mod:`plax.core.effects`, which are kept); a call keeps only the
    outputs that are used, its body pruned to them (and its unread inputs dropped); an
    equation with a ``dce`` rule (:mod:`plax.core.registry`; ``scan`` drops its unused
    stacked outputs) is replaced by what its rule returns."""
    live = {v for v in jaxpr.outvars if isinstance(v, Var)}
    kept = []
    for e in reversed(jaxpr.eqns):
        used = [not isinstance(v, DropVar) and v in live for v in e.outvars]
        if not any(used) and not eqn_has_effects(e):
            continue
        param = call_param(e)
        if param is not None:
            e = _dce_call(e, param, used)
        elif not all(used) and e.primitive in _dce_rules:
            e = _dce_rules[e.primitive](e, used)
        kept.append(e)
        live.update(v for v in e.invars if isinstance(v, Var))
    kept.reverse()
    return Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, kept)


_dce_rules = rule_table("dce")


def _dce_call(eqn: JaxprEqn, param: str, used: list) -> JaxprEqn:
    body = eqn.params[param]
    new_body, keep_in = _pruned_body(body, tuple(used))
    if new_body is body and all(used):
        return eqn
    return JaxprEqn(eqn.primitive, [v for v, k in zip(eqn.invars, keep_in) if k],
                    [v for v, u in zip(eqn.outvars, used) if u],
                    dict(eqn.params, **{param: new_body}))


# body -> {used outputs: (pruned body, kept inputs)}. Pruning the same body the same way
# gives the same object every time, so what transforms and backends cache per body (its
# transpose, its executable) is found again on the next call.
_pruned: "weakref.WeakKeyDictionary[ClosedJaxpr, dict]" = weakref.WeakKeyDictionary()


def _pruned_body(body: ClosedJaxpr, used: tuple) -> tuple[ClosedJaxpr, list]:
    table = _pruned.get(body)
    if table is None:
        table = _pruned.setdefault(body, {})
    hit = table.get(used)
    if hit is not None:
        return (body if hit[0] is None else hit[0]), hit[1]
    j = body.jaxpr
    pruned = dce(Jaxpr(j.constvars, j.invars, [v for v, u in zip(j.outvars, used) if u],
                       j.eqns))
    read = {v for e in pruned.eqns for v in e.invars if isinstance(v, Var)}
    read.update(v for v in pruned.outvars if isinstance(v, Var))
    keep_in = [v in read for v in j.invars]
    consts = [(v, c) for v, c in zip(j.constvars, body.consts) if v in read]
    unchanged = (all(used) and all(keep_in) and len(consts) == len(j.constvars)
                 and len(pruned.eqns) == len(j.eqns)
                 and all(a is b for a, b in zip(pruned.eqns, j.eqns)))
    new = None if unchanged else ClosedJaxpr(
        Jaxpr([v for v, _ in consts], [v for v, k in zip(j.invars, keep_in) if k],
              pruned.outvars, pruned.eqns), [c for _, c in consts])
    table[used] = (new, keep_in)  # None: the body itself (a value must not hold its key)
    return (body if new is None else new), keep_in


def pruned_outputs(body: ClosedJaxpr, keep: tuple) -> ClosedJaxpr:
    """``body`` computing only the outputs flagged in ``keep``, for the ``dce`` rules of
    primitives whose sub-jaxpr keeps its inputs (``scan``).

    Args:
      body: the sub-jaxpr.
      keep: one flag per output of ``body``.

    Returns:
      A jaxpr with the same inputs and constants, the kept outputs, and its equations pruned
      by :func:`dce`; the same object for the same ``body`` and ``keep`` (so what is cached
      per body is found again).

    Example:
      >>> body = plax.make_jaxpr(lambda c, x: (c + x, jnp.sin(x)))(1.0, 2.0)
      >>> [e.primitive.name for e in pruned_outputs(body, (True, False)).jaxpr.eqns]
      ['add']
    """
    table = _pruned.get(body)
    if table is None:
        table = _pruned.setdefault(body, {})
    key = ("outputs", keep)
    hit = table.get(key)
    if hit is None:
        j = body.jaxpr
        pruned = dce(Jaxpr(j.constvars, j.invars,
                           [v for v, k in zip(j.outvars, keep) if k], j.eqns))
        hit = table[key] = ClosedJaxpr(pruned, list(body.consts))
    return hit


def has_unread_call_outputs(jaxpr: Jaxpr) -> bool:
    """Whether a call equation of ``jaxpr`` has an output nobody reads (:func:`dce` would
    prune it)."""
    calls = [e for e in jaxpr.eqns if call_param(e) is not None]
    if not calls:
        return False
    read = {v for e in jaxpr.eqns for v in e.invars if isinstance(v, Var)}
    read.update(v for v in jaxpr.outvars if isinstance(v, Var))
    return any(v not in read for e in calls for v in e.outvars)


def dependency_graph(eqns: list) -> tuple[list[list[int]], list[int]]:
    """``(readers, waiting)`` for reordering ``eqns``: ``readers[i]`` the equations that must
    come after equation ``i`` (those reading its outputs, and the next effectful equation
    after an effectful one, so effects keep their order), ``waiting[i]`` how many equations
    must come before ``i``. A list schedule emits an equation once its count is zero and
    decrements its readers' counts."""
    producer = {v: i for i, e in enumerate(eqns) for v in e.outvars}
    readers: list[list[int]] = [[] for _ in eqns]
    waiting = [0] * len(eqns)
    last_effect = None
    for i, e in enumerate(eqns):
        deps = {producer[v] for v in e.invars if isinstance(v, Var) and v in producer}
        if eqn_has_effects(e):
            if last_effect is not None:
                deps.add(last_effect)
            last_effect = i
        waiting[i] = len(deps)
        for d in deps:
            readers[d].append(i)
    return readers, waiting


_value_identities: dict = {}  # primitive -> None (always) or when(avals, params) -> bool


def register_value_identity(primitive, when: Callable | None = None) -> None:
    """Declares ``primitive`` the identity on its first operand: one result, equal to that
    operand. :func:`prepare_for_backend` removes its equations, also inside sub-jaxprs, and
    eager dispatch hands back the operand (an ``impl`` rule, :mod:`plax.dispatch`), so no
    backend needs a kernel for that case.

    Args:
      primitive: the primitive. With no ``when`` it is always the identity, there for its
        type only (plax-pmap's ``pvary``, which marks a value as varying over mesh axes).
      when: for a primitive that is the identity only on some operands, which: a predicate
        of the operands' avals (ShapedArrays: a backend's buffers are opaque to the core)
        and the equation's params (a scatter into an empty operand writes nothing, whatever
        its mode: ``plax.lax.slicing``).

    Example::

      register_value_identity(scatter_add_p, when=lambda avals, params: 0 in avals[0].shape)
    """
    _value_identities[primitive] = when
    if when is not None:
        rule_table("impl")[primitive] = _eager_identity(when)


def _eager_identity(when: Callable) -> Callable:
    # the eager side of a conditional identity: the operand itself where ``when`` holds,
    # NotImplemented (dispatch goes on to the backend) where it does not
    def impl(*args, **params):
        first = getattr(args[0], "aval", None)
        if first is None:  # a host value: the backend is handed it as before
            return NotImplemented
        if when([first] + [get_aval(a) for a in args[1:]], params):
            return args[0]
        return NotImplemented
    return impl


def identity_condition(primitive) -> Callable | None:
    """The ``when`` predicate ``primitive`` was registered with by
    :func:`register_value_identity` (None for an unconditional identity or none at all)."""
    return _value_identities.get(primitive)


def _is_value_identity(e) -> bool:
    if e.primitive not in _value_identities:
        return False
    when = _value_identities[e.primitive]
    return when is None or bool(when([v.aval for v in e.invars], e.params))


def _holds_value_identity(jaxpr: Jaxpr) -> bool:
    return any(_is_value_identity(e)
               or any(_holds_value_identity(j) for j in sub_jaxprs(e.params))
               for e in jaxpr.eqns)


def erase_value_identities(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` without the equations that :func:`register_value_identity` declares
    identities (their results replaced by their first operands), in every
    sub-jaxpr too; ``closed`` itself when it holds none."""
    if not _value_identities or not _holds_value_identity(closed.jaxpr):
        return closed
    jaxpr = closed.jaxpr
    rename: dict = {}

    def sub(v):
        return rename.get(v, v) if isinstance(v, Var) else v

    eqns = []
    for e in jaxpr.eqns:
        if _is_value_identity(e):
            rename[e.outvars[0]] = sub(e.invars[0])
            continue
        params = e.params
        if any(_holds_value_identity(j) for j in sub_jaxprs(params)):
            params = {k: _erased_param(v) for k, v in params.items()}
        eqns.append(JaxprEqn(e.primitive, [sub(v) for v in e.invars], e.outvars, params))
    new = Jaxpr(jaxpr.constvars, jaxpr.invars, [sub(v) for v in jaxpr.outvars], eqns)
    return ClosedJaxpr(new, list(closed.consts))


def _erased_param(value):
    if isinstance(value, ClosedJaxpr):
        return erase_value_identities(value)
    if isinstance(value, Jaxpr):
        return erase_value_identities(ClosedJaxpr(value, [])).jaxpr
    if isinstance(value, (tuple, list)) and any(isinstance(x, (Jaxpr, ClosedJaxpr))
                                                for x in value):
        return type(value)(_erased_param(x) for x in value)
    return value


def prepare_for_backend(closed: ClosedJaxpr) -> tuple[Jaxpr, list]:
    """erase_value_identities + inline_calls + dce, with constvars turned into leading
    invars: the form ``Backend.compile`` receives (``jit`` calls stay, with their bodies
    prepared the same way but keeping their constants). Returns the jaxpr and the constant
    values to pass first."""
    inlined = inline_calls(erase_value_identities(closed))
    j = dce(inlined.jaxpr)
    return Jaxpr([], list(j.constvars) + list(j.invars), j.outvars, j.eqns), list(inlined.consts)


# ------------------------------------------------------------------ known / unknown split

class KnownSplit:
    """A jaxpr split in two calls by :func:`split_known`.

    Attributes:
      known: the known inputs -> the known outputs that are not forwarded, then the
        residuals that must be computed.
      unknown: the residuals, then the unknown inputs -> the unknown outputs.
      primal_outs: per known output of the original, ``("in", i)`` (it is known input
        ``i``) or ``("out", k)`` (output ``k`` of ``known``).
      residuals: per residual, ``("const", value)``, ``("in", i)``, ``("primal_out", j)``
        (known output ``j`` of the original) or ``("out", k)``.
    """

    __slots__ = ("known", "unknown", "primal_outs", "residuals")

    def __init__(self, known, unknown, primal_outs, residuals):
        self.known, self.unknown = known, unknown
        self.primal_outs, self.residuals = primal_outs, residuals


def split_known(closed: ClosedJaxpr, n_known_in: int, n_known_out: int) -> KnownSplit | None:
    """Splits ``closed`` (its first ``n_known_in`` inputs known, the rest unknown) into a known
    and an unknown jaxpr: an equation is unknown when it reads an unknown value.

    Applied to a JVP jaxpr (primals known, tangents unknown), the unknown part is the linear
    tangent computation and the residuals are the primal values it reads, in order of first
    use. As in JAX, a residual that is a constant, a known input or a known output is passed
    on directly rather than returned a second time.

    Returns:
      A :class:`KnownSplit`, or None if one of the first ``n_known_out`` outputs is unknown.
    """
    jaxpr = closed.jaxpr
    unknown: set = set(jaxpr.invars[n_known_in:])
    known_eqns, unknown_eqns = [], []
    for e in jaxpr.eqns:
        if any(isinstance(v, Var) and v in unknown for v in e.invars):
            unknown_eqns.append(e)
            unknown.update(e.outvars)
        else:
            known_eqns.append(e)
    known_outs, unknown_outs = jaxpr.outvars[:n_known_out], jaxpr.outvars[n_known_out:]
    if any(isinstance(v, Var) and v in unknown for v in known_outs):
        return None

    residual_vars: list = []
    seen: set = set()
    for v in [v for e in unknown_eqns for v in e.invars] + list(unknown_outs):
        if isinstance(v, Var) and v not in unknown and v not in seen:
            seen.add(v)
            residual_vars.append(v)

    consts = dict(zip(jaxpr.constvars, closed.consts))
    known_in = {v: i for i, v in enumerate(jaxpr.invars[:n_known_in])}
    first_out: dict = {}
    for j, v in enumerate(known_outs):
        if isinstance(v, Var):
            first_out.setdefault(v, j)
    outvars: list = []
    primal_outs = []
    for v in known_outs:
        if isinstance(v, Var) and v in known_in:
            primal_outs.append(("in", known_in[v]))
        else:
            primal_outs.append(("out", len(outvars)))
            outvars.append(v)
    residuals: list[tuple[str, Any]] = []
    for v in residual_vars:
        if v in consts:
            residuals.append(("const", consts[v]))
        elif v in known_in:
            residuals.append(("in", known_in[v]))
        elif v in first_out:
            residuals.append(("primal_out", first_out[v]))
        else:
            residuals.append(("out", len(outvars)))
            outvars.append(v)

    read = {v for e in known_eqns for v in e.invars if isinstance(v, Var)}
    read.update(v for v in outvars if isinstance(v, Var))
    constvars = [v for v in jaxpr.constvars if v in read]
    known = ClosedJaxpr(Jaxpr(constvars, jaxpr.invars[:n_known_in], outvars, known_eqns),
                        [consts[v] for v in constvars])
    # The unknown half gets variables of its own: both halves may be printed side by side.
    fresh: dict = {v: Var(v.aval) for v in residual_vars + list(jaxpr.invars[n_known_in:])}

    def sub(v):
        return fresh.get(v, v) if isinstance(v, Var) else v

    eqns = []
    for e in unknown_eqns:
        outs = [type(v)(v.aval) for v in e.outvars]
        eqns.append(JaxprEqn(e.primitive, [sub(v) for v in e.invars], outs, e.params))
        fresh.update(zip(e.outvars, outs))
    unknown_jaxpr = Jaxpr([], [fresh[v] for v in residual_vars + list(jaxpr.invars[n_known_in:])],
                          [sub(v) for v in unknown_outs], eqns)
    return KnownSplit(known, ClosedJaxpr(unknown_jaxpr, []), primal_outs, residuals)
