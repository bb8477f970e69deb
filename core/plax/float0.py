"""float0 values carry no data, so they never reach a backend.

``float0`` is the tangent type of integer and boolean values. As in JAX, a float0 value is
a NumPy array (``np.zeros(shape, float0)``), on every platform: no backend is asked to
hold, move or compute one. This module keeps that true in the three places the core meets
them:

* eager operations (:func:`apply_eagerly`): a primitive whose results are float0 (the
  broadcasts and transposes ``vmap`` applies to zero tangents) returns NumPy zeros; one
  that turns float0 into data (``convert_element_type`` to an integer) runs on boolean
  zeros in its place, as XLA represents float0;
* compiled programs (:func:`strip_program`): before a backend sees a jaxpr, equations
  producing only float0 are dropped, float0 operands of the others become boolean zeros,
  and float0 outputs leave the program (the call fills them in with NumPy zeros,
  :func:`with_float0_outputs`); float0 inputs are passed through unread;
* buffers (:func:`is_float0_value`): a float0 argument or constant of a compiled program
  is handed over as the NumPy array it is, never ``put`` on a device.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plax.dtypes import float0

_BOOL = np.dtype(bool)


def is_float0_value(x: Any) -> bool:
    """Whether ``x`` is a float0 NumPy array (or Array-like with a float0 dtype)."""
    dt = getattr(x, "dtype", None)
    # (a key array's dtype is no NumPy dtype)
    return isinstance(dt, np.dtype) and dt.kind == "V" and dt == float0


def zeros(aval) -> np.ndarray:
    """The float0 value of type ``aval``: NumPy zeros of its shape."""
    return np.zeros(tuple(aval.shape), float0)


# ------------------------------------------------------------------ eager

def apply_eagerly(prim, args, params) -> Any:
    """``prim`` applied to ``args`` of which some are float0 (see the module docstring).

    Raises:
      TypeError: the primitive does not accept float0 operands (arithmetic), as in JAX.
    """
    from plax.core.trace import get_aval
    from plax.dispatch import apply_primitive
    avals = tuple(get_aval(a) for a in args)
    try:
        out = prim.abstract_eval_cached(avals, params)
    except TypeError as err:
        where = next(i for i, a in enumerate(avals) if a.dtype == float0)
        raise TypeError(f"Called {prim.name} with a float0 at position {where}. float0s do "
                        "not support any operations by design, because they are not "
                        "compatible with non-trivial vector spaces. No implicit dtype "
                        "conversion is done. You can use np.zeros_like(arr, dtype=np.float) "
                        f"to cast a float0 array to a regular zeros array. ({err})") from None
    outs = list(out) if prim.multiple_results else [out]
    if all(a.dtype == float0 for a in outs):
        results = [zeros(a) for a in outs]
    else:  # float0 turned into data: XLA's representation, boolean zeros, stands in
        stand_ins = [np.zeros(a.shape, _BOOL) if a.dtype == float0 else x
                     for x, a in zip(args, avals)]
        computed = apply_primitive(prim, stand_ins, params)
        computed = list(computed) if prim.multiple_results else [computed]
        results = [zeros(a) if a.dtype == float0 else c for c, a in zip(computed, outs)]
    return results if prim.multiple_results else results[0]


# ------------------------------------------------------------------ compiled programs

def program_has_float0(jaxpr) -> bool:
    """Whether any value of ``jaxpr`` (an input, an output or an equation's, in the bodies
    of its calls too) is float0."""
    from plax.core.passes import call_param
    if any(v.aval.dtype == float0 for v in jaxpr.invars):
        return True
    for e in jaxpr.eqns:
        if any(v.aval.dtype == float0 for v in e.outvars):
            return True
        param = call_param(e)
        if param:
            body = e.params[param]
            body_jaxpr = getattr(body, "jaxpr", body)
            if program_has_float0(body_jaxpr) or any(
                    is_float0_value(c) for c in getattr(body, "consts", ())):
                return True
    return False


def strip_program(jaxpr):
    """``(jaxpr', float0_outputs)``: ``jaxpr`` (constvar-free, as ``Backend.compile`` takes
    it) without float0 computation, and per output of ``jaxpr`` whether it was float0 (those
    are not outputs of ``jaxpr'``). Inputs are kept, float0 ones unread."""
    from plax import lax
    from plax.core.jaxpr import Jaxpr, JaxprEqn, Literal, Var
    from plax.core.shaped_array import ShapedArray
    jaxpr = _inline_calls_with_float0(jaxpr)
    eqns: list = []
    stand_in: dict = {}  # float0 value -> the boolean zeros replacing it as an operand

    def boolean_zeros(atom):
        if isinstance(atom, Var) and atom in stand_in:
            return stand_in[atom]
        shape = tuple(atom.aval.shape)
        out = Var(ShapedArray(shape, _BOOL))
        eqns.append(JaxprEqn(lax.broadcast_in_dim_p, [Literal(False, ShapedArray((), _BOOL))],
                             [out], {"shape": shape, "broadcast_dimensions": ()}))
        if isinstance(atom, Var):
            stand_in[atom] = out
        return out

    for e in jaxpr.eqns:
        if e.outvars and all(v.aval.dtype == float0 for v in e.outvars):
            continue  # zeros by definition: nothing to compute
        if any(a.aval.dtype == float0 for a in e.invars):
            e = JaxprEqn(e.primitive, [boolean_zeros(a) if a.aval.dtype == float0 else a
                                       for a in e.invars], e.outvars, e.params)
        eqns.append(e)
    mask = [v.aval.dtype == float0 for v in jaxpr.outvars]
    outvars = [v for v, f in zip(jaxpr.outvars, mask) if not f]
    return Jaxpr(jaxpr.constvars, jaxpr.invars, outvars, eqns), mask


def _inline_calls_with_float0(jaxpr):
    """``jaxpr`` with every call equation (``jit``, ``checkpoint``) whose body holds float0
    values replaced by the body's equations (recursively; its constants as literals, as the
    lowering driver splices calls), so that :func:`strip_program` sees all of them."""
    from plax.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var
    from plax.core.passes import call_param

    def has(body) -> bool:
        return program_has_float0(body.jaxpr) or any(is_float0_value(c) for c in body.consts)

    if not any(call_param(e) and has(e.params[call_param(e)]) for e in jaxpr.eqns):
        return jaxpr
    eqns: list = []
    rename: dict = {}

    def sub(env, v):
        return env.get(v, v) if isinstance(v, Var) else v

    for e in jaxpr.eqns:
        ins = [sub(rename, v) for v in e.invars]
        param = call_param(e)
        body = e.params[param] if param else None
        if body is None or not has(body):
            eqns.append(JaxprEqn(e.primitive, ins, e.outvars, e.params))
            continue
        if not isinstance(body, ClosedJaxpr):
            body = ClosedJaxpr(body, [])
        inner = _inline_calls_with_float0(body.jaxpr)
        local: dict = {v: Literal(c, v.aval) for v, c in zip(inner.constvars, body.consts)}
        local.update(zip(inner.invars, ins))
        for ie in inner.eqns:
            outs = [Var(v.aval) for v in ie.outvars]
            eqns.append(JaxprEqn(ie.primitive, [sub(local, v) for v in ie.invars], outs,
                                 ie.params))
            local.update(zip(ie.outvars, outs))
        rename.update((o, sub(local, v)) for o, v in zip(e.outvars, inner.outvars))
    return Jaxpr(jaxpr.constvars, jaxpr.invars, [sub(rename, v) for v in jaxpr.outvars], eqns)


def with_float0_outputs(executable: Callable, mask: list, out_avals: list) -> Callable:
    """``executable`` of a stripped program (:func:`strip_program`) returning the original
    program's outputs: NumPy zeros where ``mask`` marks a float0 output."""
    fill = [zeros(a) if f else None for f, a in zip(mask, out_avals)]

    def run(*buffers):
        it = iter(executable(*buffers))
        return [next(it) if f is None else f for f in fill]

    as_text = getattr(executable, "as_text", None)
    if as_text is not None:
        run.as_text = as_text
    source = getattr(executable, "__plax_source__", None)
    if source is not None:
        run.__plax_source__ = source
    return run
