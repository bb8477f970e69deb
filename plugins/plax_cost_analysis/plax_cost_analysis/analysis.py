"""Walks a jaxpr and sums the cost of its equations, one rule per primitive.

The rules live in the ``"cost_analysis"`` transform table (``plax.core.register_rule(
"cost_analysis", prim)(rule)``); a rule is called as ``rule(in_avals, out_avals, **params)``
and returns a cost dict (see :mod:`plax_cost_analysis.costs`). A primitive without a rule is
not an error: it is counted by the bytes it reads and writes, with no flops, and its name is
recorded in :attr:`CostAnalysis.uncounted`.
"""
from __future__ import annotations

from typing import Any, Callable

from plax.core import ClosedJaxpr, Jaxpr, new_transform

from plax_cost_analysis import costs

TRANSFORM = "cost_analysis"
RULES: dict = new_transform(TRANSFORM, hint="cost_analysis counts only its bytes")


_rules_loaded = False


def _load_rules() -> None:
    """Registers the rules (:mod:`plax_cost_analysis.rules`), which this module does not import
    at load time: they import every module of ``plax.lax``, and plugin discovery must stay
    cheap (see the package's docstring)."""
    global _rules_loaded
    import plax_cost_analysis.rules  # noqa: F401 -- registers them
    _rules_loaded = True


class CostAnalysis(dict):
    """The result of a cost analysis: a ``dict`` with XLA's keys, plus :attr:`uncounted`.

    Keys (always present): ``"flops"``, ``"transcendentals"``, ``"bytes accessed"``; then
    ``"bytes accessed{i}{}"`` (bytes read through operand ``i`` of the equations) and
    ``"bytes accessedout{}"`` (bytes written) where the program has any equation.

    Attributes:
      uncounted: the names of the primitives met that have no cost rule, in order of first
        appearance; their equations count bytes only (see :func:`bytes_only_primitives`).
    """

    uncounted: tuple = ()


def jaxpr_cost(jaxpr: Jaxpr | ClosedJaxpr, uncounted: list | None = None) -> dict:
    """The summed cost of the equations of ``jaxpr`` (a plain dict; see :func:`cost_of`).

    Args:
      jaxpr: a :class:`~plax.core.Jaxpr` or :class:`~plax.core.ClosedJaxpr`.
      uncounted: a list to which the names of primitives without a rule are appended.

    Example:
      >>> jaxpr_cost(plax.make_jaxpr(lambda x: x * 2.0)(jnp.ones(3)))["flops"]
      3.0
    """
    if isinstance(jaxpr, ClosedJaxpr):
        jaxpr = jaxpr.jaxpr
    if not _rules_loaded:
        _load_rules()
    total: dict = {}
    for eqn in jaxpr.eqns:
        in_avals = [v.aval for v in eqn.invars]
        out_avals = [v.aval for v in eqn.outvars]
        rule = RULES.get(eqn.primitive)
        if rule is None:
            if uncounted is not None and eqn.primitive.name not in uncounted:
                uncounted.append(eqn.primitive.name)
            cost = costs.memory(in_avals, out_avals)
        elif getattr(rule, "needs_uncounted", False):
            cost = rule(in_avals, out_avals, _uncounted=uncounted, **eqn.params)
        else:
            cost = rule(in_avals, out_avals, **eqn.params)
        for k, v in cost.items():
            total[k] = total.get(k, 0.0) + v
    return total


def cost_of(jaxpr: Jaxpr | ClosedJaxpr) -> CostAnalysis:
    """The cost of ``jaxpr`` as a :class:`CostAnalysis`, with the three main keys first.

    Example:
      >>> cost_of(plax.make_jaxpr(jnp.sin)(jnp.ones(3)))  # doctest: +NORMALIZE_WHITESPACE
      {'flops': 0.0, 'transcendentals': 3.0, 'bytes accessed': 24.0, 'bytes accessed0{}': 12.0,
       'bytes accessedout{}': 12.0}
    """
    uncounted: list = []
    total = jaxpr_cost(jaxpr, uncounted)
    ordered = {k: float(total.get(k, 0.0)) for k in costs.MAIN_KEYS}
    operands = sorted((k for k in total if k not in ordered and k != costs.OUT_BYTES),
                      key=lambda k: (len(k), k))
    ordered.update((k, float(total[k])) for k in operands)
    if costs.OUT_BYTES in total:
        ordered[costs.OUT_BYTES] = float(total[costs.OUT_BYTES])
    result = CostAnalysis(ordered)
    result.uncounted = tuple(uncounted)
    return result


def recursive(rule: Callable) -> Callable:
    """Marks a rule that analyses sub-jaxprs: it receives ``_uncounted`` (pass it on to
    :func:`jaxpr_cost`) so primitives without a rule inside are reported too."""
    rule.needs_uncounted = True
    return rule


def cost_analysis(fun: Callable, *args: Any, **kwargs: Any) -> CostAnalysis:
    """The cost of ``fun`` for these arguments (arrays or ``ShapeDtypeStruct``), without running it.

    The same as ``plax.jit(fun).lower(*args, **kwargs).cost_analysis()``.

    Example:
      >>> cost_analysis(lambda a, b: a @ b, jnp.ones((3, 4)), jnp.ones((4, 5)))["flops"]
      120.0
    """
    import plax
    jitted = fun if hasattr(fun, "lower") else plax.jit(fun)
    return cost_of(jitted.lower(*args, **kwargs).jaxpr)
