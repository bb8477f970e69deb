"""The truncated normal distribution (``scipy.stats.truncnorm``): a normal of mean ``loc`` and
deviation ``scale`` restricted to standardized bounds ``[a, b]``."""
from __future__ import annotations

from plax import numpy as jnp
from plax.scipy import special
from plax.scipy.stats import norm

from ._family import loc_scale
from ._util import NEG_INF, Array, const, log_diff_exp

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]


def _log_mass(lo: Array, hi: Array) -> Array:
    """``log(Phi(hi) - Phi(lo))``, from the tail where the interval lies for accuracy."""
    right = lo > 0
    upper = jnp.where(right, special.log_ndtr(-lo), special.log_ndtr(hi))
    lower = jnp.where(right, special.log_ndtr(-hi), special.log_ndtr(lo))
    return log_diff_exp(upper, lower)


def _logcdf(z: Array, a: Array, b: Array) -> Array:
    z = jnp.clip(z, a, b)
    out = _log_mass(a, z) - _log_mass(a, b)
    return jnp.where(z <= a, const(z, NEG_INF), jnp.where(z >= b, const(z, 0.0), out))


def _logsf(z: Array, a: Array, b: Array) -> Array:
    z = jnp.clip(z, a, b)
    out = _log_mass(z, b) - _log_mass(a, b)
    return jnp.where(z <= a, const(z, 0.0), jnp.where(z >= b, const(z, NEG_INF), out))


logpdf, pdf, cdf, logcdf, sf, logsf = loc_scale(
    __name__, __all__,
    dict(logpdf=lambda z, a, b: norm.logpdf(z) - _log_mass(a, b), logcdf=_logcdf,
         logsf=_logsf),
    {
        "logpdf": ("Log density of the truncated normal; ``-inf`` outside ``[a, b]``.",
                   "-0.843772"),
        "pdf": ("Density of the truncated normal (see :func:`logpdf`).", "0.430085"),
        "cdf": ("CDF of the truncated normal.", "0.65088"),
        "logcdf": ("Log CDF of the truncated normal: ``-inf`` below ``a``, 0 above ``b``.",
                   "-0.429429"),
        "sf": ("Survival function of the truncated normal.", "0.34912"),
        "logsf": ("Log survival function of the truncated normal: 0 below ``a``, ``-inf`` "
                  "above ``b``.", "-1.052341"),
    },
    shapes={"a": "standardized lower bound.", "b": "standardized upper bound."},
    support=lambda a, b: (a, b), example=(0.5, -1.0, 2.0))
