"""Float32 ``log1p`` as a fused scalar form (:func:`plax_numba.libm_free.log1p_f32`) and what it
buys: ``random.normal`` runs as one kernel from the hash's bits to the samples. The error
bound against float64 ``np.log1p``, the IEEE cases, the samples against the NumPy backend
(within :data:`NORMAL_ULPS`: the two ``log1p``s differ in the last bit) and against JAX's."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
from plax import lax, random
from plax.lowering import PlaxFallbackWarning

from numba_vs_numpy import (NORMAL_ULPS, assert_ulps_close, compiled_source, elementwise_loop,
                            jit_both, ulp_distance)

F32 = np.float32
#: measured over every seventh float32 in (-1, max] (0.835); tests/numba sample it
LOG1P_ULPS = 0.84


@pytest.fixture(scope="module")
def log1p32():
    from plax_numba.libm_free import log1p_f32
    return elementwise_loop(log1p_f32)


def _ulps(got, x):
    """``got``'s error in units of the float32 spacing at float64 ``log1p(x)`` (2**-149 below
    the smallest normal)."""
    ref = np.log1p(x.astype(np.float64))
    spacing = np.spacing(np.maximum(np.abs(ref.astype(F32)), np.finfo(F32).tiny))
    return np.abs(got.astype(np.float64) - ref) / spacing.astype(np.float64)


def test_log1p_error_bound_over_dense_sweeps(log1p32):
    # every 1009th float32 of (-1, 0) and (0, max]: all exponents, both sides of 1 + x's
    # rounding, tiny and subnormal x (where the result is x)
    neg = np.arange(0x80000001, 0xBF800000, 1009, dtype=np.uint32).view(F32)
    pos = np.arange(0x00000001, 0x7F7FFFFF, 1009, dtype=np.uint32).view(F32)
    near = np.linspace(-0.5, 1.0, 300_001, dtype=F32)     # where log1p(x) ~ x cancels least
    for x in (neg, pos, near):
        assert _ulps(log1p32(x), x).max() <= LOG1P_ULPS


def test_log1p_special_values(log1p32):
    x = np.array([0.0, -0.0, -1.0, -1.5, -np.inf, np.inf, np.nan, 1e-45, -1e-45,
                  np.finfo(F32).max, np.nextafter(F32(-1), F32(0))], F32)
    got = log1p32(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.log1p(x)
    np.testing.assert_array_equal(np.signbit(got[:2]), [False, True])   # ±0 kept
    np.testing.assert_array_equal(got[:9], want[:9])                    # -inf, NaN, inf, x
    assert _ulps(got[9:], x[9:]).max() <= LOG1P_ULPS


def test_log1p_fuses_and_matches_numpy_backend():
    x = np.random.default_rng(0).uniform(-0.999, 5.0, 10_000).astype(F32)

    def f(x):
        return lax.log1p(x * x - 0.5) * 2.0 + x
    source = compiled_source(f, x)
    assert "log1p_f32(" in source and source.count("# ---- fused kernel") == 1, source
    got, want = jit_both(f, x, fallback_is_error=True)
    np.testing.assert_allclose(got[0], want[0], rtol=3e-7, atol=1e-7)


def test_float64_log1p_stays_on_numpys_loop():
    # 64-bit samplers keep the NumPy backend's bits: the cluster splits around np.log1p
    def f(x):
        return lax.log1p(x * 2.0 + 1.0) * 3.0 - 1.0
    with plax.config.override("jax_enable_x64", True):
        x = np.linspace(0.0, 5.0, 100)
        source = compiled_source(f, x)
        got, want = jit_both(f, x, fallback_is_error=True)
    # two kernels, the reference log1p between them
    assert "log1p_f32(" not in source and source.count("# ---- fused kernel") == 2, source
    np.testing.assert_array_equal(got[0], want[0])


# ---------------------------------------------------------------- random.normal

@pytest.mark.parametrize("partitionable", [True, False])
def test_normal_after_the_hash_is_one_kernel(partitionable):
    n = 1 << 17                                           # large: the parallel kernel
    with plax.config.override("jax_threefry_partitionable", partitionable):
        source = compiled_source(lambda k: random.normal(k, (n,)), random.PRNGKey(0))
    kernels = source.split("# ---- fused kernel")[1:]
    sampler = [k for k in kernels if "erf" in k.splitlines()[0] or "log1p_f32(" in k]
    # one kernel from the bits (xor, shift, or, bitcast) to the samples, log1p inside
    assert len(sampler) == 1, source
    body = sampler[0]
    for piece in ("bitcast(", "log1p_f32(", "np.sqrt(", "prange("):
        assert piece in body, (piece, body)
    # no reference log1p between kernels, no chunked segments (the former split)
    assert "np.log1p(" not in source and sum("bitcast(" in k for k in kernels) == 1, source


@pytest.mark.parametrize("shape", [(), (7,), (1000, 3), (1 << 17,)])
def test_normal_matches_numpy_backend(shape):
    key = random.PRNGKey(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaxFallbackWarning)
        got, want = jit_both(lambda k: random.normal(k, shape), key)
    assert_ulps_close(got[0], want[0], NORMAL_ULPS)


@pytest.mark.parametrize("partitionable", [True, False])
def test_normal_matches_jax(partitionable):
    jax = pytest.importorskip("jax")
    n = 100_000
    with plax.config.override("jax_threefry_partitionable", partitionable):
        got = np.asarray(plax.jit(lambda k: random.normal(k, (n,)), backend="numba")(
            random.PRNGKey(5)))
    before = jax.config.jax_threefry_partitionable
    jax.config.update("jax_threefry_partitionable", partitionable)
    try:
        want = np.asarray(jax.random.normal(jax.random.PRNGKey(5), (n,)))
    finally:
        jax.config.update("jax_threefry_partitionable", before)
    # XLA's log1p is a third one: JAX's samples and plax's differ by a few ulps in ~5%
    assert ulp_distance(got, want).max() <= NORMAL_ULPS
    assert np.mean(got == want) > 0.9
