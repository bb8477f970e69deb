"""The gamma distribution (``scipy.stats.gamma``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._family import loc_scale
from ._util import Array, const

__all__ = ['logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf']


def standard_logpdf(z: Array, a: Array) -> Array:
    """``(a - 1) log z - z - gammaln(a)`` for ``z >= 0``."""
    zs = jnp.maximum(z, const(z, 0.0))
    return special.xlogy(a - const(z, 1.0), zs) - zs - lax.lgamma(a)


def standard_cdf(z: Array, a: Array) -> Array:
    """``P(a, z)``, 0 below the support."""
    return special.gammainc(a, jnp.maximum(z, const(z, 0.0)))


def standard_sf(z: Array, a: Array) -> Array:
    """``Q(a, z)``, 1 below the support."""
    return special.gammaincc(a, jnp.maximum(z, const(z, 0.0)))


logpdf, pdf, cdf, logcdf, sf, logsf = loc_scale(
    __name__, __all__,
    dict(logpdf=standard_logpdf, cdf=standard_cdf, sf=standard_sf),
    {
        "logpdf": ("Log density ``(a - 1) log z - z - gammaln(a) - log(scale)``; ``-inf`` "
                   "below ``loc``.", "-1.284683"),
        "pdf": ("Density ``z^(a - 1) exp(-z) / (Gamma(a) scale)`` (see :func:`logpdf`).",
                "0.276738"),
        "cdf": ("CDF ``P(a, z)``, the regularized lower incomplete gamma function.", "0.150855"),
        "logcdf": ("Log CDF ``log P(a, z)``.", "-1.891436"),
        "sf": ("Survival function ``Q(a, z)``, the regularized upper incomplete gamma "
               "function.", "0.849145"),
        "logsf": ("Log survival function ``log Q(a, z)``.", "-0.163525"),
    },
    shapes={"a": "shape (positive)."}, support=(0.0, np.inf), example=(1.0, 2.5))
