"""Linear algebra primitives: cholesky, triangular_solve, lu, qr, eigh and svd.

Each works on the last two axes of its operand and is batched over the leading ones, so
the batching rules move the mapped axis to the front. The JVP rules are written with
``dot_general``, elementwise primitives and ``triangular_solve`` (the one linear-algebra
primitive with a transpose rule: it is linear in its right-hand side), so reverse mode
works through the transposes of those.

The rest of JAX's ``lax.linalg`` (``tridiagonal_solve``, ``tridiagonal``, ``hessenberg``,
``householder_product``, ``ormqr``, ``qdwh``, ``schur``, ...) is composed from these and other
primitives in ``linalg_householder`` and ``linalg_composites``, and re-exported at the end.
"""
from __future__ import annotations

import numpy as np

from plax import dtypes
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.lax.base import asarray, aval_of
from plax.transforms.batching import move_axis_to
from plax.transforms.jvp import Zero, instantiate

# ------------------------------------------------------------------ helpers (on traced values)


def _b():
    import plax.lax.binary as B
    return B


def _ndim(x) -> int:
    return aval_of(x).ndim


def _is_complex(x) -> bool:
    return dtypes.is_complex(aval_of(x).dtype)


def _T(x):
    """Swaps the last two axes."""
    from plax.lax.shape import transpose
    n = _ndim(x)
    return transpose(x, tuple(range(n - 2)) + (n - 1, n - 2))


def _conj(x):
    from plax.lax.unary import conj
    return conj(x) if _is_complex(x) else x


def _H(x):
    """Conjugate transpose of the last two axes."""
    return _conj(_T(x))


def _mm(a, b):
    """Matrix product over the last two axes; leading axes (equal in both) are batch axes."""
    from plax.lax.dot import dot_general_p
    n = _ndim(a)
    batch = tuple(range(n - 2))
    return dot_general_p.bind(a, b, dimension_numbers=(((n - 1,), (n - 2,)), (batch, batch)),
                              precision=None, preferred_element_type=None)


def _tri_mask(shape, k: int, lower: bool):
    """Boolean mask of the lower (``j <= i + k``) or upper (``j >= i + k``) triangle."""
    from plax.lax.shape import broadcasted_iota
    B = _b()
    n = len(shape)
    i = broadcasted_iota(np.int32, shape, n - 2)
    j = broadcasted_iota(np.int32, shape, n - 1)
    if k:
        i = B.add(i, B.full_like_scalar(k, i))
    return B.le(j, i) if lower else B.ge(j, i)


def _zeros(x):
    from plax.lax.shape import full_like
    return full_like(x, 0)


def _tril(x, k: int = 0):
    from plax.lax.select import select
    return select(_tri_mask(aval_of(x).shape, k, True), x, _zeros(x))


def _triu(x, k: int = 0):
    from plax.lax.select import select
    return select(_tri_mask(aval_of(x).shape, k, False), x, _zeros(x))


def _eye_like(x):
    """The identity of ``x``'s trailing shape (``x``'s dtype), broadcast over its batch axes."""
    from plax.lax.convert import convert_element_type
    from plax.lax.shape import broadcasted_iota
    shape = aval_of(x).shape
    n = len(shape)
    i = broadcasted_iota(np.int32, shape, n - 2)
    j = broadcasted_iota(np.int32, shape, n - 1)
    return convert_element_type(_b().eq(i, j), aval_of(x).dtype)


def _diag_part(x):
    """The diagonal of the last two axes of a square ``x``."""
    from plax.lax.reduction import reduce_sum
    return reduce_sum(_b().mul(x, _eye_like(x)), (_ndim(x) - 1,))


def _row(v, n: int):
    """``v[..., None, :]`` broadcast to ``(..., n, k)``."""
    from plax.lax.shape import broadcast_in_dim
    shape = aval_of(v).shape
    return broadcast_in_dim(v, shape[:-1] + (n, shape[-1]),
                            tuple(range(len(shape) - 1)) + (len(shape),))


def _col(v, k: int):
    """``v[..., :, None]`` broadcast to ``(..., n, k)``."""
    from plax.lax.shape import broadcast_in_dim
    shape = aval_of(v).shape
    return broadcast_in_dim(v, shape + (k,), tuple(range(len(shape))))


def _as(x, like):
    from plax.lax.convert import convert_element_type
    dt = aval_of(like).dtype
    return x if aval_of(x).dtype == dt else convert_element_type(x, dt)


_LINALG_DTYPES = ("float32", "float64", "complex64", "complex128")


def _check_dtype(name: str, a: ShapedArray, what: str) -> None:
    if a.dtype.name not in _LINALG_DTYPES:
        raise TypeError(f"{name} does not accept dtype {a.dtype.name} for its {what}; it accepts "
                        f"{', '.join(_LINALG_DTYPES)}.")


def _check_matrix(name: str, a: ShapedArray, square: bool = True, what: str = "operand"):
    _check_dtype(name, a, what)
    if a.ndim < 2:
        raise TypeError(f"{name} requires its {what} to have rank at least 2, got shape "
                        f"{a.shape}")
    if square and a.shape[-1] != a.shape[-2]:
        raise ValueError(f"{name} requires a square matrix (last two dimensions equal), got "
                         f"{what} shape {a.shape}")


def _batch_front(p, vals, dims, **params):
    """A batching rule for primitives batched over leading axes: move the mapped axis first."""
    size = next(aval_of(v).shape[d] for v, d in zip(vals, dims) if d is not None)
    moved = [move_axis_to(v, d, 0, size) for v, d in zip(vals, dims)]
    return p.bind(*moved, **params), 0


def _def_batch(p):
    register_rule("batch", p)(lambda vals, dims, **params: _batch_front(p, vals, dims, **params))


# ------------------------------------------------------------------ cholesky

cholesky_p = Primitive("cholesky")


@cholesky_p.def_abstract_eval
def _cholesky_abstract_eval(a):
    _check_matrix("cholesky", a)
    return ShapedArray(a.shape, a.dtype, a.weak_type)


def cholesky(x, *, symmetrize_input: bool = True):
    """The lower Cholesky factor ``L`` of Hermitian positive-definite ``x`` (``x = L L^H``),
    batched over leading axes. Matrices that are not positive definite give NaNs.

    Args:
      x: array of shape ``(..., n, n)``.
      symmetrize_input: use ``(x + x^H) / 2`` (so gradients are symmetric).

    Returns:
      ``L`` of the same shape, zero above the diagonal.

    Example:
      >>> lax.linalg.cholesky(jnp.array([[4., 2.], [2., 2.]]))
      Array([[2., 0.],
             [1., 1.]], dtype=float32)
    """
    x = asarray(x)
    if symmetrize_input:
        x = symmetrize(x)
    return cholesky_p.bind(x)


def symmetrize(x):
    """``(x + x^H) / 2`` over the last two axes."""
    x = asarray(x)
    B = _b()
    return B.div(B.add(x, _H(x)), B.full_like_scalar(2, x))


@register_rule("jvp", cholesky_p)
def _cholesky_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    L = cholesky_p.bind(a)
    if type(da) is Zero:
        return L, Zero.from_primal(L)
    B = _b()
    # With X = L^-1 dA L^-H, dL = L Phi(X), Phi taking the lower triangle and halving the diagonal.
    tmp = triangular_solve(L, da, left_side=False, lower=True, transpose_a=True,
                           conjugate_a=True)
    X = triangular_solve(L, tmp, left_side=True, lower=True)
    half = B.mul(_eye_like(X), B.full_like_scalar(0.5, X))
    phi = B.sub(_tril(X), B.mul(X, half))
    return L, _mm(L, phi)


_def_batch(cholesky_p)


# ------------------------------------------------------------------ triangular_solve

triangular_solve_p = Primitive("triangular_solve")


@triangular_solve_p.def_abstract_eval
def _triangular_solve_abstract_eval(a, b, *, left_side, lower, transpose_a, conjugate_a,
                                    unit_diagonal):
    _check_matrix("triangular_solve", a, what="a")
    _check_dtype("triangular_solve", b, "b")
    if a.dtype != b.dtype:
        raise TypeError(f"triangular_solve requires a and b of the same dtype, got "
                        f"{a.dtype.name} and {b.dtype.name}")
    if b.ndim != a.ndim:
        raise ValueError(f"triangular_solve requires a and b of the same rank, got a shape "
                        f"{a.shape} and b shape {b.shape}")
    if a.shape[:-2] != b.shape[:-2]:
        raise ValueError(f"triangular_solve requires a and b to have the same batch "
                        f"dimensions, got a shape {a.shape} and b shape {b.shape}")
    k = b.shape[-2] if left_side else b.shape[-1]
    if k != a.shape[-1]:
        side = "second-to-last" if left_side else "last"
        raise ValueError(f"triangular_solve requires the {side} dimension of b to equal the "
                        f"size of a, got a shape {a.shape} and b shape {b.shape} "
                        f"(left_side={left_side})")
    return ShapedArray(b.shape, b.dtype, a.weak_type and b.weak_type)


def triangular_solve(a, b, *, left_side: bool = False, lower: bool = False,
                     transpose_a: bool = False, conjugate_a: bool = False,
                     unit_diagonal: bool = False):
    """Solves ``op(a) @ x = b`` (``left_side``) or ``x @ op(a) = b`` for triangular ``a``.

    Only the ``lower`` (or upper) triangle of ``a`` is read; ``op`` transposes and/or
    conjugates ``a`` as asked; ``unit_diagonal`` takes the diagonal as ones. Batched over
    leading axes (``a`` and ``b`` share them). Singular ``a`` gives infs/NaNs.

    Args:
      a: ``(..., m, m)`` triangular matrices.
      b: ``(..., m, n)`` if ``left_side`` else ``(..., n, m)``.

    Returns:
      ``x``, with ``b``'s shape.

    Example:
      >>> lax.linalg.triangular_solve(jnp.array([[2., 0.], [1., 1.]]), jnp.array([[2.], [3.]]),
      ...                             left_side=True, lower=True)
      Array([[1.],
             [2.]], dtype=float32)
    """
    return triangular_solve_p.bind(asarray(a), asarray(b), left_side=bool(left_side),
                                   lower=bool(lower), transpose_a=bool(transpose_a),
                                   conjugate_a=bool(conjugate_a),
                                   unit_diagonal=bool(unit_diagonal))


def _op(a, transpose_a, conjugate_a):
    if transpose_a:
        a = _T(a)
    return _conj(a) if conjugate_a else a


@register_rule("jvp", triangular_solve_p)
def _triangular_solve_jvp(primals, tangents, **params):
    (a, b), (da, db) = primals, tangents
    x = triangular_solve_p.bind(a, b, **params)
    if type(da) is Zero and type(db) is Zero:
        return x, Zero.from_primal(x)
    rhs = Zero.from_primal(x) if type(db) is Zero else db
    B = _b()
    if type(da) is not Zero:
        # d(op(a) x) = d(b): op(a) dx = db - op(da) x (on the right: dx op(a) = db - x op(da))
        da = _tril(da) if params["lower"] else _triu(da)
        if params["unit_diagonal"]:
            da = B.sub(da, B.mul(da, _eye_like(da)))
        opda = _op(da, params["transpose_a"], params["conjugate_a"])
        prod = _mm(opda, x) if params["left_side"] else _mm(x, opda)
        from plax.lax.unary import neg
        rhs = neg(prod) if type(db) is Zero else B.sub(db, prod)
    return x, triangular_solve_p.bind(a, instantiate(rhs), **params)


@register_rule("transpose", triangular_solve_p)
def _triangular_solve_transpose(ct, a, b, **params):
    from plax.transforms.transpose import is_undefined_primal
    if is_undefined_primal(a):
        raise TypeError("triangular_solve is not linear in its matrix a; this is a bug in a "
                        "JVP rule.")
    if type(ct) is Zero:
        return [None, None]
    # x = op(a)^-1 b is linear in b; its transpose multiplies by op(a)^-T, same side.
    p = dict(params, transpose_a=not params["transpose_a"])
    return [None, triangular_solve_p.bind(a, ct, **p)]


_def_batch(triangular_solve_p)


# ------------------------------------------------------------------ lu

lu_p = Primitive("lu", multiple_results=True)


@lu_p.def_abstract_eval
def _lu_abstract_eval(a):
    _check_matrix("lu", a, square=False)
    m, n = a.shape[-2:]
    batch = a.shape[:-2]
    return (ShapedArray(a.shape, a.dtype, a.weak_type),
            ShapedArray(batch + (min(m, n),), np.dtype(np.int32)),
            ShapedArray(batch + (m,), np.dtype(np.int32)))


def lu(x):
    """LU decomposition with partial pivoting: ``x[..., perm, :] = L @ U``.

    Args:
      x: array of shape ``(..., m, n)``.

    Returns:
      ``(lu, pivots, permutation)``: ``lu`` holds ``U`` on and above the diagonal and the
      strictly lower part of ``L`` (whose diagonal is ones) below it; ``pivots`` (int32,
      ``(..., min(m, n))``) says that row ``i`` was swapped with row ``pivots[i]``;
      ``permutation`` (int32, ``(..., m)``) is the resulting row order.

    Example:
      >>> lu, piv, perm = lax.linalg.lu(jnp.array([[1., 2.], [3., 4.]]))
      >>> perm
      Array([1, 0], dtype=int32)
    """
    return tuple(lu_p.bind(asarray(x)))


def _slice_last2(x, rows: int, cols: int):
    """``x[..., :rows, :cols]``."""
    from plax.lax.slicing import slice as lax_slice
    shape = aval_of(x).shape
    return lax_slice(x, (0,) * len(shape), shape[:-2] + (rows, cols))


def _pad_last2(x, rows: int, cols: int):
    """``x`` with ``rows`` zero rows and ``cols`` zero columns appended."""
    from plax.lax.shape import pad
    nd = _ndim(x)
    cfg = [(0, 0, 0)] * (nd - 2) + [(0, rows, 0), (0, cols, 0)]
    return pad(x, _b().full_like_scalar(0, x), cfg)


def _eye_from(shape, start: int, like):
    """Ones on the diagonal from index ``start`` on, zeros elsewhere (``like``'s dtype)."""
    from plax.lax.convert import convert_element_type
    from plax.lax.shape import broadcasted_iota
    B = _b()
    i = broadcasted_iota(np.int32, shape, len(shape) - 2)
    j = broadcasted_iota(np.int32, shape, len(shape) - 1)
    on = B.eq(i, j)
    if start:
        on = B.bitwise_and(on, B.ge(i, B.full_like_scalar(start, i)))
    return convert_element_type(on, aval_of(like).dtype)


def _permutation_matrix(perm, like):
    """``P`` with ``P[..., i, perm[i]] = 1`` (so ``P @ a == a[..., perm, :]``), ``like``'s dtype."""
    from plax.lax.convert import convert_element_type
    from plax.lax.shape import broadcasted_iota
    m = aval_of(perm).shape[-1]
    shape = aval_of(perm).shape + (m,)
    cols = broadcasted_iota(np.int32, shape, len(shape) - 1)
    return convert_element_type(_b().eq(_col(perm, m), cols), aval_of(like).dtype)


@register_rule("jvp", lu_p)
def _lu_jvp(primals, tangents):
    (a,), (da,) = primals, tangents
    lu_, piv, perm = lu_p.bind(a)
    zeros = [Zero.from_primal(piv), Zero.from_primal(perm)]
    if type(da) is Zero:
        return [lu_, piv, perm], [Zero.from_primal(lu_)] + zeros
    B = _b()
    m, n = aval_of(a).shape[-2:]
    k = min(m, n)
    # Square unit-lower L (m x m) and upper U (n x n) extending the factors: a rectangular
    # LU's L gets the identity's extra columns, its U the identity's extra rows.
    L = B.add(_tril(_pad_last2(_slice_last2(lu_, m, k), 0, m - k), -1),
              _eye_from(aval_of(lu_).shape[:-2] + (m, m), 0, lu_))
    U = B.add(_triu(_pad_last2(_slice_last2(lu_, k, n), n - k, 0)),
              _eye_from(aval_of(lu_).shape[:-2] + (n, n), k, lu_))
    # P dA = dL U + L dU; with X = L^-1 P dA U^-1, dL = L tril(X, -1) and dU = triu(X) U.
    pda = _mm(_permutation_matrix(perm, a), da)
    y = triangular_solve(L, pda, left_side=True, lower=True, unit_diagonal=True)
    X = triangular_solve(U, y, left_side=False, lower=False)
    dlu = B.add(_mm(L, _tril(X, -1)), _mm(_triu(X), U))
    return [lu_, piv, perm], [dlu] + zeros


_def_batch(lu_p)


# ------------------------------------------------------------------ qr

qr_p = Primitive("qr", multiple_results=True)


@qr_p.def_abstract_eval
def _qr_abstract_eval(a, *, full_matrices):
    _check_matrix("qr", a, square=False)
    m, n = a.shape[-2:]
    k = m if full_matrices else min(m, n)
    batch = a.shape[:-2]
    return (ShapedArray(batch + (m, k), a.dtype, a.weak_type),
            ShapedArray(batch + (k, n), a.dtype, a.weak_type))


def qr_of_empty(a, full_matrices: bool, xp=None) -> list:
    """The value of :data:`qr_p` on a host or device array with no elements (LAPACK and
    cuSOLVER reject those), for the backends' kernels: ``q`` holds the ``(m, k)`` identity's
    leading columns in every batch entry, ``r`` is empty or zero.

    Args:
      a: an array of shape ``batch + (m, n)`` with ``a.size == 0``.
      full_matrices: as the primitive's.
      xp: the array module of ``a`` (default NumPy).

    Returns:
      ``[q, r]`` of the primitive's shapes, in ``a``'s dtype.

    Example:
      >>> q, r = qr_of_empty(np.zeros((2, 0)), True)
      >>> q.tolist(), r.shape
      ([[1.0, 0.0], [0.0, 1.0]], (2, 0))
    """
    xp = np if xp is None else xp
    m, n = a.shape[-2:]
    k = m if full_matrices else min(m, n)
    q = xp.zeros(a.shape[:-2] + (m, k), a.dtype)
    if m:
        q[...] = xp.eye(m, k, dtype=a.dtype)
    return [q, xp.zeros(a.shape[:-2] + (k, n), a.dtype)]


def qr(x, *, full_matrices: bool = True):
    """QR decomposition ``x = q @ r`` (``q`` with orthonormal columns, ``r`` upper triangular).

    Args:
      x: array of shape ``(..., m, n)``.
      full_matrices: ``q`` is ``(..., m, m)`` and ``r`` ``(..., m, n)``; else the reduced
        ``(..., m, k)`` and ``(..., k, n)`` with ``k = min(m, n)``.

    Returns:
      ``(q, r)``.

    Example:
      >>> q, r = lax.linalg.qr(jnp.ones((3, 2)), full_matrices=False)
      >>> q.shape, r.shape
      ((3, 2), (2, 2))
    """
    q, r = qr_p.bind(asarray(x), full_matrices=bool(full_matrices))
    return q, r


@register_rule("jvp", qr_p)
def _qr_jvp(primals, tangents, *, full_matrices):
    (a,), (da,) = primals, tangents
    q, r = qr_p.bind(a, full_matrices=full_matrices)
    if type(da) is Zero:
        return [q, r], [Zero.from_primal(q), Zero.from_primal(r)]
    m, n = aval_of(a).shape[-2:]
    if m < n or (full_matrices and m > n):
        raise NotImplementedError(f"the derivative of qr is implemented for m >= n with "
                                  f"full_matrices=False (or square inputs), got shape "
                                  f"{aval_of(a).shape} and full_matrices={full_matrices}")
    B = _b()
    # C = Q^H dA R^-1; dR R^-1 is upper triangular and Q^H dQ skew-Hermitian, which fixes
    # Q^H dQ = Omega = tril(C, -1) - tril(C, -1)^H (plus i Im diag(C) for complex).
    C = triangular_solve(r, _mm(_H(q), da), left_side=False, lower=False)
    low = _tril(C, -1)
    omega = B.sub(low, _H(low))
    if _is_complex(C):
        from plax.lax.unary import imag, real
        im = B.mul(_eye_like(C), _as(imag(C), C))
        omega = B.add(omega, B.mul(im, _as(B.complex(B.full_like_scalar(0, real(C)),
                                                     B.full_like_scalar(1, real(C))), C)))
    dq = B.add(_mm(q, B.sub(omega, C)),
               triangular_solve(r, da, left_side=False, lower=False))
    dr = _mm(B.sub(C, omega), r)
    return [q, r], [dq, dr]


_def_batch(qr_p)


# ------------------------------------------------------------------ eigh

eigh_p = Primitive("eigh", multiple_results=True)


@eigh_p.def_abstract_eval
def _eigh_abstract_eval(a, *, lower):
    _check_matrix("eigh", a)
    return (ShapedArray(a.shape, a.dtype, a.weak_type),
            ShapedArray(a.shape[:-1], dtypes.real_dtype(a.dtype), a.weak_type))


def eigh(x, *, lower: bool = True, symmetrize_input: bool = True,
         sort_eigenvalues: bool = True, subset_by_index: tuple | None = None,
         implementation: "EighImplementation | None" = None):
    """Eigendecomposition of Hermitian matrices: ``x = v @ diag(w) @ v^H``.

    Args:
      x: array of shape ``(..., n, n)``.
      lower: read the lower (else upper) triangle.
      symmetrize_input: use ``(x + x^H) / 2``.
      sort_eigenvalues: accepted; the eigenvalues always come sorted (as LAPACK's).
      subset_by_index: ``(lo, hi)``: keep only the eigenpairs ``lo <= i < hi`` (in ascending
        order of the eigenvalues).
      implementation: ``EighImplementation.QR`` or None (LAPACK's ``syevd``); JACOBI and QDWH
        raise ``NotImplementedError`` (as JAX on a CPU).

    Returns:
      ``(v, w)``: eigenvectors as columns of ``v`` and real eigenvalues ``w`` in ascending
      order. Each eigenvector's sign (phase) is arbitrary.

    Example:
      >>> v, w = lax.linalg.eigh(jnp.array([[2., 0.], [0., 1.]]))
      >>> w
      Array([1., 2.], dtype=float32)
    """
    from plax.lax.linalg_enums import check_eigh_implementation, index_subset
    check_eigh_implementation(implementation)
    x = asarray(x)
    if symmetrize_input:
        x = symmetrize(x)
    v, w = eigh_p.bind(x, lower=bool(lower))
    if subset_by_index is not None:
        v, w = index_subset(v, w, subset_by_index, aval_of(x).shape[-1], "eigh")
    return v, w


def _inverse_gaps(w, like):
    """``F[i, j] = 1 / (w[j] - w[i])`` off the diagonal, 0 on it (``like``'s dtype)."""
    B = _b()
    n = aval_of(w).shape[-1]
    diff = B.sub(_row(w, n), _col(w, n))
    eye = _eye_like(diff)
    one = B.full_like_scalar(1, diff)
    return _as(B.sub(B.div(one, B.add(diff, eye)), eye), like)


@register_rule("jvp", eigh_p)
def _eigh_jvp(primals, tangents, *, lower):
    (a,), (da,) = primals, tangents
    v, w = eigh_p.bind(a, lower=lower)
    if type(da) is Zero:
        return [v, w], [Zero.from_primal(v), Zero.from_primal(w)]
    from plax.lax.unary import real
    B = _b()
    # dA taken as Hermitian: dw = diag(V^H dA V), dV = V (F o V^H dA V)
    vdv = _mm(_mm(_H(v), da), v)
    dw = _diag_part(vdv)
    if _is_complex(dw):
        dw = real(dw)
    dv = _mm(v, B.mul(_inverse_gaps(w, v), vdv))
    return [v, w], [dv, dw]


_def_batch(eigh_p)


# ------------------------------------------------------------------ svd

svd_p = Primitive("svd", multiple_results=True)


@svd_p.def_abstract_eval
def _svd_abstract_eval(a, *, full_matrices, compute_uv):
    _check_matrix("svd", a, square=False)
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    s = ShapedArray(batch + (k,), dtypes.real_dtype(a.dtype), a.weak_type)
    if not compute_uv:
        return (s,)
    mu, nv = (m, n) if full_matrices else (k, k)
    return (s, ShapedArray(batch + (m, mu), a.dtype, a.weak_type),
            ShapedArray(batch + (nv, n), a.dtype, a.weak_type))


def svd_of_empty(a, full_matrices: bool, compute_uv: bool, xp=None) -> list:
    """The value of :data:`svd_p` on a host or device array with no elements (LAPACK and
    cuSOLVER reject those), for the backends' kernels: no singular values (or zeros), and
    the identity's leading columns/rows as ``u`` and ``vh`` in every batch entry.

    Args:
      a: an array of shape ``batch + (m, n)`` with ``a.size == 0``.
      full_matrices, compute_uv: as the primitive's.
      xp: the array module of ``a`` (default NumPy).

    Returns:
      ``[s, u, vh]`` (``[s]`` without ``compute_uv``) of the primitive's shapes; ``s`` of the
      real type of ``a``'s dtype, ``u`` and ``vh`` of ``a``'s.

    Example:
      >>> s, u, vh = svd_of_empty(np.zeros((2, 0)), True, True)
      >>> s.shape, u.tolist(), vh.shape
      ((0,), [[1.0, 0.0], [0.0, 1.0]], (0, 0))
    """
    xp = np if xp is None else xp
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    mu, nv = (m, n) if full_matrices else (k, k)
    s = xp.zeros(batch + (k,), dtypes.real_dtype(a.dtype))
    if not compute_uv:
        return [s]
    u = xp.broadcast_to(xp.eye(m, mu, dtype=a.dtype), batch + (m, mu)).copy()
    vh = xp.broadcast_to(xp.eye(nv, n, dtype=a.dtype), batch + (nv, n)).copy()
    return [s, u, vh]


def svd(x, *, full_matrices: bool = True, compute_uv: bool = True,
        subset_by_index: tuple | None = None, algorithm: "SvdAlgorithm | None" = None):
    """Singular value decomposition ``x = u @ diag(s) @ vh``.

    Args:
      x: array of shape ``(..., m, n)``.
      full_matrices: ``u`` is ``(..., m, m)`` and ``vh`` ``(..., n, n)``; else
        ``(..., m, k)`` and ``(..., k, n)`` with ``k = min(m, n)``.
      compute_uv: also return the singular vectors.
      subset_by_index: ``(lo, hi)``: keep only the singular triplets ``lo <= i < hi`` (in
        descending order of the singular values); needs ``full_matrices=False``.
      algorithm: an :class:`SvdAlgorithm`: DEFAULT, QR and DIVIDE_AND_CONQUER all run
        LAPACK's SVD; JACOBI and POLAR raise ``NotImplementedError`` (as JAX on a CPU).

    Returns:
      ``(u, s, vh)`` with singular values ``s`` (real, descending), or ``s`` alone when
      ``compute_uv`` is false. Singular vectors are unique only up to sign (phase).

    Example:
      >>> lax.linalg.svd(jnp.array([[3., 0.], [0., 4.]]), compute_uv=False)
      Array([4., 3.], dtype=float32)
    """
    from plax.lax.linalg_enums import check_svd_algorithm, index_subset
    check_svd_algorithm(algorithm)
    if subset_by_index is not None and full_matrices and compute_uv:
        raise ValueError("full_matrices and subset_by_index cannot both be set")
    x = asarray(x)
    out = svd_p.bind(x, full_matrices=bool(full_matrices), compute_uv=bool(compute_uv))
    if subset_by_index is not None:
        k = min(aval_of(x).shape[-2:])
        if not compute_uv:
            return index_subset(None, out[0], subset_by_index, k, "svd")[1]
        s, u, vh = out
        u, s = index_subset(u, s, subset_by_index, k, "svd")
        vh = _T(index_subset(_T(vh), s, subset_by_index, k, "svd")[0])
        return u, s, vh
    if not compute_uv:
        return out[0]
    s, u, vh = out
    return u, s, vh


@register_rule("jvp", svd_p)
def _svd_jvp(primals, tangents, *, full_matrices, compute_uv):
    (a,), (da,) = primals, tangents
    if type(da) is Zero:
        res = svd_p.bind(a, full_matrices=full_matrices, compute_uv=compute_uv)
        return res, [Zero.from_primal(o) for o in res]
    m, n = aval_of(a).shape[-2:]
    if compute_uv and full_matrices and m != n:
        raise NotImplementedError(f"the derivative of svd with full_matrices=True is "
                                  f"implemented for square matrices only, got shape "
                                  f"{aval_of(a).shape}; pass full_matrices=False")
    # singular values only: the reduced vectors suffice
    s, u, vh = svd_p.bind(a, full_matrices=full_matrices and compute_uv, compute_uv=True)
    from plax.lax.unary import real
    B = _b()
    v = _H(vh)
    dS = _mm(_mm(_H(u), da), v)
    ds = _diag_part(dS)
    if _is_complex(ds):
        ds = real(ds)
    if not compute_uv:
        return [s], [ds]
    k = aval_of(s).shape[-1]
    srow, scol = _as(_row(s, k), dS), _as(_col(s, k), dS)
    # F[i, j] = 1 / (s_j^2 - s_i^2) off the diagonal
    s2 = B.mul(s, s)
    F = _inverse_gaps(s2, dS)
    dSS = B.mul(dS, srow)     # dS S
    SdS = B.mul(scol, dS)     # S dS
    du_inner = B.mul(F, B.add(dSS, _H(dSS)))
    dv_inner = B.mul(F, B.add(SdS, _H(SdS)))
    # 1/s with 0 where s == 0
    zero_s = _as(B.eq(s, B.full_like_scalar(0, s)), s)
    s_inv = B.sub(B.div(B.full_like_scalar(1, s), B.add(s, zero_s)), zero_s)
    if _is_complex(dS):
        # the phase freedom of each (u_i, v_i) pair: fix Im(u_i^H du_i) from Im diag(dS) / s_i
        skew = B.mul(B.sub(dS, _H(dS)), B.full_like_scalar(0.5, dS))
        du_inner = B.add(du_inner, B.mul(B.mul(skew, _eye_like(skew)), _as(_row(s_inv, k), dS)))
    du = _mm(u, du_inner)
    dv = _mm(v, dv_inner)
    if m > n:  # the part of dA V outside the span of U
        dav = _mm(da, v)
        du = B.add(du, B.mul(B.sub(dav, _mm(u, _mm(_H(u), dav))), _as(_row(s_inv, m), dS)))
    if n > m:
        dahu = _mm(_H(da), u)
        dv = B.add(dv, B.mul(B.sub(dahu, _mm(v, _mm(vh, dahu))), _as(_row(s_inv, n), dS)))
    return [s, u, vh], [ds, du, _H(dv)]


_def_batch(svd_p)


# ------------------------------------------------------------------ eig (CPU)

eig_p = Primitive("eig", multiple_results=True)


@eig_p.def_abstract_eval
def _eig_abstract_eval(a, *, compute_left_eigenvectors, compute_right_eigenvectors):
    _check_matrix("eig", a)
    ct = dtypes.complex_dtype_for(a.dtype)
    w = ShapedArray(a.shape[:-1], ct, a.weak_type)
    vs = [ShapedArray(a.shape, ct, a.weak_type)
          for flag in (compute_left_eigenvectors, compute_right_eigenvectors) if flag]
    return (w, *vs)


def eig(x, *, compute_left_eigenvectors: bool = True, compute_right_eigenvectors: bool = True,
        enable_eigvec_derivs: bool = False, implementation: "EigImplementation | None" = None,
        use_magma: bool | None = None):
    """Eigendecomposition of general square matrices (complex results; CPU only, as in JAX).

    Args:
      x: array of shape ``(..., n, n)``.
      compute_left_eigenvectors: also return ``vl`` (``vl^H x = diag(w) vl^H``).
      compute_right_eigenvectors: also return ``vr`` (``x vr = vr diag(w)``).
      enable_eigvec_derivs: JAX's opt-in to eigenvector derivatives; plax has none, so True
        raises ``NotImplementedError``.
      implementation: ``EigImplementation.LAPACK`` or None; CUSOLVER and MAGMA raise
        ``ValueError`` (as JAX on a CPU).
      use_magma: accepted for JAX's signature; True raises ``ValueError`` (no MAGMA).

    Returns:
      A list ``[w]``, then ``vl`` and/or ``vr`` as asked; each eigenvector has unit norm and
      its largest component real. Only the eigenvalues are differentiable.

    Example:
      >>> lax.linalg.eig(jnp.array([[2., 0.], [0., 1.]]), compute_left_eigenvectors=False,
      ...                compute_right_eigenvectors=False)[0]
      Array([2.+0.j, 1.+0.j], dtype=complex64)
    """
    from plax.lax.linalg_enums import check_eig_implementation
    check_eig_implementation(implementation, use_magma)
    if enable_eigvec_derivs:
        raise NotImplementedError("eig: enable_eigvec_derivs=True is not supported by plax "
                                  "(only the eigenvalues are differentiable)")
    return list(eig_p.bind(asarray(x), compute_left_eigenvectors=bool(compute_left_eigenvectors),
                           compute_right_eigenvectors=bool(compute_right_eigenvectors)))


@register_rule("jvp", eig_p)
def _eig_jvp(primals, tangents, *, compute_left_eigenvectors, compute_right_eigenvectors):
    (a,), (da,) = primals, tangents
    params = dict(compute_left_eigenvectors=compute_left_eigenvectors,
                  compute_right_eigenvectors=compute_right_eigenvectors)
    if type(da) is Zero:
        outs = eig_p.bind(a, **params)
        return outs, [Zero.from_primal(o) for o in outs]
    if compute_left_eigenvectors or compute_right_eigenvectors:
        raise NotImplementedError("the derivatives of eigenvectors (eig) are not implemented, "
                                  "only those of the eigenvalues: pass "
                                  "compute_left_eigenvectors=False and "
                                  "compute_right_eigenvectors=False")
    w, vr = eig_p.bind(a, compute_left_eigenvectors=False, compute_right_eigenvectors=True)
    # dw = diag(vr^-1 dA vr), solving with vr's LU factors
    dav = _mm(_as(da, vr), vr)
    lu_, _, perm = lu_p.bind(vr)
    y = triangular_solve(lu_, _mm(_permutation_matrix(perm, vr), dav), left_side=True,
                         lower=True, unit_diagonal=True)
    x = triangular_solve(lu_, y, left_side=True, lower=False)
    return [w], [_diag_part(x)]


_def_batch(eig_p)


# ------------------------------------------------------------------ compositions (no primitives)

from plax.lax.linalg_enums import (EigImplementation, EighImplementation,  # noqa: E402
                                   SvdAlgorithm)
from plax.lax.linalg_householder import (hessenberg, householder_product, ormqr,  # noqa: E402
                                         tridiagonal)
from plax.lax.linalg_composites import (cholesky_update, lu_pivots_to_permutation,  # noqa: E402
                                        qdwh, schur, symmetric_product, tridiagonal_solve)

# the API (the documentation lists these): the primitives' wrappers, the compositions defined
# in the sibling modules, the enums, and the helpers the backends' kernels share
__all__ = ["EigImplementation", "EighImplementation", "SvdAlgorithm", "cholesky",
           "cholesky_update", "eig", "eigh", "hessenberg", "householder_product", "lu",
           "lu_pivots_to_permutation", "ormqr", "qdwh", "qr", "qr_of_empty", "schur", "svd",
           "svd_of_empty", "symmetric_product", "symmetrize", "triangular_solve",
           "tridiagonal", "tridiagonal_solve",
           "cholesky_p", "triangular_solve_p", "lu_p", "qr_p", "eigh_p", "svd_p", "eig_p"]
