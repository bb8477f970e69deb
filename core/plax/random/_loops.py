"""A ``while_loop`` for the rejection samplers, without a loop primitive.

JAX's gamma, poisson and gamma-gradient code runs ``lax.while_loop``s whose
bodies keep finished elements frozen (``select(pred, new, old)``). plax has
no while primitive yet, so :func:`while_loop` runs the same iterations from
Python:

* When the predicate is concrete (eager execution), it loops exactly until
  the predicate is false, so results equal JAX's for every input.
* When the predicate is traced (under ``jit``, ``vmap`` or another
  transform), the number of iterations cannot depend on data, so the body
  is unrolled ``max_traced_iters`` times with the same freezing selects.
  Results equal JAX's whenever JAX's loop would have finished within that
  many iterations; each caller picks a bound whose chance of being
  exceeded is negligible (see the callers' notes).

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


def while_loop(cond_fun: Callable[[Any], Any], body_fun: Callable[[Any], Any], init: Any,
               max_traced_iters: int, max_eager_iters: int | None = None) -> Any:
    """``lax.while_loop(cond_fun, body_fun, init)``, run from Python (see module docstring).

    Args:
      cond_fun: state -> bool array (rank 0, or the state's leading batch shape).
      body_fun: state -> new state (same structure, shapes and dtypes).
      init: the initial state, a pytree of arrays.
      max_traced_iters: the number of unrolled iterations when the predicate is traced.
      max_eager_iters: an optional bound on eager iterations (as JAX's own loop caps).

    Returns:
      The final state.
    """
    state = init
    iteration = 0
    while True:
        pred = cond_fun(state)
        value = concrete_value(pred)
        if value is not None:
            if not np.any(value):
                return state
            if max_eager_iters is not None and iteration >= max_eager_iters:
                return state
        elif iteration >= max_traced_iters:
            return state
        new_state = body_fun(state)
        if value is not None and np.all(value):
            state = new_state  # every element still running: no need to freeze any
        else:
            state = tree_util.tree_map(lambda n, o: _select_leaf(pred, n, o), new_state, state)
        iteration += 1
