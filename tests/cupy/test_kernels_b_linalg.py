"""The linalg family's GPU kernels (``plax_cupy.kernels_linalg``) on the simulated GPU against
the NumPy backend's, on every dtype the primitives take, batched, with JAX's NaNs for failing
matrices (run by test_kernels_b_simulated.py)."""
from __future__ import annotations

import numpy as np
import pytest

from plax.backend import UnsupportedPrimitiveError
from plax.lax import linalg as L
from test_kernels_a_simulated import on_a_gpu, reference, run_kernel
from test_kernels_b_simulated import TOLERANCE, as_wide, assert_close, close

pytestmark = on_a_gpu

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
ids = lambda d: np.dtype(d).name  # noqa: E731


def matrices(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def hermitian_pd(shape, dtype, seed=0):
    a = matrices(shape, dtype, seed)
    n = shape[-1]
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(dtype)


def tol(dtype, scale=30.0):
    return TOLERANCE[np.dtype(dtype).name] * scale


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_cholesky_batched_with_a_failing_matrix(dtype):
    a = hermitian_pd((2, 3, 4, 4), dtype)
    a[1, 2] = -a[1, 2]  # negative definite: JAX's NaN factor, zeros above the diagonal
    got = close(L.cholesky_p, a, scale=30)
    assert np.isnan(got[1, 2][np.tril_indices(4)]).all()
    assert (got[1, 2][np.triu_indices(4, 1)] == 0).all()
    good = got[0, 0].astype(np.complex128)
    np.testing.assert_allclose(good @ good.conj().T, a[0, 0], rtol=tol(dtype), atol=tol(dtype))
    close(L.cholesky_p, np.zeros((0, 3, 3), dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("left_side", [True, False])
@pytest.mark.parametrize("lower", [True, False])
def test_triangular_solve_every_side_and_op(dtype, left_side, lower):
    a = matrices((2, 4, 4), dtype) + 4 * np.eye(4, dtype=dtype)
    b = matrices((2, 4, 3) if left_side else (2, 3, 4), dtype, seed=1)
    for transpose_a in (False, True):
        for conjugate_a in (False, True):
            for unit_diagonal in (False, True):
                close(L.triangular_solve_p, a, b, left_side=left_side, lower=lower,
                      transpose_a=transpose_a, conjugate_a=conjugate_a,
                      unit_diagonal=unit_diagonal, scale=30)
    empty = np.zeros((2, 4, 0) if left_side else (2, 0, 4), dtype)
    close(L.triangular_solve_p, a, empty, left_side=left_side, lower=lower, transpose_a=False,
          conjugate_a=False, unit_diagonal=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape", [(3, 4, 4), (2, 5, 3), (3, 5), (1, 1)], ids=str)
def test_lu_pivots_permutation_and_factors(dtype, shape):
    a = matrices(shape, dtype)
    lu, piv, perm = close(L.lu_p, a, scale=30)
    m, n = shape[-2:]
    k = min(m, n)
    lower = np.tril(lu, -1)[..., :, :k] + np.eye(m, k)
    upper = np.triu(lu)[..., :k, :]
    rows = np.take_along_axis(a, perm[..., :, None].astype(np.int64), axis=-2)
    np.testing.assert_allclose(as_wide(lower @ upper), as_wide(rows), rtol=tol(dtype), atol=tol(dtype))


def test_lu_of_a_batch_of_small_matrices_is_one_generated_kernel():
    import plax_cupy
    a = matrices((64, 6, 6), np.float32)
    with plax_cupy.count() as c:
        close(L.lu_p, a, scale=30)
    # the generated kernel (counted by plax) and, on the simulated GPU, the operand's copy
    assert 1 <= c.launches <= 2 and c.host_fallbacks == 0


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=ids)
def test_lu_of_matrices_larger_than_the_batched_kernel_takes(dtype):
    from plax_cupy.kernels_linalg import SMALL_LU
    for shape in [(SMALL_LU + 8, SMALL_LU + 8), (2, SMALL_LU + 1, SMALL_LU - 3)]:
        a = matrices(shape, dtype)
        lu, piv, perm = close(L.lu_p, a, scale=300)
        assert (np.sort(perm, axis=-1) == np.arange(shape[-2])).all()


def test_lu_of_singular_and_empty_matrices():
    singular = np.array([[[0., 1.], [0., 0.]], [[1., 2.], [2., 4.]], [[0., 0.], [0., 0.]]],
                        np.float32)
    close(L.lu_p, singular)
    close(L.lu_p, np.array([[1., 2., 3.], [2., 4., 6.], [3., 1., 9.]]))  # a zero pivot midway
    close(L.lu_p, np.zeros((2, 0, 3), np.float64))


def same_avals(got, want):
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)


def assert_orthonormal_columns(q, dtype):
    qw = as_wide(q)
    eye = np.eye(q.shape[-1])
    gram = np.conj(np.swapaxes(qw, -1, -2)) @ qw
    np.testing.assert_allclose(gram, np.broadcast_to(eye, gram.shape), rtol=tol(dtype), atol=tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape", [(2, 5, 3), (3, 5), (2, 3, 3)], ids=str)
@pytest.mark.parametrize("full_matrices", [True, False])
def test_qr(dtype, shape, full_matrices):
    # the factors are unique up to the signs (phases) of r's rows: compare |r| and q r = a
    a = matrices(shape, dtype)
    q, r = run_kernel(L.qr_p, a, full_matrices=full_matrices)
    q_ref, r_ref = reference(L.qr_p, a, full_matrices=full_matrices)
    same_avals([q, r], [q_ref, r_ref])
    np.testing.assert_allclose(np.abs(as_wide(r)), np.abs(as_wide(r_ref)), rtol=tol(dtype), atol=tol(dtype))
    assert (np.tril(r, -1) == 0).all()
    assert_orthonormal_columns(q, dtype)
    np.testing.assert_allclose(as_wide(q @ r), as_wide(a), rtol=tol(dtype), atol=tol(dtype))
    close(L.qr_p, np.zeros((0, 4, 2), dtype), full_matrices=full_matrices)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("shape", [(2, 5, 3), (3, 4)], ids=str)
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd(dtype, shape, full_matrices):
    # singular vectors are unique up to phases: compare s, and check u, vh and u s vh = a
    a = matrices(shape, dtype)
    s, u, vh = run_kernel(L.svd_p, a, full_matrices=full_matrices, compute_uv=True)
    s_ref, u_ref, vh_ref = reference(L.svd_p, a, full_matrices=full_matrices, compute_uv=True)
    same_avals([s, u, vh], [s_ref, u_ref, vh_ref])
    assert_close(s, s_ref, scale=30)
    assert_orthonormal_columns(u, dtype)
    assert_orthonormal_columns(np.conj(np.swapaxes(vh, -1, -2)), dtype)
    k = min(shape[-2:])
    np.testing.assert_allclose(as_wide(u[..., :, :k] * s[..., None, :]) @ as_wide(vh[..., :k, :]),
                               as_wide(a), rtol=tol(dtype, 100), atol=tol(dtype, 100))
    close(L.svd_p, a, full_matrices=full_matrices, compute_uv=False, scale=30)
    close(L.svd_p, np.zeros((2, 0, 3), dtype), full_matrices=full_matrices, compute_uv=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
@pytest.mark.parametrize("lower", [True, False])
def test_eigh_with_a_non_finite_matrix(dtype, lower):
    a = hermitian_pd((3, 4, 4), dtype)
    a[1, 0, 3] = np.nan  # JAX: that matrix's results are NaN, the others are computed
    v, w = run_kernel(L.eigh_p, a, lower=lower)
    v_ref, w_ref = reference(L.eigh_p, a, lower=lower)
    assert_close(w, w_ref, scale=30)
    assert v.dtype == np.dtype(dtype) and w.dtype == w_ref.dtype
    assert np.isnan(v[1]).all() and np.isnan(w[1]).all()
    for i in (0, 2):  # eigenvectors are defined up to a phase: check a v = v diag(w)
        np.testing.assert_allclose(as_wide(a[i]) @ as_wide(v[i]), as_wide(v[i]) * as_wide(w[i]),
                                   rtol=tol(dtype, 300), atol=tol(dtype, 300))
    close(L.eigh_p, np.zeros((2, 0, 0), dtype), lower=lower)


def test_svd_of_a_non_finite_matrix_is_nan():
    a = matrices((3, 3, 2), np.float32)
    a[2, 1, 1] = np.inf
    (s,) = close(L.svd_p, a, full_matrices=False, compute_uv=False, scale=30)
    assert np.isnan(s[2]).all() and np.isfinite(s[:2]).all()


def _phase_free(v_got, v_want):
    """|<got_i, want_i>| per eigenvector column: 1 when they agree up to a phase."""
    return np.abs(np.einsum("...ji,...ji->...i", np.conj(as_wide(v_want)), as_wide(v_got)))


@pytest.mark.parametrize("dtype", DTYPES, ids=ids)
def test_eig_values_and_both_eigenvectors(dtype):
    a = matrices((2, 4, 4), dtype)
    w, vl, vr = run_kernel(L.eig_p, a, compute_left_eigenvectors=True,
                           compute_right_eigenvectors=True)
    w_ref, vl_ref, vr_ref = reference(L.eig_p, a, compute_left_eigenvectors=True,
                                      compute_right_eigenvectors=True)
    ct = np.result_type(dtype, np.complex64)
    assert w.dtype == vl.dtype == vr.dtype == ct
    t = tol(dtype, 1000)
    for i in range(2):
        order, order_ref = np.argsort(w[i]), np.argsort(w_ref[i])  # same eigenvalues...
        np.testing.assert_allclose(as_wide(w[i][order]), as_wide(w_ref[i][order_ref]), rtol=t, atol=t)
        # ... and eigenvectors equal up to phase, of unit norm
        np.testing.assert_allclose(_phase_free(vr[i][:, order], vr_ref[i][:, order_ref]), 1, rtol=t)
        np.testing.assert_allclose(_phase_free(vl[i][:, order], vl_ref[i][:, order_ref]), 1, rtol=t)
        x = as_wide(a[i])
        np.testing.assert_allclose(x @ as_wide(vr[i]), as_wide(vr[i]) * as_wide(w[i]), rtol=t, atol=t)
        np.testing.assert_allclose(np.conj(as_wide(vl[i])).T @ x,
                                   as_wide(w[i])[:, None] * np.conj(as_wide(vl[i])).T, rtol=t, atol=t)
    only_w = run_kernel(L.eig_p, a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)
    np.testing.assert_array_equal(only_w[0], w)


def test_eig_of_a_non_finite_matrix_is_nan():
    a = matrices((2, 3, 3), np.float64)
    a[0, 1, 1] = np.nan
    w, vr = run_kernel(L.eig_p, a, compute_left_eigenvectors=False, compute_right_eigenvectors=True)
    assert np.isnan(w[0]).all() and np.isnan(vr[0]).all() and np.isfinite(w[1]).all()


def test_eig_without_a_gpu_eigensolver_names_primitive_dtype_and_device(monkeypatch):
    import cupy

    def missing(a):
        raise RuntimeError("geev is not available")
    monkeypatch.setattr(cupy.linalg, "eig", missing)
    with pytest.raises(UnsupportedPrimitiveError, match=r"'eig'.*float32 on cuda:0.*CPU"):
        run_kernel(L.eig_p, matrices((3, 3), np.float32), compute_left_eigenvectors=False,
                   compute_right_eigenvectors=True)
    monkeypatch.setattr(cupy.linalg, "eig", None)  # a CuPy older than 14
    with pytest.raises(UnsupportedPrimitiveError, match=r"'eig'.*complex128 on cuda:0"):
        run_kernel(L.eig_p, matrices((2, 3, 3), np.complex128), compute_left_eigenvectors=True,
                   compute_right_eigenvectors=False)

    def failing(a):
        raise RuntimeError("CUSOLVER_STATUS_INTERNAL_ERROR")
    monkeypatch.setattr(cupy.linalg, "eig", failing)  # a real failure is not "unsupported"
    with pytest.raises(RuntimeError, match="INTERNAL_ERROR"):
        run_kernel(L.eig_p, matrices((3, 3), np.float32), compute_left_eigenvectors=False,
                   compute_right_eigenvectors=True)


@pytest.mark.parametrize("name", ["eigh", "svd", "eig"])
def test_the_kit_compares_vectors_up_to_the_solvers_phases(name):
    # cuSOLVER's vectors carry other phases than LAPACK's, and its batched routines others
    # than its single ones (the H200 failed test_values[cupy-eigh-*], test_vmap[cupy-svd]...);
    # the simulated CuPy does so too (fake_cupy_vendor), and the kit's values and vmap checks
    # compare such vectors up to a phase (plax.testing.conformance.phases)
    from plax.testing.conformance import harness, spec_linalg
    from test_kernels_a_simulated import backend
    spec = next(s for s in spec_linalg.SPECS if s.name == name)
    for dtype in ("float32", "complex64"):
        harness.check_values(spec, dtype, backend(), "cupy")
    harness.check_vmap(spec, "cupy", with_jit=False)


@pytest.mark.parametrize("dtype", [np.float32, np.complex128], ids=ids)
def test_triangular_solve_of_a_singular_matrix_gives_trsms_infs_as_the_reference(dtype):
    # cuBLAS's trsm (CuPy's solve_triangular) divides by the zero pivot, as JAX and the NumPy
    # backend do; the simulated CuPy used to raise SciPy's LinAlgError there, and the kernel's
    # per-matrix fallback wrote NaNs over the whole solution
    a = (np.tril(matrices((2, 3, 3), dtype)) + 3 * np.eye(3)).astype(dtype)
    a[0, 1, 1] = 0
    b = matrices((2, 3, 2), dtype, seed=1)
    p = dict(left_side=True, lower=True, transpose_a=False, conjugate_a=False,
             unit_diagonal=False)
    got, want = run_kernel(L.triangular_solve_p, a, b, **p), reference(L.triangular_solve_p, a, b, **p)
    assert not np.isfinite(as_wide(got)[0, 1:]).any() and np.isfinite(as_wide(got)[1]).all()
    np.testing.assert_allclose(as_wide(got), as_wide(want), rtol=tol(dtype), atol=tol(dtype))
