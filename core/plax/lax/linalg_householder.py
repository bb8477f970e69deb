"""Householder reflections in LAPACK's conventions, and the ``lax.linalg`` functions built on
them: ``householder_product`` (``orgqr``), ``ormqr``, ``hessenberg`` (``gehrd``) and
``tridiagonal`` (``sytrd``/``hetrd``).

No primitive of their own: each is a ``fori_loop`` over the reflectors, written with
``plax.numpy`` on one matrix and batched over leading axes by ``vmap``, so every backend and
transform gets them from the primitives they are made of.

A reflector is ``H = I - tau v v^H`` with ``v[j] = 0`` before its pivot row, ``v[pivot] = 1``
and the rest stored in the matrix below the pivot, as LAPACK's ``larfg`` makes it: ``H^H``
sends ``[alpha, x]`` to ``[beta, 0]`` with ``beta`` real and of the opposite sign to
``Re(alpha)``, and ``tau = 0`` (``H = I``) when there is nothing to annihilate.
"""
from __future__ import annotations

from typing import Any, Callable

Array = Any
ArrayLike = Any

_INEXACT = ("float32", "float64", "complex64", "complex128")


def _jnp():
    import plax.numpy as jnp
    return jnp


def check_inexact(name: str, x, position: int) -> None:
    """JAX's TypeError for an argument of a dtype other than float32/64 or complex64/128."""
    if x.dtype.name not in _INEXACT:
        raise TypeError(f"{name} does not accept dtype {x.dtype.name} at position {position}. "
                        f"Accepted dtypes at position {position} are subtypes of floating, "
                        f"complexfloating.")


def over_batch(f: Callable, signature: str, *args):
    """``f`` (written for one problem) mapped over the leading batch axes of ``args`` by
    ``jnp.vectorize`` with the generalised-ufunc ``signature`` of its core axes."""
    return _jnp().vectorize(f, signature=signature)(*args)


def _larfg(alpha, x, rest_mask):
    """LAPACK's ``larfg`` on the vector ``[alpha, x[rest_mask]]``.

    Args:
      alpha: the pivot entry (scalar).
      x: a full-length vector; only the entries where ``rest_mask`` holds are annihilated.
      rest_mask: boolean vector of ``x``'s length.

    Returns:
      ``(beta, v_rest, tau)``: ``beta`` (real, ``alpha``'s dtype), ``v_rest`` (zero off the
      mask) and ``tau``.
    """
    jnp = _jnp()
    x = jnp.where(rest_mask, x, jnp.zeros_like(x))
    xnorm2 = jnp.sum(jnp.real(x * jnp.conj(x)))
    ar, ai = jnp.real(alpha), jnp.imag(alpha)
    trivial = (xnorm2 == 0) & (ai == 0)
    norm = jnp.sqrt(ar * ar + ai * ai + xnorm2)
    # -sign(Re alpha) * norm, with +0 counted positive as Fortran's SIGN does
    beta_r = jnp.where(ar >= 0, -norm, norm)
    safe_beta = jnp.where(trivial, jnp.ones_like(beta_r), beta_r)
    beta = jnp.where(trivial, ar, beta_r).astype(x.dtype)
    tau = jnp.where(trivial, jnp.zeros_like(alpha),
                    (safe_beta.astype(x.dtype) - alpha) / safe_beta.astype(x.dtype))
    denom = jnp.where(trivial, jnp.ones_like(alpha), alpha - safe_beta.astype(x.dtype))
    v = jnp.where(trivial, jnp.zeros_like(x), x / denom)
    beta = jnp.where(trivial, alpha, beta)
    return beta, v, tau


def _reflector(a, k, pivot):
    """The full reflector vector stored in column ``k`` of ``a``: 1 at row ``pivot``, the
    column's entries below it, zeros above."""
    jnp = _jnp()
    rows = jnp.arange(a.shape[0])
    col = a[:, k]
    return jnp.where(rows == pivot, jnp.ones_like(col),
                     jnp.where(rows > pivot, col, jnp.zeros_like(col)))


def _q_from_reflectors(a, taus, ncols: int, offset: int = 0):
    """``H(0) ... H(k-1)`` applied to the identity's first ``ncols`` columns, reflector ``i``
    stored in column ``i`` of ``a`` with its pivot at row ``i + offset``."""
    import plax
    jnp = _jnp()
    m = a.shape[0]
    k = taus.shape[0]
    q0 = jnp.eye(m, ncols, dtype=a.dtype)
    if k == 0:   # no reflectors (the loop's body could not even be traced)
        return q0

    def step(j, q):
        i = k - 1 - j          # innermost first: Q = H(0) (H(1) (... H(k-1) I))
        v = _reflector(a, i, i + offset)
        return q - taus[i] * jnp.outer(v, jnp.conj(v) @ q)

    return plax.lax.fori_loop(0, k, step, q0)


def householder_product(a: ArrayLike, taus: ArrayLike) -> Array:
    """The product ``Q`` of ``k`` Householder reflectors, as LAPACK's ``orgqr``/``ungqr``
    computes it: its first ``n`` columns.

    ``Q = H(0) H(1) ... H(k-1)`` with ``H(i) = I - taus[i] v_i v_i^H``.

    Args:
      a: ``(..., m, n)`` with ``m >= n``; column ``i`` holds reflector ``i`` below row ``i``
        (its entry at row ``i`` is taken as 1, entries above as 0).
      taus: ``(..., k)`` with ``k <= n``, the reflectors' scale factors.

    Returns:
      ``(..., m, n)``: the first ``n`` columns of ``Q`` (orthonormal).

    Example:
      >>> q = lax.linalg.householder_product(jnp.zeros((3, 2)), jnp.zeros(2))
      >>> q.shape
      (3, 2)
    """
    jnp = _jnp()
    a, taus = jnp.asarray(a), jnp.asarray(taus)
    check_inexact("householder_product", a, 0)
    check_inexact("householder_product", taus, 1)
    if a.ndim < 2:
        raise ValueError(f"householder_product requires its first argument to have rank at "
                         f"least 2, got shape {a.shape}")
    m, n = a.shape[-2:]
    if m < n:
        raise ValueError(f"The first argument to householder_product must have at least as "
                         f"many rows as columns, got shape {a.shape}")
    if taus.ndim != a.ndim - 1 or taus.shape[:-1] != a.shape[:-2] or taus.shape[-1] > n:
        raise ValueError(f"householder_product requires taus of shape batch + (k,) with "
                         f"k <= min(m, n) = {n} and the batch of a, got a shape {a.shape} and "
                         f"taus shape {taus.shape}")
    if a.dtype != taus.dtype:
        raise TypeError(f"householder_product requires a and taus of one dtype, got "
                        f"{a.dtype.name} and {taus.dtype.name}")
    return over_batch(lambda a_, t_: _q_from_reflectors(a_, t_, n), "(m,n),(k)->(m,n)", a, taus)


def ormqr(a: ArrayLike, taus: ArrayLike, c: ArrayLike, *, left: bool = True,
          transpose: bool = False) -> Array:
    """Multiplies ``c`` by the product ``Q`` of the Householder reflectors stored in ``a`` and
    ``taus`` (LAPACK's ``ormqr``/``unmqr``).

    ``Q = H(0) H(1) ... H(k-1)`` is formed (``m x m`` or ``n x n``), then multiplied.

    Args:
      a: ``(..., m, k)`` (left) or ``(..., n, k)`` (right): reflector ``i`` below row ``i`` of
        column ``i``, as :func:`qr` with LAPACK's ``geqrf`` leaves them.
      taus: ``(..., k)``.
      c: ``(..., m, n)``.
      left: compute ``op(Q) @ c`` (else ``c @ op(Q)``).
      transpose: ``op(Q) = Q^H`` (the conjugate transpose; else ``Q``).

    Returns:
      ``(..., m, n)``.

    Example:
      >>> lax.linalg.ormqr(jnp.zeros((2, 1)), jnp.zeros(1), jnp.ones((2, 3))).shape
      (2, 3)
    """
    jnp = _jnp()
    a, taus, c = jnp.asarray(a), jnp.asarray(taus), jnp.asarray(c)
    for pos, x in enumerate((a, taus, c)):
        check_inexact("ormqr", x, pos)
    if a.ndim < 2 or c.ndim != a.ndim or taus.ndim != a.ndim - 1:
        raise ValueError(f"ormqr requires a and c of one rank (at least 2) and taus of one "
                         f"less, got shapes {a.shape}, {taus.shape} and {c.shape}")
    nq = c.shape[-2] if left else c.shape[-1]
    if a.shape[-2] != nq:
        side = "rows" if left else "columns"
        raise ValueError(f"ormqr with left={left} expects c to have the same number of {side} "
                         f"as the Householder matrix a has rows. Got a shape {a.shape} and c "
                         f"shape {c.shape}.")
    if taus.shape[-1] > min(a.shape[-2:]):
        raise ValueError(f"ormqr requires at most min(a.shape[-2:]) taus, got a shape "
                         f"{a.shape} and taus shape {taus.shape}")
    if not a.dtype == taus.dtype == c.dtype:
        raise TypeError(f"ormqr requires a, taus and c of one dtype, got {a.dtype.name}, "
                        f"{taus.dtype.name} and {c.dtype.name}")

    def one(a_, t_, c_):
        q = _q_from_reflectors(a_, t_, nq)
        if transpose:
            q = jnp.conj(q.T)
        return q @ c_ if left else c_ @ q

    return over_batch(one, "(q,k),(t),(m,n)->(m,n)", a, taus, c)


def _hessenberg_one(a):
    import plax
    jnp = _jnp()
    n = a.shape[0]
    rows = jnp.arange(n)

    def step(k, carry):
        h, store, taus = carry
        col = h[:, k]
        beta, v_rest, tau = _larfg(col[k + 1], col, rows > k + 1)
        v = jnp.where(rows == k + 1, jnp.ones_like(col), v_rest)
        # H^H h H with H = I - tau v v^H: from the left on the rows, from the right on the columns
        h = h - jnp.conj(tau) * jnp.outer(v, jnp.conj(v) @ h)
        h = h - tau * jnp.outer(h @ v, jnp.conj(v))
        store = store.at[:, k].set(jnp.where(rows > k + 1, v_rest,
                                             jnp.where(rows == k + 1, beta, store[:, k])))
        return h, store, taus.at[k].set(tau)

    taus0 = jnp.zeros((max(n - 1, 0),), a.dtype)
    if n <= 1:   # already Hessenberg, no reflectors
        return a, taus0
    h, store, taus = plax.lax.fori_loop(0, n - 1, step, (a, a, taus0))
    # the reduced matrix on and above the subdiagonal; the reflectors (and the subdiagonal's
    # betas, recorded as LAPACK writes them) below
    return jnp.triu(h, 1) + jnp.tril(store, -1) + jnp.diag(jnp.diagonal(h)), taus


def hessenberg(a: ArrayLike) -> tuple:
    """Reduces square matrices to upper Hessenberg form ``H = Q^H a Q`` by Householder
    reflections, in LAPACK's ``gehrd`` layout.

    Args:
      a: ``(..., n, n)``.

    Returns:
      ``(a_out, taus)``: ``a_out`` holds ``H`` on and above its first subdiagonal and, below
      it, reflector ``i``'s entries under row ``i + 1`` of column ``i``; ``taus`` ``(..., n - 1)``.
      ``Q = H(0) ... H(n-2)`` (e.g. :func:`householder_product` of the stored reflectors).

    Example:
      >>> h, taus = lax.linalg.hessenberg(jnp.eye(3))
      >>> taus.shape
      (2,)
    """
    jnp = _jnp()
    a = jnp.asarray(a)
    check_inexact("hessenberg", a, 0)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"Argument to Hessenberg reduction must have shape [..., n, n], got "
                         f"shape {a.shape}")
    return over_batch(_hessenberg_one, "(n,n)->(n,n),(k)", a)


def _tridiagonal_lower(a):
    """``hetrd`` on the Hermitian matrix held by ``a``'s lower triangle."""
    import plax
    jnp = _jnp()
    n = a.shape[0]
    rows = jnp.arange(n)
    low = jnp.tril(a, -1)
    herm = low + jnp.conj(low.T) + jnp.diag(jnp.real(jnp.diagonal(a)).astype(a.dtype))
    real_dt = jnp.real(a).dtype

    def step(k, carry):
        h, store, e, taus = carry
        col = h[:, k]
        beta, v_rest, tau = _larfg(col[k + 1], col, rows > k + 1)
        v = jnp.where(rows == k + 1, jnp.ones_like(col), v_rest)
        h = h - jnp.conj(tau) * jnp.outer(v, jnp.conj(v) @ h)
        h = h - tau * jnp.outer(h @ v, jnp.conj(v))
        store = store.at[:, k].set(jnp.where(rows > k + 1, v_rest, store[:, k]))
        return h, store, e.at[k].set(jnp.real(beta)), taus.at[k].set(tau)

    m = max(n - 1, 0)
    init = (herm, a, jnp.zeros((m,), real_dt), jnp.zeros((m,), a.dtype))
    # no reflectors for n <= 1 (the loop's body could not even be traced)
    h, store, e, taus = plax.lax.fori_loop(0, m, step, init) if m else init
    d = jnp.real(jnp.diagonal(h))
    arr = (jnp.triu(a, 1) + jnp.tril(store, -2) + jnp.diag(d.astype(a.dtype))
           + jnp.diag(e.astype(a.dtype), -1))
    return arr, d, e, taus


def _tridiagonal_upper(a):
    """``hetrd`` on the upper triangle: the lower case on ``a`` reversed along both axes (its
    upper triangle becomes the lower one, and the reflectors run from the last column back,
    as LAPACK's upper case runs them)."""
    jnp = _jnp()
    flipped = a[::-1, ::-1]
    arr, d, e, taus = _tridiagonal_lower(flipped)
    arr = arr[::-1, ::-1]
    # LAPACK leaves the triangle it did not read as it was
    arr = jnp.triu(arr) + jnp.tril(a, -1)
    return arr, d[::-1], e[::-1], taus[::-1]


def tridiagonal(a: ArrayLike, *, lower: bool = True) -> tuple:
    """Reduces Hermitian matrices to real symmetric tridiagonal form ``T = Q^H a Q`` by
    Householder reflections, in LAPACK's ``sytrd``/``hetrd`` layout.

    Args:
      a: ``(..., n, n)``; only the triangle chosen by ``lower`` is read.
      lower: read (and overwrite) the lower triangle, else the upper.

    Returns:
      ``(arr, d, e, taus)``: ``d`` ``(..., n)`` the diagonal and ``e`` ``(..., n - 1)`` the
      off-diagonal of ``T`` (both real); ``arr`` is ``a`` with the chosen triangle overwritten
      by ``d``, ``e`` and the reflectors (lower: reflector ``i`` below row ``i + 1`` of column
      ``i``; upper: above row ``i`` of column ``i + 1``); ``taus`` ``(..., n - 1)``.

    Example:
      >>> arr, d, e, taus = lax.linalg.tridiagonal(jnp.eye(3))
      >>> d
      Array([1., 1., 1.], dtype=float32)
    """
    jnp = _jnp()
    a = jnp.asarray(a)
    check_inexact("tridiagonal", a, 0)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError(f"The input to tridiagonal must be a square matrix. Got shape "
                         f"{a.shape}.")
    return over_batch(_tridiagonal_lower if lower else _tridiagonal_upper,
                      "(n,n)->(n,n),(n),(k),(k)", a)


def hessenberg_q(a_out: Array, taus: Array) -> Array:
    """The unitary ``Q`` of a :func:`hessenberg` reduction (reflector ``i`` pivots at row
    ``i + 1``), for ``plax.scipy.linalg.hessenberg(calc_q=True)``."""
    n = a_out.shape[-1]
    return over_batch(lambda a_, t_: _q_from_reflectors(a_, t_, n, offset=1), "(n,n),(k)->(n,n)",
                      a_out, taus)
