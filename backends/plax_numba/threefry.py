"""Native ``threefry2x32``: the Threefry-2x32 hash (20 rounds) as ``numba.njit`` loops
(:mod:`plax_numba.threefry_kernels`), bit-identical to the reference kernel
(``plax_numpy.impls_random``) and to JAX.

This module imports neither numba nor the kernels until one is compiled or loaded
(:func:`precompile`) or run (:func:`threefry2x32`): a program holding a ``threefry2x32``
equation is built, and runs on the reference kernel until it is hot, without numba.

Tiering compiles the kernels like a cluster's (:mod:`plax_numba.tiered`): on the background
thread, :func:`precompile` sends the compilation to a compile worker
(:mod:`plax_numba.compile_worker`), which writes numba's disk cache, and this process only
loads the machine code; kernels already in the disk cache (:func:`on_disk`) load at once.

Each of the four operands is a ``uint32`` scalar (a rank-0 operand, broadcast) or a flat
C-contiguous ``uint32`` array of the output's size (the primitive allows equal shapes or
rank 0). Above :data:`PARALLEL_MIN` elements the work is split over numba's threads.
"""
from __future__ import annotations

import os

import numpy as np

_U32 = np.uint32

#: Below this many elements one thread hashes everything (thread start-up costs more).
PARALLEL_MIN = 1 << 16

_KERNELS_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "threefry_kernels.py")


def _kernels():
    """The kernels' module (imports numba the first time)."""
    from plax_numba import threefry_kernels
    return threefry_kernels


def _operand(a, shape, n):
    """A uint32 scalar for a rank-0 operand, else a flat C-contiguous uint32 array of n."""
    a = np.asarray(a)
    if a.dtype != _U32:
        a = a.astype(_U32)
    if a.ndim == 0 or a.size == 1 and n != 1 and a.shape != shape:
        return _U32(a.reshape(())[()]) if a.ndim == 0 else _U32(a.reshape(-1)[0])
    if a.size and not any(a.strides):  # a broadcast scalar (broadcast_in_dim's view): no copy
        return _U32(a.flat[0])
    if a.shape != shape:
        a = np.broadcast_to(a, shape)
    return np.ascontiguousarray(a).reshape(n)


def signature(ranks, parallel=False):
    """The numba signature of the kernel for operands of these ranks (0: scalar)."""
    import numba
    from numba import types
    u32 = numba.uint32
    arr = types.Array(u32, 1, "C")
    return tuple(u32 if r == 0 else arr for r in ranks) + (arr, arr)


def _marker(ranks) -> str:
    from plax_numba import cache
    return cache.module_marker(_KERNELS_FILE, tuple(ranks))


def on_disk(ranks) -> bool:
    """Whether both kernels for operands of ``ranks`` were compiled into numba's disk cache
    (by any process): a file test, no numba import. A hint, as for generated kernels
    (:func:`plax_numba.cache.on_disk`)."""
    return os.path.exists(_marker(ranks))


def compile_here(ranks, directory: str | None = None) -> None:
    """Compiles (or loads from numba's disk cache) both kernels for operands of ``ranks`` in
    this process, and marks them as on disk (:func:`on_disk`) in the kernel cache
    ``directory`` (None: this process's). What a compile worker runs."""
    from plax_numba import cache
    cache.use_cache_dir(directory)
    kernels, sig = _kernels(), signature(ranks)
    kernels.hash_serial.compile(sig)
    kernels.hash_parallel.compile(sig)
    cache.mark(_marker(ranks))


def precompile(ranks) -> None:
    """Makes both kernels for operands of ``ranks`` ready in this process.

    On tiering's background thread (:func:`plax_numba.tiered.compiles_in_worker`) a compile
    worker compiles them (unless they are on disk) while this process sets numba up, and
    they load here from the disk cache; elsewhere they compile (or load) here. Raises the
    compilation's error (:class:`plax_numba.compile_worker.WorkerCompileError` from a
    worker).

    Args:
      ranks: the ranks of the four operands (0: a scalar).

    Example::

      precompile((0, 0, 1, 1))   # scalar key words, counter arrays
    """
    from plax_numba import cache, compile_worker, tiered
    ranks = tuple(ranks)
    if not tiered.compiles_in_worker() and not on_disk(ranks):
        compile_here(ranks)
        return
    job = (None if on_disk(ranks)
           else compile_worker.submit(compile_here, ranks, cache.cache_dir()))
    with tiered.yielding_gil():
        cache.prepare_numba()  # (while the worker compiles)
    if job is not None:
        job.result()
    with tiered.yielding_gil():
        kernels, sig = _kernels(), signature(ranks)
        for kernel, parallel in ((kernels.hash_serial, False), (kernels.hash_parallel, True)):
            cache.load_dispatcher(kernel, sig, parallel)


def threefry2x32(k1, k2, x1, x2):
    """The ``threefry2x32`` kernel: ``(y1, y2)`` of the broadcast shape, bit-identical to the
    reference kernel.

    Args:
      k1, k2: the key words (uint32, rank 0 or the output's shape).
      x1, x2: the counter words (uint32, rank 0 or the output's shape).

    Returns:
      The two hashed words, uint32 arrays of the broadcast shape.

    Example::

      y1, y2 = threefry2x32(np.uint32(0), np.uint32(42), np.arange(4, dtype=np.uint32),
                            np.zeros(4, np.uint32))
    """
    arrays = [np.asarray(a) for a in (k1, k2, x1, x2)]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    n = 1
    for d in shape:
        n *= d
    ops = [_operand(a, shape, n) for a in arrays]
    out0 = np.empty(n, _U32)
    out1 = np.empty(n, _U32)
    if n:
        kernels = _kernels()
        (kernels.hash_parallel if n >= PARALLEL_MIN else kernels.hash_serial)(*ops, out0, out1)
    return out0.reshape(shape), out1.reshape(shape)


# The step of a compiled program (tiered, like a cluster's kernel) is
# plax_numba.emitter.threefry_step.
