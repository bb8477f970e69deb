"""plax's own device, plugin and example tests pass with a third-party backend installed.

A user who has installed another backend (a second, faster CPU backend, or one for an
accelerator) must still be able to run the README's test command. This test pip-installs
the toy backend (tests/plugin_packages/plax_toybackend) into a directory once per session
(tests/toy_backend_site.py), as a user's ``pip install`` would (offline: no index, no build
isolation, setuptools is a dev dependency), and runs tests/test_devices.py, tests/test_plugins.py and tests/test_examples.py
in a fresh pytest with that directory on PYTHONPATH, once per kind of backend:

* ``cpu``: the toy backend registers the CPU platform with a priority above NumPy's, so it
  becomes the CPU's default executor;
* ``toy``: the toy backend registers a platform of its own, which (like a GPU) becomes the
  default platform.

Tests marked ``same_with_any_installed_backend`` are not rerun: they give their child
interpreters the toy backend, set up their own way, whatever the parent has installed, so a
child session would only repeat them (about a tenth of each session's CPU time).

Select these tests with ``-k installed_backend``.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from subprocess_util import PYCACHE, REPO
from toy_backend_site import toy_backend_site

SUITE = ["tests/test_devices.py", "tests/test_plugins.py", "tests/test_examples.py"]
#: the tests that would do the same with the toy backend installed (tests/conftest.py)
NOT_RERUN = "same_with_any_installed_backend"


@pytest.fixture(scope="module")
def installed_toy() -> Path:
    """A site directory where pip installed plax-toybackend (with its dist-info and entry point):
    built once per test session, shared with tests/test_plugins.py (here and in the child
    sessions, which inherit the session's cache directory)."""
    target = toy_backend_site()
    assert list(target.glob("plax_toybackend-*.dist-info/entry_points.txt"))
    return target


def _environment(site: Path, platform: str) -> dict:
    """The user's environment: the toy backend installed, no plax configuration variables."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PLAX_", "JAX_PLATFORMS", "PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(site)] + [p for p in [os.environ.get("PYTHONPATH")]
                                                       if p])
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    env["PLAX_TOY_PLATFORM"] = platform
    return env


def _without_gpu(env: dict) -> dict:
    """``env`` on a machine without a GPU (``PLAX_CUPY_DISABLE=1`` hides one this machine may
    have): where a check is about the toy backend being the default, a GPU, which is the
    default platform when present, must not take its place."""
    return dict(env, PLAX_CUPY_DISABLE="1")


@pytest.mark.parametrize("platform", ["cpu", "toy"])
def test_suite_passes_with_installed_backend(installed_toy, platform):
    env = _environment(installed_toy, platform)
    # The backend really is installed and is what plax picks by default.
    info = subprocess.run([sys.executable, "-m", "plax", "info"], capture_output=True, text=True,
                          env=_without_gpu(env), cwd=REPO, timeout=120)
    assert info.returncode == 0, info.stdout + info.stderr
    assert "[loaded] toy (plax.backends: plax_toybackend.plugin) backends=['toy']" in info.stdout
    expected = {"cpu": "default backend: cpu (runs on CpuDevice(id=0) with 'toy'; ",
                "toy": "default backend: toy (runs on ToyDevice(id=0) with 'toy'; "}[platform]
    assert expected in info.stdout, info.stdout

    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-m", f"not {NOT_RERUN}", *SUITE],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert proc.returncode == 0, (f"with the toy backend installed on platform {platform!r}, "
                                  f"the suite failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}")
    assert " passed" in proc.stdout, proc.stdout[-2000:]
    assert " deselected" in proc.stdout, proc.stdout[-2000:]  # the marker's name is right


_PARTIAL_SCRIPT = """
import json, warnings
import numpy as np
import plax, plax.numpy as jnp
from plax.lowering import PlaxFallbackWarning

def f(x, y):
    return jnp.exp(jnp.sin(x) * y + 1.0).sum() + jnp.tanh(y)[0]

x, y = np.linspace(0.0, 1.0, 4, dtype=np.float32), np.arange(4.0, dtype=np.float32)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    got = plax.jit(f)(x, y)
    again = plax.jit(lambda x: jnp.exp(x) * 2.0)(x)
want = np.exp(np.sin(x.astype(np.float64)) * y + 1.0).sum() + np.tanh(y[0])
print(json.dumps({
    "device": repr(list(got.devices())[0]),
    "got": float(got), "want": float(want),
    "again": np.asarray(again).tolist(), "again_want": (np.exp(x) * 2.0).tolist(),
    "fallbacks": [str(w.message) for w in caught if issubclass(w.category, PlaxFallbackWarning)],
}))
"""


@pytest.mark.parametrize("platform", ["cpu", "toy"])
def test_installed_backend_compiling_a_few_primitives_falls_back_for_the_rest(installed_toy,
                                                                             platform):
    """The toy backend compiles only add, mul and sin; jit still runs everything else,
    on the reference kernels, with one PlaxFallbackWarning per declined primitive."""
    import json
    env = dict(_without_gpu(_environment(installed_toy, platform)), PLAX_TOY_COMPILES="add,mul,sin")
    proc = subprocess.run([sys.executable, "-c", _PARTIAL_SCRIPT], capture_output=True,
                          text=True, env=env, cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["device"] == {"cpu": "CpuDevice(id=0)", "toy": "ToyDevice(id=0)"}[platform]
    assert abs(out["got"] - out["want"]) <= 1e-5 * abs(out["want"])
    assert all(abs(a - b) <= 1e-6 * abs(b) for a, b in zip(out["again"], out["again_want"]))
    declined = {m.split("primitive ")[1].split(";")[0].strip("'") for m in out["fallbacks"]}
    assert {"exp", "reduce_sum", "tanh"} <= declined
    assert not declined & {"add", "mul", "sin"}
    assert len(out["fallbacks"]) == len(declined), out["fallbacks"]  # once each (exp: 2 jits)
    assert all("'toy'" in m for m in out["fallbacks"])
