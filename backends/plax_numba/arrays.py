"""Array helpers the whole-program kernels call (:mod:`plax_numba.wholegen`), compiled by
numba into the caller.

``dot_general`` inside a whole-program kernel is a batched product of C-contiguous
``(batch, m, k)`` and ``(batch, k, n)`` operands. Large float products go to BLAS
(``np.dot``, scipy's BLAS inside numba); small ones and integer ones run the loops below,
which sum each output element in ``k`` order (one multiply and one add per term, no fused
multiply-add, no reassociation; :func:`matvec_t` for matrix-vector products) except
:func:`dot_rows`, which keeps eight partial sums
(``k`` mod 8) so that LLVM can vectorise a matrix-vector product without fastmath. Either
order differs from BLAS's in the last bits: results are within ``k`` ulps of the exact
product's rounding, not bit-identical to the NumPy backend (documented in
docs/performance.md).
"""
from __future__ import annotations

import numpy as np
from numba import njit

_opts = dict(cache=True, nogil=True, error_model="numpy")

# Which products go to BLAS and which to the loops below: plax_numba.wholegen.BLAS_MIN (kept
# there: the planner must not import numba, which this module needs).


@njit(**_opts)
def dot_rows(a, b, out, zero):
    """``out[p, i] = sum_k a[p, i, k] * b[p, k, 0]`` (matrix-vector: ``n == 1``), with eight
    partial sums over ``k`` (lane ``k % 8``) combined pairwise at the end."""
    nb, m, k = a.shape
    k8 = k - k % 8
    for p in range(nb):
        for i in range(m):
            s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = zero
            for j in range(0, k8, 8):
                s0 += a[p, i, j] * b[p, j, 0]
                s1 += a[p, i, j + 1] * b[p, j + 1, 0]
                s2 += a[p, i, j + 2] * b[p, j + 2, 0]
                s3 += a[p, i, j + 3] * b[p, j + 3, 0]
                s4 += a[p, i, j + 4] * b[p, j + 4, 0]
                s5 += a[p, i, j + 5] * b[p, j + 5, 0]
                s6 += a[p, i, j + 6] * b[p, j + 6, 0]
                s7 += a[p, i, j + 7] * b[p, j + 7, 0]
            for j in range(k8, k):
                s0 += a[p, i, j] * b[p, j, 0]
            out[p, i, 0] = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    return out


@njit(**_opts)
def dot_loops(a, b, out, zero):
    """``out[p] = a[p] @ b[p]`` summing in ``k`` order, vectorised over ``n`` (each output
    element is its own chain of adds, so no reassociation is needed)."""
    nb, m, k = a.shape
    n = b.shape[2]
    for p in range(nb):
        for i in range(m):
            for c in range(n):
                out[p, i, c] = zero
            for j in range(k):
                x = a[p, i, j]
                for c in range(n):
                    out[p, i, c] += x * b[p, j, c]
    return out


@njit(**_opts, inline="always")
def matvec_t(wt, v, out, k, m):
    """``out[i] = sum_kk wt[kk, i] * v[kk]`` for ``i < m``, ``kk < k`` (``wt`` is the
    ``(k, m)`` transpose of the matrix; ``v`` any 1-D array; ``out`` 1-D C-contiguous).

    Each ``out[i]`` is summed in ``kk`` order from zero, one rounding per multiply and per
    add, as :func:`dot_loops` does, but the loops run "axpy" form: the inner loop runs over
    the output index ``i`` on contiguous rows of ``wt`` and carries no reduction, so LLVM
    vectorises it without fastmath; eight ``kk`` per pass keep each partial sum in a
    register across eight adds. Inlined into the caller (``k`` and ``m`` are literals there:
    the loops unroll)."""
    k8 = k - k % 8
    for i in range(m):
        out[i] = 0
    for kk in range(0, k8, 8):
        x0, x1, x2, x3 = v[kk], v[kk + 1], v[kk + 2], v[kk + 3]
        x4, x5, x6, x7 = v[kk + 4], v[kk + 5], v[kk + 6], v[kk + 7]
        w0, w1, w2, w3 = wt[kk], wt[kk + 1], wt[kk + 2], wt[kk + 3]
        w4, w5, w6, w7 = wt[kk + 4], wt[kk + 5], wt[kk + 6], wt[kk + 7]
        for i in range(m):
            out[i] = (((((((out[i] + w0[i] * x0) + w1[i] * x1) + w2[i] * x2) + w3[i] * x3)
                        + w4[i] * x4) + w5[i] * x5) + w6[i] * x6) + w7[i] * x7
    for kk in range(k8, k):
        x = v[kk]
        w = wt[kk]
        for i in range(m):
            out[i] = out[i] + w[i] * x
    return out


@njit(**_opts)
def dot_blas(a, b, out):
    """``out[p] = a[p] @ b[p]`` through BLAS (float and complex dtypes)."""
    for p in range(a.shape[0]):
        out[p] = np.dot(a[p], b[p])
    return out


@njit(**_opts)
def dot_blas_mv(a, b, out):
    """``out[p, :, 0] = a[p] @ b[p, :, 0]`` through BLAS's matrix-vector product."""
    m, k = a.shape[1], a.shape[2]
    for p in range(a.shape[0]):
        out[p].reshape(m)[:] = np.dot(a[p], b[p].reshape(k))
    return out


@njit(**_opts)
def dot_bool(a, b, out):
    """Boolean product: ``out[p, i, c] = any(a[p, i, :] & b[p, :, c])``."""
    nb, m, k = a.shape
    n = b.shape[2]
    for p in range(nb):
        for i in range(m):
            for c in range(n):
                acc = False
                for j in range(k):
                    if a[p, i, j] and b[p, j, c]:
                        acc = True
                        break
                out[p, i, c] = acc
    return out
