"""The float32 ``tanh`` and ``logistic`` the generated kernels use (plax_numba.scalar.tanh_f32,
logistic_f32): their error bounds against float64, and the IEEE special cases."""
from __future__ import annotations

import numpy as np

from numba_vs_numpy import elementwise_loop


def _vectorised(name):
    from plax_numba import scalar
    return elementwise_loop(getattr(scalar, name))


def _max_ulps(got, ref):
    ref32 = ref.astype(np.float32)
    normal = np.abs(ref32) >= np.finfo(np.float32).tiny
    ulps = np.abs(got[normal].astype(np.float64) - ref[normal]) / np.spacing(np.abs(ref32[normal]))
    tiny = ~normal  # subnormal or zero results: within 2**-149
    assert np.all(np.abs(got[tiny].astype(np.float64) - ref[tiny]) <= 2.0 ** -149)
    return ulps.max()


def test_tanh_f32_error_bound():
    x = np.concatenate([np.linspace(-12, 12, 2_000_001, dtype=np.float32),
                        np.linspace(-0.7, 0.7, 1_000_001, dtype=np.float32),
                        np.float32(2.0) ** -np.arange(1, 140, dtype=np.float32)])
    x = np.concatenate([x, -x[-139:]])
    every_61st = np.arange(0x3C000000, 0x41400000, 61, dtype=np.int64).astype(np.uint32)
    x = np.concatenate([x, every_61st.view(np.float32), -every_61st.view(np.float32)])
    got = _vectorised("tanh_f32")(x)
    # the rational x N(z) / D(z) evaluated in float32 (JAX's float32 tanh: 4.8 ulps on such
    # inputs); the bound also keeps the compiled tier close to the reference tier's np.tanh
    assert _max_ulps(got, np.tanh(x.astype(np.float64))) <= 4.96


def test_logistic_f32_error_bound():
    x = np.concatenate([np.linspace(-104, 20, 2_000_001, dtype=np.float32),
                        np.linspace(-2, 2, 1_000_001, dtype=np.float32)])
    got = _vectorised("logistic_f32")(x)
    with np.errstate(over="ignore"):
        ref = 1.0 / (1.0 + np.exp(-x.astype(np.float64)))
    assert _max_ulps(got, ref) <= 2.26


def test_special_values():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 100.0, -100.0, -200.0], np.float32)
    t = _vectorised("tanh_f32")(x)
    assert np.isnan(t[0])
    np.testing.assert_array_equal(t[1:], np.array([1, -1, 0, 0, 1, -1, -1], np.float32))
    assert np.signbit(t[4]) and not np.signbit(t[3])
    s = _vectorised("logistic_f32")(x)
    assert np.isnan(s[0])
    np.testing.assert_array_equal(s[[1, 2, 3, 4, 5, 7]], np.array([1, 0, 0.5, 0.5, 1, 0], np.float32))
    assert 0 < s[6] < 1e-43  # subnormal, not flushed
