"""Programs made of the linalg, FFT, convolution, window and special-function primitives run on
the GPU, eagerly and under ``jit``, without leaving the device: no host fallback and no host
copy but reading the results (``plax_cupy.count``), values equal to the CPU's within the
dtype's tolerance -- and their gradients too (run by test_kernels_b_simulated.py)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from test_kernels_a_simulated import on_a_gpu

pytestmark = on_a_gpu


def _linalg(a, b):
    spd = a @ a.T + 4 * jnp.eye(a.shape[0], dtype=a.dtype)
    l = lax.linalg.cholesky(spd)
    x = lax.linalg.triangular_solve(l, b, left_side=True, lower=True)
    lu, piv, perm = lax.linalg.lu(a)
    q, r = lax.linalg.qr(a, full_matrices=False)
    w, v = jnp.linalg.eigh(spd)
    s = jnp.linalg.svd(a, compute_uv=False)
    return l, x, lu, piv, perm, jnp.abs(r), w, s, jnp.abs(q @ r)


def _signal(img, k, with_fft=True):
    y = lax.conv_general_dilated(img, k, (1, 2), ((1, 1), (0, 1)), rhs_dilation=(1, 2),
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))
    pooled = lax.reduce_window(y, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 1), "SAME")
    summed = lax.reduce_window(y, 0.0, lax.add, (1, 2, 3, 1), (1, 1, 1, 1), "VALID")
    if not with_fft:  # (the FFT takes float32/float64 only)
        return pooled, summed
    spectrum = jnp.fft.rfft2(img[0, 0])
    return pooled, summed, jnp.abs(spectrum), jnp.fft.irfft2(spectrum, s=img.shape[2:])


def _special(x):
    unit = 1 / (1 + jnp.exp(-x))
    return (lax.erf(x), lax.erf_inv(jnp.tanh(x)), lax.lgamma(x), lax.digamma(x),
            lax.igamma(jnp.abs(x) + 0.5, jnp.abs(x)), lax.igammac(jnp.abs(x) + 0.5, jnp.abs(x)),
            lax.bessel_i0e(x), lax.bessel_i1e(x), lax.zeta(jnp.abs(x) + 1.5, jnp.abs(x) + 1),
            lax.polygamma(jnp.ones_like(x), jnp.abs(x) + 0.1),
            lax.random_gamma_grad(jnp.abs(x) + 0.5, jnp.abs(x) + 0.1),
            lax.betainc(jnp.abs(x) + 1, jnp.abs(x) + 2, unit))


def _run(fn, args, jitted, tol):
    import plax_cupy
    gpu, cpu = plax.devices("gpu")[0], plax.devices("cpu")[0]
    f = plax.jit(fn) if jitted else fn
    on_gpu = [plax.device_put(a, gpu) for a in args]
    f(*on_gpu)  # compiles once (constants go to the device once)
    with plax_cupy.count() as c:
        out = plax.tree_util.tree_leaves(f(*on_gpu))
        for o in out:
            o.block_until_ready()
    assert c.host_fallbacks == 0, c.fallbacks
    assert c.device_to_host == 0
    want = plax.tree_util.tree_leaves(fn(*[plax.device_put(a, cpu) for a in args]))
    for o, w in zip(out, want):
        assert o.dtype == w.dtype and o.shape == w.shape
        np.testing.assert_allclose(np.asarray(o).astype(np.float64), np.asarray(w).astype(np.float64),
                                   rtol=tol, atol=tol)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_linalg_program_stays_on_the_device(jitted):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((4, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2)).astype(np.float32)
    _run(_linalg, (a, b), jitted, 1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_convolution_window_and_fft_program_stays_on_the_device(dtype, jitted):
    rng = np.random.default_rng(1)
    img = rng.standard_normal((2, 3, 8, 8)).astype(dtype)
    k = rng.standard_normal((4, 3, 3, 2)).astype(dtype)
    with_fft = np.dtype(dtype) == np.float32

    def fn(img, k):
        return _signal(img, k, with_fft)
    _run(fn, (img, k), jitted, 1e-4 if np.dtype(dtype) == np.float32 else 5e-2)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_special_function_program_stays_on_the_device(dtype, jitted):
    x = np.linspace(-3.3, 4.1, 12).astype(dtype)
    _run(_special, (x,), jitted, 1e-4 if np.dtype(dtype) == np.float32 else 2e-2)


def test_gradients_through_the_families_stay_on_the_device():
    rng = np.random.default_rng(2)
    img = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    k = rng.standard_normal((3, 2, 2, 2)).astype(np.float32)

    def loss(img, k):
        pooled, summed, mag, back = _signal(img, k)
        return jnp.sum(pooled) + jnp.sum(summed ** 2) + jnp.sum(mag) + jnp.sum(back)

    _run(plax.grad(loss, argnums=(0, 1)), (img, k), True, 1e-3)
