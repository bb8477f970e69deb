"""Krylov solvers for ``A x = b``: conjugate gradients (``cg``), BiCGSTAB (``bicgstab``) and
restarted GMRES (``gmres``), as in ``jax.scipy.sparse.linalg``.

``A`` is a matrix or a function computing ``A @ x``; so is the preconditioner ``M`` (an
approximation of ``A^-1``). The iteration is a ``while_loop`` that stops when
``||b - A x|| <= max(tol ||b||, atol)`` or after ``maxiter`` steps. Derivatives are implicit
(a custom VJP solving the transposed system), so they do not differentiate the iterations:
with respect to ``b``, to ``A`` given as an array, and to the values a matvec *function* closes
over (through :func:`plax.lax.custom_linear_solve`).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import plax
from plax import lax
from plax import numpy as jnp

Array = Any

__all__ = ["bicgstab", "cg", "gmres"]


def _as_operator(A: Any) -> Callable[[Array], Array]:
    if callable(A):
        return A
    A = jnp.asarray(A)
    return lambda x: jnp.matmul(A, x)


def _dot(x: Array, y: Array) -> Array:
    return jnp.sum(jnp.conj(x) * y)


def _norm(x: Array) -> Array:
    return jnp.sqrt(jnp.real(_dot(x, x)))


def _check(name: str, b: Array, x0: Optional[Array]) -> tuple:
    b = jnp.asarray(b)
    if not jnp.issubdtype(b.dtype, jnp.inexact):
        b = b.astype(jnp.result_type(float))
    x0 = jnp.zeros_like(b) if x0 is None else jnp.asarray(x0).astype(b.dtype)
    if x0.shape != b.shape:
        raise ValueError(f"{name}: x0 and b must have the same shape, got {x0.shape} and "
                         f"{b.shape}")
    return b, x0


def _cg_iterations(matvec, b, x0, tol, atol, maxiter, M):
    threshold = jnp.maximum(tol * _norm(b), atol) ** 2

    def cond(state):
        x, r, gamma, p, k = state
        return (jnp.real(_dot(r, r)) > threshold) & (k < maxiter)

    def body(state):
        x, r, gamma, p, k = state
        ap = matvec(p)
        alpha = gamma / _dot(p, ap)
        x = x + alpha * p
        r = r - alpha * ap
        z = M(r)
        gamma_new = _dot(r, z)
        p = z + (gamma_new / gamma) * p
        return x, r, gamma_new, p, k + 1

    r0 = b - matvec(x0)
    z0 = M(r0)
    state = (x0, r0, _dot(r0, z0), z0, jnp.asarray(0))
    return lax.while_loop(cond, body, state)[0]


def _bicgstab_iterations(matvec, b, x0, tol, atol, maxiter, M):
    threshold = jnp.maximum(tol * _norm(b), atol) ** 2
    r0 = b - matvec(x0)
    rhat = r0
    one = jnp.ones((), b.dtype)

    def cond(state):
        x, r, p, v, rho, alpha, omega, k = state
        # k < 0 marks a breakdown (rho or omega vanished)
        return (jnp.real(_dot(r, r)) > threshold) & (k < maxiter) & (k >= 0)

    def body(state):
        x, r, p, v, rho, alpha, omega, k = state
        rho_new = _dot(rhat, r)
        beta = (rho_new / rho) * (alpha / omega)
        p = r + beta * (p - omega * v)
        phat = M(p)
        v = matvec(phat)
        alpha = rho_new / _dot(rhat, v)
        s = r - alpha * v
        shat = M(s)
        t = matvec(shat)
        omega = _dot(t, s) / _dot(t, t)
        x = x + alpha * phat + omega * shat
        r = s - omega * t
        broke = (rho_new == 0) | (omega == 0)
        return x, r, p, v, rho_new, alpha, omega, jnp.where(broke, -1, k + 1)

    state = (x0, r0, jnp.zeros_like(b), jnp.zeros_like(b), one, one, one, jnp.asarray(0))
    return lax.while_loop(cond, body, state)[0]


def _gmres_iterations(matvec, b, x0, tol, atol, maxiter, M, restart):
    """Restarted GMRES on the left-preconditioned system ``M A x = M b``: each cycle builds an
    Arnoldi basis of ``restart`` vectors (modified Gram-Schmidt) and minimises the residual over
    it by least squares on the small Hessenberg matrix."""
    n = b.size
    m = max(1, min(int(restart), n))
    b_norm = _norm(M(b))
    threshold = jnp.maximum(tol * b_norm, atol)

    def cycle(x):
        r = M(b - matvec(x))
        beta = _norm(r)
        safe_beta = jnp.where(beta == 0, jnp.ones_like(beta), beta)
        basis = jnp.zeros((m + 1, n), b.dtype).at[0].set(jnp.ravel(r) / safe_beta)
        hess = jnp.zeros((m + 1, m), b.dtype)

        def arnoldi(j, carry):
            basis, hess = carry
            w = jnp.ravel(M(matvec(basis[j].reshape(b.shape))))

            def orth(i, wh):
                w, h = wh
                coef = jnp.where(i <= j, _dot(basis[i], w), jnp.zeros((), b.dtype))
                return w - coef * basis[i], h.at[i, j].set(coef)

            w, hess = lax.fori_loop(0, m, orth, (w, hess))
            h_next = _norm(w)
            hess = hess.at[j + 1, j].set(h_next.astype(b.dtype))
            safe = jnp.where(h_next == 0, jnp.ones_like(h_next), h_next)
            basis = basis.at[j + 1].set(jnp.where(h_next == 0, jnp.zeros_like(w), w / safe))
            return basis, hess

        basis, hess = lax.fori_loop(0, m, arnoldi, (basis, hess))
        rhs = jnp.zeros((m + 1,), b.dtype).at[0].set(beta.astype(b.dtype))
        y = jnp.linalg.lstsq(hess, rhs)[0]
        return x + (basis[:m].T @ y).reshape(b.shape)

    max_cycles = max(1, -(-int(maxiter) // m))

    def cond(state):
        x, k = state
        return (_norm(M(b - matvec(x))) > threshold) & (k < max_cycles)

    def body(state):
        x, k = state
        return cycle(x), k + 1

    return lax.while_loop(cond, body, (x0, jnp.asarray(0)))[0]


def _solve(name, iterate, A, b, x0, tol, atol, maxiter, M, **extra):
    b, x0 = _check(name, b, x0)
    maxiter = 10 * b.size if maxiter is None else int(maxiter)
    precond = (lambda x: x) if M is None else _as_operator(M)
    tol, atol = float(tol), float(atol)

    def run(matvec, rhs, transposed: bool = False):
        return iterate(matvec, rhs, jnp.zeros_like(rhs) if transposed else x0, tol, atol,
                       maxiter, precond, **extra)

    if callable(A):
        # values the matvec closes over get implicit gradients too (custom_linear_solve)
        x0 = lax.stop_gradient(x0)
        return lax.custom_linear_solve(
            A, b, lambda mv, rhs: run(mv, rhs),
            transpose_solve=lambda vm, rhs: run(vm, rhs, transposed=True),
            symmetric=(name == "cg"))

    A = jnp.asarray(A)

    @plax.custom_vjp
    def solve_ab(mat, rhs):
        return run(lambda v: jnp.matmul(mat, v), rhs)

    def fwd_ab(mat, rhs):
        x = solve_ab(mat, rhs)
        return x, (mat, x)

    def bwd_ab(res, g):
        mat, x = res
        gb = run(lambda v: jnp.matmul(jnp.conj(mat).T, v), g, transposed=True)
        # d(A^-1 b)/dA contracted with g: -(A^-T g) x^T
        ga = -jnp.outer(gb, jnp.conj(x)) if x.ndim == 1 else -gb @ jnp.conj(x).T
        return ga.astype(mat.dtype), gb

    solve_ab.defvjp(fwd_ab, bwd_ab)
    return solve_ab(A, b)


def cg(A: Any, b: Any, x0: Optional[Any] = None, *, tol: float = 1e-5, atol: float = 0.0,
       maxiter: Optional[int] = None, M: Any = None) -> tuple:
    """Solves ``A x = b`` for Hermitian positive-definite ``A`` by (preconditioned) conjugate
    gradients.

    Args:
      A: a matrix, or a function ``x -> A @ x``.
      b: the right-hand side (an array).
      x0: the starting guess (zeros by default).
      tol, atol: stop when ``||b - A x|| <= max(tol ||b||, atol)``.
      maxiter: at most this many iterations (default ``10 * b.size``).
      M: a preconditioner approximating ``A^-1`` (matrix or function).

    Returns:
      ``(x, None)`` (JAX returns no convergence information either).

    Example:
      >>> from plax.scipy.sparse.linalg import cg
      >>> x, _ = cg(jnp.array([[4.0, 1.0], [1.0, 3.0]]), jnp.array([1.0, 2.0]))
      >>> jnp.round(x, 5)
      Array([0.09091, 0.63636], dtype=float32)
    """
    return _solve("cg", _cg_iterations, A, b, x0, tol, atol, maxiter, M), None


def bicgstab(A: Any, b: Any, x0: Optional[Any] = None, *, tol: float = 1e-5,
             atol: float = 0.0, maxiter: Optional[int] = None, M: Any = None) -> tuple:
    """Solves ``A x = b`` for a general square ``A`` by BiCGSTAB (van der Vorst, 1992).

    Arguments as in :func:`cg`.

    Returns:
      ``(x, None)``.

    Example:
      >>> from plax.scipy.sparse.linalg import bicgstab
      >>> x, _ = bicgstab(jnp.array([[4.0, 1.0], [2.0, 3.0]]), jnp.array([1.0, 2.0]))
      >>> jnp.round(x, 5)
      Array([0.1, 0.6], dtype=float32)
    """
    return _solve("bicgstab", _bicgstab_iterations, A, b, x0, tol, atol, maxiter, M), None


def gmres(A: Any, b: Any, x0: Optional[Any] = None, *, tol: float = 1e-5, atol: float = 0.0,
          restart: int = 20, maxiter: Optional[int] = None, M: Any = None,
          solve_method: str = "batched") -> tuple:
    """Solves ``A x = b`` for a general square ``A`` by restarted GMRES(``restart``).

    Arguments as in :func:`cg`, and:
      restart: the Krylov subspace size per cycle.
      solve_method: ``"batched"`` or ``"incremental"`` (both run the same Arnoldi process
        here; accepted for JAX compatibility).

    Returns:
      ``(x, 0)`` (JAX returns 0 as its info too).

    Example:
      >>> from plax.scipy.sparse.linalg import gmres
      >>> x, info = gmres(jnp.array([[4.0, 1.0], [2.0, 3.0]]), jnp.array([1.0, 2.0]))
      >>> jnp.round(x, 4), int(info)
      (Array([0.1, 0.6], dtype=float32), 0)
    """
    if solve_method not in ("batched", "incremental"):
        raise ValueError(f"gmres: solve_method must be 'batched' or 'incremental', got "
                         f"{solve_method!r}")
    x = _solve("gmres", _gmres_iterations, A, b, x0, tol, atol, maxiter, M, restart=restart)
    return x, jnp.asarray(0)
