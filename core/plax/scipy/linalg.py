"""plax.scipy.linalg: ``scipy.linalg``'s functions on the ``plax.lax.linalg`` primitives.

Arguments SciPy uses to tune LAPACK (``overwrite_*``, ``check_finite``, ``lwork``,
``lapack_driver``) are accepted and ignored, as in JAX. Leading axes are batch axes.
"""
from __future__ import annotations

import numpy as np

from plax.core.trace import get_aval
from plax.lax import linalg as lax_linalg
from plax.numpy import linalg as jnp_linalg
from plax.transforms.jit import jit_when_traced

__all__ = ["solve_triangular", "cho_factor", "cho_solve", "lu", "lu_factor", "lu_solve", "qr",
           "svd", "eigh", "block_diag", "inv", "det", "solve", "expm"]


def _jnp():
    from plax import numpy as jnp
    return jnp


def _matrix(name: str, a, square: bool = True):
    return jnp_linalg._matrix(name, a, square)


def _trans_code(trans) -> int:
    codes = {0: 0, 1: 1, 2: 2, "N": 0, "T": 1, "C": 2}
    try:
        return codes[trans]
    except (KeyError, TypeError):
        raise ValueError(f"Invalid 'trans' value {trans!r}; use 0, 1, 2, 'N', 'T' or 'C'") from None


def _as_matrix_rhs(name: str, a, b):
    """``b`` as ``(..., n, k)`` with ``a``'s batch axes, and whether it was a vector."""
    jnp = _jnp()
    ashape, bshape = get_aval(a).shape, get_aval(b).shape
    n = ashape[-1]
    vector = len(bshape) == len(ashape) - 1
    if vector:
        b = b[..., None]
        bshape = get_aval(b).shape
    if len(bshape) < 2 or bshape[-2] != n:
        raise ValueError(f"{name}: incompatible shapes a {ashape} and b "
                         f"{bshape[:-1] if vector else bshape}")
    try:
        batch = np.broadcast_shapes(ashape[:-2], bshape[:-2])
    except ValueError:
        raise ValueError(f"{name}: incompatible batch shapes a {ashape} and b {bshape}") from None
    return (jnp.broadcast_to(a, batch + ashape[-2:]), jnp.broadcast_to(b, batch + bshape[-2:]),
            vector)


def solve_triangular(a, b, trans=0, lower: bool = False, unit_diagonal: bool = False,
                     overwrite_b: bool = False, debug=None, check_finite: bool = True):
    """Solves ``op(a) x = b`` for triangular ``a`` (only its ``lower``/upper triangle is read).

    Args:
      a: ``(..., n, n)`` triangular matrices.
      b: ``(..., n)`` vectors or ``(..., n, k)`` matrices.
      trans: ``0``/``"N"`` (``a``), ``1``/``"T"`` (``a^T``) or ``2``/``"C"`` (``a^H``).
      lower: use the lower triangle.
      unit_diagonal: take the diagonal as ones.

    Returns:
      ``x``, shaped like ``b``.

    Example:
      >>> plax.scipy.linalg.solve_triangular(jnp.array([[2., 0.], [1., 1.]]),
      ...                                    jnp.array([2., 3.]), lower=True)
      Array([1., 2.], dtype=float32)
    """
    del overwrite_b, debug, check_finite
    code = _trans_code(trans)
    a = _matrix("solve_triangular", a)
    a, b = jnp_linalg._inexact("solve_triangular", a, b)
    a, b, vector = _as_matrix_rhs("solve_triangular", a, b)
    x = lax_linalg.triangular_solve(a, b, left_side=True, lower=lower, transpose_a=code > 0,
                                    conjugate_a=code == 2, unit_diagonal=unit_diagonal)
    return x[..., 0] if vector else x


def cho_factor(a, lower: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """Cholesky factorization for :func:`cho_solve`.

    Returns:
      ``(c, lower)``: the lower factor ``L`` (``a = L L^H``) if ``lower``, else the upper
      ``U`` (``a = U^H U``); zeros in the other triangle.

    Example:
      >>> c, low = plax.scipy.linalg.cho_factor(jnp.array([[4., 2.], [2., 2.]]))
      >>> c
      Array([[2., 1.],
             [0., 1.]], dtype=float32)
    """
    del overwrite_a, check_finite
    return jnp_linalg.cholesky(a, upper=not lower), lower


def cho_solve(c_and_lower, b, overwrite_b: bool = False, check_finite: bool = True):
    """Solves ``a x = b`` given :func:`cho_factor`'s ``(c, lower)``.

    Example:
      >>> f = plax.scipy.linalg.cho_factor(jnp.array([[4., 2.], [2., 2.]]))
      >>> plax.scipy.linalg.cho_solve(f, jnp.array([6., 4.]))
      Array([1., 1.], dtype=float32)
    """
    del overwrite_b, check_finite
    c, lower = c_and_lower
    c = _matrix("cho_solve", c)
    c, b = jnp_linalg._inexact("cho_solve", c, b)
    c, b, vector = _as_matrix_rhs("cho_solve", c, b)
    # lower: L L^H x = b; upper: U^H U x = b
    y = lax_linalg.triangular_solve(c, b, left_side=True, lower=lower, transpose_a=not lower,
                                    conjugate_a=not lower)
    x = lax_linalg.triangular_solve(c, y, left_side=True, lower=lower, transpose_a=lower,
                                    conjugate_a=lower)
    return x[..., 0] if vector else x


# (a jit under transforms, as JAX's: see jnp.linalg.svd)
@jit_when_traced(static_argnames=("permute_l", "overwrite_a", "check_finite"))
def lu(a, permute_l: bool = False, overwrite_a: bool = False, check_finite: bool = True):
    """LU decomposition with partial pivoting: ``a = p @ l @ u``.

    Returns:
      ``(p, l, u)`` (``p`` a permutation matrix, ``l`` unit lower ``(m, k)``, ``u`` upper
      ``(k, n)``, ``k = min(m, n)``), or ``(p @ l, u)`` if ``permute_l``.

    Example:
      >>> p, l, u = plax.scipy.linalg.lu(jnp.array([[1., 2.], [3., 4.]]))
      >>> p
      Array([[0., 1.],
             [1., 0.]], dtype=float32)
    """
    del overwrite_a, check_finite
    jnp = _jnp()
    a = _matrix("lu", a, square=False)
    m, n = get_aval(a).shape[-2:]
    k = min(m, n)
    dt = get_aval(a).dtype
    lu_, _, perm = lax_linalg.lu(a)
    l_ = jnp.tril(lu_[..., :, :k], -1) + jnp.eye(m, k, dtype=dt)
    u_ = jnp.triu(lu_[..., :k, :])
    # a[perm] = l u, so a = p l u with p[perm[i], i] = 1
    p = (jnp.arange(m, dtype=np.int32)[:, None] == perm[..., None, :]).astype(dt)
    if permute_l:
        return jnp.matmul(p, l_), u_
    return p, l_, u_


def lu_factor(a, overwrite_a: bool = False, check_finite: bool = True):
    """LU factorization for :func:`lu_solve`: ``(lu, piv)``, ``piv`` 0-based row swaps (int32).

    Example:
      >>> lu, piv = plax.scipy.linalg.lu_factor(jnp.array([[1., 2.], [3., 4.]]))
      >>> piv
      Array([1, 1], dtype=int32)
    """
    del overwrite_a, check_finite
    a = _matrix("lu_factor", a)
    lu_, piv, _ = lax_linalg.lu(a)
    return lu_, piv


def _pivots_to_permutation(piv, m: int):
    """The row order produced by applying the swaps ``i <-> piv[i]`` in turn."""
    jnp = _jnp()
    k = get_aval(piv).shape[-1]
    iota = jnp.arange(m, dtype=np.int32)
    perm = jnp.broadcast_to(iota, get_aval(piv).shape[:-1] + (m,))
    for i in range(k):
        p = piv[..., i:i + 1]
        at_i = perm[..., i:i + 1]
        at_p = jnp.take_along_axis(perm, p, axis=-1)
        perm = jnp.where(iota == i, at_p, jnp.where(iota == p, at_i, perm))
    return perm


def lu_solve(lu_and_piv, b, trans=0, overwrite_b: bool = False, check_finite: bool = True):
    """Solves ``op(a) x = b`` given :func:`lu_factor`'s ``(lu, piv)``.

    Example:
      >>> f = plax.scipy.linalg.lu_factor(jnp.array([[4., 2.], [2., 3.]]))
      >>> plax.scipy.linalg.lu_solve(f, jnp.array([6., 5.]))
      Array([1., 1.], dtype=float32)
    """
    del overwrite_b, check_finite
    jnp = _jnp()
    code = _trans_code(trans)
    lu_, piv = lu_and_piv
    lu_ = _matrix("lu_solve", lu_)
    lu_, b = jnp_linalg._inexact("lu_solve", lu_, b)
    m = get_aval(lu_).shape[-1]
    perm = _pivots_to_permutation(jnp.asarray(piv), m)
    lu_, b, vector = _as_matrix_rhs("lu_solve", lu_, b)
    perm = jnp.broadcast_to(perm, get_aval(b).shape[:-2] + (m,))
    if code == 0:  # a = P^T L U
        x = jnp.take_along_axis(b, perm[..., :, None], axis=-2)
        x = lax_linalg.triangular_solve(lu_, x, left_side=True, lower=True, unit_diagonal=True)
        x = lax_linalg.triangular_solve(lu_, x, left_side=True, lower=False)
    else:  # op(a) = op(U) op(L) P: solve with op(U), op(L), then undo the permutation
        conj = code == 2
        x = lax_linalg.triangular_solve(lu_, b, left_side=True, lower=False, transpose_a=True,
                                        conjugate_a=conj)
        x = lax_linalg.triangular_solve(lu_, x, left_side=True, lower=True, transpose_a=True,
                                        conjugate_a=conj, unit_diagonal=True)
        inv_perm = jnp.argsort(perm, axis=-1).astype(np.int32)
        x = jnp.take_along_axis(x, inv_perm[..., :, None], axis=-2)
    return x[..., 0] if vector else x


def qr(a, overwrite_a: bool = False, lwork=None, mode: str = "full", pivoting: bool = False,
       check_finite: bool = True):
    """QR decomposition.

    Args:
      a: ``(..., m, n)`` matrices.
      mode: ``"full"`` (``q`` is ``(m, m)``), ``"economic"`` (``q`` is ``(m, k)``), or
        ``"r"`` (``(r,)`` only, full shape).
      pivoting: not supported (raises NotImplementedError).

    Returns:
      ``(q, r)``, or ``(r,)`` for ``mode="r"``.

    Example:
      >>> q, r = plax.scipy.linalg.qr(jnp.ones((3, 2)), mode="economic")
      >>> q.shape, r.shape
      ((3, 2), (2, 2))
    """
    del overwrite_a, lwork, check_finite
    if pivoting:
        raise NotImplementedError("plax.scipy.linalg.qr does not support pivoting=True")
    if mode not in ("full", "economic", "r"):
        raise ValueError(f"Unsupported QR decomposition mode {mode!r}; use 'full', "
                         f"'economic' or 'r'.")
    a = _matrix("qr", a, square=False)
    q, r = lax_linalg.qr(a, full_matrices=mode != "economic")
    return (r,) if mode == "r" else (q, r)


def svd(a, full_matrices: bool = True, compute_uv: bool = True, overwrite_a: bool = False,
        check_finite: bool = True, lapack_driver: str = "gesdd"):
    """Singular value decomposition ``a = U @ diag(s) @ Vh``: ``(U, s, Vh)``, or ``s``
    without ``compute_uv``.

    Example:
      >>> plax.scipy.linalg.svd(jnp.array([[3., 0.], [0., 4.]]), compute_uv=False)
      Array([4., 3.], dtype=float32)
    """
    del overwrite_a, check_finite, lapack_driver
    out = jnp_linalg.svd(a, full_matrices=full_matrices, compute_uv=compute_uv)
    return tuple(out) if compute_uv else out


def eigh(a, b=None, lower: bool = True, eigvals_only: bool = False, overwrite_a: bool = False,
         overwrite_b: bool = False, turbo: bool = True, eigvals=None, type: int = 1,
         check_finite: bool = True):
    """Eigenvalues (ascending) and eigenvectors of Hermitian ``a``: ``(w, v)``, or ``w`` if
    ``eigvals_only``. The generalized problem (``b``) is not supported.

    Example:
      >>> plax.scipy.linalg.eigh(jnp.array([[2., 0.], [0., 1.]]), eigvals_only=True)
      Array([1., 2.], dtype=float32)
    """
    del overwrite_a, overwrite_b, turbo, check_finite
    if b is not None or eigvals is not None or type != 1:
        raise NotImplementedError("plax.scipy.linalg.eigh supports only the standard "
                                  "problem (b=None, eigvals=None, type=1)")
    w, v = jnp_linalg.eigh(a, UPLO="L" if lower else "U", symmetrize_input=False)
    return w if eigvals_only else (w, v)


def block_diag(*arrs):
    """A block-diagonal matrix of the arguments (0-d and 1-d ones count as one row).

    Example:
      >>> plax.scipy.linalg.block_diag(jnp.ones((1, 2)), jnp.array([[3.]]))
      Array([[1., 1., 0.],
             [0., 0., 3.]], dtype=float32)
    """
    jnp = _jnp()
    if not arrs:
        return jnp.zeros((1, 0))
    arrs = [jnp.asarray(a) for a in arrs]
    arrs = [jnp.reshape(a, (1, -1)) if a.ndim < 2 else a for a in arrs]
    bad = [a.shape for a in arrs if a.ndim > 2]
    if bad:
        raise ValueError(f"block_diag arguments must have two or fewer dimensions, got shapes "
                         f"{bad}")
    dt = jnp.result_type(*arrs)
    total = sum(a.shape[1] for a in arrs)
    rows, col = [], 0
    for a in arrs:
        w = a.shape[1]
        rows.append(jnp.pad(a.astype(dt), ((0, 0), (col, total - col - w))))
        col += w
    return jnp.concatenate(rows, axis=0)


def inv(a, overwrite_a: bool = False, check_finite: bool = True):
    """Inverse of square matrices.

    Example:
      >>> plax.scipy.linalg.inv(jnp.array([[2., 0.], [0., 4.]]))
      Array([[0.5 , 0.  ],
             [0.  , 0.25]], dtype=float32)
    """
    del overwrite_a, check_finite
    return jnp_linalg.inv(a)


def det(a, overwrite_a: bool = False, check_finite: bool = True):
    """Determinant of square matrices.

    Example:
      >>> plax.scipy.linalg.det(jnp.array([[4., 2.], [2., 3.]]))
      Array(8., dtype=float32)
    """
    del overwrite_a, check_finite
    return jnp_linalg.det(a)


def solve(a, b, lower: bool = False, overwrite_a: bool = False, overwrite_b: bool = False,
          debug: bool = False, check_finite: bool = True, assume_a: str = "gen"):
    """Solves ``a x = b``; ``assume_a="pos"`` uses the Cholesky factorization (reading the
    ``lower`` or upper triangle), anything else (``"gen"``, ``"sym"``, ``"her"``) LU.

    Args:
      a: ``(..., n, n)`` matrices.
      b: ``(..., n)`` vectors or ``(..., n, k)`` matrices.

    Example:
      >>> plax.scipy.linalg.solve(jnp.array([[2., 0.], [0., 4.]]), jnp.array([2., 2.]))
      Array([1. , 0.5], dtype=float32)
    """
    del overwrite_a, overwrite_b, debug, check_finite  # SciPy's; unused, as in JAX
    if assume_a not in ("gen", "sym", "her", "pos"):
        raise ValueError(f"{assume_a!r} is not a recognized matrix structure")
    a = _matrix("solve", a)
    a, b = jnp_linalg._inexact("solve", a, b)
    a, b, vector = _as_matrix_rhs("solve", a, b)
    if assume_a == "pos":
        tri = _jnp().tril(a) if lower else _jnp().triu(a)
        full = tri + jnp_linalg._H(tri) - tri * _jnp().eye(get_aval(a).shape[-1],
                                                               dtype=get_aval(a).dtype)
        c = lax_linalg.cholesky(full, symmetrize_input=False)
        x = cho_solve((c, True), b)
    else:
        x = jnp_linalg.solve(a, b)
    return x[..., 0] if vector else x


# Pade coefficients b_0..b_m of exp's [m/m] approximant, and the 1-norm up to which the
# approximant is accurate to the working precision (Higham 2005): degree 13 for float64,
# degree 7 for float32.
_PADE = {
    13: ((64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
          129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920.,
          40840800., 960960., 16380., 182., 1.), 5.371920351148152),
    7: ((17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.), 3.925724783138660),
}


def _pade_terms(a, b, degree: int):
    """``(U, V)``: the odd and even parts of the Pade numerator, ``p(a) = V + U``."""
    jnp = _jnp()
    n = get_aval(a).shape[-1]
    eye = jnp.broadcast_to(jnp.eye(n, dtype=get_aval(a).dtype), get_aval(a).shape)
    a2 = jnp.matmul(a, a)
    a4 = jnp.matmul(a2, a2)
    a6 = jnp.matmul(a4, a2)
    if degree == 7:
        u = jnp.matmul(a, b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
        v = b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye
        return u, v
    u = jnp.matmul(a, jnp.matmul(a6, b[13] * a6 + b[11] * a4 + b[9] * a2)
                   + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = (jnp.matmul(a6, b[12] * a6 + b[10] * a4 + b[8] * a2)
         + b[6] * a6 + b[4] * a4 + b[2] * a2 + b[0] * eye)
    return u, v


def expm(A, *, upper_triangular: bool = False, max_squarings: int = 16):
    """Matrix exponential by scaling and squaring with a Pade approximant (degree 13 in
    float64, 7 in float32).

    ``A`` is divided by ``2**s`` so that its 1-norm is within the approximant's accurate
    range, then the result is squared ``s`` times. The squarings are unrolled to
    ``max_squarings`` (each applied only when needed), so ``expm`` works under ``jit``,
    ``vmap`` and ``grad``; matrices that would need more squarings give NaNs, as in JAX.

    Args:
      A: array of shape ``(..., n, n)``.
      upper_triangular: accepted for JAX compatibility (no special path).
      max_squarings: the largest number of squarings.

    Returns:
      ``exp(A)``, shaped like ``A``.

    Example:
      >>> plax.scipy.linalg.expm(jnp.zeros((2, 2)))
      Array([[1., 0.],
             [0., 1.]], dtype=float32)
    """
    del upper_triangular
    from plax import lax
    jnp = _jnp()
    a = _matrix("expm", A)
    dt = get_aval(a).dtype
    degree = 13 if np.dtype(dt) in (np.dtype(np.float64), np.dtype(np.complex128)) else 7
    b, theta = _PADE[degree]
    norm1 = jnp.max(jnp.sum(jnp.abs(a), axis=-2), axis=-1)
    # the number of squarings is piecewise constant in A: no derivative flows through it
    s = lax.stop_gradient(jnp.maximum(0, jnp.ceil(jnp.log2(norm1 / theta))))
    s = jnp.where(jnp.isfinite(s), s, 0)
    scaled = a / (2.0 ** s).astype(dt)[..., None, None]
    u, v = _pade_terms(scaled, b, degree)
    r = jnp_linalg.solve(v - u, v + u)
    for i in range(int(max_squarings)):
        r = jnp.where((i < s)[..., None, None], jnp.matmul(r, r), r)
    too_big = (s > max_squarings)[..., None, None]
    return jnp.where(too_big, jnp.asarray(np.nan, dt), r)


from plax.scipy._linalg_extra import (cholesky, circulant, companion,  # noqa: E402
                                      convolution_matrix, dft, eigh_tridiagonal, expm_frechet,
                                      fiedler, fiedler_companion, hadamard, hankel, helmert,
                                      hilbert, invhilbert, invpascal, leslie, pascal, polar,
                                      qr_multiply, toeplitz, hessenberg, sqrtm, funm,
                                      solve_sylvester, schur, rsf2csf)

__all__ += ["cholesky", "circulant", "companion", "convolution_matrix", "dft",
            "eigh_tridiagonal", "expm_frechet", "fiedler", "fiedler_companion", "hadamard",
            "hankel", "helmert", "hilbert", "invhilbert", "invpascal", "leslie", "pascal",
            "polar", "qr_multiply", "toeplitz", "hessenberg", "sqrtm", "funm",
            "solve_sylvester", "schur", "rsf2csf"]
