"""``jax.ensure_compile_time_eval``: compute on concrete values now, even while ``jit`` or
``make_jaxpr`` traces.

Inside a staging transform, an operation on constants is staged into the program (the
transform is the "dynamic" level, which takes every primitive none of whose operands belongs
to a higher level). In the block, the eager level is the dynamic one instead: operations on
concrete values run at once and return Arrays (usable as Python values: shapes, ``if``);
operations on traced values are staged as before.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

from plax.core import trace


@contextlib.contextmanager
def ensure_compile_time_eval() -> Iterator[None]:
    """A context manager in which operations on concrete values are evaluated eagerly, also
    while a function is being traced by ``jit``.

    Example:
      >>> @jax.jit
      ... def f(x):
      ...     with jax.ensure_compile_time_eval():
      ...         n = int(jnp.arange(4).sum())   # concrete: 6
      ...     return x * n
      >>> f(1.0)
      Array(6., dtype=float32, weak_type=True)
    """
    state = trace.state
    saved = state.dynamic
    state.dynamic = state.stack[0]  # the eager (level 0) main
    try:
        yield
    finally:
        state.dynamic = saved
