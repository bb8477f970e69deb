"""A line search satisfying the strong Wolfe conditions (Nocedal & Wright, Numerical
Optimization, algorithms 3.5 and 3.6), written on ``lax.while_loop`` so it stages under jit."""
from __future__ import annotations

from typing import Any, Callable, NamedTuple


import plax
from plax import lax
from plax import numpy as jnp

Array = Any

__all__ = ["LineSearchResults", "line_search"]


class LineSearchResults(NamedTuple):
    """What :func:`line_search` found.

    failed: no step met the strong Wolfe conditions; nit: bracketing iterations used;
    nfev/ngev: function and gradient evaluations; k: the final iteration counter;
    a_k: the step; f_k, g_k: value and gradient at ``xk + a_k * pk``; status: 0 success,
    1 zoom failed, 3 too many iterations.
    """
    failed: Array
    nit: Array
    nfev: Array
    ngev: Array
    k: Array
    a_k: Array
    f_k: Array
    g_k: Array
    status: Array


def _pick(mask: Array, new: dict, old: dict) -> dict:
    """Each entry of ``new`` where ``mask`` holds, else that of ``old``."""
    return {k: jnp.where(mask, new[k], old[k]) for k in new}


def _cubic_minimizer(a, fa, fpa, b, fb, c, fc):
    """Minimizer of the cubic through ``(a, fa)`` with slope ``fpa``, ``(b, fb)``, ``(c, fc)``."""
    db, dc = b - a, c - a
    rb, rc = fb - fa - fpa * db, fc - fa - fpa * dc
    denom = (db * dc) ** 2 * (db - dc)
    coef_a = (dc ** 2 * rb - db ** 2 * rc) / denom
    coef_b = (-dc ** 3 * rb + db ** 3 * rc) / denom
    disc = coef_b * coef_b - 3.0 * coef_a * fpa
    return a + (-coef_b + jnp.sqrt(disc)) / (3.0 * coef_a)


def _quadratic_minimizer(a, fa, fpa, b, fb):
    """Minimizer of the parabola through ``(a, fa)`` with slope ``fpa`` and ``(b, fb)``."""
    db = b - a
    curv = (fb - fa - fpa * db) / (db * db)
    return a - fpa / (2.0 * curv)


def _zoom(phi_dphi: Callable, sufficient_decrease: Callable, curvature: Callable,
          lo: tuple, hi: tuple, g_init: Array, skip: Array) -> dict:
    """Algorithm 3.6: shrink the bracket ``[lo, hi]`` (each ``(a, phi, dphi)``) until a step
    satisfies both Wolfe conditions; interpolates cubically, then quadratically, else bisects.
    Does nothing when ``skip`` is true."""
    a_lo, phi_lo, dphi_lo = lo
    a_hi, phi_hi, dphi_hi = hi
    dt = phi_lo.dtype
    tiny = 1e-5 if jnp.finfo(dt).bits < 64 else 1e-10
    s = dict(done=jnp.asarray(False), failed=jnp.asarray(False), j=jnp.asarray(0),
             a_lo=a_lo, phi_lo=phi_lo, dphi_lo=dphi_lo,
             a_hi=a_hi, phi_hi=phi_hi, dphi_hi=dphi_hi,
             a_rec=(a_lo + a_hi) / 2.0, phi_rec=(phi_lo + phi_hi) / 2.0,
             a_star=jnp.ones_like(a_lo), phi_star=phi_lo, dphi_star=dphi_lo, g_star=g_init,
             nfev=jnp.asarray(0), ngev=jnp.asarray(0))

    def body(s):
        width = s["a_hi"] - s["a_lo"]
        left = jnp.minimum(s["a_hi"], s["a_lo"])
        right = jnp.maximum(s["a_hi"], s["a_lo"])
        failed = s["failed"] | (jnp.abs(width) <= tiny)
        cubic = _cubic_minimizer(s["a_lo"], s["phi_lo"], s["dphi_lo"], s["a_hi"], s["phi_hi"],
                                 s["a_rec"], s["phi_rec"])
        use_cubic = (s["j"] > 0) & (cubic > left + 0.2 * width) & (cubic < right - 0.2 * width)
        quad = _quadratic_minimizer(s["a_lo"], s["phi_lo"], s["dphi_lo"], s["a_hi"],
                                    s["phi_hi"])
        use_quad = ~use_cubic & (quad > left + 0.1 * width) & (quad < right - 0.1 * width)
        a_j = jnp.where(use_cubic, cubic,
                        jnp.where(use_quad, quad, (s["a_lo"] + s["a_hi"]) / 2.0))
        phi_j, dphi_j, g_j = phi_dphi(a_j)
        s = dict(s, failed=failed, nfev=s["nfev"] + 1, ngev=s["ngev"] + 1)

        to_hi = sufficient_decrease(a_j, phi_j) | (phi_j >= s["phi_lo"])
        found = curvature(dphi_j) & ~to_hi
        flip = (dphi_j * (s["a_hi"] - s["a_lo"]) >= 0.0) & ~to_hi & ~found
        to_lo = ~to_hi & ~found
        s.update(_pick(to_hi, dict(a_hi=a_j, phi_hi=phi_j, dphi_hi=dphi_j,
                                   a_rec=s["a_hi"], phi_rec=s["phi_hi"]), s))
        s.update(_pick(found, dict(a_star=a_j, phi_star=phi_j, dphi_star=dphi_j, g_star=g_j),
                       s))
        s["done"] = s["done"] | found
        s.update(_pick(flip, dict(a_hi=s["a_lo"], phi_hi=s["phi_lo"], dphi_hi=s["dphi_lo"],
                                  a_rec=s["a_hi"], phi_rec=s["phi_hi"]), s))
        s.update(_pick(to_lo & ~flip, dict(a_rec=s["a_lo"], phi_rec=s["phi_lo"]), s))
        s.update(_pick(to_lo, dict(a_lo=a_j, phi_lo=phi_j, dphi_lo=dphi_j), s))
        j = s["j"] + 1
        return dict(s, j=j, failed=s["failed"] | (j >= 30))

    return lax.while_loop(lambda s: ~s["done"] & ~skip & ~s["failed"], body, s)


def line_search(f: Callable, xk: Array, pk: Array, old_fval: Array | None = None,
                old_old_fval: Array | None = None, gfk: Array | None = None,
                c1: float = 1e-4, c2: float = 0.9, maxiter: int = 20) -> LineSearchResults:
    """Inexact line search along ``pk`` from ``xk`` meeting the strong Wolfe conditions.

    Bracketing (Nocedal & Wright algorithm 3.5) doubles the step until the bracket holds a
    minimizer, then zooms (algorithm 3.6). Stages as ``lax.while_loop``: jittable, vmappable.

    Args:
      f: scalar function of a 1-D array, differentiable with :func:`plax.grad`.
      xk: the starting point.
      pk: a descent direction.
      old_fval, gfk: ``f(xk)`` and its gradient, if already known.
      old_old_fval: ``f`` at the previous iterate; sets the first trial step as SciPy does.
      c1, c2: the constants of the sufficient-decrease and curvature conditions.
      maxiter: most bracketing iterations.

    Returns:
      A :class:`LineSearchResults`.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.optimize._line_search import line_search
      >>> res = line_search(lambda x: jnp.sum(x ** 2), jnp.array([1.0]), jnp.array([-1.0]))
      >>> float(res.a_k), bool(res.failed)
      (1.0, False)
    """
    from plax.scipy.stats._util import promote_dtypes_inexact
    xk, pk = promote_dtypes_inexact(xk, pk)
    dt = pk.dtype

    def phi_dphi(t):
        val, g = plax.value_and_grad(f)(xk + jnp.asarray(t, dtype=dt) * pk)
        return val, jnp.real(jnp.dot(g, pk)), g

    fresh = old_fval is None or gfk is None
    if fresh:
        phi0, dphi0, gfk = phi_dphi(0.0)
    else:
        phi0, dphi0 = jnp.asarray(old_fval), jnp.real(jnp.dot(gfk, pk))
    phi0 = jnp.asarray(phi0)
    if old_old_fval is None:
        first = jnp.ones((), dtype=dphi0.dtype)
    else:
        guess = 2.02 * (phi0 - old_old_fval) / dphi0
        first = jnp.where(guess > 1, jnp.ones_like(guess), guess)

    def sufficient_decrease(a, phi):
        return phi > phi0 + c1 * a * dphi0

    def curvature(dphi):
        return jnp.abs(dphi) <= -c2 * dphi0

    zero = jnp.zeros((), dtype=first.dtype)
    s = dict(done=jnp.asarray(False), failed=jnp.asarray(False), i=jnp.asarray(1),
             a_prev=zero, phi_prev=phi0, dphi_prev=dphi0,
             nfev=jnp.asarray(int(fresh)), ngev=jnp.asarray(int(fresh)),
             a_star=zero, phi_star=phi0, dphi_star=dphi0, g_star=gfk)
    keys = ("a_star", "phi_star", "dphi_star", "g_star")

    def body(s):
        a_i = jnp.where(s["i"] == 1, first, s["a_prev"] * 2.0)
        phi_i, dphi_i, g_i = phi_dphi(a_i)
        s = dict(s, nfev=s["nfev"] + 1, ngev=s["ngev"] + 1)
        bracket_hi = sufficient_decrease(a_i, phi_i) | ((phi_i >= s["phi_prev"]) & (s["i"] > 1))
        accept = curvature(dphi_i) & ~bracket_hi
        bracket_lo = (dphi_i >= 0.0) & ~bracket_hi & ~accept
        prev = (s["a_prev"], s["phi_prev"], s["dphi_prev"])
        cur = (a_i, phi_i, dphi_i)
        z1 = _zoom(phi_dphi, sufficient_decrease, curvature, prev, cur, gfk, ~bracket_hi)
        z2 = _zoom(phi_dphi, sufficient_decrease, curvature, cur, prev, gfk, ~bracket_lo)
        s["nfev"] = s["nfev"] + z1["nfev"] + z2["nfev"]
        s["ngev"] = s["ngev"] + z1["ngev"] + z2["ngev"]
        s.update(_pick(bracket_hi, {k: z1[k] for k in keys}, s))
        s.update(_pick(accept, dict(a_star=a_i, phi_star=phi_i, dphi_star=dphi_i, g_star=g_i),
                       s))
        s.update(_pick(bracket_lo, {k: z2[k] for k in keys}, s))
        s["done"] = s["done"] | bracket_hi | accept | bracket_lo
        s["failed"] = s["failed"] | (bracket_hi & z1["failed"]) | (bracket_lo & z2["failed"])
        return dict(s, i=s["i"] + 1, a_prev=a_i, phi_prev=phi_i, dphi_prev=dphi_i)

    s = lax.while_loop(lambda s: ~s["done"] & (s["i"] <= maxiter) & ~s["failed"], body, s)
    status = jnp.where(s["failed"], 1, jnp.where(s["i"] > maxiter, 3, 0))
    a_k = s["a_star"]
    if jnp.finfo(a_k.dtype).bits != 64:
        a_k = jnp.where(jnp.abs(a_k) < 1e-8, jnp.sign(a_k) * 1e-8, a_k)
    return LineSearchResults(failed=s["failed"] | ~s["done"], nit=s["i"] - 1, nfev=s["nfev"],
                             ngev=s["ngev"], k=s["i"], a_k=a_k, f_k=s["phi_star"],
                             g_k=s["g_star"], status=status)
