"""plax.scipy.sparse.linalg (cg, bicgstab, gmres) against numpy.linalg.solve in float64, with
matrices and matvec functions, preconditioners, jit, and implicit gradients."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.scipy.sparse import linalg as sp

R = np.random.default_rng(9)
N = 10
_A = R.standard_normal((N, N))
SPD = _A @ _A.T + N * np.eye(N)
GEN = _A + N * np.eye(N)
B = R.standard_normal(N)


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


SOLVERS = [("cg", sp.cg, SPD), ("bicgstab", sp.bicgstab, GEN), ("gmres", sp.gmres, GEN)]


@pytest.mark.parametrize("name,solve,A", SOLVERS, ids=[s[0] for s in SOLVERS])
def test_values(name, solve, A):
    want = np.linalg.solve(A, B)
    x, info = solve(A, B, tol=1e-12)
    np.testing.assert_allclose(x, want, rtol=1e-9, atol=1e-12)
    x, _ = solve(lambda v: jnp.asarray(A) @ v, B, tol=1e-12, M=np.diag(1 / np.diag(A)))
    np.testing.assert_allclose(x, want, rtol=1e-9, atol=1e-12)
    x, _ = solve(A, B, x0=want + 0.1, tol=1e-12)
    np.testing.assert_allclose(x, want, rtol=1e-9, atol=1e-12)
    x = plax.jit(lambda b: solve(A, b, tol=1e-12)[0])(B)
    np.testing.assert_allclose(x, want, rtol=1e-9, atol=1e-12)
    # the default tolerance is relative to ||b||
    x, _ = solve(A, B)
    assert np.linalg.norm(A @ np.asarray(x) - B) <= 1e-5 * np.linalg.norm(B) * 1.01
    if name == "gmres":
        assert int(info) == 0
        x, _ = solve(A, B, tol=1e-12, restart=3, maxiter=200)
        np.testing.assert_allclose(x, want, rtol=1e-8, atol=1e-11)
    else:
        assert info is None


@pytest.mark.parametrize("name,solve,A", SOLVERS, ids=[s[0] for s in SOLVERS])
def test_implicit_gradients(name, solve, A):
    x = np.linalg.solve(A, B)
    # d/db sum(x^2) = 2 A^-T x; d/dA = -(A^-T 2x) x^T
    lam = np.linalg.solve(A.T, 2 * x)
    gb = plax.grad(lambda b: jnp.sum(solve(A, b, tol=1e-12)[0] ** 2))(B)
    np.testing.assert_allclose(gb, lam, rtol=1e-8, atol=1e-12)
    ga = plax.grad(lambda m: jnp.sum(solve(m, B, tol=1e-12)[0] ** 2))(A)
    np.testing.assert_allclose(ga, -np.outer(lam, x), rtol=1e-8, atol=1e-12)
    gf = plax.grad(lambda b: jnp.sum(solve(lambda v: jnp.asarray(A) @ v, b, tol=1e-12)[0] ** 2))(B)
    np.testing.assert_allclose(gf, lam, rtol=1e-8, atol=1e-12)


def test_errors():
    with pytest.raises(ValueError, match="x0"):
        sp.cg(SPD, B, x0=np.zeros(3))
    with pytest.raises(ValueError, match="solve_method"):
        sp.gmres(GEN, B, solve_method="other")


@pytest.mark.parametrize("name,solve,A", SOLVERS, ids=[s[0] for s in SOLVERS])
def test_gradient_through_matvec_closure(name, solve, A):
    x = np.linalg.solve(A, B)
    lam = np.linalg.solve(A.T, 2 * x)
    ga = plax.grad(lambda m: jnp.sum(solve(lambda v: m @ v, B, tol=1e-12)[0] ** 2))(A)
    np.testing.assert_allclose(ga, -np.outer(lam, x), rtol=1e-7, atol=1e-11)
