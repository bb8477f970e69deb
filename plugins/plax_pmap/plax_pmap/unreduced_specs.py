"""``shard_map`` of unreduced values: ``in_specs``/``out_specs`` with ``unreduced=`` axes.

An argument typed ``f32[8@X,8]{U:Y}`` holds partial sums: each device along ``Y`` keeps its
own part, and the value is their sum. JAX 0.10.2's ``shard_map`` hands each device its
partial block (the body sees it varying over ``Y``, so ``psum(u, 'Y')`` adds the parts) and
an output whose ``out_specs`` says ``unreduced={'Y'}`` keeps each device's block as its part.

plax runs this as the ordinary shard_map of a *stacked* value: the partial blocks along the
unreduced axes ``U`` become a leading dimension split over ``U`` (``P(U, 'X', None)``), which
each device's body unstacks (its block has that dimension of size 1); an unreduced output is
stacked the same way in the body and unstacked into an unreduced Array after. Eagerly the
stacking only re-labels each device's buffer (nothing moves and nothing is summed). In the
body each part is typed as JAX types it, ``f32[4,8]{V:X, U:Y}``, and what JAX refuses on it
raises JAX's errors (:mod:`plax_pmap.manual_unreduced`). Under
a trace (``jit`` of the shard_map) the partial sums are first added and laid out again as
parts (the value on the first device along ``U``, zeros on the others): the same sums, not
the same parts.
"""
from __future__ import annotations

from typing import Any, Callable

from plax import tree_util
from plax.core import varying as _varying
from plax.array import Array, from_device_buffers
from plax.core.trace import Tracer, get_aval
from plax.sharding import NamedSharding, PartitionSpec
from plax_pmap import vma as _vma
from plax_pmap.manual_unreduced import _not_varying_error, vary_unreduced_cast


def _is_spec(x: Any) -> bool:
    return x is None or isinstance(x, PartitionSpec)


def mentions_unreduced(*spec_trees: Any) -> bool:
    """Whether any PartitionSpec in the trees has unreduced axes.

    Example:
      >>> mentions_unreduced(PartitionSpec("x"), [PartitionSpec(None, unreduced={"y"})])
      True
    """
    return any(isinstance(s, PartitionSpec) and s.unreduced
               for tree in spec_trees if tree is not None
               for s in tree_util.tree_leaves(tree, is_leaf=_is_spec))


def _stacked_spec(spec: PartitionSpec, mesh) -> PartitionSpec:
    """``P(U, *partitions)``: the unreduced axes (in mesh order) as a leading entry."""
    axes = tuple(a for a in mesh.axis_names if a in spec.unreduced)
    lead = axes[0] if len(axes) == 1 else axes
    return PartitionSpec(lead, *spec.partitions)


def _stacked_tree(specs: Any, mesh) -> Any:
    return tree_util.tree_map(
        lambda s: _stacked_spec(s, mesh) if isinstance(s, PartitionSpec) and s.unreduced else s,
        specs, is_leaf=_is_spec)


def _unreduced_size(spec: PartitionSpec, mesh) -> int:
    n = 1
    for a in spec.unreduced:
        n *= mesh.shape[a]
    return n


def _stack(x: Any, spec: PartitionSpec, mesh) -> Any:
    """``x`` (typed unreduced as ``spec`` says) as its stacked parts, split ``P(U, ...)``."""
    stacked = _stacked_spec(spec, mesh)
    n = _unreduced_size(spec, mesh)
    if isinstance(x, Array) and not isinstance(x, Tracer) and hasattr(x, "_pieces"):
        # each device's buffer is its part: give it a leading dimension of 1, in place
        bufs = {p.device: p.buffer[None] for p in x._pieces}
        owners = {p.device: p.backend for p in x._pieces}
        return from_device_buffers((n,) + tuple(x.shape), x.dtype, NamedSharding(mesh, stacked),
                                   bufs, backends=owners, weak_type=x.aval.weak_type)
    import plax
    from plax.sharding import reshard
    jnp = plax.numpy
    whole = reshard(x, PartitionSpec(*spec.partitions))  # the partial sums added
    parts = jnp.concatenate([whole[None], jnp.zeros((n - 1,) + tuple(x.shape), x.dtype)])
    return reshard(parts, stacked)


def _unstack(r: Any, spec: PartitionSpec, mesh) -> Any:
    """A stacked output (``P(U, ...)``) as the unreduced Array ``spec`` types."""
    target = NamedSharding(mesh, spec)
    if isinstance(r, Array) and not isinstance(r, Tracer) and hasattr(r, "_pieces"):
        bufs = {p.device: p.buffer[0] for p in r._pieces}
        owners = {p.device: p.backend for p in r._pieces}
        return from_device_buffers(tuple(r.shape[1:]), r.dtype, target, bufs, backends=owners,
                                   weak_type=r.aval.weak_type)
    import plax
    from plax.sharding import reshard
    return reshard(plax.numpy.sum(r, axis=0), target)


def _check_varies(o: Any, spec: PartitionSpec) -> None:
    """JAX's ValueError for an output given unreduced axes it neither varies over nor is
    unreduced on already (every device's part would be the whole value)."""
    aval = get_aval(o)
    vma = getattr(aval, "vma", None)
    if vma is None:
        return
    held = vma | _varying.unreduced_of(aval)
    missing = tuple(a for a in sorted(spec.unreduced) if a not in held)
    if missing:
        raise _not_varying_error(missing, vma)


def _check_replicated(o: Any, spec: PartitionSpec, name: str, mesh) -> None:
    """The replication check of an unreduced output against the out_spec as written (the
    stacked spec the body's shard_map checks would name a dimension the user never wrote)."""
    aval = get_aval(o)
    if getattr(aval, "vma", None) is None:
        return
    differs = (aval.vma | _varying.unreduced_of(aval)) - spec.unreduced
    _vma.check_out_vmas([differs], [spec], [name], mesh.axis_names)


def _check_not_split(o: Any, spec: PartitionSpec) -> None:
    """JAX's ValueError for an unreduced output (``{U:Y}``) whose out_spec splits a dimension
    over its unreduced axes: the parts would have to be made varying first (JAX's ``pvary``,
    which refuses them)."""
    aval = get_aval(o)
    u = _varying.unreduced_of(aval)
    split = u & _vma.spec_axes(spec)
    if split:
        raise ValueError(f"pvary cannot accept args which are unreduced. Got "
                         f"{aval.str_short()} and axes={set(split)}")


def call(shard_map: Callable, f: Callable, args: tuple, in_specs: Any, out_specs: Any,
         mesh, options: dict) -> Any:
    """``shard_map(f, in_specs=, out_specs=, mesh=, **options)(*args)`` where a spec has
    unreduced axes, run as the shard_map of the stacked values (module docstring).

    ``in_specs`` is resolved per argument leaf already (inferred from the types where it was
    left out); ``out_specs`` is the caller's prefix tree."""
    leaves, treedef = tree_util.tree_flatten(tuple(args))
    stacked_leaves = [_stack(x, s, mesh) if s.unreduced else x for x, s in zip(leaves, in_specs)]
    stacked_in = [_stacked_spec(s, mesh) if s.unreduced else s for s in in_specs]
    unstack_in = [tuple(a for a in mesh.axis_names if a in s.unreduced) for s in in_specs]

    def body(*flat):
        # each device's part, typed unreduced as JAX types it ({V:X, U:Y}: manual_unreduced)
        flat = [vary_unreduced_cast(x[0], u) if u else x for x, u in zip(flat, unstack_in)]
        out = f(*tree_util.tree_unflatten(treedef, flat))
        out_leaves, out_tree = tree_util.tree_flatten(out)
        specs = _out_leaf_specs(out_specs, out)
        paths = [tree_util.keystr(tuple(p)) for p, _ in tree_util.tree_flatten_with_path(out)[0]]
        for o, s, path in zip(out_leaves, specs, paths):
            if s is not None and s.unreduced:
                _check_varies(o, s)
                _check_replicated(o, s, f"out{path}", mesh)
            elif s is not None:
                _check_not_split(o, s)
        return tree_util.tree_unflatten(out_tree, [
            o[None] if s is not None and s.unreduced else o
            for o, s in zip(out_leaves, specs)])

    mapped = shard_map(body, in_specs=tuple(stacked_in), out_specs=_stacked_tree(out_specs, mesh),
                       mesh=mesh, **options)
    result = mapped(*stacked_leaves)
    res_leaves, res_tree = tree_util.tree_flatten(result)
    specs = _out_leaf_specs(out_specs, result)
    return tree_util.tree_unflatten(res_tree, [
        _unstack(r, s, mesh) if s is not None and s.unreduced else r
        for r, s in zip(res_leaves, specs)])


def _out_leaf_specs(out_specs: Any, out: Any) -> list:
    """The out_specs entry of each leaf of ``out`` (``out_specs`` a prefix of it)."""
    specs: list = []
    tree_util.tree_map(lambda s, sub: specs.extend([s] * len(tree_util.tree_leaves(sub))),
                       out_specs, out, is_leaf=_is_spec)
    return specs
