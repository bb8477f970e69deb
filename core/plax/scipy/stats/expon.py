"""The exponential distribution (``scipy.stats.expon``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp

from ._family import loc_scale
from ._util import NEG_INF, const, log_diff_exp

__all__ = ['logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf', 'ppf']


def _below(z, value, out):
    """``value`` where ``z < 0`` (below the support), else ``out``."""
    return jnp.where(z < 0, const(z, value), out)


logpdf, pdf, cdf, logcdf, sf, logsf, ppf = loc_scale(
    __name__, __all__,
    dict(logpdf=lambda z: -z,
         cdf=lambda z: _below(z, 0.0, -lax.expm1(-z)),
         logcdf=lambda z: _below(z, NEG_INF, log_diff_exp(jnp.zeros_like(z), -z)),
         sf=lambda z: _below(z, 1.0, lax.exp(-z)),
         logsf=lambda z: _below(z, 0.0, -z),
         ppf=lambda q: -lax.log1p(-q)),
    {
        "logpdf": ("Log density ``-z - log(scale)`` for ``z = (x - loc) / scale >= 0``, "
                   "``-inf`` below ``loc``.", "-1.0"),
        "pdf": ("Density ``exp(-z) / scale`` (see :func:`logpdf`).", "0.367879"),
        "cdf": ("CDF ``1 - exp(-z)``.", "0.632121"),
        "logcdf": ("Log CDF ``log1p(-exp(-z))``.", "-0.458675"),
        "sf": ("Survival function ``exp(-z)``.", "0.367879"),
        "logsf": ("Log survival function ``-z``.", "-1.0"),
        "ppf": ("Quantile function ``loc - scale * log1p(-q)``.", "1.386294"),
    },
    support=(0.0, np.inf))
