"""The chi-squared distribution (``scipy.stats.chi2``): a gamma distribution of shape ``df / 2`` and scale 2."""
from __future__ import annotations

import math

import numpy as np

from plax.scipy.stats import gamma

from ._family import loc_scale
from ._util import Array, const

__all__ = ['logpdf', 'pdf', 'cdf', 'logcdf', 'sf', 'logsf']


def _halved(standard):
    """``standard`` of the gamma distribution at ``z / 2`` with shape ``df / 2``."""
    return lambda z, df: standard(z / const(z, 2.0), df / const(z, 2.0))


def _logpdf(z: Array, df: Array) -> Array:
    return _halved(gamma.standard_logpdf)(z, df) - const(z, math.log(2.0))


logpdf, pdf, cdf, logcdf, sf, logsf = loc_scale(
    __name__, __all__,
    dict(logpdf=_logpdf, cdf=_halved(gamma.standard_cdf), sf=_halved(gamma.standard_sf)),
    {
        "logpdf": ("Log density ``(k - 1) log(z / 2) - z / 2 - gammaln(k) - log(2 scale)`` "
                   "with ``k = df / 2``; ``-inf`` below ``loc`` (finite at ``x == loc`` for "
                   "``df == 2``, as SciPy).", "-1.572365"),
        "pdf": ("Density (see :func:`logpdf`).", "0.207554"),
        "cdf": ("CDF ``P(df / 2, z / 2)``.", "0.427593"),
        "logcdf": ("Log CDF ``log P(df / 2, z / 2)``.", "-0.849583"),
        "sf": ("Survival function ``Q(df / 2, z / 2)``.", "0.572407"),
        "logsf": ("Log survival function ``log Q(df / 2, z / 2)``.", "-0.557905"),
    },
    shapes={"df": "degrees of freedom (positive)."}, support=(0.0, np.inf), example=(2.0, 3.0))
