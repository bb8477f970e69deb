"""Vectorisation: the batching trace behind ``vmap``, and helpers to write batching rules.

A batch tracer carries a value with one extra axis, its *batch dimension*
(``None`` when the value is the same for every batch member). A batching rule
has the signature ``rule(values, batch_dims, **params) -> (out, out_batch_dim)``
and computes the whole batch at once; at least one operand is batched when a
rule is called.
"""
from __future__ import annotations

import functools
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Hashable

import numpy as np

from plax.core import registry, varying as _varying
from plax.core.jaxpr import Jaxpr, sub_jaxprs
from plax.core.shaped_array import ShapedArray
from plax.core.trace import (Trace, Tracer, get_aval, register_level_rule,
                             register_trace_context, state as _state)
from plax.transforms.jvp import Zero

not_mapped = None
_batch_rules = registry.rule_table("batch")
# primitive -> params -> the axis names it refers to (collectives: psum, axis_index, ...)
_axis_primitives: dict = {}


def register_axis_primitive(primitive, axis_names: Callable[[dict], tuple]) -> None:
    """Declares that ``primitive`` refers to named axes (a collective such as ``psum``).

    A vmap level whose ``axis_name`` is among ``axis_names(params)`` then runs the
    primitive's batching rule even when no operand is batched at that level (``psum`` of an
    unbatched value multiplies it by the axis size; ``axis_index`` has no operand at all).
    The rule must be marked ``needs_axis_data`` to learn the level's name and size. Other
    primitives keep the fast path: an all-unbatched application just runs.

    Args:
      primitive: the Primitive.
      axis_names: maps the equation's params to the tuple of axis names it uses.
    """
    _axis_primitives[primitive] = axis_names
    _naming_primitives.add(primitive)


_NO_NAMES: frozenset = frozenset()
# Jaxpr -> the axis names its equations refer to (weakly keyed: a jaxpr is scanned once)
_jaxpr_names: "weakref.WeakKeyDictionary[Jaxpr, frozenset]" = weakref.WeakKeyDictionary()


_program_primitives: set = set()
# both kinds: the only primitives the level rule (_named_level) can move
_naming_primitives: set = set()


def register_program_primitive(primitive) -> None:
    """Declares that ``primitive`` holds programs (jaxprs) among its parameters (``jit``,
    ``cond``, ``scan``, ``while``, ``checkpoint``): it refers to the axis names its bodies'
    collectives refer to, so a ``vmap(axis_name=...)`` level binding one of them processes
    it even when no operand is batched there (see :func:`axis_names_of`)."""
    _program_primitives.add(primitive)
    _naming_primitives.add(primitive)


def axis_names_of(primitive, params: dict) -> frozenset:
    """The axis names an application of ``primitive`` refers to: a collective's own (see
    :func:`register_axis_primitive`), and for a primitive holding programs (``jit``,
    ``cond``, ``scan``, ``while``, ...; see :func:`register_program_primitive`) those of the
    collectives anywhere inside them.

    Example:
      >>> eqn = plax.make_jaxpr(lambda x: plax.jit(jnp.sin)(x))(1.0).jaxpr.eqns[0]
      >>> axis_names_of(eqn.primitive, eqn.params)  # a call without collectives
      frozenset()
    """
    names = _axis_primitives.get(primitive)
    if names is not None:
        return frozenset(names(params))
    if primitive not in _program_primitives:
        return _NO_NAMES
    out = _NO_NAMES
    for sub in sub_jaxprs(params):
        out = out | _names_in(sub)
    return out


def _names_in(jaxpr: Jaxpr) -> frozenset:
    try:
        return _jaxpr_names[jaxpr]
    except KeyError:
        pass
    out = _NO_NAMES
    for eqn in jaxpr.eqns:
        out = out | axis_names_of(eqn.primitive, eqn.params)
    _jaxpr_names[jaxpr] = out
    return out


def _named_level(primitive, params: dict, top):
    """The innermost ``vmap(axis_name=...)`` level above ``top`` whose name the application
    refers to (it must process it: ``psum(1.0, "i")`` is the axis size even though the
    operand is not batched), else ``top``. The level rule of :func:`bind_with_trace`."""
    names = None
    stack = _state.stack
    for level in range(len(stack) - 1, top.level, -1):
        m = stack[level]
        if m.trace_type is BatchTrace and m.payload.name is not None:
            if names is None:
                names = axis_names_of(primitive, params)
                if not names:
                    return top
            if m.payload.name in names:
                return m
    return top


#: primitives whose batching rule runs even when no operand is batched (``new_ref``: a ref
#: made inside a vmapped function is batched, so batched values can be written into it)
batch_of_unbatched: set = set()


@dataclass(frozen=True)
class AxisData:
    """What a vmap level knows about its axis: its size and its name (for collectives)."""

    size: int
    name: Hashable | None = None
    spmd_name: Any = None


def named_axes() -> tuple:
    """``((name, size), ...)`` of the active ``vmap(axis_name=...)`` levels, outermost first.

    Part of the trace context (:func:`plax.core.trace.register_trace_context`): a jitted
    function that uses a collective over one of these names is traced again under another
    size or name (the size is in its jaxpr: ``all_gather`` has it in its output's shape).
    Unnamed vmaps leave no mark, so their jits share one trace.
    """
    return tuple([(m.payload.name, m.payload.size) for m in _state.stack
                  if m.trace_type is BatchTrace and m.payload.name is not None])


class BatchTracer(Tracer):
    """A value with an extra batch axis at ``batch_dim`` (or ``None``: not batched)."""

    __slots__ = ("val", "batch_dim")

    def __init__(self, trace: "BatchTrace", val: Any, batch_dim: int | None):
        self._trace = trace
        self.val = val
        self.batch_dim = batch_dim

    @property
    def aval(self):
        aval = get_aval(self.val)
        if self.batch_dim is None:
            return aval
        shape = aval.shape[:self.batch_dim] + aval.shape[self.batch_dim + 1:]
        if type(aval) is not ShapedArray:  # a batched ref (plax.state) stays a ref
            return aval.update(shape=shape)
        typed = _varying.current()
        if typed is not None and self._trace.main.payload.name in typed:
            # shard_map's vmap formulation: a value batched along a mesh axis varies over it
            return ShapedArray(shape, aval.dtype, aval.weak_type,
                               aval.vma | {self._trace.main.payload.name})
        return ShapedArray(shape, aval.dtype, aval.weak_type, aval.vma)

    def __repr__(self) -> str:
        # as JAX prints it: the per-example type, then the type of the whole batch
        return f"VmapTracer(aval={self.aval}, batched={get_aval(self.val)})"

    def full_lower(self):
        if self.batch_dim is None:
            v = self.val
            return v.full_lower() if isinstance(v, Tracer) else v
        return self


class BatchTrace(Trace):
    """Runs each primitive's batching rule on (value, batch_dim) pairs."""

    __slots__ = ()

    @property
    def axis_data(self) -> AxisData:
        return self.main.payload

    @staticmethod
    def binds_names(payload: AxisData) -> bool:
        return payload.name is not None

    def pure(self, val: Any) -> BatchTracer:
        return BatchTracer(self, val, not_mapped)

    lift = pure

    def process_primitive(self, primitive, tracers, params):
        vals = [t.val for t in tracers]
        dims = [t.batch_dim for t in tracers]
        if all(d is None for d in dims) and primitive not in batch_of_unbatched and (
                self.axis_data.name is None
                or self.axis_data.name not in axis_names_of(primitive, params)):
            out = primitive.bind(*vals, **params)
            if primitive.multiple_results:
                return [BatchTracer(self, o, None) for o in out]
            return BatchTracer(self, out, None)
        rule = _batch_rules.get(primitive) or registry.get_rule("batch", primitive)
        rule_params = params
        if getattr(rule, "needs_axis_data", False):
            rule_params = dict(params, axis_data=self.axis_data)
        out, out_dim = rule(vals, dims, **rule_params)
        if primitive.multiple_results:
            if not isinstance(out_dim, (list, tuple)):
                out_dim = [out_dim] * len(out)
            typed = _varying.current()
            if typed is not None and self.axis_data.name in typed:
                out, out_dim = self._unbatch_invariant(primitive, tracers, params, out, out_dim)
            return [BatchTracer(self, o, d) for o, d in zip(out, out_dim)]
        return BatchTracer(self, out, out_dim)

    def _unbatch_invariant(self, primitive, tracers, params, out, out_dim):
        """shard_map's vmap formulation types a value batched along a mesh axis as varying
        over it. The rules of ``cond``/``scan``/``while``/``jit`` batch every output, also
        those equal along the batch; where the primitive's per-device type says an output
        does not vary over this axis, it is taken from the first member, unbatched, so the
        type stays what it is on one device."""
        if primitive not in _program_primitives:
            return out, out_dim
        name = self.axis_data.name
        typed = primitive.abstract_eval(*[t.aval for t in tracers], **params)
        from plax import lax
        out, out_dim = list(out), list(out_dim)
        for i, (a, d) in enumerate(zip(typed, out_dim)):
            if d is not None and name not in _varying.axes_of(a):
                out[i] = lax.index_in_dim(out[i], 0, d, keepdims=False)
                out_dim[i] = None
        return out, out_dim

    def process_custom_jvp_call(self, primitive, fun, jvp, tracers, **params):
        vals = [t.val for t in tracers]
        dims = [t.batch_dim for t in tracers]
        if all(d is None for d in dims):
            outs = primitive.bind_custom(fun, jvp, *vals, **params)
            return [BatchTracer(self, o, None) for o in outs]
        axis_data = self.axis_data
        fun_b = batch_flat_fun(fun, dims, axis_data)
        jvp_b = batch_flat_fun(jvp, dims + dims, axis_data)
        outs = primitive.bind_custom(fun_b, jvp_b, *vals, **params)
        return [BatchTracer(self, o, 0) for o in outs]

    def process_custom_vjp_call(self, primitive, fun, fwd, bwd, tracers, **params):
        vals = [t.val for t in tracers]
        dims = [t.batch_dim for t in tracers]
        if all(d is None for d in dims):
            outs = primitive.bind_custom(fun, fwd, bwd, *vals, **params)
            return [BatchTracer(self, o, None) for o in outs]
        axis_data = self.axis_data
        size = axis_data.size
        invariant = self._invariant_outputs(fun, tracers)
        fun_b = batch_flat_fun(fun, dims, axis_data)
        n_res: list = []

        def flat_fwd(*xs, **perturbed):
            outs, res = fwd(*xs, **perturbed)
            n_res[:] = [len(res)]
            return list(outs) + list(res)

        fwd_all = batch_flat_fun(flat_fwd, dims, axis_data)

        def fwd_b(*vals_in, **perturbed):
            # (symbolic_zeros: ``perturbed`` says which inputs have nonzero tangents)
            all_outs = (batch_flat_fun(functools.partial(flat_fwd, **perturbed), dims,
                                       axis_data) if perturbed else fwd_all)(*vals_in)
            n_out = len(all_outs) - n_res[0]
            return all_outs[:n_out], all_outs[n_out:]

        def bwd_b(res, cts):
            from plax import lax
            res, cts = list(res), list(cts)
            k = len(res)

            def per_member(*flat):  # (symbolic zeros are not arrays: returned as None)
                return [None if c is None or type(c) is Zero else c
                        for c in bwd(list(flat[:k]), list(flat[k:]))]

            c_dims = [0] * len(cts)
            if invariant is not None:
                # shard_map's vmap formulation (a typed mesh axis): an output equal on every
                # device holds its cotangent summed over the members (the transpose of taking
                # member 0); the rule gets it as JAX gives it, the same value on each device
                cts = [lax.reduce_sum(c, (0,)) if inv and c is not None else c
                       for c, inv in zip(cts, invariant)]
                c_dims = [None if inv else 0 for inv in invariant]
            cts_in = batch_flat_fun_dims(per_member, [0] * k + c_dims, axis_data)(*res, *cts)
            out = []
            for (ct, varies), d in zip(cts_in, dims):
                if ct is None:
                    out.append(None)
                elif d is not None:
                    out.append(move_axis_to(ct, 0 if varies else None, d, size))
                elif invariant is None:  # vmap: the members' cotangents add up
                    out.append(lax.reduce_sum(ct, (0,)) if varies
                               else lax.mul(ct, lax.convert_element_type(size, ct.dtype)))
                elif varies:
                    raise ValueError(
                        "Custom VJP bwd rule must produce an output with the same type as the "
                        "args tuple of the primal function: inside shard_map (check_vma=True) "
                        f"it produced a cotangent that varies over mesh axis "
                        f"{axis_data.name!r} for an argument that does not; reduce it "
                        f"(lax.psum over {axis_data.name!r}) in the bwd rule")
                else:
                    out.append(ct)  # equal on every device, as the argument is
            return out

        named_as(fwd_b, fwd)
        named_as(bwd_b, bwd)
        outs = primitive.bind_custom(fun_b, fwd_b, bwd_b, *vals, **params)
        if invariant is None:
            return [BatchTracer(self, o, 0) for o in outs]
        from plax import lax
        return [BatchTracer(self, lax.index_in_dim(o, 0, 0, keepdims=False), None) if inv
                else BatchTracer(self, o, 0) for o, inv in zip(outs, invariant)]

    def _invariant_outputs(self, fun, tracers) -> list | None:
        """In shard_map's vmap formulation (this level's axis a typed mesh axis): per output
        of ``fun``, whether its per-device type says it is equal on every device along the
        axis (a ``psum`` inside makes it so). None on an ordinary vmap level."""
        name = self.axis_data.name
        if name not in _varying.typed_axes():
            return None
        from plax.transforms.staging import trace_to_jaxpr
        closed, _ = trace_to_jaxpr(fun, [t.aval for t in tracers], "a custom_vjp function")
        return [name not in _varying.axes_of(a) for a in closed.out_avals]


def batch_flat_fun(fun: Callable, in_dims, axis_data: AxisData) -> Callable:
    """``fun`` (flat in, flat out) vectorised over ``in_dims``, outputs batched on axis 0.

    Each call opens a fresh batching level, so the result can be stored (in a staged
    custom_jvp/custom_vjp equation) and called after the current vmap has finished.
    """
    batched = batch_flat_fun_dims(fun, in_dims, axis_data)

    def on_axis_0(*vals):  # (an output equal for every member is broadcast)
        return [move_axis_to(v, 0 if b else None, 0, axis_data.size) for v, b in batched(*vals)]

    return named_as(on_axis_0, fun)


def named_as(wrapper: Callable, fun: Callable) -> Callable:
    """``wrapper`` renamed after ``fun``: a staged ``custom_jvp_call``/``custom_vjp_call``
    prints its rules by name, and JAX prints the user's rule's name under ``vmap``."""
    for attr in ("__name__", "__qualname__"):
        if hasattr(fun, attr):
            setattr(wrapper, attr, getattr(fun, attr))
    return wrapper


def batch_flat_fun_dims(fun: Callable, in_dims, axis_data: AxisData) -> Callable:
    """Like :func:`batch_flat_fun` (``in_dims`` may hold None for an unbatched input), but
    each output comes as ``(value, batched)``: the value batched on axis 0 if ``batched``
    (it differs between the members), else as every member has it; a None output as
    ``(None, False)``."""
    from plax.core.trace import new_main

    def batched(*vals):
        with new_main(BatchTrace, payload=axis_data) as main:
            trace = BatchTrace(main)
            outs = fun(*[v if v is None else BatchTracer(trace, v, d)
                         for v, d in zip(vals, in_dims)])
            result = []
            for o in outs:
                if o is None:
                    result.append((None, False))
                    continue
                o = trace.full_raise(o)
                if o.batch_dim is None:
                    result.append((o.val, False))
                else:
                    result.append((move_axis_to(o.val, o.batch_dim, 0, axis_data.size), True))
        return result

    return batched


# ------------------------------------------------------------------ rule helpers

def move_axis_to(x: Any, src: int | None, dst: int, size: int):
    """Moves batch axis ``src`` of ``x`` to ``dst``; if ``src`` is None, broadcasts a new axis."""
    from plax import lax
    aval = get_aval(x)
    if src is None:
        shape = list(aval.shape)
        shape.insert(dst, size)
        dims = tuple(i for i in range(len(shape)) if i != dst)
        return lax.broadcast_in_dim(x, tuple(shape), dims)
    if src == dst:
        return x
    perm = [i for i in range(aval.ndim) if i != src]
    perm.insert(dst, src)
    return lax.transpose(x, tuple(perm))


def bdim_at_front(x: Any, bdim: int | None, size: int):
    """``x`` with its batch axis first: moved there, or (not batched) broadcast along a new
    leading axis of ``size``, with the broadcast's dimensions as NumPy ints, as JAX's batcher
    computes them (its jaxprs print ``broadcast_dimensions=(np.int64(1),)``)."""
    if bdim is not None:
        return move_axis_to(x, bdim, 0, size)
    from plax import lax
    shape = get_aval(x).shape
    return lax.broadcast_in_dim_p.bind(x, shape=(size,) + tuple(shape),
                                       broadcast_dimensions=tuple(np.arange(1, len(shape) + 1)))


def axis_size(vals, dims) -> int:
    """The batch size, read off the first batched operand."""
    for v, d in zip(vals, dims):
        if d is not None:
            return get_aval(v).shape[d]
    raise ValueError("no batched operand")


def broadcast_batcher(primitive) -> Callable:
    """The batching rule of an n-ary elementwise primitive, as JAX's ``broadcast_batcher``.

    When every operand of rank > 0 is batched alike with one shape, the primitive applies as
    is. Otherwise each such operand gets its batch axis first: an unbatched one a size-1 axis
    (``f32[1,2]``, which the primitive broadcasts, instead of a copy per batch member), a
    batched one of lower rank trailing size-1 axes; rank-0 operands broadcast as they are.
    """

    def rule(vals, dims, **params):
        avals = [get_aval(v) for v in vals]
        first = next(i for i, d in enumerate(dims) if d is not None)
        dim, shape = dims[first], avals[first].shape
        if all(d == dim and a.shape == shape for a, d in zip(avals, dims) if a.shape):
            return primitive.bind(*vals, **params), dim
        from plax import lax
        moved = []
        for v, a, d in zip(vals, avals, dims):
            if not a.shape:
                moved.append(v)
            elif d is None:
                # bound with NumPy ints, as JAX's batcher passes them (jaxprs print
                # np.int64(1)); lax.broadcast_in_dim would make them Python ints
                moved.append(lax.broadcast_in_dim_p.bind(
                    v, shape=(1,) + a.shape,
                    broadcast_dimensions=tuple(np.arange(1, a.ndim + 1))))
            else:
                moved.append(move_axis_to(v, d, 0, a.shape[d]))
        rank = max(get_aval(v).ndim for v in moved)
        for i, (v, d) in enumerate(zip(moved, dims)):
            a = get_aval(v)
            if d is not None and a.ndim < rank:  # a batched scalar meets a larger operand
                moved[i] = lax.broadcast_in_dim(v, a.shape + (1,) * (rank - a.ndim),
                                                tuple(range(a.ndim)))
        return primitive.bind(*moved, **params), 0

    return rule


def defvectorized(primitive) -> None:
    """Registers the batching rule of a unary elementwise primitive: apply it as is."""

    def rule(vals, dims, **params):
        return primitive.bind(*vals, **params), dims[0]

    registry.register_rule("batch", primitive)(rule)


def defbroadcasting(primitive) -> None:
    """Registers :func:`broadcast_batcher` for an elementwise primitive."""
    registry.register_rule("batch", primitive)(broadcast_batcher(primitive))


register_trace_context(named_axes)


register_level_rule(_named_level, _naming_primitives)
