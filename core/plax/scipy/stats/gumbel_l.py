"""The left-skewed Gumbel distribution of minima (``scipy.stats.gumbel_l``).

With ``z = (x - loc) / scale``, ``gumbel_l`` at ``z`` is ``gumbel_r`` at ``-z`` (mirrored):
its log density and log survival function are ``gumbel_r``'s log density and log CDF at ``-z``.
"""
from __future__ import annotations

from plax import numpy as jnp

from ._family import loc_scale
from .gumbel_r import standard_logcdf, standard_logpdf

__all__ = ['logpdf', 'pdf', 'logcdf', 'cdf', 'logsf', 'sf', 'ppf']


logpdf, pdf, logcdf, cdf, logsf, sf, ppf = loc_scale(
    __name__, __all__,
    dict(logpdf=lambda z: standard_logpdf(-z), logsf=lambda z: standard_logcdf(-z),
         ppf=lambda p: jnp.log(-jnp.log1p(-p))),
    {
        "logpdf": ("Log density ``-log(scale) + z - exp(z)`` with z the standardized ``x``.",
                   "-1.0"),
        "pdf": ("Density ``exp(z - exp(z)) / scale`` (see :func:`logpdf`).", "0.367879"),
        "logcdf": ("Log CDF ``log(1 - exp(-exp(z)))``, accurate in both tails.", "-0.458675"),
        "cdf": ("CDF ``1 - exp(-exp(z))``.", "0.632121"),
        "logsf": ("Log survival function ``-exp(z)``.", "-1.0"),
        "sf": ("Survival function ``exp(-exp(z))``.", "0.367879"),
        "ppf": ("Quantile function ``loc + scale * log(-log1p(-q))``, the inverse of "
                ":func:`cdf`.", "-0.366513"),
    },
    positive_scale=True, example=(0.0,), example_q=(0.5,), quantile_arg="p")
