"""The logistic distribution (``scipy.stats.logistic``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._util import Array, ArrayLike, const, inexact

__all__ = ['logpdf', 'pdf', 'cdf', 'sf', 'ppf', 'isf']


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log density ``-z - 2 log(1 + exp(-z)) - log(scale)``, stable for large ``|z|``.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      The log density.
    """
    x, loc, scale = inexact("logistic.logpdf", x, loc, scale)
    z = lax.abs((x - loc) / scale)
    return -z - const(x, 2.0) * lax.log1p(lax.exp(-z)) - lax.log(scale)


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
    """CDF ``expit(z)``.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X <= x)``.
    """
    x, loc, scale = inexact("logistic.cdf", x, loc, scale)
    return special.expit((x - loc) / scale)


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Survival function ``expit(-z)``.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X > x)``.
    """
    x, loc, scale = inexact("logistic.sf", x, loc, scale)
    return special.expit((loc - x) / scale)


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Quantile function ``loc + scale * logit(q)``.

    Args:
      q: probabilities in ``[0, 1]``.
      loc: location.
      scale: scale (positive).

    Returns:
      The quantile.
    """
    q, loc, scale = inexact("logistic.ppf", q, loc, scale)
    return loc + scale * special.logit(q)


def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Inverse survival function ``loc - scale * logit(q)``.

    Args:
      q: probabilities in ``[0, 1]``.
      loc: location.
      scale: scale (positive).

    Returns:
      ``x`` with ``sf(x) == q``.
    """
    q, loc, scale = inexact("logistic.isf", q, loc, scale)
    return loc - scale * special.logit(q)

