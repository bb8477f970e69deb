"""Keeping the BLAS library's own threads from fighting the device threads.

OpenBLAS (NumPy's matmul, which the CPU backends call for ``dot_general``) starts a thread
per core for each large product. When N device threads multiply at the same time, N times
that many threads compete for the cores, and two concurrent products can take longer than
the same work done by one thread. While N > 1 CPU devices run on threads of their own (a
pmap/shard_map of the plax-pmap plugin, a partitioned ``jit`` of an explicitly sharded
program), OpenBLAS therefore gets ``max(1, cores // N)`` threads, and the previous count is
restored afterwards (as threadpoolctl would; plax does not depend on it). Set
``PLAX_PMAP_LIMIT_BLAS=0`` to leave BLAS alone. Other BLAS libraries are left as they are.
:func:`on_one_thread` runs a function with OpenBLAS on one thread (a backend's products too
small to gain from more).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from typing import Callable, Iterator

_NAMES = (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
          ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
          ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
          ("openblas_get_num_threads", "openblas_set_num_threads"))
_found: list | None = None
_lock = threading.Lock()
_holds: list = []       # [(thread, count)]: the open blocks, on every thread, and what each asks
_saved: list = []       # [(put, count)]: the counts before the first open block, to restore
_current: list = [None]  # the count set while blocks are open (None: none set)


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
    held = _hold(max(1, cores() // n_devices))
    try:
        yield
    finally:
        _release(held)


def on_one_thread(fn: Callable) -> Callable:
    """``fn`` run with BLAS on one thread (and the previous count restored afterwards).

    For products too small to gain from BLAS's threads: OpenBLAS splits a product of a few
    million multiply-adds over every core, and on a host whose cores other processes hold,
    its threads wait for one another (an 8x128x64 batched ``matmul`` took 4 ms threaded and
    0.6 ms on one thread on the loaded 2-core CI host). While blocks overlap (inside
    :func:`limited`, or beside another thread's block), BLAS gets the smallest count any open
    block asks for, and the counts from before the first block come back when the last ends.

    Args:
      fn: a function whose BLAS calls should run on the calling thread alone.

    Returns:
      A function with ``fn``'s signature.

    Example:
      >>> dot = on_one_thread(np.dot)
      >>> float(dot(np.ones(3), np.ones(3)))
      3.0
    """
    def run(*args, **kwargs):
        held = _hold(1)
        try:
            return fn(*args, **kwargs)
        finally:
            _release(held)
    return run


def held() -> bool:
    """Whether a :func:`limited` block or an :func:`on_one_thread` call holds BLAS's thread
    count now (on any thread).

    Example:
      >>> held()
      False
    """
    return bool(_holds)


def _hold(want: int) -> tuple:
    """Opens a block asking for ``want`` threads: the first open block saves the counts to
    restore; BLAS then runs on the smallest count any open block asks for. Returns the block
    (for :func:`_release`)."""
    block = (threading.get_ident(), want)
    with _lock:
        if not _holds:
            _saved[:] = [(put, get()) for get, put in _controls()]
        _holds.append(block)
        _apply()
    return block


def _release(block: tuple) -> None:
    """Closes ``block`` (of :func:`_hold`): the count the blocks still open ask for, or the
    saved counts when it was the last."""
    with _lock:
        _holds.remove(block)
        _apply()


def _apply() -> None:
    """Sets BLAS's count to what the open blocks ask for (the smallest; only when it changes),
    or restores the saved counts when none is open. (Called under ``_lock``.)"""
    if _holds:
        want = min(count for _, count in _holds)
        if _current[0] != want:
            for put, _ in _saved:
                put(want)
            _current[0] = want
        return
    for put, count in _saved:
        put(count)
    _saved.clear()
    _current[0] = None


def _after_fork_in_child() -> None:
    """A forked child has only the forking thread: the blocks other threads held are not
    there to close, so their counts (1 for :func:`on_one_thread`) would stay, and :func:`held`
    answer True, for the child's life. They are forgotten now, and BLAS gets what the forking
    thread's own open blocks ask for (they close as usual), or the saved counts."""
    me = threading.get_ident()
    _holds[:] = [block for block in _holds if block[0] == me]
    _current[0] = None  # (set it again: the count the forgotten blocks asked for may differ)
    _apply()
    _lock.release()  # (taken before the fork, so that the state above was not mid-update)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_lock.acquire, after_in_parent=_lock.release,
                        after_in_child=_after_fork_in_child)
