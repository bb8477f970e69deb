"""How plax's compile work competes with the program for the CPU: it yields the cores the
program's threads want, without losing its share of the CPU.

Measured with ``benchmarks/pause_probe.py`` on a 2-core host (issue 26, the main thread's
longest pause): while a kernel compiled, the program's waiting threads were not waiting for
the GIL (plax's loading holds it for under 3 ms at a stretch) nor for page faults, but on a
run queue: runnable, while the compile worker, plax's first-tier thread, the program's own
threads and other processes held both cores, each until the scheduler's next tick (4 ms on
a 250 Hz kernel). Two scheduler settings let the kernel prefer the program there, and
neither lowers the compile work's share of the CPU (which would make the fast path later):

* **A long time slice** (:func:`request_long_slice`, Linux 6.12+, EEVDF's per-task slice
  through ``sched_setattr``): a waking thread with a shorter slice than the running one
  preempts it at once instead of at the end of its slice. Set on the compile worker and on
  plax's background threads (:mod:`plax_numba.tiered`'s lanes). Their weight, hence their
  share over time, is unchanged.
* **SCHED_IDLE for the compile worker, when it is alone in its own autogroup**
  (:func:`worker_policy`): the scheduler counts a core running only idle-policy tasks as
  free when it places a waking thread, so the program's threads wake on the worker's core
  instead of queueing behind the program's own busy thread. The policy lowers the worker's
  weight only against tasks of its own group; in a session of its own (the default,
  :func:`plax_numba.compile_worker._own_session`) with Linux's autogroup on, its group holds
  only the worker, so its share against the program and other processes is unchanged.
  Without autogroup (or in the program's session) SCHED_IDLE would starve the compilation
  whenever the program keeps the cores busy, so the worker keeps the normal policy there.
  (``nice`` does nothing across autogroups, and a nice autogroup starves the worker: on the
  loaded host selu's time to the fast path went from 2 s to 26 s.)

``PLAX_NUMBA_WORKER_PRIORITY=normal`` turns both off (the default, ``yield``, does the
above). Everything here is best effort: where the call or the setting does not exist
(another OS, an older kernel, a seccomp filter) nothing changes.
"""
from __future__ import annotations

import ctypes
import os
import platform
import struct
import sys

#: the slice requested (nanoseconds): the longest Linux accepts (it clamps to 0.1-100 ms)
LONG_SLICE_NS = 100_000_000

#: ``sched_setattr``'s system call number, by machine (glibc has no wrapper)
_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274, "arm64": 274, "riscv64": 274,
                  "ppc64le": 355, "s390x": 345}
#: struct sched_attr up to sched_period (the size the kernel needs for a fair-class task)
_SCHED_ATTR = struct.Struct("IIQiIQQQ")


def yielding() -> bool:
    """Whether compile work yields the CPU to the program (``PLAX_NUMBA_WORKER_PRIORITY``:
    ``yield``, the default, or ``normal``)."""
    value = os.environ.get("PLAX_NUMBA_WORKER_PRIORITY", "yield").strip().lower()
    return value not in ("normal", "0", "off", "no", "false")


def request_long_slice() -> bool:
    """Asks the kernel for a long time slice (:data:`LONG_SLICE_NS`) for the calling thread
    (and the threads it starts later), keeping its policy and nice value: a waking thread of
    the program then preempts it at once (Linux 6.12+; older kernels accept the call and
    ignore the slice).

    Returns:
      Whether the call succeeded (False on other systems and machines, or when refused).

    Example::

      threading.Thread(target=lambda: (request_long_slice(), compile_things())).start()
    """
    number = _SCHED_SETATTR.get(platform.machine())
    if not sys.platform.startswith("linux") or number is None:
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        policy = os.sched_getscheduler(0)
        attr = ctypes.create_string_buffer(
            _SCHED_ATTR.pack(_SCHED_ATTR.size, policy, 0, os.getpriority(
                os.PRIO_PROCESS, 0), 0, LONG_SLICE_NS, 0, 0), _SCHED_ATTR.size)
        return libc.syscall(number, 0, attr, 0) == 0
    except (OSError, AttributeError, ValueError):
        return False


def alone_in_autogroup(autogroup_flag: str = "/proc/sys/kernel/sched_autogroup_enabled"
                       ) -> bool:
    """Whether this process leads a session of its own and Linux's autogroup is on: then its
    scheduling group holds only this session's processes, and its share of the CPU against
    other sessions does not depend on its tasks' policies."""
    try:
        with open(autogroup_flag) as f:
            enabled = f.read().strip() == "1"
    except OSError:
        return False
    return enabled and os.getsid(0) == os.getpid()


def worker_policy(alone: bool) -> int:
    """The scheduling policy for a compile worker: ``os.SCHED_IDLE`` when it is alone in its
    autogroup (``alone``, :func:`alone_in_autogroup`) and compile work yields
    (:func:`yielding`), else ``os.SCHED_OTHER`` (see the module's docstring)."""
    idle = getattr(os, "SCHED_IDLE", None)
    if idle is not None and alone and yielding():
        return idle
    return getattr(os, "SCHED_OTHER", 0)


def yield_worker() -> None:
    """Applies :func:`worker_policy` and :func:`request_long_slice` to the calling process's
    thread (the compile worker, when it starts; the threads it starts inherit them).
    Nothing when compile work does not yield."""
    if not yielding():
        return
    # the slice first: the kernel takes a slice request only from a normal-policy task, and
    # keeps it through the change of policy (/proc/<pid>/sched then no longer shows it)
    request_long_slice()
    policy = worker_policy(alone_in_autogroup())
    if policy != getattr(os, "SCHED_OTHER", 0):
        try:
            os.sched_setscheduler(0, policy, os.sched_param(0))
        except (OSError, AttributeError):
            pass


def yield_thread() -> None:
    """Requests the long slice for the calling thread of the program's process (plax's
    background threads: loading, the first tier's LLVM builds), when compile work yields.
    Never SCHED_IDLE there: such a thread holds the GIL at times, and an idle-policy holder
    waits behind every busy thread of the host while the program's threads wait for it."""
    if yielding():
        request_long_slice()


def slice_ns(pid: int | str = "self") -> int | None:
    """The time slice the kernel gives task ``pid`` (nanoseconds; None where
    ``/proc/<pid>/sched`` does not show it): tests and benchmarks read it."""
    try:
        with open(f"/proc/{pid}/sched") as f:
            for line in f:
                if line.startswith("se.slice"):
                    return int(line.split(":")[1])
    except (OSError, ValueError):
        return None
    return None
