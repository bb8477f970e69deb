"""Fixtures of the CuPy backend's tests.

Most of these tests need no GPU: they generate CUDA kernel source and compile it with NVRTC
(which needs CuPy and the ``nvidia-cuda-nvrtc-cu12`` wheel, not a GPU or a driver), or build the
same source for the host with g++ and check its values against the NumPy backend. Tests that
execute on a device skip with the reason "no CUDA GPU present".

Until the ``cupy`` entry point is declared in pyproject.toml, ``plax_cupy`` is imported from
the source tree when the editable install does not provide it, and the GPU tests register the
backend by hand.
"""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

try:
    import plax_cupy  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "backends"))
    import plax_cupy  # noqa: F401
sys.path.insert(0, os.path.dirname(__file__))  # kernel_source_util

HAVE_CUPY = importlib.util.find_spec("cupy") is not None


def _nvrtc_problem() -> str:
    if not HAVE_CUPY:
        return "CuPy is not installed (pip install 'plax[cuda12]')"
    try:
        from plax_cupy import nvrtc
        nvrtc.nvrtc_version()
    except Exception as err:  # noqa: BLE001 - any failure to load NVRTC is a skip reason
        return f"NVRTC cannot be loaded ({type(err).__name__}: {err}); pip install nvidia-cuda-nvrtc-cu12"
    return ""


NVRTC_PROBLEM = _nvrtc_problem()
requires_nvrtc = pytest.mark.skipif(bool(NVRTC_PROBLEM), reason=NVRTC_PROBLEM or "nvrtc")


def _gpu_problem() -> str:
    from plax_cupy.runtime import probe
    gpus, reason = probe()
    return "" if gpus else "no CUDA GPU present"


GPU_PROBLEM = _gpu_problem()
requires_gpu = pytest.mark.skipif(bool(GPU_PROBLEM), reason=GPU_PROBLEM or "gpu")


@pytest.fixture(scope="module")
def cupy_backend():
    """The ``cupy`` backend object (registered by hand if no entry point provides it); only
    for tests marked :data:`requires_gpu`."""
    from plax import plugins
    import plax_cupy.plugin
    registered = None
    if "cupy" not in plugins.registry().backends:
        registered = "plax_cupy_tests"
        plugins.register_plugin(plax_cupy.plugin, name=registered)
    yield plugins.registry().get_backend("cupy")
    if registered:
        plugins.unregister_plugin(registered)
