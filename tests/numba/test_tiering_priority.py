"""Compile work yields the CPU to the program (issue 26, the main thread's longest pause):
the compile worker runs at idle policy when alone in its autogroup, and it and plax's
background threads ask for a long time slice, so a waking program thread gets a core at
once. Checked on the settings the kernel reports, never on timing
(``benchmarks/numba_tiering.py`` measures the pauses)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from plax_numba import cpu_priority

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="scheduling policies and slices are Linux's")


def _slices_supported() -> bool:
    """Whether this kernel takes a per-thread slice request (Linux 6.12+): tried in a thread
    of its own, which ends with it."""
    seen = []

    def probe():
        ok = cpu_priority.request_long_slice()
        seen.append(ok and cpu_priority.slice_ns(f"self/task/{threading.get_native_id()}")
                    == cpu_priority.LONG_SLICE_NS)
    t = threading.Thread(target=probe)
    t.start()
    t.join()
    return seen[0]


def _autogroup_on() -> bool:
    try:
        with open("/proc/sys/kernel/sched_autogroup_enabled") as f:
            return f.read().strip() == "1"
    except OSError:
        return False


def test_the_worker_policy_is_idle_only_alone_in_its_autogroup(monkeypatch):
    monkeypatch.delenv("PLAX_NUMBA_WORKER_PRIORITY", raising=False)
    assert cpu_priority.worker_policy(alone=True) == os.SCHED_IDLE
    assert cpu_priority.worker_policy(alone=False) == os.SCHED_OTHER
    monkeypatch.setenv("PLAX_NUMBA_WORKER_PRIORITY", "normal")
    assert cpu_priority.worker_policy(alone=True) == os.SCHED_OTHER


def test_alone_in_autogroup_reads_the_kernel_flag(tmp_path):
    flag = tmp_path / "flag"
    flag.write_text("0\n")
    assert not cpu_priority.alone_in_autogroup(str(flag))
    flag.write_text("1\n")
    # this test's process does not lead its session under pytest unless started so
    assert cpu_priority.alone_in_autogroup(str(flag)) == (os.getsid(0) == os.getpid())
    assert not cpu_priority.alone_in_autogroup(str(tmp_path / "absent"))


_YIELD = textwrap.dedent("""
    import os
    from plax_numba import cpu_priority
    cpu_priority.yield_worker()
    print(os.sched_getscheduler(0), cpu_priority.slice_ns())
""")


@pytest.mark.parametrize("own_session", [True, False])
@pytest.mark.parametrize("setting", ["yield", "normal"])
def test_yield_worker_sets_what_the_kernel_reports(own_session, setting):
    env = dict(os.environ, PLAX_NUMBA_WORKER_PRIORITY=setting)
    proc = subprocess.run([sys.executable, "-c", _YIELD], capture_output=True, text=True,
                          env=env, timeout=120, start_new_session=own_session)
    assert proc.returncode == 0, proc.stderr[-2000:]
    policy, slice_ns = proc.stdout.split()
    idle = setting == "yield" and own_session and _autogroup_on()
    assert int(policy) == (os.SCHED_IDLE if idle else os.SCHED_OTHER)
    if _slices_supported() and not idle:  # (the kernel shows no slice of an idle task)
        assert (int(slice_ns) == cpu_priority.LONG_SLICE_NS) == (setting == "yield")


def _policy_and_slice(pid: int) -> tuple:
    return os.sched_getscheduler(pid), cpu_priority.slice_ns(pid)


def test_the_compile_worker_and_the_background_lanes_yield(monkeypatch):
    from plax_numba import compile_worker, tiered
    monkeypatch.delenv("PLAX_NUMBA_WORKER_PRIORITY", raising=False)
    monkeypatch.delenv("PLAX_NUMBA_SYNC", raising=False)
    monkeypatch.delenv("PLAX_NUMBA_WORKERS", raising=False)
    compile_worker.restart_allowed()
    compile_worker.prestart()
    deadline = time.monotonic() + 120
    idle = _autogroup_on() and compile_worker._own_session()
    want = os.SCHED_IDLE if idle else os.SCHED_OTHER
    while True:  # (the worker sets its policy as it starts: poll, without timing anything)
        pids = compile_worker.worker_pids()
        policy = _policy_and_slice(pids[0])[0] if pids else None
        if policy == want:
            break
        assert time.monotonic() < deadline, f"worker policy {policy}, expected {want}"
        time.sleep(0.05)
    slices = _slices_supported()
    while slices and not idle and _policy_and_slice(pids[0])[1] != cpu_priority.LONG_SLICE_NS:
        assert time.monotonic() < deadline, "the worker kept the default slice"
        time.sleep(0.05)
    seen = []
    tiered.submit(lambda: seen.append(
        cpu_priority.slice_ns(f"self/task/{threading.get_native_id()}")), lane="test lane")
    assert tiered.wait_idle(60)
    assert seen and (seen[0] == cpu_priority.LONG_SLICE_NS or not slices)
