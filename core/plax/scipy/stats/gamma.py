"""The gamma distribution (``scipy.stats.gamma``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._util import NEG_INF, Array, ArrayLike, const, inexact

__all__ = ['logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf']


def logpdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log density ``(a - 1) log z - z - gammaln(a) - log(scale)``.

    Args:
      x: points; integers promote to floats.
      a: shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      The log density; ``-inf`` below ``loc``.
    """
    x, a, loc, scale = inexact("gamma.logpdf", x, a, loc, scale)
    z = (x - loc) / scale
    zs = jnp.maximum(z, const(z, 0.0))
    out = special.xlogy(a - const(x, 1.0), zs) - zs - lax.lgamma(a) - lax.log(scale)
    return jnp.where(z < 0, const(x, NEG_INF), out)


def pdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Density (see :func:`logpdf`).

    Args:
      x: points; integers promote to floats.
      a: shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      The density.
    """
    return lax.exp(logpdf(x, a, loc, scale))


def cdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """CDF ``P(a, z)``.

    Args:
      x: points; integers promote to floats.
      a: shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X <= x)``.
    """
    x, a, loc, scale = inexact("gamma.cdf", x, a, loc, scale)
    return special.gammainc(a, jnp.maximum((x - loc) / scale, const(x, 0.0)))


def logcdf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log CDF.

    Args:
      x: points; integers promote to floats.
      a: shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``log P(X <= x)``.
    """
    return lax.log(cdf(x, a, loc, scale))


def sf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Survival function ``Q(a, z)``.

    Args:
      x: points; integers promote to floats.
      a: shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X > x)``.
    """
    x, a, loc, scale = inexact("gamma.sf", x, a, loc, scale)
    return special.gammaincc(a, jnp.maximum((x - loc) / scale, const(x, 0.0)))


def logsf(x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log survival function.

    Args:
      x: points; integers promote to floats.
      a: shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``log P(X > x)``.
    """
    return lax.log(sf(x, a, loc, scale))

