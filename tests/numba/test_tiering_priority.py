"""How the compile worker is scheduled (issue 26, the main thread's longest pause):
``PLAX_NUMBA_WORKER_PRIORITY=idle`` runs it at ``SCHED_IDLE`` in the program's session, the
default at the normal policy in a session of its own. Checked on what the kernel reports,
never on timing (``benchmarks/numba_tiering.py`` measures the pauses)."""
from __future__ import annotations

import os
import time
import warnings

import pytest

from plax_numba import cpu_priority

pytestmark = pytest.mark.skipif(not cpu_priority.idle_available(),
                                reason="SCHED_IDLE is Linux's")


def test_the_setting_is_read_and_a_typo_is_named(monkeypatch):
    monkeypatch.delenv("PLAX_NUMBA_WORKER_PRIORITY", raising=False)
    assert cpu_priority.worker_priority() == "normal" and not cpu_priority.worker_runs_idle()
    monkeypatch.setenv("PLAX_NUMBA_WORKER_PRIORITY", " IDLE ")
    assert cpu_priority.worker_runs_idle()
    monkeypatch.setenv("PLAX_NUMBA_WORKER_PRIORITY", "idel")
    with pytest.warns(UserWarning, match="'idel' is not one of normal, idle"):
        assert cpu_priority.worker_priority() == "normal"


def _worker(monkeypatch, priority: str) -> int:
    """The pid of a compile worker started with ``priority`` (the pool's workers stopped
    first, so that one starts now), once it has set its policy up."""
    from plax_numba import compile_worker
    monkeypatch.setenv("PLAX_NUMBA_WORKER_PRIORITY", priority)
    monkeypatch.delenv("PLAX_NUMBA_SYNC", raising=False)
    monkeypatch.delenv("PLAX_NUMBA_WORKERS", raising=False)
    compile_worker.shutdown()
    compile_worker.restart_allowed()
    compile_worker._pool.prestart()
    (pid,) = compile_worker.worker_pids()
    # (the policy is set as the worker starts, and the worker's handler for the session
    # move is in place before it imports numba: wait for that import, timing nothing)
    deadline = time.monotonic() + 120
    while "numba" not in open(f"/proc/{pid}/maps").read():
        assert time.monotonic() < deadline, "the worker never imported numba"
        time.sleep(0.05)
    return pid


@pytest.mark.parametrize("priority", ["idle", "normal"])
def test_the_compile_worker_runs_at_the_priority_asked_for(monkeypatch, priority):
    from plax_numba import compile_worker
    # (the guard off: on a busy host it could raise the worker while it warms up)
    monkeypatch.setenv("PLAX_NUMBA_GUARD_INTERVAL", "0")
    try:
        pid = _worker(monkeypatch, priority)
        idle = priority == "idle"
        assert os.sched_getscheduler(pid) == (os.SCHED_IDLE if idle else os.SCHED_OTHER)
        # idle: in the program's session (across sessions the policy would weigh nothing);
        # normal: in a session of its own, sharing the CPU like any other program
        assert (os.getsid(pid) == os.getsid(0)) == (idle or not compile_worker._own_session())
    finally:
        compile_worker.shutdown()  # (later tests start a worker of the default kind)
        compile_worker.restart_allowed()


def test_a_refused_policy_leaves_the_worker_running(monkeypatch):
    calls = []

    def refuse(*args):
        calls.append(args)
        raise PermissionError("not here")
    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cpu_priority.enter_worker_priority(True, 1234)
        cpu_priority.enter_worker_priority(False, 1234)
    assert [a[:2] for a in calls] == [(1234, os.SCHED_IDLE)]


# ---------------------------------------------------------------- the starvation guard

class _FakeWorker:
    """A worker's CPU time and policy as the guard sees them, on a fake clock."""

    def __init__(self):
        self.now, self.cpu, self.idle, self.refuse = 0.0, 0.0, True, False
        self.calls = []
        self.handler = False  # the worker's handler for the session move is in place

    def advance(self, seconds: float, share: float) -> None:
        self.now += seconds
        self.cpu += seconds * share

    def set_policy(self, pid: int, idle: bool) -> None:
        self.calls.append((pid, idle))
        if self.refuse and not idle:
            raise PermissionError("leaving SCHED_IDLE takes CAP_SYS_NICE")
        self.idle = idle

    def leave_session(self, pid: int) -> bool:
        self.calls.append((pid, "leave session"))
        return self.handler

    def guard(self, **settings):
        from plax_numba.starvation_guard import StarvationGuard
        settings = {"interval": 0.1, "checks": 3, "share": 0.2,
                    "leave_session": self.leave_session, **settings}
        return StarvationGuard(7, cpu_seconds=lambda pid: self.cpu,
                               set_policy=self.set_policy, clock=lambda: self.now, **settings)


def test_the_guard_raises_a_starved_worker_after_its_stalled_checks_and_lowers_it_idle():
    from plax_numba import starvation_guard
    fake = _FakeWorker()
    guard = fake.guard()
    guard.check(busy=True)  # the first check only takes the worker's CPU time
    for _ in range(2):
        fake.advance(0.1, share=0.05)  # (under 0.2 of a core: stalled)
        guard.check(busy=True)
        assert fake.idle and not guard.promoted
    fake.advance(0.1, share=0.5)  # progress: the count starts again
    guard.check(busy=True)
    for _ in range(2):
        fake.advance(0.1, share=0.0)
        guard.check(busy=True)
    assert fake.idle and guard.stalled == 2
    fake.advance(0.1, share=0.0)
    guard.check(busy=True)  # the third stalled check in a row
    assert not fake.idle and guard.promoted and guard.promotions == 1
    # raised for the rest of its queue, whatever it gets now; asked to leave the program's
    # session at each check until its handler is in place, then no more
    assert guard.next_check() == starvation_guard.ASK_AGAIN  # (asked again soon)
    fake.advance(0.1, share=1.0)
    guard.check(busy=True)
    fake.handler = True
    for _ in range(3):
        fake.advance(0.1, share=1.0)
        guard.check(busy=True)
    assert fake.calls == [(7, False)] + [(7, "leave session")] * 3 and guard.own_session
    assert guard.next_check() == guard.interval
    guard.check(busy=False)  # its queue is empty: lowered again
    assert fake.idle and not guard.promoted and guard.demotions == 1
    assert fake.calls[-1] == (7, True)


def test_with_worker_sessions_off_a_raised_worker_stays_in_the_program_s_session(monkeypatch):
    """``PLAX_NUMBA_WORKER_SESSION=0``: the guard raises a starved worker (its policy) but
    never asks it to leave the program's session, and checks at its interval, not
    :data:`ASK_AGAIN`; on (the default) the worker's guard asks. The pool's guard is
    built by ``compile_worker._guard_for`` from the setting."""
    from plax_numba import compile_worker, starvation_guard
    fake = _FakeWorker()
    fake.handler = True
    guard = fake.guard(leave_session=None)
    guard.check(busy=True)
    for _ in range(3):
        fake.advance(0.1, share=0.0)
        guard.check(busy=True)
    assert guard.promoted and not fake.idle and fake.calls == [(7, False)]
    assert guard.next_check() == guard.interval and not guard.own_session
    guard.check(busy=False)   # lowered again, still without a session move
    assert fake.calls == [(7, False), (7, True)]
    monkeypatch.delenv("PLAX_NUMBA_GUARD_INTERVAL", raising=False)
    monkeypatch.setenv("PLAX_NUMBA_WORKER_SESSION", "0")
    assert compile_worker._guard_for(7)._leave_session is None
    monkeypatch.setenv("PLAX_NUMBA_WORKER_SESSION", "1")
    assert compile_worker._guard_for(7)._leave_session is starvation_guard.ask_to_leave_session
    monkeypatch.setenv("PLAX_NUMBA_GUARD_INTERVAL", "0")   # (a guard that would not watch)
    assert compile_worker._guard_for(7) is None


def test_a_worker_that_progresses_or_a_refusal_is_left_idle():
    fake = _FakeWorker()
    guard = fake.guard()
    for _ in range(10):
        guard.check(busy=True)
        fake.advance(0.1, share=0.3)
    assert fake.calls == [] and guard.stalled == 0
    fake.refuse = True
    for _ in range(4):
        fake.advance(0.1, share=0.0)
        guard.check(busy=True)
    assert guard.refused and not guard.active and fake.idle and fake.calls == [(7, False)]
    for _ in range(4):  # a refused guard stops trying
        fake.advance(0.1, share=0.0)
        guard.check(busy=True)
    assert fake.calls == [(7, False)] and not guard.own_session


def test_the_guard_settings_are_read_and_a_typo_is_named(monkeypatch):
    from plax_numba import starvation_guard
    monkeypatch.setenv("PLAX_NUMBA_GUARD_INTERVAL", "0")
    assert starvation_guard.guard_interval() == 0
    assert not _FakeWorker().guard(interval=None).active
    monkeypatch.setenv("PLAX_NUMBA_GUARD_CHECKS", "5")
    assert starvation_guard.guard_checks() == 5
    monkeypatch.setenv("PLAX_NUMBA_GUARD_MIN_SHARE", "lots")
    with pytest.warns(UserWarning, match="'lots' for the environment variable PLAX_NUMBA_GUARD_MIN_SHARE"):
        assert starvation_guard.guard_min_share() == starvation_guard.GUARD_MIN_SHARE


def test_a_real_idle_worker_is_raised_by_its_guard_and_lowered_when_its_queue_empties(
        monkeypatch):
    """The scheduler's own record of the worker's policy: SCHED_IDLE at rest, SCHED_OTHER
    (and a session of its own) after a forced promotion, and the pool's guard (on the writer thread) raising it while a
    job makes no progress (it sleeps) and lowering it once its queue is empty."""
    from plax_numba import compile_worker, starvation_guard
    if not cpu_priority.can_leave_idle():
        pytest.skip("leaving SCHED_IDLE takes CAP_SYS_NICE or RLIMIT_NICE >= 20 here")
    monkeypatch.setenv("PLAX_NUMBA_GUARD_INTERVAL", "0.02")
    monkeypatch.setenv("PLAX_NUMBA_GUARD_CHECKS", "2")
    try:
        pid = _worker(monkeypatch, "idle")
        # at rest: warm (its guard may have raised it while it warmed up, on a busy host,
        # and lowers it once it is warm)
        deadline = time.monotonic() + 120
        while not (compile_worker._pool.workers[0].warm
                   and os.sched_getscheduler(pid) == os.SCHED_IDLE):
            assert time.monotonic() < deadline, "the worker never came to rest at idle"
            time.sleep(0.01)
        forced = starvation_guard.StarvationGuard(pid, interval=1.0, checks=1, share=1.0,
                                                  cpu_seconds=lambda pid: 0.0)
        forced.check(busy=True)
        forced.check(busy=True)  # (a fake reader: no progress at all)
        assert forced.promoted and os.sched_getscheduler(pid) == os.SCHED_OTHER
        # and it moves to a session of its own when asked (its handler was in place:
        # numba imported comes after it)
        assert forced.own_session
        deadline = time.monotonic() + 60
        while os.getsid(pid) != pid:
            assert time.monotonic() < deadline, "the worker never left the program's session"
            time.sleep(0.01)
        forced.check(busy=False)
        assert os.sched_getscheduler(pid) == os.SCHED_IDLE
        # a job that sleeps: busy without progress, as a starved one is
        before = compile_worker.guard_counts()  # (its warm-up may have been raised too)
        compile_worker.submit(time.sleep, 0.5).result(timeout=120)
        deadline = time.monotonic() + 60
        while compile_worker.guard_counts()["demotions"] <= before["demotions"]:
            assert time.monotonic() < deadline, "the guard never lowered the worker again"
            time.sleep(0.01)
        assert compile_worker.guard_counts()["promotions"] > before["promotions"]
        assert os.sched_getscheduler(pid) == os.SCHED_IDLE
    finally:
        compile_worker.shutdown()
        compile_worker.restart_allowed()
