"""The truncated normal distribution (``scipy.stats.truncnorm``): a normal of mean ``loc`` and
deviation ``scale`` restricted to standardized bounds ``[a, b]``."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats import norm

from ._util import NEG_INF, Array, ArrayLike, const, inexact, log_diff_exp

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]

_ARGS = ["x: points; integers promote to floats.", "a: standardized lower bound.",
         "b: standardized upper bound.", "loc: location of the normal.", "scale: its deviation."]


def _log_mass(lo: Array, hi: Array) -> Array:
    """``log(Phi(hi) - Phi(lo))``, from the tail where the interval lies for accuracy."""
    right = lo > 0
    upper = jnp.where(right, special.log_ndtr(-lo), special.log_ndtr(hi))
    lower = jnp.where(right, special.log_ndtr(-hi), special.log_ndtr(lo))
    return log_diff_exp(upper, lower)


def logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
           scale: ArrayLike = 1) -> Array:
    """Log density of the truncated normal.

    Args:
      x: points; integers promote to floats.
      a: standardized lower bound.
      b: standardized upper bound.
      loc: location of the normal.
      scale: its deviation.

    Returns:
      The log density; ``-inf`` outside ``[a, b]``.
    """
    x, a, b, loc, scale = inexact("truncnorm.logpdf", x, a, b, loc, scale)
    z = (x - loc) / scale
    out = norm.logpdf(z) - lax.log(scale) - _log_mass(a, b)
    return jnp.where((z < a) | (z > b), const(x, NEG_INF), out)


def pdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
        scale: ArrayLike = 1) -> Array:
    """Density of the truncated normal (see :func:`logpdf`).

    Args:
      x: points. a, b: standardized bounds. loc: location. scale: deviation.

    Returns:
      The density.
    """
    return lax.exp(logpdf(x, a, b, loc, scale))


def logcdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
           scale: ArrayLike = 1) -> Array:
    """Log CDF of the truncated normal.

    Args:
      x: points. a, b: standardized bounds. loc: location. scale: deviation.

    Returns:
      ``log P(X <= x)``: ``-inf`` below ``a``, 0 above ``b``.
    """
    x, a, b, loc, scale = inexact("truncnorm.logcdf", x, a, b, loc, scale)
    z = jnp.clip((x - loc) / scale, a, b)
    out = _log_mass(a, z) - _log_mass(a, b)
    return jnp.where(z <= a, const(x, NEG_INF), jnp.where(z >= b, const(x, 0.0), out))


def cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
        scale: ArrayLike = 1) -> Array:
    """CDF of the truncated normal.

    Args:
      x: points. a, b: standardized bounds. loc: location. scale: deviation.

    Returns:
      ``P(X <= x)``.
    """
    return lax.exp(logcdf(x, a, b, loc, scale))


def logsf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
          scale: ArrayLike = 1) -> Array:
    """Log survival function of the truncated normal.

    Args:
      x: points. a, b: standardized bounds. loc: location. scale: deviation.

    Returns:
      ``log P(X > x)``: 0 below ``a``, ``-inf`` above ``b``.
    """
    x, a, b, loc, scale = inexact("truncnorm.logsf", x, a, b, loc, scale)
    z = jnp.clip((x - loc) / scale, a, b)
    out = _log_mass(z, b) - _log_mass(a, b)
    return jnp.where(z <= a, const(x, 0.0), jnp.where(z >= b, const(x, NEG_INF), out))


def sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0,
       scale: ArrayLike = 1) -> Array:
    """Survival function of the truncated normal.

    Args:
      x: points. a, b: standardized bounds. loc: location. scale: deviation.

    Returns:
      ``P(X > x)``.
    """
    return lax.exp(logsf(x, a, b, loc, scale))
