"""Native ``threefry2x32``: the Threefry-2x32 hash (20 rounds) as ``numba.njit`` loops
(:mod:`plax_numba.threefry_kernels`), bit-identical to the reference kernel
(``plax_numpy.impls_random``) and to JAX.

This module imports neither numba nor the kernels until one is compiled or loaded
(:func:`precompile`) or run (:func:`threefry2x32`): a program holding a ``threefry2x32``
equation is built, and runs on the reference kernel until it is hot, without numba.

Tiering compiles the kernels like a cluster's (:mod:`plax_numba.tiered`): on the background
thread, :func:`precompile` sends the compilation to a compile worker
(:mod:`plax_numba.compile_worker`), which writes numba's disk cache and each kernel's native
artifact (:mod:`plax_numba.native_emit`), and this process links the artifacts without
importing numba (:func:`load_native`, :mod:`plax_numba.native_loader`), or loads numba's
machine code where they cannot be used; kernels already on disk (:func:`on_disk`) load at
once.

The primitive allows each of its four operands the output's shape or rank 0; the kernels
take every operand as a flat C-contiguous ``uint32`` array (a rank-0 operand as its
:func:`fill`), so each is compiled once for every mix of operands. Above
:data:`PARALLEL_MIN` elements the work is split over numba's threads.
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


#: Elements per work item of the kernels (``threefry_kernels.CHUNK``: that module imports
#: numba).
CHUNK = 1 << 14
#: The length of a scalar's :func:`fill`: elements per block of a work item
#: (``threefry_kernels.FILL``, which checks that the two agree).
FILL = 1 << 10


def fill(value, n: int) -> np.ndarray:
    """A rank-0 operand in the kernels' form: ``value`` repeated over one work item.

    The kernels read an operand shorter than the output at the index within the work item,
    so every read is unit-stride (and vectorises) without an array of the output's size.

    Args:
      value: the operand's value (taken as uint32).
      n: the output's size.

    Returns:
      A flat, read-only uint32 array of ``min(n, FILL)`` elements.

    Example::

      fill(42, 10)        # array([42, 42, ..., 42], dtype=uint32): ten elements
    """
    return _read_only(np.full(min(n, FILL), value, _U32))


def _operand(a, shape, n):
    """The operand ``a`` in the kernels' form: its :func:`fill` if it holds one value for the
    whole output (rank 0, a single element broadcast, or a broadcast view of a scalar),
    else a flat C-contiguous uint32 array of ``n`` elements."""
    a = np.asarray(a)
    if a.dtype != _U32:
        a = a.astype(_U32)
    if a.ndim == 0 or a.size == 1 and n != 1 and a.shape != shape:
        return fill(a.reshape(-1)[0], n)
    if a.size and not any(a.strides):  # a broadcast scalar (broadcast_in_dim's view): no copy
        return fill(a.flat[0], n)
    if a.shape != shape:
        a = np.broadcast_to(a, shape)
    return _read_only(np.ascontiguousarray(a).reshape(n))


def _read_only(a: np.ndarray) -> np.ndarray:
    """``a`` as a read-only view: numba types a writable and a read-only array apart and
    compiles a kernel for each, so every operand reaches the kernels read-only (a plax
    Array's buffer already is)."""
    if a.flags.writeable:
        a = a.view()
        a.flags.writeable = False
    return a


def signature():
    """The numba signature of the kernels: six flat C-contiguous uint32 arrays (four
    read-only operands, two outputs)."""
    import numba
    from numba import types
    operand = types.Array(numba.uint32, 1, "C", readonly=True)
    return (operand,) * 4 + (types.Array(numba.uint32, 1, "C"),) * 2


#: The kernels' argument types in the plans' form (:func:`plax_numba.cache.numba_signature`
#: gives :func:`signature`).
_ARG_TYPES = [("rarray", np.dtype(_U32), 1)] * 4 + [("array", np.dtype(_U32), 1)] * 2


# The kernels the compile worker emits as native artifacts: threefry_kernels' loops as
# generated modules (plax_numba.cache), a serial and a parallel one, so they take the
# generated kernels' path (numba's cache of a fresh module, the artifact beside it, the
# numba-free loader) instead of the module-level dispatchers, whose object code numba's cache
# does not hand back.
_SOURCE = """
@njit(**{options})
def kernel(k0, k1, x0, x1, out0, out1):
    for c in {loop}((out0.size + {chunk} - 1) // {chunk}):
        hash_item(k0, k1, x0, x1, out0, out1, c * {chunk})
"""


def _native_kernels() -> list:
    """``[(text, arg_types)]`` of the serial and the parallel generated kernel
    (:data:`_SOURCE`)."""
    from plax_numba import cache
    return [(cache.module_source(_SOURCE.format(options=options, loop=loop, chunk=CHUNK),
                                 ["threefry2x32"]), _ARG_TYPES)
            for options, loop in (("_OPTIONS", "range"), ("_PARALLEL", "prange"))]


def native_on_disk() -> bool:
    """Whether both generated kernels were compiled by a worker (with their native
    artifacts, where the loader is on): a file test."""
    from plax_numba import cache
    return all(cache.on_disk(text, arg_types) for text, arg_types in _native_kernels())


def compile_native(directory: str | None = None) -> int:
    """Compiles both generated kernels into the kernel cache ``directory`` with their native
    artifacts (:func:`plax_numba.cache.compile_for_cache`): a compile worker's job. Returns
    the worker's process id."""
    from plax_numba import cache
    cache.use_cache_dir(directory)
    pid = 0
    for text, arg_types in _native_kernels():
        pid = cache.compile_for_cache(text, arg_types, directory, native=True)
    return pid


#: the ``(serial, parallel)`` entry points linked without numba (:func:`load_native`), or
#: None
_native = None


def load_native() -> bool:
    """Links both generated kernels from the native artifacts a compile worker wrote
    (:mod:`plax_numba.native_loader`: numba is not imported); False where the loader is off,
    they are not compiled yet, or unusable (that reason counted in
    ``native_loader.fallbacks``): load the kernels through numba instead.

    Returns:
      Whether :func:`threefry2x32` now runs them natively.

    Example::

      if not load_native():
          precompile()
    """
    global _native
    if _native is not None:
        return True
    from plax_numba import cache, native_loader
    if not native_loader.enabled() or not native_on_disk():
        return False
    loaded = []
    for text, arg_types in _native_kernels():
        kernel = cache._load_native(text, arg_types)  # (counts why not)
        if kernel is None:
            return False
        loaded.append(kernel.function)
    _native = tuple(loaded)
    cache.load_stats["loaded"] += 2
    return True


def _marker() -> str:
    from plax_numba import cache
    return cache.module_marker(_KERNELS_FILE, "uint32 arrays")


def on_disk() -> bool:
    """Whether both kernels were compiled into numba's disk cache (by any process; with the
    native loader on, their generated forms count too, :func:`native_on_disk`): a file
    test, no numba import. A hint, as for generated kernels
    (:func:`plax_numba.cache.on_disk`)."""
    from plax_numba import native_loader
    return os.path.exists(_marker()) or (native_loader.enabled() and native_on_disk())


def compile_here(directory: str | None = None) -> None:
    """Compiles (or loads from numba's disk cache) both kernels in this process, and marks
    them as on disk (:func:`on_disk`) in the kernel cache ``directory`` (None: this
    process's). What a compile worker runs."""
    from plax_numba import cache
    cache.use_cache_dir(directory)
    kernels, sig = _kernels(), signature()
    kernels.hash_serial.compile(sig)
    kernels.hash_parallel.compile(sig)
    cache.mark(_marker())


def precompile() -> None:
    """Makes both kernels ready in this process.

    On tiering's background thread (:func:`plax_numba.tiered.compiles_in_worker`) a compile
    worker compiles them (unless they are on disk) while this process sets its loader up,
    and they link here from their native artifacts (:func:`load_native`, no numba), else
    load from numba's disk cache; elsewhere they compile (or load) here. Raises the
    compilation's error (:class:`plax_numba.compile_worker.WorkerCompileError` from a
    worker).

    Example::

      precompile()
    """
    from plax_numba import cache, compile_worker, native_loader, tiered
    if not tiered.compiles_in_worker() and not on_disk():
        compile_here()
        return
    native = native_loader.enabled()
    if native:  # the generated forms, with native artifacts (numba's loading the fallback)
        job = (None if native_on_disk()
               else compile_worker.submit(compile_native, cache.cache_dir()))
    else:
        job = (None if on_disk()
               else compile_worker.submit(compile_here, cache.cache_dir()))
    with tiered.yielding_gil():  # (while the worker compiles)
        if native:
            try:
                native_loader.prepare()
            except Exception:  # noqa: BLE001 - load_native counts what went wrong
                pass
        else:
            cache.prepare_numba()
    if job is not None:
        job.result()
    with tiered.yielding_gil():
        if native and load_native():
            return
    if native and not os.path.exists(_marker()):  # numba's fixed kernels, still
        compile_worker.submit(compile_here, cache.cache_dir()).result()  # off here
    with tiered.yielding_gil():
        cache.prepare_numba()
        kernels, sig = _kernels(), signature()
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
    out0 = np.empty(n, _U32)
    out1 = np.empty(n, _U32)
    if n:
        ops = [_operand(a, shape, n) for a in arrays]
        if _native is not None:
            kernel = _native[1] if n >= PARALLEL_MIN else _native[0]
        else:
            kernels = _kernels()
            kernel = kernels.hash_parallel if n >= PARALLEL_MIN else kernels.hash_serial
        kernel(*ops, out0, out1)
    return out0.reshape(shape), out1.reshape(shape)


# The step of a compiled program (tiered, like a cluster's kernel) is
# plax_numba.emitter.threefry_step.
