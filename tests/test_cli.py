"""``python -m plax info`` prints its tables, and ``python -m plax conformance`` runs the kit
against one backend with progress."""
from __future__ import annotations

import io
import re
from types import SimpleNamespace

import plax
from plax import plugins
from plax.__main__ import ConformanceProgress, main, table
from subprocess_util import run_python


def test_info_tables():
    text = run_python("", args=["-m", "plax", "info"]).stdout
    lines = text.splitlines()
    assert lines[0] == f"plax {plax.__version__}"
    assert re.match(r"Python \d+\.\d+\.\d+, NumPy \S+, \S+ \S+, \d+ CPUs$", lines[1]), lines[1]
    assert any(re.match(r"plugin +status +kind +provides +package$", ln) for ln in lines)
    assert any(re.match(r"backend +platform +priority +devices +version and threading$", ln)
               for ln in lines)
    [numpy_plugin] = [ln for ln in lines if re.match(r"numpy +loaded +backend ", ln)]
    assert numpy_plugin.endswith(f"plax {plax.__version__}")  # the distribution declaring it
    [numpy_backend] = [ln for ln in lines if re.match(r"numpy +cpu +\d", ln)]
    assert "CpuDevice(id=0)" in numpy_backend
    if "numba" in plugins.registry().backends:
        [numba_backend] = [ln for ln in lines if re.match(r"numba +cpu +\d", ln)]
        assert "threading layer" in numba_backend and "threads" in numba_backend
    # the detailed report that scripts and tests read follows the tables unchanged
    assert "plax plugins:" in lines and "devices:" in lines
    assert any(ln.startswith("default backend: ") for ln in lines)


def test_table_layout():
    assert table(["a", "bb", "c"], [["xyz", "1", "long last column"]]).splitlines() == [
        "a    bb  c", "---  --  -", "xyz  1   long last column"]
    assert "(none)" in table(["a", "b"], [])


def test_conformance_runs_the_kit_with_progress():
    # the value checks of exp and exp2: 16 cheap tests, enough for the progress lines' tenths
    # ("exp and not expm1" ran 83: grads, vmaps, dtype rejections, the same progress path)
    proc = run_python("", args=["-m", "plax", "conformance", "--backend", "numpy", "-k",
                                "test_values and exp and not expm1 and not expand_dims"],
                      timeout=300)
    out = proc.stdout
    match = re.search(r"^(\d+) tests collected for backend 'numpy'$", out, re.M)
    assert match, out
    n = int(match.group(1))
    assert n > 10
    progress = re.findall(r"^\[ *(\d+)/(\d+) +[\d.]+%\] .*elapsed", out, re.M)
    assert len(progress) >= 5  # a line every tenth of the run, off a terminal
    assert progress[-1] == (str(n), str(n))
    assert f"{n} passed" in out.splitlines()[-1] and "." * 5 not in out  # no dots, a summary


def test_conformance_usage_errors(capsys):
    assert main(["plax", "conformance"]) == 2
    assert "--backend NAME" in capsys.readouterr().err
    assert main(["plax", "conformance", "--backend", "no_such_backend"]) == 2
    err = capsys.readouterr().err
    assert "unknown backend 'no_such_backend'" in err and "numpy" in err
    assert main(["plax", "conformance", "--help"]) == 0
    assert "pytest --pyargs plax.testing.conformance" in capsys.readouterr().out


def _report(nodeid, when="call", outcome="passed"):
    return SimpleNamespace(nodeid=nodeid, when=when, failed=outcome == "failed",
                           skipped=outcome == "skipped", passed=outcome == "passed")


def test_progress_counts_and_reports_failures_as_they_happen():
    stream = io.StringIO()
    progress = ConformanceProgress("toy", stream=stream)
    progress.pytest_collection_finish(SimpleNamespace(items=[None] * 20))
    for i in range(20):
        outcome = "failed" if i == 3 else "skipped" if i == 7 else "passed"
        when = "setup" if outcome == "skipped" else "call"
        if when == "call":
            progress.pytest_runtest_logreport(_report(f"t{i}", "setup"))  # a passing setup
        progress.pytest_runtest_logreport(_report(f"t{i}", when, outcome))
        progress.pytest_runtest_logreport(_report(f"t{i}", "teardown"))
    progress.pytest_sessionfinish(None)
    lines = stream.getvalue().splitlines()
    assert lines[0] == "20 tests collected for backend 'toy'"
    assert "FAILED t3 (call)" in lines
    assert lines[-1].startswith("[20/20 100.0%] 18 passed, 1 failed, 1 skipped; ")
    assert len([ln for ln in lines if ln.startswith("[")]) == 10  # every tenth, no repeat
