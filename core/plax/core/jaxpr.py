"""Jaxpr: the typed SSA IR that make_jaxpr prints and jit hands to a backend.

A Jaxpr is a list of equations ``outvars = primitive[params] invars`` over
typed variables, with input variables, constant variables (values captured
from outside, supplied by a ClosedJaxpr) and output atoms. An atom is a
:class:`Var` or a :class:`Literal` (a scalar written inline).

This module holds the IR only: printing is :mod:`plax.core.pretty_print`, evaluation
:mod:`plax.core.interpret` and type checking :mod:`plax.core.typecheck`.
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

from plax.core.shaped_array import ShapedArray

_var_ids = itertools.count()


class Var:
    """A variable of a jaxpr. Identity is the object; the printed name is assigned when printing."""

    __slots__ = ("aval", "count")

    def __init__(self, aval: ShapedArray):
        self.aval = aval
        self.count = next(_var_ids)

    def __repr__(self) -> str:
        return f"Var({self.count}:{self.aval.str_short()})"


class Literal:
    """A scalar constant written inline in a jaxpr (``2.0:f32[]``)."""

    __slots__ = ("val", "aval")

    def __init__(self, val: Any, aval: ShapedArray):
        self.val = val
        self.aval = aval

    def __repr__(self) -> str:
        return f"Literal({self.val!r})"


class DropVar(Var):
    """An output nobody reads (printed ``_``)."""

    __slots__ = ()


class JaxprEqn:
    """One equation: ``outvars = primitive[params] invars``."""

    __slots__ = ("primitive", "invars", "outvars", "params")

    def __init__(self, primitive, invars: list, outvars: list, params: dict):
        self.primitive = primitive
        self.invars = invars
        self.outvars = outvars
        self.params = params

    def __repr__(self) -> str:
        from plax.core.pretty_print import pp_eqn
        return pp_eqn(self)


class Jaxpr:
    """A typed SSA function: ``{ lambda constvars ; invars . let eqns in outvars }``."""

    __slots__ = ("constvars", "invars", "outvars", "eqns", "__weakref__")

    def __init__(self, constvars: list, invars: list, outvars: list, eqns: list):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)

    in_avals = property(lambda self: [v.aval for v in self.invars])
    out_avals = property(lambda self: [v.aval for v in self.outvars])

    def __str__(self) -> str:
        from plax.core.pretty_print import pp_jaxpr
        return pp_jaxpr(self)

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


class ClosedJaxpr:
    """A Jaxpr together with the values of its constvars. ``make_jaxpr`` returns one.

    Transforms cache what they derive from a ClosedJaxpr (the JVP of a ``jit`` body, its
    compiled executable) weakly, keyed by the object itself."""

    __slots__ = ("jaxpr", "consts", "__weakref__")

    def __init__(self, jaxpr: Jaxpr, consts: Sequence[Any]):
        assert len(jaxpr.constvars) == len(consts)
        self.jaxpr = jaxpr
        self.consts = list(consts)

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)

    def __str__(self) -> str:
        from plax.core.pretty_print import pp_jaxpr
        return pp_jaxpr(self.jaxpr)

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


def sub_jaxprs(params: dict) -> list[Jaxpr]:
    """The jaxprs among an equation's parameters (a ``jit``'s body, a ``cond``'s branches,
    ...), ClosedJaxprs unwrapped, in parameter order.

    Example:
      >>> eqn = plax.make_jaxpr(lambda x: plax.jit(jnp.sin)(x))(1.0).jaxpr.eqns[0]
      >>> [str(j) for j in sub_jaxprs(eqn.params)]
      ['{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }']
    """
    subs = []
    for v in params.values():
        for x in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(x, ClosedJaxpr):
                subs.append(x.jaxpr)
            elif isinstance(x, Jaxpr):
                subs.append(x)
    return subs
