"""Jaxpr-to-jaxpr passes that prepare a jaxpr for a backend's ``compile``."""
from __future__ import annotations

from plax.core.jaxpr import ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Var


def inline_calls(closed: ClosedJaxpr) -> ClosedJaxpr:
    """Replaces every equation that carries a ``call_jaxpr`` parameter (custom_jvp_call,
    custom_vjp_call, ...) by the equations of that jaxpr, so backends see only primitives
    with implementations. Constants of inlined jaxprs become constants of the result."""
    jaxpr = closed.jaxpr
    if not any("call_jaxpr" in e.params for e in jaxpr.eqns):
        return closed
    constvars, consts = list(jaxpr.constvars), list(closed.consts)
    eqns: list[JaxprEqn] = []
    rename: dict = {}

    def sub(v):
        return rename.get(v, v) if isinstance(v, Var) else v

    for e in jaxpr.eqns:
        inner = e.params.get("call_jaxpr")
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
    """Drops equations none of whose outputs are used (primitives are pure)."""
    live = {v for v in jaxpr.outvars if isinstance(v, Var)}
    kept = []
    for e in reversed(jaxpr.eqns):
        if any(v in live for v in e.outvars if not isinstance(v, DropVar)):
            kept.append(e)
            live.update(v for v in e.invars if isinstance(v, Var))
    kept.reverse()
    return Jaxpr(jaxpr.constvars, jaxpr.invars, jaxpr.outvars, kept)


def prepare_for_backend(closed: ClosedJaxpr) -> tuple[Jaxpr, list]:
    """inline_calls + dce, with constvars turned into leading invars: the form
    ``Backend.compile`` receives. Returns the jaxpr and the constant values to pass first."""
    inlined = inline_calls(closed)
    j = dce(inlined.jaxpr)
    return Jaxpr([], list(j.constvars) + list(j.invars), j.outvars, j.eqns), list(inlined.consts)
