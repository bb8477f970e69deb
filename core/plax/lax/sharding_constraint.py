"""``lax.with_sharding_constraint``: JAX's sharding constraint, for a ``jit`` that does not
partition.

plax computes every operation on one device (its ``jit`` does not partition), so a sharding
constraint has nothing to constrain under a trace. It shares its implementation with
:func:`plax.sharding.reshard`: eagerly it places the values as the shardings say.
"""
from __future__ import annotations

from typing import Any

from plax.sharding import _place_tree


def with_sharding_constraint(x: Any, shardings: Any) -> Any:
    """Constrains the sharding of ``x`` (JAX's ``jax.lax.with_sharding_constraint``).

    In JAX this tells the partitioner of ``jit`` how an intermediate value must be split.
    plax's ``jit`` does not partition: under a transformation (``jit``, ``grad``, ``vmap``,
    ...) the traced values are returned unchanged, and the computation is correct on one
    device. Eagerly, each leaf is placed as its sharding says, as with
    :func:`plax.sharding.reshard` (``plax.device_put(x, sharding)``), and the result carries
    that sharding.

    Args:
      x: an array, or a pytree of arrays.
      shardings: a :class:`~plax.sharding.Sharding` or
        :class:`~plax.sharding.PartitionSpec` applied to every leaf, or a pytree of them
        matching ``x`` (a prefix of its structure). A PartitionSpec is resolved against the
        current mesh (``plax.sharding.use_mesh``/``set_mesh``).

    Returns:
      ``x``, each leaf placed as its sharding says (unchanged under a trace).

    Raises:
      ValueError: ``shardings`` does not match the structure of ``x``, a PartitionSpec is
        given with no current mesh, a sharding is None, or a spec is longer than its
        array's rank.
      TypeError: a leaf of ``shardings`` is neither a Sharding nor a PartitionSpec.

    Example:
      >>> from plax.sharding import NamedSharding, PartitionSpec as P
      >>> mesh = plax.make_mesh((1,), ("x",))
      >>> out = lax.with_sharding_constraint({"a": jnp.ones(2), "b": jnp.zeros(4)},
      ...                                    NamedSharding(mesh, P("x")))
      >>> out["b"].sharding
      NamedSharding(mesh=Mesh('x': 1, axis_types=(Explicit,)), spec=P('x',), memory_kind=device)
      >>> plax.jit(lambda v: lax.with_sharding_constraint(v * 2, NamedSharding(mesh, P())))(
      ...     jnp.ones(2))
      Array([2., 2.], dtype=float32)
    """
    return _place_tree(x, shardings, "with_sharding_constraint shardings")


__all__ = ["with_sharding_constraint"]
