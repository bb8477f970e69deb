"""The beta-binomial distribution (``scipy.stats.betabinom``)."""
from __future__ import annotations


from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._util import NAN, NEG_INF, Array, ArrayLike, const, inexact

__all__ = ['logpmf', 'pmf']


def logpmf(k: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log of ``C(n, y) B(y + a, n - y + b) / B(a, b)`` at ``y = floor(k) - loc``.

    Args:
      k: outcomes; integers promote to floats (floored, as JAX).
      n: number of trials (``n >= 0``).
      a, b: the beta prior's shape parameters (positive).
      loc: shift.

    Returns:
      The log pmf: ``-inf`` outside ``[0, n]``, NaN for invalid parameters.

    Example:
      >>> from plax.scipy.stats import betabinom
      >>> round(float(betabinom.pmf(1, 2, 1.0, 1.0)), 6)  # uniform over 0, 1, 2
      0.333333
    """
    k, n, a, b, loc = inexact("betabinom.logpmf", k, n, a, b, loc)
    one = const(k, 1.0)
    y = jnp.floor(k) - loc
    log_comb = -(jnp.log1p(n) + special.betaln(n - y + one, y + one))
    out = log_comb + special.betaln(y + a, n - y + b) - special.betaln(a, b)
    out = jnp.where((y == 0) & (n == 0), const(k, 0.0), out)
    out = jnp.where((y < 0) | (y > n), const(k, NEG_INF), out)
    return jnp.where((n < 0) | (a <= 0) | (b <= 0), const(k, NAN), out)


def pmf(k: ArrayLike, n: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Probability (see :func:`logpmf`).

    Args:
      k: outcomes.
      n: number of trials.
      a, b: shape parameters.
      loc: shift.

    Returns:
      The pmf.

    Example:
      >>> from plax.scipy.stats import betabinom
      >>> round(float(betabinom.pmf(0, 3, 2.0, 2.0)), 6)
      0.2
    """
    return lax.exp(logpmf(k, n, a, b, loc))
