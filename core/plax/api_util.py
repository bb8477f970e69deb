"""Small top-level helpers: block_until_ready on pytrees, disable_jit, typeof."""
from __future__ import annotations

import contextlib
from typing import Any, Iterator

from plax import tree_util
from plax.config import config


def block_until_ready(x: Any) -> Any:
    """Waits until every array in the pytree ``x`` is computed; returns ``x``.

    Example:
      >>> jax.block_until_ready({"a": jnp.ones(3)})["a"].shape
      (3,)
    """
    for leaf in tree_util.tree_leaves(x):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return x


@contextlib.contextmanager
def disable_jit(disable: bool = True) -> Iterator[None]:
    """Inside this block, jitted functions run op by op in Python (for debugging with print).

    Example:
      >>> with jax.disable_jit():
      ...     jax.jit(lambda x: x + 1)(1.0)   # runs as plain Python: a float comes back
      2.0
    """
    with config.override("disable_jit", disable):
        yield


def typeof(x: Any):
    """The abstract value (ShapedArray) of an array, tracer or scalar."""
    from plax.core.trace import get_aval
    return get_aval(x)
