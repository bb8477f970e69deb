"""``jit(in_shardings=, out_shardings=)``: what JAX 0.10.2 does with them at a call.

A top-level call (no enclosing trace) checks each argument against its ``in_shardings``
entry and places the outputs as ``out_shardings`` say; under a trace both are inert, as in
JAX (the traced types are the arguments' and the body's: ``make_jaxpr`` of a ``jit`` with
``out_shardings=P('Y', 'X')`` of an ``f32[8@X,8@Y]`` still types the result ``8@X,8@Y``).

- An argument that already has a sharding (a sharded array, or one committed to a device)
  must have exactly the one given: otherwise JAX's ``ValueError`` ("Sharding passed to jit
  does not match the sharding on the respective arg"). Nothing is moved: under explicit
  sharding an argument's sharding is its type, so a disagreement is a type error, not a
  transfer.
- An argument without one (a NumPy array, a Python scalar, an uncommitted Array) is placed
  as its entry says when no mesh is set; under a set mesh JAX types such a value as
  replicated on the mesh, so plax leaves it where it is (its result then is not split).
- Each output is placed as its ``out_shardings`` entry says, through the same placement
  ``reshard`` uses (blocks move between the devices; nothing is gathered on one device), so
  ``jit(f, out_shardings=P('Y', 'X'))(x)`` is typed ``float32[8@Y,8@X]``. Donation is then
  decided against these placed outputs (:mod:`plax.transforms.donation`), as XLA aliases
  the buffers of the program whose result shardings ``out_shardings`` fixed.
"""
from __future__ import annotations

from typing import Any

from plax import tree_util


def _is_spec_leaf(s: Any) -> bool:
    from plax.sharding import PartitionSpec, Sharding
    return s is None or isinstance(s, (Sharding, PartitionSpec))


def _check_leaves(tree: Any, what: str) -> None:
    """JAX's TypeError for an entry that is neither a Sharding, a PartitionSpec nor None."""
    for s in tree_util.tree_leaves(tree, is_leaf=_is_spec_leaf):
        if not _is_spec_leaf(s):
            raise TypeError(f"{what} leaf specifications are expected to be PartitionSpec "
                            f"instances or None, but got {s!r}")


def _resolved(s: Any, what: str):
    """``s`` (a Sharding, a PartitionSpec or None) as a Sharding or None; a PartitionSpec
    needs a current mesh (JAX's RuntimeError otherwise)."""
    from plax.sharding import NamedSharding, PartitionSpec, _mesh_of_abstract, get_mesh
    if not isinstance(s, PartitionSpec):
        return s
    mesh = _mesh_of_abstract(get_mesh())
    if mesh is None or mesh.empty:
        raise RuntimeError(
            f"jit requires a non-empty mesh in context if you are passing `PartitionSpec`s "
            f"to {what}. You can define a context mesh via `jax.set_mesh(mesh)`. "
            f"Alternatively, provide `Sharding`s to {what} and then the mesh context manager "
            "is not required.")
    for entry in s.partitions:
        for axis in (entry if isinstance(entry, tuple) else (entry,)):
            if axis is not None and axis not in mesh.axis_names:
                raise ValueError(f"Resource axis: {axis} of {s!r} is not found in mesh: "
                                 f"{tuple(mesh.axis_names)}.")
    return NamedSharding(mesh, s)


class JitShardings:
    """The ``in_shardings``/``out_shardings`` of one ``jit``, applied at top-level calls.

    Example:
      >>> with plax.set_mesh(plax.make_mesh((1,), ("x",))):
      ...     f = jax.jit(lambda u: u * 2, out_shardings=plax.P("x"))
      ...     f(jnp.ones(4)).sharding.spec
      P('x',)
    """

    __slots__ = ("in_shardings", "out_shardings")

    def __init__(self, in_shardings: Any, out_shardings: Any):
        _check_leaves(in_shardings, "in_shardings")
        _check_leaves(out_shardings, "out_shardings")
        self.in_shardings = in_shardings
        self.out_shardings = out_shardings

    # ---- arguments
    def place_arguments(self, dyn_args: tuple, has_kwargs: bool) -> list:
        """The dynamic positional arguments, each checked against (or placed by) its
        ``in_shardings`` entry.

        Raises:
          ValueError: keyword arguments with ``in_shardings``, ``in_shardings`` not a prefix
            of the positional arguments, or an argument sharded otherwise than its entry.
          RuntimeError: a PartitionSpec entry with no current mesh.
        """
        if self.in_shardings is None:
            return list(dyn_args)
        if has_kwargs:
            raise ValueError("pjit does not support kwargs when in_shardings is specified.")
        given = self.in_shardings
        if isinstance(given, list):
            given = tuple(given)
        if isinstance(given, tuple) and not _is_spec_leaf(given):  # (a PartitionSpec is one)
            if len(given) != len(dyn_args):
                raise ValueError(
                    "pjit in_shardings specification must be a tree prefix of the positional "
                    "arguments tuple. In particular, pjit in_shardings must either be a "
                    "Sharding, a PartitionSpec, or a tuple of length equal to the number of "
                    "positional arguments. But pjit in_shardings is the wrong length: got a "
                    f"tuple or list of length {len(given)} for an args tuple of length "
                    f"{len(dyn_args)}.")
        else:
            given = (given,) * len(dyn_args)
        out = []
        for arg, entry in zip(dyn_args, given):
            if entry is None:
                out.append(arg)
                continue
            try:
                targets = tree_util.tree_broadcast(entry, arg, is_leaf=_is_spec_leaf)
            except ValueError as err:
                raise ValueError(f"pjit in_shardings is not a pytree prefix of the "
                                 f"arguments: {err}") from None
            out.append(tree_util.tree_map(lambda t, x: self._argument(x, t), targets, arg,
                                          is_leaf=_is_spec_leaf))
        return out

    @staticmethod
    def _argument(x: Any, entry: Any) -> Any:
        import plax
        from plax.array import Array
        from plax.sharding import get_mesh
        s = _resolved(entry, "in_shardings")
        if s is None:
            return x
        if isinstance(x, Array) and (x._committed or type(x) is not Array):
            have = x.sharding
            if not _same(have, s, x.ndim):
                raise ValueError(
                    "Sharding passed to jit does not match the sharding on the respective "
                    f"arg. Got jit sharding: {s!r},\narg sharding: {have!r} for arg type: "
                    f"{plax.typeof(x)}")
            return x
        mesh = get_mesh()
        if mesh is not None and not mesh.empty:
            return x  # typed replicated on the current mesh, as JAX types it (docstring)
        return plax.device_put(x, s)

    # ---- outputs
    def place_outputs(self, out: Any) -> Any:
        """``out`` with each leaf placed as its ``out_shardings`` entry says.

        Raises:
          ValueError: ``out_shardings`` not a prefix of the outputs, or an entry naming more
            dimensions than its output has.
          RuntimeError: a PartitionSpec entry with no current mesh.
        """
        if self.out_shardings is None:
            return out
        from plax.sharding import NamedSharding, _place_tree
        try:
            targets = tree_util.tree_broadcast(self.out_shardings, out, is_leaf=_is_spec_leaf)
        except ValueError as err:
            raise ValueError(f"pytree structure error: pjit out_shardings is not a pytree "
                             f"prefix of the outputs:\n{err}") from None
        paths_leaves, treedef = tree_util.tree_flatten_with_path(out)
        entries = treedef.flatten_up_to(targets)
        placed = []
        for (path, leaf), entry in zip(paths_leaves, entries):
            s = _resolved(entry, "out_shardings")
            if s is None:
                placed.append(leaf)
                continue
            ndim = len(getattr(leaf, "shape", ()))
            if isinstance(s, NamedSharding) and len(s.spec) > ndim:
                raise ValueError(
                    "One of pjit outputs with pytree key path result"
                    f"{tree_util.keystr(path)} is incompatible with its sharding annotation "
                    f"{s!r}: Sharding {s!r} is only valid for values of rank at least "
                    f"{len(s.spec)}, but was applied to a value of rank {ndim}.")
            if getattr(leaf, "sharding", None) == s:  # (an equivalent one is replaced)
                placed.append(leaf)
            else:
                placed.append(_place_tree(leaf, s, "jit out_shardings", typed=True))
        return tree_util.tree_unflatten(treedef, placed)


def _same(have: Any, want: Any, ndim: int) -> bool:
    """Whether two shardings place an array of rank ``ndim`` alike (``P('X')`` and
    ``P('X', None)`` do)."""
    if have is None:
        return False
    if have == want:
        return True
    try:
        return bool(have.is_equivalent_to(want, ndim))
    except (AttributeError, TypeError, ValueError):
        return False
