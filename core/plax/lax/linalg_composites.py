"""``lax.linalg`` functions composed from existing primitives (no primitive of their own):
``tridiagonal_solve``, ``lu_pivots_to_permutation``, ``symmetric_product``,
``cholesky_update``, ``qdwh`` and ``schur``.

Each is written with ``plax.numpy`` and ``plax.lax`` control flow on one problem and batched
over leading axes by ``vmap`` (or by broadcasting), so every backend and every transform gets
them from the primitives they are made of.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from plax.lax.linalg_householder import check_inexact, over_batch

Array = Any
ArrayLike = Any


def _jnp():
    import plax.numpy as jnp
    return jnp


def _lax():
    import plax.lax as lax
    return lax


# ------------------------------------------------------------------ tridiagonal_solve


def _perturbed_thomas(dl, d, du, b):
    """``perturb_singular``'s solve: the Thomas algorithm on the first (row) axis, a forward
    sweep eliminating the subdiagonal without row exchanges (pivots ``den[i] = d[i] - dl[i] *
    c[i-1]``, scaled superdiagonal ``c[i] = du[i] / den[i]`` and right-hand side ``y``), then
    a backward substitution; a pivot smaller than ``eps`` times the largest entry of the
    matrix is moved to that size (keeping its phase), so singular systems give finite
    results. Diagonals are ``(m, ...)``, ``b`` ``(m, ..., n)``."""
    jnp = _jnp()
    eps = jnp.finfo(d.dtype).eps
    tiny = eps * jnp.max(jnp.maximum(jnp.maximum(jnp.abs(dl), jnp.abs(d)), jnp.abs(du)), axis=0)
    tiny = jnp.where(tiny == 0, jnp.ones_like(tiny), tiny)

    def forward(carry, row):
        c_prev, y_prev = carry
        dl_i, d_i, du_i, b_i = row
        den = d_i - dl_i * c_prev
        mag = jnp.abs(den)
        phase = jnp.where(mag == 0, jnp.ones_like(den),
                          den / jnp.where(mag == 0, jnp.ones_like(mag), mag).astype(den.dtype))
        den = jnp.where(mag < tiny, phase * tiny.astype(den.dtype), den)
        c = du_i / den
        y = (b_i - dl_i[..., None] * y_prev) / den[..., None]
        return (c, y), (c, y)

    init = (jnp.zeros_like(d[0]), jnp.zeros_like(b[0]))
    _, (c, y) = _lax().scan(forward, init, (dl, d, du, b))

    def backward(x_next, row):
        c_i, y_i = row
        x = y_i - c_i[..., None] * x_next
        return x, x

    _, x = _lax().scan(backward, jnp.zeros_like(b[0]), (c, y), reverse=True)
    return x


def _magnitude(v):
    """LAPACK's pivot size: ``|v|`` for reals, ``|re| + |im|`` for complex (``CABS1``)."""
    jnp = _jnp()
    if jnp.iscomplexobj(v):
        return jnp.abs(v.real) + jnp.abs(v.imag)
    return jnp.abs(v)


def _gtsv(dl, d, du, b):
    """Gaussian elimination with partial pivoting, as LAPACK's ``gtsv``: at each row the
    larger (by :func:`_magnitude`) of the pivot and the entry below it leads, the rows
    exchanged when it is the entry below, which fills a second superdiagonal in; then a
    backward substitution over the three upper diagonals. Diagonals ``(m, ...)``, ``b``
    ``(m, ..., n)``. A zero pivot (a singular ``T``) makes that system's whole solution NaN,
    as JAX marks a failed ``gtsv``."""
    jnp, lax = _jnp(), _lax()
    zero = jnp.zeros_like(d[0])

    def eliminate(carry, below):
        # carry: row i as the previous steps left it; below: row i + 1 as given
        d_i, du_i, b_i, ok = carry
        l, d_n, du_n, b_n = below
        swap = _magnitude(d_i) < _magnitude(l)
        pivot = jnp.where(swap, l, d_i)
        ok = ok & (pivot != 0)
        safe = jnp.where(pivot == 0, jnp.ones_like(pivot), pivot)
        fact = jnp.where(swap, d_i, l) / safe
        # row i as kept (pivot, superdiagonal, second superdiagonal, right-hand side)
        kept = (pivot, jnp.where(swap, d_n, du_i), jnp.where(swap, du_n, zero),
                jnp.where(swap[..., None], b_n, b_i))
        # row i + 1 less fact times the kept row (its entry in column i is then zero)
        nxt = (jnp.where(swap, du_i - fact * d_n, d_n - fact * du_i),
               jnp.where(swap, -fact * du_n, du_n),
               jnp.where(swap[..., None], b_i - fact[..., None] * b_n,
                         b_n - fact[..., None] * b_i))
        return (*nxt, ok), kept

    ok = jnp.ones(d.shape[1:], bool)
    (d_l, du_l, b_l, ok), rows = lax.scan(
        eliminate, (d[0], du[0], b[0], ok), (dl[1:], d[1:], du[1:], b[1:]))
    ok = ok & (d_l != 0)
    piv = jnp.concatenate([rows[0], d_l[None]])
    up1 = jnp.concatenate([rows[1], du_l[None]])
    up2 = jnp.concatenate([rows[2], zero[None]])
    y = jnp.concatenate([rows[3], b_l[None]])

    def substitute(carry, row):
        x1, x2 = carry   # x[i + 1], x[i + 2]
        p, u1, u2, y_i = row
        x = (y_i - u1[..., None] * x1 - u2[..., None] * x2) / p[..., None]
        return (x, x1), x

    nothing = jnp.zeros_like(b[0])
    _, x = lax.scan(substitute, (nothing, nothing), (piv, up1, up2, y), reverse=True)
    return jnp.where(ok[..., None], x, jnp.full_like(x, jnp.nan))


def _tridiagonal_matmul(dl, d, du, x):
    """``T @ x`` for the tridiagonal ``T`` (diagonals ``(..., m)``, ``x`` ``(..., m, n)``)."""
    jnp = _jnp()
    zero = jnp.zeros_like(x[..., :1, :])
    below = jnp.concatenate([zero, x[..., :-1, :]], axis=-2)   # x[i - 1]
    above = jnp.concatenate([x[..., 1:, :], zero], axis=-2)    # x[i + 1]
    return dl[..., None] * below + d[..., None] * x + du[..., None] * above


def _rows_first(v, nd: int):
    """Moves axis ``-nd`` (the row axis) to the front."""
    return _jnp().moveaxis(v, -nd, 0)


def _solve_rows_first(dl, d, du, b, perturb: bool = False):
    jnp = _jnp()
    # the ignored corners are zeroed, so they cannot reach the solution
    dl = dl.at[..., 0].set(0)
    du = du.at[..., -1].set(0)
    diags, rhs = [_rows_first(v, 1) for v in (dl, d, du)], _rows_first(b, 2)
    x = _perturbed_thomas(*diags, rhs) if perturb else _gtsv(*diags, rhs)
    return jnp.moveaxis(x, 0, -2)


def _transposed_diagonals(dl, d, du):
    """The diagonals of ``T^T`` (not conjugated): its subdiagonal is ``T``'s superdiagonal
    shifted down one row, its superdiagonal ``T``'s subdiagonal shifted up."""
    jnp = _jnp()
    zero = jnp.zeros_like(d[..., :1])
    return (jnp.concatenate([zero, du[..., :-1]], axis=-1), d,
            jnp.concatenate([dl[..., 1:], zero], axis=-1))


def _solve_linear_in_b(dl, d, du, rhs, perturb: bool):
    """The solve as a ``linear_call`` in ``rhs``, so reverse mode transposes it to a solve
    with ``T^T`` instead of transposing the eliminations."""
    from plax.transforms.linear_call import linear_call
    return linear_call(
        lambda diags, r: _solve_rows_first(*diags, r, perturb),
        lambda diags, ct: _solve_rows_first(*_transposed_diagonals(*diags), ct, perturb),
        (dl, d, du), rhs)


def _make_tridiagonal_solve(perturb: bool):
    import plax

    @plax.custom_jvp
    def solve(dl, d, du, b):
        return _solve_rows_first(dl, d, du, b, perturb)

    @solve.defjvp
    def solve_jvp(primals, tangents):
        dl, d, du, b = primals
        ddl, dd, ddu, db = tangents
        x = _solve_rows_first(dl, d, du, b, perturb)
        # T x = b  =>  T dx = db - dT x: one more solve, linear in the tangents
        rhs = db - _tridiagonal_matmul(ddl.at[..., 0].set(0), dd, ddu.at[..., -1].set(0), x)
        return x, _solve_linear_in_b(dl, d, du, rhs, perturb)

    return solve


_SOLVERS: dict = {}   # perturb_singular -> the custom_jvp function, made on first use


def tridiagonal_solve(dl: ArrayLike, d: ArrayLike, du: ArrayLike, b: ArrayLike, *,
                      perturb_singular: bool = False) -> Array:
    """Solves tridiagonal systems ``T x = b``.

    ``T`` has subdiagonal ``dl[1:]``, diagonal ``d`` and superdiagonal ``du[:-1]``
    (``dl[..., 0]`` and ``du[..., -1]`` are ignored), as LAPACK's ``gtsv`` takes them.

    Computed as LAPACK's ``gtsv`` computes it: elimination with partial pivoting, then a
    backward substitution (two scans); differentiable in all four arguments by the
    implicit rule ``T dx = db - dT x``.

    Args:
      dl, d, du: ``(..., m)``, one shape, floating or complex.
      b: ``(..., m, n)``, the right-hand sides (same batch axes and dtype).
      perturb_singular: move pivots smaller than ``eps * max|T|`` to that size, so singular
        systems give finite results (for inverse iteration). This path eliminates without
        row exchanges, so its perturbed solutions differ from JAX's.

    Returns:
      ``x`` of ``b``'s shape. Without ``perturb_singular`` a singular system's ``x`` is all
      NaN (as JAX marks a failed ``gtsv``).

    Example:
      >>> lax.linalg.tridiagonal_solve(jnp.array([0., 1.]), jnp.array([2., 2.]),
      ...                              jnp.array([1., 0.]), jnp.array([[3.], [3.]]))
      Array([[1.],
             [1.]], dtype=float32)
    """
    jnp = _jnp()
    dl, d, du, b = (jnp.asarray(v) for v in (dl, d, du, b))
    for pos, v in enumerate((dl, d, du, b)):
        if v.ndim < (2 if pos == 3 else 1):
            raise TypeError(f"Input {pos} to tridiagonal_solve must have rank at least "
                            f"{2 if pos == 3 else 1}, but got shape={v.shape}")
        check_inexact("tridiagonal_solve", v, pos)
    if not dl.shape == d.shape == du.shape:
        raise TypeError(f"tridiagonal_solve requires that all diagonal arguments have the same "
                        f"shape, got {dl.shape}, {d.shape} and {du.shape}")
    if b.shape[:-1] != d.shape:
        raise TypeError(f"tridiagonal_solve requires that the leading ndim-1 dimensions of b "
                        f"equal the dimensions of the diagonal arguments, got b shape "
                        f"{b.shape} and diagonals of shape {d.shape}")
    if not dl.dtype == d.dtype == du.dtype == b.dtype:
        raise TypeError(f"tridiagonal_solve requires that all arguments have the same dtype, "
                        f"got {dl.dtype.name}, {d.dtype.name}, {du.dtype.name} and "
                        f"{b.dtype.name}")
    if d.shape[-1] == 0 or b.shape[-1] == 0:
        return jnp.zeros_like(b)
    perturb = bool(perturb_singular)
    if perturb not in _SOLVERS:
        _SOLVERS[perturb] = _make_tridiagonal_solve(perturb)
    return _SOLVERS[perturb](dl, d, du, b)


# ------------------------------------------------------------------ permutations, products


def lu_pivots_to_permutation(pivots: ArrayLike, permutation_size: int) -> Array:
    """The permutation that LU's row swaps (``pivots``: row ``i`` swapped with row
    ``pivots[i]``, in order) apply to ``range(permutation_size)``.

    Args:
      pivots: int32 ``(..., k)``.
      permutation_size: the permutation's length, at least ``k``.

    Returns:
      int32 ``(..., permutation_size)``: ``a[perm]`` is ``a`` with the swaps applied.

    Example:
      >>> lax.linalg.lu_pivots_to_permutation(jnp.array([2, 2, 3], jnp.int32), 5)
      Array([2, 0, 3, 1, 4], dtype=int32)
    """
    import plax
    jnp = _jnp()
    pivots = jnp.asarray(pivots)
    if pivots.dtype != np.int32:
        raise TypeError(f"lu_pivots_to_permutation does not accept dtype {pivots.dtype.name} "
                        f"at position 0. Accepted dtypes at position 0 are subtypes of int32.")
    if pivots.ndim < 1:
        raise ValueError(f"lu_pivots_to_permutation requires pivots of rank at least 1, got "
                         f"shape {pivots.shape}")
    size = int(permutation_size)
    k = pivots.shape[-1]
    if size < k:
        raise ValueError(f"Output permutation size {size} has to exceed the trailing dimension "
                         f"of the pivots. Got pivots size {k}")
    perm0 = jnp.broadcast_to(jnp.arange(size, dtype=np.int32), pivots.shape[:-1] + (size,))
    if k == 0:
        return perm0

    def one(piv, perm):
        def swap(i, p):
            j = piv[i]
            pi, pj = p[i], p[j]
            return p.at[i].set(pj).at[j].set(pi)
        return plax.lax.fori_loop(0, k, swap, perm)

    return over_batch(one, "(k),(p)->(p)", pivots, perm0)


def symmetric_product(a_matrix: ArrayLike, c_matrix: ArrayLike, *, alpha: float = 1.0,
                      beta: float = 0.0, symmetrize_output: bool = False) -> Array:
    """``alpha * a @ a^T + beta * c`` (BLAS's ``syrk`` update), for real matrices (as JAX's).

    Args:
      a_matrix: ``(..., m, n)``, float32 or float64.
      c_matrix: ``(..., m, m)``.
      alpha, beta: the scalars.
      symmetrize_output: make the result exactly symmetric by mirroring its lower triangle
        (``beta * c`` need not be Hermitian; without this the full product is returned).

    Returns:
      ``(..., m, m)``.

    Example:
      >>> lax.linalg.symmetric_product(jnp.ones((2, 1)), jnp.eye(2), beta=2.0)
      Array([[3., 1.],
             [1., 3.]], dtype=float32)
    """
    jnp = _jnp()
    a, c = jnp.asarray(a_matrix), jnp.asarray(c_matrix)
    for pos, v in enumerate((a, c)):
        if v.dtype.name not in ("float32", "float64"):
            raise TypeError(f"symmetric_product does not accept dtype {v.dtype.name} at "
                            f"position {pos}. Accepted dtypes at position {pos} are subtypes "
                            f"of floating.")
    if (a.ndim < 2 or c.ndim != a.ndim or c.shape[-1] != c.shape[-2]
            or c.shape[-1] != a.shape[-2] or c.shape[:-2] != a.shape[:-2]):
        raise ValueError(f"symmetric_update expects a rectangular matrix of shape (m, n) and a "
                         f"square matrix of shape (m, m). Got shapes {a.shape} and {c.shape}.")
    if a.dtype != c.dtype:
        raise TypeError(f"symmetric_product requires a and c of one dtype, got "
                        f"{a.dtype.name} and {c.dtype.name}")
    out = (alpha * (a @ jnp.swapaxes(a, -1, -2)) + beta * c).astype(a.dtype)
    if symmetrize_output:
        out = jnp.tril(out) + jnp.swapaxes(jnp.tril(out, -1), -1, -2)
    return out


def cholesky_update(r_matrix: ArrayLike, w_vector: ArrayLike) -> Array:
    """The upper Cholesky factor of ``r^T r + w w^T`` from that of ``r^T r`` (a rank-one
    update), by one Givens rotation per row.

    Args:
      r_matrix: ``(n, n)`` upper triangular with a positive diagonal (real).
      w_vector: ``(n,)``.

    Returns:
      ``(n, n)`` upper triangular ``r'`` with ``r'^T r' = r^T r + w w^T``.

    Example:
      >>> lax.linalg.cholesky_update(jnp.eye(2), jnp.array([0., 1.]))
      Array([[1.       , 0.       ],
             [0.       , 1.4142135]], dtype=float32)
    """
    import plax
    jnp = _jnp()
    r, w = jnp.asarray(r_matrix), jnp.asarray(w_vector)
    for pos, (v, rank) in enumerate(((r, 2), (w, 1))):
        if v.ndim != rank:
            raise TypeError(f"Input {pos} to cholesky_update must have a rank of exactly "
                            f"{rank}, but got shape={v.shape}")
        if v.dtype.name not in ("float32", "float64"):
            raise TypeError(f"cholesky_update does not accept dtype {v.dtype.name} at position "
                            f"{pos}. Accepted dtypes at position {pos} are subtypes of float32, "
                            f"float64.")
    if r.shape[0] != r.shape[1] or r.shape[0] != w.shape[0]:
        raise ValueError(f"Rank-1 update to Cholesky decomposition takes a square matrix and a "
                         f"vector of the same size as input. Got shapes {r.shape} and "
                         f"{w.shape} instead")
    if r.dtype != w.dtype:
        raise TypeError(f"cholesky_update requires r and w of one dtype, got {r.dtype.name} "
                        f"and {w.dtype.name}")
    n = r.shape[0]

    def step(k, carry):
        r_, w_ = carry
        row = r_[k]
        rho = jnp.hypot(row[k], w_[k])
        c, s = row[k] / rho, w_[k] / rho
        # rotate (row k, w) so that w[k] becomes 0; the entries left of k are zero in both.
        # (k is in range: a dynamic_update_slice, which loops compile natively, rather than
        # the scatter that .at[k].set stages to drop out-of-range rows)
        new_row = (c * row + s * w_)[None]
        return plax.lax.dynamic_update_slice(r_, new_row, (k, 0)), c * w_ - s * row

    r_out, _ = plax.lax.fori_loop(0, n, step, (r, w))
    return jnp.triu(r_out)


# ------------------------------------------------------------------ qdwh


def _qdwh_one(x, max_iterations: int, eps: float):
    """QR-based dynamically weighted Halley iteration for the polar factor of ``x``."""
    import plax
    jnp = _jnp()
    m, n = x.shape
    real_dt = jnp.real(x).dtype
    # ||x||_F bounds ||x||_2 from above, so the scaled matrix has singular values <= 1
    alpha = jnp.sqrt(jnp.sum(jnp.real(x * jnp.conj(x))))
    u0 = x / jnp.where(alpha == 0, jnp.ones_like(alpha), alpha).astype(x.dtype)
    tol_l = 5.0 * eps
    tol_norm = tol_l ** (1.0 / 3.0)
    eye = jnp.eye(n, dtype=x.dtype)

    def cond(carry):
        _, l, k, diff = carry
        return (k < max_iterations) & ((jnp.abs(1 - l) > tol_l) | (diff > tol_norm))

    def body(carry):
        u, l, k, _ = carry
        l2 = l * l
        dd = jnp.cbrt(4.0 * (1.0 - l2) / (l2 * l2))
        sqd = jnp.sqrt(1.0 + dd)
        a = sqd + 0.5 * jnp.sqrt(8.0 - 4.0 * dd + 8.0 * (2.0 - l2) / (l2 * sqd))
        b = (a - 1.0) ** 2 / 4.0
        c = a + b - 1.0
        # u <- (b/c) u + (a - b/c)/sqrt(c) Q1 Q2^H with [sqrt(c) u; I] = [Q1; Q2] R
        q, _ = jnp.linalg.qr(jnp.concatenate([jnp.sqrt(c).astype(x.dtype) * u, eye], axis=0))
        q1, q2 = q[:m], q[m:]
        u_new = ((b / c).astype(x.dtype) * u
                 + ((a - b / c) / jnp.sqrt(c)).astype(x.dtype) * (q1 @ jnp.conj(q2.T)))
        l_new = jnp.minimum(l * (a + b * l2) / (1.0 + c * l2), 1.0)
        diff = jnp.sqrt(jnp.sum(jnp.abs(u_new - u) ** 2))
        return u_new, l_new.astype(real_dt), k + 1, diff.astype(real_dt)

    init = (u0, jnp.asarray(eps, real_dt), jnp.asarray(0, np.int32),
            jnp.asarray(np.inf, real_dt))
    u, l, k, diff = plax.lax.while_loop(cond, body, init)
    h = jnp.conj(u.T) @ x
    h = (h + jnp.conj(h.T)) / 2
    converged = (jnp.abs(1 - l) <= tol_l) & (diff <= tol_norm)
    return u, h, k, converged


def qdwh(x: ArrayLike, *, is_hermitian: bool = False, max_iterations: Optional[int] = None,
         eps: Optional[float] = None, dynamic_shape: Optional[tuple] = None) -> tuple:
    """The polar decomposition ``x = u h`` by the QR-based dynamically weighted Halley
    iteration (QDWH): ``u`` with orthonormal columns, ``h`` Hermitian positive semi-definite.

    Args:
      x: ``(m, n)`` with ``m >= n`` (batch with ``vmap``).
      is_hermitian: ``x`` is Hermitian (accepted; plax iterates the same way).
      max_iterations: the iteration cap (default 10).
      eps: the convergence tolerance's unit (default the dtype's machine epsilon).
      dynamic_shape: not supported (pass None).

    Returns:
      ``(u, h, num_iters, is_converged)``.

    Example:
      >>> u, h, k, ok = lax.linalg.qdwh(jnp.array([[2.0, 0.0], [0.0, -3.0]]))
      >>> jnp.round(h, 4)
      Array([[2., 0.],
             [0., 3.]], dtype=float32)
    """
    jnp = _jnp()
    x = jnp.asarray(x)
    check_inexact("qdwh", x, 0)
    if dynamic_shape is not None:
        raise NotImplementedError("qdwh: dynamic_shape is not supported by plax; pass None")
    if x.ndim != 2:
        raise ValueError(f"qdwh requires a matrix (batch it with vmap), got shape {x.shape}")
    m, n = x.shape
    if m < n:
        raise ValueError("The input matrix of shape M x N must have M >= N.")
    max_iterations = 10 if max_iterations is None else int(max_iterations)
    eps = float(jnp.finfo(x.dtype).eps) if eps is None else float(eps)
    return _qdwh_one(x, max_iterations, eps)


# ------------------------------------------------------------------ schur


def _upper_from_basis(a: Array, basis: Array) -> tuple:
    """``(T, Z)`` with ``Z`` the unitary factor of ``basis = Z R`` and ``T = Z^H a Z``: when the
    leading columns of ``basis`` span invariant subspaces of ``a``, ``T`` is (block) upper
    triangular."""
    jnp = _jnp()
    z, _ = jnp.linalg.qr(basis)
    t = jnp.conj(z).T @ a @ z
    return t, z


def schur_matrix(a: Array, output: str) -> tuple:
    """The Schur form ``(T, Z)`` of one square inexact matrix (``a = Z T Z^H``), from its
    eigenvectors ordered by eigenvalue (real part, then imaginary) and orthonormalised by QR.

    For real ``a`` and ``output="real"``, each complex conjugate pair contributes the real and
    imaginary parts of its vector, giving a real quasi-triangular ``T`` with 2x2 blocks. Assumes
    ``a`` diagonalizable; accuracy falls as its eigenvector matrix becomes ill-conditioned.
    """
    jnp = _jnp()
    w, v = jnp.linalg.eig(a)
    order = jnp.lexsort((jnp.imag(w), jnp.real(w)))
    w, v = w[order], v[:, order]
    if output == "complex" or jnp.issubdtype(a.dtype, jnp.complexfloating):
        t, z = _upper_from_basis(a.astype(v.dtype), v)
        return jnp.triu(t), z
    # real output: each conjugate pair (adjacent after the sort, negative imaginary part first)
    # contributes the real and imaginary parts of its positive-imaginary eigenvector
    im = jnp.imag(w)
    v_next = jnp.roll(v, -1, axis=1)
    cols = jnp.where(im[None, :] < 0, jnp.real(v_next),
                     jnp.where(im[None, :] > 0, jnp.imag(v), jnp.real(v)))
    t, z = _upper_from_basis(a, cols.astype(a.dtype))
    # exact zeros below the diagonal, except inside the 2x2 blocks of conjugate pairs
    sub = jnp.diagonal(t, -1) * (im[:-1] < 0).astype(t.dtype)
    return jnp.triu(t) + jnp.diag(sub, -1), z


def schur(x: ArrayLike, *, compute_schur_vectors: bool = True, sort_eig_vals: bool = False,
          select_callable: Optional[Callable[..., Any]] = None) -> tuple:
    """The Schur decomposition ``x = vs @ t @ vs^H`` (``vs`` unitary; ``t`` upper triangular
    for complex ``x``, quasi upper triangular with 2x2 blocks for real ``x``).

    Computed from the eigendecomposition (see ``plax.scipy.linalg.schur``): assumes ``x``
    diagonalizable, and orders the eigenvalues on ``t``'s diagonal by real then imaginary
    part (LAPACK's ``gees`` order differs; Schur forms are not unique).

    Args:
      x: ``(..., n, n)``.
      compute_schur_vectors: also return ``vs``.
      sort_eig_vals, select_callable: LAPACK's eigenvalue selection; not supported (pass
        False and None).

    Returns:
      ``[t, vs]``, or ``[t]`` without ``compute_schur_vectors`` (lists, as JAX's).

    Example:
      >>> t, vs = lax.linalg.schur(jnp.array([[1.0, 2.0], [0.0, 3.0]]))
      >>> jnp.round(jnp.diagonal(t), 4)
      Array([1., 3.], dtype=float32)
    """
    jnp = _jnp()
    x = jnp.asarray(x)
    check_inexact("schur", x, 0)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise ValueError(f"The input to schur must be a square matrix. Got shape {x.shape}.")
    if sort_eig_vals or select_callable is not None:
        raise NotImplementedError("schur: sort_eig_vals and select_callable are not supported "
                                  "by plax (its Schur form comes from the eigenvectors)")
    t, vs = over_batch(lambda a: schur_matrix(a, "real"), "(n,n)->(n,n),(n,n)", x)
    return [t, vs] if compute_schur_vectors else [t]
