"""``python benchmarks/gpu.py --simulated`` runs every row on the simulated GPU and prints what
one call costs: kernel launches, host copies each way, host fallbacks and device-to-device
copies. A jitted program's call makes no host copy and runs nothing on the host, so those
columns must read 0 (the times mean nothing on the simulation); the MLP rows replay as one CUDA
graph with no copy in, a training loop too, and one whose batch is uploaded each call (its two
uploads are its only host copies), since the batch's blocks recur, and with graphs off they
make at most 18 launches (``no-graph``; the six parameter updates one multi-tensor kernel); the
Gaussian-process solve (cholesky and two triangular solves) replays as one graph; the long-row
cumsum is one kernel (the split path's single pass) and the 3x3 convolution one generated
kernel, as are the cumsums along axis 0 (the few-columns single pass, the column kernel, with
its axis in parts or not) and the SGD update of six parameters (one multi-tensor kernel).
(``--simulated``'s MLP is 784-512-512-10, batch 64: a ninth of 784-2048-2048-10's work on the
simulation, with the same kernels and counts: its two weights still take the update's vector
path, its reductions of the batch are still one launch each.) The CPU table's rows
(benchmarks/compare.py's workloads on the GPU: linreg step, MLP 784-512-512-10, random.normal,
jit(vmap(apply_matrix)), the scan RNN) make one launch per call too, those of several kernels
replayed as a graph (argmax along axis 0: its column kernel and each column's best of its
parts, two launches, one replay; the ``graph`` column, from the program's ``# CUDA graph:`` line, says
``replayed``); the header gives the measured device-to-device copy rate, and selu's bandwidth
is given as a share of it."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from test_simulated_streams import REPO, SIMULATED, child_env

ROWS = ("selu", "matmul 256^2 f32", "matmul 256^2 bf16", "MLP step", "MLP train loop",
        "random.normal", "tiny jit call")
#: rows that replay as one CUDA graph: (launches, h2d, d2h, fallbacks, device copies) per call
GRAPHED = {"MLP step batch": (1, 0, 0, 0, 0), "MLP train loop": (1, 0, 0, 0, 0),
           "MLP loop, batch uploaded": (1, 2, 0, 0, 0), "linreg step": (1, 0, 0, 0, 0),
           "MLP step 784-512-512-10": (1, 0, 0, 0, 0), "FFT filter": (1, 0, 0, 0, 0),
           "GP solve": (1, 0, 0, 0, 0),
           "argmax axis 0 2048x256": (1, 0, 0, 0, 0)}   # (its column kernel and parts' best)
#: rows and their launches per call with CUDA graphs off (the ``no-graph`` column)
UNGRAPHED = {"cumsum 1 row": 1, "conv 3x3": 1, "scan tanh RNN": 1, "FFT filter": 3,
             "argmax axis 0 2048x256": 2, "cumsum axis 0 2048x256": 1,
             "cumsum axis 0 10000x64": 1,
             "SGD update 784-512-512-10": 1,   # (its six updates: one multi-tensor kernel)
             "linreg step": 12}   # (13 before the loss's mean took its division as an epilogue)
#: rows and the most launches per call they may make with CUDA graphs off (issue 24: the MLP
#: step was 54 with jnp's rank promotion, 45 with unit_reductions and folded transposes, 34
#: with one-launch reductions, 23 with the lowering's rewrites before fusion, 18 with the
#: parameter updates as one multi-tensor kernel; docs/gpu.md)
UNGRAPHED_AT_MOST = {"MLP step batch": 18, "MLP train loop": 18, "MLP loop, batch uploaded": 18,
                     "MLP step 784-512-512-10": 18}
#: rows that are one kernel (a program of one launch runs plainly: nothing to replay)
ONE_KERNEL = {"conv 3x3": (1, 0, 0, 0, 0), "cumsum 1 row": (1, 0, 0, 0, 0),
              "random.normal 100k": (1, 0, 0, 0, 0), "jit(vmap(apply_matrix))": (1, 0, 0, 0, 0),
              "scan tanh RNN": (1, 0, 0, 0, 0),   # (plax_cupy.scan_kernel: all the steps)
              # (kernels_rows: the few-columns single pass; the column kernel with its axis in
              # parts, with 1 and 2 segments, and in parts again)
              "cumsum axis 0 100000x4": (1, 0, 0, 0, 0), "cumsum axis 0 2048x256": (1, 0, 0, 0, 0),
              "cumsum axis 0 8x10000": (1, 0, 0, 0, 0), "cumsum axis 0 64x1000": (1, 0, 0, 0, 0),
              "cumsum axis 0 10000x64": (1, 0, 0, 0, 0),
              "SGD update 784-512-512-10": (1, 0, 0, 0, 0)}


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_benchmark_prints_launches_and_no_host_copies_per_call():
    done = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "gpu.py"), "--simulated"],
                          capture_output=True, text=True, env=child_env(), cwd=REPO, timeout=600)
    out = done.stdout
    assert done.returncode == 0, done.stderr[-3000:]
    assert "failed" not in out, out   # (no row failed, nor JAX's beside it)
    assert "launches" in out and "h2d" in out and "d2h" in out and "graph" in out, out
    assert re.search(r"device-to-device copy \d+ GB/s", out), out
    selu = next(ln for ln in out.splitlines() if ln.startswith("selu"))
    assert re.search(r"GB/s \(\d+% of copy", selu), selu
    for row in ROWS + tuple(GRAPHED) + tuple(ONE_KERNEL):
        line = next((ln for ln in out.splitlines() if ln.startswith(row)), None)
        assert line is not None and "failed" not in line, out
        # time, jax, ratio, then: launches h2d d2h fallbacks d2d
        m = re.search(r"ms\s+\S+\s+\S+\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", line)
        assert m, line
        *counts, no_graph = map(int, m.groups())
        counts = tuple(counts)
        if row in UNGRAPHED:
            assert no_graph == UNGRAPHED[row], line
        if row in UNGRAPHED_AT_MOST:
            assert no_graph <= UNGRAPHED_AT_MOST[row], line
        if row in GRAPHED or row in ONE_KERNEL:
            assert counts == {**GRAPHED, **ONE_KERNEL}[row], line
        if row in GRAPHED:
            assert line.endswith(" replayed, verified"), line   # (graph_check)
        else:
            assert counts[0] >= 1, line
            assert counts[1:4] == (0, 0, 0), line
