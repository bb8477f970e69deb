"""The beta distribution on ``[loc, loc + scale]`` (``scipy.stats.beta``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._util import NEG_INF, Array, ArrayLike, const, inexact

__all__ = ['logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf']


def logpdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log density ``(a-1) log z + (b-1) log(1-z) - betaln(a, b) - log(scale)``.

    Args:
      x: points; integers promote to floats.
      a: first shape (positive).
      b: second shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      The log density; ``-inf`` outside the support.
    """
    x, a, b, loc, scale = inexact("beta.logpdf", x, a, b, loc, scale)
    z = (x - loc) / scale
    one = const(x, 1.0)
    zs = jnp.clip(z, const(z, 0.0), one)
    out = (special.xlogy(a - one, zs) + special.xlog1py(b - one, -zs) - special.betaln(a, b)
           - lax.log(scale))
    return jnp.where((z < 0) | (z > 1), const(x, NEG_INF), out)


def pdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Density (see :func:`logpdf`).

    Args:
      x: points; integers promote to floats.
      a: first shape (positive).
      b: second shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      The density.
    """
    return lax.exp(logpdf(x, a, b, loc, scale))


def cdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """CDF ``I_z(a, b)``.

    Args:
      x: points; integers promote to floats.
      a: first shape (positive).
      b: second shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X <= x)``.
    """
    x, a, b, loc, scale = inexact("beta.cdf", x, a, b, loc, scale)
    z = jnp.clip((x - loc) / scale, const(x, 0.0), const(x, 1.0))
    return special.betainc(a, b, z)


def logcdf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log CDF.

    Args:
      x: points; integers promote to floats.
      a: first shape (positive).
      b: second shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``log P(X <= x)``.
    """
    return lax.log(cdf(x, a, b, loc, scale))


def sf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Survival function ``I_{1-z}(b, a)``.

    Args:
      x: points; integers promote to floats.
      a: first shape (positive).
      b: second shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X > x)``.
    """
    x, a, b, loc, scale = inexact("beta.sf", x, a, b, loc, scale)
    z = jnp.clip((x - loc) / scale, const(x, 0.0), const(x, 1.0))
    return special.betainc(b, a, const(x, 1.0) - z)


def logsf(x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log survival function.

    Args:
      x: points; integers promote to floats.
      a: first shape (positive).
      b: second shape (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      ``log P(X > x)``.
    """
    return lax.log(sf(x, a, b, loc, scale))

