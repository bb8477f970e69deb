"""The binomial distribution (``scipy.stats.binom``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._util import NEG_INF, Array, ArrayLike, const, inexact

__all__ = ['logpmf', 'pmf']


def logpmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log probability of ``k - loc`` successes in ``n`` trials (the gamma-function extension between integers, as JAX).

    Args:
      k: outcomes; integers promote to floats.
      n: number of trials.
      p: success probability.
      loc: shift.

    Returns:
      The log pmf; ``-inf`` outside ``[0, n]``.
    """
    k, n, p, loc = inexact("binom.logpmf", k, n, p, loc)
    y = k - loc
    one = const(k, 1.0)
    comb = lax.lgamma(n + one) - lax.lgamma(y + one) - lax.lgamma(n - y + one)
    out = comb + special.xlogy(y, p) + special.xlog1py(n - y, -p)
    return jnp.where((y >= 0) & (y <= n), out, const(k, NEG_INF))


def pmf(k: ArrayLike, n: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Probability (see :func:`logpmf`).

    Args:
      k: outcomes; integers promote to floats.
      n: number of trials.
      p: success probability.
      loc: shift.

    Returns:
      The pmf.
    """
    return lax.exp(logpmf(k, n, p, loc))
