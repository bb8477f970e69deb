"""The Poisson distribution (``scipy.stats.poisson``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._family import shifted
from ._util import NEG_INF, Array, ArrayLike, const, inexact

__all__ = ['logpmf', 'pmf', 'cdf', 'entropy']


def _logpmf(x: Array, mu: Array) -> Array:
    out = special.xlogy(x, mu) - lax.lgamma(x + const(x, 1.0)) - mu
    return jnp.where((x < 0) | (x != jnp.round(x)), const(x, NEG_INF), out)


def _cdf(x: Array, mu: Array) -> Array:
    x = jnp.floor(x)
    out = special.gammaincc(jnp.maximum(x, const(x, 0.0)) + const(x, 1.0), mu)
    return jnp.where(x < 0, const(x, 0.0), out)


logpmf, pmf, cdf = shifted(
    __name__, __all__[:3], dict(logpmf=_logpmf, cdf=_cdf),
    {
        "logpmf": ("Log probability ``x log mu - mu - gammaln(x + 1)`` of ``x = k - loc``; "
                   "``-inf`` for ``x < 0`` or non-integer ``x`` (0 between integers, as SciPy "
                   "and JAX).", "-1.382217"),
        "pmf": ("Probability ``mu^x exp(-mu) / x!`` of ``x = k - loc`` (see :func:`logpmf`).",
                "0.251021"),
        "cdf": ("CDF ``Q(floor(k - loc) + 1, mu)``.", "0.808847"),
    },
    shapes={"mu": "the mean (non-negative)."}, example=(2, 1.5))


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
