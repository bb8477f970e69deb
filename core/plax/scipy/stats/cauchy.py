"""The Cauchy distribution (``scipy.stats.cauchy``)."""
from __future__ import annotations

import math

import numpy as np

from plax import lax
from plax import numpy as jnp

from ._family import loc_scale
from ._util import NAN, NEG_INF, Array, const

__all__ = ['logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf', 'ppf', 'isf']


def _tan_quantile(centred: Array, at_0: float, at_1: float):
    """The quantile ``loc + scale tan(pi centred(q))``; ``at_0``, ``at_1`` at the ends."""
    def quantile(q: Array, loc: Array, scale: Array) -> Array:
        x = loc + scale * lax.tan(const(q, math.pi) * centred(q))
        x = jnp.where(q == 0, const(q, at_0), jnp.where(q == 1, const(q, at_1), x))
        return jnp.where((q < 0) | (q > 1), const(q, NAN), x)
    return quantile


logpdf, pdf, cdf, logcdf, sf, logsf, ppf, isf = loc_scale(
    __name__, __all__,
    dict(logpdf=lambda z: -lax.log1p(z * z) - const(z, math.log(math.pi)),
         cdf=lambda z: lax.atan2(jnp.ones_like(z), -z) / const(z, math.pi),
         sf=lambda z: lax.atan2(jnp.ones_like(z), z) / const(z, math.pi)),
    {
        "logpdf": ("Log density ``-log(pi scale (1 + z^2))``.", "-1.837877"),
        "pdf": ("Density ``1 / (pi scale (1 + z^2))`` (see :func:`logpdf`).", "0.159155"),
        "cdf": ("CDF ``atan2(1, -z) / pi``.", "0.75"),
        "logcdf": ("Log CDF ``log(atan2(1, -z) / pi)``.", "-0.287682"),
        "sf": ("Survival function ``atan2(1, z) / pi``.", "0.25"),
        "logsf": ("Log survival function ``log(atan2(1, z) / pi)``.", "-1.386294"),
        "ppf": ("Quantile function ``loc + scale tan(pi (q - 1/2))``.", "1.0"),
        "isf": ("Inverse survival function ``loc + scale tan(pi (1/2 - q))``.", "-1.0"),
    },
    raw=dict(ppf=_tan_quantile(lambda q: q - const(q, 0.5), NEG_INF, np.inf),
             isf=_tan_quantile(lambda q: const(q, 0.5) - q, np.inf, NEG_INF)),
    example_q=(0.75,))
