"""The rest of JAX 0.10's lax.linalg (compositions, no primitives): tridiagonal_solve,
tridiagonal, hessenberg, householder_product, ormqr, lu_pivots_to_permutation,
symmetric_product, cholesky_update, qdwh, schur, and the algorithm enums of eigh/svd/eig.

Raw LAPACK layouts are checked against SciPy's LAPACK wrappers in float64/complex128, the rest
against NumPy or real JAX (skipped without it); vmap against a loop, jit against eager,
tridiagonal_solve's derivatives against finite differences, and JAX's exceptions."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from scipy.linalg import lapack

import plax
from plax import lax
from plax.test_util import check_grads

try:  # JAX, when installed, cross-checks values and exception classes
    import jax
except ImportError:  # pragma: no cover - depends on the environment
    jax = None

needs_jax = pytest.mark.skipif(jax is None, reason="JAX is not installed")
L = lax.linalg
RNG = np.random.default_rng(46)


def x64():
    return plax.config.override("enable_x64", True)


def close(got, want, tol=1e-10):
    got = np.asarray(got)
    assert got.shape == np.shape(want), (got.shape, np.shape(want))
    np.testing.assert_allclose(got, want, rtol=tol,
                               atol=tol * max(1.0, np.abs(want).max(initial=0)))


def rand(shape, cplx=False):
    x = RNG.normal(size=shape)
    return x + 1j * RNG.normal(size=shape) if cplx else x


def hermitian(n, cplx=False):
    a = rand((n, n), cplx)
    return a + np.conj(a.T)


def lapack_fn(real_name, complex_name, cplx):
    return getattr(lapack, complex_name if cplx else real_name)


# ------------------------------------------------------------------ raw LAPACK layouts


@pytest.mark.parametrize("cplx", [False, True])
@pytest.mark.parametrize("lower", [True, False])
def test_tridiagonal_is_lapacks_sytrd(cplx, lower):
    a = hermitian(5, cplx)
    # the triangle not read holds something else: it must come back untouched
    a = np.tril(a) + np.triu(rand((5, 5), cplx), 1) if lower else \
        np.triu(a) + np.tril(rand((5, 5), cplx), -1)
    want_arr, want_d, want_e, want_taus, info = lapack_fn("dsytrd", "zhetrd", cplx)(
        a, lower=int(lower))
    assert info == 0
    with x64():
        arr, d, e, taus = L.tridiagonal(a, lower=lower)
    close(arr, want_arr)
    close(d, want_d)
    close(e, want_e)
    close(taus, want_taus)
    assert np.asarray(d).dtype == np.asarray(e).dtype == np.float64


@pytest.mark.parametrize("n", [1, 2])
def test_tridiagonal_and_hessenberg_of_tiny_matrices_are_lapacks(n):
    # no reflector (n = 1) or one with nothing below its pivot (n = 2): complex pivots still
    # get a reflector that makes the off-diagonal real, and the diagonal is read as real
    a = rand((n, n), True)
    want_arr, want_d, want_e, want_taus, _ = lapack.zhetrd(a, lower=1)
    want_h, want_htaus, _ = lapack.zgehrd(a)
    with x64():
        for got, want in zip(L.tridiagonal(a), (want_arr, want_d, want_e, want_taus)):
            close(got, want)
        arr, taus = L.hessenberg(a)
    close(arr, want_h)
    close(taus, want_htaus[:n - 1])


@pytest.mark.parametrize("cplx", [False, True])
def test_hessenberg_is_lapacks_gehrd_and_its_q_reduces_a(cplx):
    a = rand((5, 5), cplx)
    want_arr, want_taus, info = lapack_fn("dgehrd", "zgehrd", cplx)(a)
    with x64():
        arr, taus = L.hessenberg(a)
        # Q from the reflectors below the subdiagonal (pivot one row down): orghr's
        q = np.eye(5, dtype=a.dtype)
        q[1:, 1:] = np.asarray(L.householder_product(np.asarray(arr)[1:, :4], taus))
    close(arr, want_arr)
    close(taus, want_taus[:4])
    close(np.conj(q.T) @ a @ q, np.triu(np.asarray(arr), -1))


@pytest.mark.parametrize("cplx", [False, True])
def test_householder_product_and_ormqr_are_lapacks(cplx):
    a = rand((5, 3), cplx)
    packed, taus, _, info = lapack_fn("dgeqrf", "zgeqrf", cplx)(a)
    want_q, _, _ = lapack_fn("dorgqr", "zungqr", cplx)(packed, taus)
    unmqr = lapack_fn("dormqr", "zunmqr", cplx)
    c_left, c_right = rand((5, 2), cplx), rand((2, 5), cplx)
    with x64():
        close(L.householder_product(packed, taus), want_q)
        for transpose in (False, True):
            trans = ("C" if cplx else "T") if transpose else "N"
            close(L.ormqr(packed, taus, c_left, transpose=transpose),
                  unmqr("L", trans, packed, taus, c_left, lwork=64)[0])
            close(L.ormqr(packed, taus, c_right, left=False, transpose=transpose),
                  unmqr("R", trans, packed, taus, c_right, lwork=64)[0])


def test_tridiagonal_solve_is_lapacks_gtsv_for_all_dtypes():
    for dtype, tol in ((np.float64, 1e-12), (np.complex128, 1e-12), (np.float32, 1e-5),
                       (np.complex64, 1e-5)):
        cplx = np.dtype(dtype).kind == "c"
        dl, du = rand(6, cplx), rand(6, cplx)
        d = rand(6, cplx) + 6
        b = rand((6, 2), cplx)
        want = lapack_fn("dgtsv", "zgtsv", cplx)(dl[1:], d, du[:-1], b)[3]
        with x64():
            got = L.tridiagonal_solve(*(v.astype(dtype) for v in (dl, d, du, b)))
        assert np.asarray(got).dtype == dtype
        close(got, want, tol)


@pytest.mark.parametrize("cplx", [False, True])
def test_tridiagonal_solve_pivots_as_gtsv(cplx):
    """Diagonals far from dominance, a zero leading pivot, and a batch holding a singular
    system: LAPACK's partial pivoting (its solutions, to rounding), where elimination without
    row exchanges divided by zero; the singular system alone is all NaN, as JAX marks a
    failed gtsv."""
    n = 9
    dl, d, du = rand(n, cplx), 0.05 * rand(n, cplx), rand(n, cplx)
    d[0] = 0
    b = rand((n, 2), cplx)
    want = lapack_fn("dgtsv", "zgtsv", cplx)(dl[1:], d, du[:-1], b)[3]
    sing_dl, sing_d, sing_du = dl.copy(), d.copy(), du.copy()
    sing_d[0], sing_du[0] = 1.0, 1.0                    # rows 0 and 1 both (1, 1, 0, ...)
    sing_dl[1], sing_d[1], sing_du[1] = 1.0, 1.0, 0.0
    with x64():
        got = np.asarray(L.tridiagonal_solve(np.stack([dl, sing_dl]), np.stack([d, sing_d]),
                                             np.stack([du, sing_du]), np.stack([b, b])))
    close(got[0], want, 1e-12)
    assert np.isnan(got[1]).all()


@pytest.mark.parametrize("cplx", [False, True])
def test_tridiagonal_solve_perturb_singular_gives_finite_results(cplx):
    # rows 0 and 1 are equal, so T is singular: a zero pivot even with row exchanges
    dl = np.array([0.0, 1.0, 1.0, 2.0], complex if cplx else float)
    d = np.array([1.0, 1.0, 3.0, 1.0], dl.dtype)
    du = np.array([1.0, 0.0, 1.0, 0.0], dl.dtype)
    b = rand((4, 2), cplx)
    with x64():
        assert np.isnan(np.asarray(L.tridiagonal_solve(dl, d, du, b))).all()
        x = np.asarray(L.tridiagonal_solve(dl, d, du, b, perturb_singular=True))
        assert np.isfinite(x).all()
        # a regular system is solved as without the option
        close(L.tridiagonal_solve(dl, d + 5, du, b, perturb_singular=True),
              np.asarray(L.tridiagonal_solve(dl, d + 5, du, b)))


# ------------------------------------------------------------------ small functions


def test_lu_pivots_to_permutation_matches_applying_the_swaps():
    pivots = np.array([[2, 2, 2], [1, 1, 2]], np.int32)
    for size in (3, 5):
        got = np.asarray(L.lu_pivots_to_permutation(pivots, size))
        for row, piv in zip(got, pivots):
            want = np.arange(size)
            for i, p in enumerate(piv):
                want[[i, p]] = want[[p, i]]
            np.testing.assert_array_equal(row, want)
        assert got.dtype == np.int32


def test_lu_pivots_to_permutation_is_lus_permutation():
    a = rand((4, 6, 6)).astype(np.float32)
    _, pivots, perm = L.lu(a)
    np.testing.assert_array_equal(L.lu_pivots_to_permutation(pivots, 6), perm)


def test_symmetric_product():
    a, c = rand((2, 4, 3)), rand((2, 4, 4))
    full = 2.0 * a @ np.swapaxes(a, -1, -2) + 0.5 * c
    with x64():
        close(L.symmetric_product(a, c, alpha=2.0, beta=0.5), full)
        sym = np.asarray(L.symmetric_product(a, c, alpha=2.0, beta=0.5, symmetrize_output=True))
    close(sym, np.tril(full) + np.swapaxes(np.tril(full, -1), -1, -2))


def test_cholesky_update_matches_refactoring():
    h = hermitian(5)
    a = h @ h + np.eye(5)
    w = rand(5)
    r = np.linalg.cholesky(a).T
    with x64():
        close(L.cholesky_update(r, w), np.linalg.cholesky(a + np.outer(w, w)).T)


@pytest.mark.parametrize("cplx", [False, True])
def test_qdwh_is_the_polar_decomposition(cplx):
    x = rand((6, 4), cplx)
    w, s, vh = np.linalg.svd(x, full_matrices=False)
    with x64():
        u, h, num_iters, converged = L.qdwh(x)
    close(u, w @ vh, 1e-9)
    close(h, np.conj(vh.T) @ np.diag(s) @ vh, 1e-9)
    assert bool(converged) and 0 < int(num_iters) <= 10
    u32, _, _, conv32 = L.qdwh(x.astype(np.complex64 if cplx else np.float32))
    assert bool(conv32)
    close(u32, w @ vh, 1e-4)


def test_qdwh_max_iterations_reports_not_converged():
    x = rand((5, 5)) @ np.diag([1, 1, 1, 1, 1e-6])   # ill-conditioned: many steps needed
    with x64():
        _, _, k, converged = L.qdwh(x, max_iterations=1)
    assert int(k) == 1 and not bool(converged)


@pytest.mark.parametrize("cplx", [False, True])
def test_schur_reconstructs_and_is_quasi_triangular(cplx):
    a = rand((2, 5, 5), cplx)
    with x64():
        t, vs = (np.asarray(v) for v in L.schur(a))
        (t_only,) = L.schur(a, compute_schur_vectors=False)
    close(vs @ t @ np.conj(np.swapaxes(vs, -1, -2)), a, 1e-8)
    close(np.conj(np.swapaxes(vs, -1, -2)) @ vs, np.broadcast_to(np.eye(5), (2, 5, 5)), 1e-10)
    assert np.all(np.tril(t, -2) == 0)
    if cplx:
        assert np.all(np.tril(t, -1) == 0)
    close(t_only, t)
    for ti, ai in zip(t, a):   # the same eigenvalues as SciPy's Schur form, in some order
        want = np.diagonal(sla.schur(ai, output="complex")[0])
        got = np.linalg.eigvals(ti)
        assert np.abs(got[:, None] - want[None, :]).min(axis=0).max() < 1e-8


# ------------------------------------------------------------------ batching, jit, grads


BATCHED = {
    "tridiagonal": lambda a: L.tridiagonal(a),
    "tridiagonal_upper": lambda a: L.tridiagonal(a, lower=False),
    "hessenberg": lambda a: L.hessenberg(a),
    "householder_product": lambda a: L.householder_product(a, a[..., 0, :3]),
    "ormqr": lambda a: L.ormqr(a, a[..., 1, :2], a, left=False, transpose=True),
    "symmetric_product": lambda a: L.symmetric_product(a, a, beta=2.0,
                                                       symmetrize_output=True),
    "tridiagonal_solve": lambda a: L.tridiagonal_solve(a[..., 0, :], a[..., 1, :] + 8,
                                                       a[..., 2, :], a),
}


@pytest.mark.parametrize("name", sorted(BATCHED))
def test_batched_equals_loop_vmap_and_jit(name):
    f = BATCHED[name]
    a = rand((3, 4, 4)).astype(np.float32)
    loop = [f(a[i]) for i in range(3)]
    for got in (f(a), plax.vmap(f)(a), plax.jit(f)(a)):
        got_leaves = plax.tree_util.tree_leaves(got)
        for j, leaf in enumerate(got_leaves):
            want = np.stack([np.asarray(plax.tree_util.tree_leaves(o)[j]) for o in loop])
            close(leaf, want, 1e-5)


def test_tridiagonal_solve_derivatives_match_finite_differences():
    dl, du, b = rand(5), rand(5), rand((5, 2))
    d = rand(5) + 6
    with x64():
        check_grads(L.tridiagonal_solve, (dl, d, du, b), order=1, modes=("fwd", "rev"))


def test_tridiagonal_solve_grad_under_vmap_and_jit_equals_a_loop():
    d = rand((3, 5)).astype(np.float32)
    args = (0.1 * d, d + 6, 0.2 * d, rand((3, 5, 2)).astype(np.float32))
    grad = plax.grad(lambda *a: (L.tridiagonal_solve(*a) ** 2).sum(), argnums=(0, 1, 2, 3))
    loop = [grad(*(a[i] for a in args)) for i in range(3)]
    for got in (plax.vmap(grad)(*args), plax.jit(plax.vmap(grad))(*args)):
        for k in range(4):
            close(got[k], np.stack([np.asarray(g[k]) for g in loop]), 1e-6)


@needs_jax
def test_tridiagonal_solve_derivatives_match_jax():
    args = (rand(4, True), rand(4, True) + 5, rand(4, True), rand((4, 3), True))
    cot = rand((4, 3), True)
    with x64(), jax.enable_x64(True):
        got = plax.vjp(L.tridiagonal_solve, *args)[1](cot)
        want = jax.vjp(jax.lax.linalg.tridiagonal_solve, *args)[1](cot)
    for g, w in zip(got, want):   # complex: the transpose, not the adjoint, as JAX's
        close(g, np.asarray(w))


# ------------------------------------------------------------------ against real JAX


@needs_jax
@pytest.mark.parametrize("cplx", [False, True])
def test_values_match_jax(cplx):
    jl = jax.lax.linalg
    a, c = rand((5, 5), cplx), rand((5, 5), cplx)
    herm = hermitian(5, cplx)
    taus = rand(3, cplx)
    with x64(), jax.enable_x64(True):
        pairs = [(L.tridiagonal(herm, lower=False), jl.tridiagonal(herm, lower=False)),
                 (L.hessenberg(a), jl.hessenberg(a)),
                 (L.householder_product(a, taus), jl.householder_product(a, taus)),
                 (L.ormqr(a, taus, c, transpose=True), jl.ormqr(a, taus, c, transpose=True))]
        if not cplx:   # JAX has these two for real matrices only
            pairs.append((L.symmetric_product(a, c, alpha=0.5, beta=2.0, symmetrize_output=True),
                          jl.symmetric_product(a, c, alpha=0.5, beta=2.0,
                                               symmetrize_output=True)))
            r = np.linalg.cholesky(herm @ herm + np.eye(5)).T
            pairs.append((L.cholesky_update(r, a[0]), jl.cholesky_update(r, a[0])))
            pairs.append((L.qdwh(a)[:3], jl.qdwh(a)[:3]))   # u, h and the iteration count
        for got, want in pairs:
            for g, w in zip(plax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)):
                close(g, np.asarray(w), 1e-8)


@needs_jax
def test_enums_and_their_values_are_jaxs():
    for name in ("EigImplementation", "EighImplementation", "SvdAlgorithm"):
        assert ([(m.name, m.value) for m in getattr(L, name)]
                == [(m.name, m.value) for m in getattr(jax.lax.linalg, name)])


def test_algorithm_parameters_plax_can_honour():
    a = hermitian(4) + 8 * np.eye(4)
    with x64():
        w = np.linalg.eigvalsh(a)
        close(L.eigh(a, implementation=L.EighImplementation.QR)[1], w)
        close(L.eigh(a, subset_by_index=(1, 3))[1], w[1:3])
        s = np.linalg.svd(a, compute_uv=False)
        for alg in (L.SvdAlgorithm.DEFAULT, L.SvdAlgorithm.QR,
                    L.SvdAlgorithm.DIVIDE_AND_CONQUER):
            close(L.svd(a, compute_uv=False, algorithm=alg), s)
        u, s2, vh = L.svd(a, full_matrices=False, subset_by_index=(0, 2))
        close(s2, s[:2])
        close(np.asarray(u) * np.asarray(s2) @ np.asarray(vh),
              sum(s[i] * np.outer(np.linalg.svd(a)[0][:, i], np.linalg.svd(a)[2][i])
                  for i in range(2)))
        close(L.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False,
                    implementation=L.EigImplementation.LAPACK)[0].real,
              np.linalg.eigvals(a).real)


# ------------------------------------------------------------------ errors

f32 = np.float32
BAD = {
    "tridiagonal_solve rank": (lambda m: m.tridiagonal_solve(*(np.ones(3, f32),) * 4), TypeError),
    "tridiagonal_solve shapes": (lambda m: m.tridiagonal_solve(
        np.ones(3, f32), np.ones(4, f32), np.ones(3, f32), np.ones((3, 1), f32)), TypeError),
    "tridiagonal_solve int": (lambda m: m.tridiagonal_solve(
        *(np.ones(3, np.int32),) * 3, np.ones((3, 1), np.int32)), TypeError),
    "lu_pivots float": (lambda m: m.lu_pivots_to_permutation(np.zeros(3, f32), 4), TypeError),
    "lu_pivots size": (lambda m: m.lu_pivots_to_permutation(np.zeros(5, np.int32), 4),
                       ValueError),
    "householder wide": (lambda m: m.householder_product(np.ones((3, 4), f32),
                                                         np.ones(2, f32)), ValueError),
    "householder taus": (lambda m: m.householder_product(np.ones((4, 3), f32),
                                                         np.ones(4, f32)), ValueError),
    "cholesky_update size": (lambda m: m.cholesky_update(np.eye(3, dtype=f32),
                                                         np.ones(2, f32)), ValueError),
    "cholesky_update rank": (lambda m: m.cholesky_update(np.ones((2, 3, 3), f32),
                                                         np.ones((2, 3), f32)), TypeError),
    "cholesky_update complex": (lambda m: m.cholesky_update(
        np.eye(2, dtype=np.complex64), np.ones(2, np.complex64)), TypeError),
    "symmetric_product shapes": (lambda m: m.symmetric_product(np.ones((3, 2), f32),
                                                               np.ones((2, 2), f32)), ValueError),
    "symmetric_product complex": (lambda m: m.symmetric_product(
        np.ones((3, 2), np.complex64), np.ones((3, 3), np.complex64)), TypeError),
    "ormqr rows": (lambda m: m.ormqr(np.ones((4, 3), f32), np.ones(3, f32),
                                     np.ones((3, 2), f32)), ValueError),
    "hessenberg square": (lambda m: m.hessenberg(np.ones((3, 4), f32)), ValueError),
    "tridiagonal square": (lambda m: m.tridiagonal(np.ones((3, 4), f32)), ValueError),
    "schur square": (lambda m: m.schur(np.ones((3, 4), f32)), ValueError),
    "qdwh wide": (lambda m: m.qdwh(np.ones((2, 3), f32)), ValueError),
    "svd polar": (lambda m: m.svd(np.eye(3, dtype=f32), algorithm=m.SvdAlgorithm.POLAR),
                  NotImplementedError),
    "svd jacobi": (lambda m: m.svd(np.eye(3, dtype=f32), algorithm=m.SvdAlgorithm.JACOBI),
                   NotImplementedError),
    "svd subset full": (lambda m: m.svd(np.eye(3, dtype=f32), subset_by_index=(0, 1)),
                        ValueError),
    "eigh jacobi": (lambda m: m.eigh(np.eye(3, dtype=f32),
                                     implementation=m.EighImplementation.JACOBI),
                    NotImplementedError),
    "eigh qdwh": (lambda m: m.eigh(np.eye(3, dtype=f32),
                                   implementation=m.EighImplementation.QDWH),
                  NotImplementedError),
    "eig magma": (lambda m: m.eig(np.eye(3, dtype=f32),
                                  implementation=m.EigImplementation.MAGMA), ValueError),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_raises_jaxs_exception(case):
    call, exc = BAD[case]
    with pytest.raises(exc):
        call(L)
    if jax is not None:   # the class is JAX's own
        with pytest.raises(exc):
            call(jax.lax.linalg)


@pytest.mark.parametrize("call", [
    lambda: L.schur(np.eye(2, dtype=f32), sort_eig_vals=True),
    lambda: L.qdwh(np.eye(2, dtype=f32), dynamic_shape=(2, 2)),
    lambda: L.eig(np.eye(2, dtype=f32), enable_eigvec_derivs=True),
])
def test_options_plax_cannot_honour_raise(call):
    with pytest.raises(NotImplementedError):
        call()
