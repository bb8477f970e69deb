"""The special functions' GPU kernels (``plax_cupy.kernels_special``) on the simulated GPU
against the NumPy backend's, on float16, bfloat16, float32 and float64, with XLA's values at
the poles, infinities and NaN (run by test_kernels_b_simulated.py)."""
from __future__ import annotations

import numpy as np
import pytest

from plax import lax
from plax.lax import special_functions as S
from plax.lax.random_bits import random_gamma_grad_p
from test_kernels_a_simulated import on_a_gpu
from test_kernels_b_simulated import _bf16, close

pytestmark = on_a_gpu

DTYPES = [np.float16, "bfloat16", np.float32, np.float64]


def _dtype(d):
    return _bf16() if d == "bfloat16" else np.dtype(d)


ids = lambda d: _dtype(d).name  # noqa: E731

EDGES = [0.0, -0.0, 1.0, -1.0, -2.0, 0.5, -0.5, 2.5, -3.5, 7.0, 30.0, np.inf, -np.inf, np.nan]


def values(dtype, low=-6.0, high=6.0, seed=0, edges=True):
    rng = np.random.default_rng(seed)
    x = rng.uniform(low, high, 24)
    if edges:
        x = np.concatenate([x, EDGES])
    return x.reshape(2, -1).astype(_dtype(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("primitive", [lax.erf_p, lax.erfc_p, lax.lgamma_p, lax.digamma_p,
                                       S.bessel_i0e_p, S.bessel_i1e_p], ids=lambda p: p.name)
def test_unary_special_functions(primitive, dtype):
    close(primitive, values(dtype), scale=4)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_erf_inv_on_and_outside_its_domain(dtype):
    x = np.array([-1.0, -0.999, -0.5, 0.0, 0.3, 0.9, 0.99, 1.0, 1.5, -2.0, np.nan])
    close(lax.erf_inv_p, x.astype(_dtype(dtype)), scale=4)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_polygamma_orders_and_poles(dtype):
    m = np.array([0, 1, 2, 3, 1.5, -1, 4, 1, 2, 0, 1, 2]).astype(_dtype(dtype))
    x = np.array([0.5, 1.0, 2.5, -1.5, 1.0, 1.0, 3.0, -2.0, 0.0, 7.0, np.inf, np.nan]).astype(_dtype(dtype))
    close(lax.polygamma_p, m, x, scale=4)
    close(lax.polygamma_p, np.asarray(1, _dtype(dtype)), x, scale=4)  # a scalar order


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("primitive", [S.igamma_p, S.igammac_p, S.igamma_grad_a_p,
                                       random_gamma_grad_p], ids=lambda p: p.name)
def test_incomplete_gamma_family(primitive, dtype):
    a = np.abs(values(dtype, 0.1, 12.0, seed=1, edges=False))
    x = np.abs(values(dtype, 0.0, 15.0, seed=2, edges=False))
    scale = 40 if primitive in (S.igamma_grad_a_p, random_gamma_grad_p) else 4
    close(primitive, a, x, scale=scale)
    edge_a = np.array([1.0, 2.0, 0.0, -1.0, np.inf, np.nan, 3.0, 0.5]).astype(_dtype(dtype))
    edge_x = np.array([0.0, -1.0, 1.0, 1.0, 2.0, 1.0, np.inf, np.nan]).astype(_dtype(dtype))
    close(primitive, edge_a, edge_x, scale=scale)


def test_random_gamma_grad_series_and_continued_fraction_branches():
    # x <= max(1, a): the series; x > max(1, a): the continued fraction; tiny a underflows
    a = np.array([0.2, 5.0, 50.0, 0.5, 2.0, 1e-3, 300.0], np.float64)
    x = np.array([0.1, 3.0, 45.0, 8.0, 30.0, 1e-30, 500.0], np.float64)
    close(random_gamma_grad_p, a, x, scale=1e3)
    close(random_gamma_grad_p, a.astype(np.float32), x.astype(np.float32), scale=40)
    close(random_gamma_grad_p, np.float32(2.0), x.astype(np.float32), scale=40)  # broadcast


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_zeta_and_incomplete_beta(dtype):
    s = np.array([2.0, 3.5, 1.0, 0.5, np.inf, 4.0, 2.0, 6.0]).astype(_dtype(dtype))
    q = np.array([1.0, 0.5, 2.0, 1.0, 1.0, np.inf, -1.5, 3.0]).astype(_dtype(dtype))
    close(S.zeta_p, s, q, scale=4)
    a = np.array([0.5, 1.0, 2.0, 5.0, 0.1, 3.0, -1.0, 2.0]).astype(_dtype(dtype))
    b = np.array([0.5, 1.0, 3.0, 2.0, 0.1, 7.0, 1.0, np.nan]).astype(_dtype(dtype))
    x = np.array([0.3, 0.25, 0.5, 0.9, 0.01, 1.0, 0.5, 0.5]).astype(_dtype(dtype))
    close(S.regularized_incomplete_beta_p, a, b, x, scale=4)


def test_every_special_primitive_has_a_gpu_kernel():
    from plax_cupy import kernels
    table = kernels.impls()
    for p in (lax.erf_p, lax.erfc_p, lax.erf_inv_p, lax.lgamma_p, lax.digamma_p, lax.polygamma_p,
              S.igamma_p, S.igammac_p, S.igamma_grad_a_p, S.regularized_incomplete_beta_p,
              S.zeta_p, S.bessel_i0e_p, S.bessel_i1e_p, random_gamma_grad_p):
        assert p in table, p.name
