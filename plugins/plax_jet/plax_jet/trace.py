"""The jet trace: values carrying a truncated Taylor series, and the ``jet`` entry point.

Inside the trace a value is a :class:`JetTracer`: its primal ``x0`` and the *normalized*
Taylor coefficients ``[x1, ..., xK]`` of a curve ``x(t) = x0 + x1 t + x2 t^2 + ...``
(``None`` when they are all zero). The rules in the ``jet`` table map coefficients to
coefficients; :func:`jet` converts from and to JAX's convention, where the user's series
holds the derivatives ``k! * xk``.

Rule signature (register with ``plax.core.register_rule("jet", prim)``)::

    rule(primals, series, **params) -> (primal_out, series_out)

``series[i]`` is the list of K coefficients of operand ``i``, or None if they are zero;
``series_out`` likewise (a list of them for a primitive with several results).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import numpy as np

from plax import dtypes, tree_util
from plax.core import Trace, Tracer, get_aval, new_main, new_transform, registry

jet_rules = new_transform("jet", hint="jet (Taylor-mode differentiation) cannot pass through it")


class JetTracer(Tracer):
    """A primal value with the normalized Taylor coefficients of its curve (or None: zero)."""

    __slots__ = ("primal", "terms")

    def __init__(self, trace: "JetTrace", primal: Any, terms: list | None):
        self._trace = trace
        self.primal = primal
        self.terms = terms

    @property
    def aval(self):
        return get_aval(self.primal)

    def to_concrete_value(self):
        p = self.primal
        return p.to_concrete_value() if isinstance(p, Tracer) else p

    def full_lower(self):
        return self


class JetTrace(Trace):
    """Runs each primitive's jet rule on (primal, coefficients) pairs. ``main.payload`` is
    the order K."""

    __slots__ = ()

    def pure(self, val: Any) -> JetTracer:
        return JetTracer(self, val, None)

    lift = pure

    def process_primitive(self, primitive, tracers, params):
        primals = [t.primal for t in tracers]
        series = [t.terms for t in tracers]
        if all(s is None for s in series):
            return self._wrap(primitive, primitive.bind(*primals, **params), None)
        rule = jet_rules.get(primitive)
        if rule is None:
            out_avals = primitive.abstract_eval(*[get_aval(p) for p in primals], **params)
            avals = out_avals if primitive.multiple_results else [out_avals]
            if any(dtypes.is_inexact(a.dtype) for a in avals):
                rule = registry.get_rule("jet", primitive)  # raises, naming prim and 'jet'
            else:  # integer or boolean results carry no series
                return self._wrap(primitive, primitive.bind(*primals, **params), None)
        out, out_series = rule(primals, series, **params)
        return self._wrap(primitive, out, out_series)

    def _wrap(self, primitive, out, series):
        if primitive.multiple_results:
            series = series if series is not None else [None] * len(out)
            return [JetTracer(self, o, s) for o, s in zip(out, series)]
        return JetTracer(self, out, series)

    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, **params):
        return fun(*tracers)  # the custom rule is first order only: expand the function

    def process_custom_vjp_call(self, primitive, fun, fwd, bwd, tracers, **params):
        return fun(*tracers)


def _check_series(primals: Sequence, series: Sequence) -> int:
    if not isinstance(primals, (tuple, list)) or not isinstance(series, (tuple, list)):
        raise TypeError(f"jet takes primals and series as tuples or lists, got "
                        f"{type(primals).__name__} and {type(series).__name__}.")
    if len(primals) != len(series):
        raise ValueError(f"jet got {len(primals)} primals but {len(series)} series; pass one "
                         f"series (a list of terms) per primal.")
    lengths = {len(s) for s in series}
    if len(lengths) > 1:
        raise ValueError("jet terms have inconsistent lengths for different arguments")
    return lengths.pop() if lengths else 0


def jet_coefficients(fun: Callable, primals: Sequence[Any], series: Sequence[list | None],
                     order: int) -> tuple[list, list]:
    """Runs flat ``fun`` under a new jet trace: ``(outputs, their coefficient lists or None)``.

    ``series`` holds normalized coefficients (``x_k = x^(k)(0) / k!``), None for zero.
    """
    from plax import numpy as jnp
    with new_main(JetTrace, payload=order) as main:
        trace = JetTrace(main)
        tracers = [JetTracer(trace, p, s) for p, s in zip(primals, series)]
        outs = fun(*tracers)
        out_tracers = [trace.full_raise(jnp.asarray(o) if not isinstance(o, Tracer) else o)
                       for o in outs]
        return [t.primal for t in out_tracers], [t.terms for t in out_tracers]


def jet(fun: Callable, primals: Sequence[Any], series: Sequence[Sequence[Any]]
        ) -> tuple[Any, Any]:
    """Taylor-mode forward differentiation: pushes a truncated Taylor series through ``fun``.

    For a curve ``x(t)`` with ``x(0) = primals`` and derivatives ``x^(k)(0) = series[.][k-1]``,
    returns ``fun(x(0))`` and the derivatives ``d^k/dt^k fun(x(t)) at t=0`` for
    ``k = 1..K``: the higher-order analogue of :func:`plax.jvp` (for K = 1 it is ``jvp``).

    Args:
      fun: the function; its arguments and outputs are pytrees of arrays.
      primals: a tuple with one value (pytree) per positional argument of ``fun``.
      series: a tuple with one list of K terms per primal, each term shaped like its primal.

    Returns:
      ``(primal_out, series_out)``: ``fun(*primals)``, and for each output leaf the list of
      its K derivative terms (zeros where the output does not depend on the inputs).

    Raises:
      ValueError: the series have different lengths, or do not match the primals.
      NotImplementedError: ``fun`` uses a primitive with no ``jet`` rule (named).

    Example:
      >>> jet(jnp.sin, (0.,), ((1., 0., 0., 0.),))[1]   # sin's derivatives: 1, 0, -1, 0
      [Array(1., ...), Array(0., ...), Array(-1., ...), Array(0., ...)]
    """
    from plax import numpy as jnp
    order = _check_series(primals, series)
    flat_primals, in_tree = tree_util.tree_flatten(tuple(primals))
    flat_primals = [jnp.asarray(p) for p in flat_primals]
    flat_terms: list = []  # per input leaf, its list of derivative terms
    for p, s in zip(primals, series):
        leaves_p, tree_p = tree_util.tree_flatten(p)
        per_term = []
        for term in s:
            leaves_t, tree_t = tree_util.tree_flatten(term)
            if tree_t != tree_p:
                raise ValueError(f"jet series terms must have the structure of their primal: "
                                 f"{tree_t} differs from {tree_p}.")
            per_term.append(leaves_t)
        flat_terms.extend([per_term[k][i] for k in range(order)] for i in range(len(leaves_p)))
    for p, terms in zip(flat_primals, flat_terms):
        for t in terms:
            if np.shape(t) != get_aval(p).shape:
                raise ValueError(f"jet series term of shape {np.shape(t)} does not match its "
                                 f"primal of shape {get_aval(p).shape}.")
    out_tree: list = []

    def flat_fun(*leaves):
        out_leaves, tree = tree_util.tree_flatten(fun(*tree_util.tree_unflatten(in_tree, leaves)))
        out_tree.append(tree)
        return out_leaves

    normalized = [[jnp.asarray(t, get_aval(p).dtype) / math.factorial(k + 1)
                   for k, t in enumerate(ts)] if order else None
                  for p, ts in zip(flat_primals, flat_terms)]
    outs, out_terms = jet_coefficients(flat_fun, flat_primals, normalized, order)
    tree = out_tree[0]
    primal_out, series_out = [], []
    for p, terms in zip(outs, out_terms):
        primal_out.append(p)
        if terms is None:
            series_out.append([_zero_term(p) for _ in range(order)])
        else:
            series_out.append([t * math.factorial(k + 1) for k, t in enumerate(terms)])
    # each output leaf's place holds its list of terms, as in JAX
    return tree_util.tree_unflatten(tree, primal_out), tree_util.tree_unflatten(tree, series_out)


def _zero_term(p):
    from plax import numpy as jnp
    aval = get_aval(p)
    if dtypes.is_inexact(aval.dtype):
        return jnp.zeros(aval.shape, aval.dtype)
    return jnp.zeros(aval.shape, jnp.float32)  # as JAX: integer outputs get float zeros
