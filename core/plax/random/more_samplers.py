"""Samplers built from the basic ones, each with JAX's recipe (same subkeys, same operations in
the same order), so the same key gives JAX's numbers: chisquare, f, t, rayleigh, wald, pareto,
lognormal, maxwell, double_sided_maxwell, weibull_min, triangular, geometric, binomial,
multinomial."""
from __future__ import annotations

from typing import Any

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.random._util import (canonical_shape, float_dtype, int_dtype, resolve_shape,
                               takes_out_sharding)
from plax.random.gamma_family import _gamma
from plax.random.keys import check_key
from plax.random.samplers import (_exponential, _normal, _param, _rademacher, _subkeys,
                                  _uniform)

__all__ = ["chisquare", "f", "t", "rayleigh", "wald", "pareto", "lognormal", "maxwell",
           "double_sided_maxwell", "weibull_min", "triangular", "geometric", "binomial",
           "multinomial"]


def _chisquare(data, df, shape, dtype):
    df = _param(df, dtype)
    two = lax.full((), 2, dtype)
    half_df = lax.div(df, two)
    log_g = _gamma(data, jnp.broadcast_to(half_df, shape), shape, dtype, log_space=True)
    return lax.mul(lax.exp(log_g), two)


@takes_out_sharding
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


@takes_out_sharding
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


@takes_out_sharding
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


@takes_out_sharding
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


@takes_out_sharding
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


@takes_out_sharding
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


@takes_out_sharding
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


@takes_out_sharding
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


@takes_out_sharding
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


@takes_out_sharding
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


# ------------------------------------------------------------------ binomial and multinomial

def _stirling_tail_table() -> list:
    """``log k! - ((k + 1/2) log(k + 1) - (k + 1) + log(2 pi) / 2)`` for ``k = 0..9``: the
    error of Stirling's formula at ``k + 1``, tabulated where the series below is poor."""
    import math
    return [math.lgamma(k + 1) - ((k + 0.5) * math.log(k + 1) - (k + 1)
                                  + 0.5 * math.log(2 * math.pi)) for k in range(10)]


_STIRLING_TAIL = _stirling_tail_table()


def _stirling_tail(k):
    """The tail above: tabulated for ``k <= 9``, its asymptotic series beyond."""
    table = jnp.asarray(_STIRLING_TAIL, dtype=k.dtype)
    small = k <= 9
    kc = lax.clamp(lax.full_like(k, 0.0), k, lax.full_like(k, 9.0))
    kp1sq = (kc + 1) * (kc + 1)
    series = (1.0 / 12 - (1.0 / 360 - 1.0 / 1260 / kp1sq) / kp1sq) / (kc + 1)
    return lax.select(small, table[jnp.floor(kc).astype(np.int32)], series)


def _binomial_inversion(data, count, prob, shape, dtype):
    """Counts geometric waiting times until their sum exceeds ``count`` (small ``n p``)."""
    from plax.random._loops import while_loop
    log1mp = jnp.log1p(-prob)

    def running(state):
        return jnp.any(state[2] <= count)

    def step(state):
        key, num_geom, geom_sum = state
        subkey, key = _subkeys(key, 2)
        num_geom = lax.select(geom_sum <= count, num_geom + 1, num_geom)
        u = _uniform(subkey, shape, prob.dtype)
        geom = jnp.ceil(jnp.log(u) / log1mp)
        return key, num_geom, geom_sum + geom

    zeros = lax.full(shape, 0, prob.dtype)
    _, k, _ = while_loop(running, step, (data, zeros, zeros))
    return (k - 1).astype(dtype)


def _binomial_btrs(data, count, prob, shape, dtype):
    """Hörmann's transformed rejection with squeeze (BTRS, J. Stat. Comput. Simul. 46, 1993),
    with the constants of TensorFlow's and JAX's implementations."""
    from plax.random._loops import while_loop
    stddev = jnp.sqrt(count * prob * (1 - prob))
    b = 1.15 + 2.53 * stddev
    a = -0.0873 + 0.0248 * b + 0.01 * prob
    c = count * prob + 0.5
    v_r = 0.92 - 4.2 / b
    r = prob / (1 - prob)
    alpha = (2.83 + 5.1 / b) * stddev
    m = jnp.floor((count + 1) * prob)

    def running(state):
        return jnp.any(~state[2])

    def step(state):
        key, k_out, accepted = state
        key, sub0, sub1 = _subkeys(key, 3)
        u = _uniform(sub0, shape, prob.dtype)
        v = _uniform(sub1, shape, prob.dtype)
        u = u - 0.5
        us = 0.5 - jnp.abs(u)
        accept1 = (us >= 0.07) & (v <= v_r)
        k = jnp.floor((2 * a / us + b) * u + c)
        reject = (k < 0) | (k > count)
        v = jnp.log(v * alpha / (a / (us * us) + b))
        bound = ((m + 0.5) * jnp.log((m + 1) / (r * (count - m + 1)))
                 + (count + 1) * jnp.log((count - m + 1) / (count - k + 1))
                 + (k + 0.5) * jnp.log(r * (count - k + 1) / (k + 1))
                 + _stirling_tail(m) + _stirling_tail(count - m)
                 - _stirling_tail(k) - _stirling_tail(count - k))
        accept = accept1 | (~reject & (v <= bound))
        # as JAX: every round may overwrite an earlier acceptance, so the loop runs (and
        # samples) until all elements have accepted once
        return key, lax.select(accept, k, k_out), accepted | accept

    init = (data, lax.full(shape, -1, prob.dtype), lax.full(shape, False, np.dtype(bool)))
    _, k, _ = while_loop(running, step, init)
    return k.astype(dtype)


def _binomial(data, n, p, shape, dtype):
    p = jnp.asarray(p)
    if not jnp.issubdtype(p.dtype, jnp.inexact):
        p = p.astype(jnp.result_type(float))
    count = jnp.broadcast_to(lax.convert_element_type(jnp.asarray(n), p.dtype), shape)
    prob = jnp.broadcast_to(p, shape)
    q = lax.select(prob < 0.5, prob, 1.0 - prob)
    bad_count = jnp.isnan(count) | (count < 0.0)
    inf_count = jnp.isinf(count)
    q_nan, q_neg = jnp.isnan(q), q < 0.0
    q = lax.select(q_nan | q_neg, lax.full_like(q, 0.01), q)
    use_inversion = bad_count | (count * q <= 10.0)
    count = jnp.floor(count)
    count_inv = lax.select(use_inversion, count, lax.full_like(count, 0.0))
    count_btrs = lax.select(use_inversion, lax.full_like(count, 1e4), count)
    q_btrs = lax.select(use_inversion, lax.full_like(q, 0.5), q)
    samples = lax.select(use_inversion, _binomial_inversion(data, count_inv, q, shape, dtype),
                         _binomial_btrs(data, count_btrs, q_btrs, shape, dtype))
    invalid = q_neg | q_nan | bad_count
    samples = lax.select(invalid, jnp.full_like(samples, np.nan), samples)
    samples = lax.select(inf_count & ~invalid, jnp.full_like(samples, np.inf), samples)
    # q was the smaller of p and 1 - p: count failures instead of successes where p >= 1/2
    return lax.select((prob >= 0.5) & ~invalid & ~inf_count, count.astype(dtype) - samples,
                      samples)


def binomial(key: Any, n: Any, p: Any, shape: Any = None, dtype: Any = None):
    """Binomial random values: successes in ``n`` trials of probability ``p`` (as floats).

    Small ``n min(p, 1-p)`` (at most 10) count geometric waiting times; larger ones use
    Hörmann's transformed rejection (BTRS). NaN for NaN/negative ``n`` or NaN/out-of-range
    ``p``; ``inf`` for infinite ``n``; non-integer ``n`` is floored (as NumPy).

    Args:
      key: a single PRNG key.
      n: trial counts.
      p: success probabilities (both broadcast-compatible with ``shape``).
      shape: the result's shape (default: the broadcast shape of ``n`` and ``p``).
      dtype: a float dtype (default float32, float64 with x64).

    Returns:
      An array of ``shape`` and ``dtype``.

    Example:
      >>> random.binomial(random.PRNGKey(0), 10, 0.5, (3,)).shape
      (3,)
    """
    data, _ = check_key("binomial", key)
    dt = float_dtype(dtype, "binomial")
    shape = resolve_shape("binomial", shape, n, p)
    return _binomial(data, n, p, shape, dt)


def multinomial(key: Any, n: Any, p: Any, *, shape: Any = None, dtype: Any = None,
                unroll: Any = 1):
    """Multinomial counts: ``n`` trials spread over the categories of the last axis of ``p``,
    drawn as a chain of binomials (each category takes a binomial share of what remains).

    Args:
      key: a single PRNG key.
      n: trial counts (broadcast to ``shape[:-1]``).
      p: category probabilities along the last axis (summing to 1).
      shape: the result's shape (default ``p.shape``); its last axis is the categories'.
      dtype: a float dtype.
      unroll: accepted for JAX compatibility.

    Returns:
      Counts of ``shape`` summing to ``n`` along the last axis.

    Example:
      >>> counts = random.multinomial(random.PRNGKey(0), 10.0, jnp.array([0.2, 0.3, 0.5]))
      >>> float(counts.sum())
      10.0
    """
    data, _ = check_key("multinomial", key)
    dt = float_dtype(dtype, "multinomial")
    n, p = jnp.asarray(n), jnp.asarray(p)
    inexact = jnp.result_type(n, p, float) if not jnp.issubdtype(
        jnp.result_type(n, p), jnp.inexact) else jnp.result_type(n, p)
    n, p = n.astype(inexact), p.astype(inexact)
    shape = tuple(p.shape) if shape is None else canonical_shape(shape, "multinomial")
    n = jnp.broadcast_to(n, shape[:-1])
    p = jnp.moveaxis(jnp.broadcast_to(p, shape), -1, 0)
    remaining = jnp.flip(jnp.cumsum(jnp.flip(p, 0), axis=0), 0)
    ratios = p / jnp.where(remaining == 0, jnp.ones_like(remaining), remaining)
    keys = _subkeys(data, ratios.shape[0])
    counts = []
    rest = n
    for i in range(ratios.shape[0]):
        c = _binomial(keys[i], rest, jnp.clip(ratios[i], 0, 1), rest.shape, rest.dtype)
        counts.append(c)
        rest = rest - c
    return jnp.moveaxis(jnp.stack(counts), 0, -1).astype(dt)
