"""The CuPy backend on a GPU: devices, eager execution, jit, PRNG bits, control flow, DLPack,
out-of-memory errors. Every test here skips with "no CUDA GPU present" where there is none.

The full acceptance test on a GPU machine is the conformance kit:
``pytest --pyargs plax.testing.conformance --plax-backend=cupy`` (docs/gpu.md).
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax, random

from gpu_env import requires_gpu

pytestmark = requires_gpu


@pytest.fixture(scope="module")
def gpu(cupy_backend):
    return cupy_backend.devices()[0]


def test_devices(cupy_backend, gpu):
    from plax.device import CudaDevice
    assert isinstance(gpu, CudaDevice) and gpu.platform == "gpu"
    assert str(gpu) == "cuda:0" and repr(gpu) == "CudaDevice(id=0)"
    assert gpu.device_kind == cupy_backend.gpus[0].name
    assert plax.default_backend() == "gpu"
    assert plax.devices("gpu") == cupy_backend.devices()


def test_eager_matches_numpy(gpu):
    x = np.linspace(-3, 3, 1000, dtype=np.float32)
    a = plax.device_put(x, gpu)
    np.testing.assert_allclose(np.asarray(jnp.exp(a) * 2 - 1), np.exp(x) * 2 - 1, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(float(jnp.sum(a * a)), float((x.astype(np.float64) ** 2).sum()), rtol=1e-6)
    i = plax.device_put(np.arange(-5, 5, dtype=np.int32), gpu)
    np.testing.assert_array_equal(np.asarray(lax.div(i, plax.device_put(np.int32(0), gpu))), -np.ones(10))
    assert (jnp.exp(a)).devices() == {gpu}


def test_jit_selu_fuses_into_one_kernel(gpu):
    selu = plax.jit(lambda x: 1.05 * jnp.where(x > 0, x, 1.67 * jnp.exp(x) - 1.67))
    x = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)
    a = plax.device_put(x, gpu)
    want = 1.05 * np.where(x > 0, x, 1.67 * np.exp(x) - 1.67)
    np.testing.assert_allclose(np.asarray(selu(a).block_until_ready()), want, rtol=2e-6, atol=1e-6)
    text = selu.lower(a).compile().as_text()
    assert text.count('extern "C" __global__ void plax_elementwise') == 1


def test_jit_reductions_and_matmul(gpu):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((256, 300)).astype(np.float32)
    w = rng.standard_normal((300, 64)).astype(np.float32)
    f = plax.jit(lambda x, w: (jnp.tanh(x @ w).sum(axis=0), jnp.max(x, axis=1)))
    s, m = f(plax.device_put(x, gpu), plax.device_put(w, gpu))
    np.testing.assert_allclose(np.asarray(s), np.tanh(x.astype(np.float64) @ w).sum(0), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(np.asarray(m), x.max(1))


def test_prng_bits_equal_the_cpu_backends(gpu):
    key = random.PRNGKey(42)
    with plax.default_device(gpu):
        bits_gpu = np.asarray(random.bits(key, (1000,)))
        normal_gpu = np.asarray(random.normal(key, (1000,)))
    cpu = plax.devices("cpu")[0]
    with plax.default_device(cpu):
        bits_cpu = np.asarray(random.bits(key, (1000,)))
        normal_cpu = np.asarray(random.normal(key, (1000,)))
    np.testing.assert_array_equal(bits_gpu, bits_cpu)
    np.testing.assert_allclose(normal_gpu, normal_cpu, rtol=1e-6, atol=1e-6)


def test_bfloat16(gpu):
    """bfloat16 buffers hold their bits; operations compute in float32 and round, as NumPy's
    bfloat16 does on the CPU."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 32)).astype(jnp.bfloat16)
    b = rng.standard_normal((32, 16)).astype(jnp.bfloat16)
    ga, gb = plax.device_put(a, gpu), plax.device_put(b, gpu)
    assert ga.dtype == jnp.bfloat16 and np.asarray(ga).tobytes() == a.tobytes()
    cpu = plax.devices("cpu")[0]
    ca, cb = plax.device_put(a, cpu), plax.device_put(b, cpu)
    for f in (lambda x, y: x @ y, lambda x, y: jnp.tanh(x[:, :16] * 2) + (y[:16] * 3).sum()):
        got, want = np.asarray(plax.jit(f)(ga, gb)), np.asarray(plax.jit(f)(ca, cb))
        assert got.dtype == want.dtype == jnp.bfloat16
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-2, atol=2e-2)
    bits = lax.bitcast_convert_type(ga, np.uint16)
    np.testing.assert_array_equal(np.asarray(bits), a.view(np.uint16))


def test_control_flow(gpu):
    f = plax.jit(lambda x: lax.fori_loop(0, 10, lambda i, c: c * 1.5 + i, x))
    g = plax.jit(lambda xs: lax.scan(lambda c, x: (c + x, c * x), 0.0, xs))
    x = plax.device_put(np.float32(1.0), gpu)
    want = 1.0
    for i in range(10):
        want = want * 1.5 + i
    assert float(f(x)) == pytest.approx(want)
    c, ys = g(plax.device_put(np.arange(5, dtype=np.float32), gpu))
    assert float(c) == 10.0 and np.asarray(ys).tolist() == [0.0, 0.0, 2.0, 9.0, 24.0]


def test_dlpack_and_cuda_array_interface(cupy_backend, gpu):
    import cupy
    a = plax.device_put(np.arange(6, dtype=np.float32), gpu)
    buf = a._buffer_on(gpu)
    c = cupy.from_dlpack(cupy_backend.dlpack(buf))       # zero copy, a view
    assert c.data.ptr == buf.data.ptr
    assert buf.__cuda_array_interface__["data"][0] == buf.data.ptr
    back = cupy_backend.from_dlpack(cupy.arange(3, dtype=cupy.float32), gpu)
    assert isinstance(back, cupy.ndarray)


def test_out_of_memory_names_device_and_bytes(cupy_backend, gpu):
    from plax_cupy.runtime import GpuOutOfMemoryError
    with pytest.raises(GpuOutOfMemoryError, match=r"cuda:0.*\d+ bytes"):
        cupy_backend.execute(lax.broadcast_in_dim_p, cupy_backend.put(np.float32(1), gpu),
                             shape=(1 << 40,), broadcast_dimensions=())
    # the process keeps working
    assert float(jnp.sum(plax.device_put(np.ones(10, np.float32), gpu))) == 10.0


def test_incompatible_committed_devices(cupy_backend):
    devs = cupy_backend.devices()
    if len(devs) < 2:
        pytest.skip("needs two GPUs")
    a = plax.device_put(np.ones(3, np.float32), devs[0])
    b = plax.device_put(np.ones(3, np.float32), devs[1])
    with pytest.raises(ValueError, match="cuda:0.*cuda:1|cuda:1.*cuda:0|incompatible"):
        a + b
