"""Unreduced arrays (JAX 0.10's ``P(..., unreduced={'Y'})``): partial sums held per device.

An array whose sharding's spec has ``unreduced`` axes is the *sum* of the blocks the devices
along those axes hold: ``jax.device_put(x, P('X', None, unreduced={'Y'}))`` leaves each
device its block of ``x`` where it held it before (or, from a host value, on the first device
along ``Y``) and zeros elsewhere, so that the sum over ``Y`` is ``x``. ``reshard`` to a spec
without them (and reading the value) sums the partial blocks. The operations JAX keeps
unreduced (``y + y``, ``jnp.sum``, ``.T``, ``astype``, ``jnp.where`` between unreduced cases)
give results typed ``{U:Y}`` too, each device computing from its own partial blocks where it
can (:func:`unreduced_result_axes`); the others raise JAX's errors
(:func:`check_unreduced_operands`). A ``reduced`` axis is a
replicated one whose type says so (``{R:Y}``): it is placed like any replicated axis.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["has_unreduced", "unreduced_axes", "place_unreduced", "summed_value",
           "check_unreduced_operands", "unreduced_result_axes", "with_unreduced"]


def has_unreduced(sharding: Any) -> bool:
    """Whether ``sharding`` is a NamedSharding whose spec has unreduced axes."""
    return bool(getattr(getattr(sharding, "spec", None), "unreduced", None))


def _coords(mesh) -> dict:
    """``{device: {axis: coordinate}}`` over the mesh."""
    names = mesh.axis_names
    return {mesh.devices[idx]: dict(zip(names, idx)) for idx in np.ndindex(*mesh.devices.shape)}


def _spec_axes(spec) -> set:
    out = set()
    for e in spec.partitions:
        out.update(() if e is None else e if isinstance(e, tuple) else (e,))
    return out


def place_unreduced(leaf: Any, sharding) -> Any:
    """``leaf`` (an Array or host value) laid out as ``sharding`` (with unreduced axes) says:
    each device holds ``leaf`` where it held it before, zeros elsewhere, and of the devices
    that held the same part only the first along the unreduced axes keeps it.

    Returns:
      The Array over ``sharding``'s devices.

    Raises:
      NotImplementedError: ``leaf`` is a host value and ``sharding`` splits no dimension
        (JAX 0.10.2's error there).
    """
    from plax.array import Array, _host_numpy, from_device_buffers
    from plax.sharding import NamedSharding, PartitionSpec
    mesh, spec = sharding.mesh, sharding.spec
    if not isinstance(leaf, Array) and not _spec_axes(spec):
        # JAX 0.10.2 lays a host value out through the sharding's device-to-index map,
        # which it refuses to build for a sharding that is all unreduced or replicated
        # (device_put(host, P(None, None, unreduced={'X'})) on a 1-D mesh)
        raise NotImplementedError(
            "device_indices_map doesn't work with unreduced. Please file a bug at "
            "https://github.com/jax-ml/jax/issues")
    plain = NamedSharding(mesh, PartitionSpec(*spec.partitions))
    target = plain.devices_indices_map(np.shape(leaf))
    if isinstance(leaf, Array):
        host = leaf._host_value()
        src = leaf.sharding
        source = src.devices_indices_map(host.shape) if isinstance(src, NamedSharding) and \
            src.mesh == mesh else None
        src_axes = _spec_axes(src.spec) if source is not None else set()
    else:
        host, _ = _host_numpy(leaf, None)
        source, src_axes = None, set()
    coords = _coords(mesh)
    # the unreduced axes along which the source held copies of the same part: only the
    # first device along them keeps its part (the others would count it again)
    copies = [a for a in spec.unreduced if a not in src_axes]
    bufs = {}
    for d, idx in target.items():
        block = np.zeros(host[idx].shape, host.dtype)
        if not any(coords[d][a] for a in copies):
            have = source[d] if source is not None else (slice(None),) * host.ndim
            region, local = _intersect(have, idx, host.shape)
            if region is not None:
                block[local] = host[region]
        bufs[d] = d.backend.put(block, d)
    return from_device_buffers(host.shape, host.dtype, sharding, bufs)


def _intersect(a: tuple, b: tuple, shape: tuple):
    """The part of index ``a`` inside index ``b`` (both of slices): the global index and
    its position inside ``b``'s block, or ``(None, None)`` when they do not meet."""
    glob, local = [], []
    for sa, sb, n in zip(a, b, shape):
        a0, a1, _ = sa.indices(n)
        b0, b1, _ = sb.indices(n)
        lo, hi = max(a0, b0), min(a1, b1)
        if lo >= hi and n:
            return None, None
        glob.append(slice(lo, hi))
        local.append(slice(lo - b0, hi - b0))
    return tuple(glob), tuple(local)


def summed_value(array) -> np.ndarray:
    """The value of an Array with unreduced axes: its devices' blocks summed over those
    axes (each part counted once along the others)."""
    sharding = array.sharding
    mesh, spec = sharding.mesh, sharding.spec
    coords = _coords(mesh)
    others = [a for a in mesh.axis_names if a not in spec.unreduced and a not in _spec_axes(spec)]
    out = np.zeros(array.shape, array.dtype)
    for p in array._pieces:
        if any(coords[p.device][a] for a in others):
            continue  # a replica of a part counted already
        out[p.index] += np.asarray(p.backend.to_host(p.buffer))
    return out


# Operations JAX 0.10.2 applies to unreduced operands (the sum of partial sums is the
# partial sums' sum; a dtype cast, a layout change or a selection keeps each part apart).
_LINEAR_IN_EACH = frozenset({"reduce_sum", "transpose", "convert_element_type", "copy",
                             "copy_p", "select_n", "broadcast_in_dim", "expand_dims",
                             "device_put", "sharding_constraint", "reshard"})
# Those whose sharding rule in JAX 0.10.2 unpacks the spec: its ValueError.
_UNPACKS_SPEC = frozenset({"reshape", "gather", "reduce_max", "reduce_min", "argmax",
                           "argmin", "squeeze"})


def unreduced_axes(aval) -> frozenset:
    """The unreduced axes of ``aval``'s sharding (``{U:Y}`` in its type), or an empty set."""
    return getattr(getattr(getattr(aval, "sharding", None), "spec", None), "unreduced",
                   None) or frozenset()


_unreduced = unreduced_axes


def _reduced(aval) -> frozenset:
    return getattr(getattr(getattr(aval, "sharding", None), "spec", None), "reduced",
                   None) or frozenset()


def check_unreduced_operands(prim, in_avals) -> None:
    """JAX 0.10.2's errors for ``prim`` applied to operands of which some are unreduced
    (typed ``{U:Y}``): ``add`` needs every operand unreduced over the same axes, ``mul``
    one operand reduced over the axes the other is unreduced on, ``dot_general`` none;
    elementwise functions have no rule.

    Raises:
      ShardingTypeError: ``add``/``mul``/``dot_general`` operands as above (reshard the
        unreduced operand to a spec without ``unreduced`` first).
      NotImplementedError: an operation JAX has no unreduced rule for.
      ValueError: an operation whose rule unpacks the spec (reshape, indexing, max).
    """
    from plax.sharding_types import ShardingTypeError
    sets = [_unreduced(a) for a in in_avals]
    if not any(sets):
        return
    name = prim.name
    if name in _LINEAR_IN_EACH:
        return
    from plax.transforms.call import CallPrimitive
    if isinstance(prim, CallPrimitive):
        return  # a nested jit: its body's equations were checked as they were traced
    if name in ("add", "add_any") and len(sets) == 2:
        if sets[0] == sets[1]:
            return
        side, other = ("lhs", "rhs") if sets[0] else ("rhs", "lhs")
        raise ShardingTypeError(
            f"{side} is unreduced while {other} is not. `add` operation does not allow this "
            f"because there will be implicit communication. Please reduce {side} via "
            f"`reshard` before calling `add`.")
    if name == "mul" and len(sets) == 2:
        if sets[0] and sets[1]:
            raise ShardingTypeError(
                f"lhs and rhs to `mul` cannot be unreduced since mul is bilinear. Got "
                f"lhs={sets[0]}, rhs={sets[1]}")
        lhs, rhs = (str(a) for a in in_avals)
        if sets[0] and not sets[0] <= _reduced(in_avals[1]):
            raise ShardingTypeError(
                "RHS should be reduced along the same axes LHS is unreduced on. Got "
                f"lhs={lhs} and rhs={rhs}")
        if sets[1] and not sets[1] <= _reduced(in_avals[0]):
            raise ShardingTypeError(
                "LHS should be reduced along the same axes RHS is unreduced on. Got "
                f"lhs={lhs} and rhs={rhs}")
        return
    if name == "dot_general":
        raise ShardingTypeError(
            f"lhs or rhs passed to dot_general cannot be unreduced. Got "
            f"lhs={in_avals[0]!r} and rhs={in_avals[1]!r}")
    if name == "debug_callback":
        typed = next(a for a, u in zip(in_avals, sets) if u)
        raise NotImplementedError(
            f"jax.debug.callback/print of a value typed unreduced ({typed}): its devices hold "
            "partial sums, which JAX 0.10.2 cannot hand to a callback (eagerly it raises "
            "NotImplementedError \"device_indices_map doesn't work with unreduced\"; under jit "
            "XLA aborts the process). Reshard the value to a spec without unreduced axes "
            "first (jax.reshard(x, P(...)) adds the parts), or call the callback inside "
            "shard_map, where each device sees its own part.")
    if name in _UNPACKS_SPEC:
        raise ValueError("Using *pspec is dangerous when PartitionSpec has non-empty "
                         "unreduced/reduced set. Please use *spec.partitions")
    raise NotImplementedError(f"unreduced rule for {name} is not implemented. Please file "
                              "an issue at https://github.com/jax-ml/jax/issues")


def unreduced_result_axes(prim, in_avals) -> frozenset:
    """The axes over which ``prim``'s result stays unreduced, as JAX 0.10.2 types it
    (``y + y``, ``jnp.sum(y)``, ``y.T``, ``y.astype(...)`` and ``jnp.where(p, y, y)`` of a
    ``{U:Y}`` operand are ``{U:Y}``): the operands' unreduced axes, for an operation that
    :func:`check_unreduced_operands` accepted (call it first). Empty when no operand is
    unreduced.

    Raises:
      TypeError: ``select_n`` (``jnp.where``) choosing between cases unreduced over
        different axes (reshard them to one spec first).
    """
    sets = [_unreduced(a) for a in in_avals]
    if not any(sets):
        return frozenset()
    if prim.name == "select_n":
        cases = sets[1:]  # the predicate chooses; the cases are what is summed
        if any(c != cases[0] for c in cases):
            raise TypeError(
                f"select_n: the cases are unreduced over different axes "
                f"({', '.join(sorted(map(str, map(set, cases))))}); JAX cannot type the "
                "result. Reshard them to one spec (with the same unreduced axes, or none) "
                "first.")
        return cases[0]
    return frozenset().union(*sets)


def with_unreduced(sharding, axes: frozenset):
    """``sharding`` (a NamedSharding) with ``axes`` as its spec's unreduced axes."""
    if not axes:
        return sharding
    from plax.sharding import NamedSharding, PartitionSpec
    spec = sharding.spec
    return NamedSharding(sharding.mesh, PartitionSpec(*spec.partitions, unreduced=set(axes),
                                                      reduced=set(spec.reduced or ())))
