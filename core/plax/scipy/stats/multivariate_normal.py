"""The multivariate normal distribution (``scipy.stats.multivariate_normal``)."""
from __future__ import annotations

import math

from plax import lax
from plax import numpy as jnp
from plax.scipy import linalg

from ._util import Array, ArrayLike, const, promote_dtypes_inexact

__all__ = ["logpdf", "pdf"]


def logpdf(x: ArrayLike, mean: ArrayLike, cov: ArrayLike, allow_singular: None = None) -> Array:
    """Log density of the multivariate normal ``N(mean, cov)`` at ``x``.

    Args:
      x: points, shape ``(..., n)`` (or scalars when ``mean`` is a scalar).
      mean: the mean, shape ``(..., n)`` or a scalar.
      cov: the covariance, ``(..., n, n)``, or a scalar variance (times the identity).
      allow_singular: must be None (singular covariances are not supported, as in JAX).

    Returns:
      The log density, shape ``(...)``.

    Raises:
      NotImplementedError: if ``allow_singular`` is given.
      ValueError: if ``cov`` has more than 0 but fewer than 2 dimensions.
    """
    if allow_singular is not None:
        raise NotImplementedError("allow_singular argument of multivariate_normal.logpdf")
    x, mean, cov = (jnp.asarray(a) for a in promote_dtypes_inexact(x, mean, cov))
    log_2pi = const(x, math.log(2 * math.pi))
    half = const(x, 0.5)
    if mean.ndim == 0:
        return -half * (x - mean) ** 2 / cov - half * (log_2pi + lax.log(cov))
    n = mean.shape[-1]
    y = x - mean
    if cov.ndim == 0:
        return (-half * jnp.sum(y * y, axis=-1) / cov
                - const(x, n / 2) * (log_2pi + lax.log(cov)))
    if cov.ndim < 2 or cov.shape[-2:] != (n, n):
        raise ValueError(f"multivariate_normal.logpdf got incompatible shapes: mean {mean.shape},"
                         f" cov {cov.shape}")
    chol = jnp.linalg.cholesky(cov)
    batch = jnp.broadcast_shapes(y.shape[:-1], chol.shape[:-2])
    chol = jnp.broadcast_to(chol, batch + (n, n))
    y = jnp.broadcast_to(y, batch + (n,))
    z = linalg.solve_triangular(chol, y[..., None], lower=True)[..., 0]
    log_det = jnp.sum(jnp.log(jnp.diagonal(chol, axis1=-2, axis2=-1)), axis=-1)
    return -half * jnp.sum(z * z, axis=-1) - const(x, n / 2) * log_2pi - log_det


def pdf(x: ArrayLike, mean: ArrayLike, cov: ArrayLike) -> Array:
    """Density of the multivariate normal ``N(mean, cov)`` (see :func:`logpdf`).

    Args:
      x: points, shape ``(..., n)``.
      mean: the mean, shape ``(..., n)``.
      cov: the covariance, ``(..., n, n)`` or a scalar.

    Returns:
      The density, shape ``(...)``.
    """
    return lax.exp(logpdf(x, mean, cov))
