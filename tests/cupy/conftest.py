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

import os
import sys

import pytest

try:
    import plax_cupy  # noqa: F401
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "backends"))
    import plax_cupy  # noqa: F401
sys.path.insert(0, os.path.dirname(__file__))  # kernel_source_util

# what the machine has, in a module of its own so that test modules import it by a name no
# other conftest.py shadows (``from conftest import ...`` may find another directory's)
from gpu_env import GPU_PROBLEM, HAVE_CUPY, NVRTC_PROBLEM, requires_gpu, requires_nvrtc  # noqa: E402,F401


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


@pytest.fixture
def compiled_programs(monkeypatch):
    """The executables ``CupyBackend.compile`` returns during the test, latest last (their
    ``as_text()`` ends with the ``# CUDA graph:`` line)."""
    from plax_cupy.backend import CupyBackend
    made, compile_ = [], CupyBackend.compile

    def recording(self, jaxpr, device):
        made.append(compile_(self, jaxpr, device))
        return made[-1]
    monkeypatch.setattr(CupyBackend, "compile", recording)
    return made
