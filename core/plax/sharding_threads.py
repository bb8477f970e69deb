"""Running one piece of work per device at once: the device threads of a partitioned ``jit``.

An explicitly sharded program partitioned by :mod:`plax.sharding_spmd` runs each of its
steps on every device of the mesh; the devices work in parallel, one thread each (the
compiled kernels of the CPU backends and NumPy's large operations release the GIL). The
first device runs on the calling thread, the others on a pool shared by every call.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

_pool: list = [None]
_pool_lock = threading.Lock()
_together_lock = threading.Lock()


def _executor(n: int) -> ThreadPoolExecutor:
    with _pool_lock:
        pool = _pool[0]
        if pool is None or pool._max_workers < n:  # grown when a larger mesh comes
            pool = _pool[0] = ThreadPoolExecutor(max_workers=max(n, 8),
                                                 thread_name_prefix="plax-shard")
        return pool


def on_each_device(devices: Sequence[Any], work: Callable[[int], Any],
                   together: bool = False) -> list:
    """``[work(0), ..., work(n - 1)]``, one call per device of ``devices``, run at once.

    Args:
      devices: the devices taking part (their count is what matters).
      work: called with a device's position; returns that device's result.
      together: the calls wait for each other (at a barrier), so all of them must be
        running at once: such runs take the pool one at a time, and it has a thread for
        every device but the first.

    Returns:
      The results in device order. The first exception raised by any device is re-raised
      (after every device has finished), with a note naming the device.

    Example:
      >>> on_each_device(plax.devices(), lambda i: i * 2)[:1]
      [0]
    """
    n = len(devices)
    if n == 1:
        return [work(0)]
    if together:
        # two calls sharing the pool could each hold some threads while waiting for the
        # rest; one at a time, every device gets a thread
        with _together_lock:
            return _run(n, work, devices)
    return _run(n, work, devices)


def _run(n: int, work: Callable[[int], Any], devices: Sequence[Any]) -> list:
    from plax.sharding import in_internal_eager_work, internal_eager_work
    if in_internal_eager_work():  # the device threads do the caller's (plax's own) work
        def others(i: int, work=work) -> Any:
            with internal_eager_work():
                return work(i)
    else:
        others = work
    futures = [_executor(n).submit(others, i) for i in range(1, n)]
    first_error = None
    try:
        results = [work(0)]
    except BaseException as err:  # noqa: BLE001 -- re-raised below, after the others finish
        results, first_error = [None], (0, err)
    for i, f in enumerate(futures, start=1):
        try:
            results.append(f.result())
        except BaseException as err:  # noqa: BLE001
            results.append(None)
            if first_error is None:
                first_error = (i, err)
    if first_error is not None:
        i, err = first_error
        if hasattr(err, "add_note"):
            err.add_note(f"plax jit of a sharded program: raised on device {devices[i]!r}")
        raise err
    return results
