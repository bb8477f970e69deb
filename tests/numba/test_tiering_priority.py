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
    # (the policy is set as the worker's interpreter starts: wait for its first import of
    # numba, which comes after, without timing anything)
    deadline = time.monotonic() + 120
    while "numba" not in open(f"/proc/{pid}/maps").read():
        assert time.monotonic() < deadline, "the worker never imported numba"
        time.sleep(0.05)
    return pid


@pytest.mark.parametrize("priority", ["idle", "normal"])
def test_the_compile_worker_runs_at_the_priority_asked_for(monkeypatch, priority):
    from plax_numba import compile_worker
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
        cpu_priority.enter_worker_priority(True)
        cpu_priority.enter_worker_priority(False)
    assert [a[1] for a in calls] == [os.SCHED_IDLE]
