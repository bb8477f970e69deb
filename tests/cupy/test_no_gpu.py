"""With CuPy installed but no GPU (or no CuPy at all), the CuPy backend reports no devices,
quietly, and nothing about plax's defaults changes."""
from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest

from conftest import GPU_PROBLEM, HAVE_CUPY

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
    import plax
    from plax import plugins
    before = (plax.devices(), plax.default_backend(), sorted(plugins.registry().backends))
    name = plugins.register_plugin(__import__("plax_cupy.plugin").plugin, name="plax_cupy_no_gpu")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            after = (plax.devices(), plax.default_backend(), sorted(plugins.registry().backends))
        assert after == before
        assert "cupy" not in plugins.registry().backends
        record = [r for r in plugins.registry().records if r.name == "plax_cupy_no_gpu"]
        assert record and record[0].status == "loaded" and not record[0].backends
        with pytest.raises(RuntimeError, match="gpu"):
            plax.devices("gpu")
    finally:
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
