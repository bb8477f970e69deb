"""The negative binomial distribution (``scipy.stats.nbinom``)."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._util import NEG_INF, Array, ArrayLike, const, inexact

__all__ = ['logpmf', 'pmf']


def logpmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log probability of ``y = k - loc`` failures before the ``n``-th success.

    ``log Gamma(y + n) - log Gamma(n) - log Gamma(y + 1) + n log p + y log(1 - p)``, the
    gamma-function extension between integers (as JAX).

    Args:
      k: outcomes; integers promote to floats.
      n: number of successes.
      p: success probability.
      loc: shift.

    Returns:
      The log pmf; ``-inf`` for ``k < loc``.

    Example:
      >>> from plax.scipy.stats import nbinom
      >>> round(float(nbinom.pmf(2, 3, 0.5)), 6)
      0.1875
    """
    k, n, p, loc = inexact("nbinom.logpmf", k, n, p, loc)
    one = const(k, 1.0)
    y = k - loc
    log_comb = lax.lgamma(y + n) - lax.lgamma(n) - lax.lgamma(y + one)
    out = log_comb + special.xlogy(n, p) + special.xlog1py(y, -p)
    return jnp.where(k < loc, const(k, NEG_INF), out)


def pmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Probability (see :func:`logpmf`).

    Args:
      k: outcomes.
      n: number of successes.
      p: success probability.
      loc: shift.

    Returns:
      The pmf.

    Example:
      >>> from plax.scipy.stats import nbinom
      >>> round(float(nbinom.pmf(0, 1, 0.25)), 6)
      0.25
    """
    return lax.exp(logpmf(k, n, p, loc))
