"""Keeping the BLAS library's own threads from fighting the device threads.

OpenBLAS (NumPy's matmul, which the CPU backends call for ``dot_general``) starts a thread
per core for each large product. When N device threads multiply at the same time, N times
that many threads compete for the cores, and two concurrent products can take longer than
the same work done by one thread. While N > 1 CPU devices run on threads of their own (a
pmap/shard_map of the plax-pmap plugin, a partitioned ``jit`` of an explicitly sharded
program), OpenBLAS therefore gets ``max(1, cores // N)`` threads, and the previous count is
restored afterwards (as threadpoolctl would; plax does not depend on it). Set
``PLAX_PMAP_LIMIT_BLAS=0`` to leave BLAS alone. Other BLAS libraries are left as they are.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from typing import Iterator

_NAMES = (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
          ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
          ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
          ("openblas_get_num_threads", "openblas_set_num_threads"))
_found: list | None = None
_lock = threading.Lock()
_depth = [0]


def _controls() -> list:
    """(get, set) function pairs of the OpenBLAS libraries loaded in this process."""
    global _found
    if _found is None:
        found = []
        try:
            import numpy  # noqa: F401 -- its BLAS must be loaded to be found
            with open("/proc/self/maps") as maps:
                paths = sorted({line.split()[-1] for line in maps
                                if "openblas" in line.lower() and ".so" in line})
        except OSError:  # not Linux: nothing to do
            paths = []
        for path in paths:
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for get_name, set_name in _NAMES:
                get, put = getattr(lib, get_name, None), getattr(lib, set_name, None)
                if get is not None and put is not None:
                    get.restype = ctypes.c_int
                    put.argtypes = [ctypes.c_int]
                    found.append((get, put))
                    break
        _found = found
    return _found


_cores: list = []


def cores() -> int:
    """The machine's core count (``os.cpu_count``, read once: it costs ~10 us per call)."""
    if not _cores:
        _cores.append(os.cpu_count() or 1)
    return _cores[0]


@contextlib.contextmanager
def limited(n_devices: int) -> Iterator[None]:
    """BLAS limited to ``cores // n_devices`` threads (at least 1) inside the block.

    Example:
      >>> with limited(2):
      ...     _ = np.ones((4, 4)) @ np.ones((4, 4))
    """
    from plax.config import env_flag
    if n_devices <= 1 or not env_flag("PLAX_PMAP_LIMIT_BLAS", True):
        yield
        return
    with _lock:
        controls = _controls()
        _depth[0] += 1
        saved = [get() for get, _ in controls] if _depth[0] == 1 else None
        if saved is not None:
            want = max(1, cores() // n_devices)
            for _, put in controls:
                put(want)
    try:
        yield
    finally:
        with _lock:
            _depth[0] -= 1
            if saved is not None:
                for (_, put), n in zip(controls, saved):
                    put(n)
