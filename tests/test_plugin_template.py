"""The plugin template (docs/templates/plax_plugin_template) is a working package: copied, pip
installed, it adds ``plax.experimental.count_flops``; uninstalled, the feature is gone and
nothing else breaks.

It is installed into a throwaway virtual environment that sees this environment's packages
(plax, its backends and plugins, pip, setuptools) through a ``.pth`` file, so that ``pip
install`` and ``pip uninstall`` run for real, as a user's would, without touching the
environment the tests run in (where parallel tests would see a half-installed plugin, and a
failed test would leave one behind).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sysconfig
import venv
from pathlib import Path

import pytest

from subprocess_util import PYCACHE, REPO

TEMPLATE = REPO / "docs" / "templates" / "plax_plugin_template"

_CHECKS = """
import json, sys
import plax, plax.numpy as jnp
out = {}
try:
    from plax.experimental import count_flops
    out["flops"] = count_flops(lambda a, b: a @ b + 1.0)(jnp.ones((2, 3)), jnp.ones((3, 4)))
    out["nested"] = count_flops(lambda x: plax.jit(lambda y: y * y)(x) - x)(jnp.ones(5))
    try:
        count_flops(jnp.sin)(1.0)
    except NotImplementedError as err:
        out["missing_rule"] = str(err)
except ImportError as err:
    out["import_error"] = str(err)
try:
    plax.experimental.count_flops
except AttributeError as err:
    out["attribute_error"] = str(err)
# the rest of plax, and the other plugins, keep working
out["jit"] = float(plax.jit(lambda x: (x * 2.0).sum())(jnp.arange(3.0)))
out["grad"] = float(plax.grad(lambda x: x ** 3)(2.0))
print(json.dumps(out))
"""


def _env() -> dict:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PLAX_", "PYTEST_", "VIRTUAL_ENV")) and k != "PYTHONPATH"}
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def _run(python: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(python), *args], capture_output=True, text=True, env=_env(),
                          cwd=cwd, timeout=300)
    assert proc.returncode == 0, f"{args} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def env_python(tmp_path_factory) -> Path:
    """The python of a fresh virtual environment layered over this one."""
    root = tmp_path_factory.mktemp("template_env")
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; "
                                "print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    parent = sysconfig.get_paths()["purelib"]
    (site / "_plax_parent_env.pth").write_text(f"import site; site.addsitedir({parent!r})\n")
    return python


def test_template_installs_works_and_uninstalls_cleanly(env_python, tmp_path):
    source = tmp_path / "plax_plugin_template"
    shutil.copytree(TEMPLATE, source, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                    "__pycache__"))
    before = json.loads(_run(env_python, "-c", _CHECKS, cwd=tmp_path).stdout.splitlines()[-1])
    assert "count_flops" in before["import_error"] and "flops" not in before
    info_before = _run(env_python, "-m", "plax", "info", cwd=tmp_path).stdout

    _run(env_python, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
         "--disable-pip-version-check", "--quiet", str(source))
    out = json.loads(_run(env_python, "-c", _CHECKS, cwd=tmp_path).stdout.splitlines()[-1])
    assert out["flops"] == 2 * 2 * 4 * 3 + 8
    assert out["nested"] == 10
    assert "Primitive 'sin' has no 'count_flops' rule" in out["missing_rule"]
    assert "attribute_error" not in out and "import_error" not in out
    info = _run(env_python, "-m", "plax", "info", cwd=tmp_path).stdout
    assert ("[loaded] count_flops (plax.plugins: plax_plugin_template.plugin) "
            "exports=['experimental.count_flops']") in info

    _run(env_python, "-m", "pip", "uninstall", "--yes", "--quiet", "plax-plugin-template")
    after = json.loads(_run(env_python, "-c", _CHECKS, cwd=tmp_path).stdout.splitlines()[-1])
    assert "count_flops" in after["attribute_error"] and "flops" not in after
    assert (after["jit"], after["grad"]) == (before["jit"], before["grad"]) == (6.0, 12.0)
    info_after = _run(env_python, "-m", "plax", "info", cwd=tmp_path).stdout
    assert "count_flops" not in info_after
    # every other plugin and backend is reported exactly as before the install
    assert _plugin_lines(info_after) == _plugin_lines(info_before)


def _plugin_lines(info: str) -> list[str]:
    return [ln for ln in info.splitlines() if ln.startswith("  [") and "count_flops" not in ln]
