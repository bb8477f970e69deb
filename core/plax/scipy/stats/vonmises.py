"""The von Mises distribution (``scipy.stats.vonmises``), standard form."""
from __future__ import annotations

import math


from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._util import NAN, Array, ArrayLike, const, inexact

__all__ = ['logpdf', 'pdf']


def logpdf(x: ArrayLike, kappa: ArrayLike) -> Array:
    """Log density ``kappa (cos x - 1) - log(2 pi i0e(kappa))``.

    Args:
      x: angles; integers promote to floats.
      kappa: concentration (positive; NaN otherwise, as JAX).

    Returns:
      The log density.
    """
    x, kappa = inexact("vonmises.logpdf", x, kappa)
    out = kappa * (lax.cos(x) - const(x, 1.0)) - lax.log(const(x, 2 * math.pi) * special.i0e(kappa))
    return jnp.where(kappa > 0, out, const(x, NAN))


def pdf(x: ArrayLike, kappa: ArrayLike) -> Array:
    """Density (see :func:`logpdf`).

    Args:
      x: angles; integers promote to floats.
      kappa: concentration (positive; NaN otherwise, as JAX).

    Returns:
      The density.
    """
    return lax.exp(logpdf(x, kappa))

