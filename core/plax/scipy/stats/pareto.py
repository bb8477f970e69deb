"""The Pareto distribution (``scipy.stats.pareto``), supported on ``z = (x - loc) / scale >= 1``."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp

from ._family import loc_scale
from ._util import Array, const

__all__ = ['logpdf', 'pdf', 'logsf', 'sf', 'cdf', 'logcdf', 'ppf']


def _log_z(z: Array) -> Array:
    """``log z`` on the support ``z >= 1`` (0 below it)."""
    return lax.log(jnp.maximum(z, const(z, 1.0)))


logpdf, pdf, logsf, sf, cdf, logcdf, ppf = loc_scale(
    __name__, __all__,
    dict(logpdf=lambda z, b: lax.log(b) - (b + const(z, 1.0)) * _log_z(z),
         logsf=lambda z, b: jnp.where(z < 1, const(z, 0.0), -b * _log_z(z)),
         ppf=lambda q, b: lax.exp(-lax.log1p(-q) / b)),
    {
        "logpdf": ("Log density ``log b - (b + 1) log z - log(scale)``; ``-inf`` for "
                   "``z < 1``.", "-1.509724"),
        "pdf": ("Density ``b / (scale z^(b + 1))`` (see :func:`logpdf`).", "0.220971"),
        "logsf": ("Log survival function ``-b log z``.", "-1.732868"),
        "sf": ("Survival function ``z^-b``.", "0.176777"),
        "cdf": ("CDF ``1 - z^-b``.", "0.823223"),
        "logcdf": ("Log CDF ``log(1 - z^-b)``.", "-0.194528"),
        "ppf": ("Quantile function ``loc + scale (1 - q)^(-1/b)``.", "1.741101"),
    },
    shapes={"b": "shape (positive)."}, support=(1.0, np.inf), example=(2.0, 2.5),
    example_q=(0.75, 2.5))
