"""Effects: primitives whose equations must run even when nobody reads their results.

Primitives are pure by default, so dead-code elimination may drop an equation whose
outputs are unused. A primitive that acts on the world (printing, a host callback with side
effects) is declared here, and :func:`plax.core.passes.dce` keeps its equations, and every
call or control-flow equation whose sub-jaxpr holds one.
"""
from __future__ import annotations

import weakref

from plax.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn

effectful_primitives: set = set()

_jaxpr_effects: "weakref.WeakKeyDictionary[Jaxpr, bool]" = weakref.WeakKeyDictionary()


def register_effectful(primitive) -> None:
    """Declares ``primitive`` effectful: dead-code elimination never drops its equations."""
    effectful_primitives.add(primitive)


def jaxpr_has_effects(jaxpr: Jaxpr | ClosedJaxpr) -> bool:
    """Whether an equation of ``jaxpr`` (or of a sub-jaxpr, recursively) is effectful."""
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    if not effectful_primitives:
        return False
    try:
        return _jaxpr_effects[jaxpr]
    except KeyError:
        pass
    except TypeError:  # not weakly referenceable
        return any(eqn_has_effects(e) for e in jaxpr.eqns)
    out = any(eqn_has_effects(e) for e in jaxpr.eqns)
    _jaxpr_effects[jaxpr] = out
    return out


def eqn_has_effects(eqn: JaxprEqn) -> bool:
    """Whether ``eqn`` is effectful: its primitive is, or a jaxpr among its parameters holds
    an effectful equation."""
    if eqn.primitive in effectful_primitives:
        return True
    if not effectful_primitives:
        return False
    for v in eqn.params.values():
        if isinstance(v, (Jaxpr, ClosedJaxpr)) and jaxpr_has_effects(v):
            return True
        if isinstance(v, (tuple, list)) and any(
                isinstance(b, (Jaxpr, ClosedJaxpr)) and jaxpr_has_effects(b) for b in v):
            return True
    return False
