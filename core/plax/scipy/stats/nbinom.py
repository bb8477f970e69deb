"""The negative binomial distribution (``scipy.stats.nbinom``)."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._family import shifted
from ._util import NEG_INF, Array, const

__all__ = ['logpmf', 'pmf']


def _logpmf(y: Array, n: Array, p: Array) -> Array:
    one = const(y, 1.0)
    log_comb = lax.lgamma(y + n) - lax.lgamma(n) - lax.lgamma(y + one)
    out = log_comb + special.xlogy(n, p) + special.xlog1py(y, -p)
    return jnp.where(y < 0, const(y, NEG_INF), out)


logpmf, pmf = shifted(
    __name__, __all__, dict(logpmf=_logpmf),
    {
        "logpmf": ("Log probability ``log Gamma(y + n) - log Gamma(n) - log Gamma(y + 1) + "
                   "n log p + y log(1 - p)`` of ``y = k - loc`` failures before the ``n``-th "
                   "success (the gamma-function extension between integers, as JAX); ``-inf`` "
                   "for ``k < loc``.", "-1.673976"),
        "pmf": ("Probability of ``k - loc`` failures before the ``n``-th success (see "
                ":func:`logpmf`).", "0.1875"),
    },
    shapes={"n": "number of successes.", "p": "success probability."}, example=(2, 3, 0.5))
