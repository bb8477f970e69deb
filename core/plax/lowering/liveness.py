"""Liveness: where each value of a jaxpr is read for the last time.

A compiling backend frees (or reuses) a buffer right after its last reader, so that large
intermediates do not stay alive until the function returns.
"""
from __future__ import annotations

from plax.core.jaxpr import Jaxpr, Var


def last_uses(jaxpr: Jaxpr) -> dict[Var, int]:
    """For each variable an equation reads, the index of the last equation reading it.

    Variables that are outputs of the jaxpr get ``len(jaxpr.eqns)``: they never die inside.

    Example:
      >>> jaxpr = plax.make_jaxpr(lambda x: jnp.sin(x) * x)(1.0).jaxpr
      >>> jaxpr
      { lambda ; a:f32[]. let b:f32[] = sin a; c:f32[] = mul b a in (c,) }
      >>> uses = last_uses(jaxpr)
      >>> a, b, c = jaxpr.invars[0], jaxpr.eqns[0].outvars[0], jaxpr.eqns[1].outvars[0]
      >>> uses[a], uses[b], uses[c]   # a and b are last read by eqn 1; c is the output
      (1, 1, 2)
    """
    last: dict[Var, int] = {}
    for i, eqn in enumerate(jaxpr.eqns):
        for v in eqn.invars:
            if isinstance(v, Var):
                last[v] = i
    for v in jaxpr.outvars:
        if isinstance(v, Var):
            last[v] = len(jaxpr.eqns)
    return last


def dead_after(jaxpr: Jaxpr) -> list[list[Var]]:
    """For each equation, the variables (not inputs of the jaxpr) that die right after it.

    Inputs are excluded: their buffers belong to the caller.
    """
    last = last_uses(jaxpr)
    inputs = set(jaxpr.invars) | set(jaxpr.constvars)
    dead: list[list[Var]] = [[] for _ in jaxpr.eqns]
    for v, i in last.items():
        if i < len(jaxpr.eqns) and v not in inputs:
            dead[i].append(v)
    for vs in dead:
        vs.sort(key=lambda v: v.count)
    return dead
