"""The right-skewed Gumbel distribution of maxima (``scipy.stats.gumbel_r``).

With ``z = (x - loc) / scale``, ``gumbel_l`` at ``z`` is ``gumbel_r`` at ``-z`` (mirrored).
"""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp

from ._family import loc_scale
from ._util import Array

__all__ = ['logpdf', 'pdf', 'logcdf', 'cdf', 'logsf', 'sf', 'ppf']


def standard_logpdf(z: Array) -> Array:
    """``-z - exp(-z)``, the log density of the standard form."""
    return -z - lax.exp(-z)


def standard_logcdf(z: Array) -> Array:
    """``-exp(-z)``, the log CDF of the standard form."""
    return -lax.exp(-z)


logpdf, pdf, logcdf, cdf, logsf, sf, ppf = loc_scale(
    __name__, __all__,
    dict(logpdf=standard_logpdf, logcdf=standard_logcdf,
         ppf=lambda p: -jnp.log(-jnp.log(p))),
    {
        "logpdf": ("Log density ``-log(scale) - z - exp(-z)`` with z the standardized ``x``.",
                   "-1.0"),
        "pdf": ("Density ``exp(-z - exp(-z)) / scale`` (see :func:`logpdf`).", "0.367879"),
        "logcdf": ("Log CDF ``-exp(-z)``.", "-1.0"),
        "cdf": ("CDF ``exp(-exp(-z))``.", "0.367879"),
        "logsf": ("Log survival function ``log(1 - exp(-exp(-z)))``, accurate in both tails.",
                  "-0.458675"),
        "sf": ("Survival function ``1 - exp(-exp(-z))``.", "0.632121"),
        "ppf": ("Quantile function ``loc - scale * log(-log q)``, the inverse of :func:`cdf`.",
                "0.366513"),
    },
    positive_scale=True, example=(0.0,), example_q=(0.5,), quantile_arg="p")
