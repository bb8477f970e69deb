"""``plax.smap``: JAX 0.10's single-axis ``shard_map``, written with ``in_axes``/``out_axes``
as ``vmap`` is, over one axis of the context mesh (``plax.set_mesh``).

``smap(f, in_axes=0, out_axes=0, axis_name="x")`` is ``shard_map(f, in_specs=P("x"),
out_specs=P("x"), axis_names={"x"})`` on the mesh set with ``plax.set_mesh``: an integer
axis ``a`` becomes a spec naming ``axis_name`` at dimension ``a``, ``None`` an unsplit
argument (every member gets all of it) or a replicated output. Left out, ``in_axes`` is
inferred from the arguments' shardings (each argument split as its ``NamedSharding`` splits
it over ``axis_name``; unsharded arguments are replicated), as JAX infers it on ``Explicit``
meshes. plax's shard_map makes every mesh axis manual, so on a mesh with other axes the body
runs once per device with blocks split over ``axis_name`` only (the other axes' members
compute the same values); the results are those of JAX's partially manual smap.

Negative axes count from the end of each array (the range JAX documents; JAX 0.10.2 itself
turns every negative axis into 0).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Hashable

from plax import tree_util

__all__ = ["Infer", "smap"]


class _InferFromArgs:
    """``smap``'s default ``in_axes``: infer each argument's axis from its sharding."""

    def __repr__(self) -> str:
        return "Infer"

    def __reduce__(self):
        return "Infer"


Infer = _InferFromArgs()


def _check(in_axes, out_axes, axis_name) -> None:
    if isinstance(axis_name, (list, tuple)):
        raise TypeError(f"smap axis_name must be one hashable axis name (a str), not a "
                        f"sequence of names, got {axis_name!r}")
    is_int = lambda a: isinstance(a, int) and not isinstance(a, bool)
    if in_axes is not Infer:
        if in_axes is not None and not is_int(in_axes) and not isinstance(in_axes, tuple):
            raise TypeError("smap in_axes must be an int, None, Infer, or a tuple with an "
                            "entry per positional argument of the function, got "
                            f"{in_axes!r}")
        if not all(is_int(a) for a in tree_util.tree_leaves(in_axes)):
            raise TypeError("smap in_axes must be an int, None, Infer, or a (nested) container "
                            f"with ints or None as leaves, got {in_axes!r}")
    if not all(is_int(a) for a in tree_util.tree_leaves(out_axes)):
        raise TypeError("smap out_axes must be an int, None, or a (nested) container with "
                        f"ints or None as leaves, got {out_axes!r}")


def _spec(axis_name, axis, ndim: int):
    from plax.sharding import PartitionSpec
    if axis is None:
        return PartitionSpec()
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"smap axis {axis} is out of range for an array of rank {ndim} "
                         f"(it must be in [-{ndim}, {ndim}))")
    return PartitionSpec(*([None] * (axis % ndim) + [axis_name]))


def _broadcast(prefix, tree, what: str) -> list:
    """``prefix`` (a tree of axes whose leaves apply to whole subtrees) repeated for each leaf
    of ``tree``."""
    is_none = lambda x: x is None
    out: list = []

    def expand(p, t):
        out.extend([p] * len(tree_util.tree_leaves(t)))

    try:
        tree_util.tree_map(expand, prefix, tree, is_leaf=is_none)
    except (ValueError, TypeError) as err:
        raise ValueError(f"smap {what} is not a prefix of the structure it applies to: "
                         f"{err}") from None
    return out


def _inferred(axis_name, leaf, mesh):
    """The spec of ``leaf``'s sharding restricted to ``axis_name`` (P() if unsharded)."""
    from plax.sharding import NamedSharding, PartitionSpec
    from plax.sharding_types import explicit_type
    # a traced argument (smap under jit) carries its sharding in its type
    sharding = explicit_type(leaf) or getattr(leaf, "sharding", None)
    if not isinstance(sharding, NamedSharding) or sharding.mesh.axis_names != mesh.axis_names:
        return PartitionSpec()
    entries = []
    for entry in sharding.spec.partitions:
        names = entry if isinstance(entry, tuple) else (entry,)
        entries.append(axis_name if axis_name in names else None)
    return PartitionSpec(*entries)


def smap(f: Callable | None = None, /, *, in_axes: Any = Infer, out_axes: Any,
         axis_name: Hashable) -> Callable:
    """Maps ``f`` over one axis of the context mesh (JAX's ``jax.smap``): each member of
    ``axis_name`` runs ``f`` on its block of the arguments, split along ``in_axes``, and the
    blocks of the results are joined along ``out_axes``.

    Args:
      f: the per-member function (omit it to use ``smap(...)`` as a decorator).
      in_axes: an int, None, or a tuple with an entry (an int, None, or a container of
        them) per positional argument; default: inferred from the arguments' shardings.
      out_axes: an int, None (a replicated output: every member must hold the same value),
        or a container of them matching the outputs.
      axis_name: the mesh axis to map over.

    Returns:
      The mapped function.

    Raises:
      TypeError: ``axis_name`` is a sequence, or ``in_axes``/``out_axes`` hold something
        other than ints and None.
      ValueError: no mesh is set, ``axis_name`` is not one of its axes, or an axis is out of
        range for its array.

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):  # Explicit: arguments placed
      ...     x = plax.device_put(jnp.arange(3.0), plax.P("x"))
      ...     plax.smap(lambda b: b * 2, in_axes=0, out_axes=0, axis_name="x")(x)
      Array([0., 2., 4.], dtype=float32)
    """
    _check(in_axes, out_axes, axis_name)
    if f is None:
        return functools.partial(smap, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)
    if not callable(f):
        raise TypeError(f"smap requires a callable as its first argument, got {f!r}")

    @functools.wraps(f)
    def mapped(*args):
        from plax import numpy as jnp
        from plax.sharding import get_mesh
        from plax_pmap.api import shard_map
        mesh = get_mesh()
        if mesh is None or not mesh.axis_names:
            raise ValueError("smap needs a context mesh: enter one with plax.set_mesh(mesh)")
        if axis_name not in mesh.axis_names:
            raise ValueError(f"smap axis_name {axis_name!r} is not an axis of the context "
                             f"mesh, whose axes are {tuple(mesh.axis_names)}")
        leaves, treedef = tree_util.tree_flatten(args)
        if in_axes is Infer:
            specs = [_inferred(axis_name, x, mesh) for x in leaves]
        else:
            prefix = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
            if len(prefix) != len(args):
                raise ValueError(f"smap in_axes has {len(prefix)} entries but the function got "
                                 f"{len(args)} positional arguments")
            axes = _broadcast(prefix, args, "in_axes")
            specs = [_spec(axis_name, a, jnp.ndim(x)) for a, x in zip(axes, leaves)]
        in_specs = tree_util.tree_unflatten(treedef, specs)
        # out_axes: a negative axis needs the output's rank, known once f is traced
        out_specs = _out_specs(f, args, in_specs, mesh, axis_name, out_axes)
        return shard_map(f, mesh=mesh, in_specs=tuple(in_specs), out_specs=out_specs,
                         axis_names={axis_name})(*args)

    return mapped


def _out_specs(f, args, in_specs, mesh, axis_name, out_axes):
    """The out_specs of ``out_axes``: non-negative axes need no shapes; negative ones are
    resolved against the output ranks, found by tracing ``f`` under an unchecked shard_map."""
    leaves_axes = tree_util.tree_leaves(out_axes)
    if all(a is None or a >= 0 for a in leaves_axes):
        return tree_util.tree_map(lambda a: _spec(axis_name, a, max(a or 0, 0) + 1), out_axes,
                                  is_leaf=lambda x: x is None)
    import plax
    from plax_pmap.api import shard_map
    from plax.sharding import PartitionSpec
    shapes = plax.eval_shape(shard_map(f, mesh=mesh, in_specs=tuple(in_specs),
                                       out_specs=PartitionSpec(), check_vma=False), *args)
    flat, out_tree = tree_util.tree_flatten(shapes)
    axes = _broadcast(out_axes, tree_util.tree_unflatten(out_tree, flat), "out_axes")
    return tree_util.tree_unflatten(
        out_tree, [_spec(axis_name, a, len(s.shape)) for a, s in zip(axes, flat)])
