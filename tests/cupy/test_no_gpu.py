"""With CuPy installed but no GPU (or no CuPy at all), the CuPy backend reports no devices,
quietly, and nothing about plax's defaults changes."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

from gpu_env import GPU_PROBLEM, HAVE_CUPY

pytestmark = pytest.mark.skipif(not GPU_PROBLEM, reason="a CUDA GPU is present")

BACKENDS = os.path.join(os.path.dirname(__file__), "..", "..", "backends")


def test_probe_says_why_there_are_no_devices():
    from plax_cupy.runtime import probe
    gpus, reason = probe()
    assert gpus == []
    if HAVE_CUPY:
        assert reason.startswith("no CUDA GPU present"), reason
    else:
        assert "CuPy is not installed" in reason
    import plax_cupy
    assert plax_cupy.status() == f"plax_cupy: no devices: {reason}"


def test_the_hook_reports_no_backend_quietly():
    import plax_cupy.plugin
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert plax_cupy.plugin.plax_backends() == []


def test_defaults_are_unchanged_with_the_plugin_registered():
    """The ``cupy`` entry point (or, in a checkout without it, the plugin registered by hand)
    loads, contributes no backend, warns nothing, and leaves devices and defaults as they are
    with the plugin disabled (``PLAX_CUPY_DISABLE=1``, in a child process)."""
    import plax
    from plax import plugins
    import plax_cupy.plugin
    show = ("import plax; from plax import plugins; "
            "print(repr((plax.devices(), plax.default_backend(), sorted(plugins.registry().backends))))")
    env = dict(os.environ, PLAX_CUPY_DISABLE="1")
    env.pop("PLAX_BACKEND", None)
    child = subprocess.run([sys.executable, "-c", show], capture_output=True, text=True, env=env)
    assert child.returncode == 0, child.stderr
    name = None
    if not any(r.group == "plax.backends" and r.name == "cupy" for r in plugins.registry().records):
        name = plugins.register_plugin(plax_cupy.plugin, name="cupy")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            after = (plax.devices(), plax.default_backend(), sorted(plugins.registry().backends))
        if "PLAX_BACKEND" not in os.environ:
            assert repr(after) == child.stdout.strip()
        assert "cupy" not in plugins.registry().backends
        record = [r for r in plugins.registry().records if r.name == "cupy"]
        assert record and record[0].status == "loaded" and not record[0].backends
        with pytest.raises(RuntimeError, match="gpu"):
            plax.devices("gpu")
    finally:
        if name:
            plugins.unregister_plugin(name)


def test_status_command_and_lazy_imports():
    """``python -m plax_cupy`` prints the reason; importing plax, plax_cupy and its code
    generator imports no CuPy (only probing, at plugin discovery, does)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([BACKENDS, os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "plax_cupy"], capture_output=True, text=True,
                         env=env, check=True).stdout
    assert out.startswith("plax_cupy: no devices: ")
    code = ("import sys, plax, plax_cupy, plax_cupy.codegen, plax_cupy.control_flow\n"
            "assert 'cupy' not in sys.modules, 'cupy imported'\n"
            "plax.devices()\nprint('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_gpu_benchmark_exits_quietly_without_a_gpu():
    script = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "gpu.py")
    done = subprocess.run([sys.executable, script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("benchmarks/gpu.py: no GPU to measure on"), done.stdout


@pytest.mark.parametrize("value, disabled", [("1", True), ("true", True), ("0", False),
                                             ("off", False), ("", False)])
def test_the_disable_switch_reads_as_an_on_off_setting(monkeypatch, value, disabled):
    """``PLAX_CUPY_DISABLE`` is an on/off setting (``plax.config.env_flag``): ``0`` does not
    disable the backend (any non-empty value did), and a word that is neither raises."""
    from plax_cupy import runtime
    monkeypatch.setenv("PLAX_CUPY_DISABLE", value)
    gpus, reason = runtime._probe()
    assert (reason == "disabled by PLAX_CUPY_DISABLE") == disabled, reason
    monkeypatch.setenv("PLAX_CUPY_DISABLE", "maybe")
    with pytest.raises(ValueError, match="PLAX_CUPY_DISABLE"):
        runtime._probe()
