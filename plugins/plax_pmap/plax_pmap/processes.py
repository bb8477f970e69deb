"""Every process's value, as primitives with transform rules: how a ``pmap`` under ``grad``,
``jit`` or ``vmap`` runs across processes.

Under a transform plax-pmap computes a pmap as ``vmap(axis_name=...)`` over the mapped axis
(the collectives' batching rules act over the batch). Across processes each process holds
only its own devices' slices, so that vmap would see part of the axis. Instead each process
gathers every process's slices (``gather_processes_p``), computes the whole vmap, and keeps
its own devices' part of the results: the same values as a run on the devices, with the
work repeated in every process (the device runtime spreads it; see docs/multi_device.md).

``gather_processes_p`` concatenates every process's operand along ``axis`` in process order.
Its transpose, ``sum_own_block_p``, sums every process's cotangent and keeps this process's
block along ``axis``: the gradient in each process is that of the sum of every process's
function, as JAX's pmap gives (each process differentiates its own outputs, and psum's
transpose carries cotangents between devices). Both are linear; each is the other's
transpose. Their kernels exchange through the run's transport (MPI), so inside ``jit``
every backend runs them on the host; every process must reach them in the same order with
the same shapes, as any collective.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from plax import distributed, plugins
from plax.core import Primitive, registry
from plax.core.shaped_array import ShapedArray
from plax_pmap.collectives import _linear  # the collectives' rules for linear primitives

__all__ = ["gather_processes_p", "sum_own_block_p", "gather_processes", "own_block"]

gather_processes_p = Primitive("gather_processes")
sum_own_block_p = Primitive("sum_own_block")


def _run() -> tuple[int, int, Any, float]:
    from plax import process_count, process_index
    return process_index(), process_count(), distributed.transport(), \
        distributed.collective_timeout()


# ------------------------------------------------------------------ kernels (host)

def _gather_kernel(x, *, axis: int, count: int):
    _, pc, transport, timeout = _run()
    x = np.asarray(x)
    if pc == 1 or transport is None:
        return np.array(x, copy=True)
    parts = transport.allgather(np.ascontiguousarray(np.moveaxis(x, axis, 0)), timeout)
    return np.ascontiguousarray(np.moveaxis(parts, 0, axis))


def _sum_own_block_kernel(ct, *, axis: int, count: int):
    pi, pc, transport, timeout = _run()
    ct = np.asarray(ct)
    if pc == 1 or transport is None:
        return np.array(ct, copy=True)
    every = transport.allgather(np.ascontiguousarray(ct)[None], timeout)  # (processes, ...)
    k = ct.shape[axis] // count
    total = every.sum(axis=0, dtype=ct.dtype)
    return np.ascontiguousarray(np.take(total, np.arange(pi * k, (pi + 1) * k), axis=axis))


registry.register_rule("impl", gather_processes_p)(_gather_kernel)
registry.register_rule("impl", sum_own_block_p)(_sum_own_block_kernel)


_registered_with: list = [None]  # the plugin registry whose backends have the kernels


def _register_kernels() -> None:
    """The kernels in every CPU backend's table, so compiled programs run them (a backend
    without a kernel table falls back to the reference backend's). Done again for a new
    registry (``plax.plugins.reset()`` builds new backend objects)."""
    reg = plugins.registry()
    if _registered_with[0] is reg:
        return
    for backend in list(reg.backends.values()):
        if getattr(backend, "platform", None) != "cpu":
            continue
        for p, fn in ((gather_processes_p, _gather_kernel),
                      (sum_own_block_p, _sum_own_block_kernel)):
            try:
                backend.register_kernel(p, fn)
            except NotImplementedError:
                pass
    _registered_with[0] = reg


# ------------------------------------------------------------------ rules

@gather_processes_p.def_abstract_eval
def _gather_aval(x, *, axis, count):
    shape = list(x.shape)
    shape[axis] *= count
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


@sum_own_block_p.def_abstract_eval
def _sum_own_block_aval(x, *, axis, count):
    shape = list(x.shape)
    shape[axis] //= count
    return ShapedArray(tuple(shape), x.dtype, x.weak_type)


def _batch_rule(p):
    def batch(vals, dims, *, axis, count):
        x, = vals
        d, = dims
        # the operand's own axis ``axis`` sits one further right when the batch axis is left of it
        return p.bind(x, axis=axis + (d <= axis), count=count), d
    return batch


for _p, _transpose_p in ((gather_processes_p, sum_own_block_p),
                         (sum_own_block_p, gather_processes_p)):
    _linear(_p, lambda ct, x, _tp=_transpose_p, **params: _tp.bind(ct, **params))
    registry.register_rule("batch", _p)(_batch_rule(_p))


# ------------------------------------------------------------------ user-level

def gather_processes(x: Any, axis: int) -> Any:
    """Every process's ``x`` concatenated along ``axis`` in process order (``x`` itself in a
    run of one process). Differentiable: the cotangent of each process's block is the sum of
    every process's cotangent for it."""
    _, pc, _, _ = _run()
    if pc == 1:
        return x
    _register_kernels()
    return gather_processes_p.bind(x, axis=axis % max(np.ndim(x), 1), count=pc)


def own_block(x: Any, axis: int, size: int) -> Any:
    """This process's block of ``size`` along ``axis`` of a value gathered by
    :func:`gather_processes` (the same value in every process)."""
    from plax import lax
    pi, pc, _, _ = _run()
    if pc == 1:
        return x
    return lax.slice_in_dim(x, pi * size, (pi + 1) * size, axis=axis)
