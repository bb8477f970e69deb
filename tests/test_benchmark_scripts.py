"""The benchmark scripts run, and say which backend and device they measured.

Each runs with tiny counts in a fresh interpreter (the timings themselves are not checked).
"""
from __future__ import annotations

import plax
from subprocess_util import REPO, run_python


def _run(script: str, *args: str, env: dict | None = None) -> list[str]:
    proc = run_python(args=[str(REPO / "benchmarks" / script), *args], env=env, timeout=300)
    return proc.stdout.splitlines()


def test_eager_overhead_names_backend_and_device():
    lines = _run("eager_overhead.py", "--number", "5", "--repeat", "1")
    default = plax.devices()[0]
    assert lines[0] == (f"plax: backend {default.backend.name!r} on {default!r} "
                        f"(platform {default.platform})")
    assert any(line.startswith("x + y ") for line in lines)
    lines = _run("eager_overhead.py", "--number", "5", "--repeat", "1",
                 env={"PLAX_BACKEND": "numpy"})
    assert lines[0] == "plax: backend 'numpy' on CpuDevice(id=0) (platform cpu)"


def test_jit_overhead_names_backend_and_device():
    lines = _run("jit_overhead.py", "--number", "5", "--repeat", "1", "--backend", "numpy")
    assert lines[0] == "plax: backend 'numpy' on CpuDevice(id=0) (platform cpu)"
    assert any(line.startswith("add(x, y) on f32[3]") for line in lines)
    assert any(line.startswith("add(x, y), NumPy f32[3]") for line in lines)


def test_random_normal_names_each_backends_device():
    lines = _run("random_normal.py", "--size", "1000", "--repeat", "1")
    [numpy_row] = [line for line in lines if line.startswith("numpy ")]
    assert numpy_row.split()[1] == "CpuDevice(id=0)"


def test_control_flow_names_backend_and_device_and_every_workload():
    lines = _run("control_flow.py", "--number", "1", "--repeat", "1")
    default = plax.devices()[0]
    assert lines[0] == (f"plax: backend {default.backend.name!r} on {default!r} "
                        f"(platform {default.platform})")
    for workload in ("scan tanh RNN 1000x64", "fori_loop 10k scalar", "cholesky 1000x64x64",
                     "conv 3x3 32x32x64 b32"):
        assert any(line.startswith(workload + " ") for line in lines), workload
    lines = _run("control_flow.py", "--number", "1", "--repeat", "1", "--backend", "numpy")
    assert lines[0] == "plax: backend 'numpy' on CpuDevice(id=0) (platform cpu)"


def test_compare_prints_one_table_with_every_workload():
    # the table's rows and format are what is checked here, not the kernels: the Numba
    # column runs tiered with compilation never triggered (compare.py compiles synchronously
    # by default, ~40 kernels and minutes of CPU; tests/numba and the kit check the kernels)
    lines = _run("compare.py", "--quick", "--repeat", "1",
                 env={"PLAX_NUMBA_SYNC": "0", "PLAX_NUMBA_COMPILE_AFTER": str(1 << 62)})
    rows = [line for line in lines if line.startswith("| ")]
    assert rows[0] == ("| workload | plax-numba | plax-numpy | JAX | NumPy eager | numba / JAX "
                       "| CPU numba / JAX |")
    labels = [row.split(" | ")[0][2:] for row in rows[1:]]
    for prefix in ("selu f32[", "tiny jit call f32[3]", "linreg step", "MLP step 784-512-512-10",
                   "random.normal", "MLP step first call", "jit(vmap(apply_matrix))",
                   "scan tanh RNN", "scan 0.9c+0.1x", "scan tanh(0.9c+x)",
                   "grad of scan tanh RNN", "tanh f32[", "log1p f32["):
        assert any(label.startswith(prefix) for label in labels), prefix
    for row in rows[1:]:
        assert len(row.strip("|").split(" | ")) == 7, row
        cells = row.strip("| ").split(" | ")
        for ratio in cells[5:]:   # wall and CPU ratios: numbers, or "-" without JAX
            assert ratio == "-" or float(ratio) > 0, row
    if "numpy" in plax.plugins.registry().backends:
        assert all(row.split(" | ")[2] != "-" for row in rows[1:])  # plax-numpy measured
    floor = [line for line in lines if line.startswith("the MLP step's 8 matrix products")]
    assert len(floor) == 1 and floor[0].split(": ")[1].split()[1] in ("µs", "ms", "s"), floor
    assert any("numba_tiering.py" in line for line in lines)   # where the tiering table is


def test_trace_overhead_names_backend_and_every_case():
    lines = _run("trace_overhead.py", "--layers", "2", "--number", "1", "--repeat", "1")
    assert lines[0].startswith("plax: backend ")
    for case in ("make_jaxpr(grad(f))", "make_jaxpr(vmap(f))", "eager vmap(f) ",
                 "eager vmap(f, axis_name)"):
        assert any(line.startswith(case) for line in lines), (case, lines)


def test_scan_rows_prints_every_scan_workload():
    lines = _run("scan_rows.py", "--quick", "--batches", "1")
    assert lines[0].startswith("| workload | plax-numba")
    for workload in ("scan tanh RNN", "scan 0.9c+0.1x", "scan tanh(0.9c+x)", "grad of scan tanh RNN"):
        [row] = [line for line in lines if line.startswith(f"| {workload} ")]
        assert row.count("µs") >= 1, row


def test_numba_compiles_counts_a_command_s_compilations():
    import pytest
    pytest.importorskip("numba")
    code = ("import numba\n"
            "f = numba.njit(lambda x: x + 1)\n"
            "g = numba.njit(lambda x: f(x) * 2)\n"
            "print(g(3), g(4.5))\n")  # g compiled for int and float, f as its callee too
    lines = _run("numba_compiles.py", "--", "-c", code)
    assert lines[0] == "8 11.0"
    rows = {line.split(" | ")[1]: int(line.split(" | ")[2]) for line in lines
            if line.startswith("| compiled |")}
    assert rows == {"other functions": 4}, lines  # (the -c command's own)
    assert lines[-1].startswith("command CPU time: ") and lines[-1].endswith("exit status 0")


def test_gpu_launches_lists_the_mlp_step_s_kernels():
    # on the simulated GPU (the script installs it; g++ builds its kernels), gpu.py's --tiny
    # MLP: 784-512-512-10, batch 64
    import re
    import shutil

    import pytest
    if shutil.which("g++") is None:
        pytest.skip("no C++ compiler (g++) for the simulated GPU")
    lines = _run("gpu_launches.py", "--tiny", "--sms", "2")
    head = re.fullmatch(r"MLP 784-512-512-10 step, batch 64, launch configuration for 2 SMs "
                        r"\(4096 resident threads\): (\d+) launches, (\d+) plax-compiled "
                        r"kernels, (\d+) other \(cuBLAS\)", lines[0])
    assert head, lines[0]
    launches, kernels, cublas = map(int, head.groups())
    assert launches == kernels + cublas and kernels > 0 and cublas > 0
    assert lines[1].split()[:3] == ["kernel", "grid", "x"]
    rows = lines[2:]
    assert len(rows) == kernels, lines   # one row per plax-compiled launch
    names = {row.split()[0] for row in rows}
    assert {"plax_elementwise", "plax_reduce"} <= names, rows
    for row in rows:   # grid x block = threads
        grid, block, threads = re.match(r"\S+\s+(\d+) x (\d+)\s+(\d+)", row).groups()
        assert int(grid) * int(block) == int(threads), row


def test_gpu_kernel_cost_samplers_keep_the_threefry_mode_of_the_process():
    # a sampler workload traces in its own jax_threefry_partitionable mode (the original
    # layout's bits here) and leaves the process's mode as it found it
    import importlib.util
    import sys

    import numpy as np
    from plax import random
    spec = importlib.util.spec_from_file_location(
        "gpu_kernel_cost", REPO / "benchmarks" / "gpu_kernel_cost.py")
    sys.path.insert(0, str(REPO / "benchmarks"))   # (its sibling simulated_gpu)
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    before = plax.config.read("jax_threefry_partitionable")
    fn, (key,) = module.WORKLOADS["random.normal f32, original"](8)
    got = np.asarray(plax.jit(fn, backend="numpy")(key))
    assert plax.config.read("jax_threefry_partitionable") == before
    with plax.threefry_partitionable(False):
        want = np.asarray(random.normal(key, (8,)))
    with plax.threefry_partitionable(True):
        assert not np.array_equal(np.asarray(random.normal(key, (8,))), want)
    np.testing.assert_array_equal(got, want)
