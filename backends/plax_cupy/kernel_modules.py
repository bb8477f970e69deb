"""Compiled CUDA modules of plax's generated source: one per source text and device in the
process, and a program's kernels compiled concurrently before its first launch.

plax compiles its kernels with its own NVRTC call (:func:`plax_cupy.nvrtc.compile_binary`) and
loads the binary with ``cupy.RawModule(path=...)``, rather than handing the source to
``cupy.RawModule(code=...)``: CuPy appends ``-ftz=true`` to every NVRTC compile, which flushes
float32 subnormals to zero where NumPy and XLA keep them. The options are
:data:`plax_cupy.nvrtc.DEVICE_OPTIONS` plus the device's ``-arch``
(:func:`plax_cupy.nvrtc.device_target`: a cubin for an architecture NVRTC knows, else PTX).

Where a first call's compile time goes, and what each layer keeps:

* **On disk, across processes**: :func:`plax_cupy.kernel_cache.compiled` keeps each binary in
  plax's kernel cache (``$PLAX_CUPY_CACHE_DIR``, default ``~/.cache/plax_cupy``), named by a
  hash of the source, the options, the architecture and NVRTC's version. plax's generated
  source is a deterministic function of the program (shapes baked in, scalar literals passed
  as arguments, no ids or addresses in names), so a second process running the same program
  loads every kernel from that cache and compiles nothing
  (``tests/cupy/test_simulated_compile_cache.py`` checks it on the simulated GPU).
* **In memory, across programs**: :func:`module` keeps one loaded module per source text,
  options and device for the process, so two programs holding the same cluster (or an eager
  kernel and a compiled one) share it instead of each loading it.
* **Concurrently, within a program**: NVRTC's compile call releases the GIL, so
  :func:`compile_all` compiles a program's modules not yet built on a thread pool
  (``PLAX_CUPY_COMPILE_THREADS`` threads, default ``min(8, CPUs)``; ``1`` compiles them one
  after the other) when the program is compiled, before its first launch, instead of one by
  one as each kernel is first launched.

NVRTC's optimiser stays on (``-G``, which CI's source checks use, makes kernels several times
slower). :func:`stats` says how many modules this process built and how long that took.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterable, Sequence

import cupy

from plax.config import env_number
from plax_cupy import kernel_cache, nvrtc

#: the NVRTC options of plax's kernels, besides the device's ``-arch`` (see the module)
OPTIONS = nvrtc.DEVICE_OPTIONS

_modules: dict = {}   # (source, options, device id) -> loaded RawModule
_targets: dict = {}   # device id -> (-arch option, "cubin" or "ptx")
_lock = threading.Lock()
_STATS = {"built": 0, "seconds": 0.0}


def compile_threads() -> int:
    """How many threads :func:`compile_all` uses (``PLAX_CUPY_COMPILE_THREADS``, default
    ``min(8, CPUs)``).

    Raises:
      ValueError: a value that is not a positive integer.
    """
    return env_number("PLAX_CUPY_COMPILE_THREADS", max(1, min(8, os.cpu_count() or 1)),
                      minimum=1)


@functools.lru_cache(maxsize=None)
def module_text(preamble: str, source: str) -> str:
    """``preamble + source``, joined once: the same object for the same (cached) source, so
    :func:`module`'s lookup key hashes and compares without reading ~50 KB again.

    Example:
      >>> module_text("#define N 4\n", "int n = N;")
      '#define N 4\nint n = N;'
    """
    return preamble + source


def module(source: str, entries: Sequence[str], options: tuple = OPTIONS, device_id: int | None = None):
    """The compiled ``cupy.RawModule`` of ``source`` on a device, built once per process.

    Args:
      source: the CUDA C++ translation unit.
      entries: its kernels' names (looking one up makes CuPy compile or load the module now).
      options: NVRTC options (default :data:`OPTIONS`).
      device_id: the device (default: CuPy's current one).

    Returns:
      the module, with ``entries`` compiled.

    Example:
      >>> fn = module(plan.source, plan.entry).get_function(plan.entry[0])   # doctest: +SKIP
    """
    if device_id is None:
        device_id = cupy.cuda.Device().id
    key = (source, tuple(options), int(device_id))
    found = _modules.get(key)
    return found if found is not None else _build(key, tuple(entries))


def _build(key: tuple, entries: tuple):
    source, options, device_id = key
    nvrtc.preload_nvrtc()
    start = time.perf_counter()
    with cupy.cuda.Device(device_id):
        arch, kind = _target(device_id)
        path = kernel_cache.compiled(source, tuple(options) + (arch,), kind)
        built = cupy.RawModule(path=path)
        for name in entries:  # (loads the module on this device now)
            built.get_function(name)
    with _lock:
        found = _modules.setdefault(key, built)  # (another thread's build of the same key wins)
        _STATS["built"] += 1
        _STATS["seconds"] += time.perf_counter() - start
    return found


def _target(device_id: int) -> tuple[str, str]:
    """The device's ``-arch`` option and binary kind (:func:`plax_cupy.nvrtc.device_target`)."""
    found = _targets.get(device_id)
    if found is None:
        cc = cupy.cuda.Device(device_id).compute_capability
        found = _targets[device_id] = nvrtc.device_target(int(cc))
    return found


def compile_all(kernels: Iterable[tuple[str, Sequence[str]]], device_id: int,
                options: tuple = OPTIONS) -> int:
    """Builds the modules of ``kernels`` not yet built, concurrently (see the module).

    Args:
      kernels: ``(source, entry names)`` pairs, e.g. a program's generated kernels.
      device_id: the device they run on.
      options: NVRTC options (default :data:`OPTIONS`).

    Returns:
      how many modules were built.

    Example:
      >>> compile_all([(k.source, k.entry) for k in emitter.kernel_sources], 0)   # doctest: +SKIP
    """
    todo: dict = {}
    for source, entries in kernels:
        key = (source, tuple(options), int(device_id))
        if key not in _modules:
            todo.setdefault(key, tuple(entries))
    if not todo:
        return 0
    threads = min(compile_threads(), len(todo))
    if threads <= 1:
        for key, entries in todo.items():
            _build(key, entries)
    else:
        with ThreadPoolExecutor(threads, thread_name_prefix="plax-cupy-compile") as pool:
            for done in [pool.submit(_build, key, entries) for key, entries in todo.items()]:
                done.result()  # (re-raises a compile error here)
    return len(todo)


def stats() -> dict:
    """``{"built": modules built (compiled, or loaded from plax's disk cache) by this process,
    "seconds": their total build time (threads' times added up), "compiled": NVRTC compiles,
    "loaded": binaries found in the disk cache}``."""
    with _lock:
        return dict(_STATS, **kernel_cache.stats())
