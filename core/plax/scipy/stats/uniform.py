"""The uniform distribution on ``[loc, loc + scale]`` (``scipy.stats.uniform``)."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp

from ._family import loc_scale
from ._util import NEG_INF, Array, const

__all__ = ['logpdf', 'pdf', 'cdf', 'ppf']


def _logpdf(x: Array, loc: Array, scale: Array) -> Array:
    # compares x with the bounds themselves (as JAX), not the standardized z with [0, 1]
    inside = (x >= loc) & (x <= loc + scale)
    return jnp.where(inside, -lax.log(scale), const(x, NEG_INF))


logpdf, pdf, cdf, ppf = loc_scale(
    __name__, __all__,
    dict(cdf=lambda z: jnp.clip(z, const(z, 0.0), const(z, 1.0)), ppf=lambda q: q),
    {
        "logpdf": ("Log density: ``-log(scale)`` inside ``[loc, loc + scale]``, ``-inf`` "
                   "outside.", "-0.0"),
        "pdf": ("Density: ``1 / scale`` inside ``[loc, loc + scale]``, 0 outside.", "1.0"),
        "cdf": ("CDF: ``(x - loc) / scale`` clipped to ``[0, 1]``.", "0.25"),
        "ppf": ("Quantile function ``loc + q * scale``.", "0.75"),
    },
    raw=dict(logpdf=_logpdf), example=(0.25,))
