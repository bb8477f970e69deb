"""Transposition: run a linear jaxpr backwards, turning output cotangents into input cotangents.

Reverse mode is linearize + transpose. Linearize (see :mod:`plax.transforms.autodiff`)
produces a jaxpr whose every equation is linear in at least one operand that
depends on the inputs; the other operands are constants. Walking it backwards,
each equation's transpose rule maps its output cotangent to cotangents of its
linear operands, which are marked with :class:`UndefinedPrimal`.

A transpose rule has the signature ``rule(ct, *operands, **params) ->
[ct_operand, ...]`` (``ct`` is a list for multi-output primitives); entries for
non-linear operands are None. A cotangent may be a symbolic ``Zero``.
"""
from __future__ import annotations

from typing import Any, Sequence

from plax.core import registry, varying as _varying
from plax.core.interpret import literal_array
from plax.core.jaxpr import Jaxpr, Literal
from plax.core.shaped_array import ShapedArray
from plax.transforms.jvp import Zero, add_tangents

_transpose_rules = registry.rule_table("transpose")


class UndefinedPrimal:
    """Marks an operand that a linear function is linear in (its value is not known)."""

    __slots__ = ("aval",)

    def __init__(self, aval: ShapedArray):
        self.aval = aval

    def __repr__(self) -> str:
        return f"UndefinedPrimal({self.aval.str_short()})"


def is_undefined_primal(x: Any) -> bool:
    return type(x) is UndefinedPrimal


def backward_pass(jaxpr: Jaxpr, consts: Sequence[Any], cts_out: Sequence[Any]) -> list:
    """Cotangents of all of ``jaxpr``'s inputs, given cotangents of its outputs.

    Args:
      jaxpr: a jaxpr linear in its invars (its constvars hold the non-linear values).
      consts: the values of its constvars.
      cts_out: one cotangent (or ``Zero``) per output.

    Returns:
      One cotangent (or ``Zero``) per invar.
    """
    primal_env: dict = dict(zip(jaxpr.constvars, consts))
    ct_env: dict = {}

    def read_primal(v):
        if isinstance(v, Literal):
            return literal_array(v)
        val = primal_env.get(v, _missing)
        return UndefinedPrimal(v.aval) if val is _missing else val

    typed = _varying.active()

    def write_ct(v, ct):
        if isinstance(v, Literal) or v in primal_env or type(ct) is Zero or ct is None:
            return
        if typed:  # the transpose of an implicit broadcast of an invariant value: a sum
            ct = _varying.reduce_cotangent(ct, v.aval)
        if getattr(v.aval, "sharding", None) is not None:  # explicit sharding: typed as primal
            from plax.sharding_types import typed_like
            ct = typed_like(ct, v.aval)
        ct_env[v] = add_tangents(ct_env[v], ct) if v in ct_env else ct

    for v, ct in zip(jaxpr.outvars, cts_out):
        write_ct(v, ct)

    for eqn in reversed(jaxpr.eqns):
        cts = [ct_env.pop(v, None) for v in eqn.outvars]
        if all(ct is None for ct in cts):
            continue
        prim = eqn.primitive
        if prim.multiple_results:
            ct_arg = [Zero(v.aval) if ct is None else ct for v, ct in zip(eqn.outvars, cts)]
        else:
            ct_arg = cts[0]
        invals = [read_primal(v) for v in eqn.invars]
        rule = _transpose_rules.get(prim) or registry.get_rule("transpose", prim)
        cts_in = rule(ct_arg, *invals, **eqn.params)
        for v, x, ct in zip(eqn.invars, invals, cts_in):
            if type(x) is UndefinedPrimal:
                write_ct(v, ct)
    return [ct_env.get(v, Zero(v.aval)) for v in jaxpr.invars]


_missing = object()
