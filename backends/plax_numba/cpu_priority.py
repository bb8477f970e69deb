"""How the compile worker competes with the program for the CPU
(``PLAX_NUMBA_WORKER_PRIORITY``: ``normal``, the default, or ``idle``).

Measured on a 2-core host (issue 26, the main thread's longest pause;
``benchmarks/pause_probe.py``, and the kernel's own scheduling events): while a kernel
compiles, the program's threads are not waiting for the GIL (plax's loading holds it under
4 ms at a stretch) nor for page faults, but on a run queue: runnable while the compile
worker, plax's first-tier thread, the program's own busy threads and other processes hold
both cores, each until the scheduler's next tick (4 ms on a 250 Hz kernel) or longer. How
much of that the worker causes depends on how it is scheduled:

* ``normal`` (the default): a process of its own session (Linux's ``autogroup`` shares the
  CPU between sessions first), with a share of the CPU like any other program's, the share
  a synchronous compilation would have. When it holds the core a program thread wants,
  that thread waits for the tick (measured: up to 8-20 ms on the loaded host).
* ``idle``: ``SCHED_IDLE``, in the program's session. A waking program thread preempts it
  at once and the program's busy threads always run first, so it only uses what the
  program leaves of a core (measured: the program's threads queued behind it at most one
  tick, 4 ms). Alone, it gets no CPU while the program (its BLAS threads or parallel loops
  included) or other processes keep every core busy: on the loaded host it got a tenth of
  the CPU time it got at ``normal``, and the MLP step's kernels took 19-234 s instead of
  3-11 s. So it runs under a starvation guard (:mod:`plax_numba.starvation_guard`): a
  worker whose work (its warm-up, its jobs) makes no progress for 0.3 s is raised to the
  normal policy and moved to a session of its own, as a ``normal`` worker runs, and lowered
  when its queue is empty. Guarded, its kernels arrived with a normal worker's on the
  loaded host (load average 8-16, where the guard raised it in every run), and the pauses
  it causes were not clearly lower there (``docs/performance.md``, "The starvation
  guard"); the guard needs ``CAP_SYS_NICE`` or a high ``RLIMIT_NICE``
  (:func:`can_leave_idle`), without which an idle worker stays idle. Use it where the
  program leaves a core free and its threads' latency matters more than when the kernels
  arrive.

The settings ruled out: ``nice`` does nothing across autogroups, and a nice autogroup
starves the worker (selu's time to the fast path went from 2 s to 26 s on the loaded host);
``SCHED_IDLE`` in the worker's own session is weighed only against its own session, so it
changed nothing; a long EEVDF time slice (``sched_setattr``, Linux 6.12+) lets a waking
thread preempt the worker, but then a busy program thread queued behind it waits up to that
slice (one pause of 100 ms measured).
"""
from __future__ import annotations

import os
import warnings

PRIORITIES = ("normal", "idle")


def worker_priority() -> str:
    """``PLAX_NUMBA_WORKER_PRIORITY``: ``normal`` (default) or ``idle`` (see the module); any
    other value warns, naming it, and counts as ``normal``."""
    value = os.environ.get("PLAX_NUMBA_WORKER_PRIORITY", "").strip().lower() or "normal"
    if value not in PRIORITIES:
        # (read where a worker starts, on a background thread: an exception there would
        # read as a failed compilation)
        warnings.warn(f"PLAX_NUMBA_WORKER_PRIORITY={value!r} is not one of "
                      f"{', '.join(PRIORITIES)}; the compile worker runs at normal "
                      "priority. Set it to idle to run the worker only on what the "
                      "program leaves of the CPU.", stacklevel=2)
        return "normal"
    return value


def idle_available() -> bool:
    """Whether this system has the ``SCHED_IDLE`` policy (Linux)."""
    return hasattr(os, "SCHED_IDLE") and hasattr(os, "sched_setscheduler")


def can_leave_idle() -> bool:
    """Whether this process may raise a worker it started at ``SCHED_IDLE`` back to the
    normal policy (what :mod:`plax_numba.starvation_guard` does to a starved worker): Linux
    allows it with ``CAP_SYS_NICE`` (root, usually) or where ``RLIMIT_NICE`` permits the
    worker's nice value (an unprivileged user's limit is usually 0, which does not)."""
    if not idle_available():
        return False
    try:
        with open("/proc/self/status") as f:
            caps = next(int(line.split()[1], 16) for line in f if line.startswith("CapEff:"))
        if caps >> _CAP_SYS_NICE & 1:
            return True
    except (OSError, StopIteration, ValueError, IndexError):
        pass
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_NICE)[0]
        nice = os.getpriority(os.PRIO_PROCESS, 0)
    except (ImportError, AttributeError, OSError):
        return False
    # (the kernel's test: 20 - nice <= RLIMIT_NICE, the worker's nice being this process's)
    return soft == resource.RLIM_INFINITY or 20 - nice <= soft


_CAP_SYS_NICE = 23  # the capability's bit in /proc/<pid>/status's CapEff


def worker_runs_idle() -> bool:
    """Whether a compile worker started now runs at ``SCHED_IDLE`` in the program's session
    (``PLAX_NUMBA_WORKER_PRIORITY=idle`` where the policy exists)."""
    return worker_priority() == "idle" and idle_available()


def enter_worker_priority(idle: bool, pid: int = 0) -> None:
    """Puts compile worker ``pid`` (0: this process) at ``SCHED_IDLE`` when ``idle``: called
    by the program right after it starts the worker, so that only the program sets the
    worker's policy (its starvation guard raises it later; a worker lowering itself could
    undo that). The threads the worker starts later inherit the policy. Best effort: a
    refusal (a sandbox) leaves the normal policy.

    Args:
      idle: the program asked for :func:`worker_runs_idle`.
      pid: the worker's process id.

    Example::

      enter_worker_priority(cpu_priority.worker_runs_idle(), proc.pid)
    """
    if idle and idle_available():
        try:
            os.sched_setscheduler(pid, os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            pass
