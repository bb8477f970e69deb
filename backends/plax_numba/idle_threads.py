"""plax's background threads at ``SCHED_IDLE`` while they run LLVM (issue 26, the main
thread's longest pause; ``PLAX_NUMBA_THREAD_PRIORITY``: ``normal`` or ``idle``).

Two threads of the program's process do plax's compile work (:mod:`plax_numba.tiered`'s
lanes): ``plax-numba-first-tier`` builds first-tier kernels (:mod:`plax_numba.llvm_tier`:
LLVM's passes and code generation, 5-40 ms of CPU per kernel) and ``plax-numba-compile``
waits on the worker and links what it wrote (:mod:`plax_numba.native_loader`). At the
normal policy, on a 2-core host, the program's thread, a thread of its own that wakes
(pmap's, a probe) and one of these make three runnable tasks for two cores: the waking one
waits for a core until the scheduler's next tick (measured: "plax background threads ran"
8 ms in LLVM while the probe waited). At ``SCHED_IDLE`` a waking thread of the program
preempts them at once.

Only their *native sections* run idle (:func:`native_section`: LLVM's parsing, passes, code
generation and linking, the loader's ``dlopen``), never their Python code: a thread holding
the GIL at ``SCHED_IDLE`` would be a priority inversion (the program's thread, waiting for
the GIL, sleeps; on a host whose cores are busy with other processes, the idle holder could
wait seconds for a core, and the program with it). In a section the thread has released the
GIL (llvmlite's C calls do; it takes it back only for an object-cache callback, briefly).
What it still holds there are two locks: llvmlite's (every llvmlite call takes it) and the
loader's. The program's thread takes them only through :mod:`plax_numba.native_loader`
(a kernel loaded from the disk cache while a program is built), which calls :func:`hurry`
first: every thread in an idle section is raised to the normal policy until its lane's
queue is empty, so the program waits for LLVM's work, never for a starved thread.

A section's thread that gets no CPU (the program's busy threads and the host's other
processes keep every core busy) is raised by a starvation guard
(:class:`plax_numba.starvation_guard.StarvationGuard`, with the worker's checks and share
but every :data:`THREAD_GUARD_INTERVAL`, the thread's CPU time from
``/proc/self/task/<tid>/schedstat``): after its stalled checks in a row inside one section
it runs at the normal policy until its lane's queue is empty (:func:`lane_idle`). The
checks run on a thread of their own (``plax-numba-thread-guard``, normal policy, sleeping
but for a ``/proc`` read per check while a section runs).

Idle sections need the right to leave ``SCHED_IDLE`` (a thread lowers itself, then raises
itself at the section's end): ``CAP_SYS_NICE`` or a ``RLIMIT_NICE`` of 20
(:func:`plax_numba.cpu_priority.can_leave_idle`); without it (an unprivileged user,
usually) the threads stay at the normal policy whatever the setting.
"""
from __future__ import annotations

import contextlib
import os
import threading
import time

from plax_numba import cpu_priority, starvation_guard

#: the default of ``PLAX_NUMBA_THREAD_PRIORITY`` (``docs/performance.md``: the figures)
DEFAULT = "normal"


def thread_priority() -> str:
    """``PLAX_NUMBA_THREAD_PRIORITY``: ``normal`` or ``idle`` (default :data:`DEFAULT`); any
    other value warns, naming it, and counts as the default."""
    return cpu_priority.setting("PLAX_NUMBA_THREAD_PRIORITY", DEFAULT,
                                "plax's background compile threads")


#: seconds between two checks of a thread in an idle section
#: (``PLAX_NUMBA_THREAD_GUARD_INTERVAL``; 0: no guard): a section is one of LLVM's steps of a
#: first-tier kernel (milliseconds to tens of them), so a starved one is raised after
#: :func:`plax_numba.starvation_guard.guard_checks` of these (60 ms by default), not after
#: the worker's 0.3 s (measured at 0.1 s: the first tier arrived 0.3-0.4 s later on a
#: loaded host, where the guard raised it in nearly every run)
THREAD_GUARD_INTERVAL = 0.02


def thread_guard_interval() -> float:
    """:data:`THREAD_GUARD_INTERVAL`, or ``$PLAX_NUMBA_THREAD_GUARD_INTERVAL`` (0: off)."""
    from plax.config import env_number
    return env_number("PLAX_NUMBA_THREAD_GUARD_INTERVAL", THREAD_GUARD_INTERVAL, kind=float,
                      minimum=0, warn=True)


def runs_idle() -> bool:
    """Whether the background threads started now run their native sections at
    ``SCHED_IDLE``: asked for, and this process may raise them again
    (:func:`plax_numba.cpu_priority.can_leave_idle`)."""
    return thread_priority() == "idle" and cpu_priority.can_leave_idle()


class Watched:
    """One background thread whose native sections run idle: its guard and its state."""

    def __init__(self, tid: int, guard: starvation_guard.StarvationGuard):
        self.tid, self.guard = tid, guard
        self.depth = 0        # native sections entered and not left (nested)
        self.idle = False     # it runs at SCHED_IDLE now (in a section)
        self.raised = False   # raised by the guard or hurry(): no idle section until lane_idle()
        self.raises = 0       # times raised (tests, benchmarks)


_lock = threading.Lock()  # (never held across a wait, nor by a thread at SCHED_IDLE)
_watched: dict[int, Watched] = {}  # native thread id -> state
_here = threading.local()          # .watched: this thread's Watched, if it is one
_wake = threading.Event()          # a section started: the guard thread checks
_guard_thread: list = []


def register(cpu_seconds=None, set_policy=None, clock=None, **settings) -> Watched | None:
    """Called by a background thread as it starts (:mod:`plax_numba.tiered`'s lanes): from
    now on its :func:`native_section` blocks run at ``SCHED_IDLE`` when :func:`runs_idle`.
    Returns its state (None: it stays at the normal policy). The arguments are the guard's
    (tests inject fakes; default: this thread's ``/proc`` counters, ``sched_setscheduler``,
    the settings' ``interval``, ``checks`` and ``share`` from the environment).

    Example::

      idle_threads.register()  # first thing in the lane's thread
    """
    if not runs_idle():
        _here.watched = None
        return None
    tid = threading.get_native_id()
    watched = Watched(tid, None)
    settings.setdefault("interval", thread_guard_interval())
    guard = starvation_guard.StarvationGuard(
        tid, cpu_seconds=cpu_seconds or starvation_guard.thread_cpu_seconds,
        set_policy=set_policy or (lambda t, idle: _raise(watched, idle)),
        leave_session=None, clock=clock or time.monotonic, **settings)
    watched.guard = guard
    with _lock:
        _watched[tid] = watched
    _here.watched = watched
    return watched


def _raise(watched: Watched, idle: bool) -> None:
    """The guard's policy setter for a thread: raising it is for the rest of its lane's
    queue; lowering it is the thread's own doing, at its next section."""
    if idle:
        return
    with _lock:
        _raise_locked(watched)


def _raise_locked(watched: Watched) -> None:
    watched.raised = True
    watched.raises += 1
    if watched.idle:
        watched.idle = False
        os.sched_setscheduler(watched.tid, os.SCHED_OTHER, os.sched_param(0))


@contextlib.contextmanager
def native_section():
    """Runs the block at ``SCHED_IDLE`` on a registered background thread (:func:`register`),
    else as it is. For blocks that release the GIL (llvmlite's LLVM calls, ``dlopen``); the
    thread is back at the normal policy when the block ends, before it runs more Python.

    Example::

      with idle_threads.native_section():
          engine.finalize_object()
    """
    watched = getattr(_here, "watched", None)
    if watched is None:
        yield
        return
    # (only this thread changes depth; the lock is never held at SCHED_IDLE: the program's
    # thread takes it in hurry())
    watched.depth += 1
    lower = False
    if watched.depth == 1:
        with _lock:
            lower = watched.idle = not watched.raised
    if lower:
        _start_guard()  # (before lowering: a thread inherits its starter's policy)
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            if watched.raised:  # (raised meanwhile, maybe before this call: back up)
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            _wake.set()
        except OSError:
            with _lock:
                watched.idle = False
    try:
        yield
    finally:
        watched.depth -= 1
        if watched.depth == 0 and watched.idle:
            try:
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            except OSError:  # (refused: no more idle sections on this thread)
                _here.watched = None
            with _lock:
                watched.idle = False


def holding_the_gil(fn):
    """``fn`` wrapped to run at the normal policy when it is called inside an idle section:
    for Python callbacks that LLVM makes from a section (the object cache's), which take the
    GIL back (at ``SCHED_IDLE``, a thread holding the GIL could be starved while the
    program's thread waits for it).

    Example::

      engine.set_object_cache(idle_threads.holding_the_gil(notify), ...)
    """
    def wrapped(*args):
        watched = getattr(_here, "watched", None)
        if watched is None or not watched.idle:
            return fn(*args)
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        try:
            return fn(*args)
        finally:
            if watched.idle and not watched.raised:
                os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    return wrapped


def lane_idle() -> None:
    """Called by a background thread when its lane's queue is empty: a raise (by the guard
    or :func:`hurry`) lasts until then."""
    watched = getattr(_here, "watched", None)
    if watched is not None:
        with _lock:
            watched.raised = False


def hurry() -> int:
    """Raises every thread now in an idle native section to the normal policy (until its
    lane's queue is empty): called where the program's thread is about to take a lock such
    a thread may hold (llvmlite's, the loader's), so that it never waits on a thread the
    scheduler starves. Returns how many were raised.

    Example::

      idle_threads.hurry()  # then: with native_loader._lock: ...
    """
    if not _watched or getattr(_here, "watched", None) is not None:
        return 0  # (another background thread waits: the guard is enough for it)
    raised = 0
    with _lock:
        for watched in _watched.values():
            if watched.idle:
                try:
                    _raise_locked(watched)
                    raised += 1
                except OSError:
                    pass
    return raised


def check_all() -> bool:
    """One round of the guards' checks: each watched thread is busy while it is in an idle
    section. Returns whether any is (the guard thread then checks again after its
    interval). Called by the guard thread (tests call it with fake clocks)."""
    with _lock:
        watched = list(_watched.values())
    busy_any = False
    for w in watched:
        busy = w.idle
        busy_any |= busy
        try:
            w.guard.check(busy=busy)
        except OSError:  # (the thread ended)
            pass
    return busy_any


def _start_guard() -> None:
    if _guard_thread or thread_guard_interval() <= 0:
        return
    with _lock:
        if _guard_thread:
            return
        thread = threading.Thread(target=_guard_loop, daemon=True, name="plax-numba-thread-guard")
        _guard_thread.append(thread)
    thread.start()


def _guard_loop() -> None:
    with contextlib.suppress(OSError):  # (the normal policy, whoever started it)
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    interval = thread_guard_interval()
    while True:
        _wake.wait()
        _wake.clear()
        while check_all():
            time.sleep(interval)
        check_all()  # (once more idle: each guard's count starts anew)


def policy_counts() -> dict:
    """What the guards and :func:`hurry` did: ``{"threads": watched, "raises": times raised}``
    (benchmarks report it)."""
    with _lock:
        return {"threads": len(_watched), "raises": sum(w.raises for w in _watched.values())}
