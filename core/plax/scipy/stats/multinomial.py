"""The multinomial distribution (``scipy.stats.multinomial``)."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.numpy.util import check_arraylike
from plax.scipy import special

from ._util import NEG_INF, Array, ArrayLike, const, promote_dtypes_inexact

__all__ = ['logpmf', 'pmf']


def logpmf(x: ArrayLike, n: ArrayLike, p: ArrayLike) -> Array:
    """Log probability of the counts ``x`` (last axis: categories) in ``n`` trials.

    ``log n! + sum_i (x_i log p_i - log x_i!)``.

    Args:
      x: integer counts, categories along the last axis.
      n: the integer number of trials.
      p: category probabilities along the last axis.

    Returns:
      The log pmf over the leading axes; ``-inf`` where the counts do not sum to ``n``.

    Raises:
      ValueError: if ``x`` or ``n`` is not of an integer dtype.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.stats import multinomial
      >>> round(float(multinomial.pmf(jnp.array([1, 1]), 2, jnp.array([0.5, 0.5]))), 6)
      0.5
    """
    check_arraylike("multinomial.logpmf", x, n, p)
    p, = promote_dtypes_inexact(p)
    x, n = jnp.asarray(x), jnp.asarray(n)
    if not (jnp.issubdtype(x.dtype, jnp.integer) and jnp.issubdtype(n.dtype, jnp.integer)):
        raise ValueError(f"x and n must be of integer type; got x.dtype={x.dtype}, "
                         f"n.dtype={n.dtype}")
    total = jnp.sum(x, axis=-1)
    xf, nf = x.astype(p.dtype), n.astype(p.dtype)
    one = const(p, 1.0)
    out = lax.lgamma(nf + one) + jnp.sum(special.xlogy(xf, p) - lax.lgamma(xf + one), axis=-1)
    return jnp.where(total == n, out, const(p, NEG_INF))


def pmf(x: ArrayLike, n: ArrayLike, p: ArrayLike) -> Array:
    """Probability (see :func:`logpmf`).

    Args:
      x: integer counts, categories along the last axis.
      n: the integer number of trials.
      p: category probabilities.

    Returns:
      The pmf.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.stats import multinomial
      >>> round(float(multinomial.pmf(jnp.array([2, 0]), 2, jnp.array([0.5, 0.5]))), 6)
      0.25
    """
    return lax.exp(logpmf(x, n, p))
