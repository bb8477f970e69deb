"""Specs of the linear algebra primitives (cholesky, triangular_solve, lu, qr, eigh, svd).

References are NumPy/SciPy (LAPACK) in float64/complex128. Operands are well conditioned
(diagonally dominant, or with well separated eigen/singular values), so the factorizations
are unique up to the phases of the vectors. Those phases are the solver's choice (LAPACK,
MKL and cuSOLVER differ, and cuSOLVER's batched and single routines differ from each other),
so eigen- and singular vectors and QR's ``q`` columns (with the rows of ``r``) are compared
after bringing them to the reference's phases (:mod:`.phases`), which still tells a wrong
vector. Gradient cases differentiate functions that do not depend on the phases of eigen-
and singular vectors.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from plax import lax

from .harness import Case, GradCase, Spec, f64, rand
from .phases import eig_gauge, eigh_gauge, qr_gauge, svd_gauge

SPECS: list[Spec] = []

DTYPES = ("float32", "float64", "complex64", "complex128")


def _spd(rng, shape, d):
    """A Hermitian positive-definite matrix (batch) of ``shape`` in dtype ``d``."""
    a = rand(rng, shape, d, -1, 1)
    n = shape[-1]
    return (a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)).astype(d)


def _herm(rng, shape, d):
    """A Hermitian matrix with well separated eigenvalues."""
    a = rand(rng, shape, d, -1, 1)
    n = shape[-1]
    h = (a + np.conj(np.swapaxes(a, -1, -2))) / 2
    return (h + np.diag(np.arange(n) * 3.0)).astype(d)


def _general(rng, shape, d):
    """A matrix with well separated singular values."""
    a = rand(rng, shape, d, -1, 1)
    m, n = shape[-2:]
    return (a + np.eye(m, n) * np.linspace(3, 9, n)).astype(d)


def _per_matrix(fn, *xs):
    """``fn`` applied to each matrix of the batch, results stacked back to the batch shape."""
    xs = [f64(x) for x in xs]
    batch = xs[0].shape[:-2]
    flat = [x.reshape((-1,) + x.shape[-2:]) for x in xs]
    outs = [fn(*ms) for ms in zip(*flat)]
    if not isinstance(outs[0], tuple):
        return np.stack(outs).reshape(batch + outs[0].shape)
    return [np.stack([o[k] for o in outs]).reshape(batch + np.shape(outs[0][k]))
            for k in range(len(outs[0]))]


# ------------------------------------------------------------------ cholesky

def _cholesky_cases(d):
    return [Case({}, lambda rng, s=s: [_spd(rng, s, d)], lambda a: np.linalg.cholesky(f64(a)),
                 f"{list(s)}", tol_scale=20) for s in [(3, 3), (2, 4, 4), (1, 1), (2, 1, 2, 2)]]


def _cholesky_grads():
    rng = np.random.default_rng(0)
    return [GradCase(lambda a: lax.linalg.cholesky(a), (_spd(rng, (3, 3), np.float64),),
                     x64=True, label="3x3"),
            GradCase(lambda a: lax.linalg.cholesky(a), (_spd(rng, (2, 3, 3), np.complex128),),
                     x64=True, label="complex batch")]


SPECS.append(Spec(lax.cholesky_p, DTYPES, _cholesky_cases, grads=_cholesky_grads))


# ------------------------------------------------------------------ triangular_solve

TS_CONFIGS = [dict(left_side=ls, lower=lo, transpose_a=tr, conjugate_a=cj, unit_diagonal=ud)
              for ls, lo, tr, cj, ud in [(True, True, False, False, False),
                                         (True, False, True, False, False),
                                         (False, True, False, False, True),
                                         (False, False, True, True, False),
                                         (True, True, False, True, False)]]


def _tri(rng, shape, d, lower):
    a = rand(rng, shape, d, -1, 1) + 4 * np.eye(shape[-1])
    return (np.tril(a) if lower else np.triu(a)).astype(d)


def _ts_ref(a, b, *, left_side, lower, transpose_a, conjugate_a, unit_diagonal):
    def one(a, b):
        a = np.tril(a) if lower else np.triu(a)
        if unit_diagonal:
            a = a - np.diag(np.diag(a)) + np.eye(a.shape[-1])
        if transpose_a:
            a = a.T
        if conjugate_a:
            a = np.conj(a)
        return np.linalg.solve(a, b) if left_side else np.linalg.solve(a.T, b.T).T
    return _per_matrix(one, a, b)


def _ts_cases(d):
    out = []
    for p in TS_CONFIGS:
        for batch, m, k in [((), 3, 2), ((2,), 4, 1), ((), 1, 3)]:
            bshape = batch + ((m, k) if p["left_side"] else (k, m))
            out.append(Case(p, lambda rng, p=p, batch=batch, m=m, bshape=bshape: [
                _tri(rng, batch + (m, m), d, p["lower"]), rand(rng, bshape, d, -1, 1)],
                lambda a, b, p=p: _ts_ref(a, b, **p), f"{p} {list(bshape)}", tol_scale=20))
    return out


def _ts_grads():
    rng = np.random.default_rng(1)
    out = []
    for p in TS_CONFIGS[:4]:
        bshape = (3, 2) if p["left_side"] else (2, 3)
        out.append(GradCase((lambda p: lambda a, b: lax.triangular_solve_p.bind(a, b, **p))(p),
                            (_tri(rng, (3, 3), np.float64, p["lower"]),
                             rand(rng, bshape, np.float64, -1, 1)), x64=True, label=str(p)))
    return out


SPECS.append(Spec(lax.triangular_solve_p, DTYPES, _ts_cases, grads=_ts_grads))


# ------------------------------------------------------------------ lu

def _lu_ref(a):
    def one(x):
        lu, piv, _ = sla.lapack.get_lapack_funcs("getrf", (x,))(x)
        k = min(x.shape)
        perm = np.arange(x.shape[0])
        for i, p in enumerate(piv[:k]):
            perm[i], perm[p] = perm[p], perm[i]
        return lu, piv[:k].astype(np.int32), perm.astype(np.int32)
    return _per_matrix(one, a)


def _lu_cases(d):
    return [Case({}, lambda rng, s=s: [rand(rng, s, d)], _lu_ref, f"{list(s)}", tol_scale=50)
            for s in [(4, 4), (2, 3, 3), (3, 5), (5, 2), (1, 1)]]


def _lu_grads():
    rng = np.random.default_rng(2)
    return [GradCase(lambda a: lax.linalg.lu(a)[0], (rand(rng, (4, 4), np.float64),),
                     x64=True, label="4x4"),
            GradCase(lambda a: lax.linalg.lu(a)[0], (rand(rng, (2, 3, 3), np.complex128),),
                     x64=True, label="complex batch"),
            GradCase(lambda a: lax.linalg.lu(a)[0], (rand(rng, (4, 2), np.float64),),
                     x64=True, label="tall"),
            GradCase(lambda a: lax.linalg.lu(a)[0], (rand(rng, (2, 4), np.float64),),
                     x64=True, label="wide")]


SPECS.append(Spec(lax.lu_p, DTYPES, _lu_cases, grads=_lu_grads))


# ------------------------------------------------------------------ qr

def _qr_cases(d):
    out = []
    for s, full in [((4, 3), False), ((3, 3), True), ((2, 5, 2), False), ((3, 5), False),
                    ((4, 2), True), ((2, 3, 3), False)]:
        diff = None if (s[-2] >= s[-1] and (not full or s[-2] == s[-1])) else ()
        out.append(Case(dict(full_matrices=full), lambda rng, s=s: [_general(rng, s, d)],
                        lambda a, full=full: list(np.linalg.qr(
                            f64(a), mode="complete" if full else "reduced")),
                        f"{list(s)} full={full}", tol_scale=50, grad_operands=diff,
                        gauge=qr_gauge))
    return out


def _qr_grads():
    rng = np.random.default_rng(3)
    return [GradCase(lambda a: list(lax.linalg.qr(a, full_matrices=False)),
                     (_general(rng, (4, 3), np.float64),), x64=True, label="4x3"),
            GradCase(lambda a: list(lax.linalg.qr(a, full_matrices=False)),
                     (_general(rng, (2, 3, 2), np.complex128),), x64=True, label="complex")]


SPECS.append(Spec(lax.qr_p, DTYPES, _qr_cases, grads=_qr_grads))


# ------------------------------------------------------------------ eigh

def _eigh_ref(a, lower):
    w, v = np.linalg.eigh(f64(a), UPLO="L" if lower else "U")
    return [v, w]


def _eigh_cases(d):
    return [Case(dict(lower=lo), lambda rng, s=s: [_herm(rng, s, d)],
                 lambda a, lo=lo: _eigh_ref(a, lo), f"{list(s)} lower={lo}", tol_scale=100,
                 gauge=eigh_gauge)
            for s, lo in [((3, 3), True), ((2, 4, 4), False), ((1, 1), True)]]


def _eigh_invariant(a):
    """Eigenvalues and ``|v|^2``: independent of the eigenvectors' phases."""
    v, w = lax.linalg.eigh(a)
    vr = lax.real(v) if np.iscomplexobj(np.zeros((), v.dtype)) else v
    vi = lax.imag(v) if np.iscomplexobj(np.zeros((), v.dtype)) else None
    mag = vr * vr if vi is None else vr * vr + vi * vi
    return [w, mag]


def _eigh_grads():
    rng = np.random.default_rng(4)
    return [GradCase(_eigh_invariant, (_herm(rng, (3, 3), np.float64),), x64=True, label="3x3"),
            GradCase(_eigh_invariant, (_herm(rng, (2, 3, 3), np.complex128),), x64=True,
                     label="complex")]


SPECS.append(Spec(lax.eigh_p, DTYPES, _eigh_cases, grads=_eigh_grads))


# ------------------------------------------------------------------ svd

def _svd_ref(a, full_matrices, compute_uv):
    if not compute_uv:
        return [np.linalg.svd(f64(a), compute_uv=False)]
    u, s, vh = np.linalg.svd(f64(a), full_matrices=full_matrices)
    return [s, u, vh]


def _svd_cases(d):
    out = []
    for s, full, uv in [((3, 3), True, True), ((4, 2), False, True), ((2, 2, 4), False, True),
                        ((3, 2), True, True), ((2, 3, 5), True, False), ((1, 1), False, True)]:
        diff = None if (not uv or not full or s[-1] == s[-2]) else ()
        p = dict(full_matrices=full, compute_uv=uv)
        out.append(Case(p, lambda rng, s=s: [_general(rng, s, d)],
                        lambda a, p=p: _svd_ref(a, **p), f"{list(s)} {p}", tol_scale=100,
                        grad_operands=diff, gauge=svd_gauge))
    return out


def _svd_invariant(a):
    """Singular values, ``|u|^2``, ``|vh|^2`` and ``u s vh``: independent of the phases."""
    s, u, vh = lax.svd_p.bind(a, full_matrices=False, compute_uv=True)

    def mag(x):
        if np.iscomplexobj(np.zeros((), x.dtype)):
            return lax.real(x) * lax.real(x) + lax.imag(x) * lax.imag(x)
        return x * x
    return [s, mag(u), mag(vh)]


def _svd_grads():
    rng = np.random.default_rng(5)
    return [GradCase(_svd_invariant, (_general(rng, (4, 3), np.float64),), x64=True,
                     label="4x3"),
            GradCase(_svd_invariant, (_general(rng, (2, 4), np.float64),), x64=True,
                     label="2x4"),
            GradCase(_svd_invariant, (_general(rng, (3, 3), np.complex128),), x64=True,
                     label="complex"),
            GradCase(lambda a: lax.linalg.svd(a, compute_uv=False),
                     (_general(rng, (2, 3, 4), np.float64),), x64=True, label="values only")]


SPECS.append(Spec(lax.svd_p, DTYPES, _svd_cases, grads=_svd_grads))


# ------------------------------------------------------------------ eig

def _eig_ref(a, compute_left_eigenvectors, compute_right_eigenvectors):
    w, vl, vr = _per_matrix(lambda m: tuple(sla.eig(m, left=True, right=True)), a)
    return [w] + ([vl] if compute_left_eigenvectors else []) + (
        [vr] if compute_right_eigenvectors else [])


def _distinct_spectrum(rng, shape, d):
    """A triangular matrix with well separated diagonal, slightly perturbed below."""
    n = shape[-1]
    a = np.triu(rand(rng, shape, d, -1, 1)) + np.diag(np.linspace(1, 3 * n, n))
    return (a + 0.01 * np.tril(rand(rng, shape, d, -1, 1), -1)).astype(d)


def _eig_cases(d):
    values = dict(compute_left_eigenvectors=False, compute_right_eigenvectors=False)
    both = dict(compute_left_eigenvectors=True, compute_right_eigenvectors=True)
    out = [Case(values, lambda rng, s=s: [_distinct_spectrum(rng, s, d)],
                lambda a: _eig_ref(a, **values), f"{list(s)} values", tol_scale=100)
           for s in [(3, 3), (2, 4, 4), (1, 1)]]
    # a diagonal matrix: its eigenvectors are the unit vectors whatever the precision
    diag = lambda rng: [np.diag(np.linspace(1, 4, 3)[rng.permutation(3)]).astype(d)]  # noqa: E731
    out.append(Case(both, diag, lambda a: _eig_ref(a, **both), "diagonal, vectors",
                    tol_scale=100, grad_operands=(), gauge=eig_gauge))
    return out


def _eig_grads():
    rng = np.random.default_rng(6)
    def f(a):  # power sums of the eigenvalues: independent of the order they come in
        w = lax.linalg.eig(a, compute_left_eigenvectors=False, compute_right_eigenvectors=False)[0]
        return [lax.reduce_sum(w, (w.ndim - 1,)), lax.reduce_sum(w * w, (w.ndim - 1,))]

    # first order only, as in JAX: the eigenvalues' JVP uses the (non-differentiable) vectors
    return [GradCase(f, (_distinct_spectrum(rng, (3, 3), np.float64),), x64=True, order=1,
                     label="3x3"),
            GradCase(f, (_distinct_spectrum(rng, (2, 3, 3), np.complex128),), x64=True,
                     order=1, label="complex")]


SPECS.append(Spec(lax.eig_p, DTYPES, _eig_cases, grads=_eig_grads))
