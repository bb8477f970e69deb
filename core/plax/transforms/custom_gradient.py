"""``jax.custom_gradient``: a function that returns its value and its own VJP rule.

``f(*args) -> (out, vjp_rule)``, ``vjp_rule(out_cotangent) -> tuple of argument
cotangents``. It is a ``custom_vjp`` whose forward pass runs ``f`` and keeps the rule; the
rule is closure-converted (``closure_convert``) at the cotangent's types, so the values it
closes over that transforms trace (the inputs, intermediates) travel as residuals, as JAX's
``Residuals`` carry its traced rule.
"""
from __future__ import annotations

from typing import Callable

from plax import tree_util


@tree_util.register_pytree_node_class
class _RuleResiduals:
    """The residuals of one forward pass: the values the rule closes over (leaves) and the
    converted rule with its argument count and output tree (static)."""

    __slots__ = ("hoisted", "rule", "out_tree")

    def __init__(self, hoisted, rule, out_tree):
        self.hoisted, self.rule, self.out_tree = list(hoisted), rule, out_tree

    def tree_flatten(self):
        return tuple(self.hoisted), (self.rule, self.out_tree)

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(children, *aux)


def custom_gradient(fun: Callable) -> Callable:
    """Defines ``fun``'s gradient by ``fun`` itself: ``fun(*args)`` returns ``(out,
    vjp_rule)``, where ``vjp_rule(g)`` returns the cotangents of ``args`` (a tuple, or the one
    cotangent of a single argument).

    Args:
      fun: the function returning its value and its VJP rule.

    Returns:
      A function returning ``fun``'s value, differentiated by the rule (a ``custom_vjp``).

    Example:
      >>> @jax.custom_gradient
      ... def f(x):
      ...     return x ** 2, lambda g: (g * x,)
      >>> print(f(3.0), jax.grad(f)(3.0))
      9.0 3.0
    """
    from plax.transforms.custom_derivatives import closure_convert, custom_vjp

    @custom_vjp
    def wrapped(*args):
        out, _ = fun(*args)
        return out

    def fwd(*args):
        out, rule = fun(*args)
        from plax import numpy as jnp
        # the rule traced at the output's types: its closed-over traced values are hoisted
        example = tree_util.tree_map(lambda o: jnp.zeros_like(o), out)
        converted, hoisted = closure_convert(rule, example)
        return out, _RuleResiduals(hoisted, converted, tree_util.tree_structure(out))

    def bwd(res: _RuleResiduals, cts):
        if tree_util.tree_structure(cts) != res.out_tree:
            raise TypeError(f"custom_gradient: the cotangent's structure "
                            f"{tree_util.tree_structure(cts)} differs from the output's "
                            f"{res.out_tree}.")
        in_cts = res.rule(cts, *res.hoisted)
        return in_cts if isinstance(in_cts, tuple) else (in_cts,)

    wrapped.defvjp(fwd, bwd)
    return wrapped
