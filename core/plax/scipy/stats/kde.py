"""Gaussian kernel density estimation (``scipy.stats.gaussian_kde``), a pytree so that it
passes through ``jit`` and ``vmap``."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import plax
from plax import numpy as jnp
from plax.numpy.util import check_arraylike
from plax.scipy import special
from plax.tree_util import register_pytree_node_class

from ._util import Array, ArrayLike, promote_dtypes_inexact

__all__ = ["gaussian_kde"]


def _no_complex(x: Array, what: str) -> None:
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise NotImplementedError(f"gaussian_kde does not support complex {what}")


@register_pytree_node_class
class gaussian_kde:
    """A Gaussian kernel density estimate of data in ``d`` dimensions.

    The kernel's covariance is the data's (weighted) covariance times ``factor**2``, with
    Scott's factor ``neff**(-1/(d+4))`` by default.

    Args:
      dataset: the data, shape ``(n,)`` or ``(d, n)``.
      bw_method: ``"scott"`` (default), ``"silverman"``, a scalar factor, or a callable
        taking the estimator and returning the factor.
      weights: optional non-negative weights of the ``n`` points.

    Attributes:
      dataset, weights (normalised), neff (effective sample size), covariance, inv_cov,
      d, n.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.stats import gaussian_kde
      >>> kde = gaussian_kde(jnp.array([0.0, 1.0, 2.0]), bw_method=1.0)
      >>> round(float(kde.pdf(1.0)[0]), 6)
      0.294295
    """

    __slots__ = ("neff", "dataset", "weights", "covariance", "inv_cov")

    def __init__(self, dataset: ArrayLike, bw_method: Any = None, weights: ArrayLike = None):
        check_arraylike("gaussian_kde", dataset)
        data = jnp.atleast_2d(jnp.asarray(dataset))
        _no_complex(data, "data")
        if not data.size > 1:
            raise ValueError("`dataset` input should have multiple elements.")
        d, n = data.shape
        if weights is None:
            data, = promote_dtypes_inexact(data)
            w = jnp.full((n,), 1.0 / n, dtype=data.dtype)
        else:
            check_arraylike("gaussian_kde", weights)
            data, w = promote_dtypes_inexact(data, jnp.asarray(weights))
            w = jnp.atleast_1d(w)
            if w.ndim != 1:
                raise ValueError("`weights` input should be one-dimensional.")
            if w.shape[0] != n:
                raise ValueError(f"`weights` input should be of length n={n}; got {w.shape[0]}")
            w = w / jnp.sum(w)
        self._set(dataset=data, weights=w, neff=1 / jnp.sum(w * w))
        factor = self._factor(bw_method, d)
        cov = jnp.atleast_2d(jnp.cov(data, rowvar=True, bias=False, aweights=w))
        self._set(covariance=cov * factor ** 2, inv_cov=jnp.linalg.inv(cov) / factor ** 2)

    def _set(self, **values: Any) -> None:
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def _factor(self, bw_method: Any, d: int) -> Array:
        if bw_method is None or (isinstance(bw_method, str) and bw_method == "scott"):
            return self.neff ** (-1.0 / (d + 4))
        if isinstance(bw_method, str) and bw_method == "silverman":
            return (self.neff * (d + 2) / 4.0) ** (-1.0 / (d + 4))
        if callable(bw_method):
            return bw_method(self)
        if not isinstance(bw_method, str) and jnp.ndim(bw_method) == 0:
            return bw_method
        raise ValueError("`bw_method` should be 'scott', 'silverman', a scalar, or a callable.")

    # pytree protocol
    def tree_flatten(self):
        return (self.neff, self.dataset, self.weights, self.covariance, self.inv_cov), None

    @classmethod
    def tree_unflatten(cls, aux_data, children):
        kde = cls.__new__(cls)
        kde._set(**dict(zip(cls.__slots__, children)))
        return kde

    @property
    def d(self) -> int:
        """Number of dimensions."""
        return self.dataset.shape[0]

    @property
    def n(self) -> int:
        """Number of data points."""
        return self.dataset.shape[1]

    def _points(self, points: ArrayLike) -> Array:
        pts = jnp.atleast_2d(jnp.asarray(points))
        _no_complex(pts, "coordinates")
        k, m = pts.shape
        if k != self.d:
            if k == 1 and m == self.d:
                return pts.reshape(self.d, 1)
            raise ValueError(f"points have dimension {k}, dataset has dimension {self.d}")
        return pts

    def _log_kernels(self, points: ArrayLike) -> tuple[Array, Array]:
        """``log(w_j K(x_i - p_j))`` for every point ``x_i`` (rows) and datum ``p_j``."""
        pts = self._points(points)
        pts, data, inv_cov = promote_dtypes_inexact(pts, self.dataset, self.inv_cov)
        white = jnp.linalg.cholesky(inv_cov)          # inv_cov = white @ white.T
        diff = (pts.T[:, None, :] - data.T[None, :, :]) @ white
        log_norm = jnp.sum(jnp.log(jnp.diagonal(white))) - 0.5 * self.d * math.log(2 * math.pi)
        return log_norm - 0.5 * jnp.sum(diff * diff, axis=-1), jnp.log(self.weights)

    def evaluate(self, points: ArrayLike) -> Array:
        """The estimated density at ``points`` (shape ``(d, m)``, or ``(m,)`` when ``d == 1``).

        Args:
          points: the evaluation points.

        Returns:
          ``m`` densities.

        Example:
          >>> import plax.numpy as jnp
          >>> from plax.scipy.stats import gaussian_kde
          >>> kde = gaussian_kde(jnp.array([0.0, 2.0]), bw_method=1.0)
          >>> kde.evaluate(jnp.array([1.0])).shape
          (1,)
        """
        check_arraylike("evaluate", points)
        log_k, log_w = self._log_kernels(points)
        return jnp.sum(jnp.exp(log_k + log_w), axis=1)

    __call__ = evaluate

    def pdf(self, x: ArrayLike) -> Array:
        """The estimated density (same as :meth:`evaluate`).

        Args:
          x: the evaluation points.

        Returns:
          The densities.

        Example:
          >>> import plax.numpy as jnp
          >>> from plax.scipy.stats import gaussian_kde
          >>> gaussian_kde(jnp.array([0.0, 2.0])).pdf(jnp.array([0.0, 1.0])).shape
          (2,)
        """
        return self.evaluate(x)

    def logpdf(self, x: ArrayLike) -> Array:
        """Log of the estimated density, by log-sum-exp (accurate far from the data).

        Args:
          x: the evaluation points.

        Returns:
          The log densities.

        Example:
          >>> import plax.numpy as jnp
          >>> from plax.scipy.stats import gaussian_kde
          >>> float(gaussian_kde(jnp.array([0.0, 2.0])).logpdf(100.0)[0]) < -1000
          True
        """
        check_arraylike("logpdf", x)
        log_k, log_w = self._log_kernels(x)
        return special.logsumexp(log_k + log_w, axis=1)

    def _convolve(self, total_cov: Array, centers: Array, weights: Array, mean: Array) -> Array:
        """``sum_j w_j N(mean; c_j, total_cov)``."""
        from plax.scipy import linalg
        chol = linalg.cho_factor(total_cov, lower=True)
        diff = centers - mean[:, None]
        quad = jnp.sum(diff * linalg.cho_solve(chol, diff), axis=0)
        norm = (2 * math.pi) ** (self.d / 2) * jnp.prod(jnp.diagonal(chol[0]))
        return jnp.sum(weights * jnp.exp(-0.5 * quad)) / norm

    def integrate_gaussian(self, mean: ArrayLike, cov: ArrayLike) -> Array:
        """The integral of the estimate times the Gaussian density ``N(mean, cov)``.

        Args:
          mean: the Gaussian's mean, ``d`` values.
          cov: its ``(d, d)`` covariance.

        Returns:
          The integral, a scalar.

        Example:
          >>> import plax.numpy as jnp
          >>> from plax.scipy.stats import gaussian_kde
          >>> kde = gaussian_kde(jnp.array([0.0, 2.0]), bw_method=1.0)
          >>> round(float(kde.integrate_gaussian(jnp.array([1.0]), jnp.array([[1.0]]))), 6)
          0.19497
        """
        mean = jnp.atleast_1d(jnp.squeeze(jnp.asarray(mean)))
        cov = jnp.atleast_2d(jnp.asarray(cov))
        if mean.shape != (self.d,):
            raise ValueError(f"mean does not have dimension {self.d}")
        if cov.shape != (self.d, self.d):
            raise ValueError(f"covariance does not have dimension {self.d}")
        return self._convolve(self.covariance + cov, self.dataset, self.weights, mean)

    def integrate_box_1d(self, low: ArrayLike, high: ArrayLike) -> Array:
        """The estimate's probability of ``[low, high]`` (one-dimensional data only).

        Args:
          low: the lower limit, a scalar.
          high: the upper limit, a scalar.

        Returns:
          The probability, a scalar.

        Example:
          >>> import plax.numpy as jnp
          >>> from plax.scipy.stats import gaussian_kde
          >>> kde = gaussian_kde(jnp.array([-1.0, 1.0]))
          >>> round(float(kde.integrate_box_1d(-jnp.inf, 0.0)), 6)
          0.5
        """
        if self.d != 1:
            raise ValueError("integrate_box_1d() only handles 1D pdfs")
        if np.ndim(low) != 0 or np.ndim(high) != 0:
            raise ValueError("the limits of integration in integrate_box_1d must be scalars")
        sigma = jnp.sqrt(self.covariance[0, 0])
        lo = (low - self.dataset[0]) / sigma
        hi = (high - self.dataset[0]) / sigma
        return jnp.sum(self.weights * (special.ndtr(hi) - special.ndtr(lo)))

    def integrate_kde(self, other: "gaussian_kde") -> Array:
        """The integral of the product of this estimate and ``other``.

        Args:
          other: another :class:`gaussian_kde` of the same dimension.

        Returns:
          The integral, a scalar.

        Example:
          >>> import plax.numpy as jnp
          >>> from plax.scipy.stats import gaussian_kde
          >>> kde = gaussian_kde(jnp.array([0.0, 2.0]), bw_method=1.0)
          >>> round(float(kde.integrate_kde(kde)), 6)
          0.160228
        """
        if other.d != self.d:
            raise ValueError("KDEs are not the same dimensionality")
        small, large = (self, other) if self.n < other.n else (other, self)
        total = self.covariance + other.covariance
        per_point = plax.vmap(lambda m: self._convolve(total, large.dataset, large.weights, m),
                              in_axes=1)(small.dataset)
        return jnp.sum(per_point * small.weights)

    def resample(self, key: Array, shape: tuple[int, ...] = ()) -> Array:
        """Draw samples: a datum chosen by weight plus a kernel-shaped Gaussian offset.

        Args:
          key: a PRNG key.
          shape: the batch shape of the samples.

        Returns:
          An array of shape ``(d,) + shape``.

        Example:
          >>> import plax.numpy as jnp
          >>> from plax import random
          >>> from plax.scipy.stats import gaussian_kde
          >>> kde = gaussian_kde(jnp.array([0.0, 2.0, 5.0]))
          >>> kde.resample(random.PRNGKey(0), (4,)).shape
          (1, 4)
        """
        from plax import random
        shape = tuple(shape)
        pick_key, noise_key = random.split(key)
        idx = random.choice(pick_key, self.n, shape=shape, p=self.weights)
        noise = random.multivariate_normal(noise_key, jnp.zeros(self.d, self.covariance.dtype),
                                           self.covariance, shape=shape,
                                           dtype=self.dataset.dtype)
        return self.dataset[:, idx] + jnp.moveaxis(noise, -1, 0)

    def integrate_box(self, low_bounds: Any, high_bounds: Any, maxpts: Any = None) -> Array:
        """Not supported (as in JAX): only :meth:`integrate_box_1d`.

        Raises:
          NotImplementedError: always.

        Example:
          >>> import plax.numpy as jnp
          >>> from plax.scipy.stats import gaussian_kde
          >>> gaussian_kde(jnp.array([0.0, 2.0])).integrate_box(0.0, 1.0)
          Traceback (most recent call last):
          NotImplementedError: only 1D box integrations are supported; use `integrate_box_1d`
        """
        raise NotImplementedError(
            "only 1D box integrations are supported; use `integrate_box_1d`")

    def set_bandwidth(self, bw_method: Any = None) -> None:
        """Not supported (as in JAX): the estimator is immutable; build a new one.

        Raises:
          NotImplementedError: always.

        Example:
          >>> import plax.numpy as jnp
          >>> from plax.scipy.stats import gaussian_kde
          >>> gaussian_kde(jnp.array([0.0, 2.0])).set_bandwidth("silverman")
          Traceback (most recent call last):
          NotImplementedError: dynamically changing the bandwidth method is not supported
        """
        raise NotImplementedError("dynamically changing the bandwidth method is not supported")
