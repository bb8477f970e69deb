"""The CuPy backend run end to end on the simulated GPU of ``fake_cupy`` (the generated CUDA
kernels compiled for the host, one thread per block, behind a NumPy stand-in for CuPy), in a
child process so that the stand-in never meets the real CuPy of this session:

* ``tests/cupy/test_gpu.py`` -- the GPU tests themselves (devices, eager, jit with fused and
  reduction kernels, PRNG bits against the CPU backends, bfloat16, control flow, DLPack,
  out-of-memory errors);
* (``benchmarks/gpu.py --simulated``, the GPU benchmark script through every row on this
  simulation, is tests/cupy/test_simulated_benchmark.py's: it checks every row's counters,
  and that no row failed.)

This checks plax's side of the backend (transfers, dispatch, the lowered programs, the
launchers' marshalling and launch configurations), not CuPy or the device. The conformance kit
runs on it the same way (docs/gpu.md); that takes minutes, so it is not part of this file.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))

pytestmark = pytest.mark.skipif(shutil.which("g++") is None,
                                reason="no C++ compiler (g++) for the simulated GPU")


def _env():
    path = os.pathsep.join([HERE, os.path.join(REPO, "backends"), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    env.pop("PYTEST_ADDOPTS", None)
    return env


def test_gpu_tests_pass_on_the_simulated_gpu():
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "fake_cupy_plugin", "-q",
                           "-p", "no:cacheprovider", os.path.join(HERE, "test_gpu.py")],
                          capture_output=True, text=True, env=_env(), cwd=REPO, timeout=600)
    tail = done.stdout[-3000:] + done.stderr[-2000:]
    assert done.returncode == 0, tail
    assert " passed" in done.stdout and "failed" not in done.stdout, tail
