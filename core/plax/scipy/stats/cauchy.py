"""The Cauchy distribution (``scipy.stats.cauchy``)."""
from __future__ import annotations

import math

import numpy as np

from plax import lax
from plax import numpy as jnp

from ._util import NAN, NEG_INF, Array, ArrayLike, const, inexact

__all__ = ['logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf', 'ppf', 'isf']


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log density ``-log(pi scale (1 + z^2))``.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      The log density.
    """
    x, loc, scale = inexact("cauchy.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return -lax.log1p(z * z) - lax.log(scale) - const(x, math.log(math.pi))


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
    """CDF ``atan2(1, -z) / pi``.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X <= x)``.
    """
    x, loc, scale = inexact("cauchy.cdf", x, loc, scale)
    z = (x - loc) / scale
    return lax.atan2(jnp.ones_like(z), -z) / const(x, math.pi)


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log CDF.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      ``log P(X <= x)``.
    """
    return lax.log(cdf(x, loc, scale))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Survival function ``atan2(1, z) / pi``.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X > x)``.
    """
    x, loc, scale = inexact("cauchy.sf", x, loc, scale)
    z = (x - loc) / scale
    return lax.atan2(jnp.ones_like(z), z) / const(x, math.pi)


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log survival function.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      ``log P(X > x)``.
    """
    return lax.log(sf(x, loc, scale))


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Quantile function ``loc + scale tan(pi (q - 1/2))``.

    Args:
      q: probabilities in ``[0, 1]``.
      loc: location.
      scale: scale (positive).

    Returns:
      The quantile; NaN outside ``[0, 1]``.
    """
    q, loc, scale = inexact("cauchy.ppf", q, loc, scale)
    x = loc + scale * lax.tan(const(q, math.pi) * (q - const(q, 0.5)))
    x = jnp.where(q == 0, const(q, NEG_INF), jnp.where(q == 1, const(q, np.inf), x))
    return jnp.where((q < 0) | (q > 1), const(q, NAN), x)


def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Inverse survival function ``loc + scale tan(pi (1/2 - q))``.

    Args:
      q: probabilities in ``[0, 1]``.
      loc: location.
      scale: scale (positive).

    Returns:
      ``x`` with ``sf(x) == q``.
    """
    q, loc, scale = inexact("cauchy.isf", q, loc, scale)
    x = loc + scale * lax.tan(const(q, math.pi) * (const(q, 0.5) - q))
    x = jnp.where(q == 0, const(q, np.inf), jnp.where(q == 1, const(q, NEG_INF), x))
    return jnp.where((q < 0) | (q > 1), const(q, NAN), x)

