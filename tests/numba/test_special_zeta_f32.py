"""float32 ``zeta``'s fixed-length form (plax_numba.special_zeta._zeta_fixed: four direct
terms and eight Euler-Maclaurin terms, exp/log without libm) against the float64 form that
sums to a relative tolerance (zeta_core, Cephes' method, SciPy's bits): its relative error
over the domain where zeta_f32 takes it, and the float32 result rounding as the float64 one
does."""
from __future__ import annotations

import numpy as np

# one compiled loop per scalar form, shared with test_special_iterative_forms.py in a process
from special_forms_cases import elementwise_loop_n


def _grid():
    rng = np.random.default_rng(7)
    n = 100_000
    s = np.concatenate([rng.uniform(1.0, 64.0, n), rng.uniform(1.0, 2.0, n),
                        1 + 2.0 ** -np.arange(1, 23), np.arange(2.0, 65.0)])
    q = np.concatenate([np.exp(rng.uniform(np.log(1e-3), np.log(1e7), n)),
                        rng.uniform(0.0, 20.0, n), rng.uniform(0.01, 3, 22),
                        np.full(63, 0.75)])
    s, q = s.astype(np.float32), q.astype(np.float32)
    keep = (s > 1) & (q > 0)
    return s[keep], q[keep]


def test_fixed_form_relative_error():
    from numba import njit
    from plax_numba.special_zeta import _zeta_fixed, zeta_core

    @njit(error_model="numpy")
    def core(s, q):
        return zeta_core(s, q, 2.0 ** -53, 9.0)
    s, q = (a.astype(np.float64) for a in _grid())
    got = elementwise_loop_n(_zeta_fixed, 2)(s, q)
    want = elementwise_loop_n(core, 2)(s, q)
    # (below ~2**-1000 the clamped exp no longer underflows to 0: far under float32)
    ok = np.isfinite(want) & (want > 1e-250) & (want < 1e250)
    assert ok.mean() > 0.9
    assert np.max(np.abs(got[ok] / want[ok] - 1)) < 1e-10   # measured: 1.9e-11


def test_float32_rounds_the_float64_value():
    from plax_numba.special_zeta import zeta_f32, zeta_f64
    s, q = _grid()
    got = elementwise_loop_n(zeta_f32, 2)(s, q).astype(np.float64)
    want = elementwise_loop_n(zeta_f64, 2)(s.astype(np.float64), q.astype(np.float64))
    w32 = want.astype(np.float32)
    fin = np.isfinite(w32) & (np.abs(w32) > np.finfo(np.float32).tiny)
    np.testing.assert_array_equal(np.isinf(got), np.isinf(w32))
    unit = np.spacing(np.abs(w32[fin])).astype(np.float64)
    assert np.max(np.abs(got[fin] - want[fin]) / unit) <= 0.51
