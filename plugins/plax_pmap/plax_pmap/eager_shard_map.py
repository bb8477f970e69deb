"""Eager ``shard_map``: the body runs operation by operation, as JAX runs it outside ``jit``.

Called with concrete arrays outside every transform, ``shard_map`` pushes a
:class:`ShardMapTrace`. Each value of the body is a :class:`ShardMapTracer` holding one block
per mesh device (an Array on that device) and typed, as in JAX, by the mesh axes it varies
over. So Python sees values while the body runs: ``print(x)`` prints every device's block
(``On cpu:0 at mesh coordinates (i,) = (0,):``, JAX's text), and ``jax.debug.print`` prints
once per distinct block, in mesh order.

How an operation runs:

* a local one (no collective in it) runs on each device's blocks, on that device;
* a debug callback runs once per coordinate of the mesh axes its operands vary over (the
  other devices hold the same values: JAX prints them once);
* a collective (or a call / control flow holding one) runs through the ``vmap`` formulation
  of a one-operation ``shard_map`` (:func:`plax_pmap.api._shard_map_vmap`), whose collectives'
  batching rules give it its meaning; its results' types come from tracing it.
"""
from __future__ import annotations

import contextlib
from typing import Any, Sequence

import numpy as np

import plax
from plax.array import Array
from plax.core import trace as _trace
from plax.core import varying as _varying
from plax.core.axis_env import axis_env, bound_frames
from plax.core.jaxpr import sub_jaxprs
from plax.core.shaped_array import ShapedArray
from plax.core.trace import Trace, Tracer, get_aval
from plax.lax.callbacks import debug_callback_p
from plax.sharding import Mesh, PartitionSpec
from plax.transforms.staging import trace_to_jaxpr
from plax_pmap.primitives import psum_p
from plax_pmap.runtime import _COLLECTIVE_SET, has_collective

__all__ = ["ShardMapTrace", "ShardMapTracer", "block_text"]


_SCALARS = frozenset({int, float, bool, complex})
_MAX_CONSTANTS = 256
# dtypes whose sum of a few blocks NumPy computes as the vmap formulation does
_SUMMED_DTYPES = frozenset(np.dtype(t) for t in ("float32", "float64", "int32", "int64",
                                                 "uint32", "uint64", "complex64", "complex128"))
# (type, value, devices) -> (the scalar as an Array, its block on each device)
_constants: dict = {}
# (primitive, params, block types, mesh shape, typed) -> the results' block types
_result_types: dict = {}


def _constant_key(val: Any, devices: list):
    """The key under which a scalar constant's blocks are kept (None: not kept). A scalar
    (the 2 of ``x * 2``, as Python gives it or as the operator made it an array) is put on
    the devices once per mesh: arrays are immutable, so every call may share the blocks.
    Keys hold the value's bytes (or repr): 0.0 and -0.0 compare equal but must not share."""
    if type(val) in _SCALARS:
        return (type(val), repr(val), tuple(devices))
    if isinstance(val, Array) and val.ndim == 0 and len(val.devices()) == 1:
        host = np.asarray(val)
        return ("array", host.dtype.str, val.aval.weak_type, host.tobytes(), tuple(devices))
    return None


class _Context:
    """What one eager shard_map call's trace knows: its mesh, the mesh's devices in flat
    order, and whether values are typed by their varying axes (``check_vma``)."""

    __slots__ = ("mesh", "devices", "typed")

    def __init__(self, mesh: Mesh, typed: bool):
        self.mesh = mesh
        self.devices = list(mesh.devices.flat)
        self.typed = typed


def block_text(mesh: Mesh, blocks: Sequence[Any]) -> str:
    """The per-device text JAX prints for a value inside an eager shard_map: each device's
    block after ``On cpu:0 at mesh coordinates (i, j,) = (0, 1):``, in mesh order.

    Args:
      mesh: the shard_map's mesh.
      blocks: one value per mesh device, in the mesh's flat device order.

    Returns:
      The text, the blocks separated by blank lines.

    Example:
      >>> print(block_text(plax.make_mesh((1,), ("i",)), [np.arange(2.)]))
      On cpu:0 at mesh coordinates (i,) = (0,):
      [0. 1.]
      <BLANKLINE>
    """
    names = f"({', '.join(map(str, mesh.axis_names))},)"
    return "\n".join(f"On {device} at mesh coordinates {names} = {idx}:\n{block}\n"
                     for (idx, device), block in zip(np.ndenumerate(mesh.devices), blocks))


class ShardMapTracer(Tracer):
    """A value of an eager shard_map body: one block per mesh device, typed by ``vma``."""

    __slots__ = ("blocks", "_aval")

    def __init__(self, trace: "ShardMapTrace", blocks: list, aval: ShapedArray):
        self._trace = trace
        self.blocks = blocks
        self._aval = aval

    @property
    def aval(self) -> ShapedArray:
        return self._aval

    def __str__(self) -> str:
        return block_text(self._trace.main.payload.mesh, self.blocks)

    __repr__ = __str__


@contextlib.contextmanager
def _outside_body():
    """Runs the block with no transform active, untyped and with no axis names bound: where
    the blocks themselves are computed."""
    frames = bound_frames()
    saved = frames[:]
    frames.clear()
    try:
        with _trace.eager_region(), _varying.typing(None):
            yield
    finally:
        frames[:] = saved


class ShardMapTrace(Trace):
    """The interpreter of an eager shard_map body (see the module docstring)."""

    __slots__ = ()

    @property
    def ctx(self) -> _Context:
        return self.main.payload

    def pure(self, val: Any) -> ShardMapTracer:
        if isinstance(val, Tracer):
            raise TypeError(f"a value of another transform ({val!r}) reached the body of an "
                            "eagerly run shard_map; apply that transform to the whole "
                            "shard_map instead")
        key = _constant_key(val, self.ctx.devices)
        hit = _constants.get(key) if key is not None else None
        if hit is not None:
            x, blocks = hit
        else:
            with _outside_body():
                x = plax.numpy.asarray(val)
                blocks = [plax.device_put(x, d) for d in self.ctx.devices]
            if key is not None:
                if len(_constants) >= _MAX_CONSTANTS:
                    _constants.clear()
                _constants[key] = (x, blocks)
        aval = get_aval(x)
        aval = ShapedArray(aval.shape, aval.dtype, aval.weak_type)  # no sharding inside
        return ShardMapTracer(self, blocks, aval)

    def process_primitive(self, primitive, tracers, params):
        ctx = self.ctx
        in_avals = [t.aval for t in tracers]
        crosses = primitive in _COLLECTIVE_SET or any(
            has_collective(j.jaxpr if hasattr(j, "jaxpr") else j) for j in sub_jaxprs(params))
        if crosses:
            out_avals = self._traced_avals(primitive, params, in_avals)
            per_device = self._summed_blocks(primitive, params, tracers)
            if per_device is None:
                per_device = self._run_on_mesh(primitive, params, tracers, out_avals)
        else:
            # an operand holding partial sums ({U:Y}): typed (JAX's errors) before it runs
            unreduced = ctx.typed and any(_varying.unreduced_of(a) for a in in_avals)
            if unreduced:
                out_avals = self._traced_avals(primitive, params, in_avals)
            if primitive is debug_callback_p:
                per_device = self._run_callback(primitive, params, tracers)
            else:
                per_device = self._run_locally(primitive, params, tracers)
            if unreduced:
                pass
            elif primitive in _varying._self_typed:
                out_avals = self._traced_avals(primitive, params, in_avals)
            else:  # an operation's result varies over its operands' axes
                vma = frozenset().union(*[_varying.axes_of(a) for a in in_avals])
                out_avals = [ShapedArray(y.shape, y.dtype, y.weak_type, vma)
                             for y in per_device[0]]
        outs = [ShardMapTracer(self, [per_device[r][k] for r in range(len(ctx.devices))], a)
                for k, a in enumerate(out_avals)]
        return outs if primitive.multiple_results else outs[0]

    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, **params):
        return fun(*tracers)

    def process_custom_vjp_call(self, primitive, fun, fwd, bwd, tracers, **params):
        return fun(*tracers)

    # -------------------------------------------------------------- types

    def _traced_avals(self, primitive, params, in_avals) -> list:
        """The results' block types, traced with the mesh axes bound and typed as the body
        is: collectives and primitives that type their own results say their varying axes."""
        ctx = self.ctx
        try:  # the same operation on the same types types its results the same way
            key = (primitive, tuple(sorted(params.items())), tuple(in_avals),
                   tuple(ctx.mesh.shape.items()), ctx.typed)
            hit = _result_types.get(key)
        except TypeError:  # unhashable parameters (a jaxpr held in a list, ...)
            key = hit = None
        if hit is not None:
            return list(hit)

        def one(*xs):
            out = primitive.bind(*xs, **params)
            return list(out) if primitive.multiple_results else [out]

        with axis_env(ctx.mesh.shape), _varying.typing(
                ctx.mesh.axis_names if ctx.typed else None):
            closed, _ = trace_to_jaxpr(one, in_avals, f"{primitive.name} in shard_map")
        if key is not None:
            if len(_result_types) >= _MAX_CONSTANTS:
                _result_types.clear()
            _result_types[key] = tuple(closed.out_avals)
        return list(closed.out_avals)

    # -------------------------------------------------------------- execution

    def _run_locally(self, primitive, params, tracers) -> list:
        out = []
        with _outside_body():
            for r, d in enumerate(self.ctx.devices):
                res = primitive.bind(*[t.blocks[r] for t in tracers], **params)
                res = list(res) if primitive.multiple_results else [res]
                out.append([_on(y, d) for y in res])
        return out

    def _run_callback(self, primitive, params, tracers) -> list:
        """As JAX 0.10.2 runs it eagerly: each operand's distinct blocks (those of the
        devices at coordinate 0 along the mesh axes it does not vary over; untyped: every
        device's), in mesh order, zipped to the shortest list, one call per tuple (so an
        operand varying over ``i`` beside one invariant prints once, beside one varying over
        ``j`` twice, and a callback without operands not at all). The callback has no
        results to give the devices."""
        ctx = self.ctx
        names = ctx.mesh.axis_names
        coords = list(np.ndindex(*ctx.mesh.devices.shape))
        picks = []
        for t in tracers:
            vma = _differs(t.aval) if ctx.typed else frozenset(names)
            picks.append([r for r, idx in enumerate(coords)
                          if not any(i and a not in vma for a, i in zip(names, idx))])
        results = []
        with _outside_body():
            for rows in zip(*picks):
                at = ctx.devices[rows[0]]  # the blocks meet on the first one's device
                res = primitive.bind(*[_on(t.blocks[r], at) for t, r in zip(tracers, rows)],
                                     **params)
                results = list(res) if primitive.multiple_results else [res]
        return [results for _ in ctx.devices]

    def _summed_blocks(self, primitive, params, tracers) -> list | None:
        """A ``psum`` over one mesh axis of a value varying over it, as the sum of the blocks
        along that axis (what its vmap formulation computes, without tracing it); None for
        any other case (:meth:`_run_on_mesh` computes it)."""
        ctx = self.ctx
        axes = params.get("axes")
        if primitive is not psum_p or len(tracers) != 1 or not isinstance(axes, tuple) or \
                len(axes) != 1 or axes[0] not in ctx.mesh.shape:
            return None
        t = tracers[0]
        name = axes[0]
        if t.aval.weak_type or np.dtype(t.aval.dtype) not in _SUMMED_DTYPES or \
                (ctx.typed and name not in _differs(t.aval)):
            return None
        names = ctx.mesh.axis_names
        k = names.index(name)
        coords = list(np.ndindex(*ctx.mesh.devices.shape))
        sums: dict = {}
        out = []
        with _outside_body():
            for r, (idx, d) in enumerate(zip(coords, ctx.devices)):
                group = idx[:k] + idx[k + 1:]
                total = sums.get(group)
                if total is None:
                    members = [np.asarray(t.blocks[q]) for q, c in enumerate(coords)
                               if c[:k] + c[k + 1:] == group]
                    total = sums[group] = np.sum(np.stack(members), axis=0,
                                                 dtype=members[0].dtype)
                out.append([plax.device_put(total, d)])
        return out

    def _run_on_mesh(self, primitive, params, tracers, out_avals) -> list:
        """The operation as a one-operation shard_map in its vmap formulation: each operand
        stacked over the devices it varies over (a leading dimension split by those axes),
        each result returned with a leading dimension split over all the mesh axes."""
        from plax_pmap.api import _shard_map_vmap
        ctx = self.ctx
        mesh, names = ctx.mesh, ctx.mesh.axis_names
        leaves, specs = [], []
        for t in tracers:
            vma = (_differs(t.aval) & frozenset(names)) if ctx.typed else frozenset(names)
            axes = tuple(a for a in names if a in vma)
            picked = [t.blocks[r] for r, (idx, _) in enumerate(np.ndenumerate(mesh.devices))
                      if not any(i and a not in vma for a, i in zip(names, idx))]
            leaves.append(np.stack([np.asarray(b) for b in picked]))
            specs.append(PartitionSpec(axes) if axes else PartitionSpec())
        dtypes_in = [t.aval for t in tracers]

        def body(*xs):
            res = primitive.bind(*[x[0] for x in xs], **params)
            res = list(res) if primitive.multiple_results else [res]
            return [y[None] for y in res]

        every = PartitionSpec(tuple(names))
        with _outside_body():
            args = [plax.numpy.asarray(x, dtype=a.dtype) for x, a in zip(leaves, dtypes_in)]
            outs = _shard_map_vmap(body, args, specs, mesh, [every] * len(out_avals), ctx.typed)
            hosts = [np.asarray(y) for y in outs]
            per_device = [[_on(plax.numpy.asarray(h[r], dtype=a.dtype), d)
                           for h, a in zip(hosts, out_avals)]
                          for r, d in enumerate(ctx.devices)]
        return per_device


def _differs(aval) -> frozenset:
    """The mesh axes along which a value's blocks differ: those it varies over and those
    its devices hold partial sums along (``{V:X, U:Y}``: both)."""
    return _varying.axes_of(aval) | _varying.unreduced_of(aval)


def _on(x, device):
    """``x`` (an Array) on ``device``: results of an operation with no operands (a
    constant made in the body) are made on the default device."""
    if isinstance(x, Array) and x.devices() == {device}:
        return x
    return plax.device_put(x, device)
