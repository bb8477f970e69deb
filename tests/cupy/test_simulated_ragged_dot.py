"""lax.ragged_dot / ragged_dot_general on the GPU: a composition of primitives that all have
GPU paths, so it runs on the device with no host trip (no transfer, no host fallback) and
gives the NumPy backend's values, eagerly and under ``jit``, forward and backward (under
``jit`` with no upload at all; eagerly only the few constants it creates are uploaded).

The tests need the simulated CuPy, so :func:`test_on_the_simulated_gpu` runs this file in a
child process with ``-p fake_cupy_plugin``; the other tests skip here.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from test_simulated_streams import SIMULATED, on_simulated_gpu, run_file_on_simulated_gpu


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__)


def _operands():
    rng = np.random.default_rng(25)
    return (rng.standard_normal((7, 3)).astype(np.float32),
            rng.standard_normal((3, 3, 2)).astype(np.float32),
            np.array([2, 0, 4], np.int32))


def _loss(lhs, rhs, sizes):
    from plax import lax
    return (lax.ragged_dot(lhs, rhs, sizes) ** 2).sum()


@on_simulated_gpu
@pytest.mark.parametrize("mode", ["eager", "jit"])
def test_ragged_dot_on_the_device_equals_the_numpy_backend(mode):
    import plax
    import plax_cupy
    from plax import lax
    gpu, cpu = plax.devices("gpu")[0], plax.devices("cpu")[0]
    host = _operands()
    args = plax.device_put(host, gpu)
    fn = lax.ragged_dot if mode == "eager" else plax.jit(lax.ragged_dot)
    grad = plax.grad(_loss, argnums=(0, 1))
    grad = grad if mode == "eager" else plax.jit(grad)
    fn(*args).block_until_ready()                                 # compile outside the count
    plax.block_until_ready(grad(*args))
    with plax_cupy.count() as call:
        out = fn(*args).block_until_ready()
        grads = plax.block_until_ready(grad(*args))
    # nothing read back; eagerly, only constants (zeros, the cotangent seed) are uploaded
    assert call.device_to_host == 0
    assert call.host_to_device == 0 if mode == "jit" else call.host_to_device <= 8
    assert call.host_fallbacks == 0 and call.fallbacks == {}
    on_cpu = plax.device_put(host, cpu)
    ref = plax.jit(lax.ragged_dot, backend="numpy")(*on_cpu)
    np.testing.assert_allclose(np.asarray(out), np.asarray(ref), rtol=1e-5, atol=1e-6)
    refs = plax.jit(plax.grad(_loss, argnums=(0, 1)), backend="numpy")(*on_cpu)
    for g, r in zip(grads, refs):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-5, atol=1e-5)
