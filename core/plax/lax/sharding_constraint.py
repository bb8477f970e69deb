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

    On a current mesh whose axes are all Explicit (``make_mesh``'s default) it is, as in
    JAX 0.10, an assertion: each value's type must already be split as its sharding says
    (use :func:`plax.sharding.reshard` to change it), and ``x`` is returned unchanged.

    Args:
      x: an array, or a pytree of arrays.
      shardings: a :class:`~plax.sharding.Sharding` or
        :class:`~plax.sharding.PartitionSpec` applied to every leaf, or a pytree of them
        matching ``x`` (a prefix of its structure). A PartitionSpec is resolved against the
        current mesh (``plax.sharding.use_mesh``/``set_mesh``).

    Returns:
      ``x``, each leaf placed as its sharding says (unchanged under a trace).

    Raises:
      AssertionError: on an all-Explicit current mesh, a value's type is split otherwise.
      ValueError: a NamedSharding names Explicit axes while no mesh is set (JAX's error,
        pointing to ``reshard``), ``shardings`` does not match the structure of ``x``, a
        PartitionSpec is given with no current mesh, a sharding is None, or a spec is longer
        than its array's rank.
      TypeError: a leaf of ``shardings`` is neither a Sharding nor a PartitionSpec.

    Example:
      >>> from plax.sharding import NamedSharding, PartitionSpec as P
      >>> from plax.sharding import AxisType
      >>> mesh = plax.make_mesh((1,), ("x",), axis_types=(AxisType.Auto,))
      >>> out = lax.with_sharding_constraint({"a": jnp.ones(2), "b": jnp.zeros(4)},
      ...                                    NamedSharding(mesh, P("x")))
      >>> out["b"].sharding
      NamedSharding(mesh=Mesh('x': 1, axis_types=(Auto,)), spec=P('x',), memory_kind=device)
      >>> plax.jit(lambda v: lax.with_sharding_constraint(v * 2, NamedSharding(mesh, P())))(
      ...     jnp.ones(2))
      Array([2., 2.], dtype=float32)
    """
    from plax.sharding_types import constraint_is_assertion
    if constraint_is_assertion(x, shardings):  # on Explicit axes: the types say it already
        return x
    return _place_tree(x, shardings, "with_sharding_constraint shardings")


__all__ = ["with_sharding_constraint"]
