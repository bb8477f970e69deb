"""The float32 ``exp`` the generated kernels use (plax_numba.scalar.exp_f32): its error bound
against a float64 exp, and the IEEE special cases."""
from __future__ import annotations

import numpy as np

from numba_vs_numpy import elementwise_loop


def _vexp():
    from plax_numba.scalar import exp_f32
    return elementwise_loop(exp_f32)


def test_exp_f32_within_one_ulp():
    x = np.linspace(-104.5, 89.5, 2_000_001, dtype=np.float32)
    got = _vexp()(x)
    ref = np.exp(x.astype(np.float64))
    with np.errstate(over="ignore"):
        ref32 = ref.astype(np.float32)
    normal = np.isfinite(ref32) & (ref32 >= np.finfo(np.float32).tiny)
    ulps = np.abs(got[normal].astype(np.float64) - ref[normal]) / np.spacing(ref32[normal])
    assert ulps.max() <= 0.99, ulps.max()
    tiny = ~normal & np.isfinite(ref32)          # subnormal or zero results: within 2**-149
    assert np.all(np.abs(got[tiny].astype(np.float64) - ref[tiny]) <= 2.0 ** -149)
    assert np.all(np.isinf(got[np.isinf(ref32)]))


def test_exp_f32_special_values():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, 88.7228, 88.7229, -150.0], np.float32)
    got = _vexp()(x)
    assert np.isnan(got[0])
    np.testing.assert_array_equal(got[1:], np.array(
        [np.inf, 0.0, 1.0, 1.0, np.float32(np.e), np.exp(np.float32(88.7228)), np.inf, 0.0],
        np.float32))
