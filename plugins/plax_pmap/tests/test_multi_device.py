"""pmap, shard_map and the collectives on 1, 2 and 4 CPU devices.

Devices are fixed when plax starts, so the checks (multi_device_checks.py) run in two child
interpreters, with ``PLAX_NUM_CPU_DEVICES=2`` and ``=4``, each printing one JSON report; the
1-device run is this process itself. Every check compares with a single-device reference
(NumPy, or the same function under ``vmap(axis_name=...)``)."""
from __future__ import annotations

import ast
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "multi_device_checks.py"


def _check_names() -> list[str]:
    tree = ast.parse(SCRIPT.read_text())
    return [f.name for f in tree.body if isinstance(f, ast.FunctionDef)
            and any(getattr(d, "id", None) == "check" for d in f.decorator_list)]


NAMES = _check_names()
_reports: dict = {}


def _report(n: int) -> dict:
    if n not in _reports:
        if n == 1:
            spec = importlib.util.spec_from_file_location("_plax_pmap_checks", SCRIPT)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            if module.N != 1:
                pytest.skip("this process has more than one device")
            _reports[1] = {"module": module}
        else:
            env = {k: v for k, v in os.environ.items() if not k.startswith("PLAX_")}
            env.update(PLAX_NUM_CPU_DEVICES=str(n), PLAX_PLATFORMS="cpu")
            proc = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True,
                                  env=env, timeout=600)
            assert proc.returncode == 0, f"child failed:\n{proc.stdout}\n{proc.stderr}"
            _reports[n] = json.loads(proc.stdout.strip().splitlines()[-1])
    return _reports[n]


@pytest.mark.parametrize("name", NAMES)
def test_check_on_one_device(name):
    _report(1)["module"].CHECKS[name]()


# One test per device count, so that a parallel run (pytest -n) still starts each child once.
@pytest.mark.parametrize("n", [2, 4])
def test_checks_on_several_devices(n):
    report = _report(n)
    assert sorted(report) == sorted(NAMES)
    failed = {name: result for name, result in report.items() if result != "ok"}
    assert not failed, "\n\n".join(f"{name} on {n} devices failed:\n{result}"
                                     for name, result in failed.items())
