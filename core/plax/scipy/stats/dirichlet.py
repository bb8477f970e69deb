"""The Dirichlet distribution (``scipy.stats.dirichlet``)."""
from __future__ import annotations

from plax import lax
from plax import numpy as jnp
from plax.scipy import special

from ._util import NEG_INF, Array, ArrayLike, const, promote_dtypes_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x: ArrayLike, alpha: ArrayLike) -> Array:
    """Log density of the Dirichlet distribution with concentrations ``alpha``.

    Args:
      x: points of the simplex, shape ``(K, ...)`` (or ``(K - 1, ...)``, the last coordinate
        being ``1 - sum``); integers promote to floats.
      alpha: concentrations, shape ``(K,)``.

    Returns:
      The log density, shape ``x.shape[1:]``; ``-inf`` off the simplex.

    Raises:
      ValueError: if ``alpha`` is not one-dimensional or ``x``'s first axis does not fit it.
    """
    x, alpha = jnp.asarray(x), jnp.asarray(alpha)
    if alpha.ndim != 1:
        raise ValueError(f"`alpha` must be one-dimensional; got alpha.shape={alpha.shape}")
    k = alpha.shape[0]
    if x.ndim == 0 or x.shape[0] not in (k, k - 1):
        raise ValueError(f"`x` must have either the same number of entries as `alpha` or one "
                         f"entry fewer; got x.shape={x.shape}, alpha.shape={alpha.shape}")
    x, alpha = promote_dtypes_inexact(x, alpha)
    if x.shape[0] == k - 1:
        x = jnp.concatenate([x, const(x, 1.0) - jnp.sum(x, axis=0, keepdims=True)], axis=0)
    alpha = jnp.reshape(alpha, (k,) + (1,) * (x.ndim - 1))
    one = const(x, 1.0)
    log_norm = jnp.sum(lax.lgamma(alpha), axis=0) - lax.lgamma(jnp.sum(alpha, axis=0))
    out = jnp.sum(special.xlogy(alpha - one, x), axis=0) - log_norm
    on_simplex = jnp.all(x >= 0, axis=0) & (jnp.abs(jnp.sum(x, axis=0) - one) < const(x, 1e-6))
    return jnp.where(on_simplex, out, const(out, NEG_INF))


def pdf(x: ArrayLike, alpha: ArrayLike) -> Array:
    """Density of the Dirichlet distribution (see :func:`logpdf`).

    Args:
      x: points of the simplex, shape ``(K, ...)`` or ``(K - 1, ...)``.
      alpha: concentrations, shape ``(K,)``.

    Returns:
      The density, shape ``x.shape[1:]``.
    """
    return lax.exp(logpdf(x, alpha))
