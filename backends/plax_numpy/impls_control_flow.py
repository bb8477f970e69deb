"""Kernels of the control-flow primitives (cond, while, scan): each evaluates its sub-jaxprs
by compiling them with this backend (once per body, cached weakly on the body) and running
them on the host buffers."""
from __future__ import annotations

import weakref

import numpy as np

from plax import lax
from plax_numpy.registry import impl

# body -> its executable; weak, so a body nobody holds frees its program
_compiled: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _backend_and_device():
    from plax.lowering import reference_backend
    backend = reference_backend()
    return backend, backend.devices()[0]


def run_body(closed, *bufs) -> list:
    """Runs the ClosedJaxpr ``closed`` on host buffers, returning its output buffers."""
    entry = _compiled.get(closed)
    if entry is None:
        from plax.transforms.call import compile_closed
        backend, device = _backend_and_device()
        entry = _compiled[closed] = compile_closed(closed, backend, device)
    outs = entry.executable(*entry.const_bufs, *bufs)
    return [np.asarray(o, a.dtype) for o, a in zip(outs, entry.out_avals)]


@impl(lax.cond_p)
def cond(index, *ops, branches):
    i = min(max(int(index), 0), len(branches) - 1)  # out of range clamps, as XLA does
    return run_body(branches[i], *ops)


@impl(lax.while_p)
def while_(*args, cond_jaxpr, body_jaxpr, cond_nconsts, body_nconsts):
    cconsts = args[:cond_nconsts]
    bconsts = args[cond_nconsts:cond_nconsts + body_nconsts]
    carry = list(args[cond_nconsts + body_nconsts:])
    while bool(run_body(cond_jaxpr, *cconsts, *carry)[0]):
        carry = run_body(body_jaxpr, *bconsts, *carry)
    return carry


@impl(lax.scan_p)
def scan(*args, jaxpr, length, reverse, unroll, num_consts, num_carry):
    consts = args[:num_consts]
    carry = list(args[num_consts:num_consts + num_carry])
    xs = args[num_consts + num_carry:]
    y_avals = jaxpr.out_avals[num_carry:]
    ys = [np.empty((length,) + tuple(a.shape), a.dtype) for a in y_avals]
    for i in (range(length - 1, -1, -1) if reverse else range(length)):
        outs = run_body(jaxpr, *consts, *carry, *[x[i] for x in xs])
        carry = outs[:num_carry]
        for y, o in zip(ys, outs[num_carry:]):
            y[i] = o
    return carry + ys
