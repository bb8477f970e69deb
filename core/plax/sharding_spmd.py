"""``jit`` of an explicitly sharded program, run on each device on that device's blocks.

plax's ``jit`` does not partition programs in general (no GSPMD). One kind it does: a program
every equation of which keeps each device's block local -- elementwise operations whose
operands are split as their result (or are scalars), transposes, and reductions over
unsplit dimensions -- given arguments of explicit-sharded types. Such a program is
rewritten for one block (every value's type becomes its per-device block's, no equation's
parameters change: none of these primitives has a shape parameter), compiled once per
platform, and run once per device of the mesh on the buffers that device holds. Nothing is
gathered: the results are assembled from the per-device buffers with the shardings of their
types. Any other program (a ``dot_general``, a reshape, a reduction over a split dimension,
a gather, control flow, a constant array, ...) runs on one device as before, its results
placed as their types say.
"""
from __future__ import annotations

import math
from typing import Any

from plax.sharding import NamedSharding
from plax.sharding_types import (_cumulative, _elementwise, _reduction, _rule_for,
                                 _transpose, dims_spec, explicit_sharding, spec_dims)

_plans: dict = {}  # id(closed jaxpr) -> (closed jaxpr, plan or None)


def _local_shape(aval) -> tuple:
    s = aval.sharding
    if s is None:
        return tuple(aval.shape)
    sizes = s.mesh.shape
    return tuple(n // math.prod(sizes[a] for a in names)
                 for n, names in zip(aval.shape, spec_dims(s.spec, len(aval.shape))))


def _dims(aval) -> tuple:
    s = aval.sharding
    return ((),) * len(aval.shape) if s is None else spec_dims(s.spec, len(aval.shape))


def _blockwise(eqn, dims_of=None) -> bool:
    """Whether each device computes its block of ``eqn``'s result from its own blocks
    (``dims_of(var)``: how a value is split, by default as its type says)."""
    dims_of = dims_of or (lambda v: _dims(v.aval))
    prim = eqn.primitive
    if prim.multiple_results or eqn.params.get("jaxpr") is not None:
        return False
    rule = _rule_for(prim)
    out = eqn.outvars[0]
    ins = [v for v in eqn.invars if len(v.aval.shape)]
    if rule is _elementwise:
        return all(dims_of(v) == dims_of(out) for v in ins)
    if rule is _transpose:
        return True
    if rule is _cumulative:  # its rule refuses a split scanned axis
        return dims_of(ins[0]) == dims_of(out)
    if rule is _reduction and "axes" in eqn.params:
        return not any(dims_of(ins[0])[k] for k in eqn.params["axes"])
    return False


def _argument_blocks(jaxpr) -> dict:
    """``{input var: dims}`` for inputs less split than the elementwise results they take
    part in: each device is then given the finer block of its own block (cut, not moved)."""
    inputs = set(jaxpr.invars)
    demands: dict = {}
    for e in jaxpr.eqns:
        elementwise = _rule_for(e.primitive) is _elementwise and not e.primitive.multiple_results
        for v in e.invars:
            if v in inputs and len(v.aval.shape):  # every use: one way to cut the argument
                want = _dims(e.outvars[0].aval) if elementwise else _dims(v.aval)
                demands.setdefault(v, set()).add(want)
    finer = {}
    for v, wants in demands.items():
        want = next(iter(wants))
        if len(wants) == 1 and want != _dims(v.aval):
            if all(not own or own == w for own, w in zip(_dims(v.aval), want)):
                finer[v] = want
    return finer


def plan(closed) -> Any:
    """The per-block program of ``closed`` and its mesh, or None when it is not blockwise.

    Returns:
      ``(local_closed, mesh, arg_dims)``: ``local_closed`` has the same equations over the
      per-device block types; ``arg_dims`` says how each argument's blocks are cut.
    """
    hit = _plans.get(id(closed))
    if hit is not None and hit[0] is closed:
        return hit[1]
    result = _plan(closed)
    _plans[id(closed)] = (closed, result)
    return result


def _plan(closed):
    from plax.core.jaxpr import ClosedJaxpr, Jaxpr, JaxprEqn, Literal, Var
    from plax.core.shaped_array import ShapedArray
    jaxpr = closed.jaxpr
    if any(len(c.aval.shape) if hasattr(c, "aval") else len(getattr(c, "shape", ()))
           for c in closed.consts):
        return None  # a constant array would have to be cut per device
    meshes = {v.aval.sharding.mesh for v in jaxpr.invars + jaxpr.outvars
              if isinstance(v, Var) and explicit_sharding(v.aval) is not None}
    if len(meshes) != 1 or any(isinstance(v, Literal) for v in jaxpr.outvars):
        return None
    if not all(isinstance(v, Var) and explicit_sharding(v.aval) is not None
               for v in jaxpr.outvars):
        return None
    finer = _argument_blocks(jaxpr)
    mesh = next(iter(meshes))

    def dims_of(v):
        return finer[v] if v in finer else _dims(v.aval)

    if not all(_blockwise(e, dims_of) for e in jaxpr.eqns):
        return None
    new: dict = {}

    def local(v):
        if isinstance(v, Literal):
            return v
        if v not in new:
            a = v.aval
            if v in finer:
                a = ShapedArray(a.shape, a.dtype, a.weak_type,
                                sharding=NamedSharding(mesh, dims_spec(finer[v])))
            new[v] = Var(ShapedArray(_local_shape(a), a.dtype, a.weak_type))
        return new[v]

    eqns = [JaxprEqn(e.primitive, [local(v) for v in e.invars], [local(v) for v in e.outvars],
                     e.params) for e in jaxpr.eqns]
    body = Jaxpr([local(v) for v in jaxpr.constvars], [local(v) for v in jaxpr.invars],
                 [local(v) for v in jaxpr.outvars], eqns)
    arg_dims = [dims_of(v) for v in jaxpr.invars]
    return ClosedJaxpr(body, list(closed.consts)), mesh, arg_dims


_executables: dict = {}  # (id(local program), backend name, place) -> (program, executable)


def _executable(local_closed, backend, device):
    """The per-block program compiled for ``device`` (once per platform for CPU devices,
    which share host buffers; once per device otherwise)."""
    place = "cpu" if device.platform == "cpu" else device
    key = (id(local_closed), backend.name, place)
    hit = _executables.get(key)
    if hit is not None and hit[0] is local_closed:
        return hit[1]
    from plax.transforms.call import compile_closed
    exe = compile_closed(local_closed, backend, device)
    _executables[key] = (local_closed, exe)
    return exe


def run_partitioned(closed, leaves: list, backend) -> list | None:
    """Runs ``closed`` once per device of its mesh on each device's blocks of ``leaves``, or
    returns None when the program (or an argument) does not allow it (see the module)."""
    if not any(explicit_sharding(x) is not None for x in leaves):
        return None
    found = plan(closed)
    if found is None:
        return None
    local_closed, mesh, arg_dims = found
    from plax.array import Array, from_device_buffers
    from plax.sharding_types import _block
    devices = list(mesh.devices.flat)
    in_avals = closed.jaxpr.invars
    maps = [NamedSharding(mesh, dims_spec(d)).devices_indices_map(v.aval.shape)
            if len(v.aval.shape) else None for v, d in zip(in_avals, arg_dims)]
    per_device = []
    for d in devices:
        bufs = []
        for x, v, index in zip(leaves, in_avals, maps):
            if not isinstance(x, Array):
                return None  # a Python scalar or a host array: the general path handles it
            if len(v.aval.shape) == 0 and len(x.devices()) == 1:
                buf = x._buffer_on(d)
            elif explicit_sharding(x) is not None and _dims(x.aval) == _dims(v.aval) and \
                    x.sharding.mesh == mesh:
                buf = _block(x, d, index[d])  # its own block, or a part of it
            else:
                return None
            if buf is None:
                return None
            bufs.append(buf)
        per_device.append(bufs)
    outs = []
    for d, bufs in zip(devices, per_device):
        exe = _executable(local_closed, backend if backend.platform == d.platform
                          else d.backend, d)
        outs.append(exe.executable(*exe.const_bufs, *bufs))
    results = []
    for k, v in enumerate(closed.jaxpr.outvars):
        a = v.aval
        sharding = NamedSharding(mesh, a.sharding.spec)
        index = sharding.devices_indices_map(a.shape)
        results.append(from_device_buffers(a.shape, a.dtype, sharding,
                                           {d: o[k] for d, o in zip(devices, outs)
                                            if d in index},
                                           weak_type=a.weak_type))
    return results
