"""Evaluating a jaxpr by binding its primitives (under whatever transforms are active)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from plax.core.jaxpr import ClosedJaxpr, Jaxpr, Literal, Var
from plax.core.source_info import capturing as _source_capturing


def literal_array(lit: Literal):
    """A literal as a rank-0 plax Array with the literal's (weak) type, on the default device.
    While a transform traces, the value stays on the host (evaluating a jaxpr inside another
    trace turns it back into a literal without a device round trip)."""
    from plax.array import from_owned_host
    return from_owned_host(np.asarray(lit.val, lit.aval.dtype), lit.aval.weak_type)


def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence[Any], *args: Any) -> list:
    """Evaluates ``jaxpr`` by binding each equation's primitive, so it runs under whatever
    transforms are active (a ``jit`` equation binds the call primitive again: calls stay calls).

    Args:
      jaxpr: the Jaxpr.
      consts: values of its constvars.
      *args: values of its invars.

    Returns:
      The list of output values.
    """
    env: dict[Var, Any] = {}

    def read(v):
        return literal_array(v) if isinstance(v, Literal) else env[v]

    if len(args) != len(jaxpr.invars):
        raise TypeError(f"jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    if _source_capturing[0]:  # print_saved_residuals: keep each equation's source line
        from plax.core.source_info import entered
        for eqn in jaxpr.eqns:
            with entered(eqn):
                outs = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
            env.update(zip(eqn.outvars, outs if eqn.primitive.multiple_results else (outs,)))
        return [read(v) for v in jaxpr.outvars]
    for eqn in jaxpr.eqns:
        outs = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = (outs,)
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def jaxpr_as_fun(closed: ClosedJaxpr):
    """A Python function that evaluates ``closed`` on its arguments (returns a list)."""
    return lambda *args: eval_jaxpr(closed.jaxpr, closed.consts, *args)
