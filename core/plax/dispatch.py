"""Eager dispatch: apply one primitive to concrete arrays now.

This is the path of every operation when no transform is active. It is kept
short because it is paid per operation: check operands (the cached abstract
eval does shapes and dtypes), pick the device and its backend, run the
backend's implementation, wrap the buffer. Primitives with an ``impl`` rule in
the registry (those defined in terms of other primitives) run that rule instead.

The common case -- every operand a plain plax Array on one device, none committed
elsewhere -- takes a fast path: one identity check per operand, one dictionary
lookup for the output abstract value, one for the backend's kernel.

Everything else takes the general path: host values are converted, operands committed to
different devices are an error, the others move to the chosen device through the backend
protocol (:func:`plax.device.move_buffer`). An operand held by several devices (a sharded
Array) counts as committed to the first device of its sharding and is gathered there: plax
runs each operation on one device until a multi-device plugin computes on the shards.
"""
from __future__ import annotations

import functools

from plax import errors
from plax.array import Array, _ShardedArray, from_host
from plax.core import registry, trace
from plax.core.trace import Tracer
from plax.device import default_device
from plax.float0 import apply_eagerly as float0_eagerly, is_float0_value
from plax.sharding import in_internal_eager_work as _in_internal_eager_work
from plax.sharding import mesh_maybe_set as _mesh_maybe_set
from plax.state.types import Ref

_impl_rules = registry.rule_table("impl")
_new_array = Array._new


def _incompatible(prim, args) -> ValueError:
    """The error for operands ``args`` of ``prim`` committed to two devices: JAX's (naming
    the two operands as its ``jax.numpy`` function's) when each lies on one device."""
    arrays = [a for a in args if a._committed]
    first = next(i for i, a in enumerate(args) if a._committed)
    second = next((i for i, a in enumerate(args) if a._committed and
                   a._device != args[first]._device), None)
    if second is not None and type(args[first]) is Array and type(args[second]) is Array:
        from plax.sharding_eager import eager_operand_name, incompatible_arguments
        return incompatible_arguments(
            *[(eager_operand_name(prim, i), args[i].aval, args[i]._device)
              for i in (first, second)])
    # An array on several devices is committed to its first one (where it is gathered).
    places = sorted({repr(a._device) if len(a.devices()) == 1 else
                     f"{a._device!r} (first of {sorted(map(repr, a.devices()))})" for a in arrays})
    return ValueError(f"Received incompatible devices for {prim.name}: arguments are committed to "
                      f"{places}. Move them to one device with plax.device_put(x, device) "
                      "first.")


def kernel(device, prim):
    """The callable ``(*buffers, **params)`` that runs ``prim`` on ``device`` (cached per device).

    A backend may hand out its kernel directly (``Backend.eager_impl``); a primitive holding
    sub-jaxprs (``cond``, ``while``, ``scan``) that it does not run itself (no kernel, or the
    reference table's host kernel) runs its bodies with this backend on ``device``
    (:mod:`plax.lowering.bodies`); otherwise the kernel goes
    through ``Backend.execute``.
    """
    table = device.__dict__.get("_kernels")
    if table is None:  # a Device subclass whose __init__ did not call Device.__init__
        table = device._kernels = {}
    fn = table.get(prim)
    if fn is None:
        backend = device.backend
        fn = backend.eager_impl(prim)
        if fn is None or getattr(fn, "host_body_kernel", False):
            fn = _eager_body_kernel(backend, device, prim) or fn
        if fn is None:
            fn = functools.partial(backend.execute, prim)
        table[prim] = fn
    return fn


def _eager_body_kernel(backend, device, prim):
    from plax.lowering.bodies import eager_body_kernel
    return eager_body_kernel(backend, device, prim)


def apply_primitive(prim, args, params):
    """Runs ``prim`` on concrete operands and returns Array(s)."""
    rule = _impl_rules.get(prim)
    if rule is not None:
        out = rule(*args, **params)
        if out is not NotImplemented:  # (a conditional rule declining: the backend's case)
            return out
    # JAX 0.10: results placed on the set mesh, its device check (not in plax's own eager
    # work, which takes the fast path below as it does with no mesh)
    if _mesh_maybe_set[0] and not _in_internal_eager_work():
        from plax.sharding_eager import apply_on_mesh
        return apply_on_mesh(prim, args, params, _apply_general)
    # Fast path: Arrays on one device, committed there or not (what _apply_general would
    # decide for them: that device, results committed if an operand is; refs' reads are
    # committed arrays, as in JAX 0.10)
    device = None
    committed = False
    for a in args:
        if type(a) is not Array or (device is not None and a._device is not device):
            return _apply_general(prim, args, params)
        device = a._device
        committed = committed or a._committed
    if device is None:
        return _apply_general(prim, args, params)
    avals = tuple([a.aval for a in args])
    key = (avals, tuple(params.items())) if params else avals
    try:
        out_aval = prim._aval_cache[key]
    except (KeyError, TypeError):
        out_aval = prim.abstract_eval_cached(avals, params)
    try:
        fn = device._kernels[prim]
    except (KeyError, AttributeError):
        fn = kernel(device, prim)
    out = fn(*[a._buf for a in args], **params)
    if prim.multiple_results:
        return [_new_array(b, av, device, committed) for b, av in zip(out, out_aval)]
    return _new_array(out, out_aval, device, committed)


def _apply_general(prim, args, params):
    """Operands that are host values, committed, on different devices, pending (made while
    tracing) or sharded."""
    device = None
    committed = False
    for a in args:
        if type(a) is not Array:
            if any(is_float0_value(x) for x in args):  # no backend holds float0 values
                return float0_eagerly(prim, args, params)
            if any(type(x) is Ref for x in args):
                from plax.state.discharge import apply_with_refs
                return apply_with_refs(prim, args, params)
            args = _to_arrays(prim, args)
            break
    for a in args:
        if type(a) is _ShardedArray and a._sharding_is_named():
            # Explicit sharding (sharding in types): computed where the shards are.
            from plax.sharding_types import apply_sharded
            out = apply_sharded(prim, args, params)
            if out is not NotImplemented:
                return out
            break
    for a in args:
        if a._committed:
            if committed and a._device != device:
                raise _incompatible(prim, args)
            device, committed = a._device, True
        elif device is None:
            device = a._device
    if device is None:
        device = default_device()
    avals = tuple([a.aval for a in args])
    out_aval = prim.abstract_eval_cached(avals, params)
    bufs = [a._buf if a._device == device else a._buffer_on(device) for a in args]
    out = kernel(device, prim)(*bufs, **params)
    if prim.multiple_results:
        return [_new_array(b, av, device, committed) for b, av in zip(out, out_aval)]
    return _new_array(out, out_aval, device, committed)


def _to_arrays(prim, args):
    out = []
    for a in args:
        if isinstance(a, Array):
            out.append(a)
        elif isinstance(a, Tracer):
            raise errors.UnexpectedTracerError(
                f"Encountered an unexpected tracer {a} as an operand of {prim.name} outside of "
                "the transformation that created it.")
        else:
            out.append(from_host(a))
    return out


trace.shared.eval_primitive = apply_primitive  # every thread's eager path
