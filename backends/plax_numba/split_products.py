"""Large matrix products as column blocks pulled by this thread and helper threads, each
block on one BLAS thread: the Numba backend's path for products too large for one core on a
heavily loaded host (``PLAX_NUMBA_SPLIT_PRODUCTS=1``; see ``kernels.SPLIT_MIN_COLUMNS``).

OpenBLAS splits a product statically over its own threads and waits (spinning) for every
one of them: on a host whose cores other processes hold, a descheduled worker stalls the
product (the MLP step's 51M-multiply-add ``x @ W1``, load average 11: median 10.5 ms per
call threaded, 0.9 ms on one thread). Here the output's columns are cut into
:data:`BLOCKS` fixed blocks and the calling thread and ``cores - 1`` helpers take blocks
from a shared counter until none is left, so a descheduled helper delays at most the block
it holds, and an idle helper costs nothing (it waits on a queue, it does not spin). The
blocks are fixed, and each runs on one BLAS thread, so the bits do not depend on which
thread computed what, on the core count or on the load. Nested in a block holding BLAS's
thread count (pmap's device threads, :func:`plax.blas_threads.limited`; another thread's
:func:`~plax.blas_threads.on_one_thread` call), the calling thread computes every block
itself, with the count that block holds: the same bits only where that count is 1 (pmap's
``cores // devices`` may be more, and another thread's count is restored when its call
ends).
"""
from __future__ import annotations

import itertools
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

import numpy as np

from plax import blas_threads

#: column blocks of a split product (fixed: the result's bits depend on it)
BLOCKS = 4
_pool: list = []
_pool_lock = threading.Lock()


def _forget_helpers() -> None:
    """In a forked child: the parent's helper threads (and a lock one held) are not there."""
    global _pool_lock
    _pool.clear()
    _pool_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_helpers)


def _helpers() -> tuple:
    """The helper threads' executor and their number (``cores - 1``), made once."""
    with _pool_lock:
        if not _pool:
            n = max(0, blas_threads.cores() - 1)
            _pool.append((ThreadPoolExecutor(n, thread_name_prefix="plax-blas") if n else None,
                          n))
        return _pool[0]


def run_blocks(block: Callable[[int], None], count: int) -> None:
    """Calls ``block(i)`` for ``i`` in ``range(count)`` on this thread and the helpers (each
    ``i`` once, in any order), with BLAS on one thread, and returns when all are done.

    Example:
      >>> done = []
      >>> run_blocks(done.append, 3)
      >>> sorted(done)
      [0, 1, 2]
    """
    nested = blas_threads.held()
    counter = itertools.count()

    def work():
        for i in counter:  # (next() on a shared count is atomic under the GIL)
            if i >= count:
                return
            block(i)

    def all_blocks():
        pool, n = (None, 0) if nested else _helpers()
        futures = [pool.submit(work) for _ in range(min(n, count - 1))] if pool else []
        try:
            work()
        finally:
            for f in futures:
                f.result()
    blas_threads.on_one_thread(all_blocks)()


def split_dot(lhs_transposed: bool, rhs_transposed: bool) -> Callable:
    """A step computing ``a @ b`` (each operand or its transposed view, as flagged) of two
    matrices by :data:`BLOCKS` column blocks (:func:`run_blocks`).

    Example:
      >>> step = split_dot(False, True)
      >>> step(np.ones((2, 3)), np.ones((8, 3))).shape
      (2, 8)
    """
    def step(a, b):
        lhs = a.T if lhs_transposed else a
        rhs = b.T if rhs_transposed else b
        n = rhs.shape[1]
        out = np.empty((lhs.shape[0], n), np.result_type(lhs, rhs))
        edges = [n * i // BLOCKS for i in range(BLOCKS + 1)]

        def block(i):
            cols = slice(edges[i], edges[i + 1])
            np.matmul(lhs, rhs[:, cols], out=out[:, cols])
        run_blocks(block, BLOCKS)
        return out
    return step
