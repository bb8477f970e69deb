"""What the machine offers the CuPy backend's tests: CuPy, NVRTC, a GPU (each a skip reason
where missing). Imported by tests/cupy/conftest.py and by the test modules."""
from __future__ import annotations

import importlib.util

import pytest

HAVE_CUPY = importlib.util.find_spec("cupy") is not None


def _nvrtc_problem() -> str:
    if not HAVE_CUPY:
        return "CuPy is not installed (pip install 'plax[cuda12]')"
    import sys
    if getattr(sys.modules.get("cupy"), "__version__", "").endswith("simulated"):
        return "the simulated GPU's NVRTC compiles nothing (tests/cupy/fake_nvrtc.py)"
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
