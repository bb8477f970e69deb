"""The geometric distribution on ``1, 2, ...`` (``scipy.stats.geom``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._util import NEG_INF, Array, ArrayLike, const, inexact

__all__ = ['logpmf', 'pmf']


def logpmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Log probability ``(x - 1) log(1 - p) + log p`` of ``x = k - loc >= 1`` (not only at integers, as JAX).

    Args:
      k: outcomes; integers promote to floats.
      p: success probability.
      loc: shift.

    Returns:
      The log pmf; ``-inf`` below 1.
    """
    k, p, loc = inexact("geom.logpmf", k, p, loc)
    x = k - loc
    out = special.xlog1py(x - const(k, 1.0), -p) + lax.log(p)
    return jnp.where(x < 1, const(k, NEG_INF), out)


def pmf(k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Array:
    """Probability (see :func:`logpmf`).

    Args:
      k: outcomes; integers promote to floats.
      p: success probability.
      loc: shift.

    Returns:
      The pmf.
    """
    return lax.exp(logpmf(k, p, loc))
