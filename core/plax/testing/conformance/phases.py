"""Comparing outputs that are defined only up to a phase: eigenvectors, singular vectors and
the ``q`` of a QR factorisation.

An eigenvector (a column of ``eigh``'s ``v``, ``eig``'s ``vl`` and ``vr``) is unique only up to
a unit factor: a sign for real dtypes, ``e^{i t}`` for complex ones. Which one a backend
returns depends on its solver (LAPACK's, OpenBLAS', MKL's and cuSOLVER's differ, and so do
cuSOLVER's single and batched routines), so the kit does not compare these columns as they
come. Each function here is a :attr:`~plax.testing.conformance.harness.Case` ``gauge``: it
brings the actual outputs to the phases of the expected ones -- column ``k`` times the unit
factor of its inner product with the expected column ``k`` -- and leaves everything else as
it is. The comparison that follows is the usual one, so a wrong vector still fails (only its
phase can change, never its direction or norm).

Where outputs share a phase, the gauge moves them together, which keeps their relation
checked: ``svd``'s ``u[:, k]`` and ``vh[k, :]`` (so ``u @ diag(s) @ vh`` is the matrix whenever
both compare equal), ``qr``'s ``q[:, k]`` and ``r[k, :]``. Columns with no partner (those of a
full ``u`` or ``q`` beyond ``min(m, n)``, rows of a full ``vh`` beyond it) span a fixed
subspace in any basis: they are aligned by the unitary that best maps them onto the expected
ones (orthogonal Procrustes), which a basis of another subspace cannot follow.
"""
from __future__ import annotations

import numpy as np


def _wide(x) -> np.ndarray:
    x = np.asarray(x)
    return x.astype(np.complex128 if x.dtype.kind == "c" else np.float64)


def column_phases(actual, expected) -> np.ndarray:
    """The unit factors that turn each column of ``actual`` (``(..., m, k)``) towards the
    same column of ``expected``: ``c / |c|`` with ``c = <actual[:, j], expected[:, j]>``
    (a sign for real arrays); 1 where ``c`` is zero or not finite.

    Returns:
      An array of shape ``(..., 1, k)`` (multiply ``actual`` by it).

    Example:
      >>> column_phases(np.array([[-1.0, 0.0], [0.0, 2.0]]), np.eye(2))
      array([[-1.,  1.]])
    """
    a, e = _wide(actual), _wide(expected)
    c = np.sum(np.conj(a) * e, axis=-2, keepdims=True)
    size = np.abs(c)
    good = np.isfinite(c) & (size > 0)
    return np.where(good, c / np.where(good, size, 1), 1)


def align_columns(actual, expected) -> np.ndarray:
    """``actual``'s columns times :func:`column_phases` (in float64 / complex128).

    Example:
      >>> align_columns(np.array([[-1.0], [0.0]]), np.array([[1.0], [0.0]]))
      array([[1.],
             [0.]])
    """
    return _wide(actual) * column_phases(actual, expected)


def align_subspace(actual, expected) -> np.ndarray:
    """``actual @ w`` for the unitary ``w`` closest to mapping ``actual``'s columns
    (orthonormal, ``(..., m, k)``) onto ``expected``'s: the polar factor of
    ``actual^H expected``. Another basis of the same column space comes out equal to
    ``expected``; a basis of another space does not.

    Example:
      >>> align_subspace(np.array([[0.0, 1.0], [1.0, 0.0]]), np.eye(2))
      array([[1., 0.],
             [0., 1.]])
    """
    a, e = _wide(actual), _wide(expected)
    if a.shape[-1] == 0 or a.shape[-2] == 0 or not (np.all(np.isfinite(a)) and np.all(np.isfinite(e))):
        return a
    u, _, vh = np.linalg.svd(np.conj(np.swapaxes(a, -1, -2)) @ e)
    return a @ (u @ vh)


def _paired(actual_cols, expected_cols, actual_rows, k: int):
    """Columns ``:k`` of ``actual_cols`` aligned to ``expected_cols``, rows ``:k`` of
    ``actual_rows`` moved by the conjugate phases (they share them), the columns beyond ``k``
    aligned as a subspace; returns ``(cols, rows)`` (float64 / complex128)."""
    cols, rows = _wide(actual_cols).copy(), _wide(actual_rows).copy()
    p = column_phases(cols[..., :k], expected_cols[..., :k])
    cols[..., :k] = cols[..., :k] * p
    rows[..., :k, :] = rows[..., :k, :] * np.swapaxes(np.conj(p), -1, -2)
    if cols.shape[-1] > k:
        cols[..., k:] = align_subspace(cols[..., k:], expected_cols[..., k:])
    return cols, rows


def eigh_gauge(actual: list, expected: list) -> list:
    """``eigh``'s ``[v, w]``: ``v``'s columns in the expected phases."""
    v, w = actual
    return [align_columns(v, expected[0]), w]


def eig_gauge(actual: list, expected: list) -> list:
    """``eig``'s ``[w, vl?, vr?]``: each eigenvector matrix's columns in the expected phases
    (left and right vectors have phases of their own)."""
    return [actual[0]] + [align_columns(v, e) for v, e in zip(actual[1:], expected[1:])]


def svd_gauge(actual: list, expected: list) -> list:
    """``svd``'s ``[s, u, vh]``: column ``k`` of ``u`` in the expected phase and row ``k`` of
    ``vh`` moved by the same factor (conjugated), so that they stay one decomposition; the
    columns of ``u`` and rows of ``vh`` beyond ``min(m, n)`` aligned as subspaces. ``[s]``
    (``compute_uv=False``) as it is."""
    if len(actual) == 1:
        return list(actual)
    s, u, vh = actual
    k = np.shape(s)[-1]
    u, vh = _paired(u, expected[1], vh, k)
    if vh.shape[-2] > k:  # rows of a full vh beyond k: the columns of vh^H as a subspace
        vh_rows = np.conj(np.swapaxes(vh[..., k:, :], -1, -2))
        want = np.conj(np.swapaxes(_wide(expected[2])[..., k:, :], -1, -2))
        vh[..., k:, :] = np.conj(np.swapaxes(align_subspace(vh_rows, want), -1, -2))
    return [s, u, vh]


def qr_gauge(actual: list, expected: list) -> list:
    """``qr``'s ``[q, r]``: column ``k`` of ``q`` in the expected phase and row ``k`` of ``r``
    moved by the same factor (conjugated), so that ``q @ r`` is unchanged; the columns of a
    full ``q`` beyond ``min(m, n)`` aligned as a subspace."""
    q, r = actual
    k = min(np.shape(r)[-2:])
    q, r = _paired(q, expected[0], r, k)
    return [q, r]
