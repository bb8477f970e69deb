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


#: (NumPy module, name) -> the function the simulated CuPy runs for it
REPLACEMENTS = {
    ("numpy", "argsort"): argsort,
    ("numpy", "sort"): sort,
    ("numpy.linalg", "eigh"): eigh,
    ("numpy.linalg", "svd"): svd,
    ("numpy.linalg", "eig"): eig,
}
