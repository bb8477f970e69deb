"""The Pareto distribution (``scipy.stats.pareto``), supported on ``z = (x - loc) / scale >= 1``."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp

from ._util import NAN, NEG_INF, Array, ArrayLike, const, inexact, log_diff_exp

__all__ = ['logpdf', 'pdf', 'logsf', 'sf', 'cdf', 'logcdf', 'ppf']


def logpdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log density ``log b - (b + 1) log z - log(scale)``.

    Args:
      x: points; integers promote to floats.
      b: shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      The log density; ``-inf`` for ``z < 1``.
    """
    x, b, loc, scale = inexact("pareto.logpdf", x, b, loc, scale)
    z = (x - loc) / scale
    out = lax.log(b) - (b + const(x, 1.0)) * lax.log(jnp.maximum(z, const(z, 1.0))) - lax.log(scale)
    return jnp.where(z < 1, const(x, NEG_INF), out)


def pdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Density (see :func:`logpdf`).

    Args:
      x: points; integers promote to floats.
      b: shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      The density.
    """
    return lax.exp(logpdf(x, b, loc, scale))


def logsf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log survival function ``-b log z``.

    Args:
      x: points; integers promote to floats.
      b: shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``log P(X > x)``.
    """
    x, b, loc, scale = inexact("pareto.logsf", x, b, loc, scale)
    z = (x - loc) / scale
    return jnp.where(z < 1, const(x, 0.0), -b * lax.log(jnp.maximum(z, const(z, 1.0))))


def sf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Survival function ``z^-b``.

    Args:
      x: points; integers promote to floats.
      b: shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X > x)``.
    """
    return lax.exp(logsf(x, b, loc, scale))


def cdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """CDF ``1 - z^-b``.

    Args:
      x: points; integers promote to floats.
      b: shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X <= x)``.
    """
    return -lax.expm1(logsf(x, b, loc, scale))


def logcdf(x: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log CDF ``log(1 - z^-b)``.

    Args:
      x: points; integers promote to floats.
      b: shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``log P(X <= x)``.
    """
    lsf = logsf(x, b, loc, scale)
    return log_diff_exp(jnp.zeros_like(lsf), lsf)


def ppf(q: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Quantile function ``loc + scale (1 - q)^(-1/b)``.

    Args:
      q: probabilities in ``[0, 1]``.
      b: shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      The quantile; NaN outside ``[0, 1]``.
    """
    q, b, loc, scale = inexact("pareto.ppf", q, b, loc, scale)
    x = loc + scale * lax.exp(-lax.log1p(-q) / b)
    return jnp.where((q < 0) | (q > 1), const(q, NAN), x)

