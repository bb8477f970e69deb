"""plax.scipy.linalg's special matrices, cholesky, polar, expm_frechet, eigh_tridiagonal and
qr_multiply against scipy.linalg in float64 (and JAX's batching/dtype conventions)."""
import numpy as np
import pytest
import scipy.linalg as sl

import plax
import plax.numpy as jnp
from plax.scipy import linalg as pl
from plax.test_util import check_grads

R = np.random.default_rng(8)


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


def _close(a, b, rtol=1e-12, atol=1e-12):
    np.testing.assert_allclose(np.asarray(a), b, rtol=rtol, atol=atol)


def test_structured_from_vectors():
    c, r = R.standard_normal(4), R.standard_normal(5)
    _close(pl.toeplitz(c, r), sl.toeplitz(c, r))
    z = c + 1j * R.standard_normal(4)
    _close(pl.toeplitz(z), sl.toeplitz(z))             # Hermitian by default
    _close(pl.hankel(c, r), sl.hankel(c, r))
    _close(pl.hankel(c), sl.hankel(c))
    _close(pl.circulant(c), sl.circulant(c))
    # leading axes batch (as JAX's)
    cs = R.standard_normal((2, 3))
    _close(pl.circulant(cs), np.stack([sl.circulant(v) for v in cs]))
    _close(pl.toeplitz(cs), np.stack([sl.toeplitz(v) for v in cs]))
    a = np.array([2.0, -3.0, 1.5, 4.0, -1.0])
    _close(pl.companion(a), sl.companion(a))
    _close(pl.fiedler(a), sl.fiedler(a))
    for coeffs in (a, a[:4], a[:3], np.array([1.0, -6.0, 11.0, -6.0])):
        _close(pl.fiedler_companion(coeffs), sl.fiedler_companion(coeffs))
    _close(np.sort(np.linalg.eigvals(np.asarray(pl.fiedler_companion([1.0, -6.0, 11.0, -6.0])))),
           [1.0, 2.0, 3.0], rtol=1e-10)
    f, s = R.uniform(0, 2, 4), R.uniform(0, 1, 3)
    _close(pl.leslie(f, s), sl.leslie(f, s))
    k = R.standard_normal(3)
    for n in (1, 2, 5):
        for mode in ("full", "same", "valid"):
            _close(pl.convolution_matrix(k, n, mode), sl.convolution_matrix(k, n, mode))
    with pytest.raises(ValueError):
        pl.convolution_matrix(k, 3, "bad")
    with pytest.raises(ValueError):
        pl.companion(np.array([1.0]))
    # differentiable in the defining vectors
    check_grads(lambda v: jnp.sum(pl.toeplitz(v) @ pl.circulant(v)), (c,), order=1)


def test_fixed_matrices():
    for n in (1, 2, 4, 8):
        np.testing.assert_array_equal(pl.hadamard(n), sl.hadamard(n))
    with pytest.raises(ValueError):
        pl.hadamard(6)
    for n in (1, 3, 6):
        _close(pl.hilbert(n), sl.hilbert(n))
        _close(pl.invhilbert(n), sl.invhilbert(n))
        _close(pl.helmert(n), sl.helmert(n))
        _close(pl.helmert(n, full=True), sl.helmert(n, full=True))
        for kind in ("symmetric", "lower", "upper"):
            _close(pl.pascal(n, kind), sl.pascal(n, kind).astype(float))
            _close(pl.invpascal(n, kind), sl.invpascal(n, kind).astype(float))
            # SciPy's is an integer matrix: its zeros are +0, never -0 (which prints "-0.")
            assert not np.signbit(np.asarray(pl.invpascal(n, kind))[sl.invpascal(n, kind) == 0]).any()
        for scale in (None, "n", "sqrtn"):
            _close(pl.dft(n, scale), sl.dft(n, scale))
    with plax.config.override("jax_enable_x64", False):
        assert pl.hilbert(2).dtype == np.float32 and pl.dft(2).dtype == np.complex64
        assert pl.hadamard(2).dtype == np.int32


def test_cholesky_polar_qr_multiply():
    a = R.standard_normal((4, 4))
    spd = a @ a.T + 4 * np.eye(4)
    _close(pl.cholesky(spd), sl.cholesky(spd), rtol=1e-10)
    _close(pl.cholesky(spd, lower=True), sl.cholesky(spd, lower=True), rtol=1e-10)
    for side in ("right", "left"):
        u, p = pl.polar(a, side=side)
        su, sp = sl.polar(a, side=side)
        _close(u, su, rtol=1e-9, atol=1e-10)
        _close(p, sp, rtol=1e-9, atol=1e-10)
    rect = R.standard_normal((5, 3))
    u, p = pl.polar(rect)
    _close(np.asarray(u) @ np.asarray(p), rect, rtol=1e-10, atol=1e-12)
    c = R.standard_normal((2, 5))
    out, r = pl.qr_multiply(rect, c, mode="right")
    q = np.linalg.qr(rect)[0]
    _close(out, c @ q, rtol=1e-10, atol=1e-12)
    _close(np.abs(np.asarray(r)), np.abs(np.linalg.qr(rect)[1]), rtol=1e-10, atol=1e-12)
    out, _ = pl.qr_multiply(rect, R.standard_normal(3), mode="left")
    assert out.shape == (5,)


def test_expm_frechet_and_eigh_tridiagonal():
    a, e = R.standard_normal((3, 3)) / 2, R.standard_normal((3, 3))
    ex, fr = pl.expm_frechet(a, e)
    sex, sfr = sl.expm_frechet(a, e)
    _close(ex, sex, rtol=1e-10, atol=1e-12)
    _close(fr, sfr, rtol=1e-9, atol=1e-11)
    _close(pl.expm_frechet(a, e, compute_expm=False), sfr, rtol=1e-9, atol=1e-11)
    d, off = R.standard_normal(5), R.standard_normal(4)
    w = pl.eigh_tridiagonal(d, off, eigvals_only=True)
    _close(w, sl.eigh_tridiagonal(d, off, eigvals_only=True), rtol=1e-10, atol=1e-12)
    w, v = pl.eigh_tridiagonal(d, off)
    t = np.diag(d) + np.diag(off, 1) + np.diag(off, -1)
    _close(t @ np.asarray(v), np.asarray(v) * np.asarray(w), rtol=1e-9, atol=1e-10)
    _close(pl.eigh_tridiagonal(d, off, eigvals_only=True, select="i", select_range=(1, 2)),
           sl.eigh_tridiagonal(d, off, eigvals_only=True, select="i", select_range=(1, 2)),
           rtol=1e-10, atol=1e-12)
    with pytest.raises(NotImplementedError):
        pl.eigh_tridiagonal(d, off, select="v", select_range=(0.0, 1.0))


def test_hessenberg():
    a = R.standard_normal((6, 6))
    h, q = pl.hessenberg(a, calc_q=True)
    h, q = np.asarray(h), np.asarray(q)
    assert (np.tril(h, -2) == 0).all()
    _close(q @ h @ q.T, a, rtol=1e-12, atol=1e-12)
    _close(q.T @ q, np.eye(6), atol=1e-13)
    # unique up to the signs of the reflections
    _close(np.abs(h), np.abs(sl.hessenberg(a)), rtol=1e-10, atol=1e-12)
    c = a + 1j * R.standard_normal((6, 6))
    h, q = pl.hessenberg(c, calc_q=True)
    assert (np.tril(np.asarray(h), -2) == 0).all()
    _close(np.asarray(q) @ np.asarray(h) @ np.asarray(q).conj().T, c, atol=1e-12)


def test_matrix_functions_and_sylvester():
    a = R.standard_normal((5, 5))
    spd = a @ a.T + np.eye(5)
    _close(pl.sqrtm(spd), sl.sqrtm(spd), rtol=1e-10, atol=1e-12)
    _close(pl.sqrtm(a), sl.sqrtm(a), rtol=1e-9, atol=1e-11)
    _close(pl.funm(a, jnp.exp), sl.expm(a), rtol=1e-10, atol=1e-11)
    _close(pl.funm(spd, jnp.sin), sl.funm(spd, np.sin), rtol=1e-9, atol=1e-11)
    b, c = R.standard_normal((3, 3)), R.standard_normal((5, 3))
    x = pl.solve_sylvester(a, b, c)
    assert x.dtype == np.float64
    _close(x, sl.solve_sylvester(a, b, c), rtol=1e-9, atol=1e-11)
    with pytest.raises(ValueError):
        pl.solve_sylvester(a, b, c.T)


def test_schur_and_rsf2csf():
    a = R.standard_normal((6, 6))
    t, z = pl.schur(a)
    t, z = np.asarray(t), np.asarray(z)
    assert t.dtype == np.float64 and (np.tril(t, -2) == 0).all()
    _close(z @ t @ z.T, a, rtol=1e-10, atol=1e-12)
    _close(z.T @ z, np.eye(6), atol=1e-12)
    # the diagonal blocks carry the eigenvalues
    _close(np.sort_complex(np.linalg.eigvals(t)), np.sort_complex(np.linalg.eigvals(a)),
           rtol=1e-9, atol=1e-10)
    t, z = pl.schur(a, output="complex")
    t, z = np.asarray(t), np.asarray(z)
    assert (np.tril(t, -1) == 0).all()
    _close(z @ t @ z.conj().T, a, rtol=1e-10, atol=1e-12)
    ts, zs = sl.schur(a)
    t2, z2 = pl.rsf2csf(ts, zs)
    t2, z2 = np.asarray(t2), np.asarray(z2)
    assert (np.tril(t2, -1) == 0).all()
    _close(z2 @ t2 @ z2.conj().T, a, rtol=1e-10, atol=1e-11)
    with pytest.raises(ValueError):
        pl.schur(a, output="other")
