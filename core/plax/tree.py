"""The ``plax.tree`` namespace: short names for the pytree utilities.

``plax.tree.map`` is :func:`plax.tree_util.tree_map`, ``plax.tree.flatten`` is
:func:`plax.tree_util.tree_flatten`, and so on, mirroring ``jax.tree``. The
names are the very same function objects, so there is no call overhead.

Example:
  >>> from plax import tree
  >>> tree.map(lambda x: x * 2, {'a': 1, 'b': (2, None)})
  {'a': 2, 'b': (4, None)}
  >>> tree.leaves([1, [2, 3]])
  [1, 2, 3]
"""

from __future__ import annotations

from .tree_util import (
    tree_all as all,
    tree_broadcast as broadcast,
    tree_flatten as flatten,
    tree_flatten_with_path as flatten_with_path,
    tree_leaves as leaves,
    tree_leaves_with_path as leaves_with_path,
    tree_map as map,
    tree_map_with_path as map_with_path,
    tree_reduce as reduce,
    tree_reduce_associative as reduce_associative,
    tree_structure as structure,
    tree_transpose as transpose,
    tree_unflatten as unflatten,
)

__all__ = [
    "all",
    "broadcast",
    "flatten",
    "flatten_with_path",
    "leaves",
    "leaves_with_path",
    "map",
    "map_with_path",
    "reduce",
    "reduce_associative",
    "static",
    "structure",
    "transpose",
    "unflatten",
]


def static(**kwargs):
    """A ``dataclasses.field`` marked static (``metadata={"static": True}``), so that
    :func:`plax.tree_util.register_dataclass` makes it part of the tree's structure, not a
    leaf.

    Args:
      **kwargs: the arguments of :func:`dataclasses.field`.

    Returns:
      The field.

    Example:
      >>> import dataclasses
      >>> @jax.tree_util.register_dataclass
      ... @dataclasses.dataclass
      ... class Op:
      ...     x: jax.Array
      ...     op: str = jax.tree.static(default="add")
      >>> jax.tree.leaves(Op(x=jnp.ones(2)))
      [Array([1., 1.], dtype=float32)]
    """
    import dataclasses
    metadata = dict(kwargs.pop("metadata", None) or {})
    metadata["static"] = True
    return dataclasses.field(metadata=metadata, **kwargs)
