"""The geometric distribution on ``1, 2, ...`` (``scipy.stats.geom``)."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._family import shifted
from ._util import NEG_INF, Array, const

__all__ = ['logpmf', 'pmf']


def _logpmf(x: Array, p: Array) -> Array:
    out = special.xlog1py(x - const(x, 1.0), -p) + lax.log(p)
    return jnp.where(x < 1, const(x, NEG_INF), out)


logpmf, pmf = shifted(
    __name__, __all__, dict(logpmf=_logpmf),
    {
        "logpmf": ("Log probability ``(x - 1) log(1 - p) + log p`` of ``x = k - loc >= 1`` "
                   "(not only at integers, as JAX); ``-inf`` below 1.", "-1.560648"),
        "pmf": ("Probability ``(1 - p)^(x - 1) p`` of ``x = k - loc`` (see :func:`logpmf`).",
                "0.21"),
    },
    shapes={"p": "success probability."}, example=(2, 0.3))
