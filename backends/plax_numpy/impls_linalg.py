"""NumPy/SciPy (LAPACK) implementations of the linear algebra primitives.

Failures follow JAX rather than NumPy: a matrix that is not positive definite gives a NaN
Cholesky factor, a singular triangular system gives infs/NaNs, and a singular matrix still
gets its LU factors, never an exception.

Every kernel here allocates its results (LAPACK's outputs, or arrays made for them), so each
is registered ``fresh`` (see :func:`plax_numpy.registry.impl`).
"""
from __future__ import annotations

import numpy as np

from plax.lax.linalg import (cholesky_p, eig_p, eigh_p, lu_p, qr_of_empty, qr_p, svd_of_empty,
                             svd_p, triangular_solve_p)
from plax_numpy.registry import impl


def _matrices(x: np.ndarray):
    """The ``(..., m, n)`` array as a ``(batch, m, n)`` view (for per-matrix LAPACK calls)."""
    return x.reshape((-1,) + x.shape[-2:])


def _per_matrix_on_failure(fn, a: np.ndarray, out_specs: list) -> tuple:
    """``fn`` (a batched NumPy routine returning a tuple) on the whole batch; if any matrix
    holds non-finite values or LAPACK fails to converge, matrix by matrix instead, with NaN
    results for the failing ones only (JAX's values; NumPy would raise for the whole batch).

    ``out_specs`` lists each output's per-matrix shape and dtype."""
    finite = np.isfinite(a).all(axis=(-2, -1))
    if finite.all():
        try:
            return tuple(fn(a))
        except np.linalg.LinAlgError:
            pass
    flat, ok = _matrices(a), finite.reshape(-1)
    outs = [np.empty((flat.shape[0],) + shape, dt) for shape, dt in out_specs]
    for i, m in enumerate(flat):
        try:
            if not ok[i]:
                raise np.linalg.LinAlgError
            for o, r in zip(outs, fn(m)):
                o[i] = r
        except np.linalg.LinAlgError:
            for o in outs:
                o[i] = np.nan
    return tuple(o.reshape(a.shape[:-2] + o.shape[1:]) for o in outs)


@impl(cholesky_p, fresh=True)
def _cholesky(a):
    a = np.asarray(a)
    if a.size == 0:
        return np.zeros(a.shape, a.dtype)
    try:
        return np.linalg.cholesky(a).astype(a.dtype, copy=False)
    except np.linalg.LinAlgError:
        pass
    out = np.empty_like(_matrices(a))
    for i, m in enumerate(_matrices(a)):
        try:
            out[i] = np.linalg.cholesky(m)
        except np.linalg.LinAlgError:  # JAX: NaN on and below the diagonal, zeros above
            out[i] = np.tril(np.full(m.shape, np.nan, a.dtype))
    return out.reshape(a.shape)


@impl(triangular_solve_p, fresh=True)
def _triangular_solve(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    a, b = np.asarray(a), np.asarray(b)
    out = np.empty(b.shape, b.dtype)
    if out.size == 0:
        return out
    if out.shape[:-2] and np.prod(out.shape[:-2]) > 4 and a.shape[-1] <= 64:
        batched = _batched_triangular_solve(a, b, left_side, lower, transpose_a, conjugate_a,
                                            unit_diagonal)
        if batched is not None:
            return batched
    if conjugate_a and not transpose_a:  # BLAS has no "conjugate only": conjugate a first
        a = np.conj(a)
    trans = (2 if conjugate_a else 1) if transpose_a else 0
    from scipy.linalg import blas  # loaded on first use: importing the backend stays light
    trsm = blas.get_blas_funcs("trsm", (a, b))
    bs, outs = _matrices(b), _matrices(out)
    with np.errstate(all="ignore"):  # singular systems give infs/NaNs, as in JAX
        for i, m in enumerate(_matrices(a)):
            outs[i] = trsm(1.0, m, bs[i], side=0 if left_side else 1, lower=int(lower),
                           trans_a=trans, diag=int(unit_diagonal))
    return out


def _batched_triangular_solve(a, b, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    """Many small systems at once through NumPy's batched ``solve`` (one LAPACK call per
    matrix without a Python loop); None if a matrix is singular, for the per-matrix path
    (which gives JAX's infs/NaNs)."""
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        idx = np.arange(a.shape[-1])
        t[..., idx, idx] = 1
    if transpose_a:
        t = np.swapaxes(t, -1, -2)
    if conjugate_a:
        t = np.conj(t)
    try:
        with np.errstate(all="ignore"):
            if left_side:
                return np.linalg.solve(t, b).astype(b.dtype, copy=False)
            x = np.linalg.solve(np.swapaxes(t, -1, -2), np.swapaxes(b, -1, -2))
            return np.swapaxes(x, -1, -2).astype(b.dtype, copy=False)
    except np.linalg.LinAlgError:
        return None


def _permutation_from_pivots(piv: np.ndarray, m: int) -> np.ndarray:
    perm = np.arange(m, dtype=np.int32)
    for i, p in enumerate(piv):
        perm[i], perm[p] = perm[p], perm[i]
    return perm


@impl(lu_p, fresh=True)
def _lu(a):
    a = np.asarray(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    lu = np.empty(a.shape, a.dtype)
    piv = np.empty(a.shape[:-2] + (k,), np.int32)
    perm = np.empty(a.shape[:-2] + (m,), np.int32)
    if a.size == 0:
        piv[...] = np.arange(k, dtype=np.int32)
        perm[...] = np.arange(m, dtype=np.int32)
        return lu, piv, perm
    from scipy.linalg import lapack  # loaded on first use: importing the backend stays light
    getrf = lapack.get_lapack_funcs("getrf", (a,))
    lus, pivs, perms = _matrices(lu), piv.reshape(-1, k), perm.reshape(-1, m)
    with np.errstate(all="ignore"):
        for i, x in enumerate(_matrices(a)):
            f, p, _info = getrf(x)  # info > 0 flags an exactly singular U; JAX returns it as is
            lus[i] = f
            pivs[i] = p[:k]
            perms[i] = _permutation_from_pivots(p[:k], m)
    return lu, piv, perm


@impl(qr_p, fresh=True)
def _qr(a, *, full_matrices):
    a = np.asarray(a)
    if a.size == 0:
        return qr_of_empty(a, full_matrices)
    q, r = np.linalg.qr(a, mode="complete" if full_matrices else "reduced")
    return q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)


@impl(eigh_p, fresh=True)
def _eigh(a, *, lower):
    a = np.asarray(a)
    rdt = np.zeros((), a.dtype).real.dtype
    if a.size == 0:
        return np.zeros(a.shape, a.dtype), np.zeros(a.shape[:-1], rdt)
    n = a.shape[-1]
    uplo = "L" if lower else "U"
    w, v = _per_matrix_on_failure(lambda x: np.linalg.eigh(x, UPLO=uplo), a,
                                  [((n,), rdt), ((n, n), a.dtype)])
    return v.astype(a.dtype, copy=False), w.astype(rdt, copy=False)


@impl(svd_p, fresh=True)
def _svd(a, *, full_matrices, compute_uv):
    a = np.asarray(a)
    m, n = a.shape[-2:]
    k = min(m, n)
    rdt = np.zeros((), a.dtype).real.dtype
    mu, nv = (m, n) if full_matrices else (k, k)
    if a.size == 0:
        return svd_of_empty(a, full_matrices, compute_uv)
    if not compute_uv:
        (s,) = _per_matrix_on_failure(lambda x: (np.linalg.svd(x, compute_uv=False),), a,
                                      [((k,), rdt)])
        return (s.astype(rdt, copy=False),)
    u, s, vh = _per_matrix_on_failure(
        lambda x: np.linalg.svd(x, full_matrices=full_matrices), a,
        [((m, mu), a.dtype), ((k,), rdt), ((nv, n), a.dtype)])
    return (s.astype(rdt, copy=False), u.astype(a.dtype, copy=False),
            vh.astype(a.dtype, copy=False))



@impl(eig_p, fresh=True)
def _eig(a, *, compute_left_eigenvectors, compute_right_eigenvectors):
    a = np.asarray(a)
    ct = np.result_type(a.dtype, np.complex64)
    n = a.shape[-1]
    w = np.empty(a.shape[:-1], ct)
    vl = np.empty(a.shape, ct)
    vr = np.empty(a.shape, ct)
    if a.size:
        from scipy.linalg import eig as scipy_eig  # loaded on first use
        ws, vls, vrs = w.reshape(-1, n), _matrices(vl), _matrices(vr)
        for i, m in enumerate(_matrices(a)):
            if not np.all(np.isfinite(m)):  # LAPACK rejects non-finite input; JAX gives NaNs
                ws[i] = vls[i] = vrs[i] = np.nan
                continue
            ws[i], vls[i], vrs[i] = scipy_eig(m, left=True, right=True, check_finite=False)
    out = [w]
    if compute_left_eigenvectors:
        out.append(vl)
    if compute_right_eigenvectors:
        out.append(vr)
    return tuple(out)
