"""The wrapped Cauchy distribution on ``[0, 2 pi]`` (``scipy.stats.wrapcauchy``)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp

from ._util import NAN, NEG_INF, Array, ArrayLike, const, inexact

__all__ = ['logpdf', 'pdf']


def logpdf(x: ArrayLike, c: ArrayLike) -> Array:
    """Log density ``log((1 - c^2) / (2 pi (1 + c^2 - 2 c cos x)))``.

    Args:
      x: angles in ``[0, 2 pi]``; integers promote to floats.
      c: the shape, in ``(0, 1)``.

    Returns:
      The log pdf: ``-inf`` outside ``[0, 2 pi]``, NaN for ``c`` outside ``(0, 1)``.

    Example:
      >>> from plax.scipy.stats import wrapcauchy
      >>> round(float(wrapcauchy.pdf(0.0, 0.5)), 6)  # 0.75 / (2 pi 0.25)
      0.477465
    """
    x, c = inexact("wrapcauchy.logpdf", x, c)
    one = const(x, 1.0)
    out = (jnp.log1p(-c * c) - const(x, np.log(2 * np.pi))
           - jnp.log(one + c * c - 2 * c * jnp.cos(x)))
    out = jnp.where((x >= 0) & (x <= const(x, 2 * np.pi)), out, const(x, NEG_INF))
    return jnp.where((c > 0) & (c < 1), out, const(x, NAN))


def pdf(x: ArrayLike, c: ArrayLike) -> Array:
    """Density (see :func:`logpdf`).

    Args:
      x: angles in ``[0, 2 pi]``.
      c: the shape, in ``(0, 1)``.

    Returns:
      The pdf.

    Example:
      >>> from plax.scipy.stats import wrapcauchy
      >>> round(float(wrapcauchy.pdf(3.14159265, 0.5)), 6)  # 0.75 / (2 pi 2.25)
      0.053052
    """
    return lax.exp(logpdf(x, c))
