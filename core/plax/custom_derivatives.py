"""Custom derivative rules as a module (``jax.custom_derivatives``): ``custom_jvp``,
``custom_vjp``, ``custom_gradient``, ``closure_convert`` and their primitives (the same
objects as ``plax.custom_jvp`` and the others), ``linear_call`` (a linear function with a
custom transpose), with the symbolic-zero helpers
(:class:`SymbolicZero`, :func:`zero_from_primal`, :class:`CustomVJPPrimal`,
:func:`custom_vjp_primal_tree_values`).

With ``symbolic_zeros=True``, as in JAX: a ``custom_jvp`` rule receives a
:class:`SymbolicZero` for each zero tangent, a ``custom_vjp`` forward rule receives
:class:`CustomVJPPrimal` arguments saying which inputs are perturbed (have a nonzero
tangent), its backward rule a :class:`SymbolicZero` for each zero output cotangent, and
rules may return :class:`SymbolicZero` s. JAX's ``remat_opt_p`` is not provided
(docs/design_decisions.md).

Example:
  >>> from plax import custom_derivatives
  >>> custom_derivatives.custom_jvp is plax.custom_jvp
  True
"""
from __future__ import annotations

import dataclasses
from typing import Any

from plax import tree_util
from plax.core.trace import get_aval
from plax.transforms.custom_derivatives import (closure_convert, custom_jvp, custom_jvp_call_p,
                                                custom_vjp, custom_vjp_call_p)
from plax.transforms.custom_gradient import custom_gradient
from plax.transforms.linear_call import linear_call, linear_call_p


class SymbolicZero:
    """A zero tangent or cotangent known to be zero without an array: it has the abstract
    value (``.aval``, and through it ``.shape``, ``.dtype``, ``.ndim``...) of the array it
    stands for.

    Args:
      aval: the abstract value (a ShapedArray) of the zero.

    Example:
      >>> z = SymbolicZero.from_primal_value(jnp.ones(3))
      >>> z, z.shape, z.dtype
      (SymbolicZero, (3,), dtype('float32'))
    """

    def __init__(self, aval: Any) -> None:
        self.aval = aval

    def __repr__(self) -> str:
        return type(self).__name__

    def __getattr__(self, name: str) -> Any:
        # shape, dtype, ndim, size, weak_type ... come from the abstract value
        if name == "aval":  # not yet set (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.aval, name)

    @staticmethod
    def from_primal_value(val: Any) -> "SymbolicZero":
        """The symbolic zero tangent of a primal value (float0 for integers and booleans)."""
        from plax.transforms.jvp import tangent_aval
        return SymbolicZero(tangent_aval(get_aval(val)))


def zero_from_primal(val: Any, symbolic_zeros: bool = False) -> Any:
    """Zero tangents for each leaf of the pytree ``val``: arrays of zeros, or
    :class:`SymbolicZero` s with ``symbolic_zeros=True`` (float0 zeros for integer and
    boolean leaves).

    Args:
      val: a pytree of primal values.
      symbolic_zeros: return SymbolicZeros instead of arrays.

    Returns:
      A pytree of the structure of ``val``.

    Example:
      >>> zero_from_primal({"a": 1.0})
      {'a': Array(0., dtype=float32, weak_type=True)}
    """
    from plax.transforms.jvp import tangent_aval, zeros_like_aval

    def zero(x):
        aval = tangent_aval(get_aval(x))
        return SymbolicZero(aval) if symbolic_zeros else zeros_like_aval(aval)

    return tree_util.tree_map(zero, val)


@dataclasses.dataclass
class CustomVJPPrimal:
    """A primal argument of a ``custom_vjp`` forward rule in JAX's ``symbolic_zeros`` mode:
    its ``value`` and whether it is ``perturbed`` (has a nonzero tangent).

    Example:
      >>> CustomVJPPrimal(1.0, True)
      CustomVJPPrimal(value=1.0, perturbed=True)
    """

    value: Any
    perturbed: bool


def custom_vjp_primal_tree_values(tree: Any) -> Any:
    """The values of a pytree of :class:`CustomVJPPrimal` leaves (their ``perturbed`` flags
    dropped).

    Args:
      tree: a pytree whose leaves are CustomVJPPrimal.

    Returns:
      The pytree of their values.

    Raises:
      TypeError: a leaf is not a CustomVJPPrimal.

    Example:
      >>> custom_vjp_primal_tree_values({"a": CustomVJPPrimal(2.0, False)})
      {'a': 2.0}
    """
    def value(leaf):
        if type(leaf) is not CustomVJPPrimal:
            raise TypeError(f"unexpected leaf type {type(leaf)}")
        return leaf.value

    return tree_util.tree_map(value, tree)


__all__ = ["CustomVJPPrimal", "SymbolicZero", "closure_convert", "custom_gradient",
           "custom_jvp", "custom_jvp_call_p", "custom_vjp", "custom_vjp_call_p",
           "custom_vjp_primal_tree_values", "linear_call", "linear_call_p", "zero_from_primal"]
