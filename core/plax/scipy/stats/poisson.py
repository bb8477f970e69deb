"""The Poisson distribution (``scipy.stats.poisson``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._util import NEG_INF, Array, ArrayLike, const, inexact

__all__ = ['logpmf', 'pmf', 'cdf', 'entropy']


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


_ENTROPY_SUM_BELOW = 250.0  # sum -p log p over a window of k; an asymptotic series above
_ENTROPY_WINDOW = 400       # k in [max(0, floor(mu) - 200), +400): mass lost below 1e-30


def entropy(mu: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Differential entropy ``-sum_k p_k log p_k`` of the Poisson distribution (in nats).

    Sums the series over a fixed window of ``k`` around ``mu`` for ``mu < 250``; beyond, the
    asymptotic series ``log(2 pi e mu)/2 - 1/(12 mu) - 1/(24 mu^2) - 19/(360 mu^3)``.

    Args:
      mu: the mean (non-negative); integers promote to floats.
      loc: shift (does not change the entropy); broadcast with ``mu``.

    Returns:
      The entropy; 0 at ``mu == 0``.

    Example:
      >>> from plax.scipy.stats import poisson
      >>> round(float(poisson.entropy(1.0)), 6)
      1.304842
    """
    mu, loc = inexact("poisson.entropy", mu, loc)
    small = mu < _ENTROPY_SUM_BELOW
    m = jnp.where(small, mu, const(mu, 1.0))
    start = jnp.maximum(jnp.floor(m) - const(mu, _ENTROPY_WINDOW // 2), const(mu, 0.0))
    k = start[..., None] + jnp.arange(_ENTROPY_WINDOW, dtype=mu.dtype)
    log_p = logpmf(k, m[..., None])  # finite: k >= 0 and m > 0
    summed = -jnp.sum(lax.exp(log_p) * log_p, axis=-1)
    big = jnp.where(small, const(mu, _ENTROPY_SUM_BELOW), mu)
    asymptotic = (0.5 * jnp.log(const(mu, 2 * np.pi * np.e) * big) - 1 / (12 * big)
                  - 1 / (24 * big ** 2) - 19 / (360 * big ** 3))
    out = jnp.where(small, summed, asymptotic)
    return jnp.where(mu == 0, const(mu, 0.0), out)
