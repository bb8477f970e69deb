"""The normal distribution (``scipy.stats.norm``), parameterised by ``loc`` and ``scale``."""
from __future__ import annotations

import math

from plax import lax
from plax.scipy import special

from ._util import Array, ArrayLike, const, inexact

__all__ = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]


def _z(name, x, loc, scale):
    x, loc, scale = inexact(name, x, loc, scale)
    return (x - loc) / scale, scale


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the normal density at ``x``.

    Args:
      x: points; integers promote to floats.
      loc: the mean.
      scale: the standard deviation.

    Returns:
      ``log N(x; loc, scale^2)``, broadcast over the arguments.

    Example:
      >>> from plax.scipy.stats import norm
      >>> round(float(norm.logpdf(0.0)), 6)
      -0.918939
    """
    z, scale = _z("norm.logpdf", x, loc, scale)
    return -const(z, 0.5) * z * z - lax.log(scale) - const(z, 0.5 * math.log(2 * math.pi))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The normal density at ``x`` (see :func:`logpdf`).

    Args:
      x: points. loc: the mean. scale: the standard deviation.

    Returns:
      ``N(x; loc, scale^2)``.
    """
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The normal CDF at ``x``.

    Args:
      x: points. loc: the mean. scale: the standard deviation.

    Returns:
      ``P(X <= x)``.
    """
    z, _ = _z("norm.cdf", x, loc, scale)
    return special.ndtr(z)


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the normal CDF, accurate in the lower tail.

    Args:
      x: points. loc: the mean. scale: the standard deviation.

    Returns:
      ``log P(X <= x)``.
    """
    z, _ = _z("norm.logcdf", x, loc, scale)
    return special.log_ndtr(z)


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The normal survival function ``1 - cdf``, accurate in the upper tail.

    Args:
      x: points. loc: the mean. scale: the standard deviation.

    Returns:
      ``P(X > x)``.
    """
    z, _ = _z("norm.sf", x, loc, scale)
    return special.ndtr(-z)


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the normal survival function.

    Args:
      x: points. loc: the mean. scale: the standard deviation.

    Returns:
      ``log P(X > x)``.
    """
    z, _ = _z("norm.logsf", x, loc, scale)
    return special.log_ndtr(-z)


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The normal quantile function, the inverse of :func:`cdf`.

    Args:
      q: probabilities in ``[0, 1]``. loc: the mean. scale: the standard deviation.

    Returns:
      ``x`` with ``cdf(x) == q``; NaN outside ``[0, 1]``.

    Example:
      >>> from plax.scipy.stats import norm
      >>> round(float(norm.ppf(0.975)), 6)
      1.959964
    """
    q, loc, scale = inexact("norm.ppf", q, loc, scale)
    return special.ndtri(q) * scale + loc


def isf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """The inverse of the normal survival function.

    Args:
      q: probabilities in ``[0, 1]``. loc: the mean. scale: the standard deviation.

    Returns:
      ``x`` with ``sf(x) == q``.
    """
    q, loc, scale = inexact("norm.isf", q, loc, scale)
    return -special.ndtri(q) * scale + loc
