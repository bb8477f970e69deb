"""The Laplace distribution (``scipy.stats.laplace``)."""
from __future__ import annotations

import math

from plax import lax
from plax import numpy as jnp

from ._family import loc_scale
from ._util import Array, const

__all__ = ['logpdf', 'pdf', 'cdf']


def _cdf(z: Array) -> Array:
    half = const(z, 0.5)
    return jnp.where(z < 0, half * lax.exp(jnp.minimum(z, const(z, 0.0))),
                     const(z, 1.0) - half * lax.exp(-jnp.maximum(z, const(z, 0.0))))


logpdf, pdf, cdf = loc_scale(
    __name__, __all__,
    dict(logpdf=lambda z: -lax.abs(z) - const(z, math.log(2.0)), cdf=_cdf),
    {
        "logpdf": ("Log density ``-|z| - log(2 scale)``.", "-1.693147"),
        "pdf": ("Density ``exp(-|z|) / (2 scale)`` (see :func:`logpdf`).", "0.18394"),
        "cdf": ("CDF: ``exp(z) / 2`` below ``loc``, ``1 - exp(-z) / 2`` above.", "0.81606"),
    })
