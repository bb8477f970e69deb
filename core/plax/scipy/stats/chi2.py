"""The chi-squared distribution (``scipy.stats.chi2``): a gamma distribution of shape ``df / 2`` and scale 2."""
from __future__ import annotations

import math

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._util import NEG_INF, Array, ArrayLike, const, inexact

__all__ = ['logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf']


def logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log density; ``-inf`` below ``loc`` (finite at ``x == loc`` for ``df == 2``, as SciPy).

    Args:
      x: points; integers promote to floats.
      df: degrees of freedom (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      The log density.
    """
    x, df, loc, scale = inexact("chi2.logpdf", x, df, loc, scale)
    z = (x - loc) / scale
    k = df / const(x, 2.0)
    zs = jnp.maximum(z, const(z, 0.0))
    out = (special.xlogy(k - const(x, 1.0), zs) - zs / const(x, 2.0) - k * const(x, math.log(2.0))
           - lax.lgamma(k) - lax.log(scale))
    return jnp.where(z < 0, const(x, NEG_INF), out)


def pdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Density (see :func:`logpdf`).

    Args:
      x: points; integers promote to floats.
      df: degrees of freedom (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      The density.
    """
    return lax.exp(logpdf(x, df, loc, scale))


def cdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """CDF ``P(df / 2, z / 2)``.

    Args:
      x: points; integers promote to floats.
      df: degrees of freedom (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X <= x)``.
    """
    x, df, loc, scale = inexact("chi2.cdf", x, df, loc, scale)
    z = jnp.maximum((x - loc) / scale, const(x, 0.0))
    return special.gammainc(df / const(x, 2.0), z / const(x, 2.0))


def logcdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log CDF.

    Args:
      x: points; integers promote to floats.
      df: degrees of freedom (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``log P(X <= x)``.
    """
    return lax.log(cdf(x, df, loc, scale))


def sf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Survival function ``Q(df / 2, z / 2)``.

    Args:
      x: points; integers promote to floats.
      df: degrees of freedom (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X > x)``.
    """
    x, df, loc, scale = inexact("chi2.sf", x, df, loc, scale)
    z = jnp.maximum((x - loc) / scale, const(x, 0.0))
    return special.gammaincc(df / const(x, 2.0), z / const(x, 2.0))


def logsf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log survival function.

    Args:
      x: points; integers promote to floats.
      df: degrees of freedom (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``log P(X > x)``.
    """
    return lax.log(sf(x, df, loc, scale))

