"""The benchmarks' pause probe (``benchmarks/pause_probe.py``) and worker-scheduling
comparison (``benchmarks/worker_scheduling.py``): how a pause is attributed, and that the
scripts run. Nothing is timed; the attribution is checked on records built by hand."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
import pause_probe  # noqa: E402


def _record(gap, threads, worker=0.0, steps=()):
    return {"tag": "compiling", "at": 0.0, "gap": gap, "window": gap, "threads": threads,
            "worker": worker, "faults": (0, 0), "steps": list(steps), "stacks": {}}


def test_a_pause_queued_behind_the_worker_is_attributed_to_it():
    # the probe queued 6 ms, the worker ran 4 of them: at most 4 ms is the compilation's
    r = _record(0.006, {"probe": (0.0001, 0.006), "main": (0.002, 0.0)}, worker=0.004)
    assert pause_probe.attributable(r) == pytest.approx(0.004)
    assert pause_probe.cause(r) == "probe queued, worker ran"


def test_a_pause_of_the_programs_own_thread_is_not_attributed():
    r = _record(0.005, {"probe": (0.0001, 0.0), "main": (0.005, 0.0)})
    assert pause_probe.attributable(r) == 0.0
    assert pause_probe.cause(r) == "the program's thread ran (GIL)"


def test_plax_threads_and_steps_on_the_program_thread_count_up_to_the_pause():
    r = _record(0.003, {"plax-numba-first-tier": (0.002, 0.0), "main": (0.003, 0.0)},
                steps=[(True, "plan", 0.002), (False, "link", 0.001)])
    # 2 ms of the first tier's thread + 2 ms of plan on the program's thread, capped at 3 ms
    assert pause_probe.attributable(r) == pytest.approx(0.003)
    assert "plax" in pause_probe.describe(r) and "plan (main) 2.00" in pause_probe.describe(r)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_worker_scheduling_prints_a_row_per_setting():
    proc = subprocess.run([sys.executable, str(BENCHMARKS / "worker_scheduling.py"),
                           "--rounds", "1", "--seconds", "0.1", "--settings", "none",
                           "normal, own session"], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[0] for row in rows] == ["| setting", "| none",
                                                    "| normal, own session"]
    worker_cpu = float(rows[2].strip(" |").split(" | ")[4])
    assert worker_cpu > 0.0  # the stand-in worker ran
