"""The normal distribution (``scipy.stats.norm``), parameterised by ``loc`` and ``scale``."""
from __future__ import annotations

import math

from plax.scipy import special

from ._family import loc_scale
from ._util import Array, const

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def _logpdf(z: Array) -> Array:
    return -const(z, 0.5) * z * z - const(z, 0.5 * math.log(2 * math.pi))


logpdf, pdf, cdf, logcdf, sf, logsf, ppf, isf = loc_scale(
    __name__, __all__,
    dict(logpdf=_logpdf, cdf=special.ndtr, logcdf=special.log_ndtr,
         sf=lambda z: special.ndtr(-z), logsf=lambda z: special.log_ndtr(-z),
         ppf=special.ndtri, isf=lambda q: -special.ndtri(q)),
    {
        "logpdf": ("Log of the normal density ``-z^2 / 2 - log(sqrt(2 pi) scale)``.", "-1.418939"),
        "pdf": ("The normal density at ``x`` (see :func:`logpdf`).", "0.241971"),
        "cdf": ("The normal CDF ``ndtr(z)``.", "0.841345"),
        "logcdf": ("Log of the normal CDF ``log_ndtr(z)``, accurate in the lower tail.",
                   "-0.172754"),
        "sf": ("The normal survival function ``ndtr(-z)``, accurate in the upper tail.",
               "0.158655"),
        "logsf": ("Log of the normal survival function ``log_ndtr(-z)``.", "-1.841022"),
        "ppf": ("The normal quantile function ``loc + scale ndtri(q)``, the inverse of "
                ":func:`cdf`.", "0.67449"),
        "isf": ("The inverse ``loc - scale ndtri(q)`` of the normal survival function.",
                "-0.67449"),
    },
    nan_outside_unit=False, example=(1.0,), example_q=(0.75,))
