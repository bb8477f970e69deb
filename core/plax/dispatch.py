"""Eager dispatch: apply one primitive to concrete arrays now.

This is the path of every operation when no transform is active. It is kept
short because it is paid per operation: check operands (the cached abstract
eval does shapes and dtypes), pick the device and its backend, run the
backend's implementation, wrap the buffer. Primitives with an ``impl`` rule in
the registry (those defined in terms of other primitives) run that rule instead.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from plax import errors
from plax.array import Array, from_host
from plax.core import registry, trace
from plax.core.trace import Tracer
from plax.devices import default_device, move_buffer

_impl_rules = registry.rule_table("impl")


def _incompatible(prim, devices) -> ValueError:
    return ValueError(f"Received incompatible devices for {prim.name}: arguments are committed to "
                      f"{sorted(set(map(repr, devices)))}. Move them to one device with "
                      "plax.device_put(x, device) first.")


def apply_primitive(prim, args, params):
    """Runs ``prim`` on concrete operands and returns Array(s)."""
    rule = _impl_rules.get(prim)
    if rule is not None:
        return rule(*args, **params)
    device = None
    committed = False
    for a in args:
        if type(a) is not Array:
            args = _to_arrays(prim, args)
            break
    for a in args:
        if a._committed:
            if committed and a._device != device:
                raise _incompatible(prim, [x._device for x in args if x._committed])
            device, committed = a._device, True
        elif device is None:
            device = a._device
    if device is None:
        device = default_device()
    avals = tuple([a.aval for a in args])
    out_aval = prim.abstract_eval_cached(avals, params)
    bufs = [a._buf if a._device == device else move_buffer(a._buf, a._device, device) for a in args]
    out = device.backend.execute(prim, *bufs, **params)
    if prim.multiple_results:
        return [Array._new(b, av, device, committed) for b, av in zip(out, out_aval)]
    return Array._new(out, out_aval, device, committed)


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


trace.state.eval_primitive = apply_primitive
