"""The Laplace distribution (``scipy.stats.laplace``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp

from ._util import Array, ArrayLike, const, inexact

__all__ = ['logpdf', 'pdf', 'cdf']


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log density ``-|z| - log(2 scale)``.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      The log density.
    """
    x, loc, scale = inexact("laplace.logpdf", x, loc, scale)
    z = (x - loc) / scale
    return -lax.abs(z) - lax.log(const(x, 2.0) * scale)


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
    """CDF: ``exp(z) / 2`` below ``loc``, ``1 - exp(-z) / 2`` above.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X <= x)``.
    """
    x, loc, scale = inexact("laplace.cdf", x, loc, scale)
    z = (x - loc) / scale
    half = const(x, 0.5)
    return jnp.where(z < 0, half * lax.exp(jnp.minimum(z, const(z, 0.0))),
                     const(x, 1.0) - half * lax.exp(-jnp.maximum(z, const(z, 0.0))))

