"""The beta distribution on ``[loc, loc + scale]`` (``scipy.stats.beta``)."""
from __future__ import annotations

from plax import numpy as jnp
from plax.scipy import special

from ._family import loc_scale
from ._util import Array, const

__all__ = ['logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf']


def _clip(z: Array) -> Array:
    return jnp.clip(z, const(z, 0.0), const(z, 1.0))


def _logpdf(z: Array, a: Array, b: Array) -> Array:
    one, zs = const(z, 1.0), _clip(z)
    return special.xlogy(a - one, zs) + special.xlog1py(b - one, -zs) - special.betaln(a, b)


logpdf, pdf, cdf, logcdf, sf, logsf = loc_scale(
    __name__, __all__,
    dict(logpdf=_logpdf,
         cdf=lambda z, a, b: special.betainc(a, b, _clip(z)),
         sf=lambda z, a, b: special.betainc(b, a, const(z, 1.0) - _clip(z))),
    {
        "logpdf": ("Log density ``(a-1) log z + (b-1) log(1-z) - betaln(a, b) - log(scale)``; "
                   "``-inf`` outside the support.", "-0.595424"),
        "pdf": ("Density ``z^(a-1) (1-z)^(b-1) / (B(a, b) scale)`` (see :func:`logpdf`).",
                "0.551329"),
        "cdf": ("CDF ``I_z(a, b)``, the regularized incomplete beta function.", "0.057669"),
        "logcdf": ("Log CDF ``log I_z(a, b)``.", "-2.853037"),
        "sf": ("Survival function ``I_{1-z}(b, a)``.", "0.942331"),
        "logsf": ("Log survival function ``log I_{1-z}(b, a)``.", "-0.059399"),
    },
    shapes={"a": "first shape (positive).", "b": "second shape (positive)."},
    support=(0.0, 1.0), example=(0.25, 2.5, 1.5))
