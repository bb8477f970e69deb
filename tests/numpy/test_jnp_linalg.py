"""jnp.linalg against numpy.linalg in float64: values, invariants of the factorizations
(their vectors are unique only up to sign/phase), gradients against finite differences,
vmap against a loop, jit against eager, JAX's values for singular input, and bad input."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.test_util import check_grads

try:  # JAX, when installed, cross-checks exception classes
    import jax
    import jax.numpy as jax_numpy
except ImportError:  # pragma: no cover - depends on the environment
    jax = None

RNG = np.random.default_rng(0)
A = RNG.normal(size=(3, 4, 4))
C = A + 1j * RNG.normal(size=A.shape)
B = RNG.normal(size=(3, 4, 2))
V = RNG.normal(size=4)
R = RNG.normal(size=(2, 5, 3))


def x64():
    return plax.config.override("enable_x64", True)


def H(x):
    return np.conj(np.swapaxes(x, -1, -2))


def close(got, want, tol=1e-10):
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(initial=0)))


def spd(a):
    return a @ H(a) + a.shape[-1] * np.eye(a.shape[-1])


# (name, args, kwargs): jnp.linalg.<name> and numpy.linalg.<name> agree in float64
VALUE_CASES = [
    ("cholesky", (spd(A),), {}), ("cholesky", (spd(C),), {}),
    ("solve", (A, B), {}), ("solve", (A[0], V), {}), ("solve", (C, B), {}),
    ("solve", (A, B[:1]), {}),
    ("inv", (A,), {}), ("inv", (C,), {}),
    ("det", (A,), {}), ("det", (C,), {}), ("det", (A[0, :1, :1],), {}),
    ("eigvalsh", (A + H(A),), {}), ("eigvalsh", (C + H(C),), {}),
    ("svdvals", (R,), {}),
    ("matrix_power", (A, 3), {}), ("matrix_power", (A, 0), {}), ("matrix_power", (A, -2), {}),
    ("pinv", (R,), {}), ("pinv", (C,), {}),
    ("matrix_rank", (np.ones((3, 3)),), {}), ("matrix_rank", (A,), {}),
    ("multi_dot", ([A[0], B[0], B[0].T],), {}),
    ("cond", (A,), {}), ("cond", (A, 1), {}), ("cond", (A, "fro"), {}), ("cond", (A, -2), {}),
    ("outer", (V, V[:3]), {}), ("cross", (R[0], R[1]), {}), ("matmul", (A, B), {}),
    ("vecdot", (C, A), {}), ("diagonal", (A,), dict(offset=1)), ("trace", (A,), {}),
    ("matrix_norm", (A,), {}), ("matrix_norm", (A,), dict(ord="nuc")),
    ("vector_norm", (A,), {}), ("vector_norm", (A,), dict(axis=1, ord=1)),
    ("matrix_transpose", (R,), {}),
    ("tensorinv", (RNG.normal(size=(4, 2, 2)), 1), {}),
    ("tensorsolve", (RNG.normal(size=(2, 3, 6)), RNG.normal(size=(2, 3))), {}),
]


@pytest.mark.parametrize("name,args,kwargs", VALUE_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(VALUE_CASES)])
def test_values_match_numpy(name, args, kwargs):
    if name == "solve" and args[1].ndim == 1:  # numpy 2 and JAX agree on vector b
        want = np.linalg.solve(args[0], args[1])
    else:
        want = getattr(np.linalg, name)(*args, **kwargs)
    with x64():
        got = getattr(jnp.linalg, name)(*args, **kwargs)
    close(got, want)


@pytest.mark.parametrize("x", [A, C])
def test_slogdet(x):
    with x64():
        sign, logdet = jnp.linalg.slogdet(x)
    want = np.linalg.slogdet(x)
    close(sign, want.sign)
    close(logdet, want.logabsdet)


ORDS_VECTOR = [None, 0, 1, 2, 3, 0.5, -1, np.inf, -np.inf]
ORDS_MATRIX = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]


@pytest.mark.parametrize("ord", ORDS_VECTOR)
@pytest.mark.parametrize("keepdims", [False, True])
def test_vector_norms(ord, keepdims):
    with x64():
        close(jnp.linalg.norm(C, ord, axis=1, keepdims=keepdims),
              np.linalg.norm(C, ord, axis=1, keepdims=keepdims))
        close(jnp.linalg.norm(V, ord), np.linalg.norm(V, ord))


@pytest.mark.parametrize("ord", ORDS_MATRIX)
@pytest.mark.parametrize("keepdims", [False, True])
def test_matrix_norms(ord, keepdims):
    with x64():
        close(jnp.linalg.norm(A, ord, axis=(2, 0), keepdims=keepdims),
              np.linalg.norm(A, ord, axis=(2, 0), keepdims=keepdims))
        close(jnp.linalg.norm(R[0], ord), np.linalg.norm(R[0], ord))


def test_norm_of_flattened_array():
    with x64():
        close(jnp.linalg.norm(A), np.linalg.norm(A))
        close(jnp.linalg.norm(A, keepdims=True), np.linalg.norm(A, keepdims=True))


def test_factorization_invariants():
    with x64():
        w, v = jnp.linalg.eigh(C + H(C))
        close((np.asarray(v) * np.asarray(w)[..., None, :]) @ H(np.asarray(v)), C + H(C))
        u, s, vh = jnp.linalg.svd(R, full_matrices=False)
        close((np.asarray(u) * np.asarray(s)[..., None, :]) @ np.asarray(vh), R)
        u, s, vh = jnp.linalg.svd(R)
        assert u.shape == (2, 5, 5) and vh.shape == (2, 3, 3)
        q, r = jnp.linalg.qr(R)
        close(np.asarray(q) @ np.asarray(r), R)
        q, r = jnp.linalg.qr(R, mode="complete")
        assert q.shape == (2, 5, 5) and r.shape == (2, 5, 3)
        close(jnp.linalg.qr(R, mode="r"), np.asarray(r)[..., :3, :])
        L = np.asarray(jnp.linalg.cholesky(spd(C), upper=True))
        close(H(L) @ L, spd(C))
    assert jnp.linalg.eigh(np.eye(2)).eigenvalues.dtype == np.float32


def test_singular_matrices_give_jax_values():
    z = np.zeros((2, 2), np.float32)
    assert not np.isfinite(np.asarray(jnp.linalg.inv(z))).all()
    assert float(jnp.linalg.det(z)) == 0.0
    sign, logdet = jnp.linalg.slogdet(z)
    assert float(sign) == 0.0 and float(logdet) == -np.inf
    assert np.isnan(np.asarray(jnp.linalg.cholesky(-np.eye(2)))).any()
    assert float(jnp.linalg.det(np.zeros((0, 0), np.float32))) == 1.0


def test_integer_input_becomes_float():
    assert jnp.linalg.det(np.eye(2, dtype=np.int32)).dtype == np.float32
    assert jnp.linalg.inv(np.eye(2, dtype=np.int32)).dtype == np.float32


# ------------------------------------------------------------------ gradients

GRAD_CASES = [
    ("det", lambda a: jnp.linalg.det(a), A),
    ("slogdet", lambda a: jnp.linalg.slogdet(a).logabsdet, A),
    ("inv", lambda a: jnp.linalg.inv(a), A),
    ("solve", lambda a: jnp.linalg.solve(a, B), A),
    ("solve_b", lambda b: jnp.linalg.solve(A, b), B),
    ("cholesky", lambda a: jnp.linalg.cholesky(a @ jnp.swapaxes(a, -1, -2) + 4 * jnp.eye(4)), A),
    ("eigvalsh", lambda a: jnp.linalg.eigvalsh(a), A),
    ("svdvals", lambda a: jnp.linalg.svdvals(a), R),
    ("norm_nuc", lambda a: jnp.linalg.norm(a, "nuc", axis=(-2, -1)), R),
    ("norm_2", lambda a: jnp.linalg.norm(a, 3, axis=-1), R),
    ("pinv", lambda a: jnp.linalg.pinv(a), R),
    ("qr_r_abs", lambda a: jnp.abs(jnp.linalg.qr(a).R), R),
    ("complex_det", lambda a: jnp.linalg.det(a), C),
    ("complex_inv", lambda a: jnp.linalg.inv(a), C),
]


@pytest.mark.parametrize("name,f,x", GRAD_CASES, ids=[c[0] for c in GRAD_CASES])
def test_grads(name, f, x):
    with x64():
        check_grads(f, (x,), order=2, modes=("fwd", "rev"))


def test_grad_of_det_matches_cofactor_formula():
    with x64():
        g = np.asarray(plax.grad(jnp.linalg.det)(A[0]))
    close(g, np.linalg.det(A[0]) * np.linalg.inv(A[0]).T, 1e-9)


SMALL_INTEGER_MATRICES = [[[1., 2.], [3., 4.]], [[2., -1., 0.], [1., 3., 2.], [0., 5., -4.]],
                          [[1., 2., 3.], [4., 5., 6.], [7., 8., 10.]]]


@pytest.mark.parametrize("m", SMALL_INTEGER_MATRICES, ids=["2x2", "3x3", "3x3-lu-inexact"])
def test_det_of_small_integer_matrices_is_exact(m):
    # as JAX, 2x2 and 3x3 determinants expand by cofactors: integer entries give the exact
    # integer in float32 (LU gave -1.9999999 for [[1, 2], [3, 4]], -2.9999998 for the last)
    m = np.array(m, np.float32)
    want = round(np.linalg.det(m.astype(np.float64)))
    batch = np.stack([m, -m])
    sign = (-1) ** len(m)
    assert float(jnp.linalg.det(m)) == want
    assert float(plax.jit(jnp.linalg.det)(m)) == want
    np.testing.assert_array_equal(np.asarray(plax.vmap(jnp.linalg.det)(batch)), [want, sign * want])
    np.testing.assert_array_equal(np.asarray(jnp.linalg.det(batch)), [want, sign * want])
    if jax is not None:
        assert float(jax_numpy.linalg.det(m)) == want


@pytest.mark.parametrize("n", [2, 3])
def test_grad_of_small_det(n):
    with x64():
        a = A[0, :n, :n]
        check_grads(jnp.linalg.det, (a,), order=1, modes=("fwd", "rev"))
        close(np.asarray(plax.grad(jnp.linalg.det)(a)), np.linalg.det(a) * np.linalg.inv(a).T, 1e-9)


# ------------------------------------------------------------------ vmap and jit

TRANSFORM_CASES = [
    ("solve", lambda a: jnp.linalg.solve(a, V.astype(np.float32))),
    ("inv", jnp.linalg.inv), ("det", jnp.linalg.det),
    ("slogdet", lambda a: list(jnp.linalg.slogdet(a))),
    ("norm", lambda a: jnp.linalg.norm(a, 2)),
    ("eigvalsh", jnp.linalg.eigvalsh), ("svdvals", jnp.linalg.svdvals),
]


@pytest.mark.parametrize("name,f", TRANSFORM_CASES, ids=[c[0] for c in TRANSFORM_CASES])
def test_vmap_and_jit(name, f):
    xs = A.astype(np.float32)
    loop = [f(x) for x in xs]
    got = plax.vmap(f)(xs)
    jitted = plax.jit(f)(xs[0])
    got = got if isinstance(got, list) else [got]
    jitted = jitted if isinstance(jitted, list) else [jitted]
    for k, g in enumerate(got):
        want = np.stack([np.asarray(r[k] if isinstance(r, list) else r) for r in loop])
        np.testing.assert_allclose(np.asarray(g), want, rtol=1e-5, atol=1e-5)
        first = loop[0][k] if isinstance(loop[0], list) else loop[0]
        np.testing.assert_allclose(np.asarray(jitted[k]), np.asarray(first), rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------ errors

F = np.float32
BAD = [
    ("solve_vector", lambda L: L.solve(np.ones((3, 3), F), np.ones(4, F)), ValueError),
    ("solve_batch", lambda L: L.solve(np.ones((2, 3, 3), F), np.ones((4, 3, 1), F)), ValueError),
    ("solve_batched_vector", lambda L: L.solve(np.ones((2, 3, 3), F), np.ones((2, 3), F)),
     ValueError),
    ("inv", lambda L: L.inv(np.ones((3, 4), F)), ValueError),
    ("det", lambda L: L.det(np.ones((3, 4), F)), ValueError),
    ("norm_ndim", lambda L: L.norm(np.ones((2, 2, 2), F), 2), ValueError),
    ("norm_ord", lambda L: L.norm(np.ones((2, 2), F), "bad"), ValueError),
    ("qr_mode", lambda L: L.qr(np.ones((2, 2), F), mode="bad"), ValueError),
    ("cross", lambda L: L.cross(np.ones(2, F), np.ones(2, F)), ValueError),
    ("outer", lambda L: L.outer(np.ones((2, 2), F), np.ones(2, F)), ValueError),
]


@pytest.mark.parametrize("name,call,exc", BAD, ids=[b[0] for b in BAD])
def test_bad_input(name, call, exc):
    with pytest.raises(exc):
        call(jnp.linalg)
    if jax is not None:
        with pytest.raises(exc):
            call(jax_numpy.linalg)


# ------------------------------------------------------------------ docs

# ------------------------------------------------------------------ eig, eigvals, lstsq

@pytest.mark.parametrize("x", [A, C], ids=["real", "complex"])
def test_eig_invariants(x):
    with x64():
        w, v = (np.asarray(o) for o in jnp.linalg.eig(x))
        wv = np.asarray(jnp.linalg.eigvals(x))
    assert w.dtype == np.complex128
    close(np.sort_complex(w.ravel()), np.sort_complex(np.linalg.eigvals(x).ravel()))
    close(wv, w)
    close(x @ v, v * w[..., None, :])
    close(np.linalg.norm(v, axis=-2), np.ones(w.shape))


def test_eigvals_grad_first_order_and_vector_grad_not_implemented():
    a = np.triu(A[0]) + np.diag([1.0, 4.0, 7.0, 10.0])
    with x64():
        # power sums do not depend on the order LAPACK returns the eigenvalues in
        check_grads(lambda a: [jnp.sum(jnp.linalg.eigvals(a) ** k) for k in (1, 2, 3)], (a,),
                    order=1)
        with pytest.raises(NotImplementedError, match="eigenvectors"):
            plax.jvp(lambda a: jnp.linalg.eig(a).eigenvectors, (a,), (a,))


@pytest.mark.parametrize("shape,bshape", [((5, 3), (5,)), ((5, 3), (5, 2)), ((2, 3), (2,)),
                                          ((4, 2), (4, 2))])
@pytest.mark.parametrize("numpy_resid", [False, True])
def test_lstsq(shape, bshape, numpy_resid):
    a = RNG.normal(size=shape)
    if shape == (4, 2):
        a = np.ones(shape)  # rank deficient
    b = RNG.normal(size=bshape)
    with x64():
        x, resid, rank, s = jnp.linalg.lstsq(a, b, numpy_resid=numpy_resid)
    want = np.linalg.lstsq(a, b, rcond=None)
    close(x, want[0])
    assert int(rank) == want[2]
    close(s, want[3])
    if numpy_resid:
        close(resid, want[1])
    else:
        r = a @ want[0] - b
        close(resid, np.sum(r.reshape(shape[0], -1) ** 2, axis=0))
    with x64():
        check_grads(lambda a, b: jnp.linalg.lstsq(a, b)[0], (RNG.normal(size=(5, 3)),
                                                             RNG.normal(size=(5, 2))), order=2)


def test_grad_of_det_is_finite_at_singular_matrices():
    """d det = trace(adj(a) da), and the adjugate of a rank n-1 matrix is not zero (JAX's
    value, where det * inv(a) would be NaN)."""
    s = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    A3 = A[0, :3, :3]
    with x64():
        g = np.asarray(plax.grad(jnp.linalg.det)(s))
        gb = np.asarray(plax.jit(plax.vmap(plax.grad(jnp.linalg.det)))(np.stack([s, A3])))
    cof = np.array([[4.0, 4.0, -4.0], [-2.0, -2.0, 2.0], [0.0, 0.0, 0.0]])
    close(g, cof, 1e-9)
    close(gb[0], cof, 1e-9)
    close(gb[1], np.linalg.det(A3) * np.linalg.inv(A3).T, 1e-9)
