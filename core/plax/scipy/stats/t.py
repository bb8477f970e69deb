"""Student's t distribution (``scipy.stats.t``)."""
from __future__ import annotations

import math

import numpy as np

from plax import lax
from plax import numpy as jnp

from ._util import Array, ArrayLike, const, inexact

__all__ = ['logpdf', 'pdf']


def logpdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Log density of Student's t with ``df`` degrees of freedom.

    Args:
      x: points; integers promote to floats.
      df: degrees of freedom (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      The log density.
    """
    x, df, loc, scale = inexact("t.logpdf", x, df, loc, scale)
    z = (x - loc) / scale
    half = const(x, 0.5)
    norm = (lax.lgamma(half * (df + const(x, 1.0))) - lax.lgamma(half * df)
            - half * lax.log(df * const(x, math.pi)) - lax.log(scale))
    return norm - half * (df + const(x, 1.0)) * lax.log1p(z * z / df)


def pdf(x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0, scale: ArrayLike = 1) -> Array:
    """Density (see :func:`logpdf`).

    Args:
      x: points; integers promote to floats.
      df: degrees of freedom (positive).
      loc: location.
      scale: scale (positive).

    Returns:
      The density.
    """
    return lax.exp(logpdf(x, df, loc, scale))

