"""The asv suite loads (``asv check``), and a one-commit ``asv run --quick`` of a subset records
results for plax's backends that ``asv publish`` turns into the dashboard's data.

Runs against the plax installed in this interpreter (``-E existing:``, nothing built or
downloaded), with results, HTML and asv's machine file in a temporary folder. Needs asv (the
``bench`` extra); skipped without it, saying so.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# quick and representative: eager dispatch, a cached jit call (a table row), the import and
# key handling; every framework value of each (plax per backend, jax when installed)
SUBSET = r"^(bench_overhead\.EagerDispatch\.time_add|bench_table\.TinyCall|bench_startup\.Import\.timeraw|bench_random\.KeysEager\.time_split)"


@pytest.fixture(scope="module")
def asv_env(tmp_path_factory):
    if importlib.util.find_spec("asv") is None:
        pytest.skip('asv is not installed (pip install -e ".[bench]", or pip install asv)')
    tmp = tmp_path_factory.mktemp("asv")
    with open(REPO / "asv.conf.json") as f:
        text = "\n".join(line for line in f if not line.lstrip().startswith("//"))
    config = json.loads(text)
    config.update(repo=str(REPO), benchmark_dir=str(REPO / "asv_benchmarks"),
                  env_dir=str(tmp / "env"), results_dir=str(tmp / "results"),
                  html_dir=str(tmp / "html"))
    (tmp / "asv.conf.json").write_text(json.dumps(config, indent=1))
    env = dict(os.environ)
    # asv keeps its machine description in ~/.asv-machine.json: give it a home of its own,
    # but keep the caches where they are (Numba's compiled kernels, pip's)
    env.setdefault("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache"))
    env["HOME"] = str(tmp)
    return tmp, env


def _asv(tmp, env, *args, timeout=300):
    cmd = [sys.executable, "-m", "asv", *args, "--config", str(tmp / "asv.conf.json")]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp,
                          timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(args)} failed:\n{proc.stdout[-5000:]}\n{proc.stderr[-5000:]}"
    return proc.stdout


def test_asv_check_and_quick_run(asv_env):
    tmp, env = asv_env
    existing = f"existing:{sys.executable}"
    out = _asv(tmp, env, "check", "-E", existing)
    assert "No problems found" in out

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True,
                            text=True, check=True).stdout.strip()
    subprocess.run([sys.executable, "-m", "asv", "machine", "--yes", "--machine", "ci"],
                   env=env, cwd=tmp, capture_output=True, check=True)
    out = _asv(tmp, env, "run", "--quick", "-E", existing, "--machine", "ci",
               "--set-commit-hash", commit, "--bench", SUBSET, "--show-stderr")
    assert "failed" not in out, out[-5000:]

    [results_file] = [p for p in (tmp / "results" / "ci").glob("*.json") if p.name != "machine.json"]
    results = json.loads(results_file.read_text())["results"]
    import plax
    backends = sorted(plax.plugins.registry().backends)
    row = results["bench_table.TinyCall.time_tiny_call"]
    params = [p.strip("'") for p in row[1][0]]
    assert params == [f"plax:{b}" for b in backends] + ["jax"]
    timings = dict(zip(params, row[0]))
    for b in backends:  # every plax backend measured; jax's value is None when it is absent
        assert timings[f"plax:{b}"] and timings[f"plax:{b}"] > 0, timings
    assert set(results) == {"bench_overhead.EagerDispatch.time_add",
                            "bench_table.TinyCall.time_tiny_call",
                            "bench_startup.Import.timeraw_import",
                            "bench_random.KeysEager.time_split"}

    _asv(tmp, env, "publish")
    index = json.loads((tmp / "html" / "index.json").read_text())
    assert "bench_table.TinyCall.time_tiny_call" in index["benchmarks"]
    assert (tmp / "html" / "index.html").exists()
