"""The host callbacks' GPU kernels (``plax_cupy.kernels_callbacks``) on the simulated GPU:
``pure_callback``, ``io_callback`` and ``debug_callback`` eager and under ``jit``, on every
dtype -- bfloat16 included, which reaches the callback as bfloat16 and comes back as such --
with results on the GPU, no host fallback, and the copies counted (run by
test_kernels_b_simulated.py)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from test_kernels_a_simulated import on_a_gpu
from test_kernels_b_simulated import _bf16

pytestmark = on_a_gpu

DTYPES = [np.float32, np.float16, "bfloat16", np.int32, np.uint8, np.bool_,
          np.complex64]


def _dtype(d):
    return _bf16() if d == "bfloat16" else np.dtype(d)


def gpu():
    return plax.devices("gpu")[0]


def on_gpu(host):
    return plax.device_put(host, gpu())


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: _dtype(d).name)
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_pure_callback_sees_and_returns_the_operands_dtype(dtype, mode):
    import plax_cupy
    dtype = _dtype(dtype)
    host = (np.arange(6).reshape(2, 3) % 3).astype(dtype)
    seen = []

    def double(x):
        x = np.asarray(x)
        seen.append(x)
        if x.dtype == np.bool_:
            return ~x
        return (x * np.asarray(2, x.dtype)).astype(x.dtype)

    def f(x):
        return plax.pure_callback(double, plax.ShapeDtypeStruct(x.shape, x.dtype), x)

    fn = plax.jit(f) if mode == "jit" else f
    x = on_gpu(host)
    with plax_cupy.count() as c:
        y = fn(x)
        y.block_until_ready()
    assert seen and seen[-1].dtype == dtype
    np.testing.assert_array_equal(seen[-1], host)
    assert y.dtype == dtype and y.devices() == {gpu()}
    np.testing.assert_array_equal(np.asarray(y), double(host))
    assert c.host_fallbacks == 0, c.fallbacks
    assert c.device_to_host >= 1 and c.host_to_device >= 1  # the callback's copies, counted


def test_bfloat16_results_feed_device_work_under_jit():
    bf16 = _bf16()
    host = np.array([1.5, -2.0, 3.25], bf16)

    def f(x):
        y = plax.pure_callback(lambda v: np.asarray(v) * np.asarray(2, bf16),
                               plax.ShapeDtypeStruct(x.shape, x.dtype), x)
        return y + x

    out = plax.jit(f)(on_gpu(host))
    assert out.dtype == bf16
    np.testing.assert_array_equal(np.asarray(out), host * 3)


def test_io_callback_and_debug_callback_run_on_the_host_in_order():
    from plax.experimental import io_callback
    log = []

    def record(v):
        log.append(("io", np.asarray(v).copy()))
        return np.asarray(v) + 1

    def f(x):
        plax.debug.callback(lambda v: log.append(("debug", np.asarray(v).copy())), x, ordered=True)
        return io_callback(record, plax.ShapeDtypeStruct(x.shape, x.dtype), x, ordered=True)

    host = np.array([1, 2, 3], _bf16())
    for fn in (f, plax.jit(f)):
        log.clear()
        out = fn(on_gpu(host))
        assert [k for k, _ in log] == ["debug", "io"]
        assert all(v.dtype == host.dtype for _, v in log)
        np.testing.assert_array_equal(np.asarray(out), host + 1)
        assert out.dtype == host.dtype and out.devices() == {gpu()}


def test_callbacks_have_gpu_kernels():
    from plax.lax.callbacks import debug_callback_p, io_callback_p, pure_callback_p
    from plax_cupy import kernels
    for p in (debug_callback_p, io_callback_p, pure_callback_p):
        assert p in kernels.impls() and kernels.impls()[p].bf16 == "bits"
