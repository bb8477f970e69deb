"""The float32 path of ``betainc`` (plax_numba.special_beta) takes ``-log B(a, b)`` from
``log_beta_parts`` (Stirling's series after a shift by 10, no libm ``lgamma``): its absolute
error against SciPy's ``betaln`` over dense sweeps and the parameters' edges, and against
the libm form for large parameters. (betainc_f32's own bound, half an ulp and a hair of the
float64 form, is checked in test_special_iterative_forms.py.)"""
from __future__ import annotations

import functools

import numpy as np
import pytest


@functools.lru_cache(maxsize=None)
def _parts_loop():
    """One compiled loop over ``log_beta_parts`` for every test here (numba would compile
    each new loop again)."""
    from numba import njit
    from plax_numba.special_beta import log_beta_parts

    @njit(error_model="numpy")
    def run(a, b):
        out = np.empty_like(a)
        for i in range(a.size):
            l, m = log_beta_parts(a[i], b[i])
            out[i] = l + np.log(m)
        return out
    return run


def _log_uniform(rng, lo, hi, n):
    return np.exp(rng.uniform(np.log(lo), np.log(hi), n))


#: (lo, hi, bound): a and b log-uniform in [lo, hi], |error| at most bound. Up to 30 the
#: shifted terms cancel from below ~100: 1e-13 covers it (libm's lgamma form measured
#: 4e-14 there); beyond, the large-b form shared with log_beta_factor loses what its terms of
#: size a log b lose, relative to |log B|.
_RANGES = [(1e-5, 1.0, 1e-13), (0.1, 10.0, 1e-13), (0.5, 30.0, 1e-13), (1e-90, 1e-3, 1e-13)]


@pytest.mark.parametrize("lo,hi,bound", _RANGES, ids=str)
def test_log_beta_parts_absolute_error(lo, hi, bound):
    from scipy.special import betaln
    rng = np.random.default_rng(0)
    n = 50_000
    a, b = _log_uniform(rng, lo, hi, n), _log_uniform(rng, lo, hi, n)
    # the branch edges: b = 10 from either side, a = b, a + b = 10, a at the tiny limit
    edge = np.array([10.0, np.nextafter(10.0, 0), np.nextafter(10.0, 20), 9.5, 0.5, 5.0,
                     1e-100, 2e-100, 1e-99, 1.0, 2.0, 30.0])
    a = np.concatenate([a, np.repeat(edge, edge.size)])
    b = np.concatenate([b, np.tile(edge, edge.size)])
    got = _parts_loop()(a, b)
    assert np.max(np.abs(got + betaln(a, b))) <= bound


def test_log_beta_parts_large_parameters_equal_the_libm_form():
    # beyond 10 both take the large-b form (a log b + (a + b - 1/2) log1p(a/b) - a + ...),
    # whose cancellation costs the same in both (SciPy's betaln differs from either by up to
    # ~4e-10 relative at a ~ 3, b ~ 2.5e6): only lgamma(a) differs, a few 1e-14
    from numba import njit
    from plax_numba.special_beta import log_beta_factor

    @njit(error_model="numpy")
    def libm_form(a, b):
        out = np.empty_like(a)
        for i in range(a.size):
            out[i] = log_beta_factor(a[i], b[i])
        return out
    rng = np.random.default_rng(1)
    a, b = _log_uniform(rng, 1e-3, 1e8, 50_000), _log_uniform(rng, 10.0, 1e8, 50_000)
    want = libm_form(a, b)
    got = _parts_loop()(a, b)
    assert np.max(np.abs(got - want) / np.maximum(np.abs(want), 1.0)) <= 1e-13
