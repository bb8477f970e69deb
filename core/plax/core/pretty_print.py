"""Printing jaxprs as JAX 0.10 does (``make_jaxpr`` output, ``jit[name=f jaxpr={ ... }]``)."""
from __future__ import annotations

from typing import Any

import numpy as np

from plax.core.jaxpr import (ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, Var,
                             sub_jaxprs)

#
# A small layout engine in the style of Wadler's "prettier printer": a document is
# text, breaks, nesting and groups; a group is laid out on one line when it fits in
# what is left of the line, otherwise each of its own breaks becomes a newline. Jaxprs are built
# from documents the way JAX lays them out, so short jaxprs print on one line and
# long equations put one parameter per line.

WIDTH = 80


class _Text:
    __slots__ = ("text", "width")

    def __init__(self, text: str, width: int | None = None):
        self.text = text
        self.width = len(text) if width is None else width  # the columns it counts for


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


def _fits(width: int, doc) -> bool:
    """Whether ``doc`` laid out flat (every break as its text) takes at most ``width``
    columns."""
    stack = [doc]
    while stack:
        if width < 0:
            return False
        d = stack.pop()
        if isinstance(d, _Text):
            width -= d.width
        elif isinstance(d, _Break):
            width -= len(d.text)
        elif isinstance(d, list):
            stack.extend(reversed(d))
        else:  # _Nest, _Group
            stack.append(d.doc)
    return width >= 0


def _layout(doc, width: int = WIDTH) -> str:
    out: list[str] = []
    col = 0
    stack = [(0, False, doc)]
    while stack:
        indent, flat, d = stack.pop()
        if isinstance(d, _Text):
            out.append(d.text)
            col += d.width
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
        else:  # _Group: flat if it fits on what is left of the line
            # JAX 0.10's rule (jaxlib's pretty printer): only the group itself is measured,
            # not the text that follows it up to the next break (Lindig's rule). So a run of
            # binders, each break its own group, wraps only once the column passes the width.
            fits = flat or _fits(width - col, d.doc)
            stack.append((indent, fits, d.doc))
    return "".join(out)


class _Namer:
    """Names variables a, b, ..., z, ba, bb, ... in order of first appearance, as JAX does,
    across a jaxpr and its sub-jaxprs; variables nobody reads print as ``_``.

    ``shared`` maps call bodies printed once at the top (``let f = { ... } in``) to their
    names, which variable names skip.
    """

    def __init__(self, unused: set | None = None, shared: dict | None = None):
        self.names: dict[Var, str] = {}
        self.unused = unused or set()
        self.shared = shared or {}
        self._taken = set(self.shared.values())
        self._next = 0
        self.top_unused: set = set()

    def __call__(self, v) -> str:
        if isinstance(v, Literal):
            return _pp_literal(v)
        if isinstance(v, DropVar) or v in self.unused:
            return "_"
        name = self.names.get(v)
        if name is None:
            name = _letters(self._next)
            self._next += 1
            while name in self._taken:
                name = _letters(self._next)
                self._next += 1
            self.names[v] = name
        return name

    def suggest(self, for_vars, like_vars) -> None:
        """Names the binders of a call's body after the call's operands and results (each
        operand lends its name once; binders already named keep theirs)."""
        if len(for_vars) != len(like_vars):
            return
        lent: set = set()
        for f, like in zip(for_vars, like_vars):
            if (isinstance(like, Var) and like not in lent and isinstance(f, Var)
                    and f not in self.names):
                lent.add(like)
                self.names[f] = self(like)


def _letters(n: int) -> str:
    s = ""
    while True:
        s = chr(ord("a") + n % 26) + s
        n //= 26
        if n == 0:
            return s


def _unused_outvars(jaxpr: "Jaxpr", acc: set) -> set:
    """Equation outputs that no equation or output of their jaxpr reads (recursively, except
    into the bodies of calls, whose binders take the names of the call's operands and
    results instead, as JAX prints them)."""
    used = {v for e in jaxpr.eqns for v in e.invars if isinstance(v, Var)}
    used.update(v for v in jaxpr.outvars if isinstance(v, Var))
    for e in jaxpr.eqns:
        acc.update(v for v in e.outvars if v not in used)
        if _call_body(e) is None:
            for sub in sub_jaxprs(e.params):
                _unused_outvars(sub, acc)
    return acc


def _call_body(eqn: "JaxprEqn") -> "Jaxpr | None":
    """The body of a call equation (a primitive with a ``call_param``, e.g. ``jit``)."""
    param = getattr(eqn.primitive, "call_param", None)
    if param is None:
        return None
    body = eqn.params[param]
    return body.jaxpr if isinstance(body, ClosedJaxpr) else body


def _shared_bodies(top: "Jaxpr") -> dict:
    """Call bodies to print once, before the jaxpr, as ``let name = { ... } in``: those that
    occur more than once, and those of more than ten equations (as JAX prints them). Each
    gets the call's name (``<lambda>`` as ``lambda``), numbered when names repeat."""
    counts: dict = {}
    names: dict = {}
    todo = [top]
    while todo:
        level, todo = todo, []
        for jaxpr in level:
            for e in jaxpr.eqns:
                body = _call_body(e)
                if body is None:
                    todo.extend(sub_jaxprs(e.params))
                    continue
                counts[body] = counts.get(body, 0) + (2 if len(body.eqns) > 10 else 1)
                names.setdefault(body, str(e.params.get("name", "jaxpr")).strip("<>"))
                todo.append(body)
    shared: dict = {}
    used: dict = {}
    for body, n in counts.items():
        if n < 2:
            continue
        name = names[body]
        k = used.get(name, 0)
        used[name] = k + 1
        if k:
            name += str(k)
            used[name] = used.get(name, 0) + 1
        shared[body] = name
    return shared


def _pp_literal(lit: Literal) -> str:
    val = np.asarray(lit.val)
    if val.dtype.kind == "b":
        text = str(bool(val))
    elif lit.aval.weak_type and val.dtype.kind == "f":
        # a Python float, which JAX keeps and prints as written (``0.1``, not the float32
        # value's 17 digits): its shortest form at the literal's precision
        text = repr(float(str(val)))
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
        shared = namer.shared.get(value)
        return _Text(shared) if shared is not None else _jaxpr_doc(value, namer)
    if isinstance(value, (tuple, list)) and value and all(
            isinstance(v, (Jaxpr, ClosedJaxpr)) for v in value):
        inner = _join(_Break(), [_param_doc(v, namer) for v in value])
        return _Group([_Nest(2, [_Text("("), _Break(""), inner]), _Break(""), _Text(")")])
    if isinstance(value, np.dtype):
        return _Text(value.name)
    if callable(value) and not isinstance(value, type):
        return _Text(getattr(value, "__name__", repr(value)))
    return _Text(str(value))


def _binder(v, namer: _Namer) -> _Text:
    # a sharded type counts with its @axes (``f32[8@X,4]``), as JAX lays it out
    return _Text(f"{namer(v)}:{v.aval.str_short()}")


def _vars_doc(vs, namer: _Namer, binders: bool, sep: str = ""):
    items = [_binder(v, namer) if binders else _Text(namer(v)) for v in vs]
    return _Nest(2, _Group(_join([_Text(sep), _Group(_Break())], items)))


#: Equations JAX prints in a form of their own (a ref's ``y <- x[i]``): primitive ->
#: ``rule(eqn, namer) -> str``; registered beside the primitive (see plax.state).
pp_rules: dict = {}

#: Parameters as JAX 0.10 prints them where that differs from what plax records:
#: primitive -> ``rule(params) -> dict``, registered beside the primitive (reduce_sum's
#: ``out_sharding=None``, which plax has no use for; broadcast_in_dim's ``shape``, which JAX
#: leaves out because the binder's type implies it). A value that is a ``str`` prints as is.
pp_param_rules: dict = {}

#: Names JAX 0.10 prints for an equation where they depend on its parameters: primitive ->
#: ``rule(params) -> str | None`` (None: the primitive's own name). plax stages
#: ``debug.print`` as a ``debug_callback`` whose callback says it is a print; JAX prints it as
#: its own ``debug_print`` equation.
pp_name_rules: dict = {}


def _eqn_doc(eqn: JaxprEqn, namer: _Namer):
    rule = pp_rules.get(eqn.primitive)
    if rule is not None:
        return _Text(rule(eqn, namer))
    shown = pp_param_rules.get(eqn.primitive)
    params = eqn.params if shown is None else shown(eqn.params)
    keys = sorted(params)
    body = _call_body(eqn)
    if body is not None:
        # A call reads as JAX prints jit: the body's binders named after the operands and
        # results they stand for (unless the body is printed at the top).
        if body not in namer.shared and getattr(eqn.primitive, "pp_body_named_after_operands",
                                                True):
            namer.suggest(body.invars, eqn.invars)
            namer.suggest(body.outvars, eqn.outvars)
    if "name" in params and len(params) > 1:
        # JAX prints a function's name first (jit, custom_jvp_call, custom_vjp_call)
        keys = ["name"] + [k for k in keys if k != "name"]
    lhs = _vars_doc(eqn.outvars, namer, binders=True)
    params_doc = None
    if params:
        # a primitive may print some parameters its own way (checkpoint's policy)
        printers = getattr(eqn.primitive, "pp_params", None) or {}
        pairs = [[_Text(f"{k}="), _Text(printers[k](params[k])) if k in printers
                  else _param_doc(params[k], namer)] for k in keys]
        params_doc = _Group([_Nest(2, [_Text("["), _Break(""), _join(_Break(), pairs)]),
                             _Break(""), _Text("]")])
    name_rule = pp_name_rules.get(eqn.primitive)
    name = name_rule(eqn.params) if name_rule is not None else None
    if name is None:
        name = getattr(eqn.primitive, "pp_name", eqn.primitive.name)
    rhs = _cat(_Text(name), params_doc)
    # JAX writes the space before the operands even when there are none (``iota[...] ``)
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
      >>> print(pp_jaxpr(plax.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(1.0).jaxpr))
      { lambda ; a:f32[]. let b:f32[] = sin a; c:f32[] = mul b 2.0:f32[] in (c,) }
    """
    shared = _shared_bodies(jaxpr)
    namer = _Namer(_unused_outvars(jaxpr, set()), shared)
    # results unused in the top jaxpr itself (a write whose old value nobody reads prints
    # as ``x[i] <- v`` there, and in full inside bodies, as JAX prints it)
    read = {v for e in jaxpr.eqns for v in e.invars} | set(jaxpr.outvars)
    namer.top_unused = {v for e in jaxpr.eqns for v in e.outvars if v not in read}
    docs = []
    for body, name in shared.items():
        # printed with the same namer, so the names run on into the jaxpr that follows
        docs += [_Text(f"let {name} = "), _jaxpr_doc(body, namer), _Text(" in"), _Break()]
    text = _layout(docs + [_jaxpr_doc(jaxpr, namer)], width - indent)
    pad = " " * indent
    return "\n".join(pad + line for line in text.split("\n")) if indent else text
