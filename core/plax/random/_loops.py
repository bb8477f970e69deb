"""The rejection samplers' loop: per-element predicates over a ``lax.while_loop``.

JAX's gamma, poisson and gamma-gradient code runs ``lax.while_loop``s whose
bodies keep finished elements frozen (``select(pred, new, old)``).
:func:`while_loop` runs the same iterations:

* When the predicate is concrete (eager execution), it loops from Python
  exactly until the predicate is false (no tracing or compiling per call).
* When the predicate is traced (under ``jit``, ``vmap`` or another
  transform), it is one ``lax.while_loop`` running while any element's
  predicate holds, so results equal JAX's for every input.

The predicate may be a scalar (the loop stops for everything at once) or
have the shape of the leading axes of the state (each element stops on its
own, which is what a vmapped JAX ``while_loop`` computes).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from plax import lax, tree_util
from plax.core.trace import get_aval
from plax.random._util import concrete_value


def _select_leaf(pred, new, old):
    pred_shape = get_aval(pred).shape
    leaf_shape = get_aval(new).shape
    if pred_shape != leaf_shape:
        # per-element predicate over the leading axes, or a scalar predicate
        pred = lax.broadcast_in_dim(pred, leaf_shape, tuple(range(len(pred_shape))))
    return lax.select(pred, new, old)


def _step(cond_fun, body_fun, state, pred):
    """One round: the body's new state where ``pred`` holds, the old state elsewhere."""
    new_state = body_fun(state)
    return tree_util.tree_map(lambda n, o: _select_leaf(pred, n, o), new_state, state)


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init: Any,
               max_traced_iters: int | None = None, max_eager_iters: int | None = None) -> Any:
    """``lax.while_loop(cond_fun, body_fun, init)`` with a per-element predicate (see the
    module docstring).

    Args:
      cond_fun: state -> bool array (rank 0, or the state's leading batch shape).
      body_fun: state -> new state (same structure, shapes and dtypes).
      init: the initial state, a pytree of arrays.
      max_traced_iters: unused (traced loops are a ``while`` primitive and run until every
        element is done); accepted so callers written for a bounded unrolling still work.
      max_eager_iters: an optional bound on eager iterations (as JAX's own loop caps).

    Returns:
      The final state.
    """
    state = init
    iteration = 0
    while True:
        pred = cond_fun(state)
        value = concrete_value(pred)
        if value is None:
            return _traced_loop(cond_fun, body_fun, state)
        if not np.any(value):
            return state
        if max_eager_iters is not None and iteration >= max_eager_iters:
            return state
        if np.all(value):
            state = body_fun(state)  # every element still running: no need to freeze any
        else:
            state = _step(cond_fun, body_fun, state, pred)
        iteration += 1


def _traced_loop(cond_fun, body_fun, state):
    def any_running(s):
        pred = cond_fun(s)
        return lax.reduce_or(pred, tuple(range(get_aval(pred).ndim)))

    return lax.while_loop(any_running, lambda s: _step(cond_fun, body_fun, s, cond_fun(s)),
                          state)
