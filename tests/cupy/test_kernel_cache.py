"""plax's disk cache of compiled kernels (:mod:`plax_cupy.kernel_cache`) with the real NVRTC
(no GPU needed): a cubin compiled once per source, options and NVRTC version, then found; a
different option or architecture is a different file; nothing half-written is left behind."""
from __future__ import annotations

import os

import pytest

from gpu_env import NVRTC_PROBLEM

SOURCE = 'extern "C" __global__ void plax_cache_probe(float* x) { x[0] = x[0] / 3.0f; }'


@pytest.fixture
def cache(monkeypatch, tmp_path):
    monkeypatch.setenv("PLAX_CUPY_CACHE_DIR", str(tmp_path))
    return tmp_path


@pytest.mark.skipif(bool(NVRTC_PROBLEM), reason=NVRTC_PROBLEM or "nvrtc")
def test_compiled_once_then_found(cache):
    from plax_cupy import kernel_cache, nvrtc
    options = nvrtc.DEVICE_OPTIONS + ("-arch=sm_90",)
    before = kernel_cache.stats()
    path = kernel_cache.compiled(SOURCE, options, "cubin")
    assert os.path.dirname(path) == str(cache) and path.endswith(".cubin")
    with open(path, "rb") as f:
        assert f.read(4) == b"\x7fELF"   # a cubin: machine code for sm_90
    assert kernel_cache.compiled(SOURCE, options, "cubin") == path
    after = kernel_cache.stats()
    assert (after["compiled"] - before["compiled"], after["loaded"] - before["loaded"]) == (1, 1)
    other_arch = kernel_cache.compiled(SOURCE, nvrtc.DEVICE_OPTIONS + ("-arch=sm_80",), "cubin")
    flushing = kernel_cache.compiled(SOURCE, options + ("-ftz=true",), "cubin")
    assert len({path, other_arch, flushing}) == 3
    ptx = kernel_cache.compiled(SOURCE, nvrtc.DEVICE_OPTIONS + ("-arch=compute_90",), "ptx")
    with open(ptx) as f:
        text = f.read()
    assert ".entry plax_cache_probe" in text and "div.rn.f32" in text and ".ftz" not in text
    assert not [n for n in os.listdir(cache) if n.endswith(".tmp")]


def test_cache_key_covers_every_input():
    from plax_cupy import kernel_cache
    key = kernel_cache.cache_key(SOURCE, ("-arch=sm_90",), (12, 9))
    assert key == kernel_cache.cache_key(SOURCE, ("-arch=sm_90",), (12, 9))
    assert key != kernel_cache.cache_key(SOURCE + " ", ("-arch=sm_90",), (12, 9))
    assert key != kernel_cache.cache_key(SOURCE, ("-arch=sm_80",), (12, 9))
    assert key != kernel_cache.cache_key(SOURCE, ("-arch=sm_90",), (13, 0))


def test_cache_dir_setting(monkeypatch, tmp_path):
    from plax_cupy import kernel_cache
    monkeypatch.setenv("PLAX_CUPY_CACHE_DIR", str(tmp_path / "a" / "b"))
    assert kernel_cache.cache_dir() == str(tmp_path / "a" / "b") and (tmp_path / "a" / "b").is_dir()
    monkeypatch.delenv("PLAX_CUPY_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert kernel_cache.cache_dir() == str(tmp_path / "xdg" / "plax_cupy")
