"""Samplers built from the basic ones, each with JAX's recipe (same subkeys, same operations in
the same order), so the same key gives JAX's numbers: chisquare, f, t, rayleigh, wald, pareto,
lognormal, maxwell, double_sided_maxwell, weibull_min, triangular, geometric."""
from __future__ import annotations

from typing import Any

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.random._util import canonical_shape, float_dtype, int_dtype, resolve_shape
from plax.random.gamma_family import _gamma
from plax.random.keys import check_key
from plax.random.samplers import (_exponential, _normal, _param, _rademacher, _subkeys,
                                  _uniform)

__all__ = ["chisquare", "f", "t", "rayleigh", "wald", "pareto", "lognormal", "maxwell",
           "double_sided_maxwell", "weibull_min", "triangular", "geometric"]


def _chisquare(data, df, shape, dtype):
    df = _param(df, dtype)
    two = lax.full((), 2, dtype)
    half_df = lax.div(df, two)
    log_g = _gamma(data, jnp.broadcast_to(half_df, shape), shape, dtype, log_space=True)
    return lax.mul(lax.exp(log_g), two)


def chisquare(key: Any, df: Any, shape: Any = None, dtype: Any = None):
    """Chi-square random values with ``df`` degrees of freedom: ``2 * Gamma(df / 2)``.

    Args:
      key: a single PRNG key.
      df: degrees of freedom, broadcast-compatible with ``shape``.
      shape: the result's shape (default: the shape of ``df``).
      dtype: a float dtype (default float32, float64 with x64).

    Returns:
      An array of ``shape`` and ``dtype``.

    Example:
      >>> random.chisquare(random.PRNGKey(0), 3.0, (2,)).shape
      (2,)
    """
    data, _ = check_key("chisquare", key)
    dt = float_dtype(dtype, "chisquare")
    return _chisquare(data, df, resolve_shape("chisquare", shape, df), dt)


def f(key: Any, dfnum: Any, dfden: Any, shape: Any = None, dtype: Any = None):
    """F-distributed random values: ``(X1 / dfnum) / (X2 / dfden)`` for chi-square ``X1, X2``.

    Args:
      key: a single PRNG key.
      dfnum: numerator degrees of freedom.
      dfden: denominator degrees of freedom (both broadcast-compatible with ``shape``).
      shape: the result's shape (default: the broadcast shape of the parameters).
      dtype: a float dtype.

    Returns:
      An array of ``shape`` and ``dtype``.

    Example:
      >>> random.f(random.PRNGKey(0), 2.0, 5.0, (3,)).shape
      (3,)
    """
    data, _ = check_key("f", key)
    dt = float_dtype(dtype, "f")
    shape = resolve_shape("f", shape, dfnum, dfden)
    dfden, dfnum = _param(dfden, dt), _param(dfnum, dt)
    key_dfd, key_dfn = _subkeys(data, 2)
    chi2_dfn = _chisquare(key_dfn, dfnum, shape, dt)
    chi2_dfd = _chisquare(key_dfd, dfden, shape, dt)
    return lax.div(lax.div(chi2_dfn, dfnum), lax.div(chi2_dfd, dfden))


def t(key: Any, df: Any, shape: Any = None, dtype: Any = None):
    """Student's t random values: ``N * sqrt((df / 2) / Gamma(df / 2))``.

    Args:
      key: a single PRNG key.
      df: degrees of freedom, broadcast-compatible with ``shape``.
      shape: the result's shape (default: the shape of ``df``).
      dtype: a float dtype.

    Returns:
      An array of ``shape`` and ``dtype``.

    Example:
      >>> random.t(random.PRNGKey(0), 4.0, (3,)).shape
      (3,)
    """
    data, _ = check_key("t", key)
    dt = float_dtype(dtype, "t")
    shape = resolve_shape("t", shape, df)
    df = _param(df, dt)
    key_n, key_g = _subkeys(data, 2)
    n = _normal(key_n, shape, dt)
    half_df = lax.div(df, lax.full((), 2, dt))
    g = _gamma(key_g, jnp.broadcast_to(half_df, shape), shape, dt)
    return n * jnp.sqrt(half_df / g)


def rayleigh(key: Any, scale: Any, shape: Any = None, dtype: Any = None):
    """Rayleigh random values: ``scale * sqrt(-2 log u)``.

    Args:
      key: a single PRNG key.
      scale: the scale, broadcast-compatible with ``shape``.
      shape: the result's shape (default: the shape of ``scale``).
      dtype: a float dtype.

    Returns:
      An array of ``shape`` and ``dtype``.

    Example:
      >>> random.rayleigh(random.PRNGKey(0), 1.0, (3,)).shape
      (3,)
    """
    data, _ = check_key("rayleigh", key)
    dt = float_dtype(dtype, "rayleigh")
    shape = resolve_shape("rayleigh", shape, scale)
    u = _uniform(data, shape, dt)
    scale = jnp.broadcast_to(_param(scale, dt), shape)
    return lax.mul(scale, lax.sqrt(lax.mul(lax.log(u), lax.full((), -2, dt))))


def wald(key: Any, mean: Any, shape: Any = None, dtype: Any = None):
    """Wald (inverse Gaussian, unit shape) random values, by Michael, Schucany and Haas's
    transformation of one normal and one uniform value.

    Args:
      key: a single PRNG key.
      mean: the mean, broadcast-compatible with ``shape``.
      shape: the result's shape (default: the shape of ``mean``).
      dtype: a float dtype.

    Returns:
      An array of ``shape`` and ``dtype``.

    Example:
      >>> random.wald(random.PRNGKey(0), 1.0, (3,)).shape
      (3,)
    """
    data, _ = check_key("wald", key)
    dt = float_dtype(dtype, "wald")
    shape = resolve_shape("wald", shape, mean)
    k1, k2 = _subkeys(data, 2)
    mean = jnp.broadcast_to(_param(mean, dt), shape)
    v = _normal(k1, shape, dt)
    z = _uniform(k2, shape, dt)
    y = lax.integer_pow(v, 2)
    y_sq = lax.integer_pow(y, 2)
    mean_sq = lax.integer_pow(mean, 2)
    sqrt_term = lax.sqrt(4 * mean * y + mean_sq * y_sq)
    x = mean + mean_sq * y / 2 - mean / 2 * sqrt_term
    return lax.select(lax.le(z, mean / (mean + x)), x, mean_sq / x)


def pareto(key: Any, b: Any, shape: Any = None, dtype: Any = None):
    """Pareto random values with shape ``b`` (support ``[1, inf)``): ``exp(E / b)``.

    Args:
      key: a single PRNG key.
      b: the shape parameter, broadcast-compatible with ``shape``.
      shape: the result's shape (default: the shape of ``b``).
      dtype: a float dtype.

    Returns:
      An array of ``shape`` and ``dtype``.

    Example:
      >>> random.pareto(random.PRNGKey(0), 3.0, (3,)).shape
      (3,)
    """
    data, _ = check_key("pareto", key)
    dt = float_dtype(dtype, "pareto")
    shape = resolve_shape("pareto", shape, b)
    return lax.exp(_exponential(data, shape, dt) / _param(b, dt))


def lognormal(key: Any, sigma: Any = np.float32(1), shape: Any = None, dtype: Any = None):
    """Log-normal random values: ``exp(sigma * N)``.

    Args:
      key: a single PRNG key.
      sigma: the standard deviation of the underlying normal.
      shape: the result's shape (default: the shape of ``sigma``).
      dtype: a float dtype.

    Returns:
      An array of ``shape`` and ``dtype``.

    Example:
      >>> random.lognormal(random.PRNGKey(0), 0.5, (3,)).shape
      (3,)
    """
    data, _ = check_key("lognormal", key)
    dt = float_dtype(dtype, "lognormal")
    shape = resolve_shape("lognormal", shape, sigma)
    return lax.exp(_normal(data, shape, dt) * _param(sigma, dt))


def _maxwell(data, shape, dtype):
    norm = _normal(data, shape + (3,), dtype)
    return jnp.linalg.norm(norm, axis=-1)


def maxwell(key: Any, shape: Any = (), dtype: Any = None):
    """Maxwell random values (unit scale): the length of a standard normal 3-vector.

    Args:
      key: a single PRNG key.
      shape: the result's shape.
      dtype: a float dtype.

    Returns:
      An array of ``shape`` and ``dtype``.

    Example:
      >>> random.maxwell(random.PRNGKey(0), (3,)).shape
      (3,)
    """
    data, _ = check_key("maxwell", key)
    dt = float_dtype(dtype, "maxwell")
    return _maxwell(data, canonical_shape(shape, "maxwell"), dt)


def double_sided_maxwell(key: Any, loc: Any, scale: Any, shape: Any = (), dtype: Any = None):
    """Double-sided Maxwell random values: a Maxwell value with a random sign, scaled and
    shifted.

    Args:
      key: a single PRNG key.
      loc: the location.
      scale: the scale.
      shape: leading dimensions; the result has shape ``shape + broadcast(loc, scale)`` (as in
        JAX).
      dtype: a float dtype.

    Returns:
      An array of ``dtype``.

    Example:
      >>> random.double_sided_maxwell(random.PRNGKey(0), 0.0, 1.0, (3,)).shape
      (3,)
    """
    data, _ = check_key("double_sided_maxwell", key)
    dt = float_dtype(dtype, "double_sided_maxwell")
    shape = canonical_shape(shape, "double_sided_maxwell")
    params = tuple(np.broadcast_shapes(np.shape(loc), np.shape(scale)))
    shape = shape + params
    maxwell_key, sign_key = _subkeys(data, 2)
    rvs = _maxwell(maxwell_key, shape, dt)
    sign = _rademacher(sign_key, shape, dt)
    return sign * rvs * scale + loc


def weibull_min(key: Any, scale: Any, concentration: Any, shape: Any = (), dtype: Any = None):
    """Weibull random values: ``scale * (-log1p(-u)) ** (1 / concentration)``.

    Args:
      key: a single PRNG key.
      scale: the scale.
      concentration: the shape parameter.
      shape: the result's shape.
      dtype: a float dtype.

    Returns:
      An array of ``dtype``, of ``shape`` broadcast with the parameters.

    Example:
      >>> random.weibull_min(random.PRNGKey(0), 1.0, 2.0, (3,)).shape
      (3,)
    """
    data, _ = check_key("weibull_min", key)
    dt = float_dtype(dtype, "weibull_min")
    u = _uniform(data, canonical_shape(shape, "weibull_min"), dt)
    return jnp.power(-jnp.log1p(-u), 1.0 / concentration) * scale


def triangular(key: Any, left: Any, mode: Any, right: Any, shape: Any = None, dtype: Any = None):
    """Triangular random values on ``[left, right]`` with peak at ``mode``, by inverting the
    distribution function.

    Args:
      key: a single PRNG key.
      left, mode, right: the parameters, broadcast-compatible with ``shape``.
      shape: the result's shape (default: the broadcast shape of the parameters).
      dtype: a float dtype.

    Returns:
      An array of ``shape`` and ``dtype``.

    Example:
      >>> random.triangular(random.PRNGKey(0), 0.0, 0.5, 1.0, (3,)).shape
      (3,)
    """
    data, _ = check_key("triangular", key)
    dt = float_dtype(dtype, "triangular")
    shape = resolve_shape("triangular", shape, left, mode, right)
    left = jnp.broadcast_to(_param(left, dt), shape)
    right = jnp.broadcast_to(_param(right, dt), shape)
    mode = jnp.broadcast_to(_param(mode, dt), shape)
    fc = (mode - left) / (right - left)
    u = _uniform(data, shape, dt)
    out1 = left + lax.sqrt(u * (right - left) * (mode - left))
    out2 = right - lax.sqrt((1 - u) * (right - left) * (right - mode))
    return lax.select(u < fc, out1, out2)


def geometric(key: Any, p: Any, shape: Any = None, dtype: Any = None):
    """Geometric random integers (trials until the first success, support ``1, 2, ...``):
    ``floor(log u / log1p(-p)) + 1``.

    Args:
      key: a single PRNG key.
      p: the success probability, broadcast-compatible with ``shape``.
      shape: the result's shape (default: the shape of ``p``).
      dtype: an integer dtype (default int32, int64 with x64).

    Returns:
      An array of ``shape`` and ``dtype``.

    Example:
      >>> random.geometric(random.PRNGKey(0), 0.5, (3,)).dtype
      dtype('int32')
    """
    data, _ = check_key("geometric", key)
    dt = int_dtype(dtype, "geometric")
    shape = resolve_shape("geometric", shape, p)
    p = jnp.asarray(p)
    if not jnp.issubdtype(p.dtype, jnp.inexact):
        p = p.astype(jnp.result_type(float))
    u = _uniform(data, shape, p.dtype)
    # u = 0 is mapped to 1 (as JAX does) so log u stays finite
    u = jnp.where(u == 0, jnp.ones_like(u), u)
    log_one_minus_p = jnp.broadcast_to(lax.log1p(-p), shape)
    g = lax.floor(lax.div(lax.log(u), log_one_minus_p)) + 1
    return g.astype(dt)
