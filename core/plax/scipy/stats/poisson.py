"""The Poisson distribution (``scipy.stats.poisson``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._util import NEG_INF, Array, ArrayLike, const, inexact

__all__ = ['logpmf', 'pmf', 'cdf']


def logpmf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log probability ``x log mu - mu - gammaln(x + 1)`` of ``x = k - loc`` (0 between integers, as SciPy and JAX).

    Args:
      k: outcomes; integers promote to floats.
      mu: the mean (non-negative).
      loc: shift.

    Returns:
      The log pmf; ``-inf`` for ``x < 0`` or non-integer ``x``.
    """
    k, mu, loc = inexact("poisson.logpmf", k, mu, loc)
    x = k - loc
    out = special.xlogy(x, mu) - lax.lgamma(x + const(k, 1.0)) - mu
    return jnp.where((x < 0) | (x != jnp.round(x)), const(k, NEG_INF), out)


def pmf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Probability (see :func:`logpmf`).

    Args:
      k: outcomes; integers promote to floats.
      mu: the mean.
      loc: shift.

    Returns:
      The pmf.
    """
    return lax.exp(logpmf(k, mu, loc))


def cdf(k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Array:
    """CDF ``Q(floor(k - loc) + 1, mu)``.

    Args:
      k: outcomes; integers promote to floats.
      mu: the mean.
      loc: shift.

    Returns:
      ``P(X <= k)``.
    """
    k, mu, loc = inexact("poisson.cdf", k, mu, loc)
    x = jnp.floor(k - loc)
    out = special.gammaincc(jnp.maximum(x, const(k, 0.0)) + const(k, 1.0), mu)
    return jnp.where(x < 0, const(k, 0.0), out)
