"""``minimize`` and its BFGS solver (Nocedal & Wright, Numerical Optimization, algorithm 6.1)."""
from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

import plax
from plax import lax
from plax import numpy as jnp

from ._line_search import line_search

Array = Any

__all__ = ["OptimizeResults", "minimize"]


class OptimizeResults(NamedTuple):
    """The outcome of :func:`minimize`.

    x: the solution; success: converged without a line-search failure; status: 0 converged,
    1 ``maxiter`` reached, 3 zoom failed, 5 line search ran out of iterations, -1 other;
    fun, jac: value and gradient at ``x``; hess_inv: the inverse-Hessian estimate;
    nfev, njev: function and gradient evaluations; nit: BFGS iterations.
    """
    x: Array
    success: bool | Array
    status: int | Array
    fun: Array
    jac: Array
    hess_inv: Array | None
    nfev: int | Array
    njev: int | Array
    nit: int | Array


def _bfgs(fun: Callable, x0: Array, maxiter: int | None = None, norm: float = np.inf,
          gtol: float = 1e-5, line_search_maxiter: int = 10) -> OptimizeResults:
    """BFGS from ``x0``: inverse-Hessian updates along strong-Wolfe steps, in a while_loop."""
    if maxiter is None:
        maxiter = int(np.size(x0)) * 200
    n = x0.shape[0]
    f0, g0 = plax.value_and_grad(fun)(x0)
    s = dict(converged=jnp.linalg.norm(g0, ord=norm) < gtol, failed=jnp.asarray(False),
             k=jnp.asarray(0), nfev=jnp.asarray(1), ngev=jnp.asarray(1), x=x0, f=f0, g=g0,
             H=jnp.eye(n, dtype=x0.dtype), f_prev=f0 + jnp.linalg.norm(g0) / 2,
             ls_status=jnp.asarray(0))

    def body(s):
        p = -jnp.dot(s["H"], s["g"])
        ls = line_search(fun, s["x"], p, old_fval=s["f"], old_old_fval=s["f_prev"], gfk=s["g"],
                         maxiter=line_search_maxiter)
        step = ls.a_k.astype(p.dtype) * p
        dg = ls.g_k - s["g"]
        rho = 1.0 / jnp.dot(dg, step)
        w = jnp.eye(n, dtype=rho.dtype) - rho * step[:, None] * dg[None, :]
        h_new = (jnp.matmul(jnp.matmul(w, s["H"]), w.T)
                 + rho * step[:, None] * step[None, :])
        return dict(converged=jnp.linalg.norm(ls.g_k, ord=norm) < gtol, failed=ls.failed,
                    k=s["k"] + 1, nfev=s["nfev"] + ls.nfev, ngev=s["ngev"] + ls.ngev,
                    x=s["x"] + step, f=ls.f_k, g=ls.g_k,
                    H=jnp.where(jnp.isfinite(rho), h_new, s["H"]), f_prev=s["f"],
                    ls_status=ls.status)

    s = lax.while_loop(lambda s: ~s["converged"] & ~s["failed"] & (s["k"] < maxiter), body, s)
    status = jnp.where(s["converged"], 0,
                       jnp.where(s["k"] == maxiter, 1,
                                 jnp.where(s["failed"], 2 + s["ls_status"], -1)))
    return OptimizeResults(x=s["x"], success=s["converged"] & ~s["failed"], status=status,
                           fun=s["f"], jac=s["g"], hess_inv=s["H"], nfev=s["nfev"],
                           njev=s["ngev"], nit=s["k"])


def minimize(fun: Callable, x0: Array, args: tuple = (), *, method: str = "BFGS",
             tol: float | None = None, options: Mapping[str, Any] | None = None
             ) -> OptimizeResults:
    """Minimize a scalar function of a 1-D array (``scipy.optimize.minimize``, BFGS only).

    Gradients come from :func:`plax.grad`. The solver is a ``lax.while_loop``, so the call
    works under ``jit`` and ``vmap``; it is not differentiable.

    Args:
      fun: ``fun(x, *args) -> scalar``, with ``x`` of shape ``(n,)``.
      x0: the initial guess, shape ``(n,)``.
      args: extra positional arguments of ``fun``; must be a tuple.
      method: ``"BFGS"`` (case-insensitive); JAX requires it, plax defaults to it.
      tol: if given and ``options`` has no ``gtol``, used as ``gtol`` (as SciPy does).
      options: ``maxiter`` (default ``200 * n``), ``norm`` (of the gradient in the
        convergence test, default ``inf``), ``gtol`` (default ``1e-5``),
        ``line_search_maxiter`` (default 10).

    Returns:
      An :class:`OptimizeResults`.

    Raises:
      TypeError: if ``args`` is not a tuple.
      ValueError: for an unknown ``method``.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.optimize import minimize
      >>> res = minimize(lambda x: jnp.sum((x - 3.0) ** 2), jnp.zeros(2), method="BFGS")
      >>> [round(float(v), 4) for v in res.x], bool(res.success)
      ([3.0, 3.0], True)
    """
    if not isinstance(args, tuple):
        raise TypeError(f"args argument to plax.scipy.optimize.minimize must be a tuple, "
                        f"got {args!r}")
    options = dict(options or {})
    if tol is not None:
        options.setdefault("gtol", tol)
    if not isinstance(method, str) or method.lower() != "bfgs":
        raise ValueError(f"Method {method} not recognized; plax.scipy.optimize.minimize "
                         f"supports method='BFGS'")
    from plax.scipy.stats._util import promote_dtypes_inexact
    x0, = promote_dtypes_inexact(x0)
    if x0.ndim != 1:
        raise ValueError(f"minimize: x0 must be 1-dimensional, got shape {x0.shape}")
    return _bfgs(lambda x: fun(x, *args), x0, **options)
