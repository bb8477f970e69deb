"""lax.linalg: cholesky, triangular_solve, lu, qr, eigh, svd against NumPy/SciPy in float64,
their invariants (reconstruction, orthogonality), gradients against finite differences
(order 2, forward and reverse, on functions invariant to the sign/phase of the vectors),
vmap against a loop, jit against eager, JAX's values for failures, and bad input."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import plax
from plax import lax
from plax.test_util import check_grads

try:  # JAX, when installed, cross-checks values and exception classes
    import jax
except ImportError:  # pragma: no cover - depends on the environment
    jax = None

RNG = np.random.default_rng(0)


def x64():
    return plax.config.override("enable_x64", True)


def H(x):
    return np.conj(np.swapaxes(x, -1, -2))


def close(got, want, tol=1e-10):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * max(1.0, np.abs(want).max(initial=0)))


def rand(shape, complex_=False):
    x = RNG.normal(size=shape)
    return x + 1j * RNG.normal(size=shape) if complex_ else x


def spd(shape, complex_=False):
    a = rand(shape, complex_)
    return a @ H(a) + shape[-1] * np.eye(shape[-1])


@pytest.mark.parametrize("cplx", [False, True])
def test_cholesky_matches_numpy(cplx):
    a = spd((3, 4, 4), cplx)
    with x64():
        close(lax.linalg.cholesky(a), np.linalg.cholesky(a))


def test_cholesky_not_positive_definite_gives_nan_like_jax():
    out = np.asarray(lax.linalg.cholesky(-np.eye(2, dtype=np.float32)))
    assert np.isnan(out[0, 0]) and np.isnan(out[1, 0]) and np.isnan(out[1, 1]) and out[0, 1] == 0


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("transpose_a,conjugate_a", [(False, False), (True, False), (True, True),
                                                     (False, True)])
@pytest.mark.parametrize("unit_diagonal", [False, True])
def test_triangular_solve_matches_scipy(left_side, lower, transpose_a, conjugate_a,
                                        unit_diagonal):
    a = rand((2, 4, 4), True) + 4 * np.eye(4)
    b = rand((2, 4, 3) if left_side else (2, 3, 4), True)
    with x64():
        x = np.asarray(lax.linalg.triangular_solve(
            a, b, left_side=left_side, lower=lower, transpose_a=transpose_a,
            conjugate_a=conjugate_a, unit_diagonal=unit_diagonal))
    for k in range(2):
        t = np.tril(a[k]) if lower else np.triu(a[k])
        if unit_diagonal:
            t = t - np.diag(np.diag(t)) + np.eye(4)
        op = t.T if transpose_a else t
        op = np.conj(op) if conjugate_a else op
        close(op @ x[k] if left_side else x[k] @ op, b[k])
        if not conjugate_a and left_side:
            want = sla.solve_triangular(a[k], b[k], lower=lower, trans=1 if transpose_a else 0,
                                        unit_diagonal=unit_diagonal)
            close(x[k], want)


def test_triangular_solve_singular_gives_inf_nan_like_jax():
    out = np.asarray(lax.linalg.triangular_solve(np.zeros((2, 2), np.float32),
                                                 np.ones((2, 2), np.float32),
                                                 left_side=True, lower=True))
    assert not np.isfinite(out).any()


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3), (3, 5), (5, 2)])
def test_lu_reconstructs_and_matches_scipy(shape):
    a = rand(shape)
    with x64():
        lu, piv, perm = (np.asarray(o) for o in lax.linalg.lu(a))
    assert piv.dtype == np.int32 and perm.dtype == np.int32
    m, n = shape[-2:]
    k = min(m, n)
    L = np.tril(lu, -1)[..., :, :k] + np.eye(m, k)
    U = np.triu(lu)[..., :k, :]
    close(L @ U, np.take_along_axis(a, perm[..., :, None], axis=-2))
    flat = a.reshape((-1, m, n))
    for i, x in enumerate(flat):
        want_lu, want_piv = sla.lu_factor(x) if m == n else (None, None)
        if want_lu is not None:
            close(lu.reshape(flat.shape)[i], want_lu)
            np.testing.assert_array_equal(piv.reshape(-1, k)[i], want_piv)


def test_lu_singular_matrix_does_not_raise():
    lu, piv, perm = lax.linalg.lu(np.zeros((3, 3), np.float32))
    np.testing.assert_array_equal(np.asarray(lu), 0)
    np.testing.assert_array_equal(np.asarray(perm), [0, 1, 2])


@pytest.mark.skipif(jax is None, reason="JAX not installed")
def test_lu_matches_jax():
    a = rand((2, 4, 4)).astype(np.float32)
    for got, want in zip(lax.linalg.lu(a), jax.lax.linalg.lu(a)):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,full", [((4, 3), False), ((4, 3), True), ((3, 5), False),
                                        ((2, 3, 3), True)])
@pytest.mark.parametrize("cplx", [False, True])
def test_qr_invariants(shape, full, cplx):
    a = rand(shape, cplx)
    with x64():
        q, r = (np.asarray(o) for o in lax.linalg.qr(a, full_matrices=full))
    want_q, want_r = np.linalg.qr(a, mode="complete" if full else "reduced")
    assert q.shape == want_q.shape and r.shape == want_r.shape
    close(q @ r, a)
    close(H(q) @ q, np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2))
    close(r, np.triu(r))


@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("cplx", [False, True])
def test_eigh_invariants(lower, cplx):
    a = rand((3, 4, 4), cplx)
    a = a + H(a)
    with x64():
        v, w = (np.asarray(o) for o in lax.linalg.eigh(a, lower=lower))
    assert w.dtype == np.float64
    close(w, np.linalg.eigvalsh(a))
    close((v * w[..., None, :]) @ H(v), a)
    close(H(v) @ v, np.broadcast_to(np.eye(4), a.shape))


@pytest.mark.parametrize("shape", [(4, 3), (3, 5), (2, 4, 4)])
@pytest.mark.parametrize("full", [True, False])
@pytest.mark.parametrize("cplx", [False, True])
def test_svd_invariants(shape, full, cplx):
    a = rand(shape, cplx)
    with x64():
        u, s, vh = (np.asarray(o) for o in lax.linalg.svd(a, full_matrices=full))
        s_only = np.asarray(lax.linalg.svd(a, compute_uv=False))
    close(s, np.linalg.svd(a, compute_uv=False))
    close(s_only, s)
    k = s.shape[-1]
    close((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], a)
    close(H(u) @ u, np.broadcast_to(np.eye(u.shape[-1]), u.shape[:-2] + (u.shape[-1],) * 2))
    close(vh @ H(vh), np.broadcast_to(np.eye(vh.shape[-2]), vh.shape[:-2] + (vh.shape[-2],) * 2))


# ------------------------------------------------------------------ gradients

def _mag(x):
    return lax.real(x) * lax.real(x) + lax.imag(x) * lax.imag(x) if np.iscomplexobj(
        np.zeros((), x.dtype)) else x * x


@pytest.mark.parametrize("cplx", [False, True])
def test_cholesky_grads(cplx):
    with x64():
        check_grads(lambda a: lax.linalg.cholesky(a), (spd((2, 3, 3), cplx),), order=2)


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower,transpose_a,conjugate_a", [(True, False, False),
                                                           (False, True, False),
                                                           (True, True, True)])
def test_triangular_solve_grads(left_side, lower, transpose_a, conjugate_a):
    a = rand((3, 3), True) + 4 * np.eye(3)
    a = np.tril(a) if lower else np.triu(a)
    b = rand((3, 2) if left_side else (2, 3), True)
    f = lambda a, b: lax.linalg.triangular_solve(a, b, left_side=left_side, lower=lower,  # noqa: E731
                                                 transpose_a=transpose_a,
                                                 conjugate_a=conjugate_a)
    with x64():
        check_grads(f, (a, b), order=2)


@pytest.mark.parametrize("shape", [(2, 3, 3), (4, 2), (2, 5)])
@pytest.mark.parametrize("cplx", [False, True])
def test_lu_grads(shape, cplx):
    with x64():
        check_grads(lambda a: lax.linalg.lu(a)[0], (rand(shape, cplx),), order=2)


@pytest.mark.skipif(jax is None, reason="JAX not installed")
def test_lu_jvp_matches_jax():
    # a tall and a wide matrix; JAX's two JVPs in one jitted call (one XLA compilation
    # instead of two: ~3 s each)
    args = [rand(shape).astype(np.float32) for shape in [(5, 3), (5, 3), (3, 5), (3, 5)]]

    def jvps(jvp, lu, x1, t1, x2, t2):
        return [jvp(lambda a: lu(a)[0], (x,), (t,))[1] for x, t in ((x1, t1), (x2, t2))]

    ours = jvps(plax.jvp, lax.linalg.lu, *args)
    theirs = jax.jit(lambda *a: jvps(jax.jvp, jax.lax.linalg.lu, *a))(*args)
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(o), np.asarray(t), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape", [(4, 3), (3, 3)])
@pytest.mark.parametrize("cplx", [False, True])
def test_qr_grads(shape, cplx):
    with x64():
        check_grads(lambda a: list(lax.linalg.qr(a, full_matrices=False)),
                    (rand(shape, cplx),), order=2)


@pytest.mark.parametrize("cplx", [False, True])
def test_eigh_grads(cplx):
    def f(a):
        v, w = lax.linalg.eigh(a)
        return [w, _mag(v)]
    with x64():
        check_grads(f, (rand((2, 3, 3), cplx),), order=2)


@pytest.mark.parametrize("shape", [(4, 3), (3, 4), (3, 3)])
@pytest.mark.parametrize("cplx", [False, True])
def test_svd_grads(shape, cplx):
    def f(a):
        u, s, vh = lax.linalg.svd(a, full_matrices=False)
        return [s, _mag(u), _mag(vh)]
    with x64():
        a = rand(shape, cplx)
        check_grads(f, (a,), order=2)
        check_grads(lambda a: lax.linalg.svd(a, compute_uv=False), (a,), order=2)


# ------------------------------------------------------------------ vmap and jit

CALLS = [
    ("cholesky", lambda a: lax.linalg.cholesky(a @ a.T + 4 * np.eye(4, dtype=np.float32))),
    ("triangular_solve", lambda a: lax.linalg.triangular_solve(
        a + 8 * np.eye(4, dtype=np.float32), a, left_side=True, lower=True)),
    ("lu", lambda a: list(lax.linalg.lu(a))),
    ("qr", lambda a: list(lax.linalg.qr(a))),
    ("eigh", lambda a: list(lax.linalg.eigh(a))),
    ("svd", lambda a: list(lax.linalg.svd(a))),
    ("eig", lambda a: lax.linalg.eig(a)),
]


@pytest.mark.parametrize("name,f", CALLS, ids=[c[0] for c in CALLS])
def test_vmap_matches_loop_and_jit_matches_eager(name, f):
    xs = RNG.normal(size=(3, 4, 4)).astype(np.float32)
    loop = [f(x) for x in xs]
    for in_axis, batched in [(0, xs), (2, np.moveaxis(xs, 0, 2))]:
        got = plax.vmap(f, in_axes=in_axis)(batched)
        got = got if isinstance(got, list) else [got]
        for k, g in enumerate(got):
            want = np.stack([np.asarray(r[k] if isinstance(r, list) else r) for r in loop])
            np.testing.assert_allclose(np.asarray(g), want, rtol=1e-5, atol=1e-5)
    eager = f(xs[0])
    jitted = plax.jit(f)(xs[0])
    for e, j in zip(eager if isinstance(eager, list) else [eager],
                    jitted if isinstance(jitted, list) else [jitted]):
        np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=1e-6, atol=1e-6)


def test_grad_under_vmap_and_jit():
    a = spd((3, 3, 3)).astype(np.float32)
    g = plax.jit(plax.vmap(plax.grad(lambda a: lax.linalg.cholesky(a).sum())))(a)
    for k in range(3):
        np.testing.assert_allclose(np.asarray(g[k]),
                                   np.asarray(plax.grad(lambda a: lax.linalg.cholesky(a).sum())(a[k])),
                                   rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ errors

F = np.float32


@pytest.mark.parametrize("call,exc,pattern", [
    (lambda: lax.linalg.cholesky(np.ones((2, 3), F), symmetrize_input=False), ValueError,
     r"\(2, 3\)"),
    (lambda: lax.linalg.cholesky(np.ones(3, F), symmetrize_input=False), TypeError, r"\(3,\)"),
    (lambda: lax.linalg.eigh(np.ones((2, 3), F), symmetrize_input=False), ValueError, r"\(2, 3\)"),
    (lambda: lax.linalg.lu(np.ones(3, F)), TypeError, r"rank at least 2"),
    (lambda: lax.linalg.lu(np.ones((2, 2), np.int32)), TypeError, "int32"),
    (lambda: lax.linalg.triangular_solve(np.ones((3, 3), F), np.ones((2, 3), F), left_side=True),
     ValueError, r"\(3, 3\).*\(2, 3\)"),
    (lambda: lax.linalg.triangular_solve(np.ones((2, 3, 3), F), np.ones((4, 3, 3), F),
                                         left_side=True), ValueError, "batch"),
    (lambda: lax.linalg.triangular_solve(np.ones((3, 3), F), np.ones((3, 3), np.float16)),
     TypeError, "float16"),
])
def test_bad_input(call, exc, pattern):
    with pytest.raises(exc, match=pattern):
        call()


@pytest.mark.skipif(jax is None, reason="JAX not installed")
def test_exception_classes_match_jax():
    for f in [lambda L: L.triangular_solve(np.ones((3, 3), F), np.ones((2, 3), F), left_side=True),
              lambda L: L.lu(np.ones(3, F))]:
        with pytest.raises(Exception) as ours:
            f(lax.linalg)
        with pytest.raises(Exception) as theirs:
            f(jax.lax.linalg)
        assert isinstance(ours.value, type(theirs.value)), (ours.value, theirs.value)


@pytest.mark.parametrize("left,right", [(True, True), (False, True), (True, False),
                                        (False, False)])
@pytest.mark.parametrize("cplx", [False, True])
def test_eig_matches_scipy(left, right, cplx):
    a = rand((2, 4, 4), cplx)
    with x64():
        out = [np.asarray(o) for o in lax.linalg.eig(a, compute_left_eigenvectors=left,
                                                     compute_right_eigenvectors=right)]
    assert len(out) == 1 + left + right and out[0].dtype == np.complex128
    for k in range(2):
        w, vl, vr = sla.eig(a[k], left=True, right=True)
        close(out[0][k], w)
        if left:
            close(H(out[1][k]) @ a[k], w[:, None] * H(out[1][k]))
        if right:
            close(a[k] @ out[-1][k], out[-1][k] * w)
    if jax is not None and left and right:  # JAX (float32 without x64): the eigenvalues
        close(out[0], np.asarray(jax.lax.linalg.eig(a)[0]).astype(np.complex128), 1e-5)


def test_eig_nan_input_gives_nan():
    w = np.asarray(lax.linalg.eig(np.full((2, 2), np.nan, np.float32))[0])
    assert np.isnan(w).all()


def test_non_finite_matrix_gives_nan_only_for_itself():
    a = RNG.normal(size=(3, 3, 3)).astype(np.float32)
    a[1, 0, 0] = np.nan
    for out in (lax.linalg.svd(a), [lax.linalg.svd(a, compute_uv=False)], lax.linalg.eigh(a)):
        for o in out:
            bad = np.isnan(np.asarray(o)).reshape(3, -1).any(axis=1)
            np.testing.assert_array_equal(bad, [False, True, False])


@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower,transpose_a,conjugate_a,unit_diagonal",
                         [(True, False, False, False), (False, True, True, True),
                          (True, False, True, False), (False, True, False, False)])
def test_triangular_solve_large_batch_matches_per_matrix(left_side, lower, transpose_a,
                                                         conjugate_a, unit_diagonal):
    # more than four small systems take NumPy's batched path; singular ones the per-matrix one
    a = rand((6, 3, 3), True) + 4 * np.eye(3)
    b = rand((6, 3, 2) if left_side else (6, 2, 3), True)
    params = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                  conjugate_a=conjugate_a, unit_diagonal=unit_diagonal)
    with x64():
        batched = np.asarray(lax.linalg.triangular_solve(a, b, **params))
        each = np.stack([np.asarray(lax.linalg.triangular_solve(a[k], b[k], **params))
                         for k in range(6)])
    close(batched, each)
    singular = np.tile(np.eye(3, dtype=np.float32), (6, 1, 1))
    singular[2] = 0
    out = np.asarray(lax.linalg.triangular_solve(singular, np.ones((6, 3, 3), np.float32),
                                                 left_side=left_side, lower=lower))
    assert np.isfinite(out[[0, 1, 3, 4, 5]]).all() and not np.isfinite(out[2]).any()
