"""The starvation guard of an idle-priority compile worker (issue 26).

A worker at ``SCHED_IDLE`` (:mod:`plax_numba.cpu_priority`) runs only on what the program
and the host's other processes leave of the CPU. When they keep every core busy (an MLP
step's BLAS threads on a 2-core host) it gets next to nothing, and its kernels arrived after
19-169 s instead of 3-11 s. The guard watches a worker that has jobs: every
:data:`GUARD_INTERVAL` seconds it reads the worker's CPU time (``/proc``), and after
:data:`GUARD_STALLED_CHECKS` checks in a row in which the worker ran less than
:data:`GUARD_MIN_SHARE` of one core, it raises the worker to the normal policy
(``SCHED_OTHER``) for the rest of its queue and moves it to a session of its own (as a
normal worker runs: :func:`ask_to_leave_session`); once its queue is empty it lowers it to
``SCHED_IDLE`` again. So an idle worker costs the program little where the program and the
host leave a core free, and its kernels arrive about as soon as a normal worker's where
they do not (after the stalled checks). Once moved, the worker stays in its own session,
where ``SCHED_IDLE`` is weighed only against itself: from then on it runs as a normal
worker does.

A worker's start and warm-up (numba's import, two small compilations: its first job waits
for them) count as work too. The checks run on the worker's writer thread (:mod:`plax_numba.compile_worker`), a thread of
plax's that waits for jobs to send, never on the program's calls; a check costs two small
``/proc`` reads. The guard is off (the worker stays idle whatever happens) where the CPU time
cannot be read (not Linux), with ``PLAX_NUMBA_GUARD_INTERVAL=0``, or where the system refuses
to raise the policy: leaving ``SCHED_IDLE`` takes ``CAP_SYS_NICE`` or a ``RLIMIT_NICE`` of
20 or more (:func:`plax_numba.cpu_priority.can_leave_idle`), which an unprivileged user
usually lacks (the guard turns itself off at its first refused promotion). Measured, it
did not make ``idle`` a better default than ``normal`` on a busy host
(``docs/performance.md``, "The starvation guard").

Settings (environment variables, read when a worker starts):

* ``PLAX_NUMBA_GUARD_INTERVAL``: seconds between checks (default :data:`GUARD_INTERVAL`;
  0 turns the guard off);
* ``PLAX_NUMBA_GUARD_CHECKS``: stalled checks in a row before the worker is raised
  (default :data:`GUARD_STALLED_CHECKS`);
* ``PLAX_NUMBA_GUARD_MIN_SHARE``: the share of one core under which a check counts as
  stalled (default :data:`GUARD_MIN_SHARE`).
"""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

#: seconds between two checks of a busy idle worker (``PLAX_NUMBA_GUARD_INTERVAL``; 0: off)
GUARD_INTERVAL = 0.1
#: stalled checks in a row that raise the worker to the normal policy
#: (``PLAX_NUMBA_GUARD_CHECKS``): with the interval, 0.3 s without progress
GUARD_STALLED_CHECKS = 3
#: a check is stalled when the worker ran less than this share of one core since the last
#: (``PLAX_NUMBA_GUARD_MIN_SHARE``): an idle worker the program leaves a core to runs ~1.0
GUARD_MIN_SHARE = 0.2


def _setting(name: str, default: float, kind=float) -> float:
    from plax.config import env_number
    # (read where a worker starts, on a background thread: a bad value is named in a warning)
    return env_number(name, default, kind=kind, minimum=0, warn=True)


def guard_interval() -> float:
    """:data:`GUARD_INTERVAL`, or ``$PLAX_NUMBA_GUARD_INTERVAL`` (0: the guard is off)."""
    return _setting("PLAX_NUMBA_GUARD_INTERVAL", GUARD_INTERVAL)


def guard_checks() -> int:
    """:data:`GUARD_STALLED_CHECKS`, or ``$PLAX_NUMBA_GUARD_CHECKS`` (at least 1)."""
    return max(1, _setting("PLAX_NUMBA_GUARD_CHECKS", GUARD_STALLED_CHECKS, int))


def guard_min_share() -> float:
    """:data:`GUARD_MIN_SHARE`, or ``$PLAX_NUMBA_GUARD_MIN_SHARE``."""
    return _setting("PLAX_NUMBA_GUARD_MIN_SHARE", GUARD_MIN_SHARE)


def process_cpu_seconds(pid: int) -> float | None:
    """The CPU time of process ``pid``'s main thread, where its jobs run, in seconds
    (Linux's ``/proc/<pid>/schedstat``, nanoseconds; else ``/proc/<pid>/stat``'s user and
    system ticks, all threads); None where neither can be read (not Linux, or gone).

    Example::

      process_cpu_seconds(os.getpid())  # 0.41
    """
    seconds = _schedstat_seconds(f"/proc/{pid}/schedstat")
    if seconds is not None:
        return seconds
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def _schedstat_seconds(path: str) -> float | None:
    """The first field of the ``schedstat`` file at ``path`` (nanoseconds run), in seconds;
    None where it cannot be read."""
    try:
        with open(path, "rb") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def set_idle(pid: int, idle: bool) -> None:
    """Puts every thread of process ``pid`` at ``SCHED_IDLE`` (``idle``) or ``SCHED_OTHER``.

    Raises:
      OSError: the system refused (``PermissionError`` leaving ``SCHED_IDLE`` without
        ``CAP_SYS_NICE``), or the process is gone.

    Example::

      set_idle(worker_pid, False)  # raised for the rest of its queue
    """
    policy = os.SCHED_IDLE if idle else os.SCHED_OTHER
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    for tid in tids:
        try:
            os.sched_setscheduler(tid, policy, os.sched_param(0))
        except ProcessLookupError:  # (a thread that ended meanwhile)
            if tid == pid:
                raise


#: seconds between asks to a raised worker whose handler for the session move is not in
#: place yet (its interpreter is starting: milliseconds once raised)
ASK_AGAIN = 0.01

#: the signal asking an idle worker to leave the program's session (``os.setsid``; the
#: worker's handler: :func:`leave_session_on_request`)
LEAVE_SESSION_SIGNAL = getattr(signal, "SIGUSR1", None)


def leave_session_on_request() -> None:
    """Called by an idle worker as it starts: on :data:`LEAVE_SESSION_SIGNAL` it moves to a
    session of its own (:func:`ask_to_leave_session`)."""
    def leave(signum, frame):
        try:
            os.setsid()
        except OSError:  # (a session leader already)
            pass
    if LEAVE_SESSION_SIGNAL is not None:
        signal.signal(LEAVE_SESSION_SIGNAL, leave)


def ask_to_leave_session(pid: int) -> bool:
    """Asks worker ``pid`` to move to a session of its own, once its handler is in place
    (``/proc/<pid>/status``'s caught signals: before it, the signal would kill it). True if
    asked; False if not yet (the caller asks again at its next check).

    Why: raised to the normal policy in the program's session, the worker would share the
    program's one share of the CPU with the program's own busy threads (Linux's autogroups:
    :func:`plax_numba.compile_worker._own_session`); in a session of its own it gets a share
    like any other program, as a normal-priority worker does. The move is for good (no
    process can rejoin a session), so a worker lowered again afterwards is weighed only
    against its own session and runs as a normal worker does."""
    if LEAVE_SESSION_SIGNAL is None:
        return True
    try:
        with open(f"/proc/{pid}/status") as f:
            caught = next(int(line.split()[1], 16) for line in f
                          if line.startswith("SigCgt:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return False
    if not caught >> (LEAVE_SESSION_SIGNAL - 1) & 1:
        return False
    try:
        os.kill(pid, LEAVE_SESSION_SIGNAL)
    except OSError:
        return False
    return True


class StarvationGuard:
    """Watches one idle-priority worker: :meth:`check`, called every :attr:`interval`
    seconds while the worker has jobs (and once when its queue empties), raises it after
    :attr:`checks` stalled checks in a row and lowers it when its queue is empty.

    Args:
      pid: the worker's process id.
      interval, checks, share: the settings (default: :func:`guard_interval`,
        :func:`guard_checks`, :func:`guard_min_share`).
      cpu_seconds: reads a process's CPU time (tests inject one; default
        :func:`process_cpu_seconds`).
      set_policy: ``set_policy(pid, idle)`` (default :func:`set_idle`).
      leave_session: ``leave_session(pid)``, asks a raised worker to leave the program's
        session, True once asked (default :func:`ask_to_leave_session`); None: a raised
        worker stays in the program's session, only its policy changes
        (``PLAX_NUMBA_WORKER_SESSION=0``: :func:`plax_numba.compile_worker._own_session`).
      clock: the wall clock (tests inject one).

    Example::

      guard = StarvationGuard(worker.pid)
      guard.check(busy=bool(worker.pending))  # on the writer thread, every guard.interval
    """

    def __init__(self, pid: int, interval: float | None = None, checks: int | None = None,
                 share: float | None = None,
                 cpu_seconds: Callable[[int], float | None] = process_cpu_seconds,
                 set_policy: Callable[[int, bool], None] = set_idle,
                 leave_session: Callable[[int], bool] | None = ask_to_leave_session,
                 clock: Callable[[], float] = time.monotonic):
        self.pid = pid
        self.interval = guard_interval() if interval is None else interval
        self.checks = guard_checks() if checks is None else checks
        self.share = guard_min_share() if share is None else share
        self._cpu_seconds, self._set_policy, self._clock = cpu_seconds, set_policy, clock
        self._leave_session = leave_session
        self.own_session = False  # the worker was asked to leave the program's session
        self._last: tuple[float, float] | None = None  # (clock, CPU seconds) at the last check
        self.stalled = 0       # stalled checks in a row
        self.promoted = False  # the worker runs at the normal policy now
        self.promotions = 0    # times raised (benchmarks and tests read these)
        self.demotions = 0
        self.refused = False   # the system refused to raise it: the guard stops trying

    @property
    def active(self) -> bool:
        """Whether the guard watches at all (a positive interval, not refused)."""
        return self.interval > 0 and not self.refused

    def next_check(self) -> float:
        """Seconds until the next check: :attr:`interval`, or :data:`ASK_AGAIN` while a
        raised worker has not been asked to leave the program's session yet (its handler
        was not in place: meanwhile it shares the program's CPU)."""
        return ASK_AGAIN if self._to_ask() else self.interval

    def _to_ask(self) -> bool:
        """Whether a raised worker is still to be asked to leave the program's session."""
        return self.promoted and not self.own_session and self._leave_session is not None

    def check(self, busy: bool) -> None:
        """One check: ``busy`` says whether the worker has work now (a job sent and not
        answered, or its warm-up).

        A busy worker that ran less than :attr:`share` of a core since the last check
        counts one stalled check; :attr:`checks` in a row raise it. An idle one is lowered
        again if it was raised."""
        if not busy:
            self._last, self.stalled = None, 0
            if self.promoted:
                self.promoted = False
                try:
                    self._set_policy(self.pid, True)
                    self.demotions += 1
                except OSError:  # (gone: its reader thread replaces it)
                    pass
            return
        if self.active and not self.promoted:  # (a raised worker's progress is not watched)
            now, cpu = self._clock(), self._cpu_seconds(self.pid)
            if cpu is None:
                return
            if self._last is not None:
                elapsed = now - self._last[0]
                if elapsed > 0:
                    ran = cpu - self._last[1]
                    self.stalled = self.stalled + 1 if ran < self.share * elapsed else 0
            self._last = (now, cpu)
            if self.stalled < self.checks:
                return
            self.stalled = 0
            try:
                self._set_policy(self.pid, False)
            except PermissionError:
                self.refused = True
                return
            except OSError:  # (gone: its reader thread replaces it)
                return
            self.promoted = True
            self.promotions += 1
        if self._to_ask():
            self.own_session = self._leave_session(self.pid)
