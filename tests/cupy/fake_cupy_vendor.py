"""Where CuPy's library routines give other (valid) answers than NumPy's: the simulated CuPy's
sort order and eigen/singular vector phases.

:mod:`fake_cupy` runs NumPy's function of a name on the host copies of device arrays; for the
names of :data:`REPLACEMENTS` it runs the function here instead, which answers as CuPy's
library does on a GPU (read from CuPy 14's sources), so CI sees what a real device shows:

* **Sort order of floats** (``cupy.argsort``, ``cupy.sort``, ``ndarray.argsort``,
  ``ndarray.sort``; ``cupy/_core/_routines_sorting.pyx``, ``cupy/cuda/cupy_thrust.cu``): a
  one-dimensional float32/float64 array is sorted by Thrust with ``thrust::less``, which is
  CUB's radix sort on the bits: a NaN with the sign bit set comes before ``-inf``, NaNs order
  among themselves by their payload, and ``-0.0`` ties with ``0.0`` (CUB maps ``-0.0`` to
  ``0.0`` before taking digits). Arrays of more dimensions, float16 and complex arrays go
  through CuPy's NaN-aware comparators (every NaN last, as NumPy). Every CuPy sort is stable
  whatever ``kind`` (only ``None`` and ``"stable"`` are accepted).
* **Phases of eigenvectors and singular vectors** (``cupy.linalg.eigh``, ``svd``, ``eig``:
  cuSOLVER's ``syevd``/``syevj``, ``gesvd``/``gesvdj``, ``geev``): each vector is defined
  only up to a unit factor (a sign for real dtypes), and which one comes out depends on the
  solver. Here every column (``svd``: column of ``u`` and the matching row of ``vh``) is
  multiplied by a factor other than NumPy's, and a batch (``ndim > 2``, CuPy's batched
  solvers) uses other factors than a single matrix, as on the H200 where the batched
  ``syevj`` and the single ``syevd`` disagreed with each other and with LAPACK.
* **No exceptions from the solvers** (CuPy's default ``cupyx.seterr(linalg="ignore")``,
  ``cupyx/scipy/linalg/_solve_triangular.py``): ``cupy.linalg.cholesky`` of a matrix that is
  not positive definite returns ``potrf``'s partial factor (the failing pivot left on the
  diagonal), ``cupyx.scipy.linalg.solve_triangular`` of a singular matrix is ``trsm``'s
  infs/NaNs, where NumPy and SciPy raise ``LinAlgError``.
"""
from __future__ import annotations

import math

import numpy as np

_RADIX_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _check_kind(kind) -> None:
    if kind is not None and kind != "stable":  # (CuPy's ndarray._check_kind_sort)
        raise ValueError("kind can only be None or 'stable'")


def radix_keys(a: np.ndarray) -> np.ndarray:
    """The unsigned integers whose order is CUB's radix order of the floats ``a``: the sign
    bit flipped for positive values, every bit for negative ones, ``-0.0`` taken as ``0.0``.

    Example:
      >>> np.argsort(radix_keys(np.array([np.nan, -np.nan, -1.0])), kind="stable")
      array([1, 2, 0])
    """
    u = np.dtype(f"u{a.dtype.itemsize}")
    sign = u.type(1 << (8 * a.dtype.itemsize - 1))
    bits = np.ascontiguousarray(a).view(u)
    bits = np.where(bits == sign, u.type(0), bits)
    return np.where(bits & sign, ~bits, bits | sign)


def argsort(a, axis=-1, kind=None):
    """``cupy.argsort``: stable; a 1-d float32/float64 array in CUB's bit order."""
    _check_kind(kind)
    a = np.atleast_1d(np.asarray(a))
    if axis is None:
        a, axis = a.ravel(), -1
    if a.ndim == 1 and a.dtype in _RADIX_FLOATS:
        return np.argsort(radix_keys(a), kind="stable")
    return np.argsort(a, axis=axis, kind="stable")


def sort(a, axis=-1, kind=None):
    """``cupy.sort``: a sorted copy in :func:`argsort`'s order (values keep their bits)."""
    a = np.asarray(a)
    if axis is None:
        a, axis = a.ravel(), -1
    if a.ndim == 0:
        raise np.exceptions.AxisError("Sorting arrays with the rank of zero is not supported")
    return np.take_along_axis(a, argsort(a, axis=axis, kind=kind), axis=axis)


def sort_in_place(a: np.ndarray, axis=-1, kind=None) -> None:
    """``ndarray.sort``: in place, C-contiguous arrays only (as CuPy)."""
    if a.ndim and not a.flags.c_contiguous:
        raise NotImplementedError("Sorting non-contiguous array is not supported.")
    a[...] = sort(a, axis=axis, kind=kind)


def _phases(a: np.ndarray, count: int, dtype) -> np.ndarray:
    """Unit factors, none equal to 1, shaped ``a.shape[:-2] + (1, count)`` (one per column
    of each matrix of the batch ``a``): a sign for a real ``dtype``, a unit complex number
    for a complex one; a batch (``a.ndim > 2``) gets other factors than a single matrix."""
    batch = a.shape[:-2]
    first = 1 if a.ndim > 2 else 0
    b = (np.arange(math.prod(batch)) + first).reshape(batch + (1, 1))
    k = np.arange(count)
    if np.dtype(dtype).kind == "c":
        return np.exp(1j * (1.0 + k + 0.5 * b)).astype(dtype)
    return np.where((k + b) % 2 == 0, -1.0, 1.0).astype(dtype)


def eigh(a, UPLO="L"):
    """``cupy.linalg.eigh``: NumPy's eigenvalues, eigenvectors in another phase."""
    w, v = np.linalg.eigh(a, UPLO=UPLO)
    return type(np.linalg.eigh(np.eye(1)))(w, v * _phases(np.asarray(a), v.shape[-1], v.dtype))


def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """``cupy.linalg.svd``: NumPy's singular values; column ``k`` of ``u`` and row ``k`` of
    ``vh`` in another (joint) phase, the columns and rows beyond ``min(m, n)`` too."""
    result = np.linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    if not compute_uv:
        return result
    u, s, vh = result
    a = np.asarray(a)
    k = s.shape[-1]
    p = _phases(a, max(u.shape[-1], vh.shape[-2]), u.dtype)
    u = u * p[..., :u.shape[-1]]
    vh = vh * np.swapaxes(np.conj(p[..., :vh.shape[-2]]), -1, -2)
    if vh.shape[-2] > k:  # rows of vh with no singular value: a phase of their own
        vh[..., k:, :] *= -1
    return type(result)(u, s, vh)


def eig(a):
    """``cupy.linalg.eig``: NumPy's eigenvalues, eigenvectors in another phase."""
    w, v = np.linalg.eig(a)
    return type(np.linalg.eig(np.eye(1)))(w, v * _phases(np.asarray(a), v.shape[-1], v.dtype))


def _matrices(x: np.ndarray, ndim: int) -> np.ndarray:
    """``x``'s trailing ``ndim``-d blocks as one leading axis."""
    return x.reshape((-1,) + x.shape[x.ndim - ndim:])


def _potf2(m: np.ndarray) -> np.ndarray:
    """LAPACK's unblocked Cholesky (``potf2``) of one matrix, stopping at the first pivot
    that is not positive and leaving it on the diagonal (the rest of the lower triangle as it
    was), as ``potrf`` leaves a matrix that is not positive definite."""
    low = np.tril(m).copy()
    for j in range(m.shape[-1]):
        ajj = np.real(m[j, j] - np.vdot(low[j, :j], low[j, :j]))
        if not ajj > 0:
            low[j, j] = ajj
            break
        low[j, j] = np.sqrt(ajj)
        low[j + 1:, j] = (m[j + 1:, j] - low[j + 1:, :j] @ np.conj(low[j, :j])) / low[j, j]
    return low


def cholesky(a):
    """``cupy.linalg.cholesky``: cuSOLVER's ``potrf`` with CuPy's default error state
    (``cupyx.seterr(linalg="ignore")``): a matrix that is not positive definite raises
    nothing; its factor stops at the failing pivot, which stays on the diagonal."""
    a = np.asarray(a)
    try:
        return np.linalg.cholesky(a)
    except np.linalg.LinAlgError:
        pass
    with np.errstate(all="ignore"):
        out = np.stack([_potf2(m) for m in _matrices(a, 2)]) if a.size else a.copy()
    return out.reshape(a.shape)


def solve_triangular(a, b, trans=0, lower=False, unit_diagonal=False, overwrite_b=False,
                     check_finite=False):
    """``cupyx.scipy.linalg.solve_triangular``: cuBLAS's ``trsm`` on a matrix or a batch; a
    singular ``a`` raises nothing (SciPy's raises ``LinAlgError``) and gives infs/NaNs."""
    from scipy.linalg import blas
    a, b = np.asarray(a), np.asarray(b)
    vector = b.ndim == a.ndim - 1
    dtype = np.result_type(a.dtype, b.dtype, np.float32)
    bs = b[..., None] if vector else b
    mats, rhs = _matrices(a.astype(dtype), 2), _matrices(bs.astype(dtype), 2)
    op = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}[trans]
    out = np.empty(rhs.shape, dtype)
    with np.errstate(all="ignore"):
        for i, (m, r) in enumerate(zip(mats, rhs)):
            trsm = blas.get_blas_funcs("trsm", (m, r))
            out[i] = trsm(1.0, m, r, side=0, lower=int(bool(lower)), trans_a=op,
                          diag=int(bool(unit_diagonal)))
    out = out.reshape(bs.shape)
    return out[..., 0] if vector else out


#: (NumPy module, name) -> the function the simulated CuPy runs for it
REPLACEMENTS = {
    ("numpy", "argsort"): argsort,
    ("numpy", "sort"): sort,
    ("numpy.linalg", "eigh"): eigh,
    ("numpy.linalg", "svd"): svd,
    ("numpy.linalg", "eig"): eig,
    ("numpy.linalg", "cholesky"): cholesky,
    ("scipy.linalg", "solve_triangular"): solve_triangular,
}
