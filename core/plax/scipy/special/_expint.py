"""Exponential integrals: exp1 (``E1``), expi (``Ei``) and expn (``E_n``).

Small arguments sum the power series, large ones evaluate the continued fraction of ``E_n``
backwards (a fixed number of terms, ample for every float dtype) or ``Ei``'s asymptotic
series. Derivatives are given in closed form through :func:`plax.custom_jvp`.
"""
from __future__ import annotations

import numpy as np

import plax
from plax import lax
from plax import numpy as jnp

from ._util import Array, ArrayLike, const, inexact

__all__ = ["exp1", "expi", "expn"]

_EULER = 0.5772156649015329
_SERIES_MAX_X = 1.0      # E_n: power series up to here, continued fraction beyond
_SERIES_TERMS = 30
_CF_TERMS = 100
_EI_ASYMPTOTIC_X = 40.0  # Ei: power series up to here, asymptotic series beyond
_EI_SERIES_TERMS = 160
_EI_ASYMPTOTIC_TERMS = 40


def _expn_series(n: Array, x: Array) -> Array:
    """``E_n(x)`` for ``0 < x <= 1`` and integer ``n >= 1`` by its power series:
    ``(-x)^(n-1)/(n-1)! (psi(n) - log x) - sum_{k != n-1} (-x)^k / ((k - n + 1) k!)``."""
    one = const(x, 1.0)
    lead = (lax.exp((n - one) * jnp.log(x) - lax.lgamma(n))
            * jnp.where(jnp.fmod(n - one, 2) == 0, one, -one)
            * (lax.digamma(n) - jnp.log(x)))

    def body(k, carry):
        total, power = carry  # power = (-x)^k / k!
        kf = k.astype(x.dtype) if hasattr(k, "astype") else const(x, k)
        denom = kf - n + one
        safe = jnp.where(denom == 0, one, denom)
        total = total - jnp.where(denom == 0, jnp.zeros_like(x), power / safe)
        return total, -power * x / (kf + one)

    total, _ = lax.fori_loop(0, _SERIES_TERMS, body, (jnp.zeros_like(x), jnp.ones_like(x)))
    return lead + total


def _expn_cf(n: Array, x: Array) -> Array:
    """``E_n(x)`` for ``x > 1`` by its continued fraction
    ``e^-x / (x + n - 1 n / (x + n + 2 - 2 (n + 1) / (x + n + 4 - ...)))``, evaluated backwards."""
    def body(j, t):
        i = const(x, _CF_TERMS) - (j.astype(x.dtype) if hasattr(j, "astype") else const(x, j))
        return x + n + 2 * (i - 1) - i * (n + i - 1) / t

    t = lax.fori_loop(0, _CF_TERMS, body, x + n + 2 * _CF_TERMS)
    return lax.exp(-x) / t


def _expn_value(n: Array, x: Array) -> Array:
    zero, one = const(x, 0.0), const(x, 1.0)
    ok = (n >= 0) & (x >= 0) & (n == jnp.floor(n)) & ~jnp.isnan(x)
    small = x <= _SERIES_MAX_X
    pos_n = jnp.where(ok & (n >= 1), n, one)
    xs = jnp.where(small & (x > 0), x, one)
    xl = jnp.where(small | ~jnp.isfinite(x), const(x, 3.0), x)
    out = jnp.where(small, _expn_series(pos_n, xs), _expn_cf(pos_n, xl))
    out = jnp.where(jnp.isposinf(x), zero, out)
    safe_x = jnp.where(x > 0, x, one)
    out = jnp.where(n == 0, lax.exp(-safe_x) / safe_x, out)
    at_zero = jnp.where(n > 1, one / jnp.where(n > 1, n - one, one), const(x, np.inf))
    out = jnp.where(x == 0, at_zero, out)
    return jnp.where(ok, out, const(x, np.nan))


@plax.custom_jvp
def _expn(n: Array, x: Array) -> Array:
    return _expn_value(n, x)


def _expn_dx(n: Array, x: Array) -> Array:
    """``dE_n/dx = -E_{n-1}(x)``, and ``-e^-x (x + 1) / x^2`` for ``n = 0``."""
    one = const(x, 1.0)
    safe_x = jnp.where(x > 0, x, one)
    e0 = -lax.exp(-safe_x) * (safe_x + one) / (safe_x * safe_x)
    return jnp.where(n == 0, e0, -_expn(jnp.maximum(n - one, const(n, 0.0)), x))


_expn.defjvps(lambda n_dot, ans, n, x: jnp.zeros_like(ans),
              lambda x_dot, ans, n, x: _expn_dx(n, x) * x_dot)


def expn(n: ArrayLike, x: ArrayLike) -> Array:
    """The generalized exponential integral ``E_n(x) = integral_1^inf e^(-x t) / t^n dt``.

    Args:
      n: non-negative integer orders (any real dtype; non-integers give NaN).
      x: non-negative arguments; broadcast with ``n``.

    Returns:
      ``E_n(x)`` of the promoted inexact dtype; NaN for ``n < 0`` or ``x < 0``;
      ``1 / (n - 1)`` at ``x = 0`` for ``n > 1`` and ``inf`` for ``n <= 1``.
      Differentiable in ``x`` (``dE_n/dx = -E_{n-1}``); the derivative in ``n`` is zero.

    Example:
      >>> from plax.scipy.special import expn
      >>> expn(2, 1.0)
      Array(0.14849555, dtype=float32)
    """
    n, x = inexact("expn", n, x)
    return _expn(n, x)


def exp1(x: ArrayLike) -> Array:
    """The exponential integral ``E1(x) = integral_x^inf e^-t / t dt``, for real ``x``.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``E1(x)``: ``inf`` at 0 and NaN for ``x < 0`` (SciPy's real-valued convention).

    Example:
      >>> from plax.scipy.special import exp1
      >>> round(float(exp1(1.0)), 6)
      0.219384
    """
    x, = inexact("exp1", x)
    return _expn(jnp.ones_like(x), x)


def _expi_series(x: Array) -> Array:
    """``Ei(x) = gamma + log x + sum_k x^k / (k k!)`` for ``0 < x``."""
    def body(k, carry):
        total, term = carry  # term = x^k / k!
        kf = k.astype(x.dtype) if hasattr(k, "astype") else const(x, k)
        total = total + term / kf
        return total, term * x / (kf + 1)

    total, _ = lax.fori_loop(1, _EI_SERIES_TERMS, body, (jnp.zeros_like(x), x))
    return const(x, _EULER) + jnp.log(x) + total


def _expi_asymptotic(x: Array) -> Array:
    """``Ei(x) ~ e^x / x sum_k k! / x^k`` for large ``x``."""
    def body(k, carry):
        total, term = carry
        kf = k.astype(x.dtype) if hasattr(k, "astype") else const(x, k)
        term = term * kf / x
        return total + term, term

    total, _ = lax.fori_loop(1, _EI_ASYMPTOTIC_TERMS, body, (jnp.ones_like(x), jnp.ones_like(x)))
    return lax.exp(x) / x * total


@plax.custom_jvp
def _expi(x: Array) -> Array:
    one = const(x, 1.0)
    neg = -_expn_value(one, jnp.where(x < 0, -x, one))
    big = x > _EI_ASYMPTOTIC_X
    series = _expi_series(jnp.where((x > 0) & ~big, x, one))
    asym = _expi_asymptotic(jnp.where(big & jnp.isfinite(x), x, const(x, 2 * _EI_ASYMPTOTIC_X)))
    out = jnp.where(x < 0, neg, jnp.where(big, asym, series))
    out = jnp.where(jnp.isposinf(x), const(x, np.inf), out)
    out = jnp.where(x == 0, const(x, -np.inf), out)
    return jnp.where(jnp.isnan(x), x, out)


_expi.defjvps(lambda t, ans, x: lax.exp(x) / x * t)


def expi(x: ArrayLike) -> Array:
    """The exponential integral ``Ei(x) = -PV integral_{-x}^inf e^-t / t dt``.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``Ei(x)``: ``-inf`` at 0, ``-E1(-x)`` for ``x < 0``; derivative ``e^x / x``.

    Example:
      >>> from plax.scipy.special import expi
      >>> expi(1.0)
      Array(1.8951179, dtype=float32)
    """
    x, = inexact("expi", x)
    return _expi(x)
