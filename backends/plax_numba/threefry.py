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


def _arg_types(ranks) -> list:
    """The kernels' argument types in the plans' form (:func:`plax_numba.cache.numba_signature`
    gives :func:`signature`): a uint32 scalar or flat array per operand, two flat outputs."""
    u32 = np.dtype(_U32)
    return ([("scalar", u32) if r == 0 else ("array", u32, 1) for r in ranks]
            + [("array", u32, 1)] * 2)


# The kernels the compile worker emits as native artifacts: threefry_kernels' loops as
# generated modules (plax_numba.cache), one per operand kinds and form, so they take the
# generated kernels' path (numba's cache of a fresh module, the artifact beside it, the
# numba-free loader) instead of the module-level dispatchers, whose object code numba's cache
# does not hand back.
_CHUNK = 1 << 14  # threefry_kernels.CHUNK (that module imports numba)
_SOURCE = """
@njit(**{options})
def kernel(k0, k1, x0, x1, out0, out1):
    n = out0.size
    for c in {loop}((n + {chunk} - 1) // {chunk}):
        start = c * {chunk}
        stop = min(start + {chunk}, n)
        for i in range(start, stop):
            y0, y1 = hash_words({k0}, {k1}, {x0}, {x1})
            out0[i] = y0
            out1[i] = y1
"""


def _native_kernels(ranks) -> list:
    """``[(text, arg_types)]`` of the serial and the parallel generated kernel for operands
    of ``ranks`` (:data:`_SOURCE`)."""
    from plax_numba import cache
    reads = {name: (name if r == 0 else f"{name}[i]")
             for name, r in zip(("k0", "k1", "x0", "x1"), ranks)}
    return [(cache.module_source(_SOURCE.format(options=options, loop=loop, chunk=_CHUNK,
                                                **reads), ["threefry2x32"]),
             _arg_types(ranks))
            for options, loop in (("_OPTIONS", "range"), ("_PARALLEL", "prange"))]


def native_on_disk(ranks) -> bool:
    """Whether both generated kernels for ``ranks`` were compiled by a worker (with their
    native artifacts, where the loader is on): a file test."""
    from plax_numba import cache
    return all(cache.on_disk(text, arg_types) for text, arg_types in _native_kernels(ranks))


def compile_native(ranks, directory: str | None = None) -> int:
    """Compiles both generated kernels for ``ranks`` into the kernel cache ``directory``
    with their native artifacts (:func:`plax_numba.cache.compile_for_cache`): a compile
    worker's job. Returns the worker's process id."""
    from plax_numba import cache
    cache.use_cache_dir(directory)
    pid = 0
    for text, arg_types in _native_kernels(ranks):
        pid = cache.compile_for_cache(text, arg_types, directory, native=True)
    return pid


#: kinds of the four operands (0: scalar, 1: array) -> (serial, parallel) entry points
#: linked without numba (:func:`load_native`)
_native: dict = {}


def _kinds(ranks) -> tuple:
    return tuple(0 if r == 0 else 1 for r in ranks)


def load_native(ranks) -> bool:
    """Links both generated kernels for operands of ``ranks`` from the native artifacts a
    compile worker wrote (:mod:`plax_numba.native_loader`: numba is not imported); False
    where the loader is off, they are not compiled yet, or unusable (that reason counted
    in ``native_loader.fallbacks``): load the kernels through numba instead.

    Args:
      ranks: the ranks of the four operands (0: a scalar).

    Returns:
      Whether :func:`threefry2x32` now runs them natively for these operand kinds.

    Example::

      if not load_native((0, 0, 1, 1)):
          precompile((0, 0, 1, 1))
    """
    kinds = _kinds(ranks)
    if kinds in _native:
        return True
    from plax_numba import cache, native_loader
    if not native_loader.enabled() or not native_on_disk(ranks):
        return False
    loaded = []
    for text, arg_types in _native_kernels(ranks):
        kernel = cache._load_native(text, arg_types)  # (counts why not)
        if kernel is None:
            return False
        loaded.append(kernel.function)
    _native[kinds] = tuple(loaded)
    cache.load_stats["loaded"] += 2
    return True


def _marker(ranks) -> str:
    from plax_numba import cache
    return cache.module_marker(_KERNELS_FILE, tuple(ranks))


def on_disk(ranks) -> bool:
    """Whether both kernels for operands of ``ranks`` were compiled into numba's disk cache
    (by any process; with the native loader on, their generated forms count too,
    :func:`native_on_disk`): a file test, no numba import. A hint, as for generated
    kernels (:func:`plax_numba.cache.on_disk`)."""
    from plax_numba import native_loader
    return os.path.exists(_marker(ranks)) or (native_loader.enabled()
                                               and native_on_disk(ranks))


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
    worker compiles them (unless they are on disk) while this process sets its loader up,
    and they link here from their native artifacts (:func:`load_native`, no numba), else
    load from numba's disk cache; elsewhere they compile (or load) here. Raises the
    compilation's error (:class:`plax_numba.compile_worker.WorkerCompileError` from a
    worker).

    Args:
      ranks: the ranks of the four operands (0: a scalar).

    Example::

      precompile((0, 0, 1, 1))   # scalar key words, counter arrays
    """
    from plax_numba import cache, compile_worker, native_loader, tiered
    ranks = tuple(ranks)
    if not tiered.compiles_in_worker() and not on_disk(ranks):
        compile_here(ranks)
        return
    native = native_loader.enabled()
    if native:  # the generated forms, with native artifacts (numba's loading the fallback)
        job = (None if native_on_disk(ranks)
               else compile_worker.submit(compile_native, ranks, cache.cache_dir()))
    else:
        job = (None if on_disk(ranks)
               else compile_worker.submit(compile_here, ranks, cache.cache_dir()))
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
        if native and load_native(ranks):
            return
    if native and not os.path.exists(_marker(ranks)):  # numba's fixed kernels, still
        compile_worker.submit(compile_here, ranks, cache.cache_dir()).result()  # off here
    with tiered.yielding_gil():
        cache.prepare_numba()
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
        native = _native_for(ops, n)
        if native is not None:
            (native[1] if n >= PARALLEL_MIN else native[0])(*ops, out0, out1)
        else:
            kernels = _kernels()
            (kernels.hash_parallel if n >= PARALLEL_MIN else kernels.hash_serial)(
                *ops, out0, out1)
    return out0.reshape(shape), out1.reshape(shape)


def _native_for(ops: list, n: int):
    """The natively linked ``(serial, parallel)`` kernels taking ``ops`` (a scalar operand
    that was an array of the program, broadcast, is expanded in place in ``ops`` to match
    the kernels loaded for the program's ranks); None when none fits."""
    if not _native:
        return None
    kinds = tuple(0 if isinstance(op, _U32) else 1 for op in ops)
    found = _native.get(kinds)
    if found is not None:
        return found
    for loaded, functions in _native.items():
        if all(want >= have for want, have in zip(loaded, kinds)):
            for i, (want, have) in enumerate(zip(loaded, kinds)):
                if want > have:
                    ops[i] = np.full(n, ops[i], _U32)
            return functions
    return None


# The step of a compiled program (tiered, like a cluster's kernel) is
# plax_numba.emitter.threefry_step.
