"""Small float matrix-vector products inside native loops and whole-program kernels:
:func:`plax_numba.arrays.matvec_t` (the inlined "axpy form" loop, each output summed in ``k``
order) against a float64 NumPy reference (within ``k`` ulps) and against the NumPy backend,
including transposed operands, ``(k, 1)``/``(1, k)`` vectors, ``k == 1``, ``m == 1``, integer
products (which keep the existing loops) and products whose result is carried (whose buffer
must not be reused across iterations).
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax
from plax import numpy as jnp



def run_both(f, *args):
    """``f`` jitted on the Numba and the NumPy backend (leaves as host arrays) and the Numba
    program's generated text."""
    jf = plax.jit(f, backend="numba")
    got = [np.asarray(x) for x in plax.tree_util.tree_leaves(jf(*args))]
    want = [np.asarray(x) for x in plax.tree_util.tree_leaves(plax.jit(f, backend="numpy")(*args))]
    return got, want, jf.lower(*args).compile().as_text()


def _within_k_ulps(got, a, b, k):
    """``got`` within ``k`` ulps (of the sum of the terms' magnitudes) of the float64
    product of ``a`` and ``b``."""
    exact = a.astype(np.float64) @ b.astype(np.float64)
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    eps = np.finfo(got.dtype).eps
    assert np.all(np.abs(got.astype(np.float64) - exact) <= (k + 1) * eps * mag + 1e-300), \
        np.abs(got - exact).max()


@pytest.mark.parametrize("m,k", [(64, 64), (64, 16), (1, 9), (9, 1), (1, 1), (13, 23),
                                 (8, 8)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matvec_t_against_float64(m, k, dtype):
    from plax_numba.arrays import matvec_t
    from numba import njit

    @njit
    def call(wt, v, out, k, m):
        return matvec_t(wt, v, out, k, m)

    rng = np.random.default_rng(m * 100 + k)
    w = rng.standard_normal((m, k)).astype(dtype)
    v2 = rng.standard_normal((k, 3)).astype(dtype)
    v = v2[:, 1]                      # a non-contiguous vector
    out = np.full(m, np.nan, dtype)
    call(np.ascontiguousarray(w.T), v, out, k, m)
    _within_k_ulps(out, w, v, k)
    # summed in k order, as the naive loop does (same rounding)
    naive = np.zeros(m, dtype)
    for kk in range(k):
        naive = (naive + w[:, kk] * v[kk]).astype(dtype)
    np.testing.assert_array_equal(out, naive)


def _scan_rnn(w, u, b, h0, xs):
    def cell(h, x):
        h = jnp.tanh(w @ h + u @ x + b)
        return h, h
    return lax.scan(cell, h0, xs)


def test_rnn_scan_uses_matvec():
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    u = (rng.standard_normal((64, 16)) / 4).astype(np.float32)
    b = (rng.standard_normal(64) * 0.1).astype(np.float32)
    xs = rng.standard_normal((40, 16)).astype(np.float32)
    h0 = np.zeros(64, np.float32)
    got, want, text = run_both(_scan_rnn, w, u, b, h0, xs)
    assert "matvec_t(" in text
    for g, x in zip(got, want):
        np.testing.assert_allclose(g, x, rtol=0, atol=64 * 4 * np.finfo(np.float32).eps)


def _products(w, v, vc, vr, wk):
    """Every product form in one scan body: ``w @ v`` (transpose hoisted), ``v @ wk`` and
    ``wk.T @ v`` (the matrix already ``(k, m)``), ``(k, 1)`` and ``(1, k)`` vectors."""
    def body(c, x):
        a = w @ (c + x)
        b = (c * x) @ wk
        t = wk.T @ c
        col = (w @ vc)[:, 0]
        row = (vr @ wk)[0]
        mat = jnp.dot(x, w.T)               # dot_general contracting w's axis 1 on the right
        return a * 0.25 + t * 0.5, jnp.stack([b, col, row, mat])
    return lax.scan(body, v, jnp.stack([v, v * 2.0, v - 1.0]))


@pytest.mark.parametrize("n", [1, 8, 19])
def test_product_forms_match_numpy_backend(n):
    rng = np.random.default_rng(n)
    w = rng.standard_normal((n, n)).astype(np.float32) / np.sqrt(n)
    wk = rng.standard_normal((n, n)).astype(np.float32) / np.sqrt(n)
    v = rng.standard_normal(n).astype(np.float32)
    vc = rng.standard_normal((n, 1)).astype(np.float32)
    vr = rng.standard_normal((1, n)).astype(np.float32)
    got, want, text = run_both(_products, w, v, vc, vr, wk)
    # (n = 1: every product contracts an axis of size 1, an outer product: a fused multiply)
    assert ("matvec_t(" in text) == (n > 1)
    for g, x in zip(got, want):
        np.testing.assert_allclose(g, x, rtol=0, atol=4 * (n + 1) * np.finfo(np.float32).eps
                                   * max(1.0, float(np.abs(x).max())))


def _carried(w, u, h0, xs):
    def cell(h, x):
        return w @ h, u @ x         # the product is the carry: its buffer is not reused
    return lax.scan(cell, h0, xs)


def test_carried_product_is_not_overwritten():
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((16, 16)) / 4).astype(np.float32)
    u = rng.standard_normal((16, 5)).astype(np.float32)
    h0 = rng.standard_normal(16).astype(np.float32)
    xs = rng.standard_normal((7, 5)).astype(np.float32)
    got, want, text = run_both(_carried, w, u, h0, xs)
    assert "matvec_t(" in text
    for g, x in zip(got, want):
        np.testing.assert_allclose(g, x, rtol=1e-5, atol=1e-6)
    # the reference, by hand
    h = h0.astype(np.float64)
    for t in range(7):
        h = w.astype(np.float64) @ h
    np.testing.assert_allclose(got[0], h, rtol=1e-5, atol=1e-6)


def test_integer_products_keep_existing_loops():
    def f(w, h0):
        def cell(h, _):
            return (w @ h) % 97, h
        return lax.scan(cell, h0, None, length=5)
    w = np.arange(64, dtype=np.int32).reshape(8, 8)
    h0 = np.arange(8, dtype=np.int32)
    got, want, text = run_both(f, w, h0)
    assert "matvec_t(" not in text
    for g, x in zip(got, want):
        np.testing.assert_array_equal(g, x)


def test_while_loop_hoists_transpose():
    def f(w, h0):
        return lax.fori_loop(0, plax.numpy.int32(6) + 0 * h0[0].astype(jnp.int32),
                             lambda i, h: jnp.tanh(w @ h), h0)
    rng = np.random.default_rng(5)
    w = rng.standard_normal((12, 12)).astype(np.float32) / 3
    h0 = rng.standard_normal(12).astype(np.float32)
    got, want, text = run_both(f, w, h0)
    assert "matvec_t(" in text
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-5)
