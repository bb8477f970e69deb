"""The error function family and the standard normal distribution: erf, erfc, erfinv, ndtr,
ndtri, log_ndtr."""
from __future__ import annotations

import functools
import math

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.transforms.custom_derivatives import custom_jvp

from ._util import Array, ArrayLike, const, inexact

__all__ = ["erf", "erfc", "erfinv", "ndtr", "ndtri", "log_ndtr"]

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def erf(x: ArrayLike) -> Array:
    """The error function ``erf(x) = 2/sqrt(pi) * integral_0^x exp(-t^2) dt``, elementwise.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``erf(x)`` in ``[-1, 1]``.

    Example:
      >>> from plax.scipy.special import erf
      >>> round(float(erf(1.0)), 6)
      0.842701
    """
    x, = inexact("erf", x)
    return lax.erf(x)


def erfc(x: ArrayLike) -> Array:
    """The complementary error function ``1 - erf(x)``, accurate for large ``x``.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``erfc(x)`` in ``[0, 2]``.

    Example:
      >>> from plax.scipy.special import erfc
      >>> round(float(erfc(1.0)), 6)
      0.157299
    """
    x, = inexact("erfc", x)
    return lax.erfc(x)


def erfinv(x: ArrayLike) -> Array:
    """The inverse error function, elementwise.

    Args:
      x: arraylike in ``[-1, 1]``; integers promote to floats.

    Returns:
      ``y`` with ``erf(y) == x``; ``+-inf`` at ``+-1``, NaN outside.

    Example:
      >>> from plax.scipy.special import erfinv
      >>> round(float(erfinv(0.5)), 6)
      0.476936
    """
    x, = inexact("erfinv", x)
    return lax.erf_inv(x)


def ndtr(x: ArrayLike) -> Array:
    """The standard normal CDF ``Phi(x) = (1 + erf(x / sqrt(2))) / 2``, elementwise.

    Uses ``erfc`` away from zero, so tails are accurate relative to their size.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``Phi(x)``.

    Example:
      >>> from plax.scipy.special import ndtr
      >>> float(ndtr(0.0))
      0.5
    """
    x, = inexact("ndtr", x)
    w = x * const(x, math.sqrt(0.5))
    z = lax.abs(w)
    half = const(x, 0.5)
    central = half + half * lax.erf(w)
    tail = half * lax.erfc(z)
    return jnp.where(z < const(x, math.sqrt(0.5)), central,
                     jnp.where(w > 0, const(x, 1.0) - tail, tail))


def _log_ndtr_value(x: Array, series_order: int) -> Array:
    lower = -20.0 if jnp.result_type(x) == np.float64 else -10.0
    one = const(x, 1.0)
    zero = const(x, 0.0)
    # x > 0: log(1 - Phi(-x)); lower < x <= 0: log(Phi(x)); x <= lower: the asymptotic series
    upper_val = lax.log1p(-ndtr(-jnp.maximum(x, zero)))
    middle_val = lax.log(ndtr(jnp.clip(x, const(x, lower), zero)))
    xs = jnp.minimum(x, const(x, lower))
    x2 = xs * xs
    series, term, inv = one, one, one / x2
    for n in range(1, series_order + 1):
        term = term * const(x, -(2 * n - 1)) * inv
        series = series + term
    lower_val = (-const(x, 0.5) * x2 - lax.log(-xs) - const(x, _LOG_SQRT_2PI)
                 + lax.log(series))
    return jnp.where(x > 0, upper_val, jnp.where(x > lower, middle_val, lower_val))


def log_ndtr(x: ArrayLike, series_order: int = 3) -> Array:
    """Log of the standard normal CDF, accurate far into both tails.

    ``log1p(-Phi(-x))`` for positive ``x`` (JAX switches only above 8, or 5 in float32, and
    loses relative accuracy below), ``log(Phi(x))`` down to JAX's lower threshold (-20 in
    float64, -10 otherwise) and an asymptotic series of ``series_order`` terms beyond.

    Args:
      x: arraylike; integers promote to floats.
      series_order: terms of the asymptotic series (a non-negative int, at most 30).

    Returns:
      ``log(Phi(x))``.

    Example:
      >>> from plax.scipy.special import log_ndtr
      >>> round(float(log_ndtr(0.0)), 6)  # log(1/2)
      -0.693147
    """
    if not isinstance(series_order, int) or isinstance(series_order, bool):
        raise TypeError(f"series_order must be a Python int, got {series_order!r}")
    if not 0 <= series_order <= 30:
        raise ValueError(f"series_order must be in [0, 30], got {series_order}")
    x, = inexact("log_ndtr", x)
    return _log_ndtr_fn(series_order)(x)


@functools.lru_cache(maxsize=None)
def _log_ndtr_fn(series_order: int):
    """``log_ndtr`` of one series order, with its derivative ``phi(x) / Phi(x)``."""
    @custom_jvp
    def f(x):
        return _log_ndtr_value(x, series_order)

    @f.defjvp
    def _jvp(primals, tangents):
        x, = primals
        t, = tangents
        out = f(x)
        # d/dx log Phi(x) = phi(x) / Phi(x)
        slope = lax.exp(-const(x, 0.5) * x * x - const(x, _LOG_SQRT_2PI) - out)
        return out, t * slope

    return f


# Abramowitz & Stegun 26.2.23: a rational start for the lower-tail quantile, |error| < 4.5e-4
_AS_NUM = (2.515517, 0.802853, 0.010328)
_AS_DEN = (1.432788, 0.189269, 0.001308)


def _lower_quantile(q: Array) -> Array:
    """``Phi^-1(q)`` for ``0 < q <= 1/2``: the A&S start, then Newton steps on ``log Phi``."""
    t = lax.sqrt(const(q, -2.0) * lax.log(q))
    num = const(q, _AS_NUM[0]) + t * (const(q, _AS_NUM[1]) + t * const(q, _AS_NUM[2]))
    den = const(q, 1.0) + t * (const(q, _AS_DEN[0]) + t * (const(q, _AS_DEN[1])
                                                           + t * const(q, _AS_DEN[2])))
    x = -(t - num / den)
    log_q = lax.log(q)
    for _ in range(4):
        log_cdf = lax.log(ndtr(x))
        log_pdf = -const(q, 0.5) * x * x - const(q, _LOG_SQRT_2PI)
        step = (log_cdf - log_q) * lax.exp(log_cdf - log_pdf)
        x = x - jnp.where(jnp.isfinite(step), step, jnp.zeros_like(step))
    return x


@custom_jvp
def _ndtri(p):
    half = const(p, 0.5)
    upper = p > half
    q = jnp.where(upper, const(p, 1.0) - p, p)
    q = jnp.where((q > 0) & (q <= half), q, half)  # safe operand; edges set below
    x = _lower_quantile(q)
    x = jnp.where(upper, -x, x)
    x = jnp.where(p == 0, const(p, -np.inf), jnp.where(p == 1, const(p, np.inf), x))
    return jnp.where((p < 0) | (p > 1) | jnp.isnan(p), const(p, np.nan), x)


@_ndtri.defjvp
def _ndtri_jvp(primals, tangents):
    p, = primals
    t, = tangents
    x = _ndtri(p)
    # dx/dp = 1 / phi(x) = sqrt(2 pi) exp(x^2 / 2)
    return x, t * lax.exp(const(p, 0.5) * x * x + const(p, _LOG_SQRT_2PI))


def ndtri(p: ArrayLike) -> Array:
    """The standard normal quantile function ``Phi^-1(p)``, the inverse of :func:`ndtr`.

    A rational approximation refined by Newton steps on ``log Phi``, so that tail quantiles
    are accurate to the dtype's precision.

    Args:
      p: probabilities in ``[0, 1]``; integers promote to floats.

    Returns:
      ``x`` with ``ndtr(x) == p``: ``-inf`` at 0, ``inf`` at 1, NaN outside ``[0, 1]``.

    Example:
      >>> from plax.scipy.special import ndtri
      >>> jnp.round(ndtri(0.975), 5)
      Array(1.95996, dtype=float32)
    """
    p, = inexact("ndtri", p)
    return _ndtri(p)
