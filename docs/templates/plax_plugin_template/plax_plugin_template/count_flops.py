"""``count_flops(f)(*args)``: the floating-point operations of ``f``, a toy transform.

It shows the parts of a transform plugin: a rule table of its own (``new_transform``), rules
registered per primitive (``register_rule``), and an entry function that traces the user's
function to a jaxpr and walks it, asking the table for each equation's rule (``get_rule``:
a primitive without one raises plax's standard ``NotImplementedError``, naming the primitive
and this transform).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

import plax
from plax.core import get_rule, new_transform, register_rule
from plax import lax
from plax.transforms.call import jit_p

TRANSFORM = "count_flops"
new_transform(TRANSFORM, hint="count_flops does not know its cost")


def _size(aval) -> int:
    return int(np.prod(aval.shape, dtype=np.int64))


def _elementwise(in_avals, out_avals, **params) -> int:
    return _size(out_avals[0])


for _prim in (lax.add_p, lax.sub_p, lax.mul_p, lax.div_p, lax.neg_p):
    register_rule(TRANSFORM, _prim)(_elementwise)


@register_rule(TRANSFORM, lax.dot_general_p)
def _dot_general(in_avals, out_avals, *, dimension_numbers, **params) -> int:
    (contract, _), _ = dimension_numbers
    k = int(np.prod([in_avals[0].shape[d] for d in contract], dtype=np.int64))
    return 2 * _size(out_avals[0]) * k


@register_rule(TRANSFORM, jit_p)
def _jit(in_avals, out_avals, *, jaxpr, **params) -> int:
    return jaxpr_flops(jaxpr.jaxpr)   # a nested jit: count its body


def jaxpr_flops(jaxpr) -> int:
    """The flops of the equations of ``jaxpr``, each counted by its primitive's rule.

    Raises:
      NotImplementedError: for a primitive without a ``count_flops`` rule.
    """
    total = 0
    for eqn in jaxpr.eqns:
        rule = get_rule(TRANSFORM, eqn.primitive)
        total += rule([v.aval for v in eqn.invars], [v.aval for v in eqn.outvars],
                      **eqn.params)
    return total


def count_flops(fun: Callable) -> Callable[..., int]:
    """A function that returns the flops of ``fun`` for given arguments, without running it.

    Example:
      >>> from plax.experimental import count_flops
      >>> count_flops(lambda a, b: a @ b + 1.0)(jnp.ones((2, 3)), jnp.ones((3, 4)))
      56
    """
    def counted(*args, **kwargs) -> int:
        return jaxpr_flops(plax.make_jaxpr(fun)(*args, **kwargs).jaxpr)
    return counted
