"""Type checking jaxprs: ``check_jaxpr``."""
from __future__ import annotations

import itertools

import numpy as np

from plax.core.jaxpr import ClosedJaxpr, DropVar, Jaxpr, Literal, sub_jaxprs
from plax.core.pretty_print import _Namer, _pp_literal, pp_eqn
from plax.errors import JaxprTypeError




def _avals_text(avals) -> str:
    return ", ".join(a.str_short() + (" (weak)" if a.weak_type else "") for a in avals)


def _said(where) -> str:
    return where() if callable(where) else where


def check_jaxpr(jaxpr: Jaxpr | ClosedJaxpr) -> None:
    """Type-checks ``jaxpr``: every variable defined once before use, every equation's
    operand count and output types (shape, dtype, weak type) equal to what its primitive's
    abstract evaluation gives, literals consistent with their types, and every sub-jaxpr
    in the parameters (the body of a custom_jvp/custom_vjp call, ...) checked in turn.

    Raises:
      JaxprTypeError: naming the offending equation.

    Example:
      >>> check_jaxpr(jax.make_jaxpr(jnp.sin)(1.0))  # returns None when well typed
    """
    if isinstance(jaxpr, ClosedJaxpr):
        if len(jaxpr.consts) != len(jaxpr.jaxpr.constvars):
            raise JaxprTypeError(f"ClosedJaxpr has {len(jaxpr.consts)} constants for "
                                 f"{len(jaxpr.jaxpr.constvars)} constvars")
        jaxpr = jaxpr.jaxpr
    defined: set = set()
    namer = _Namer()

    # (`where` says where a variable is used or bound: a string, or a function making it,
    # called only for an error -- printing every equation cost most of a clean check)
    def use(v, where):
        if isinstance(v, Literal):
            if np.shape(v.val) != v.aval.shape or np.asarray(v.val).dtype != v.aval.dtype:
                raise JaxprTypeError(f"Literal {_pp_literal(v)} in {_said(where)} holds a value of "
                                     f"type {np.asarray(v.val).dtype}{list(np.shape(v.val))}")
            return
        if v not in defined:
            raise JaxprTypeError(f"Variable {namer(v)}:{v.aval.str_short()} is used before it "
                                 f"is defined, in {_said(where)}")

    def bind(v, where):
        if isinstance(v, DropVar):
            return
        if v in defined:
            raise JaxprTypeError(f"Variable {namer(v)} is defined twice (at {_said(where)})")
        defined.add(v)

    for v in itertools.chain(jaxpr.constvars, jaxpr.invars):
        bind(v, "the binders")
    for eqn in jaxpr.eqns:
        def where(eqn=eqn):
            return f"equation `{pp_eqn(eqn, namer)}`"
        for v in eqn.invars:
            use(v, where)
        try:
            out = eqn.primitive.abstract_eval(*[v.aval for v in eqn.invars], **eqn.params)
        except (TypeError, ValueError) as err:
            raise JaxprTypeError(f"{where()}: the primitive rejects its operands: {err}") from None
        for sub in sub_jaxprs(eqn.params):
            try:
                check_jaxpr(sub)
            except JaxprTypeError as err:
                raise JaxprTypeError(f"in a sub-jaxpr of {where()}: {err}") from None
        out = list(out) if eqn.primitive.multiple_results else [out]
        got = [v.aval for v in eqn.outvars]
        if len(out) != len(got) or any(
                (a.shape, a.dtype, a.weak_type) != (b.shape, b.dtype, b.weak_type)
                for a, b in zip(out, got)):
            raise JaxprTypeError(f"{where()}: the primitive produces {_avals_text(out)} but the "
                                 f"binders say {_avals_text(got)}")
        for v in eqn.outvars:
            bind(v, where)
    for v in jaxpr.outvars:
        use(v, "the outputs")
