"""The exponential distribution (``scipy.stats.expon``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp

from ._util import NAN, NEG_INF, Array, ArrayLike, const, inexact, log_diff_exp

__all__ = ['logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf', 'ppf']


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log density ``-z - log(scale)`` for ``z = (x - loc) / scale >= 0``.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      The log density; ``-inf`` below ``loc``.
    """
    x, loc, scale = inexact("expon.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return jnp.where(z < 0, const(x, NEG_INF), -z - lax.log(scale))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Density (see :func:`logpdf`).

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      The density.
    """
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """CDF ``1 - exp(-z)``.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X <= x)``.
    """
    x, loc, scale = inexact("expon.cdf", x, loc, scale)
    z = (x - loc) / scale
    return jnp.where(z < 0, const(x, 0.0), -lax.expm1(-z))


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log CDF ``log1p(-exp(-z))``.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      ``log P(X <= x)``.
    """
    x, loc, scale = inexact("expon.logcdf", x, loc, scale)
    z = (x - loc) / scale
    return jnp.where(z < 0, const(x, NEG_INF), log_diff_exp(jnp.zeros_like(z), -z))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Survival function ``exp(-z)``.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X > x)``.
    """
    x, loc, scale = inexact("expon.sf", x, loc, scale)
    z = (x - loc) / scale
    return jnp.where(z < 0, const(x, 1.0), lax.exp(-z))


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log survival function ``-z``.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      ``log P(X > x)``.
    """
    x, loc, scale = inexact("expon.logsf", x, loc, scale)
    z = (x - loc) / scale
    return jnp.where(z < 0, const(x, 0.0), -z)


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Quantile function ``loc - scale * log1p(-q)``.

    Args:
      q: probabilities in ``[0, 1]``.
      loc: location.
      scale: scale (positive).

    Returns:
      The quantile; NaN outside ``[0, 1]``.
    """
    q, loc, scale = inexact("expon.ppf", q, loc, scale)
    return jnp.where((q >= 0) & (q <= 1), loc - scale * lax.log1p(-q), const(q, NAN))

