"""The uniform distribution on ``[loc, loc + scale]`` (``scipy.stats.uniform``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp

from ._util import NAN, NEG_INF, Array, ArrayLike, const, inexact

__all__ = ['logpdf', 'pdf', 'cdf', 'ppf']


def logpdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log density: ``-log(scale)`` inside the interval, ``-inf`` outside.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      The log density.
    """
    x, loc, scale = inexact("uniform.logpdf", x, loc, scale)
    inside = (x >= loc) & (x <= loc + scale)
    return jnp.where(inside, -lax.log(scale), const(x, NEG_INF))


def pdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Density (see :func:`logpdf`).

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      The density.
    """
    return lax.exp(logpdf(x, loc, scale))


def cdf(x: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """CDF: ``(x - loc) / scale`` clipped to ``[0, 1]``.

    Args:
      x: points; integers promote to floats.
      loc: location.
      scale: scale (positive).

    Returns:
      ``P(X <= x)``.
    """
    x, loc, scale = inexact("uniform.cdf", x, loc, scale)
    return jnp.clip((x - loc) / scale, const(x, 0.0), const(x, 1.0))


def ppf(q: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Quantile function ``loc + q * scale``.

    Args:
      q: probabilities in ``[0, 1]``.
      loc: location.
      scale: scale (positive).

    Returns:
      The quantile; NaN outside ``[0, 1]``.
    """
    q, loc, scale = inexact("uniform.ppf", q, loc, scale)
    return jnp.where((q >= 0) & (q <= 1), loc + q * scale, const(q, NAN))

