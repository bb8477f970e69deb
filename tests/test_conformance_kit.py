"""The conformance kit ships in plax's wheel and runs with nothing from this repository.

A fixture builds a wheel of plax from a copy of this checkout (``pip wheel``, offline,
without build isolation: setuptools is a dev dependency) and installs it, and the toy backend
package (tests/plugin_packages/plax_toybackend), into a target directory of the test session,
once for all of the session's xdist workers. Each test
then runs ``python -m pytest --pyargs plax.testing.conformance --plax-backend=NAME`` in a fresh
interpreter, from an empty temporary directory, with only that target and the environment's
site-packages (numpy, pytest, hypothesis) on ``PYTHONPATH``: the interpreter runs with ``-S``,
so the editable install of this checkout is not seen. The runs use the kit's quick selection
(``--plax-conformance-quick``) to stay short.

What is checked: the kit passes on the NumPy backend on two CPU devices while the toy backend
is installed as a second, higher-priority CPU backend, and none of its work runs on the toy
backend (a spy plugin counts the toy backend's calls); it passes on the toy backend on its own
platform (and does run there); ``--plax-backend=nonexistent`` is a usage error listing the
available backends; a backend whose plugin fails to import is reported with its traceback.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from session_caches import build_once_per_session
from subprocess_util import REPO

TOY_PACKAGE = REPO / "tests" / "plugin_packages" / "plax_toybackend"
KIT = REPO / "core" / "plax" / "testing" / "conformance"
_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist",
                                 ".hypothesis", ".pytest_cache")

# Counts the toy backend's eager and compiled work in the child pytest (loaded with -p).
SPY = '''
import json, os
import plax_toybackend.backend as toy

CALLS = {"execute": 0, "compile": 0}
for _name in CALLS:
    def _counted(self, *args, _real=getattr(toy.ToyBackend, _name), _name=_name, **kwargs):
        CALLS[_name] += 1
        return _real(self, *args, **kwargs)
    setattr(toy.ToyBackend, _name, _counted)


def pytest_sessionfinish(session):
    with open(os.environ["KIT_SPY_OUT"], "w") as f:
        json.dump(CALLS, f)
'''

BROKEN_PLUGIN = '''
"""A backend plugin whose import fails (the conformance kit must say so, with the traceback)."""


def _load_driver():
    raise RuntimeError("the broken test plugin cannot find its driver")


_load_driver()
'''


def _pip(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args, "--no-deps", "--no-index",
                           "--disable-pip-version-check", "--quiet"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"pip {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"


def _build_kit_site(root: Path) -> None:
    """Builds plax's wheel from a copy of this checkout into ``root`` and installs it, and the
    toy backend, into ``root / "site"``."""
    src = root / "plax_src"
    for name in ("core", "backends"):
        shutil.copytree(REPO / name, src / name, ignore=_IGNORE)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    wheels = root / "wheels"
    _pip("wheel", "--no-build-isolation", "-w", str(wheels), str(src))
    (wheel,) = wheels.glob("plax-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        eps = zf.read(entry_points).decode()
    for path in ("plax/testing/conformance/plugin.py", "plax/testing/conformance/conftest.py",
                 "plax/testing/conformance/jax_answers.json",
                 "plax/testing/conformance/README.md",
                 "plax/testing/conformance/record_jax_answers.py"):
        assert path in names, f"the wheel lacks {path}"
    assert "[pytest11]" in eps and "plax.testing.conformance.plugin" in eps, eps

    site = root / "site"
    _pip("install", "--target", str(site), str(wheel))
    toy_src = root / "toy_src"
    shutil.copytree(TOY_PACKAGE, toy_src, ignore=_IGNORE)
    _pip("install", "--no-build-isolation", "--target", str(site), str(toy_src))


@pytest.fixture(scope="module")
def kit_site() -> Path:
    """A target directory holding plax (installed from a freshly built wheel) and the toy backend.

    Built once per test session (the wheel build is most of this file's time): under xdist the
    first worker to get here builds it in the session's cache directory and the others wait for
    it and reuse it (tests/session_caches.py)."""
    return build_once_per_session("conformance-kit", _build_kit_site) / "site"


# The backends the child finds: NumPy, the toy backend, and the Numba backend of the wheel where
# numba is installed (the kit must not assume NumPy is the only CPU backend).
_AVAILABLE = str(sorted(["numpy", "toy"] + (["numba"] if importlib.util.find_spec("numba") else [])))


def _site_packages() -> list[str]:
    paths = sysconfig.get_paths()
    return list(dict.fromkeys([paths["purelib"], paths["platlib"]]))


def _transform_plugin_roots() -> list[str]:
    """Where the environment's transform plugins (``plax.plugins`` entry points) import from.

    An editable install is reached through a ``.pth`` hook, which ``-S`` skips: the child would
    see such a plugin's entry point but not its module (and warn that it failed). Backends are
    left out: the child must see the wheel's own backends only."""
    import importlib.metadata as md
    roots = []
    for ep in md.entry_points(group="plax.plugins"):
        spec = importlib.util.find_spec(ep.module.split(".")[0])
        if spec is not None and spec.origin is not None:
            roots.append(str(Path(spec.origin).resolve().parent.parent))
    return list(dict.fromkeys(roots))


def _run(site: Path, cwd: Path, args: list[str], extra_path=(), **env_vars):
    """``python -S -m pytest ARGS`` in ``cwd`` with ``site`` (then ``extra_path``, then the
    environment's site-packages and the roots of its transform plugins) as the only import path
    beside the standard library."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PLAX_", "PYTEST_", "JAX_")) and k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), *map(str, extra_path), *_site_packages(),
                                         *_transform_plugin_roots()])
    env["PYTHONNOUSERSITE"] = "1"
    env.update(env_vars)
    return subprocess.run([sys.executable, "-S", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


def _kit(site, cwd, *options, extra_path=(), **env_vars):
    return _run(site, cwd, ["-m", "pytest", "--pyargs", "plax.testing.conformance",
                            "-p", "no:cacheprovider", *options], extra_path, **env_vars)


def test_the_child_sees_only_the_installed_wheel(kit_site, tmp_path):
    proc = _run(kit_site, tmp_path, ["-c", (
        "import json, importlib.metadata as md, plax, plax.testing.conformance.plugin as p;"
        "print(json.dumps([plax.__file__, p.__file__, "
        "[str(d.locate_file('')) for d in md.distributions() if d.metadata['Name'] == 'plax']]))")])
    assert proc.returncode == 0, proc.stderr
    plax_file, plugin_file, dists = json.loads(proc.stdout.strip().splitlines()[-1])
    assert plax_file.startswith(str(kit_site)) and plugin_file.startswith(str(kit_site))
    assert dists and dists[0].startswith(str(kit_site)), dists  # the wheel's metadata comes first


def test_kit_passes_on_numpy_with_a_second_cpu_backend_installed(kit_site, tmp_path):
    """Two CPU devices, and the toy backend installed on the CPU with a higher priority than
    NumPy's (the default CPU executor): every check runs on NumPy, none on the toy backend."""
    (tmp_path / "kit_spy.py").write_text(SPY)
    spy_out = tmp_path / "spy.json"
    proc = _kit(kit_site, tmp_path, "--plax-backend=numpy", "--plax-conformance-quick", "-x",
                "-p", "kit_spy", PLAX_NUM_CPU_DEVICES="2", PLAX_TOY_PLATFORM="cpu",
                KIT_SPY_OUT=str(spy_out))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout, out[-3000:]
    assert ("plax conformance: backend 'numpy' on 2 device(s): CpuDevice(id=0), CpuDevice(id=1)"
            in proc.stdout), proc.stdout[:3000]
    assert json.loads(spy_out.read_text()) == {"execute": 0, "compile": 0}, (
        "the toy backend ran work of a --plax-backend=numpy run")


def test_kit_passes_on_the_toy_backend(kit_site, tmp_path):
    (tmp_path / "kit_spy.py").write_text(SPY)
    spy_out = tmp_path / "spy.json"
    proc = _kit(kit_site, tmp_path, "--plax-backend=toy", "--plax-conformance-quick", "-x", "-q",
                "-p", "kit_spy", KIT_SPY_OUT=str(spy_out))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout, out[-3000:]
    calls = json.loads(spy_out.read_text())
    assert calls["execute"] > 100 and calls["compile"] > 100, calls


def test_unknown_backend_is_a_usage_error_listing_the_available_ones(kit_site, tmp_path):
    proc = _kit(kit_site, tmp_path, "--plax-backend=nonexistent")
    out = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "nonexistent" in out and _AVAILABLE in out, out[-3000:]


def test_broken_backend_plugin_is_reported_with_its_traceback(kit_site, tmp_path):
    broken = tmp_path / "broken_site"
    dist = broken / "plax_broken-0.1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: plax-broken\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[plax.backends]\nbroken = plax_broken\n")
    (broken / "plax_broken.py").write_text(BROKEN_PLUGIN)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    proc = _kit(kit_site, run_dir, "--plax-backend=broken", extra_path=[broken])
    out = proc.stdout + proc.stderr
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, out[-3000:]
    assert "not installed" not in out
    assert "failed to load" in out and "RuntimeError: the broken test plugin cannot find its " \
        "driver" in out, out[-3000:]
    assert "Traceback" in out and "plax_broken.py" in out and "_load_driver" in out, out[-3000:]
    assert _AVAILABLE in out, out[-3000:]


def test_kit_never_imports_jax():
    """The checks that compare with JAX read recorded answers (jax_answers.json); only the
    recorder imports JAX."""
    for path in KIT.glob("*.py"):
        if path.name == "record_jax_answers.py":
            continue
        text = path.read_text()
        assert "import jax" not in text and 'importorskip("jax' not in text, path.name
