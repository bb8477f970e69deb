"""The Bernoulli distribution (``scipy.stats.bernoulli``)."""
from __future__ import annotations

from plax import numpy as jnp
from plax.scipy import special

from ._family import shifted
from ._util import NAN, NEG_INF, Array, ArrayLike, const, inexact

__all__ = ['logpmf', 'pmf', 'cdf', 'ppf']


def _logpmf(k: Array, p: Array) -> Array:
    out = special.xlogy(k, p) + special.xlog1py(const(k, 1.0) - k, -p)
    return jnp.where((k < 0) | (k > 1), const(k, NEG_INF), out)


logpmf, pmf = shifted(
    __name__, __all__[:2], dict(logpmf=_logpmf),
    {
        "logpmf": ("Log probability ``k log p + (1 - k) log(1 - p)`` for ``0 <= k - loc <= 1`` "
                   "(as JAX, not only at integers); ``-inf`` outside ``[0, 1]``.", "-1.203973"),
        "pmf": ("Probability ``p^k (1 - p)^(1 - k)`` of ``k - loc`` (see :func:`logpmf`).",
                "0.3"),
    },
    shapes={"p": "probability of 1."}, example=(1, 0.3))


def cdf(k: ArrayLike, p: ArrayLike) -> Array:
    """CDF: 0 below 0, ``1 - p`` on ``[0, 1)``, 1 from 1.

    Args:
      k: outcomes; integers promote to floats.
      p: probability of 1.

    Returns:
      ``P(X <= k)``; NaN for ``p`` outside ``[0, 1]``.
    """
    k, p = inexact("bernoulli.cdf", k, p)
    out = jnp.where(k < 0, const(k, 0.0), jnp.where(k < 1, const(k, 1.0) - p, const(k, 1.0)))
    return jnp.where((p < 0) | (p > 1) | jnp.isnan(k) | jnp.isnan(p), const(k, NAN), out)


def ppf(q: ArrayLike, p: ArrayLike) -> Array:
    """Quantile function: 0 for ``q <= 1 - p``, else 1 (0 at ``q == 0``, as JAX; SciPy gives -1).

    Args:
      q: probabilities in ``[0, 1]``.
      p: probability of 1.

    Returns:
      The quantile; NaN for arguments outside ``[0, 1]``.
    """
    q, p = inexact("bernoulli.ppf", q, p)
    out = jnp.where(q <= const(q, 1.0) - p, const(q, 0.0), const(q, 1.0))
    bad = (q < 0) | (q > 1) | (p < 0) | (p > 1) | jnp.isnan(q) | jnp.isnan(p)
    return jnp.where(bad, const(q, NAN), out)
