"""Small top-level helpers: block_until_ready on pytrees, disable_jit, typeof."""
from __future__ import annotations

import contextlib
import sys
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
    """The abstract value (type) of an array, tracer, typed key array or scalar.

    It prints as JAX prints types: ``float32[8,4]``, ``~float32[]`` for a weakly typed value,
    ``key<fry>[3]`` for typed PRNG keys.

    Args:
      x: an array, tracer, Python or NumPy scalar, or typed key array.

    Returns:
      A :class:`plax.core.ShapedArray` (whose ``dtype`` is a key dtype for typed keys).

    Example:
      >>> print(jax.typeof(jnp.ones((8, 4))))
      float32[8,4]
    """
    from plax.core.shaped_array import ShapedArray
    from plax.core.trace import get_aval
    keys = sys.modules.get("plax.random.keys")  # loaded whenever a typed key exists
    if keys is not None and isinstance(x, keys.PRNGKeyArray):  # its data's type, less the words
        sharding = keys.key_sharding(typeof(x._data).sharding, x.ndim)
        return ShapedArray(tuple(x.shape), x.dtype, sharding=sharding)
    from plax.core.shaped_array import ShapeDtypeStruct
    if isinstance(x, ShapeDtypeStruct):  # its type, sharding included, as jit traces it
        from plax.transforms.staging import abstractify
        aval = abstractify(x)
    else:
        aval = get_aval(x)
    if type(aval) is not ShapedArray:  # a ref's type, ...: as it is
        return aval
    from plax.sharding_types import type_sharding  # the sharding as types carry it
    return ShapedArray(aval.shape, aval.dtype, aval.weak_type, getattr(aval, "vma", frozenset()),
                       type_sharding(x, aval), getattr(aval, "unreduced", frozenset()))
