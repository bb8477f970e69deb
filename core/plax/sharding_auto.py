"""Results of operations on arrays laid out over a mesh of ``Auto`` axes: the sharding JAX's
partitioner gives them.

Over ``Auto`` axes the sharding is no part of the type; JAX's compiler picks the results'
layouts, and on the simple programs its docs show it keeps what the operands' layouts imply:
an elementwise result is split as its operands, a transpose permutes the split, a reduction
drops the reduced dimensions' axes, a product keeps its batch and free dimensions' axes (an
axis used twice, or only by contracted dimensions, is dropped: the partial products are
summed into a replicated result). plax computes the values as before (on one device) and
places the results so: ``jnp.sin(x).sharding`` and ``jit(f)(x).sharding`` name the mesh and
the spec JAX 0.10.2 prints. Where no rule applies the result is replicated (``P()``).

The propagation reuses the explicit-sharding rules of :mod:`plax.sharding_types`; an
ambiguity that explicit mode refuses (:class:`~plax.sharding_types.ShardingTypeError`)
resolves, as the partitioner does, to unsplit dimensions.
"""
from __future__ import annotations

import weakref
from typing import Any, Sequence

from plax.sharding import AxisType, NamedSharding, PartitionSpec
from plax.sharding_types import ShardingTypeError, _rule_for, dims_spec, spec_dims

__all__ = ["auto_mesh_of", "apply_auto", "place_jit_outputs"]


def _auto_sharding(x: Any) -> NamedSharding | None:
    s = getattr(x, "sharding", None) if hasattr(x, "_pieces") else None
    if isinstance(s, NamedSharding) and s.mesh.size > 1 and \
            AxisType.Explicit not in s.mesh.axis_types and not s.spec.unreduced:
        return s
    return None


def _split(x: Any) -> bool:
    s = _auto_sharding(x)
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
        s = _auto_sharding(a)
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
        return [_reshape_dims(in_dims[0], in_avals[0].shape, tuple(params["new_sizes"]))]
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


def apply_auto(prim, args: list, params: dict):
    """``prim`` run eagerly on operands of which some are laid out over a mesh of Auto axes:
    computed on the first device, its results placed as the partitioner would lay them
    out. NotImplemented when no operand is."""
    mesh = auto_mesh_of(args)
    if mesh is None:
        return NotImplemented
    from plax.array import from_device_buffers
    from plax.sharding_types import _computed_then_split
    avals = [a.aval for a in args]
    out_avals = prim.abstract_eval_cached(tuple(avals), params)
    many = prim.multiple_results
    outs = list(out_avals) if many else [out_avals]
    dims = out_dims(prim, _in_dims(args, avals, mesh), avals, params, out_avals)
    shardings = [NamedSharding(mesh, _spec(_fits(d, a.shape, mesh)))
                 for d, a in zip(dims, outs)]
    indices = [s.devices_indices_map(a.shape) for s, a in zip(shardings, outs)]
    bufs = _computed_then_split(prim, args, params, outs, indices)
    results = [from_device_buffers(a.shape, a.dtype, s, b, weak_type=a.weak_type)
               for a, s, b in zip(outs, shardings, bufs)]
    return results if many else results[0]


def place_jit_outputs(closed, leaves: Sequence, outs: list) -> list:
    """The outputs of a ``jit`` call some of whose arguments are laid out over a mesh of
    Auto axes, placed as the partitioner would lay them out (the shardings propagated
    through ``closed``'s equations); other outputs as they are."""
    mesh = auto_mesh_of(leaves)
    if mesh is None:
        return outs
    from plax.device import _shard_leaf
    in_dims = _in_dims(leaves, [v.aval for v in closed.jaxpr.invars], mesh)
    per_closed = _layouts.get(closed)
    if per_closed is None:
        per_closed = _layouts[closed] = {}
    key = (mesh, tuple(in_dims))
    specs = per_closed.get(key)
    if specs is None:  # the walk once per program and argument layouts
        specs = per_closed[key] = [_spec(d) for d in _propagated(closed.jaxpr, in_dims, mesh)]
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


def _propagated(jaxpr, in_dims: list, mesh) -> list:
    """The dims of ``jaxpr``'s outputs given its inputs' (the rules applied in order)."""
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
    return [read(v) for v in jaxpr.outvars]


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
