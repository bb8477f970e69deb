"""Jaxpr: the typed SSA IR that make_jaxpr prints and jit hands to a backend.

A Jaxpr is a list of equations ``outvars = primitive[params] invars`` over
typed variables, with input variables, constant variables (values captured
from outside, supplied by a ClosedJaxpr) and output atoms. An atom is a
:class:`Var` or a :class:`Literal` (a scalar written inline).
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

import numpy as np

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

    def as_array(self):
        """The literal as a rank-0 plax Array with the literal's (weak) type."""
        from plax.array import Array
        from plax.devices import default_device
        device = default_device()
        return Array._new(device.backend.put(np.asarray(self.val, self.aval.dtype), device),
                          self.aval, device)


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
        return pp_eqn(self, _Namer())


class Jaxpr:
    """A typed SSA function: ``{ lambda constvars ; invars . let eqns in outvars }``."""

    __slots__ = ("constvars", "invars", "outvars", "eqns")

    def __init__(self, constvars: list, invars: list, outvars: list, eqns: list):
        self.constvars = list(constvars)
        self.invars = list(invars)
        self.outvars = list(outvars)
        self.eqns = list(eqns)

    in_avals = property(lambda self: [v.aval for v in self.invars])
    out_avals = property(lambda self: [v.aval for v in self.outvars])

    def __str__(self) -> str:
        return pp_jaxpr(self)

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


class ClosedJaxpr:
    """A Jaxpr together with the values of its constvars. ``make_jaxpr`` returns one."""

    __slots__ = ("jaxpr", "consts")

    def __init__(self, jaxpr: Jaxpr, consts: Sequence[Any]):
        assert len(jaxpr.constvars) == len(consts)
        self.jaxpr = jaxpr
        self.consts = list(consts)

    in_avals = property(lambda self: self.jaxpr.in_avals)
    out_avals = property(lambda self: self.jaxpr.out_avals)
    eqns = property(lambda self: self.jaxpr.eqns)

    def __str__(self) -> str:
        return pp_jaxpr(self.jaxpr)

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle):
        p.text(str(self))


# ------------------------------------------------------------------ printing

class _Namer:
    """Names variables a, b, ..., z, ba, bb, ... in order of first appearance, as JAX prints them."""

    def __init__(self):
        self.names: dict[Var, str] = {}

    def __call__(self, v) -> str:
        if isinstance(v, Literal):
            return _pp_literal(v)
        if isinstance(v, DropVar):
            return "_"
        name = self.names.get(v)
        if name is None:
            name = self.names[v] = _letters(len(self.names))
        return name


def _letters(n: int) -> str:
    s = ""
    while True:
        s = chr(ord("a") + n % 26) + s
        n //= 26
        if n == 0:
            return s


def _pp_literal(lit: Literal) -> str:
    val = np.asarray(lit.val)
    if val.dtype.kind == "b":
        text = str(bool(val))
    elif val.dtype.kind == "f" or val.dtype.name == "bfloat16":
        text = repr(float(val))
    elif val.dtype.kind == "c":
        text = repr(complex(val))
    else:
        text = str(int(val))
    return f"{text}:{lit.aval.str_short()}"


def _pp_param(value: Any, indent: int) -> str:
    if isinstance(value, ClosedJaxpr):
        value = value.jaxpr
    if isinstance(value, Jaxpr):
        inner = pp_jaxpr(value, indent + 4)
        return inner.lstrip()
    if isinstance(value, np.dtype):
        return value.name
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, (Jaxpr, ClosedJaxpr)) for v in value):
        return "(\n" + ",\n".join(" " * (indent + 4) + _pp_param(v, indent + 4) for v in value) + "\n" + " " * indent + ")"
    if callable(value) and not isinstance(value, type):
        return getattr(value, "__name__", repr(value))
    return repr(value) if isinstance(value, str) else str(value)


def _pp_binder(v, namer) -> str:
    return f"{namer(v)}:{v.aval.str_short()}"


def pp_eqn(eqn: JaxprEqn, namer: _Namer, indent: int = 0) -> str:
    lhs = " ".join(_pp_binder(v, namer) for v in eqn.outvars)
    params = ""
    if eqn.params:
        items = " ".join(f"{k}={_pp_param(v, indent)}" for k, v in eqn.params.items())
        params = f"[{items}]"
    rhs = " ".join(namer(v) for v in eqn.invars)
    return f"{lhs} = {eqn.primitive.name}{params} {rhs}".rstrip()


def pp_jaxpr(jaxpr: Jaxpr, indent: int = 0) -> str:
    """Formats a jaxpr the way JAX prints one."""
    namer = _Namer()
    consts = " ".join(_pp_binder(v, namer) for v in jaxpr.constvars)
    ins = " ".join(_pp_binder(v, namer) for v in jaxpr.invars)
    eqns = [pp_eqn(e, namer, indent + 4) for e in jaxpr.eqns]
    outs = ", ".join(namer(v) for v in jaxpr.outvars)
    outs = f"({outs},)" if len(jaxpr.outvars) == 1 else f"({outs})"
    head = f"{{ lambda {consts}; {ins}. let"
    pad = " " * indent
    if len(eqns) <= 1 and len(head) + sum(map(len, eqns)) < 70:
        body = (" " + eqns[0]) if eqns else ""
        return f"{pad}{head}{body} in {outs} }}"
    lines = [pad + head] + [pad + "    " + e for e in eqns] + [f"{pad}  in {outs} }}"]
    return "\n".join(lines)


# ------------------------------------------------------------------ evaluation

def eval_jaxpr(jaxpr: Jaxpr, consts: Sequence[Any], *args: Any) -> list:
    """Evaluates ``jaxpr`` by binding each equation's primitive, so it runs under whatever
    transforms are active (this is how a cached jit jaxpr is inlined into an outer trace).

    Args:
      jaxpr: the Jaxpr.
      consts: values of its constvars.
      *args: values of its invars.

    Returns:
      The list of output values.
    """
    env: dict[Var, Any] = {}

    def read(v):
        return v.as_array() if isinstance(v, Literal) else env[v]

    if len(args) != len(jaxpr.invars):
        raise TypeError(f"jaxpr takes {len(jaxpr.invars)} arguments, got {len(args)}")
    env.update(zip(jaxpr.constvars, consts))
    env.update(zip(jaxpr.invars, args))
    for eqn in jaxpr.eqns:
        outs = eqn.primitive.bind(*map(read, eqn.invars), **eqn.params)
        if not eqn.primitive.multiple_results:
            outs = (outs,)
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def jaxpr_as_fun(closed: ClosedJaxpr):
    """A Python function that evaluates ``closed`` on its arguments (returns a list)."""
    return lambda *args: eval_jaxpr(closed.jaxpr, closed.consts, *args)


class JaxprTypeError(TypeError):
    """A jaxpr is not well typed."""


def check_jaxpr(jaxpr: Jaxpr) -> None:
    """Type-checks ``jaxpr``: every variable defined once before use, every equation's output
    types equal to its primitive's abstract evaluation.

    Raises:
      JaxprTypeError: naming the offending equation.
    """
    defined: set = set()

    def use(v, where):
        if isinstance(v, Literal):
            return
        if v not in defined:
            raise JaxprTypeError(f"Variable {v} used before definition in {where}")

    def bind(v, where):
        if isinstance(v, DropVar):
            return
        if v in defined:
            raise JaxprTypeError(f"Variable {v} defined twice (at {where})")
        defined.add(v)

    for v in itertools.chain(jaxpr.constvars, jaxpr.invars):
        bind(v, "the binders")
    for eqn in jaxpr.eqns:
        where = f"equation `{eqn}`"
        for v in eqn.invars:
            use(v, where)
        out = eqn.primitive.abstract_eval(*[v.aval for v in eqn.invars], **eqn.params)
        out = list(out) if eqn.primitive.multiple_results else [out]
        got = [v.aval for v in eqn.outvars]
        if [(a.shape, a.dtype) for a in out] != [(a.shape, a.dtype) for a in got]:
            raise JaxprTypeError(f"{where}: the primitive produces "
                                 f"{[a.str_short() for a in out]} but the binders say "
                                 f"{[a.str_short() for a in got]}")
        for v in eqn.outvars:
            bind(v, where)
    for v in jaxpr.outvars:
        use(v, "the outputs")
