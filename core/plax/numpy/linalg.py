"""plax.numpy.linalg: NumPy's linear algebra, on the ``plax.lax.linalg`` primitives.

Every function works on the last two axes and broadcasts over leading (batch) axes.
Integer inputs become floats (float32, or float64 with x64). Singular matrices give
infs/NaNs (as in JAX), never exceptions. Gradients flow through the primitives' JVP rules.
"""
from __future__ import annotations

import operator
from typing import NamedTuple, Sequence

import numpy as np

from plax.core.trace import get_aval
from plax.lax import linalg as lax_linalg
from plax import dtypes
from plax.numpy.util import check_arraylike, to_dtype, to_inexact_dtype
from plax.transforms.jit import jit_when_traced

__all__ = ["cholesky", "solve", "inv", "det", "slogdet", "norm", "eigh", "eigvalsh", "eig",
           "eigvals", "lstsq", "svd",
           "svdvals", "qr", "matrix_power", "pinv", "matrix_rank", "multi_dot", "cond",
           "outer", "cross", "matmul", "tensordot", "vecdot", "diagonal", "trace", "matrix_norm",
           "vector_norm", "matrix_transpose", "tensorsolve", "tensorinv",
           "EighResult", "EigResult", "SVDResult", "QRResult", "SlogdetResult"]


class EighResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


class SVDResult(NamedTuple):
    U: object
    S: object
    Vh: object


class QRResult(NamedTuple):
    Q: object
    R: object


class SlogdetResult(NamedTuple):
    sign: object
    logabsdet: object


def _jnp():
    from plax import numpy as jnp
    return jnp


def _inexact(name: str, *args):
    """``args`` as arrays of their common inexact dtype (shapes untouched)."""
    check_arraylike(name, *args)
    dt, weak = dtypes.result_type(*args, return_weak_type_flag=True)
    dt = to_inexact_dtype(dt)
    return [to_dtype(a, dt, weak) for a in args]


def _matrix(name: str, a, square: bool = True):
    (a,) = _inexact(name, a)
    shape = get_aval(a).shape
    if len(shape) < 2 or (square and shape[-1] != shape[-2]):
        want = "[..., n, n]" if square else "[..., m, n]"
        raise ValueError(f"Argument to {name} must have shape {want}, got {shape}.")
    return a


def _H(x):
    jnp = _jnp()
    return jnp.conj(jnp.swapaxes(x, -1, -2))


def cholesky(a, *, upper: bool = False, symmetrize_input: bool = True):
    """Cholesky factor of Hermitian positive-definite matrices.

    Args:
      a: array of shape ``(..., n, n)``.
      upper: return the upper factor ``U`` (``a = U^H U``) instead of the lower ``L``
        (``a = L L^H``).
      symmetrize_input: use ``(a + a^H) / 2``.

    Returns:
      The triangular factor; NaNs where ``a`` is not positive definite.

    Example:
      >>> jnp.linalg.cholesky(jnp.array([[4., 2.], [2., 2.]]))
      Array([[2., 0.],
             [1., 1.]], dtype=float32)
    """
    a = _matrix("cholesky", a)
    L = lax_linalg.cholesky(a, symmetrize_input=symmetrize_input)
    return _H(L) if upper else L


def _lu_solve(lu, perm, b):
    """``x`` with ``a x = b`` from ``a``'s LU factors (``b`` of shape ``(..., n, k)``, same batch)."""
    jnp = _jnp()
    pb = jnp.take_along_axis(b, perm[..., :, None], axis=-2)
    y = lax_linalg.triangular_solve(lu, pb, left_side=True, lower=True, unit_diagonal=True)
    return lax_linalg.triangular_solve(lu, y, left_side=True, lower=False)


def solve(a, b):
    """Solves ``a @ x = b``.

    Args:
      a: array of shape ``(..., n, n)``.
      b: a vector of shape ``(n,)``, or matrices of shape ``(..., n, k)`` whose batch axes
        broadcast against ``a``'s.

    Returns:
      ``x``, of shape ``(..., n)`` for a vector ``b``, else ``(..., n, k)``.

    Example:
      >>> jnp.linalg.solve(jnp.array([[2., 0.], [0., 4.]]), jnp.array([2., 2.]))
      Array([1. , 0.5], dtype=float32)
    """
    jnp = _jnp()
    a, b = _inexact("solve", a, b)
    ashape, bshape = get_aval(a).shape, get_aval(b).shape
    if len(ashape) < 2 or ashape[-1] != ashape[-2]:
        raise ValueError(f"Argument to solve must have shape [..., n, n], got {ashape}.")
    n = ashape[-1]
    vector = len(bshape) == 1
    if vector:
        if bshape[0] != n:
            raise ValueError(f"Invalid shapes for solve: {ashape}, {bshape}.")
        b = jnp.broadcast_to(b[:, None], ashape[:-2] + (n, 1))
    elif bshape[-2] != n:
        raise ValueError(f"Invalid shapes for solve: {ashape}, {bshape}; b must be a vector "
                         f"of shape ({n},) or matrices of shape [..., {n}, k].")
    bshape = get_aval(b).shape
    try:
        batch = np.broadcast_shapes(ashape[:-2], bshape[:-2])
    except ValueError:
        raise ValueError(f"Incompatible batch shapes for solve: {ashape}, {bshape}.") from None
    a = jnp.broadcast_to(a, batch + ashape[-2:])
    b = jnp.broadcast_to(b, batch + bshape[-2:])
    lu, _, perm = lax_linalg.lu(a)
    x = _lu_solve(lu, perm, b)
    return x[..., 0] if vector else x


def inv(a):
    """Inverse of square matrices (infs/NaNs for singular ones).

    Example:
      >>> jnp.linalg.inv(jnp.array([[2., 0.], [0., 4.]]))
      Array([[0.5 , 0.  ],
             [0.  , 0.25]], dtype=float32)
    """
    jnp = _jnp()
    a = _matrix("inv", a)
    shape = get_aval(a).shape
    eye = jnp.broadcast_to(jnp.eye(shape[-1], dtype=get_aval(a).dtype), shape)
    return solve(a, eye)


def _lu_diag_and_parity(a):
    jnp = _jnp()
    lu, pivots, _ = lax_linalg.lu(a)
    diag = jnp.diagonal(lu, axis1=-2, axis2=-1)
    n = get_aval(pivots).shape[-1]
    swaps = jnp.sum(pivots != jnp.arange(n, dtype=pivots.dtype), axis=-1)
    parity = jnp.where(swaps % 2 == 1, -1, 1).astype(get_aval(a).dtype)
    return diag, parity


def det(a):
    """Determinant of square matrices: by cofactors for 2x2 and 3x3 (as JAX), else from LU.

    Example:
      >>> jnp.linalg.det(jnp.array([[1., 2.], [3., 4.]]))
      Array(-2., dtype=float32)
    """
    a = _matrix("det", a)
    return _det(a)


def _lu_det(a):
    jnp = _jnp()
    diag, parity = _lu_diag_and_parity(a)
    return parity * jnp.prod(diag, axis=-1)


def _adjugate(a):
    """``adj(a) = det(a) inv(a)``, finite for singular ``a`` too: from ``a = U S V^H``,
    ``adj(a) = det(U) det(V^H) V diag(prod_{j != i} s_j) U^H`` (unitary factors' adjugates
    are ``det(M) M^H``)."""
    jnp = _jnp()
    u, s, vh = lax_linalg.svd(a)
    n = get_aval(s).shape[-1]
    ones = jnp.ones_like(s[..., :1])
    before = jnp.cumprod(jnp.concatenate([ones, s[..., :-1]], axis=-1), axis=-1)
    after = jnp.flip(jnp.cumprod(jnp.concatenate([ones, jnp.flip(s, -1)[..., :-1]], axis=-1),
                                 axis=-1), -1)
    others = (before * after).astype(get_aval(a).dtype) if n else s.astype(get_aval(a).dtype)
    phase = (_lu_det(u) * _lu_det(vh))[..., None, None]
    return phase * jnp.matmul(_H(vh) * others[..., None, :], _H(u))


def _det_jvp(primals, tangents):
    # d det(a) = trace(adj(a) da): the adjugate keeps the derivative finite at singular a
    (a,), (da,) = primals, tangents
    jnp = _jnp()
    return _det(a), jnp.sum(jnp.swapaxes(_adjugate(a), -1, -2) * da, axis=(-2, -1))


def _small_or_lu_det(a):
    # JAX expands 2x2 and 3x3 determinants by cofactors rather than through LU, which keeps
    # integer-valued matrices exact (det([[1, 2], [3, 4]]) is -2, not LU's -1.9999999)
    n = get_aval(a).shape[-1]
    if n == 2:
        return a[..., 0, 0] * a[..., 1, 1] - a[..., 0, 1] * a[..., 1, 0]
    if n == 3:
        def minor(r0, r1, c0, c1):
            return a[..., r0, c0] * a[..., r1, c1] - a[..., r0, c1] * a[..., r1, c0]
        return (a[..., 0, 0] * minor(1, 2, 1, 2) - a[..., 0, 1] * minor(1, 2, 0, 2)
                + a[..., 0, 2] * minor(1, 2, 0, 1))
    return _lu_det(a)


def _make_det():
    from plax.transforms.custom_derivatives import custom_jvp
    f = custom_jvp(_small_or_lu_det)
    f.defjvp(_det_jvp)
    return f


_det = _make_det()


def slogdet(a, *, method: str | None = None) -> SlogdetResult:
    """Sign (phase, for complex) and log of the absolute value of the determinant.

    ``method``: JAX's choice of factorisation, ``"lu"`` (or None) or ``"qr"``; plax
    factorises by LU for both (the same values up to rounding).

    Returns:
      ``SlogdetResult(sign, logabsdet)``; a singular matrix gives sign 0 and ``-inf``.

    Example:
      >>> sign, logabsdet = jnp.linalg.slogdet(jnp.array([[1., 2.], [3., 4.]]))
      >>> sign, jnp.round(logabsdet, 5)  # log 2
      (Array(-1., dtype=float32), Array(0.69315, dtype=float32))
    """
    if method not in (None, "lu", "qr"):
        raise ValueError(f"Unknown slogdet method {method!r}. Supported methods are 'lu' "
                         "(`None`), and 'qr'.")
    jnp = _jnp()
    a = _matrix("slogdet", a)
    diag, parity = _lu_diag_and_parity(a)
    mag = jnp.abs(diag)
    is_zero = jnp.any(mag == 0, axis=-1)
    safe = jnp.where(mag == 0, 1, mag)
    unit = diag / safe.astype(get_aval(diag).dtype)
    sign = parity * jnp.prod(unit, axis=-1)
    logdet = jnp.sum(jnp.log(safe), axis=-1)
    sign = jnp.where(is_zero, 0, sign).astype(get_aval(sign).dtype)
    logdet = jnp.where(is_zero, -jnp.inf, logdet).astype(get_aval(logdet).dtype)
    return SlogdetResult(sign, logdet)


def eigh(a, UPLO: str | None = None, symmetrize_input: bool = True) -> EighResult:
    """Eigenvalues (ascending) and eigenvectors of Hermitian matrices.

    Args:
      a: array of shape ``(..., n, n)``.
      UPLO: ``"L"`` (default) or ``"U"``: the triangle read when not symmetrizing.
      symmetrize_input: use ``(a + a^H) / 2``.

    Returns:
      ``EighResult(eigenvalues, eigenvectors)``; each eigenvector's sign (phase) is arbitrary.

    Example:
      >>> jnp.linalg.eigh(jnp.array([[2., 0.], [0., 1.]])).eigenvalues
      Array([1., 2.], dtype=float32)
    """
    if UPLO is None:
        UPLO = "L"
    if UPLO not in ("L", "U"):
        raise ValueError(f"UPLO must be 'L' or 'U', got {UPLO!r}")
    a = _matrix("eigh", a)
    v, w = lax_linalg.eigh(a, lower=UPLO == "L", symmetrize_input=symmetrize_input)
    return EighResult(w, v)


def eigvalsh(a, UPLO: str | None = "L", *, symmetrize_input: bool = True):
    """Eigenvalues (ascending) of Hermitian matrices.

    Example:
      >>> jnp.linalg.eigvalsh(jnp.array([[2., 0.], [0., 1.]]))
      Array([1., 2.], dtype=float32)
    """
    return eigh(a, UPLO, symmetrize_input).eigenvalues


class EigResult(NamedTuple):
    eigenvalues: object
    eigenvectors: object


def eig(a) -> EigResult:
    """Eigenvalues and right eigenvectors of general square matrices (complex; CPU only, as
    in JAX). Only the eigenvalues are differentiable (see :func:`eigvals`).

    Returns:
      ``EigResult(eigenvalues, eigenvectors)`` with ``a @ v = v * w``; each eigenvector has
      unit norm and its largest component real.

    Example:
      >>> jnp.linalg.eig(jnp.array([[2., 0.], [0., 1.]])).eigenvalues
      Array([2.+0.j, 1.+0.j], dtype=complex64)
    """
    a = _matrix("eig", a)
    w, v = lax_linalg.eig(a, compute_left_eigenvectors=False)
    return EigResult(w, v)


def eigvals(a):
    """Eigenvalues of general square matrices (complex; CPU only, as in JAX).

    Example:
      >>> jnp.linalg.eigvals(jnp.array([[2., 0.], [0., 1.]]))
      Array([2.+0.j, 1.+0.j], dtype=complex64)
    """
    a = _matrix("eigvals", a)
    return lax_linalg.eig(a, compute_left_eigenvectors=False,
                          compute_right_eigenvectors=False)[0]


def lstsq(a, b, rcond=None, *, numpy_resid: bool = False):
    """Least-squares solution of ``a @ x = b``, from the SVD of ``a``.

    Args:
      a: an ``(m, n)`` matrix.
      b: an ``(m,)`` vector or ``(m, k)`` matrix.
      rcond: singular values at most ``rcond * max(S)`` count as zero (default
        ``eps * max(m, n)``).
      numpy_resid: compute the residuals exactly as NumPy (empty unless full rank and
        ``m > n``; not traceable under ``jit``); otherwise they are the squared residual
        norms (shape ``(k,)``, ``(1,)`` for a vector ``b``) whatever the rank.

    Returns:
      ``(x, residuals, rank, s)``.

    Example:
      >>> jnp.linalg.lstsq(jnp.array([[1., 0.], [0., 1.], [0., 0.]]), jnp.array([1., 2., 3.]))[0]
      Array([1., 2.], dtype=float32)
    """
    jnp = _jnp()
    a, b = _inexact("lstsq", a, b)
    ashape, bshape = get_aval(a).shape, get_aval(b).shape
    if len(ashape) != 2:
        raise TypeError(f"{ashape}-dimensional array given. Array must be two-dimensional")
    if len(bshape) not in (1, 2):
        raise TypeError(f"{bshape}-dimensional array given. Array must be one or "
                        f"two-dimensional")
    m, n = ashape
    if bshape[0] != m:
        raise ValueError(f"Leading dimensions of input arrays must match, got a {ashape} and "
                         f"b {bshape}")
    vector = len(bshape) == 1
    if vector:
        b = b[:, None]
    dt = get_aval(a).dtype
    if m == 0 or n == 0:
        x = jnp.zeros((n,) + get_aval(b).shape[1:], dt)
        s = jnp.zeros((0,), jnp.real(jnp.zeros((), dt)).dtype)
        rank = jnp.array(0, np.int32)
    else:
        u, s, vh = svd(a, full_matrices=False)
        if rcond is None:
            rcond = jnp.finfo(get_aval(s).dtype).eps * max(m, n)
        keep = s > rcond * s[0]
        rank = jnp.sum(keep).astype(np.int32)
        s_inv = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(dt)
        uhb = jnp.matmul(_H(u), b)
        x = jnp.matmul(_H(vh), uhb * s_inv[:, None])
    resid_full = jnp.sum(jnp.abs(jnp.matmul(a, x) - b) ** 2, axis=0)
    if numpy_resid:
        if m > n and int(rank) == n:
            resid = resid_full
        else:
            resid = jnp.zeros((0,), get_aval(resid_full).dtype)
    else:
        resid = resid_full
    if vector:
        x = x[:, 0]
    return x, resid, rank, s


# (a jit under transforms, as JAX's: a JVP then commits every primal result to a committed
# tangent's device, as JAX's jit of the function does; lax.linalg.svd, a primitive, does not)
@jit_when_traced(static_argnames=("full_matrices", "compute_uv", "hermitian", "subset_by_index"))
def svd(a, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False,
        subset_by_index: tuple[int, int] | None = None):
    """Singular value decomposition ``a = U @ diag(S) @ Vh``.

    Args:
      a: array of shape ``(..., m, n)``.
      full_matrices: square ``U`` and ``Vh``; else the reduced ``(m, k)`` and ``(k, n)``.
      compute_uv: also return the singular vectors.
      hermitian: accepted for NumPy compatibility (the general algorithm is used).
      subset_by_index: ``(start, end)``: only the singular values ``S[start:end]`` (in
        descending order) and their vectors; needs ``full_matrices=False``, as in JAX.

    Returns:
      ``SVDResult(U, S, Vh)`` (``S`` descending), or ``S`` alone without ``compute_uv``.

    Example:
      >>> jnp.linalg.svd(jnp.array([[3., 0.], [0., 4.]]), compute_uv=False)
      Array([4., 3.], dtype=float32)
    """
    a = _matrix("svd", a, square=False)
    del hermitian  # the singular values and vectors are the same either way
    if subset_by_index is not None:
        if full_matrices:
            raise ValueError("full_matrices and subset_by_index cannot both be set")
        start, end = (int(i) for i in subset_by_index)
    if not compute_uv:
        s = lax_linalg.svd(a, full_matrices=full_matrices, compute_uv=False)
        return s if subset_by_index is None else s[..., start:end]
    u, s, vh = lax_linalg.svd(a, full_matrices=full_matrices)
    if subset_by_index is not None:
        u, s, vh = u[..., :, start:end], s[..., start:end], vh[..., start:end, :]
    return SVDResult(u, s, vh)


def svdvals(x):
    """Singular values, descending.

    Example:
      >>> jnp.linalg.svdvals(jnp.array([[3., 0.], [0., 4.]]))
      Array([4., 3.], dtype=float32)
    """
    return svd(x, compute_uv=False)


@jit_when_traced(static_argnames=("mode",))  # (as svd)
def qr(a, mode: str = "reduced"):
    """QR decomposition.

    Args:
      a: array of shape ``(..., m, n)``.
      mode: ``"reduced"`` (``Q`` is ``(m, k)``, ``R`` ``(k, n)``, ``k = min(m, n)``),
        ``"complete"`` (``Q`` is ``(m, m)``) or ``"r"`` (``R`` only).

    Returns:
      ``QRResult(Q, R)``, or ``R`` for ``mode="r"``.

    Example:
      >>> jnp.linalg.qr(jnp.ones((3, 2))).Q.shape
      (3, 2)
    """
    if mode not in ("reduced", "complete", "r"):
        raise ValueError(f"Unsupported QR decomposition mode {mode!r}; use 'reduced', "
                         f"'complete' or 'r'.")
    a = _matrix("qr", a, square=False)
    q, r = lax_linalg.qr(a, full_matrices=mode == "complete")
    return r if mode == "r" else QRResult(q, r)


def matrix_power(a, n: int):
    """``a`` raised to the integer power ``n`` (by repeated squaring; ``inv`` for ``n < 0``).

    Example:
      >>> jnp.linalg.matrix_power(jnp.array([[1., 1.], [0., 1.]]), 3)
      Array([[1., 3.],
             [0., 1.]], dtype=float32)
    """
    jnp = _jnp()
    check_arraylike("matrix_power", a)
    a = jnp.asarray(a)
    shape = get_aval(a).shape
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueError(f"Argument to matrix_power must have shape [..., n, n], got {shape}.")
    try:
        n = operator.index(n)
    except TypeError as err:
        raise TypeError(f"exponent must be an integer, got {n!r}") from err
    if n == 0:
        return jnp.broadcast_to(jnp.eye(shape[-1], dtype=get_aval(a).dtype), shape)
    if n < 0:
        a = inv(a)
        n = -n
    result = None
    base = a
    while n:
        if n & 1:
            result = base if result is None else jnp.matmul(result, base)
        n >>= 1
        if n:
            base = jnp.matmul(base, base)
    return result


def pinv(a, rtol=None, hermitian: bool = False, *, rcond=None):
    """Moore-Penrose pseudo-inverse, from the SVD; singular values at most
    ``rtol * max(S)`` count as zero (default ``rtol``: ``10 * max(m, n) * eps``). ``rcond``
    is JAX's older name of ``rtol`` (not both: ValueError, as in JAX).

    Example:
      >>> jnp.linalg.pinv(jnp.array([[2., 0.], [0., 0.]]))
      Array([[0.5, 0. ],
             [0. , 0. ]], dtype=float32)
    """
    if rcond is not None:
        if rtol is not None:
            raise ValueError("pinv: only one of rtol and rcond may be specified.")
        rtol = rcond
    jnp = _jnp()
    a = _matrix("pinv", a, square=False)
    m, n = get_aval(a).shape[-2:]
    if m == 0 or n == 0:
        return jnp.zeros(get_aval(a).shape[:-2] + (n, m), get_aval(a).dtype)
    u, s, vh = svd(jnp.conj(a), full_matrices=False)
    if rtol is None:
        rtol = 10 * max(m, n) * jnp.finfo(get_aval(s).dtype).eps
    cutoff = jnp.asarray(rtol)[..., None] * jnp.max(s, axis=-1, keepdims=True)
    keep = s > cutoff
    s_inv = jnp.where(keep, 1 / jnp.where(keep, s, 1), 0).astype(get_aval(u).dtype)
    return jnp.matmul(jnp.swapaxes(vh, -1, -2) * s_inv[..., None, :], jnp.swapaxes(u, -1, -2))


def matrix_rank(M, rtol=None, *, hermitian: bool = False, tol=None):
    """Rank of matrices: the number of singular values above ``rtol * max(S)`` (default
    ``rtol``: ``max(m, n) * eps``), or above ``tol`` when given. With ``hermitian``, ``M``
    is taken as Hermitian and the singular values are the absolute values of its
    :func:`eigvalsh` (as JAX computes them).

    Example:
      >>> jnp.linalg.matrix_rank(jnp.array([[1., 2.], [2., 4.]]))
      Array(1, dtype=int32)
    """
    jnp = _jnp()
    (M,) = _inexact("matrix_rank", M)
    shape = get_aval(M).shape
    if len(shape) < 2:
        return jnp.any(M != 0).astype(np.int32)
    s = jnp.abs(eigvalsh(M)) if hermitian else svd(M, compute_uv=False)
    if tol is None:
        if rtol is None:
            rtol = max(shape[-2:]) * jnp.finfo(get_aval(s).dtype).eps
        tol = jnp.asarray(rtol)[..., None] * jnp.max(s, axis=-1, keepdims=True)
    else:
        tol = jnp.asarray(tol)[..., None]
    return jnp.sum(s > tol, axis=-1).astype(np.int32)


def multi_dot(arrays: Sequence, *, precision=None):
    """The product of a chain of matrices (first and last may be vectors).

    Example:
      >>> jnp.linalg.multi_dot([jnp.ones((2, 3)), jnp.ones((3, 4)), jnp.ones(4)])
      Array([12., 12.], dtype=float32)
    """
    jnp = _jnp()
    arrays = list(arrays)
    if len(arrays) < 2:
        raise ValueError(f"multi_dot requires at least two arrays, got {len(arrays)}")
    check_arraylike("multi_dot", *arrays)
    out = arrays[0]
    for x in arrays[1:]:
        out = jnp.dot(out, x, precision=precision)
    return out


def _vector_norm(x, ord, axis, keepdims):
    jnp = _jnp()
    ax = jnp.abs(x)
    if ord is None or ord == 2:
        return jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x)), axis=axis, keepdims=keepdims))
    if ord == np.inf:
        return jnp.max(ax, axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return jnp.min(ax, axis=axis, keepdims=keepdims)
    if ord == 0:
        return jnp.sum(x != 0, axis=axis, keepdims=keepdims).astype(get_aval(ax).dtype)
    if ord == 1:
        return jnp.sum(ax, axis=axis, keepdims=keepdims)
    if isinstance(ord, str):
        raise ValueError(f"Invalid order {ord!r} for vector norm.")
    p = jnp.asarray(ord, dtype=get_aval(ax).dtype)
    return jnp.sum(ax ** p, axis=axis, keepdims=keepdims) ** (1 / p)


def _matrix_norm(x, ord, axis, keepdims):
    jnp = _jnp()
    r, c = axis
    if ord is None or ord == "fro":
        return jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x)), axis=axis, keepdims=keepdims))
    if ord in (1, -1, np.inf, -np.inf):
        red = jnp.max if ord in (1, np.inf) else jnp.min
        summed, other = (r, c) if ord in (1, -1) else (c, r)
        s = jnp.sum(jnp.abs(x), axis=summed, keepdims=True)
        out = red(s, axis=other, keepdims=True)
        return out if keepdims else jnp.squeeze(out, axis=(r, c))
    if ord in (2, -2, "nuc"):
        y = jnp.moveaxis(x, (r, c), (-2, -1))
        s = svd(y, compute_uv=False)
        out = {2: jnp.max, -2: jnp.min, "nuc": jnp.sum}[ord](s, axis=-1)
        if keepdims:
            out = jnp.expand_dims(out, tuple(sorted((r, c))))
        return out
    raise ValueError(f"Invalid order {ord!r} for matrix norm.")


def norm(x, ord=None, axis=None, keepdims: bool = False):
    """Vector or matrix norm, as ``numpy.linalg.norm``.

    Args:
      x: the input.
      ord: vector norms: ``None``/``2``, ``inf``, ``-inf``, ``0``, ``1``, any other number ``p``
        (``sum(|x|^p)^(1/p)``); matrix norms: ``None``/``"fro"``, ``"nuc"``, ``1``, ``-1``,
        ``2``, ``-2``, ``inf``, ``-inf``.
      axis: an int (vector norm), a pair of ints (matrix norm), or ``None``: the vector norm
        of the flattened ``x`` when ``ord`` is None, else by ``x``'s rank (1 or 2).
      keepdims: keep the reduced axes with size 1.

    Returns:
      The norm (real).

    Example:
      >>> jnp.linalg.norm(jnp.array([3., 4.]))
      Array(5., dtype=float32)
    """
    jnp = _jnp()
    (x,) = _inexact("norm", x)
    ndim = get_aval(x).ndim
    if axis is None:
        if ord is None:
            out = _vector_norm(jnp.ravel(x), None, 0, False)
            return jnp.reshape(out, (1,) * ndim) if keepdims else out
        if ndim not in (1, 2):
            raise ValueError("Improper number of dimensions to norm.")
        axis = tuple(range(ndim))
    if isinstance(axis, (tuple, list)) and len(axis) == 1:
        axis = axis[0]
    if isinstance(axis, (tuple, list)):
        if len(axis) != 2:
            raise ValueError("Improper number of dimensions to norm.")
        from plax.numpy.util import canonicalize_axis
        r, c = (canonicalize_axis(a, ndim) for a in axis)
        if r == c:
            raise ValueError("Duplicate axes given.")
        return _matrix_norm(x, ord, (r, c), keepdims)
    return _vector_norm(x, ord, operator.index(axis), keepdims)


def vector_norm(x, /, *, axis=None, keepdims: bool = False, ord=2):
    """The vector norm over ``axis`` (an int, a tuple of ints, or all axes).

    Example:
      >>> jnp.linalg.vector_norm(jnp.array([[3., 4.]]))
      Array(5., dtype=float32)
    """
    jnp = _jnp()
    (x,) = _inexact("vector_norm", x)
    if axis is None:
        out = _vector_norm(jnp.ravel(x), ord, 0, False)
        return jnp.reshape(out, (1,) * get_aval(x).ndim) if keepdims else out
    return _vector_norm(x, ord, axis, keepdims)


def matrix_norm(x, /, *, keepdims: bool = False, ord="fro"):
    """The matrix norm over the last two axes.

    Example:
      >>> jnp.linalg.matrix_norm(jnp.eye(2), ord=2)
      Array(1., dtype=float32)
    """
    (x,) = _inexact("matrix_norm", x)
    if get_aval(x).ndim < 2:
        raise ValueError(f"matrix_norm requires at least 2 dimensions, got shape "
                         f"{get_aval(x).shape}")
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)


def cond(x, p=None):
    """Condition number: ``max(S) / min(S)`` for ``p`` None/2 (``min/max`` for -2), else
    ``norm(x, p) * norm(inv(x), p)``.

    Example:
      >>> jnp.linalg.cond(jnp.array([[2., 0.], [0., 1.]]))
      Array(2., dtype=float32)
    """
    jnp = _jnp()
    x = _matrix("cond", x, square=p in (None, 2, -2))
    if p in (None, 2, -2):
        s = svd(x, compute_uv=False)
        return s[..., 0] / s[..., -1] if p != -2 else s[..., -1] / s[..., 0]
    r = norm(x, ord=p, axis=(-2, -1)) * norm(inv(x), ord=p, axis=(-2, -1))
    return jnp.where(jnp.isnan(r), jnp.inf, r)


def outer(x1, x2, /):
    """Outer product of two vectors.

    Example:
      >>> jnp.linalg.outer(jnp.array([1., 2.]), jnp.array([1., 10.]))
      Array([[ 1., 10.],
             [ 2., 20.]], dtype=float32)
    """
    jnp = _jnp()
    check_arraylike("outer", x1, x2)
    s1, s2 = np.shape(x1), np.shape(x2)
    if len(s1) != 1 or len(s2) != 1:
        raise ValueError(f"Input arrays must be one-dimensional, but they are x1.ndim="
                         f"{len(s1)} and x2.ndim={len(s2)}")
    return jnp.outer(x1, x2)


def cross(x1, x2, /, *, axis: int = -1):
    """Cross product of 3-vectors along ``axis``.

    Example:
      >>> jnp.linalg.cross(jnp.array([1., 0., 0.]), jnp.array([0., 1., 0.]))
      Array([0., 0., 1.], dtype=float32)
    """
    jnp = _jnp()
    check_arraylike("cross", x1, x2)
    s1, s2 = np.shape(x1), np.shape(x2)
    if not s1 or not s2 or s1[axis] != 3 or s2[axis] != 3:
        raise ValueError(f"Both input arrays must be (arrays of) 3-dimensional vectors, but "
                         f"they have shapes {s1} and {s2} along axis {axis}")
    return jnp.cross(x1, x2, axis=axis)


def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    """Matrix product (``jnp.matmul``).

    Example:
      >>> jnp.linalg.matmul(jnp.eye(2), jnp.array([1., 2.]))
      Array([1., 2.], dtype=float32)
    """
    return _jnp().matmul(x1, x2, precision=precision,
                         preferred_element_type=preferred_element_type)


def tensordot(x1, x2, /, *, axes=2, precision=None, preferred_element_type=None,
              out_sharding=None):
    """Tensor contraction (``jnp.tensordot``) with the Array API's signature.

    Example:
      >>> jnp.linalg.tensordot(jnp.ones((2, 3)), jnp.ones((3, 4)), axes=1).shape
      (2, 4)
    """
    return _jnp().tensordot(x1, x2, axes=axes, precision=precision,
                            preferred_element_type=preferred_element_type,
                            out_sharding=out_sharding)


def vecdot(x1, x2, /, *, axis: int = -1, precision=None, preferred_element_type=None):
    """``sum(conj(x1) * x2)`` along ``axis``, broadcasting the other axes.

    Example:
      >>> jnp.linalg.vecdot(jnp.array([1., 2.]), jnp.array([3., 4.]))
      Array(11., dtype=float32)
    """
    return _jnp().vecdot(x1, x2, axis=axis, precision=precision,
                         preferred_element_type=preferred_element_type)


def matrix_transpose(x, /):
    """Swaps the last two axes.

    Example:
      >>> jnp.linalg.matrix_transpose(jnp.ones((2, 3))).shape
      (3, 2)
    """
    check_arraylike("matrix_transpose", x)
    if np.ndim(x) < 2:
        raise ValueError(f"matrix_transpose requires at least 2 dimensions, got shape "
                         f"{np.shape(x)}")
    return _jnp().matrix_transpose(x)  # (placed as JAX's: not as swapaxes)


def diagonal(x, /, *, offset: int = 0):
    """The diagonals of the last two axes.

    Example:
      >>> jnp.linalg.diagonal(jnp.eye(2))
      Array([1., 1.], dtype=float32)
    """
    check_arraylike("diagonal", x)
    if np.ndim(x) < 2:
        raise ValueError(f"diagonal requires at least 2 dimensions, got shape {np.shape(x)}")
    return _jnp().diagonal(x, offset=offset, axis1=-2, axis2=-1)


def trace(x, /, *, offset: int = 0, dtype=None):
    """Sums of the diagonals of the last two axes.

    Example:
      >>> jnp.linalg.trace(jnp.eye(3))
      Array(3., dtype=float32)
    """
    check_arraylike("trace", x)
    if np.ndim(x) < 2:
        raise ValueError(f"trace requires at least 2 dimensions, got shape {np.shape(x)}")
    return _jnp().trace(x, offset=offset, axis1=-2, axis2=-1, dtype=dtype)


def tensorinv(a, ind: int = 2):
    """Inverse of ``a`` seen as a matrix whose rows are its first ``ind`` axes.

    Example:
      >>> jnp.linalg.tensorinv(jnp.eye(4).reshape(4, 2, 2), ind=1).shape
      (2, 2, 4)
    """
    jnp = _jnp()
    (a,) = _inexact("tensorinv", a)
    ind = operator.index(ind)
    if ind <= 0:
        raise ValueError(f"ind must be a positive integer, got {ind}")
    shape = get_aval(a).shape
    rows, cols = shape[:ind], shape[ind:]
    n = int(np.prod(rows))
    if int(np.prod(cols)) != n:
        raise ValueError(f"tensorinv: the product of the first {ind} axes of {shape} must equal "
                         f"that of the others")
    return jnp.reshape(inv(jnp.reshape(a, (n, n))), cols + rows)


def tensorsolve(a, b, axes=None):
    """Solves ``tensordot(a, x, x.ndim) = b`` for ``x``.

    Example:
      >>> jnp.linalg.tensorsolve(jnp.eye(4).reshape(2, 2, 4), jnp.ones((2, 2))).shape
      (4,)
    """
    jnp = _jnp()
    a, b = _inexact("tensorsolve", a, b)
    if axes is not None:
        nd = get_aval(a).ndim
        from plax.numpy.util import canonicalize_axis
        axes = [canonicalize_axis(k, nd) for k in axes]
        a = jnp.moveaxis(a, axes, [nd - len(axes) + i for i in range(len(axes))])
    ashape, bshape = get_aval(a).shape, get_aval(b).shape
    if ashape[:len(bshape)] != bshape:
        raise ValueError(f"tensorsolve: the leading axes of a {ashape} must match b {bshape}")
    xshape = ashape[len(bshape):]
    n = int(np.prod(bshape))
    if int(np.prod(xshape)) != n:
        raise ValueError(f"tensorsolve: a {ashape} is not square over b {bshape}")
    x = solve(jnp.reshape(a, (n, n)), jnp.reshape(b, (n,)))
    return jnp.reshape(x, xshape)

