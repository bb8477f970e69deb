"""plax.scipy.linalg against scipy.linalg in float64: values, factor invariants, gradients
against finite differences, vmap against a loop, jit against eager, and bad input."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import plax
import plax.numpy as jnp
import plax.scipy.linalg as psla
from plax.test_util import check_grads

RNG = np.random.default_rng(0)
A = RNG.normal(size=(4, 4))
C = A + 1j * RNG.normal(size=A.shape)
B = RNG.normal(size=(4, 2))
V = RNG.normal(size=4)
SPD = A @ A.T + 4 * np.eye(4)
HPD = C @ np.conj(C.T) + 4 * np.eye(4)


def x64():
    return plax.config.override("enable_x64", True)


def close(got, want, tol=1e-10):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(initial=0)))


@pytest.mark.parametrize("trans", [0, 1, 2, "N", "T", "C"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("unit_diagonal", [False, True])
@pytest.mark.parametrize("b", [B, V], ids=["matrix", "vector"])
def test_solve_triangular(trans, lower, unit_diagonal, b):
    a = C + 4 * np.eye(4)
    with x64():
        got = psla.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal)
    close(got, sla.solve_triangular(a, b, trans=trans, lower=lower, unit_diagonal=unit_diagonal))


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("a", [SPD, HPD], ids=["real", "complex"])
def test_cho_factor_and_solve(lower, a):
    with x64():
        c, low = psla.cho_factor(a, lower=lower)
        x = psla.cho_solve((c, low), B)
        xv = psla.cho_solve((c, low), V)
    c = np.asarray(c)
    close(c @ np.conj(c.T) if lower else np.conj(c.T) @ c, a)
    close(x, np.linalg.solve(a, B))
    close(xv, np.linalg.solve(a, V))


@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 3)])
@pytest.mark.parametrize("permute_l", [False, True])
def test_lu(shape, permute_l):
    a = RNG.normal(size=shape)
    with x64():
        got = psla.lu(a, permute_l=permute_l)
    want = sla.lu(a, permute_l=permute_l)
    for g, w in zip(got, want):
        close(g, w)


@pytest.mark.parametrize("trans", [0, 1, 2])
@pytest.mark.parametrize("a", [A, C], ids=["real", "complex"])
def test_lu_factor_and_solve(trans, a):
    with x64():
        lu, piv = psla.lu_factor(a)
        x = psla.lu_solve((lu, piv), B, trans=trans)
        xv = psla.lu_solve((lu, piv), V, trans=trans)
    want_lu, want_piv = sla.lu_factor(a)
    close(lu, want_lu)
    np.testing.assert_array_equal(np.asarray(piv), want_piv)
    close(x, sla.lu_solve((want_lu, want_piv), B, trans=trans))
    close(xv, sla.lu_solve((want_lu, want_piv), V, trans=trans))


def test_lu_solve_batched_pivots():
    a = RNG.normal(size=(3, 4, 4))
    with x64():
        lu, piv = psla.lu_factor(a)
        x = psla.lu_solve((lu, piv), RNG.normal(size=(3, 4, 2)) * 0 + B)
    close(x, np.linalg.solve(a, B))


@pytest.mark.parametrize("mode", ["full", "economic", "r"])
def test_qr(mode):
    a = RNG.normal(size=(5, 3))
    with x64():
        got = psla.qr(a, mode=mode)
    want = sla.qr(a, mode=mode)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w)
    if mode != "r":
        close(np.asarray(got[0]) @ np.asarray(got[1]), a)
    close(np.abs(np.asarray(got[-1])), np.abs(want[-1]))


def test_svd_and_eigh():
    a = RNG.normal(size=(5, 3))
    with x64():
        u, s, vh = psla.svd(a, full_matrices=False)
        s_only = psla.svd(a, compute_uv=False)
        w, v = psla.eigh(SPD)
        w_only = psla.eigh(SPD, eigvals_only=True)
    close(s, sla.svd(a, compute_uv=False))
    close(s_only, s)
    close((np.asarray(u) * np.asarray(s)) @ np.asarray(vh), a)
    close(w, sla.eigh(SPD, eigvals_only=True))
    close(w_only, w)
    close((np.asarray(v) * np.asarray(w)) @ np.asarray(v).T, SPD)


def test_block_diag_inv_det_solve():
    blocks = [np.ones((2, 3)), np.array([[5.0]]), np.arange(3.0), 7.0]
    with x64():
        close(psla.block_diag(*blocks), sla.block_diag(*blocks))
        close(psla.inv(A), sla.inv(A))
        close(psla.det(A), sla.det(A))
        close(psla.solve(A, B), sla.solve(A, B))
        close(psla.solve(A, V), sla.solve(A, V))
        for lower in (True, False):
            close(psla.solve(SPD, B, assume_a="pos", lower=lower), sla.solve(SPD, B))
    assert psla.block_diag(np.ones((1, 1), np.int32), np.ones((1, 1), np.float32)).dtype == np.float32


GRADS = [
    ("solve_triangular", lambda a: psla.solve_triangular(a + 4 * jnp.eye(4), B, lower=True), A),
    ("cho_solve", lambda b: psla.cho_solve(psla.cho_factor(SPD), b), B),
    ("cho_factor", lambda a: psla.cho_factor(a @ a.T + 4 * jnp.eye(4))[0], A),
    ("lu_solve", lambda b: psla.lu_solve(psla.lu_factor(A), b, trans=1), B),
    ("lu_solve_a", lambda a: psla.lu_solve(psla.lu_factor(a), B), A),
    ("lu", lambda a: list(psla.lu(a)[1:]), A),
    ("solve_pos", lambda a: psla.solve(a @ a.T + 4 * jnp.eye(4), B, assume_a="pos"), A),
    ("det", psla.det, A),
    ("block_diag", lambda a: psla.block_diag(a, a[:2]), A),
]


@pytest.mark.parametrize("name,f,x", GRADS, ids=[g[0] for g in GRADS])
def test_grads(name, f, x):
    with x64():
        check_grads(f, (x,), order=2, modes=("fwd", "rev"))


def test_vmap_and_jit():
    xs = RNG.normal(size=(3, 4, 4)).astype(np.float32) + 4 * np.eye(4, dtype=np.float32)
    b = B.astype(np.float32)
    f = lambda a: psla.lu_solve(psla.lu_factor(a), b)  # noqa: E731
    got = np.asarray(plax.vmap(f)(xs))
    want = np.stack([np.asarray(f(x)) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(plax.jit(f)(xs[0])), want[0], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("call,exc", [
    (lambda: psla.solve_triangular(np.eye(3), np.ones(4)), ValueError),
    (lambda: psla.solve_triangular(np.eye(3), np.ones(3), trans=3), ValueError),
    (lambda: psla.lu_factor(np.ones((2, 3))), ValueError),
    (lambda: psla.qr(np.ones((2, 2)), mode="raw"), ValueError),
    (lambda: psla.qr(np.ones((2, 2)), pivoting=True), NotImplementedError),
    (lambda: psla.eigh(np.eye(2), np.eye(2)), NotImplementedError),
    (lambda: psla.solve(np.eye(2), np.ones(2), assume_a="banded"), ValueError),
    (lambda: psla.block_diag(np.ones((2, 2, 2))), ValueError),
])
def test_bad_input(call, exc):
    with pytest.raises(exc):
        call()


def test_plax_scipy_is_a_lazy_submodule():
    assert plax.scipy.linalg is psla


@pytest.mark.parametrize("scale", [0.01, 1.0, 5.0, 40.0])
@pytest.mark.parametrize("cplx", [False, True])
def test_expm_matches_scipy(scale, cplx):
    a = RNG.normal(size=(2, 4, 4)) * scale
    if cplx:
        a = a + 1j * RNG.normal(size=a.shape) * scale
    want = np.stack([sla.expm(x) for x in a])
    with x64():
        close(psla.expm(a), want, 1e-11)
    if scale > 5:  # exp of these overflows float32
        return
    got32 = np.asarray(psla.expm(a.astype(np.complex64 if cplx else np.float32)))
    assert got32.dtype == (np.complex64 if cplx else np.float32)
    np.testing.assert_allclose(got32, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_expm_properties_and_limits():
    with x64():
        close(psla.expm(np.zeros((3, 3))), np.eye(3))
        close(psla.expm(np.diag([1.0, 2.0])), np.diag(np.exp([1.0, 2.0])))
    assert np.isnan(np.asarray(psla.expm(np.eye(2, dtype=np.float32) * 1e8))).all()
    big = np.asarray(psla.expm(np.eye(2, dtype=np.float32) * 50, max_squarings=2))
    assert np.isnan(big).all()  # 50 needs 4 squarings
    np.testing.assert_allclose(np.asarray(psla.expm(np.eye(2, dtype=np.float32) * 50)),
                               np.eye(2) * np.exp(50.0), rtol=1e-4)


def test_expm_grads_vmap_jit():
    with x64():
        check_grads(psla.expm, (RNG.normal(size=(3, 3)),), order=2, modes=("fwd", "rev"))
        check_grads(psla.expm, (4 * RNG.normal(size=(3, 3)),), order=1, modes=("fwd", "rev"))
    xs = RNG.normal(size=(3, 3, 3)).astype(np.float32) * 3
    got = np.asarray(plax.vmap(psla.expm)(xs))
    want = np.stack([np.asarray(psla.expm(x)) for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    np.testing.assert_allclose(np.asarray(plax.jit(psla.expm)(xs[0])), want[0], rtol=1e-5,
                               atol=1e-5 * np.abs(want).max())
