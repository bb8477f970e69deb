"""plax's background compile threads at ``SCHED_IDLE`` while they run LLVM
(:mod:`plax_numba.idle_threads`, ``PLAX_NUMBA_THREAD_PRIORITY=idle``; issue 26, the main
thread's longest pause). Checked on the policy the kernel reports and on fake clocks, never
on timing (``benchmarks/numba_tiering.py --rounds`` measures the pauses)."""
from __future__ import annotations

import os
import threading
import warnings

import numpy as np
import pytest

from plax_numba import cpu_priority, idle_threads
from test_tiering_worker import tiered_fresh  # noqa: F401 - the fixture (an empty cache)

# (SCHED_IDLE is Linux's; a thread leaving it needs CAP_SYS_NICE or RLIMIT_NICE >= 20,
# without which idle_threads keeps every thread at the normal policy)
pytestmark = pytest.mark.skipif(
    not cpu_priority.can_leave_idle(),
    reason="no SCHED_IDLE here, or no right to leave it (CAP_SYS_NICE or RLIMIT_NICE)")


@pytest.fixture
def isolated(monkeypatch):
    """The threads registered by a test, apart from any earlier ones, with no guard thread
    checking them (the test calls :func:`idle_threads.check_all` itself)."""
    monkeypatch.setenv("PLAX_NUMBA_THREAD_PRIORITY", "idle")
    monkeypatch.setattr(idle_threads, "_watched", {})
    monkeypatch.setattr(idle_threads, "_wake", threading.Event())
    monkeypatch.setattr(idle_threads, "_guard_thread", ["(none in this test)"])


class _Lane:
    """A thread registered as a lane thread is, running the steps handed to it and
    reporting its own policy (``os.sched_getscheduler(0)``) after each."""

    def __init__(self, **guard):
        self.steps, self.done = [], threading.Event()
        self.go, self.ready = threading.Semaphore(0), threading.Semaphore(0)
        self.watched, self.policies = None, []
        self.thread = threading.Thread(target=self._run, args=(guard,), daemon=True)
        self.thread.start()
        assert self.ready.acquire(timeout=60)

    def _run(self, guard):
        self.watched = idle_threads.register(**guard)
        self.tid = threading.get_native_id()
        self.ready.release()
        while True:
            self.go.acquire()
            step = self.steps.pop(0)
            if step is None:
                return
            step()
            self.policies.append(os.sched_getscheduler(0))
            self.ready.release()

    def run(self, step) -> int:
        """Runs ``step`` on the thread; its policy afterwards."""
        self.steps.append(step)
        self.go.release()
        assert self.ready.acquire(timeout=60)
        return self.policies[-1]

    def enter_section(self):
        """Starts a step that enters a native section and stays in it until
        :meth:`leave_section`; returns once the thread is in it."""
        self.inside, self.release = threading.Event(), threading.Event()

        def section():
            with idle_threads.native_section():
                self.inside.set()
                self.release.wait(60)
        self.steps.append(section)
        self.go.release()
        assert self.inside.wait(60)

    def leave_section(self) -> int:
        """Ends :meth:`enter_section`'s step; the thread's policy afterwards."""
        self.release.set()
        assert self.ready.acquire(timeout=60)
        return self.policies[-1]

    def stop(self):
        if getattr(self, "release", None) is not None:
            self.release.set()
        self.steps.append(None)
        self.go.release()
        self.thread.join(timeout=60)


def test_a_setting_typo_is_named_and_normal_registers_nothing(monkeypatch):
    monkeypatch.setenv("PLAX_NUMBA_THREAD_PRIORITY", "idel")
    with pytest.warns(UserWarning, match="PLAX_NUMBA_THREAD_PRIORITY='idel' is not one of"):
        assert idle_threads.thread_priority() == idle_threads.DEFAULT
    monkeypatch.setenv("PLAX_NUMBA_THREAD_PRIORITY", "normal")
    lane = _Lane()
    try:
        assert lane.watched is None
        # a section on an unregistered thread changes nothing
        seen = []

        def section():
            with idle_threads.native_section():
                seen.append(os.sched_getscheduler(0))
        lane.run(section)
        assert seen == [os.SCHED_OTHER]
    finally:
        lane.stop()


def test_a_lane_thread_is_idle_in_its_native_sections_only_and_a_forced_raise_lasts(
        isolated):
    lane = _Lane()
    seen = {}

    def section():
        with idle_threads.native_section():
            with idle_threads.native_section():  # (nested: one lowering, one raise)
                seen["in"] = os.sched_getscheduler(0)
            seen["still in"] = os.sched_getscheduler(0)
            # a callback LLVM makes from a section takes the GIL: at the normal policy
            seen["callback"] = idle_threads.holding_the_gil(os.sched_getscheduler)(0)
            seen["after callback"] = os.sched_getscheduler(0)
    try:
        assert lane.watched is not None and lane.watched.tid == lane.tid
        assert os.sched_getscheduler(lane.tid) == os.SCHED_OTHER  # at rest
        assert lane.run(section) == os.SCHED_OTHER  # back after it
        assert seen == {"in": os.SCHED_IDLE, "still in": os.SCHED_IDLE,
                        "callback": os.SCHED_OTHER, "after callback": os.SCHED_IDLE}
        # forced: the program's thread raises a thread in a section (hurry(), before it
        # takes a lock such a thread may hold); it stays raised until its queue is empty
        lane.enter_section()
        assert os.sched_getscheduler(lane.tid) == os.SCHED_IDLE
        assert idle_threads.hurry() == 1
        assert os.sched_getscheduler(lane.tid) == os.SCHED_OTHER
        assert lane.leave_section() == os.SCHED_OTHER
        lane.run(section)
        assert seen["in"] == os.SCHED_OTHER and lane.watched.raises == 1  # still raised
        lane.run(idle_threads.lane_idle)  # its queue emptied: idle sections again
        lane.run(section)
        assert seen["in"] == os.SCHED_IDLE
        assert idle_threads.hurry() == 0  # (nobody in a section)
    finally:
        lane.stop()


def _fake_lane():
    """A lane whose guard reads a fake clock and a fake CPU time (both lists of one float,
    returned with it), at the guard's default checks and share."""
    clock, cpu = [0.0], [0.0]
    lane = _Lane(cpu_seconds=lambda tid: cpu[0], clock=lambda: clock[0],
                 interval=0.1, checks=3, share=0.2)
    return lane, clock, cpu


def test_the_guard_raises_a_thread_starved_in_a_section(isolated):
    """The guard's thread path, on a fake clock and a fake CPU reader: a thread in an idle
    section that runs under the guard's share for its checks in a row is raised (its real
    policy), for the rest of its lane's queue; one out of a section is not checked."""
    lane, clock, cpu = _fake_lane()
    try:
        assert not idle_threads.check_all()  # at rest: not busy, nothing done
        lane.enter_section()
        assert idle_threads.check_all()  # the first check only reads its CPU time
        for _ in range(2):
            clock[0] += 0.1
            cpu[0] += 0.005  # (under 0.2 of a core: stalled)
            assert idle_threads.check_all()
            assert os.sched_getscheduler(lane.tid) == os.SCHED_IDLE
        clock[0] += 0.1
        idle_threads.check_all()  # the third stalled check in a row
        assert os.sched_getscheduler(lane.tid) == os.SCHED_OTHER
        assert lane.watched.raises == 1 and lane.watched.raised
        assert idle_threads.policy_counts() == {"threads": 1, "raises": 1}
        assert lane.leave_section() == os.SCHED_OTHER
        clock[0] += 0.1
        assert not idle_threads.check_all()  # out of its section: the guard lets it be
        lane.run(idle_threads.lane_idle)
        assert not lane.watched.raised
    finally:
        lane.stop()


def test_a_section_that_progresses_is_left_idle(isolated):
    lane, clock, cpu = _fake_lane()
    try:
        lane.enter_section()
        for _ in range(6):
            idle_threads.check_all()
            clock[0] += 0.1
            cpu[0] += 0.05  # half a core: progress
        assert os.sched_getscheduler(lane.tid) == os.SCHED_IDLE and lane.watched.raises == 0
    finally:
        lane.stop()


def test_tiering_with_idle_threads_and_worker_falls_back_once_on_a_failed_compile(
        monkeypatch, tiered_fresh):
    """The whole path at idle priority (threads and worker): a kernel the worker fails to
    compile warns once and its first tier (built in an idle section) keeps giving the right
    values; every thread of plax's (the lanes, the guard's, the worker's reader and writer)
    is at the normal policy at rest."""
    import plax
    from plax import numpy as jnp
    from plax.lowering import PlaxFallbackWarning
    from plax_numba import cache, compile_worker, llvm_tier, tiered
    monkeypatch.setenv("PLAX_NUMBA_THREAD_PRIORITY", "idle")
    monkeypatch.setenv("PLAX_NUMBA_WORKER_PRIORITY", "idle")
    monkeypatch.setenv("PLAX_NUMBA_FIRST_TIER", "1")  # (the default; conftest turns it off)
    assert tiered.wait_idle(timeout=300)
    monkeypatch.setattr(tiered, "_lanes", {})  # (fresh lane threads, registered as idle)
    real = cache.module_source

    def failing(kernel_source, primitives):  # the module raises when the worker imports it
        return real(kernel_source, primitives) + "\nraise RuntimeError('simulated failure')\n"
    monkeypatch.setattr(cache, "module_source", failing)
    x = np.linspace(0, 1, 7, dtype=np.float32)
    f = plax.jit(lambda x: jnp.tanh(x) * 1.5 - x, backend="numba")
    built = llvm_tier.stats["built"]
    compile_worker.shutdown()
    compile_worker.restart_allowed()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            outs = [np.asarray(f(x)) for _ in range(2)]
            assert tiered.wait_idle(timeout=300)
            outs += [np.asarray(f(x)) for _ in range(2)]
            assert tiered.wait_idle(timeout=300)
        msgs = [str(w.message) for w in caught if issubclass(w.category, PlaxFallbackWarning)
                and "compile worker" in str(w.message)]
        assert len(msgs) == 1 and "simulated failure" in msgs[0], msgs
        for out in outs:
            np.testing.assert_allclose(out, np.tanh(x) * 1.5 - x, rtol=1e-6, atol=1e-6)
        assert llvm_tier.stats["built"] == built + 1
        ours = {t.name: os.sched_getscheduler(t.native_id) for t in threading.enumerate()
                if t.name.startswith("plax-numba")}
        assert {"plax-numba-first-tier", "plax-numba-compile",
                "plax-numba-thread-guard"} <= set(ours), ours
        assert set(ours.values()) == {os.SCHED_OTHER}, ours
        assert compile_worker.worker_pids()
    finally:
        compile_worker.shutdown()
        compile_worker.restart_allowed()
