"""The generalized normal distribution (``scipy.stats.gennorm``), standard form."""
from __future__ import annotations

import math


from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._util import Array, ArrayLike, const, inexact

__all__ = ['logpdf', 'pdf', 'cdf']


def logpdf(x: ArrayLike, beta: ArrayLike) -> Array:
    """Log density ``log(beta / 2) - gammaln(1 / beta) - |x|^beta``.

    Args:
      x: points; integers promote to floats.
      beta: shape (positive).

    Returns:
      The log density.
    """
    x, beta = inexact("gennorm.logpdf", x, beta)
    return (lax.log(beta) - const(x, math.log(2.0)) - lax.lgamma(const(x, 1.0) / beta)
            - lax.abs(x) ** beta)


def pdf(x: ArrayLike, beta: ArrayLike) -> Array:
    """Density (see :func:`logpdf`).

    Args:
      x: points; integers promote to floats.
      beta: shape (positive).

    Returns:
      The density.
    """
    return lax.exp(logpdf(x, beta))


def cdf(x: ArrayLike, beta: ArrayLike) -> Array:
    """CDF ``1/2 + sign(x) P(1 / beta, |x|^beta) / 2``.

    Args:
      x: points; integers promote to floats.
      beta: shape (positive).

    Returns:
      ``P(X <= x)``.
    """
    x, beta = inexact("gennorm.cdf", x, beta)
    half = const(x, 0.5)
    return half + jnp.sign(x) * half * special.gammainc(const(x, 1.0) / beta, lax.abs(x) ** beta)

