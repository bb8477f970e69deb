"""The left-skewed Gumbel distribution of minima (``scipy.stats.gumbel_l``).

With ``z = (x - loc) / scale``, ``gumbel_l`` at ``z`` is ``gumbel_r`` at ``-z`` (mirrored).
"""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp

from ._util import NAN, Array, ArrayLike, const, inexact, log_diff_exp

__all__ = ['logpdf', 'pdf', 'logcdf', 'cdf', 'logsf', 'sf', 'ppf']


def _z(name: str, x: ArrayLike, loc: ArrayLike, scale: ArrayLike):
    x, loc, scale = inexact(name, x, loc, scale)
    return -(x - loc) / scale, scale


def _valid(scale: Array, out: Array) -> Array:
    return jnp.where(scale > 0, out, const(out, NAN))


def _log1mexp(v: Array) -> Array:
    """``log(1 - exp(v))`` for ``v <= 0``."""
    return log_diff_exp(jnp.zeros_like(v), v)


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log density ``-log(scale) - z - exp(-z)`` with z the negated standardized ``x``.

    Args:
      x: arraylike; integers promote to floats.
      loc: location.
      scale: scale (positive; NaN otherwise).

    Returns:
      The log pdf.

    Example:
      >>> from plax.scipy.stats import gumbel_l
      >>> round(float(gumbel_l.logpdf(0.0)), 6)
      -1.0
    """
    z, scale = _z("gumbel_l.logpdf", x, loc, scale)
    return _valid(scale, -jnp.log(scale) - z - lax.exp(-z))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Density (see :func:`logpdf`).

    Args:
      x: arraylike.
      loc: location.
      scale: scale.

    Returns:
      The pdf.

    Example:
      >>> from plax.scipy.stats import gumbel_l
      >>> round(float(gumbel_l.pdf(0.0)), 6)
      0.367879
    """
    return lax.exp(logpdf(x, loc, scale))


def _log_lower(z: Array) -> Array:
    """``log P(Z <= z)`` for the right-skewed standard form."""
    return -lax.exp(-z)


def logcdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the CDF.

    Args:
      x: arraylike.
      loc: location.
      scale: scale.

    Returns:
      ``log P(X <= x)``, accurate in both tails.

    Example:
      >>> from plax.scipy.stats import gumbel_l
      >>> round(float(gumbel_l.logcdf(0.0)), 6)
      -0.458675
    """
    z, scale = _z("gumbel_l.logcdf", x, loc, scale)
    return _valid(scale, _log1mexp(_log_lower(z)))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """CDF.

    Args:
      x: arraylike.
      loc: location.
      scale: scale.

    Returns:
      ``P(X <= x)``.

    Example:
      >>> from plax.scipy.stats import gumbel_l
      >>> round(float(gumbel_l.cdf(0.0)), 6)
      0.632121
    """
    z, scale = _z("gumbel_l.cdf", x, loc, scale)
    return _valid(scale, -jnp.expm1(_log_lower(z)))


def logsf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log of the survival function.

    Args:
      x: arraylike.
      loc: location.
      scale: scale.

    Returns:
      ``log P(X > x)``, accurate in both tails.

    Example:
      >>> from plax.scipy.stats import gumbel_l
      >>> round(float(gumbel_l.logsf(0.0)), 6)
      -1.0
    """
    z, scale = _z("gumbel_l.logsf", x, loc, scale)
    return _valid(scale, _log_lower(z))


def sf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Survival function ``1 - cdf``.

    Args:
      x: arraylike.
      loc: location.
      scale: scale.

    Returns:
      ``P(X > x)``.

    Example:
      >>> from plax.scipy.stats import gumbel_l
      >>> round(float(gumbel_l.sf(0.0)), 6)
      0.367879
    """
    z, scale = _z("gumbel_l.sf", x, loc, scale)
    return _valid(scale, lax.exp(_log_lower(z)))


def ppf(p: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Quantile function, the inverse of :func:`cdf`.

    Args:
      p: probabilities in ``[0, 1]`` (NaN outside).
      loc: location.
      scale: scale.

    Returns:
      ``loc + scale * log(-log1p(-p))``.

    Example:
      >>> from plax.scipy.stats import gumbel_l
      >>> round(float(gumbel_l.ppf(0.5)), 6)
      -0.366513
    """
    p, loc, scale = inexact("gumbel_l.ppf", p, loc, scale)
    out = loc + scale * jnp.log(-jnp.log1p(-p))
    out = jnp.where((p >= 0) & (p <= 1), out, const(p, NAN))
    return _valid(scale, out)
