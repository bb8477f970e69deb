"""Partitioning an explicitly sharded jaxpr: one program per device plus the communication
its types call for (what :func:`plax.jit` runs, :mod:`plax.sharding_spmd`).

Every value of the program is *held* by each device as a block (its ``dims``: the mesh axes
each dimension is split over; ``()`` is whole). Each equation is rewritten for the blocks:

* elementwise operations, transposes, ``squeeze``/``expand_dims``/``broadcast_in_dim``,
  ``concatenate``, sorts and cumulative scans along an unsplit axis compute their block from
  their operands' blocks (shape parameters become the blocks');
* ``dot_general`` multiplies the blocks: split batch and free dimensions give the result's
  block, a contracting dimension split over axes gives *partial* products that are summed
  over those axes (an all-reduce, or a reduce-scatter when the result is split there);
* a reduction over a split dimension reduces the block, then combines the devices' partial
  results (sum, product, max, min, and, or); ``argmax`` and ``argmin`` first make the reduced
  dimensions whole;
* a ``reshape`` whose split dimensions stay the leading factor of their group (``8@X,4 ->
  32@X``, ``32@X -> 8@X,4``) reshapes the blocks; other reshapes regroup the data first;
* slices, pads, reverses, dynamic slices and updates, gathers, scatters and FFTs compute
  their block where the dimensions they touch are whole, the others split as the result's
  type says (:mod:`plax.sharding_partition_indexing`);
* ``scan``, ``while`` (``fori_loop``) and ``cond`` whose bodies are themselves blockwise
  (every equation local, with no communication) run per device with per-block bodies; a
  ``scan`` or ``while`` whose body needs exchanges becomes a :class:`Loop`: every device
  runs the loop over its blocks, the body a partitioned program (the devices meeting at its
  exchanges, and agreeing on each decision); a ``cond`` whose branches do runs the
  partitioned branch its index picks;
* ``jit`` calls are inlined; anything else is computed whole on every device from its
  gathered operands (an all-gather), its result then cut to the block its type says.

When an operand is held otherwise than an equation wants, or a result is computed otherwise
than its type says, an :class:`~plax.sharding_exchange.Exchange` goes between. The equations
between two exchanges form one segment, compiled once for the block types.
"""
from __future__ import annotations

from typing import Any

from plax.core.effects import eqn_has_effects
from plax.core.jaxpr import ClosedJaxpr, DropVar, Jaxpr, JaxprEqn, Literal, Var
from plax.core.passes import call_param, dce, inline_calls
from plax.core.shaped_array import ShapedArray
from plax.sharding_exchange import Exchange, local_shape
from plax.sharding_partition_indexing import FORMS, dimensionwise_form
from plax.sharding_types import (ELEMENTWISE_LIKE, ShardingTypeError, _broadcast_in_dim,
                                 _concatenate, _cumulative, _dot_general, _expand_dims,
                                 _reduction, _reshape, _rule_for, _sort, _squeeze, _top_k,
                                 _transpose, explicit_sharding, reshape_groups, type_dims)
from plax.sharding_unreduced import unreduced_axes

#: the combination of partial results of a reduction over a split dimension
_COMBINE = {"reduce_sum": "add", "reduce_prod": "mul", "reduce_max": "max",
            "reduce_min": "min", "reduce_and": "and", "reduce_or": "or"}


class Unpartitionable(Exception):
    """The program cannot be partitioned (an effect, another mesh, an indivisible block)."""


class _NotLocal(Exception):
    """A loop or branch body would need communication: it runs whole instead."""


class Segment:
    """Equations run on every device between two exchanges: ``closed`` over block types,
    reading the local variables ``ins`` and writing ``outs``."""

    def __init__(self, eqns: list):
        self.eqns = eqns
        self.closed: ClosedJaxpr | None = None
        self.ins: list = []
        self.outs: list = []


class HostCall:
    """A host callback (``debug.print``, ``debug.callback``, ``io_callback``) run once per
    execution -- by the first device of the mesh, on the whole operands -- where JAX calls
    such a callback once, its operands gathered onto one device. ``eqn`` reads local
    variables holding the operands unsplit (each device's copy is gathered by the
    exchanges before it; only the first device's is read); its results (an
    ``io_callback``'s) are given whole to every device.

    ``per_device``: a ``debug.callback(partitioned=True)``, which every device calls on its
    own blocks (``eqn`` reads them as the operands' types lay them out), as JAX calls it
    on each device's local shards.

    Only callbacks without sub-programs qualify (:data:`HOST_CALLS`)."""

    def __init__(self, eqn: JaxprEqn, per_device: bool = False):
        self.eqn = eqn
        self.per_device = per_device
        self.ins = [v for v in eqn.invars if isinstance(v, Var)]
        self.outs = [v for v in eqn.outvars if not isinstance(v, DropVar)]


def is_partitioned_callback(eqn) -> bool:
    """Whether ``eqn`` is a ``debug.callback(..., partitioned=True)``: called on each
    device's local blocks rather than on the whole operands."""
    return bool(getattr(eqn.params.get("callback"), "partitioned", False))


#: the effectful primitives a partitioned program calls once, on the first device
HOST_CALLS = frozenset({"debug_callback", "io_callback"})


class Program:
    """A partitioned program: ``steps`` (segments and exchanges) over per-device local
    variables; ``invars``/``constvars``/``outvars`` are the local variables of the jaxpr's,
    ``in_dims`` how each argument is held, ``out_dims`` each result."""

    def __init__(self, mesh, steps, constvars, consts, invars, in_dims, outvars, out_dims,
                 partitioned: int):
        self.mesh = mesh
        self.steps = steps
        self.constvars, self.consts = constvars, consts
        self.invars, self.in_dims = invars, in_dims
        self.outvars, self.out_dims = outvars, out_dims
        self.partitioned = partitioned  # equations computed on split blocks
        self.executables: dict = {}
        self.const_bufs: dict = {}

    @property
    def exchanges(self) -> list:
        """The exchanges that move data between devices."""
        return [s for s in self.steps if isinstance(s, Exchange) and s.moves_data()]


def _mesh_of(closed: ClosedJaxpr):
    meshes = {s.mesh for v in closed.jaxpr.invars + list(closed.jaxpr.outvars)
              if (s := explicit_sharding(getattr(v, "aval", None))) is not None}
    return next(iter(meshes)) if len(meshes) == 1 else None


def _inlined(closed: ClosedJaxpr) -> ClosedJaxpr:
    """``closed`` with its ``jit`` calls (and custom-derivative calls) replaced by their
    bodies, so communication may go anywhere in them."""
    closed = inline_calls(closed)
    jaxpr = closed.jaxpr
    if not any(call_param(e) for e in jaxpr.eqns):
        return closed
    constvars, consts, eqns = list(jaxpr.constvars), list(closed.consts), []
    rename: dict = {}

    def sub(v):
        return rename.get(v, v) if isinstance(v, Var) else v

    for e in jaxpr.eqns:
        param = call_param(e)
        if param is None:
            eqns.append(JaxprEqn(e.primitive, [sub(v) for v in e.invars], e.outvars,
                                 e.params))
            continue
        body = _inlined(e.params[param])
        local = dict(zip(body.jaxpr.invars, [sub(v) for v in e.invars]))
        for v, c in zip(body.jaxpr.constvars, body.consts):
            local[v] = fresh = Var(v.aval)
            constvars.append(fresh)
            consts.append(c)
        for ie in body.jaxpr.eqns:
            outs = [v if isinstance(v, DropVar) else Var(v.aval) for v in ie.outvars]
            eqns.append(JaxprEqn(ie.primitive,
                                 [local.get(v, v) if isinstance(v, Var) else v
                                  for v in ie.invars], outs, ie.params))
            local.update(zip(ie.outvars, outs))
        for outer, inner in zip(e.outvars, body.jaxpr.outvars):
            rename[outer] = local.get(inner, inner) if isinstance(inner, Var) else inner
    outvars = [sub(v) for v in jaxpr.outvars]
    return ClosedJaxpr(Jaxpr(constvars, jaxpr.invars, outvars, eqns), consts)


def _unsplit(dims: tuple, axes) -> tuple:
    return tuple(() if k in axes else n for k, n in enumerate(dims))


def _reshape_operand_dims(shape: tuple, new: tuple, out: tuple) -> tuple | None:
    """How the operand must be held for each block to reshape into the result's block
    (split as ``out``): every group's split dimensions are its leading (not size-1) ones,
    on both sides, over the same axes. None when ``out`` is split otherwise."""
    groups = reshape_groups(shape, new)
    if not groups:
        return None
    want = [()] * len(shape)
    for gi, gj in groups:
        lead_j = [k for k in gj if new[k] != 1][:1]
        split_j = [k for k in gj if out[k]]
        if not split_j:
            continue
        if split_j != lead_j:
            return None
        lead_i = [k for k in gi if shape[k] != 1][:1]
        if not lead_i:
            return None
        want[lead_i[0]] = out[lead_j[0]]
    return tuple(want)


def _local_form(eqn, held, typed_dims, mesh):
    """``(operand dims wanted, [(result dims, partial axes, combine)], block params)`` of
    ``eqn`` computed on blocks, or None when it is computed whole. ``held(v)`` says how an
    operand is held, ``typed_dims(v)`` how a result is to be held."""
    prim, params = eqn.primitive, eqn.params
    name = prim.name
    if name in ("scan", "while", "cond"):
        return _control_form(eqn, mesh)
    if name in FORMS:
        return dimensionwise_form(eqn, typed_dims(eqn.outvars[0]), mesh)
    rule = _rule_for(prim)
    if rule is None:
        return None
    ins = [held(v) for v in eqn.invars]
    avals = [v.aval for v in eqn.invars]
    typed = [typed_dims(v) for v in eqn.outvars]
    if rule in ELEMENTWISE_LIKE:
        out = typed[0]
        # an operand's size-1 dimension broadcasts (lax's size-1 rule): held whole
        return ([tuple(() if n == 1 else d for n, d in zip(a.shape, out))
                 if len(a.shape) == len(out) else ((),) * len(a.shape) for a in avals],
                [(out, (), None)], params)
    if rule in (_transpose, _squeeze, _expand_dims):
        return [ins[0]], [(rule(prim, ins, avals, params), (), None)], params
    if rule is _reduction and "axes" in params and len(ins) == 1:
        axes = set(params["axes"])
        d0 = ins[0]
        split = tuple(a for k in sorted(axes) for a in d0[k])
        out = tuple(n for k, n in enumerate(d0) if k not in axes)
        if not split:
            return [d0], [(out, (), None)], params
        combine = _COMBINE.get(name)
        if combine is None:  # argmax/argmin: partial results do not combine
            return [_unsplit(d0, axes)], [(out, (), None)], params
        return [d0], [(out, split, combine)], params
    if rule in (_cumulative, _sort, _top_k):
        ndim = len(avals[0].shape)
        axis = params.get("axis", params.get("dimension", ndim - 1)) % max(ndim, 1)
        want = _unsplit(typed[0], {axis})
        return [want] * len(ins), [(want, (), None)] * len(typed), params
    if rule is _concatenate:
        want = _unsplit(typed[0], {params["dimension"]})
        return [want] * len(ins), [(want, (), None)], params
    if rule is _broadcast_in_dim and len(ins) == 1:
        shape, bdims = params["shape"], params["broadcast_dimensions"]
        out = typed[0]
        want = tuple(out[d] if avals[0].shape[k] == shape[d] else ()
                     for k, d in enumerate(bdims))
        block = local_shape(shape, out, mesh)
        if block is None:
            return None
        return [want], [(out, (), None)], dict(params, shape=block)
    if rule is _reshape and params.get("dimensions") is None:
        shape, new = avals[0].shape, tuple(params["new_sizes"])
        out = typed[0]
        want = _reshape_operand_dims(shape, new, out)
        block = local_shape(new, out, mesh)
        if want is None or block is None or local_shape(shape, want, mesh) is None:
            return None
        # (a block's reshape: the recorded sharding, of the whole, has no meaning there)
        block_params = {k: v for k, v in params.items() if k != "sharding"}
        return [want], [(out, (), None)], dict(block_params, new_sizes=block)
    if rule is _dot_general:
        return _dot_form(eqn, ins)
    return None


def _dot_form(eqn, ins):
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lw, rw = list(ins[0]), list(ins[1])
    for a, b in list(zip(lc, rc)) + list(zip(lb, rb)):
        lw[a] = rw[b] = lw[a] or rw[b]  # the other operand is cut to match
    free_l = [k for k in range(len(lw)) if k not in lc and k not in lb]
    free_r = [k for k in range(len(rw)) if k not in rc and k not in rb]

    def form():
        out = tuple([lw[a] for a in lb] + [lw[k] for k in free_l] + [rw[k] for k in free_r])
        partial = tuple(x for a in lc for x in lw[a])
        used = [x for names in out for x in names] + list(partial)
        return out, partial, len(used) == len(set(used))

    out, partial, ok = form()
    if not ok:  # both free dimensions over one axis: the right operand's made whole
        for k in free_r:
            rw[k] = ()
        out, partial, ok = form()
        if not ok:
            return None
    return ([tuple(lw), tuple(rw)], [(out, partial, "add" if partial else None)],
            eqn.params)


def _control_form(eqn, mesh):
    """A loop or a branch whose bodies run per device on blocks (None otherwise). An
    argument that is not carried (a constant, a scanned ``xs``, a branch operand) may be
    given to the body more finely cut than its type, as its equations want it."""
    p = eqn.params

    def dims(closed, which="invars"):
        return [type_dims(v.aval) for v in getattr(closed.jaxpr, which)]

    try:
        if eqn.primitive.name == "scan":
            nc, nk = p["num_consts"], p["num_carry"]
            n_in = nc + nk
            body, bd = _localized(p["jaxpr"], mesh, dims(p["jaxpr"]),
                                  free=set(range(nc)) | set(range(n_in, len(eqn.invars))))
            outs = dims(p["jaxpr"], "outvars")
            want = bd[:n_in] + [((),) + d for d in bd[n_in:]]
            res = outs[:nk] + [((),) + d for d in outs[nk:]]
            return want, [(d, (), None) for d in res], dict(p, jaxpr=body)
        if eqn.primitive.name == "while":
            nc, nb = p["cond_nconsts"], p["body_nconsts"]
            cond, cd = _localized(p["cond_jaxpr"], mesh, dims(p["cond_jaxpr"]),
                                  free=set(range(nc)))
            body, bd = _localized(p["body_jaxpr"], mesh, dims(p["body_jaxpr"]),
                                  free=set(range(nb)))
            if cd[nc:] != bd[nb:]:
                return None
            res = dims(p["body_jaxpr"], "outvars")
            return (cd[:nc] + bd, [(d, (), None) for d in res],
                    dict(p, cond_jaxpr=cond, body_jaxpr=body))
        if eqn.primitive.name == "cond":
            branches = p["branches"]
            if len({tuple(dims(b)) for b in branches}) != 1 or \
                    len({tuple(dims(b, "outvars")) for b in branches}) != 1:
                return None
            ops = dims(branches[0])
            for _ in range(len(ops) + 1):  # a branch wanting an operand finer: all again
                local = []
                for b in branches:
                    c, found = _localized(b, mesh, ops, free=set(range(len(ops))))
                    if found != ops:
                        ops = found
                        break
                    local.append(c)
                else:
                    index = ((),) * len(eqn.invars[0].aval.shape)
                    return ([index] + ops, [(d, (), None) for d in dims(branches[0], "outvars")],
                            dict(p, branches=tuple(local)))
            return None
    except _NotLocal:
        return None
    return None


class _Demand(Exception):
    """A body's equation wants its argument ``position`` held as ``dims``."""

    def __init__(self, position: int, dims: tuple):
        super().__init__(position, dims)
        self.position, self.dims = position, dims


def _finer(have: tuple, want: tuple) -> bool:
    return all(not h or h == w for h, w in zip(have, want))


def _localized(closed: ClosedJaxpr, mesh, in_dims: list, free: set) -> tuple:
    """``(body over block types, how its arguments are held)`` for a loop or branch body
    whose arguments come held as ``in_dims`` (those at positions in ``free`` may be cut
    more finely where its equations want them); raises _NotLocal when it needs
    communication (or a value held otherwise than its type)."""
    closed = _inlined(closed)
    j = closed.jaxpr
    in_dims = list(in_dims)
    for _ in range(len(in_dims) + 1):
        b = _Builder(mesh, top=False)
        b.inputs = {v: k for k, v in enumerate(j.invars) if k in free}
        constvars = [b.define(v, ((),) * len(v.aval.shape)) for v in j.constvars]
        invars = [b.define(v, d) for v, d in zip(j.invars, in_dims)]
        try:
            for e in j.eqns:
                b.eqn(e)
            outvars = [b.use(v, b.typed(v)) for v in j.outvars]
        except _Demand as demand:
            in_dims[demand.position] = demand.dims
            continue
        return (ClosedJaxpr(Jaxpr(constvars, invars, outvars, b.segment), list(closed.consts)),
                in_dims)
    raise _NotLocal


class _Builder:
    """Rewrites equations for blocks; at the top level (``top``) it adds exchanges where
    needed, in a body it refuses them (:class:`_NotLocal`)."""

    def __init__(self, mesh, top: bool, layout: dict | None = None):
        self.mesh, self.top = mesh, top
        self.layout = layout  # var -> dims, for values whose types carry no sharding (Auto)
        self.layouts: dict = {}  # var -> {dims: local var}
        self.primary: dict = {}  # var -> the dims its type says (or it was computed in)
        self.partial: dict = {}  # var -> the unreduced axes its blocks are partial sums over
        self.steps: list = []
        self.segment: list = []
        self.partitioned = 0
        self.inputs: dict = {}  # (in a body) arguments that may be cut finer -> position

    def typed(self, v) -> tuple:
        """How ``v`` is to be held: as its type says, or as the layout given says."""
        if self.layout is not None:
            return self.layout.get(v) or ((),) * len(getattr(v.aval, "shape", ()))
        s = explicit_sharding(getattr(v, "aval", None))
        if s is not None and s.mesh != self.mesh:
            raise Unpartitionable("a value on another mesh")
        return type_dims(v.aval)

    def typed_unreduced(self, v) -> frozenset:
        """The unreduced axes of ``v``'s type (``{U:Y}``): its blocks stay partial sums."""
        if self.layout is not None:
            return frozenset()
        return unreduced_axes(getattr(v, "aval", None))

    def _local_var(self, aval, dims, drop=False):
        shape = local_shape(tuple(aval.shape), dims, self.mesh)
        if shape is None:
            raise Unpartitionable("a block that does not divide")
        a = ShapedArray(shape, aval.dtype, aval.weak_type)
        return DropVar(a) if drop else Var(a)

    def define(self, v, dims) -> Var:
        lv = self._local_var(v.aval, dims)
        self.layouts[v] = {dims: lv}
        self.primary[v] = dims
        partial = self.typed_unreduced(v)
        if partial:
            if not self.top:
                raise _NotLocal
            self.partial[v] = partial
        return lv

    def held(self, v) -> tuple:
        if isinstance(v, Literal):
            return ((),) * len(v.aval.shape)
        return self.primary[v]

    def use(self, v, dims):
        if isinstance(v, Literal):
            if any(dims):
                raise Unpartitionable("a split literal")
            return v
        hit = self.layouts[v].get(dims)
        if hit is not None:
            return hit
        have = self.primary[v]
        if not self.top:
            if v in self.inputs and _finer(have, dims):
                raise _Demand(self.inputs[v], dims)
            raise _NotLocal
        lv = self._exchange(self.layouts[v][have], v.aval, have, dims,
                            keep=self.partial.get(v, frozenset()))
        self.layouts[v][dims] = lv
        return lv

    def _effect(self, e) -> None:
        """An effectful equation: a callback without results becomes a :class:`HostCall`
        (its operands gathered), a loop or branch holding one a :class:`Loop` whose body
        does; anything else (a callback with results, a ref, a callback inside a body run
        whole, on partial sums, or called per shard) makes the program run on one device."""
        if not self.top:
            raise Unpartitionable("an effect")
        name = e.primitive.name
        if name in ("scan", "while", "cond"):
            if _loop_step(self, e):
                return
            raise Unpartitionable("an effect")
        if name not in HOST_CALLS or any(
                v in self.partial for v in e.invars if isinstance(v, Var)):
            raise Unpartitionable("an effect")
        _check_ordered(e, self.mesh)
        per_device = is_partitioned_callback(e)
        # a partitioned callback reads each device's blocks as the types lay them out;
        # any other is given the whole operands (gathered by exchanges before it)
        ins = [self.use(v, self.typed(v) if per_device and isinstance(v, Var)
                        else ((),) * len(v.aval.shape)) for v in e.invars]
        whole = [((),) * len(v.aval.shape) for v in e.outvars]
        locals_ = [self._local_var(v.aval, d, isinstance(v, DropVar))
                   for v, d in zip(e.outvars, whole)]
        if self.segment:
            self.steps.append(Segment(self.segment))
            self.segment = []
        self.steps.append(HostCall(JaxprEqn(e.primitive, ins, locals_, e.params), per_device))
        for v, lv, d in zip(e.outvars, locals_, whole):  # whole on every device
            if isinstance(v, DropVar):
                continue
            self.layouts[v], self.primary[v] = {d: lv}, d
            typed = self.typed(v)
            if typed != d:
                self.layouts[v][typed] = self._exchange(lv, v.aval, d, typed)
                self.primary[v] = typed

    def _exchange(self, src, aval, src_dims, dst_dims, partial=(), combine=None,
                  keep=frozenset()) -> Var:
        dst = self._local_var(aval, dst_dims)
        step = Exchange(self.mesh, tuple(aval.shape), aval.dtype, src, dst, src_dims,
                        dst_dims, partial, combine, keep=tuple(sorted(keep)))
        if self.segment:
            self.steps.append(Segment(self.segment))
            self.segment = []
        self.steps.append(step)
        return dst

    def eqn(self, e) -> None:
        if eqn_has_effects(e):
            self._effect(e)
            return
        # partial sums in: the operations JAX allows on them are linear in them, so each
        # device's result from its partial blocks is its partial sum of the result
        carried = frozenset().union(*[self.partial.get(v, frozenset()) for v in e.invars
                                      if isinstance(v, Var)])
        if carried and e.primitive.name in ("scan", "while", "cond"):
            raise Unpartitionable("partial sums carried into a loop or branch")
        try:
            form = _local_form(e, self.held, self.typed, self.mesh)
        except (ShardingTypeError, KeyError, IndexError, TypeError):
            form = None
        if form is None and self.top and e.primitive.name in ("scan", "while", "cond") and \
                _loop_step(self, e):
            return
        if form is None:  # computed whole, from the gathered operands
            form = ([((),) * len(v.aval.shape) for v in e.invars],
                    [(((),) * len(v.aval.shape), (), None) for v in e.outvars], e.params)
        want, outs, params = form
        ins = [self.use(v, w) for v, w in zip(e.invars, want)]
        if any(any(w) for w in want):
            self.partitioned += 1
        locals_ = [self._local_var(v.aval, d, isinstance(v, DropVar))
                   for v, (d, _, _) in zip(e.outvars, outs)]
        self.segment.append(JaxprEqn(e.primitive, ins, locals_, params))
        for v, lv, (dims, partial, combine) in zip(e.outvars, locals_, outs):
            if isinstance(v, DropVar):
                continue
            typed = self.typed(v)
            kept = self.typed_unreduced(v)  # partial sums its type keeps unreduced
            if not kept <= carried | set(partial):
                raise Unpartitionable("a result unreduced over axes not summed on blocks")
            # summed now: the partial terms over axes the result's type does not keep
            summed = tuple(a for a in partial if a not in kept) + \
                tuple(sorted(carried - kept - set(partial)))
            if kept:
                self.partial[v] = kept
            if not summed and dims == typed:
                self.layouts[v], self.primary[v] = {dims: lv}, dims
                continue
            if not self.top:
                raise _NotLocal
            self.layouts[v] = {} if summed else {dims: lv}
            self.layouts[v][typed] = self._exchange(
                lv, v.aval, dims, typed, summed,
                (combine or "add") if summed else None, keep=kept)
            self.primary[v] = typed


def build(closed: ClosedJaxpr) -> Program | None:
    """The partitioned form of ``closed`` (a jaxpr whose inputs or outputs have explicit
    shardings on one mesh), or None when it has effects, several meshes, or nothing to
    compute on split blocks (it then runs on one device). A program with unreduced values
    (partial sums, ``{U:Y}``) always runs on every device: its partial sums stay there."""
    mesh = _mesh_of(closed)
    if mesh is None:
        return None
    from plax.state.discharge import jaxpr_has_refs
    if jaxpr_has_refs(closed):  # one ref per program, not one per device
        return None
    try:
        program = _program(closed, mesh)
    except Unpartitionable:
        return None
    if program.partitioned == 0 and not any(map(any, program.in_dims)) and \
            not _has_unreduced(closed):
        return None
    return program


def build_with_layout(closed: ClosedJaxpr, mesh, in_dims: list, layout_of) -> Program | None:
    """The partitioned form of ``closed`` whose arguments are held as ``in_dims`` on
    ``mesh`` and whose values' types carry no sharding (a mesh of ``Auto`` axes):
    ``layout_of(jaxpr, in_dims)`` says how each value of the (inlined) jaxpr is to be held,
    as the types do otherwise. None when the program does not partition (an effect, a ref,
    a block that does not divide): it then runs on one device."""
    from plax.state.discharge import jaxpr_has_refs
    if jaxpr_has_refs(closed):
        return None
    try:
        return _program(closed, mesh, list(in_dims), layout_of=layout_of)
    except Unpartitionable:
        return None


def _has_unreduced(closed: ClosedJaxpr) -> bool:
    """Whether an input or output type of ``closed`` has unreduced axes (``{U:Y}``)."""
    j = closed.jaxpr
    return any(unreduced_axes(getattr(v, "aval", None))
               for v in list(j.invars) + list(j.outvars))


def _program(closed: ClosedJaxpr, mesh, in_dims=None, out_dims=None,
             layout_of=None) -> Program:
    """``closed`` partitioned, its arguments held as ``in_dims`` and its results given as
    ``out_dims`` (by default: as their types say, or as ``layout_of(jaxpr, in_dims)``
    lays the values out). Raises Unpartitionable."""
    closed = _inlined(closed)
    j = dce(closed.jaxpr)  # what no result needs would only add exchanges
    layout = layout_of(j, list(in_dims)) if layout_of is not None else None
    b = _Builder(mesh, top=True, layout=layout)
    constvars = [b.define(v, ((),) * len(v.aval.shape)) for v in j.constvars]
    if in_dims is None:
        in_dims = [b.typed(v) for v in j.invars]
    invars = [b.define(v, d) for v, d in zip(j.invars, in_dims)]
    for e in j.eqns:
        b.eqn(e)
    if out_dims is None:
        out_dims = [b.typed(v) for v in j.outvars]
    outvars = [b.use(v, d) for v, d in zip(j.outvars, out_dims)]
    if b.segment:
        b.steps.append(Segment(b.segment))
    _finish_segments(b.steps, outvars)
    return Program(mesh, b.steps, constvars, list(closed.consts), invars, list(in_dims),
                   outvars, list(out_dims), b.partitioned)


class Loop:
    """A ``scan`` or ``while`` whose body needs exchanges: every device runs its iterations,
    each a partitioned :class:`Program` (``cond`` decides a while's next iteration, the
    devices following the first's decision); or a ``cond`` whose branches do (``body`` is
    then the list of the branches' programs, one picked alike on every device).
    ``ins``/``outs`` are the equation's local variables in
    the enclosing program; ``params`` the equation's."""

    def __init__(self, kind: str, body: Program, cond: Program | None, ins: list,
                 outs: list, params: dict):
        self.kind, self.body, self.cond = kind, body, cond
        self.ins, self.outs, self.params = ins, outs, params


def _check_ordered(e, mesh) -> None:
    """JAX 0.10.2's ValueError for an ordered debug callback (``debug.print``/``callback``
    with ``ordered=True``) in a program run on more than one device (an ordered
    ``io_callback`` runs, once, as JAX runs it on one device)."""
    if e.primitive.name != "debug_callback" or not e.params.get("ordered") or mesh.size <= 1:
        return
    raise ValueError("The following ordered effects are not supported for more than 1 "
                     "device: [OrderedDebugEffect]. Call it with ordered=False, or outside "
                     "the sharded program.")


def _loop_step(b: "_Builder", e) -> bool:
    """Adds ``e`` (a scan, while or cond) to ``b`` as a :class:`Loop` when its body
    partitions; False when it does not (it is then computed whole)."""
    p, mesh = e.params, b.mesh
    typed = [b.typed(v) for v in e.outvars]
    try:
        if e.primitive.name == "scan":
            nc, nk = p["num_consts"], p["num_carry"]
            body_j = p["jaxpr"].jaxpr
            dims = [type_dims(v.aval) for v in body_j.invars]
            outs = [type_dims(v.aval) for v in body_j.outvars]
            if outs[:nk] != dims[nc:nc + nk]:
                return False
            body = _program(p["jaxpr"], mesh, dims, outs)
            want = dims[:nc + nk] + [((),) + d for d in dims[nc + nk:]]
            res = outs[:nk] + [((),) + d for d in outs[nk:]]
            cond = None
        elif e.primitive.name == "while":
            nc, nb = p["cond_nconsts"], p["body_nconsts"]
            cd = [type_dims(v.aval) for v in p["cond_jaxpr"].jaxpr.invars]
            bd = [type_dims(v.aval) for v in p["body_jaxpr"].jaxpr.invars]
            if cd[nc:] != bd[nb:] or any(map(any, (type_dims(v.aval) for v in
                                                   p["cond_jaxpr"].jaxpr.outvars))):
                return False
            cond = _program(p["cond_jaxpr"], mesh, cd, [()])
            body = _program(p["body_jaxpr"], mesh, bd, bd[nb:])
            want, res = cd[:nc] + bd, bd[nb:]
        elif e.primitive.name == "cond":
            branches = p["branches"]
            ops = [type_dims(v.aval) for v in branches[0].jaxpr.invars]
            res = [type_dims(v.aval) for v in branches[0].jaxpr.outvars]
            if any([type_dims(v.aval) for v in b_.jaxpr.invars] != ops or
                   [type_dims(v.aval) for v in b_.jaxpr.outvars] != res for b_ in branches):
                return False
            programs = [_program(b_, mesh, ops, res) for b_ in branches]
            if not any(pr.partitioned for pr in programs):
                return False
            want = [((),) * len(e.invars[0].aval.shape)] + ops
            body, cond = programs, None
        else:
            return False
    except Unpartitionable:
        return False
    if e.primitive.name != "cond" and not body.partitioned and not (cond and cond.partitioned):
        return False
    ins = [b.use(v, w) for v, w in zip(e.invars, want)]
    outs_local = [b._local_var(v.aval, d, isinstance(v, DropVar)) for v, d in zip(e.outvars, res)]
    if b.segment:
        b.steps.append(Segment(b.segment))
        b.segment = []
    b.steps.append(Loop(e.primitive.name, body, cond, ins, outs_local, p))
    b.partitioned += 1
    for v, lv, d, t in zip(e.outvars, outs_local, res, typed):
        if isinstance(v, DropVar):
            continue
        b.layouts[v], b.primary[v] = {d: lv}, d
        if d != t:
            b.layouts[v][t] = b._exchange(lv, v.aval, d, t)
            b.primary[v] = t
    return True


def _finish_segments(steps: list, outvars: list) -> None:
    """Each segment's inputs (read, not written in it) and outputs (read later)."""
    live = {v for v in outvars if isinstance(v, Var)}
    for step in reversed(steps):
        if isinstance(step, Exchange):
            live.discard(step.dst)
            live.add(step.src)
            continue
        if isinstance(step, Loop):
            live.difference_update(step.outs)
            live.update(v for v in step.ins if isinstance(v, Var))
            continue
        if isinstance(step, HostCall):
            live.difference_update(step.outs)
            live.update(step.ins)
            continue
        written, read = set(), []
        for e in step.eqns:
            for v in e.invars:
                if isinstance(v, Var) and v not in written and v not in read:
                    read.append(v)
            written.update(e.outvars)
        step.outs = [v for e in step.eqns for v in e.outvars
                     if not isinstance(v, DropVar) and v in live]
        step.ins = read
        live = (live - written) | set(read)
        step.closed = ClosedJaxpr(Jaxpr([], step.ins, step.outs, step.eqns), [])


def describe(program: Any) -> list:
    """The steps of ``program`` in words (for tests and debugging): ``"segment: dot_general,
    ..."`` and ``"exchange: (('X',), ()) -> ((), ()) partial ('Y',)"``."""
    out = []
    for s in program.steps:
        if isinstance(s, Segment):
            out.append("segment: " + ", ".join(e.primitive.name for e in s.eqns))
        elif isinstance(s, Loop) and s.kind == "cond":
            out.append("cond on every device: [" + " | ".join(
                "; ".join(describe(b)) for b in s.body) + "]")
        elif isinstance(s, Loop):
            inner = describe(s.body) if s.cond is None else describe(s.cond) + describe(s.body)
            out.append(f"{s.kind} on every device: [" + "; ".join(inner) + "]")
        elif isinstance(s, HostCall):
            out.append(f"once on the first device: {s.eqn.primitive.name}"
                       + (" (results to every device)" if s.outs else ""))
        else:
            kind = "exchange" if s.moves_data() else "cut"
            extra = f" partial {s.partial} by {s.combine}" if s.partial else ""
            out.append(f"{kind}: {s.src_dims} -> {s.dst_dims}{extra}")
    return out
