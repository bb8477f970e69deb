"""DLPack and the CUDA array interface on plax.Array, zero copy both ways.

Export: ``Array.__dlpack__`` asks the buffer's backend (``Backend.dlpack``): on the CPU a
read-only view for DLPack 1.0 consumers (``np.from_dlpack``), as JAX hands out, and a copy
for older consumers or ``copy=True``; ``stream`` must be None there. ``__dlpack_device__``
reports the buffer's device; ``__cuda_array_interface__`` exists on GPU arrays only.
Import: ``jnp.from_dlpack`` / ``jnp.asarray`` hand the exporter to the backend of the
platform its memory is on (``Backend.from_dlpack``): a view, never a host round trip for a
GPU array. The GPU half runs on the simulated GPU in a child interpreter.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import plax
import plax.numpy as jnp

from subprocess_util import last_json, run_python

TESTS = Path(__file__).resolve().parent
HAVE_JAX = importlib.util.find_spec("jax") is not None
needs_jax = pytest.mark.skipif(not HAVE_JAX, reason="jax is not installed (comparisons with JAX)")


def _cpu_array(values):
    return plax.device_put(jnp.asarray(values), plax.devices("cpu")[0])


def _aligned(n: int, dtype=np.float32) -> np.ndarray:
    """A NumPy array whose data is 64-byte aligned (JAX imports such memory without a copy)."""
    raw = np.empty(n * np.dtype(dtype).itemsize + 64, np.uint8)
    start = -raw.ctypes.data % 64
    out = raw[start:start + n * np.dtype(dtype).itemsize].view(dtype)
    out[:] = np.arange(n)
    return out


# ------------------------------------------------------------------ export, CPU

def test_numpy_views_a_cpu_array_read_only_as_jax_hands_it_out():
    x = _cpu_array(np.arange(6, dtype=np.float32).reshape(2, 3))
    host = np.from_dlpack(x)
    np.testing.assert_array_equal(host, np.arange(6, dtype=np.float32).reshape(2, 3))
    assert np.shares_memory(host, np.asarray(x))  # zero copy
    assert not host.flags.writeable  # the Array stays immutable
    with pytest.raises(ValueError, match="read-only"):
        host[0, 0] = 100.0
    assert x.__dlpack_device__() == (1, 0)  # kDLCPU


@needs_jax
def test_read_only_export_matches_jax():
    import jax.numpy as jjnp
    from_jax = np.from_dlpack(jjnp.arange(3.0))
    from_plax = np.from_dlpack(_cpu_array(np.arange(3.0, dtype=np.float32)))
    assert from_jax.flags.writeable == from_plax.flags.writeable is False


def test_consumers_that_cannot_take_read_only_memory_get_a_copy():
    x = _cpu_array(np.arange(4, dtype=np.int32))
    writable = np.from_dlpack(x, copy=True)
    assert writable.flags.writeable and not np.shares_memory(writable, np.asarray(x))
    writable[0] = 7
    assert int(x[0]) == 0
    assert x.__dlpack__() is not None  # DLPack 0.x: a copy of its own (no read-only flag)
    with pytest.raises(BufferError, match="read-only"):
        x.__dlpack__(copy=False)


def test_cpu_export_refuses_a_stream():
    x = _cpu_array(np.ones(3, np.float32))
    with pytest.raises(ValueError, match="stream must be None"):
        x.__dlpack__(stream=1)


def test_cuda_array_interface_is_for_gpu_arrays_only():
    x = _cpu_array(np.ones(3, np.float32))
    assert not hasattr(x, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="only defined for GPU buffers"):
        x.__cuda_array_interface__  # noqa: B018


# ------------------------------------------------------------------ import, CPU

@needs_jax
def test_from_dlpack_shares_numpy_memory_where_jax_does():
    import jax.numpy as jjnp
    a = _aligned(8)
    jax_view = jjnp.from_dlpack(a)
    jax_shares = jax_view.unsafe_buffer_pointer() == a.ctypes.data
    with plax.default_device(plax.devices("cpu")[0]):
        y = jnp.from_dlpack(a)
    assert np.shares_memory(np.asarray(y), a) == jax_shares is True
    assert y.devices() == {plax.devices("cpu")[0]}
    np.testing.assert_array_equal(np.asarray(y), np.arange(8, dtype=np.float32))
    copied = jnp.from_dlpack(a, copy=True)  # the Array API's copy=True: a copy of its own
    assert not np.shares_memory(np.asarray(copied), a)
    np.testing.assert_array_equal(np.asarray(copied), a)


def test_round_trip_plax_numpy_plax_shares_memory():
    x = _cpu_array(np.arange(5, dtype=np.float32))
    back = jnp.from_dlpack(np.from_dlpack(x))
    assert np.shares_memory(np.asarray(back), np.asarray(x))
    again = jnp.from_dlpack(x)  # plax to plax
    assert np.shares_memory(np.asarray(again), np.asarray(x))
    assert again.dtype == x.dtype and again.shape == x.shape


@needs_jax
def test_from_dlpack_64_bit_values_follow_jax_dtypes():
    import jax.numpy as jjnp
    a = np.arange(3, dtype=np.int64)
    assert jnp.from_dlpack(a).dtype == jjnp.from_dlpack(a).dtype
    with pytest.raises(ValueError, match="copy=False"):
        if jnp.from_dlpack(a).dtype != a.dtype:
            jnp.from_dlpack(a, copy=False)
        else:  # x64 enabled: nothing to convert
            raise ValueError("copy=False")


def test_from_dlpack_errors():
    with pytest.raises(TypeError, match="must have __dlpack__ and __dlpack_device__"):
        jnp.from_dlpack([1, 2, 3])
    if "gpu" in plax.plugins.registry().platforms():
        pytest.skip("a GPU backend is installed here: the CUDA exporter below would work")

    class CudaTensor:  # what torch.cuda tensors export
        def __dlpack__(self, **kw):
            return np.arange(3).__dlpack__(**kw)

        def __dlpack_device__(self):
            return (2, 0)

    with pytest.raises(RuntimeError, match="kDLCUDA device, but no plax backend drives "
                                           "platform 'gpu'"):
        jnp.from_dlpack(CudaTensor())


# ------------------------------------------------------------------ the simulated GPU

_FAKE_GPU = """
    import json, sys
    sys.path[:0] = [{cupy_tests!r}]
    import fake_cupy_plugin  # the simulated GPU, the default platform
    import fake_cupy
    import numpy as np
    import cupy
    import plax, plax.numpy as jnp
    gets = []  # device-to-host copies of a simulated GPU array
    original_get = fake_cupy.ndarray.get
    fake_cupy.ndarray.get = lambda self, stream=None: (gets.append(1), original_get(self))[1]

    def host_memory(a):  # the host array behind a simulated device array (its private storage)
        return a._a if isinstance(a, fake_cupy.ndarray) else np.asarray(a)

    class CudaTensor:  # a PyTorch CUDA tensor, as DLPack sees it: memory on kDLCUDA device 0
        def __init__(self, a):
            self.a = a
        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)
        def __dlpack_device__(self):
            return (2, 0)

    c = cupy.arange(6, dtype=np.float32)
    imported = {{}}
    for name, make in [("from_dlpack", lambda t: jnp.from_dlpack(t)),
                       ("asarray", lambda t: jnp.asarray(t)),
                       ("array_copy", lambda t: jnp.array(t)),
                       ("from_dlpack_copy", lambda t: jnp.from_dlpack(t, copy=True))]:
        y = make(CudaTensor(c))
        imported[name] = {{"device": repr(y._device), "buffer": type(y._buf).__name__,
                          "shares": bool(np.shares_memory(host_memory(y._buf), host_memory(c)))}}
    gets_after_import = len(gets)
    x = jnp.arange(4.0) * 2.0
    cai = x.__cuda_array_interface__
    out = cupy.from_dlpack(x)  # what torch.from_dlpack(x) does: the capsule of the buffer
    print(json.dumps({{
        "default": repr(plax.devices()[0]), "imported": imported,
        "gets_after_import": gets_after_import,
        "dlpack_device": list(x.__dlpack_device__()),
        "cai_pointer_is_buffer": cai["data"][0] == host_memory(x._buf).ctypes.data,
        "export_shares": bool(np.shares_memory(host_memory(out), host_memory(x._buf))),
        "gets_after_export": len(gets) - gets_after_import,
        "values": np.asarray(host_memory(out)).tolist()}}))
"""


def test_gpu_arrays_cross_dlpack_without_a_host_copy():
    out = last_json(run_python(_FAKE_GPU.format(cupy_tests=str(TESTS / "cupy")),
                               TESTS.parent / "backends", timeout=300))
    assert out["default"] == "CudaDevice(id=0)"
    for name, r in out["imported"].items():
        assert r["device"] == "CudaDevice(id=0)" and r["buffer"] == "ndarray", (name, r)
    # views for from_dlpack and asarray, device copies for copy=True and jnp.array
    assert out["imported"]["from_dlpack"]["shares"] and out["imported"]["asarray"]["shares"]
    assert not out["imported"]["array_copy"]["shares"]
    assert not out["imported"]["from_dlpack_copy"]["shares"]
    assert out["gets_after_import"] == 0  # nothing went through the host
    assert out["dlpack_device"] == [2, 0]  # kDLCUDA, device 0
    assert out["cai_pointer_is_buffer"] and out["export_shares"]
    assert out["gets_after_export"] == 0
    assert out["values"] == [0.0, 2.0, 4.0, 6.0]
