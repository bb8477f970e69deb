"""Results of operations on arrays laid out over a mesh of ``Auto`` axes: the sharding JAX's
partitioner gives them, computed on the devices that hold them.

Over ``Auto`` axes the sharding is no part of the type; JAX's compiler picks the results'
layouts, and on the simple programs its docs show it keeps what the operands' layouts imply:
an elementwise result is split as its operands, a transpose permutes the split, a reduction
drops the reduced dimensions' axes, a product keeps its batch and free dimensions' axes (an
axis used twice, or only by contracted dimensions, is dropped: the partial products are
summed into a replicated result). ``jnp.sin(x).sharding`` and ``jit(f)(x).sharding`` name
the mesh and the spec JAX 0.10.2 prints. Where no rule applies the result is replicated
(``P()``).

The values are computed per device, as the explicit-sharding path computes them: eagerly,
an operation whose result block each device can compute from its own operand blocks
(elementwise operations, transposes, reductions over unsplit dimensions, ...) runs on every
device on its buffers; the others (a product contracting a split dimension, a reduction over
one, a reshape) and every ``jit`` program run as a partitioned program
(:mod:`plax.sharding_partition`, run by :mod:`plax.sharding_spmd`) whose values are laid out
as this module says, the devices exchanging blocks where the layouts call for it (partial
sums all-reduced, blocks all-gathered). Nothing is gathered onto one device. What the
partitioner cannot express runs on the first device and is then split, as before: a program
with an effect (a callback, a ref, a ``debug.print``), a block that does not divide its
dimension, or an argument committed to one device.

The propagation reuses the explicit-sharding rules of :mod:`plax.sharding_types`; an
ambiguity that explicit mode refuses (:class:`~plax.sharding_types.ShardingTypeError`)
resolves, as the partitioner does, to unsplit dimensions.
"""
from __future__ import annotations

import weakref
from typing import Any, Sequence

from plax.sharding import AxisType, NamedSharding, PartitionSpec
from plax.sharding_types import ShardingTypeError, _rule_for, dims_spec, spec_dims

__all__ = ["auto_mesh_of", "auto_sharding", "apply_auto", "auto_program", "place_jit_outputs"]


def auto_sharding(x: Any) -> NamedSharding | None:
    """The sharding of ``x`` when it is an array laid out over a mesh of ``Auto`` axes
    (several devices, no unreduced axes), else None."""
    s = getattr(x, "sharding", None) if hasattr(x, "_pieces") else None
    if isinstance(s, NamedSharding) and s.mesh.size > 1 and \
            AxisType.Explicit not in s.mesh.axis_types and not s.spec.unreduced:
        return s
    return None


def _split(x: Any) -> bool:
    s = auto_sharding(x)
    return s is not None and not s.is_fully_replicated


def auto_mesh_of(args: Sequence) -> Any:
    """The mesh of Auto axes an operand is split over (the first found), or None: also when
    an operand is committed to one device (the devices then disagree, which the one-device
    path reports) or when every operand is replicated (computed on the first device, where
    each has its copy, as before)."""
    from plax.array import Array
    if any(type(a) is Array and a._committed for a in args):
        return None
    for a in args:
        if _split(a):
            return a.sharding.mesh
    return None


def _in_dims(args: Sequence, avals: Sequence, mesh) -> list:
    out = []
    for a, aval in zip(args, avals):
        s = auto_sharding(a)
        ndim = len(aval.shape)
        out.append(spec_dims(s.spec, ndim) if s is not None and s.mesh == mesh
                   else ((),) * ndim)
    return out


def _dot_dims(in_dims, in_avals, params) -> tuple:
    (lc, rc), (lb, rb) = params["dimension_numbers"]
    lhs, rhs = in_dims
    nl, nr = len(in_avals[0].shape), len(in_avals[1].shape)
    lfree = [d for d in range(nl) if d not in lc and d not in lb]
    rfree = [d for d in range(nr) if d not in rc and d not in rb]
    wanted = [lhs[i] or rhs[j] for i, j in zip(lb, rb)] + [lhs[d] for d in lfree] + \
        [rhs[d] for d in rfree]
    used, out = set(), []
    for names in wanted:  # an axis splits one result dimension: the first that asks
        keep = tuple(a for a in names if a not in used)
        used.update(keep)
        out.append(keep)
    return tuple(out)


def _reshape_dims(dims: tuple, shape: tuple, new: tuple) -> tuple:
    """A reshape keeps the split of each group's major input dimension (its blocks stay
    contiguous in the merged dimension), on the group's first output dimension."""
    from plax.sharding_types import reshape_groups
    out = [()] * len(new)
    for gi, gj in reshape_groups(shape, new):
        if gi and gj:
            out[gj[0]] = dims[gi[0]]
    return tuple(out)


def _spec(dims: tuple):
    """The spec of ``dims`` without trailing unsplit dimensions (as JAX's partitioner
    reports them: ``P('X',)``, ``P()``)."""
    dims = list(dims)
    while dims and not dims[-1]:
        dims.pop()
    return dims_spec(tuple(dims))


def out_dims(prim, in_dims: list, in_avals: Sequence, params: dict, out_avals) -> list:
    """One dims tuple per result of ``prim`` (see the module docstring)."""
    many = prim.multiple_results
    outs = list(out_avals) if many else [out_avals]
    unsplit = [((),) * len(a.shape) for a in outs]
    if prim.name == "sharding_constraint":
        return [spec_dims(params["sharding"].spec, len(in_avals[0].shape))]
    if prim.name == "dot_general":
        return [_dot_dims(in_dims, in_avals, params)]
    if prim.name == "reshape" and len(in_dims) == 1:
        dims, shape, perm = in_dims[0], in_avals[0].shape, params.get("dimensions")
        if perm is not None:  # transposed first: the axes move with their dimensions
            dims, shape = tuple(dims[d] for d in perm), tuple(shape[d] for d in perm)
        return [_reshape_dims(dims, shape, tuple(params["new_sizes"]))]
    rule = _rule_for(prim)
    if rule is None or (prim.name.startswith("reduce_") and "axes" not in params):
        return unsplit
    try:
        dims = rule(prim, in_dims, in_avals, params)
    except (ShardingTypeError, ValueError, KeyError, IndexError):
        return unsplit
    return list(dims) if many else [dims]


def _fits(dims: tuple, shape: tuple, mesh) -> tuple:
    """``dims`` with the splits that do not divide their dimension dropped (unsplit)."""
    sizes = mesh.shape
    out = []
    for n, names in zip(shape, dims):
        k = 1
        for a in names:
            k *= sizes[a]
        out.append(names if k and n % k == 0 else ())
    return tuple(out) + ((),) * (len(shape) - len(out))


def _result_shardings(prim, args: list, params: dict, mesh):
    """``(in dims, [(result aval, its dims, its sharding)])`` of ``prim`` on ``args``."""
    avals = [a.aval for a in args]
    out_avals = prim.abstract_eval_cached(tuple(avals), params)
    outs = list(out_avals) if prim.multiple_results else [out_avals]
    in_dims = _in_dims(args, avals, mesh)
    dims = out_dims(prim, in_dims, avals, params, out_avals)
    fitted = [_fits(d, a.shape, mesh) for d, a in zip(dims, outs)]
    return in_dims, [(a, d, NamedSharding(mesh, _spec(d))) for a, d in zip(outs, fitted)]


def apply_auto(prim, args: list, params: dict):
    """``prim`` run eagerly on operands of which some are laid out over a mesh of Auto axes,
    on every device of the mesh, its results laid out as the partitioner would lay them
    out (see the module). NotImplemented when no operand is."""
    mesh = auto_mesh_of(args)
    if mesh is None:
        return NotImplemented
    from plax.array import from_device_buffers
    in_dims, results = _result_shardings(prim, args, params, mesh)
    bufs = _local_results(prim, args, params, in_dims, results)
    if bufs is None:
        bufs = _partitioned_results(prim, args, params, in_dims, results, mesh)
    if bufs is None:  # the partitioner cannot express it: on one device, then split
        from plax.sharding_types import _computed_then_split
        indices = [s.devices_indices_map(a.shape) for a, _, s in results]
        bufs = _computed_then_split(prim, args, params, [a for a, _, _ in results], indices)
    outs = [from_device_buffers(a.shape, a.dtype, s, b, weak_type=a.weak_type)
            for (a, _, s), b in zip(results, bufs)]
    return outs if prim.multiple_results else outs[0]


def _local_results(prim, args, params, in_dims, results) -> list | None:
    """Each device's blocks of the results computed from its own operand blocks (one
    ``{device: buffer}`` per result), or None when some device would need another's."""
    from plax.sharding_types import _local_operands, _reduction
    rule = _rule_for(prim)
    if rule is None or (rule is _reduction and "axes" not in params):
        return None
    first, dims, sharding = results[0]
    indices = sharding.devices_indices_map(first.shape)
    local = _local_operands(prim, rule, args, in_dims, dims, indices, params)
    if local is None:
        return None
    from plax.dispatch import kernel
    per_device = {d: kernel(d, prim)(*ops, **params) for d, ops in local.items()}
    if not prim.multiple_results:
        return [per_device]
    return [{d: b[k] for d, b in per_device.items()} for k in range(len(results))]


def _partitioned_results(prim, args, params, in_dims, results, mesh) -> list | None:
    """The results of ``prim`` as a one-equation partitioned program run on every device
    (partial products summed, blocks exchanged where the layouts call for it), one
    ``{device: buffer}`` per result; None when it does not partition."""
    from plax.sharding_spmd import run_equation
    return run_equation(prim, args, params, [a for a, _, _ in results], mesh,
                        layout=(in_dims, [d for _, d, _ in results]),
                        out_specs=[s.spec for _, _, s in results])


_MISSING = object()


def auto_program(closed, leaves: Sequence):
    """``(partitioned program, output specs)`` of ``jit``'s program ``closed`` called on
    ``leaves`` some of which are split over a mesh of Auto axes (cached per program and
    argument layouts), or None when no argument is, or the program does not partition
    (it then runs on one device, :func:`place_jit_outputs` laying its results out)."""
    mesh = auto_mesh_of(leaves)
    if mesh is None:
        return None
    entry = _cached_layout(closed, leaves, mesh)
    if entry[1] is _MISSING:
        from plax.sharding_partition import build_with_layout
        in_dims = entry[2]
        program = build_with_layout(closed, mesh, in_dims,
                                    lambda j, dims: _propagated(j, dims, mesh)[1])
        entry[1] = None if program is None else \
            (program, [_spec(d) for d in program.out_dims])
    return entry[1]


def _cached_layout(closed, leaves, mesh) -> list:
    """``[output specs, partitioned program (or _MISSING), input dims]`` for ``closed``
    called on arguments laid out as ``leaves`` (per program: dropped with it)."""
    in_dims = _in_dims(leaves, [v.aval for v in closed.jaxpr.invars], mesh)
    per_closed = _layouts.get(closed)
    if per_closed is None:
        per_closed = _layouts[closed] = {}
    key = (mesh, tuple(in_dims))
    entry = per_closed.get(key)
    if entry is None:  # the walk once per program and argument layouts
        outs = _propagated(closed.jaxpr, in_dims, mesh)[0]
        entry = per_closed[key] = [[_spec(d) for d in outs], _MISSING, in_dims]
    return entry


def place_jit_outputs(closed, leaves: Sequence, outs: list) -> list:
    """The outputs of a ``jit`` call some of whose arguments are laid out over a mesh of
    Auto axes and that ran on one device (see :func:`auto_program`), placed as the
    partitioner would lay them out (the shardings propagated through ``closed``'s
    equations); other outputs as they are."""
    mesh = auto_mesh_of(leaves)
    if mesh is None:
        return outs
    from plax.device import _shard_leaf
    specs = _cached_layout(closed, leaves, mesh)[0]
    placed = []
    for x, spec in zip(outs, specs):
        if getattr(x, "_pieces", None) is not None or not hasattr(x, "_device"):
            placed.append(x)  # laid out already (an explicit type), or not an array
            continue
        placed.append(_replicated(x, mesh) if not len(spec) else
                      _shard_leaf(x, NamedSharding(mesh, spec)))
    return placed


def _replicated(x, mesh):
    """``x`` (on one device) replicated over ``mesh``: its buffer on every device, moved
    (nothing is copied between CPU devices, which share host memory)."""
    from plax.array import _Piece, _sharded
    from plax.device import move_buffer
    sharding = _REPLICATED.get(mesh)
    if sharding is None:
        sharding = _REPLICATED[mesh] = NamedSharding(mesh, PartitionSpec())
    buf, src, whole = x._buf, x._device, (slice(None),) * x.ndim
    # every piece is the whole array: built directly (no index map to compute per call)
    pieces = [_Piece(d, whole, move_buffer(buf, src, d), d.backend)
              for d in sharding._device_assignment]
    return _sharded(x.aval, sharding, pieces, True)


_REPLICATED: dict = {}  # mesh -> NamedSharding(mesh, P())


#: ClosedJaxpr -> {(mesh, input dims): output specs}, dropped with the program
_layouts: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _propagated(jaxpr, in_dims: list, mesh) -> tuple:
    """``(dims of jaxpr's outputs, {variable: dims})`` given its inputs' dims (the rules
    applied in order; a split that does not divide its dimension dropped)."""
    from plax.core.jaxpr import Literal
    env: dict = dict(zip(jaxpr.invars, in_dims))

    def read(v):
        if isinstance(v, Literal) or v not in env:
            return ((),) * len(getattr(v.aval, "shape", ()))
        return env[v]

    for eqn in jaxpr.eqns:
        avals = [v.aval for v in eqn.invars]
        res = [v.aval for v in eqn.outvars]
        try:
            dims = out_dims(eqn.primitive, [read(v) for v in eqn.invars], avals, eqn.params,
                            res if eqn.primitive.multiple_results else res[0])
        except Exception:  # noqa: BLE001 -- a rule that does not fit: the result unsplit
            dims = [((),) * len(a.shape) for a in res]
        for v, d, a in zip(eqn.outvars, dims, res):
            env[v] = _fits(d, a.shape, mesh)
    return [read(v) for v in jaxpr.outvars], env


# ------------------------------------------------------------------ sharding constraints

def _constraint_primitive():
    """``sharding_constraint``: ``with_sharding_constraint`` of a traced value over a mesh
    of Auto axes (the identity on values). It shows in jaxprs as JAX prints it and steers
    the layout :func:`place_jit_outputs` gives; backends never see it (erased before
    compiling, as a value identity)."""
    from plax.core import registry
    from plax.core.passes import register_value_identity
    from plax.core.pretty_print import pp_param_rules
    from plax.core.primitive import Primitive
    from plax.transforms.jvp import Zero

    p = Primitive("sharding_constraint")
    p.def_abstract_eval(lambda x, **params: x)
    registry.register_rule("impl", p)(lambda x, **params: x)
    register_value_identity(p)

    def jvp(primals, tangents, **params):
        t = tangents[0]
        return p.bind(primals[0], **params), t if type(t) is Zero else p.bind(t, **params)

    def transpose(ct, x, **params):
        return [None] if type(ct) is Zero else [ct]

    # under vmap the constraint no longer names the batched value's dimensions: dropped
    registry.register_rule("jvp", p)(jvp)
    registry.register_rule("transpose", p)(transpose)
    registry.register_rule("batch", p)(lambda vals, dims, **params: (vals[0], dims[0]))

    def printed(params: dict) -> dict:
        mesh = params["sharding"].mesh.abstract_mesh
        return {"context_mesh": repr(mesh), "layout": "None",
                "sharding": repr(NamedSharding(mesh, params["sharding"].spec)),
                "unconstrained_dims": "frozenset({})"}

    pp_param_rules[p] = printed
    return p


sharding_constraint_p = _constraint_primitive()


def constrain(x: Any, sharding: NamedSharding) -> Any:
    """``with_sharding_constraint`` of a traced value over a mesh of Auto axes: the value,
    with the constraint staged (see :data:`sharding_constraint_p`)."""
    return sharding_constraint_p.bind(x, sharding=sharding)
