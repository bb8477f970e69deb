"""Two processes over MPI (``mpiexec -n 2``; skipped where mpiexec or mpi4py is missing, i.e.
without ``pip install -e "plugins/plax_pmap[mpi]"``): the global device view, collectives
across processes, ``plax.experimental.multihost_utils``, the data-parallel example (both
ranks end with identical parameters), and a failing device that ends every process instead
of leaving them waiting."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
MPIEXEC = shutil.which("mpiexec", path=os.path.dirname(sys.executable) + os.pathsep
                       + os.environ.get("PATH", ""))
pytestmark = pytest.mark.skipif(MPIEXEC is None or importlib.util.find_spec("mpi4py") is None,
                                reason="needs mpiexec and mpi4py (plax-pmap[mpi])")


def _mpiexec(*args, devices="2", timeout=300):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLAX_", "PMI_"))}
    env.update(PLAX_NUM_CPU_DEVICES=devices, PLAX_PLATFORMS="cpu",
               PLAX_COLLECTIVE_TIMEOUT="60")
    return subprocess.run([MPIEXEC, "-n", "2", sys.executable, *map(str, args)],
                          capture_output=True, text=True, env=env, timeout=timeout)


def test_collectives_across_two_processes():
    proc = _mpiexec(HERE / "mpi_checks.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(re.findall(r"OK \d", proc.stdout)) == ["OK 0", "OK 1"]


def test_multihost_utils_across_two_processes():
    # process_allgather, broadcast_one_to_all (by MPI_Ibcast, and by allgather for a transport
    # without bcast), host_local_array_to_global_array and back, each process with its own data
    proc = _mpiexec(HERE / "mpi_checks.py", "--multihost")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(re.findall(r"OK \d", proc.stdout)) == ["OK 0", "OK 1"]


def test_data_parallel_example_two_processes_agree():
    proc = _mpiexec(REPO / "examples" / "data_parallel.py", "--steps", "3", "--sizes", "64,32,10",
                    "--batch", "32", devices="1")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # the number alone: mpiexec may forward the two ranks' lines interleaved
    sums = re.findall(r"\[process (\d) of 2\] pmap parameter checksum: ([-+]?\d\.\d+e[-+]\d+)",
                      proc.stdout)
    assert sorted(r for r, _ in sums) == ["0", "1"]
    assert len({c for _, c in sums}) == 1, sums
    assert proc.stdout.count("parameters agree to float32 rounding") == 2
    # the shard_map version ran across the two processes too (its parameters are among those
    # compared with single-device training)
    assert len(re.findall(r"shard_map: \d+\.\d+", proc.stdout)) == 2, proc.stdout


def test_a_failing_device_ends_every_process():
    proc = _mpiexec(HERE / "mpi_checks.py", "--fail", timeout=120)
    assert proc.returncode != 0
    assert "NOT REACHED" not in proc.stdout
    assert "the last device fails" in proc.stderr and "CpuDevice(id=3)" in proc.stderr


def test_a_dying_process_ends_the_run():
    proc = _mpiexec(HERE / "mpi_checks.py", "--die", timeout=120)
    assert proc.returncode != 0 and "NOT REACHED" not in proc.stdout
