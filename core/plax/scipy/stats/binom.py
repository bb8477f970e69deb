"""The binomial distribution (``scipy.stats.binom``)."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._family import shifted
from ._util import NEG_INF, Array, const

__all__ = ['logpmf', 'pmf']


def _logpmf(y: Array, n: Array, p: Array) -> Array:
    one = const(y, 1.0)
    comb = lax.lgamma(n + one) - lax.lgamma(y + one) - lax.lgamma(n - y + one)
    out = comb + special.xlogy(y, p) + special.xlog1py(n - y, -p)
    return jnp.where((y >= 0) & (y <= n), out, const(y, NEG_INF))


logpmf, pmf = shifted(
    __name__, __all__, dict(logpmf=_logpmf),
    {
        "logpmf": ("Log probability of ``k - loc`` successes in ``n`` trials (the "
                   "gamma-function extension between integers, as JAX); ``-inf`` outside "
                   "``[0, n]``.", "-1.062473"),
        "pmf": ("Probability ``C(n, y) p^y (1 - p)^(n - y)`` of ``y = k - loc`` successes "
                "(see :func:`logpmf`).", "0.3456"),
    },
    shapes={"n": "number of trials.", "p": "success probability."}, example=(2, 5, 0.4))
