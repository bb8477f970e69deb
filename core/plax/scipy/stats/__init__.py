"""plax.scipy.stats: SciPy's distributions on plax (``jax.scipy.stats``), one module each.

Each module has the functions JAX offers for it (``norm.logpdf``, ``poisson.logpmf``, ...),
with SciPy's signatures (``loc``/``scale`` defaults); arguments promote to an inexact dtype
and broadcast together.
"""
from . import (bernoulli, beta, binom, cauchy, chi2, dirichlet, expon, gamma, gennorm, geom,
               laplace, logistic, multivariate_normal, norm, pareto, poisson, t, truncnorm,
               uniform, vonmises)
from . import betabinom, gumbel_l, gumbel_r, multinomial, nbinom, wrapcauchy
from ._descriptive import ModeResult, mode, rankdata, sem
from .kde import gaussian_kde

__all__ = ["bernoulli", "beta", "binom", "cauchy", "chi2", "dirichlet", "expon", "gamma",
           "gennorm", "geom", "laplace", "logistic", "multivariate_normal", "norm", "pareto",
           "poisson", "t", "truncnorm", "uniform", "vonmises",
           "betabinom", "gumbel_l", "gumbel_r", "multinomial", "nbinom", "wrapcauchy",
           "gaussian_kde", "mode", "rankdata", "sem"]
