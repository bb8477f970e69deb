"""The logistic distribution (``scipy.stats.logistic``)."""
from __future__ import annotations

from plax import lax
from plax.scipy import special

from ._family import loc_scale
from ._util import Array, const

__all__ = ['logpdf', 'pdf', 'cdf', 'sf', 'ppf', 'isf']


def _logpdf(z: Array) -> Array:
    z = lax.abs(z)  # the density is symmetric; this form is stable for large |z|
    return -z - const(z, 2.0) * lax.log1p(lax.exp(-z))


logpdf, pdf, cdf, sf, ppf, isf = loc_scale(
    __name__, __all__,
    dict(logpdf=_logpdf, cdf=special.expit, sf=lambda z: special.expit(-z),
         ppf=special.logit, isf=lambda q: -special.logit(q)),
    {
        "logpdf": ("Log density ``-z - 2 log(1 + exp(-z)) - log(scale)``, stable for large "
                   "``|z|``.", "-1.626523"),
        "pdf": ("Density ``exp(-z) / (scale (1 + exp(-z))^2)`` (see :func:`logpdf`).", "0.196612"),
        "cdf": ("CDF ``expit(z)``.", "0.731059"),
        "sf": ("Survival function ``expit(-z)``.", "0.268941"),
        "ppf": ("Quantile function ``loc + scale * logit(q)``.", "1.098612"),
        "isf": ("Inverse survival function ``loc - scale * logit(q)``.", "-1.098612"),
    },
    nan_outside_unit=False, quantile_arg="x")
