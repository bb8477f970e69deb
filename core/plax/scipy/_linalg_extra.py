"""More of ``jax.scipy.linalg``: the special matrices (circulant, toeplitz, hankel, pascal, ...),
``cholesky``, ``polar``, ``expm_frechet``, ``eigh_tridiagonal`` and ``qr_multiply``.

Special matrices are built with plax.numpy (gathers of their defining vectors), so they trace,
batch and differentiate in those vectors; sizes given as integers are static.
"""
from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

Array = Any
ArrayLike = Any

__all__ = ["cholesky", "circulant", "companion", "convolution_matrix", "dft",
           "eigh_tridiagonal", "expm_frechet", "fiedler", "fiedler_companion", "hadamard",
           "hankel", "helmert", "hilbert", "invhilbert", "invpascal", "leslie", "pascal",
           "polar", "qr_multiply", "toeplitz", "hessenberg", "sqrtm", "funm",
           "solve_sylvester", "schur", "rsf2csf"]


def _jnp():
    import plax.numpy as jnp
    return jnp


def _float(dtype=None):
    jnp = _jnp()
    return jnp.result_type(float) if dtype is None else jnp.dtype(dtype)


def cholesky(a: ArrayLike, lower: bool = False, overwrite_a: bool = False,
             check_finite: bool = True) -> Array:
    """The Cholesky factor of a Hermitian positive-definite matrix (stacks too).

    Args:
      a: ``(..., n, n)``.
      lower: return ``L`` with ``a = L L^H`` (else the upper ``U`` with ``a = U^H U``, SciPy's
        default).
      overwrite_a, check_finite: ignored (as in JAX).

    Returns:
      The triangular factor (NaN where ``a`` is not positive definite).

    Example:
      >>> from plax.scipy.linalg import cholesky
      >>> cholesky(jnp.array([[4.0, 2.0], [2.0, 3.0]]))
      Array([[2.       , 1.       ],
             [0.       , 1.4142135]], dtype=float32)
    """
    jnp = _jnp()
    low = jnp.linalg.cholesky(jnp.asarray(a))
    return low if lower else jnp.conj(jnp.swapaxes(low, -1, -2))


def _toeplitz_index(m: int, n: int) -> np.ndarray:
    """``[i, j] -> i - j`` offsets, the index pattern of Toeplitz-like matrices."""
    return np.arange(m)[:, None] - np.arange(n)[None, :]


def toeplitz(c: ArrayLike, r: Optional[ArrayLike] = None) -> Array:
    """The Toeplitz matrix with first column ``c`` and first row ``r`` (``r[0]`` ignored).

    Args:
      c: first column, ``(..., m)`` (leading axes batch, as in JAX).
      r: first row ``(..., n)``; default ``conj(c)`` (a Hermitian matrix).

    Returns:
      ``(..., m, n)`` with ``T[i, j] = c[i - j]`` for ``i >= j`` and ``r[j - i]`` above.

    Example:
      >>> from plax.scipy.linalg import toeplitz
      >>> toeplitz(jnp.array([1, 2, 3]), jnp.array([1, 4, 5]))
      Array([[1, 4, 5],
             [2, 1, 4],
             [3, 2, 1]], dtype=int32)
    """
    jnp = _jnp()
    c = jnp.asarray(c)
    r = jnp.conj(c) if r is None else jnp.asarray(r)
    dt = jnp.promote_types(c.dtype, r.dtype)
    c, r = c.astype(dt), r.astype(dt)
    m, n = c.shape[-1], r.shape[-1]
    batch = np.broadcast_shapes(c.shape[:-1], r.shape[:-1])
    c = jnp.broadcast_to(c, batch + (m,))
    r = jnp.broadcast_to(r, batch + (n,))
    # one vector: reversed row (without its first entry) then the column, indexed by i - j
    vals = jnp.concatenate([jnp.flip(r[..., 1:], -1), c], axis=-1)
    idx = _toeplitz_index(m, n) + (n - 1)
    return vals[..., idx]


def hankel(c: ArrayLike, r: Optional[ArrayLike] = None) -> Array:
    """The Hankel matrix with first column ``c`` and last row ``r`` (``r[0]`` ignored).

    Args:
      c: first column ``(m,)``.
      r: last row ``(n,)``; default zeros (of ``c``'s length).

    Returns:
      ``(m, n)`` with ``H[i, j] = c[i + j]`` for ``i + j < m`` and ``r[i + j - m + 1]`` beyond.

    Example:
      >>> from plax.scipy.linalg import hankel
      >>> hankel(jnp.array([1, 2, 3]), jnp.array([3, 4, 5, 6]))
      Array([[1, 2, 3, 4],
             [2, 3, 4, 5],
             [3, 4, 5, 6]], dtype=int32)
    """
    jnp = _jnp()
    c = jnp.ravel(jnp.asarray(c))
    r = jnp.zeros_like(c) if r is None else jnp.ravel(jnp.asarray(r))
    dt = jnp.promote_types(c.dtype, r.dtype)
    vals = jnp.concatenate([c.astype(dt), r[1:].astype(dt)])
    m, n = c.shape[0], r.shape[0]
    return vals[np.arange(m)[:, None] + np.arange(n)[None, :]]


def circulant(c: ArrayLike) -> Array:
    """The circulant matrix with first column ``c``: ``C[i, j] = c[(i - j) mod n]``.

    Args:
      c: ``(..., n)`` (leading axes batch, as in JAX).

    Example:
      >>> from plax.scipy.linalg import circulant
      >>> circulant(jnp.array([1, 2, 3]))
      Array([[1, 3, 2],
             [2, 1, 3],
             [3, 2, 1]], dtype=int32)
    """
    jnp = _jnp()
    c = jnp.asarray(c)
    n = c.shape[-1]
    return c[..., _toeplitz_index(n, n) % max(n, 1)]


def companion(a: ArrayLike) -> Array:
    """The companion matrix of the polynomial with coefficients ``a`` (highest degree first):
    first row ``-a[1:] / a[0]``, ones on the subdiagonal.

    Raises:
      ValueError: for fewer than two coefficients.

    Example:
      >>> from plax.scipy.linalg import companion
      >>> companion(jnp.array([1.0, 2.0, 3.0]))
      Array([[-2., -3.],
             [ 1.,  0.]], dtype=float32)
    """
    jnp = _jnp()
    a = jnp.asarray(a)
    if a.ndim != 1 or a.shape[0] < 2:
        raise ValueError(f"companion: expected at least two coefficients in a 1-D array, got "
                         f"shape {a.shape}")
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        a = a.astype(_float())
    n = a.shape[0] - 1
    first = -a[1:] / a[0]
    sub = jnp.eye(n - 1, n, dtype=a.dtype) if n > 1 else jnp.zeros((0, n), a.dtype)
    return jnp.concatenate([first[None, :], sub], axis=0)


def fiedler(a: ArrayLike) -> Array:
    """The symmetric Fiedler matrix ``F[i, j] = |a[i] - a[j]|``.

    Example:
      >>> from plax.scipy.linalg import fiedler
      >>> fiedler(jnp.array([1, 4, 2]))
      Array([[0, 3, 1],
             [3, 0, 2],
             [1, 2, 0]], dtype=int32)
    """
    jnp = _jnp()
    a = jnp.asarray(a)
    return jnp.abs(a[..., :, None] - a[..., None, :])


def fiedler_companion(a: ArrayLike) -> Array:
    """Fiedler's pentadiagonal companion matrix of the polynomial with coefficients ``a``
    (highest first, normalised by ``a[0]``); its eigenvalues are the polynomial's roots.

    Example:
      >>> from plax.scipy.linalg import fiedler_companion
      >>> fiedler_companion(jnp.array([1.0, -6.0, 11.0, -6.0]))
      Array([[  6., -11.,   1.],
             [  1.,   0.,   0.],
             [  0.,   6.,   0.]], dtype=float32)
    """
    jnp = _jnp()
    a = jnp.asarray(a)
    if a.ndim != 1:
        raise ValueError(f"fiedler_companion: expected a 1-D array, got shape {a.shape}")
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        a = a.astype(_float())
    if a.shape[0] < 3:
        return (-a[1:] / a[0]).reshape((a.shape[0] - 1,) * 2) if a.shape[0] == 2 \
            else jnp.zeros((0, 0), a.dtype)
    a = a / a[0]
    return _fiedler_from_blocks(a, a.shape[0] - 1)


def _fiedler_from_blocks(a: Array, n: int) -> Array:
    """Fiedler's factorisation of a companion matrix into elementary blocks, ``F = B_odd B_even``
    with ``B_odd`` the product of the blocks ``M_k`` of odd ``k`` and ``B_even`` of the even
    ones (blocks of one parity commute), ``M_k`` acting on rows/cols ``(k-1, k)`` as
    ``[[-a_k, 1], [1, 0]]`` and ``M_n = diag(1, ..., 1, -a_n)``."""
    jnp = _jnp()
    dt = a.dtype
    odd = jnp.eye(n, dtype=dt)
    even = jnp.eye(n, dtype=dt)
    for k in range(1, n):
        block = (jnp.eye(n, dtype=dt).at[k - 1, k - 1].set(-a[k]).at[k - 1, k].set(1)
                 .at[k, k - 1].set(1).at[k, k].set(0))
        if k % 2:
            odd = odd @ block
        else:
            even = even @ block
    last = jnp.eye(n, dtype=dt).at[n - 1, n - 1].set(-a[n])
    if n % 2:
        odd = odd @ last
    else:
        even = even @ last
    return odd @ even


def leslie(f: ArrayLike, s: ArrayLike) -> Array:
    """The Leslie matrix: fecundities ``f`` (``(n,)``) on the first row, survival rates ``s``
    (``(n - 1,)``) on the subdiagonal.

    Raises:
      ValueError: for incompatible lengths.

    Example:
      >>> from plax.scipy.linalg import leslie
      >>> leslie(jnp.array([1.0, 2.0, 3.0]), jnp.array([0.5, 0.6]))
      Array([[1. , 2. , 3. ],
             [0.5, 0. , 0. ],
             [0. , 0.6, 0. ]], dtype=float32)
    """
    jnp = _jnp()
    f, s = jnp.asarray(f), jnp.asarray(s)
    if f.shape[-1] != s.shape[-1] + 1 or f.shape[-1] < 2:
        raise ValueError(f"leslie: f must have one more element than s (and at least two), "
                         f"got {f.shape} and {s.shape}")
    dt = jnp.promote_types(jnp.promote_types(f.dtype, s.dtype), _float())
    n = f.shape[-1]
    below = jnp.concatenate([s[..., :, None].astype(dt) * jnp.eye(n - 1, dtype=dt),
                             jnp.zeros(s.shape[:-1] + (n - 1, 1), dt)], axis=-1)
    return jnp.concatenate([f[..., None, :].astype(dt), below], axis=-2)


def convolution_matrix(a: ArrayLike, n: int, mode: str = "full") -> Array:
    """The matrix ``A`` with ``A @ v == convolve(a, v, mode)`` for ``v`` of length ``n``.

    Args:
      a: the kernel, ``(m,)``.
      n: the length of the vectors convolved.
      mode: ``"full"``, ``"valid"`` or ``"same"``.

    Raises:
      ValueError: for ``n <= 0``, an empty ``a`` or an unknown mode.

    Example:
      >>> from plax.scipy.linalg import convolution_matrix
      >>> convolution_matrix(jnp.array([1.0, 2.0]), 3, mode="same")
      Array([[1., 0., 0.],
             [2., 1., 0.],
             [0., 2., 1.]], dtype=float32)
    """
    jnp = _jnp()
    a = jnp.asarray(a)
    if n <= 0:
        raise ValueError(f"convolution_matrix: n must be positive, got {n}")
    if a.ndim != 1 or a.shape[0] == 0:
        raise ValueError(f"convolution_matrix: a must be a nonempty 1-D array, got {a.shape}")
    m = a.shape[0]
    full = toeplitz(jnp.concatenate([a, jnp.zeros((n - 1,), a.dtype)]),
                    jnp.zeros((n,), a.dtype))
    if mode == "full":
        return full
    if mode == "same":
        start = (min(n, m) - 1) // 2
        return full[start:start + max(n, m)]
    if mode == "valid":
        return full[min(n, m) - 1:max(n, m)]
    raise ValueError(f"convolution_matrix: mode must be 'full', 'valid' or 'same', got {mode!r}")


def hadamard(n: int, dtype: Any = int) -> Array:
    """The Sylvester-construction Hadamard matrix of order ``n`` (a power of two).

    Raises:
      ValueError: when ``n`` is not a power of two.

    Example:
      >>> from plax.scipy.linalg import hadamard
      >>> hadamard(2)
      Array([[ 1,  1],
             [ 1, -1]], dtype=int32)
    """
    jnp = _jnp()
    n = int(n)
    if n < 1 or n & (n - 1):
        raise ValueError(f"hadamard: n must be a positive power of 2, got {n}")
    h = np.ones((1, 1), dtype=np.int64)
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return jnp.asarray(h, dtype=jnp.dtype(dtype) if dtype is not int else None)


def helmert(n: int, full: bool = False) -> Array:
    """The Helmert matrix of order ``n``: orthonormal rows, the first ``1/sqrt(n)`` (dropped
    unless ``full``), row ``k`` ``(1, ..., 1, -k, 0, ...) / sqrt(k (k + 1))``.

    Example:
      >>> from plax.scipy.linalg import helmert
      >>> helmert(3).shape
      (2, 3)
    """
    jnp = _jnp()
    k = np.arange(1, n, dtype=np.float64)[:, None]
    j = np.arange(n)[None, :]
    rows = np.where(j < k, 1.0, np.where(j == k, -k, 0.0)) / np.sqrt(k * (k + 1))
    if full:
        rows = np.concatenate([np.full((1, n), 1 / math.sqrt(n)), rows])
    return jnp.asarray(rows, dtype=_float())


def hilbert(n: int) -> Array:
    """The Hilbert matrix ``H[i, j] = 1 / (i + j + 1)``.

    Example:
      >>> from plax.scipy.linalg import hilbert
      >>> hilbert(2)
      Array([[1.        , 0.5       ],
             [0.5       , 0.33333334]], dtype=float32)
    """
    i = np.arange(n)
    return _jnp().asarray(1.0 / (i[:, None] + i[None, :] + 1), dtype=_float())


def invhilbert(n: int) -> Array:
    """The exact inverse of the Hilbert matrix of order ``n`` (integer entries, from the
    closed form with binomial coefficients, computed exactly on the host).

    Example:
      >>> from plax.scipy.linalg import invhilbert
      >>> invhilbert(2)
      Array([[ 4., -6.],
             [-6., 12.]], dtype=float32)
    """
    out = np.empty((n, n), dtype=object)
    for i in range(n):
        for j in range(n):
            s = -1 if (i + j) % 2 else 1
            out[i, j] = s * (i + j + 1) * math.comb(n + i, n - j - 1) \
                * math.comb(n + j, n - i - 1) * math.comb(i + j, i) ** 2
    return _jnp().asarray(out.astype(np.float64), dtype=_float())


def _pascal_np(n: int, kind: str) -> np.ndarray:
    lower = np.array([[math.comb(i, j) for j in range(n)] for i in range(n)], dtype=np.float64)
    if kind == "lower":
        return lower
    if kind == "upper":
        return lower.T
    if kind == "symmetric":
        return np.array([[math.comb(i + j, i) for j in range(n)] for i in range(n)],
                        dtype=np.float64)
    raise ValueError(f"kind must be 'symmetric', 'lower' or 'upper', got {kind!r}")


def pascal(n: int, kind: Optional[str] = None) -> Array:
    """The Pascal matrix of binomial coefficients: ``"symmetric"`` (default,
    ``C(i + j, i)``), ``"lower"`` (``C(i, j)``) or ``"upper"``.

    Example:
      >>> from plax.scipy.linalg import pascal
      >>> pascal(3)
      Array([[1., 1., 1.],
             [1., 2., 3.],
             [1., 3., 6.]], dtype=float32)
    """
    return _jnp().asarray(_pascal_np(n, kind or "symmetric"), dtype=_float())


def invpascal(n: int, kind: Optional[str] = None) -> Array:
    """The exact inverse of :func:`pascal` ``(n, kind)``.

    Example:
      >>> from plax.scipy.linalg import invpascal
      >>> invpascal(3, kind="lower")
      Array([[ 1.,  0.,  0.],
             [-1.,  1.,  0.],
             [ 1., -2.,  1.]], dtype=float32)
    """
    kind = kind or "symmetric"
    # an integer sign (not (-1) ** (i - j), a float -1.0 above the diagonal) keeps the zeros +0
    inv_lower = np.array([[(-1) ** ((i - j) % 2) * math.comb(i, j) for j in range(n)]
                          for i in range(n)], dtype=np.float64)
    if kind == "lower":
        out = inv_lower
    elif kind == "upper":
        out = inv_lower.T
    elif kind == "symmetric":   # S = L L^T, so S^-1 = L^-T L^-1
        out = inv_lower.T @ inv_lower
    else:
        raise ValueError(f"kind must be 'symmetric', 'lower' or 'upper', got {kind!r}")
    return _jnp().asarray(out, dtype=_float())


def dft(n: int, scale: Optional[str] = None, *, dtype: Any = None) -> Array:
    """The discrete Fourier transform matrix ``W[j, k] = exp(-2 pi i j k / n)``.

    Args:
      n: the size.
      scale: None, ``"n"`` (divide by ``n``) or ``"sqrtn"`` (divide by ``sqrt(n)``).
      dtype: a complex dtype (complex64 by default, complex128 with x64).

    Example:
      >>> from plax.scipy.linalg import dft
      >>> w = dft(2)
      >>> w.dtype, jnp.round(w.real)
      (dtype('complex64'), Array([[ 1.,  1.],
             [ 1., -1.]], dtype=float32))
    """
    jnp = _jnp()
    jk = np.outer(np.arange(n), np.arange(n)) % max(n, 1)
    w = np.exp(-2j * np.pi * jk / max(n, 1))
    if scale == "n":
        w = w / n
    elif scale == "sqrtn":
        w = w / math.sqrt(n)
    elif scale is not None:
        raise ValueError(f"dft: scale must be None, 'n' or 'sqrtn', got {scale!r}")
    return jnp.asarray(w, dtype=jnp.result_type(complex) if dtype is None else dtype)


def polar(a: ArrayLike, side: str = "right", *, method: str = "svd", eps: Optional[float] = None,
          max_iterations: Optional[int] = None) -> tuple:
    """The polar decomposition ``a = u p`` (``side="right"``) or ``a = p u`` (``"left"``):
    ``u`` has orthonormal columns (rows), ``p`` is Hermitian positive semi-definite.

    Computed from the SVD ``a = W S V^H``: ``u = W V^H``, ``p = V S V^H`` (or ``W S W^H``).
    JAX's default ``method="qdwh"`` iterates to the same factors; both names are accepted.

    Example:
      >>> from plax.scipy.linalg import polar
      >>> u, p = polar(jnp.array([[2.0, 0.0], [0.0, -3.0]]))
      >>> u, p
      (Array([[ 1.,  0.],
             [ 0., -1.]], dtype=float32), Array([[2., 0.],
             [0., 3.]], dtype=float32))
    """
    jnp = _jnp()
    if side not in ("right", "left"):
        raise ValueError(f"polar: side must be 'right' or 'left', got {side!r}")
    if method not in ("svd", "qdwh"):
        raise ValueError(f"polar: method must be 'svd' or 'qdwh', got {method!r}")
    a = jnp.asarray(a)
    if a.ndim != 2:
        raise ValueError(f"polar: a must be a matrix, got shape {a.shape}")
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        a = a.astype(_float())
    w, s, vh = jnp.linalg.svd(a, full_matrices=False)
    u = w @ vh
    s = s.astype(a.dtype)
    if side == "right":
        p = (jnp.conj(vh).T * s) @ vh
    else:
        p = (w * s) @ jnp.conj(w).T
    return u, p


def expm_frechet(A: ArrayLike, E: ArrayLike, *, method: Optional[str] = None,
                 compute_expm: bool = True):
    """The Fréchet derivative of the matrix exponential at ``A`` in direction ``E``:
    ``L(A, E) = d/dt expm(A + t E)`` at ``t = 0``.

    Computed from the block identity ``expm([[A, E], [0, A]]) = [[expm(A), L(A, E)],
    [0, expm(A)]]`` (Higham, *Functions of Matrices*, 3.2).

    Returns:
      ``(expm(A), L)`` with ``compute_expm``, else ``L``.

    Example:
      >>> from plax.scipy.linalg import expm_frechet
      >>> expm_frechet(jnp.zeros((2, 2)), jnp.eye(2), compute_expm=False)
      Array([[1., 0.],
             [0., 1.]], dtype=float32)
    """
    jnp = _jnp()
    from plax.scipy.linalg import expm
    A, E = jnp.asarray(A), jnp.asarray(E)
    if A.shape != E.shape or A.ndim < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"expm_frechet: A and E must be square matrices of one shape, got "
                         f"{A.shape} and {E.shape}")
    if method not in (None, "SPS", "blockEnlarge"):
        raise ValueError(f"expm_frechet: unknown method {method!r}")
    dt = jnp.promote_types(jnp.promote_types(A.dtype, E.dtype), _float())
    A, E = A.astype(dt), E.astype(dt)
    n = A.shape[-1]
    zero = jnp.zeros_like(A)
    big = jnp.concatenate([jnp.concatenate([A, E], -1), jnp.concatenate([zero, A], -1)], -2)
    e = expm(big)
    expm_a, frechet = e[..., :n, :n], e[..., :n, n:]
    return (expm_a, frechet) if compute_expm else frechet


def eigh_tridiagonal(d: ArrayLike, e: ArrayLike, *, eigvals_only: bool = False,
                     select: str = "a", select_range: Optional[tuple] = None,
                     tol: Optional[float] = None, key: Any = None):
    """Eigenvalues (and vectors) of the symmetric tridiagonal matrix with diagonal ``d`` and
    off-diagonal ``e``, in ascending order.

    Args:
      d: ``(n,)`` diagonal.
      e: ``(n - 1,)`` off-diagonal.
      eigvals_only: return only the eigenvalues.
      select: ``"a"`` (all) or ``"i"`` (indices ``select_range = (lo, hi)``, inclusive).
      select_range, tol, key: as in JAX (``tol`` and ``key`` are unused here).

    Returns:
      The eigenvalues, or ``(eigenvalues, eigenvectors)``.

    Example:
      >>> from plax.scipy.linalg import eigh_tridiagonal
      >>> eigh_tridiagonal(jnp.array([2.0, 2.0]), jnp.array([1.0]), eigvals_only=True)
      Array([1., 3.], dtype=float32)
    """
    jnp = _jnp()
    d, e = jnp.asarray(d), jnp.asarray(e)
    if d.ndim != 1 or e.shape != (max(d.shape[0] - 1, 0),):
        raise ValueError(f"eigh_tridiagonal: d must be (n,) and e (n - 1,), got {d.shape} "
                         f"and {e.shape}")
    dt = jnp.promote_types(jnp.promote_types(d.dtype, e.dtype), _float())
    d, e = d.astype(dt), e.astype(dt)
    t = jnp.diag(d) + jnp.diag(e, 1) + jnp.diag(jnp.conj(e), -1)
    w, v = jnp.linalg.eigh(t)
    if select == "i":
        lo, hi = (int(b) for b in select_range)
        w, v = w[lo:hi + 1], v[:, lo:hi + 1]
    elif select != "a":
        raise NotImplementedError(f"eigh_tridiagonal: select={select!r} is not supported "
                                  "(its output size depends on the data); use 'a' or 'i'")
    return w if eigvals_only else (w, v)


def qr_multiply(a: ArrayLike, c: ArrayLike, mode: str = "right", pivoting: bool = False,
                conjugate: bool = False, overwrite_a: bool = False,
                overwrite_c: bool = False):
    """``Q @ c`` (``mode="left"``) or ``c @ Q`` (``"right"``) for the economic QR factors of
    ``a``, together with ``R`` (SciPy's ``qr_multiply``).

    Args:
      a: ``(m, n)``.
      c: a vector or matrix shaped for the product.
      mode: ``"left"`` or ``"right"``.
      conjugate: use ``conj(Q)``.
      pivoting: column pivoting is not supported (as in JAX).

    Returns:
      ``(product, R)``.

    Example:
      >>> from plax.scipy.linalg import qr_multiply
      >>> cq, r = qr_multiply(jnp.eye(2), jnp.array([[1.0, 2.0]]))
      >>> cq.shape, r.shape
      ((1, 2), (2, 2))
    """
    jnp = _jnp()
    if pivoting:
        raise NotImplementedError("qr_multiply: pivoting=True is not supported")
    if mode not in ("left", "right"):
        raise ValueError(f"qr_multiply: mode must be 'left' or 'right', got {mode!r}")
    a, c = jnp.asarray(a), jnp.asarray(c)
    q, r = jnp.linalg.qr(a, mode="reduced")
    if conjugate:
        q = jnp.conj(q)
    vector = c.ndim == 1
    if mode == "left":
        out = q @ (c[:, None] if vector else c)
    else:
        out = (c[None, :] if vector else c) @ q
    return (out.ravel() if vector else out), r


# ------------------------------------------------------------------ matrix functions

def hessenberg(a: ArrayLike, *, calc_q: bool = False, overwrite_a: bool = False,
               check_finite: bool = True):
    """The upper Hessenberg form ``H = Q^H a Q`` of a square matrix, by Householder
    reflections (LAPACK's ``gehrd`` and ``orghr``, as ``lax.linalg.hessenberg`` computes them).

    Args:
      a: ``(n, n)``.
      calc_q: also return the unitary ``Q``.
      overwrite_a, check_finite: ignored (as in JAX).

    Returns:
      ``H`` (zeros below the first subdiagonal), or ``(H, Q)``.

    Example:
      >>> from plax.scipy.linalg import hessenberg
      >>> h = hessenberg(jnp.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]]))
      >>> float(h[2, 0])
      0.0
    """
    from plax.lax.linalg_householder import hessenberg as reduce, hessenberg_q
    jnp = _jnp()
    a = jnp.asarray(a)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"hessenberg: expected a square matrix, got shape {a.shape}")
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        a = a.astype(_float())
    packed, taus = reduce(a)
    h = jnp.triu(packed, -1)
    return (h, hessenberg_q(packed, taus)) if calc_q else h


def _eig_function(a: Array, f, name: str) -> Array:
    """``f(a) = V f(diag(w)) V^-1`` from the eigendecomposition ``a = V diag(w) V^-1``."""
    jnp = _jnp()
    a = jnp.asarray(a)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{name}: expected a square matrix, got shape {a.shape}")
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        a = a.astype(_float())
    w, v = jnp.linalg.eig(a)
    return jnp.linalg.solve(v.T, (v * f(w)).T).T


def sqrtm(A: ArrayLike, blocksize: int = 1) -> Array:
    """The principal matrix square root ``X`` with ``X @ X == A``, as a complex array (as
    JAX's).

    Computed from the eigendecomposition (``V sqrt(w) V^-1``): exact for diagonalizable
    matrices, with accuracy decreasing as the eigenvector matrix's condition number grows
    (JAX and SciPy use the Schur form, which plax does not have yet).

    Example:
      >>> from plax.scipy.linalg import sqrtm
      >>> jnp.round(sqrtm(jnp.array([[4.0, 0.0], [0.0, 9.0]])).real, 4)
      Array([[2., 0.],
             [0., 3.]], dtype=float32)
    """
    return _eig_function(A, _jnp().sqrt, "sqrtm")


def funm(A: ArrayLike, func, disp: bool = True):
    """The matrix function ``func(A)`` for an elementwise (scalar) ``func``, as a complex array
    (as JAX's), from the eigendecomposition ``V func(w) V^-1`` (diagonalizable ``A``; see
    :func:`sqrtm` on accuracy).

    Returns:
      ``F`` with ``disp``, else ``(F, None)`` (no error estimate).

    Example:
      >>> from plax.scipy.linalg import funm
      >>> jnp.round(funm(jnp.array([[1.0, 0.0], [0.0, 2.0]]), jnp.exp).real, 4)
      Array([[2.7183, 0.    ],
             [0.    , 7.3891]], dtype=float32)
    """
    out = _eig_function(A, func, "funm")
    return out if disp else (out, None)


def solve_sylvester(A: ArrayLike, B: ArrayLike, C: ArrayLike, *, method: str = "eigen",
                    tol: float = 1e-8) -> Array:
    """Solves the Sylvester equation ``A X + X B = C``.

    With ``A = U diag(a) U^-1`` and ``B = W diag(b) W^-1``, ``X = U Y W^-1`` where
    ``Y_ij = (U^-1 C W)_ij / (a_i + b_j)`` (diagonalizable ``A`` and ``B``; JAX's default
    ``method="schur"`` gives the same solution there and is accepted).

    Args:
      A: ``(m, m)``; B: ``(n, n)``; C: ``(m, n)``.
      method: ``"eigen"`` or ``"schur"`` (both computed as above).
      tol: ignored.

    Returns:
      ``X`` (real when all inputs are real).

    Example:
      >>> from plax.scipy.linalg import solve_sylvester
      >>> solve_sylvester(jnp.eye(2), 2 * jnp.eye(2), 3 * jnp.ones((2, 2)))
      Array([[1., 1.],
             [1., 1.]], dtype=float32)
    """
    jnp = _jnp()
    if method not in ("eigen", "schur"):
        raise ValueError(f"solve_sylvester: unknown method {method!r}")
    A, B, C = (jnp.asarray(v) for v in (A, B, C))
    if A.shape[0] != A.shape[-1] or B.shape[0] != B.shape[-1] or \
            C.shape != (A.shape[0], B.shape[0]):
        raise ValueError(f"solve_sylvester: shapes {A.shape}, {B.shape}, {C.shape} do not fit "
                         "A X + X B = C")
    real = not any(jnp.issubdtype(v.dtype, jnp.complexfloating) for v in (A, B, C))
    dt = jnp.result_type(A, B, C, float)
    wa, ua = jnp.linalg.eig(A.astype(dt))
    wb, ub = jnp.linalg.eig(B.astype(dt))
    y = jnp.linalg.solve(ua, C.astype(ua.dtype) @ ub)
    y = y / (wa[:, None] + wb[None, :])
    x = ua @ jnp.linalg.solve(ub.T, y.T).T
    return jnp.real(x).astype(dt) if real else x


def schur(a: ArrayLike, output: str = "real") -> tuple:
    """The Schur decomposition ``a = Z T Z^H``: ``Z`` unitary, ``T`` upper triangular
    (``output="complex"``) or, for real ``a`` with ``output="real"``, quasi upper triangular
    with 2x2 blocks for complex conjugate eigenvalue pairs.

    Computed from the eigendecomposition: the eigenvectors (for ``"real"``, the real and
    imaginary parts of each conjugate pair's vector), ordered by eigenvalue, are
    orthonormalised by QR, so each leading block of ``Z`` spans an invariant subspace. This
    assumes ``a`` diagonalizable, loses accuracy as its eigenvector matrix becomes
    ill-conditioned, orders eigenvalues by real then imaginary part (LAPACK's order differs;
    Schur forms are not unique) and leaves 2x2 blocks unstandardised.

    Example:
      >>> from plax.scipy.linalg import schur
      >>> t, z = schur(jnp.array([[1.0, 2.0], [0.0, 3.0]]))
      >>> bool(jnp.allclose(z @ t @ z.T, jnp.array([[1.0, 2.0], [0.0, 3.0]]), atol=1e-5))
      True
    """
    jnp = _jnp()
    if output not in ("real", "complex"):
        raise ValueError(f"schur: output must be 'real' or 'complex', got {output!r}")
    a = jnp.asarray(a)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"schur: expected a square matrix, got shape {a.shape}")
    if not jnp.issubdtype(a.dtype, jnp.inexact):
        a = a.astype(_float())
    from plax.lax.linalg_composites import schur_matrix
    return schur_matrix(a, output)


def rsf2csf(T: ArrayLike, Z: ArrayLike, check_finite: bool = True) -> tuple:
    """Converts a real Schur form ``(T, Z)`` (``A = Z T Z^T``) to a complex one
    ``(T2, Z2)`` with ``T2`` upper triangular and ``A = Z2 T2 Z2^H``, by a complex Schur
    decomposition of ``T`` (see :func:`schur` on its method).

    Example:
      >>> from plax.scipy.linalg import rsf2csf
      >>> t2, z2 = rsf2csf(jnp.array([[0.0, -1.0], [1.0, 0.0]]), jnp.eye(2))
      >>> jnp.round(jnp.abs(jnp.diag(t2)), 4)
      Array([1., 1.], dtype=float32)
    """
    jnp = _jnp()
    T, Z = jnp.asarray(T), jnp.asarray(Z)
    if T.ndim != 2 or T.shape[0] != T.shape[1] or Z.shape != T.shape:
        raise ValueError(f"rsf2csf: T and Z must be square matrices of one shape, got "
                         f"{T.shape} and {Z.shape}")
    t2, u = schur(T, output="complex")
    return t2, Z.astype(u.dtype) @ u
