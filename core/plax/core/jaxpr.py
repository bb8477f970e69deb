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
#
# A small layout engine in the style of Wadler's "prettier printer": a document is
# text, breaks, nesting and groups; a group is laid out on one line when it fits in
# the width, otherwise each of its own breaks becomes a newline. Jaxprs are built
# from documents the way JAX lays them out, so short jaxprs print on one line and
# long equations put one parameter per line.

WIDTH = 80


class _Text:
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


class _Break:
    __slots__ = ("text",)

    def __init__(self, text: str = " "):
        self.text = text  # printed when the enclosing group is flat


class _Nest:
    __slots__ = ("indent", "doc")

    def __init__(self, indent: int, doc):
        self.indent = indent
        self.doc = doc


class _Group:
    __slots__ = ("doc",)

    def __init__(self, doc):
        self.doc = doc


def _cat(*docs) -> list:
    return [d for d in docs if d is not None]


def _join(sep, docs) -> list:
    out: list = []
    for i, d in enumerate(docs):
        if i:
            out.append(sep)
        out.append(d)
    return out


def _fits(width: int, items: list) -> bool:
    """Whether the items, in their modes, reach a newline (or the end) within ``width``."""
    stack = list(items)
    while stack:
        if width < 0:
            return False
        indent, flat, doc = stack.pop()
        if isinstance(doc, _Text):
            width -= len(doc.text)
        elif isinstance(doc, _Break):
            if not flat:
                return True
            width -= len(doc.text)
        elif isinstance(doc, list):
            stack.extend((indent, flat, d) for d in reversed(doc))
        elif isinstance(doc, _Nest):
            stack.append((indent + doc.indent, flat, doc.doc))
        else:  # _Group
            stack.append((indent, flat, doc.doc))
    return width >= 0


def _layout(doc, width: int = WIDTH) -> str:
    out: list[str] = []
    col = 0
    stack = [(0, False, doc)]
    while stack:
        indent, flat, d = stack.pop()
        if isinstance(d, _Text):
            out.append(d.text)
            col += len(d.text)
        elif isinstance(d, _Break):
            if flat:
                out.append(d.text)
                col += len(d.text)
            else:
                out.append("\n" + " " * indent)
                col = indent
        elif isinstance(d, list):
            stack.extend((indent, flat, x) for x in reversed(d))
        elif isinstance(d, _Nest):
            stack.append((indent + d.indent, flat, d.doc))
        else:  # _Group: flat if it (and what follows up to the next break) fits
            fits = flat or _fits(width - col, stack + [(indent, True, d.doc)])
            stack.append((indent, fits, d.doc))
    return "".join(out)


class _Namer:
    """Names variables a, b, ..., z, ba, bb, ... in order of first appearance, as JAX does,
    across a jaxpr and its sub-jaxprs; variables nobody reads print as ``_``."""

    def __init__(self, unused: set | None = None):
        self.names: dict[Var, str] = {}
        self.unused = unused or set()

    def __call__(self, v) -> str:
        if isinstance(v, Literal):
            return _pp_literal(v)
        if isinstance(v, DropVar) or v in self.unused:
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


def _unused_outvars(jaxpr: "Jaxpr", acc: set) -> set:
    """Equation outputs that no equation or output of their jaxpr reads (recursively)."""
    used = {v for e in jaxpr.eqns for v in e.invars if isinstance(v, Var)}
    used.update(v for v in jaxpr.outvars if isinstance(v, Var))
    for e in jaxpr.eqns:
        acc.update(v for v in e.outvars if v not in used)
        for sub in _sub_jaxprs(e.params):
            _unused_outvars(sub, acc)
    return acc


def _sub_jaxprs(params: dict) -> list:
    subs = []
    for v in params.values():
        for x in (v if isinstance(v, (tuple, list)) else (v,)):
            if isinstance(x, ClosedJaxpr):
                subs.append(x.jaxpr)
            elif isinstance(x, Jaxpr):
                subs.append(x)
    return subs


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


def _param_doc(value: Any, namer: _Namer):
    if isinstance(value, ClosedJaxpr):
        value = value.jaxpr
    if isinstance(value, Jaxpr):
        return _jaxpr_doc(value, namer)
    if isinstance(value, (tuple, list)) and value and all(
            isinstance(v, (Jaxpr, ClosedJaxpr)) for v in value):
        inner = _join(_Break(), [_param_doc(v, namer) for v in value])
        return _Group([_Nest(2, [_Text("("), _Break(""), inner]), _Break(""), _Text(")")])
    if isinstance(value, np.dtype):
        return _Text(value.name)
    if callable(value) and not isinstance(value, type):
        return _Text(getattr(value, "__name__", repr(value)))
    return _Text(str(value))


def _vars_doc(vs, namer: _Namer, binders: bool, sep: str = ""):
    items = [_Text(f"{namer(v)}:{v.aval.str_short()}" if binders else namer(v)) for v in vs]
    return _Nest(2, _Group(_join([_Text(sep), _Group(_Break())], items)))


def _eqn_doc(eqn: JaxprEqn, namer: _Namer):
    lhs = _vars_doc(eqn.outvars, namer, binders=True)
    params = None
    if eqn.params:
        pairs = [[_Text(f"{k}="), _param_doc(eqn.params[k], namer)] for k in sorted(eqn.params)]
        params = _Group([_Nest(2, [_Text("["), _Break(""), _join(_Break(), pairs)]),
                         _Break(""), _Text("]")])
    rhs = _cat(_Text(eqn.primitive.name), params)
    if eqn.invars:
        rhs += [_Text(" "), _vars_doc(eqn.invars, namer, binders=False)]
    if not eqn.outvars:
        return rhs
    return [lhs, _Text(" = ")] + rhs


def _jaxpr_doc(jaxpr: "Jaxpr", namer: _Namer):
    consts = _vars_doc(jaxpr.constvars, namer, binders=True)
    ins = _vars_doc(jaxpr.invars, namer, binders=True)
    eqns = _join(_Break("; "), [_eqn_doc(e, namer) for e in jaxpr.eqns])
    outs = [_Text("("), _vars_doc(jaxpr.outvars, namer, binders=False, sep=","),
            _Text(",)" if len(jaxpr.outvars) == 1 else ")")]
    body = [_Text("{ lambda "), consts, _Text("; "), ins, _Text(". let"),
            _Nest(2, [_Break(), eqns]), _Break(), _Text("in "), outs]
    return _Group([_Nest(2, body), _Text(" }")])


def pp_eqn(eqn: JaxprEqn, namer: _Namer | None = None, indent: int = 0) -> str:
    """Formats one equation as JAX prints it."""
    return _layout(_eqn_doc(eqn, namer or _Namer()), WIDTH - indent)


def pp_jaxpr(jaxpr: Jaxpr, indent: int = 0, width: int = WIDTH) -> str:
    """Formats a jaxpr the way JAX prints one (80 columns; ``_`` for unused results).

    Example:
      >>> print(pp_jaxpr(make_jaxpr(lambda x: jnp.sin(x) * 2.0)(1.0).jaxpr))
      { lambda ; a:f32[]. let b:f32[] = sin a; c:f32[] = mul b 2.0:f32[] in (c,) }
    """
    namer = _Namer(_unused_outvars(jaxpr, set()))
    text = _layout(_jaxpr_doc(jaxpr, namer), width - indent)
    pad = " " * indent
    return "\n".join(pad + line for line in text.split("\n")) if indent else text


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


def _avals_text(avals) -> str:
    return ", ".join(a.str_short() + (" (weak)" if a.weak_type else "") for a in avals)


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

    def use(v, where):
        if isinstance(v, Literal):
            if np.shape(v.val) != v.aval.shape or np.asarray(v.val).dtype != v.aval.dtype:
                raise JaxprTypeError(f"Literal {_pp_literal(v)} in {where} holds a value of "
                                     f"type {np.asarray(v.val).dtype}{list(np.shape(v.val))}")
            return
        if v not in defined:
            raise JaxprTypeError(f"Variable {namer(v)}:{v.aval.str_short()} is used before it "
                                 f"is defined, in {where}")

    def bind(v, where):
        if isinstance(v, DropVar):
            return
        if v in defined:
            raise JaxprTypeError(f"Variable {namer(v)} is defined twice (at {where})")
        defined.add(v)

    for v in itertools.chain(jaxpr.constvars, jaxpr.invars):
        bind(v, "the binders")
    for eqn in jaxpr.eqns:
        where = f"equation `{pp_eqn(eqn, namer)}`"
        for v in eqn.invars:
            use(v, where)
        try:
            out = eqn.primitive.abstract_eval(*[v.aval for v in eqn.invars], **eqn.params)
        except (TypeError, ValueError) as err:
            raise JaxprTypeError(f"{where}: the primitive rejects its operands: {err}") from None
        for sub in _sub_jaxprs(eqn.params):
            try:
                check_jaxpr(sub)
            except JaxprTypeError as err:
                raise JaxprTypeError(f"in a sub-jaxpr of {where}: {err}") from None
        out = list(out) if eqn.primitive.multiple_results else [out]
        got = [v.aval for v in eqn.outvars]
        if len(out) != len(got) or any(
                (a.shape, a.dtype, a.weak_type) != (b.shape, b.dtype, b.weak_type)
                for a, b in zip(out, got)):
            raise JaxprTypeError(f"{where}: the primitive produces {_avals_text(out)} but the "
                                 f"binders say {_avals_text(got)}")
        for v in eqn.outvars:
            bind(v, where)
    for v in jaxpr.outvars:
        use(v, "the outputs")
