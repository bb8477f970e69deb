"""Normalising functions of plax.nn: softmax, log_softmax, logsumexp, logmeanexp, standardize.

``softmax`` carries JAX's custom derivative rule (``y * (dx - sum(y * dx))``), so its
gradients equal JAX's, also where the input holds ``-inf`` or masked-out entries.
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.numpy.util import (canonicalize_axis_tuple, check_arraylike, promote_args_inexact)
from plax.transforms.custom_derivatives import custom_jvp
from plax.transforms.jit import jit

ArrayLike = Any
Array = Any
Axis = int | Sequence[int] | None

__all__ = ["softmax", "log_softmax", "logsumexp", "logmeanexp", "standardize"]


def _static_axis(axis: Axis) -> Axis:
    """``axis`` in a hashable form, so that it can be a static argument of ``jit``."""
    return tuple(axis) if isinstance(axis, list) else axis


def logsumexp(a: ArrayLike, axis: Axis = None, b: ArrayLike | None = None,
              keepdims: bool = False, return_sign: bool = False,
              where: ArrayLike | None = None) -> Array | tuple[Array, Array]:
    """``log(sum(b * exp(a)))`` over ``axis``, computed without overflow.

    The largest entry is subtracted before exponentiating (and held constant under
    differentiation), as in :func:`scipy.special.logsumexp`.

    Args:
      a: input array.
      axis: axis or axes to reduce; ``None`` (the default) reduces all of them.
      b: optional scale factors, broadcastable against ``a``; entries with ``b == 0``
        are left out.
      keepdims: keep the reduced axes with size 1.
      return_sign: also return the sign of the sum, the result then being
        ``log|sum|``.
      where: optional boolean mask of the entries to include.

    Returns:
      The reduced array, or ``(result, sign)`` when ``return_sign`` is true. Without
      ``return_sign``, a negative sum gives NaN.

    Example:
      >>> import plax
      >>> plax.nn.logsumexp(plax.numpy.array([0., 0.]))
      Array(0.6931472, dtype=float32)
    """
    if where is not None:
        a = jnp.where(where, a, 0)
    if b is not None:
        a, b = promote_args_inexact("logsumexp", a, b)
        a = jnp.where(b != 0, a, -np.inf)
    else:
        a, = promote_args_inexact("logsumexp", a)
    dims = canonicalize_axis_tuple(_static_axis(axis), a.ndim)
    real = jnp.real(a) if jnp.iscomplexobj(a) else a
    amax = jnp.max(real, axis=dims, keepdims=keepdims, where=where, initial=-np.inf)
    amax = lax.stop_gradient(jnp.where(jnp.isfinite(amax), amax, 0))
    amax_kept = amax if keepdims else jnp.expand_dims(amax, dims)
    exp_a = jnp.exp(a - amax_kept.astype(a.dtype))
    if b is not None:
        exp_a = exp_a * b
    sumexp = jnp.sum(exp_a, axis=dims, keepdims=keepdims, where=where)
    sign = jnp.sign(sumexp)
    if return_sign or not jnp.iscomplexobj(a):
        sumexp = jnp.abs(sumexp)
    out = jnp.log(sumexp) + amax.astype(sumexp.dtype)
    if return_sign:
        return out, sign
    if b is not None and not jnp.iscomplexobj(out):
        out = jnp.where(sign < 0, jnp.array(np.nan, dtype=out.dtype), out)
    return out


def logmeanexp(x: ArrayLike, axis: Axis = None, where: ArrayLike | None = None,
               keepdims: bool = False) -> Array:
    """``log(mean(exp(x)))`` over ``axis``: :func:`logsumexp` minus the log of the count.

    Args:
      x: input array.
      axis: axis or axes to reduce (default: all).
      where: optional boolean mask of the entries to include (and count).
      keepdims: keep the reduced axes with size 1.

    Returns:
      The reduced array.

    Example:
      >>> import plax
      >>> plax.nn.logmeanexp(plax.numpy.array([1., 1., 1.]))
      Array(1., dtype=float32)
    """
    lse = logsumexp(x, axis=axis, where=where, keepdims=keepdims)
    x = jnp.asarray(x)
    dims = canonicalize_axis_tuple(_static_axis(axis), x.ndim)
    if where is None:
        count = jnp.asarray(float(np.prod([x.shape[d] for d in dims])), dtype=lse.dtype)
    else:
        mask = jnp.broadcast_to(jnp.asarray(where), x.shape)
        count = jnp.sum(mask, axis=dims, keepdims=keepdims, dtype=lse.dtype)
    return lse - jnp.log(count)


@functools.partial(custom_jvp, nondiff_argnums=(1,))
def _softmax(x: Array, axis: Axis, where: Array | None, initial: Array) -> Array:
    x_max = jnp.max(x, axis, where=where, initial=initial, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, initial)
    unnormalized = jnp.exp(x_safe - x_max)
    result = unnormalized / jnp.sum(unnormalized, axis, where=where, keepdims=True)
    if where is not None:
        result = jnp.where(where, result, 0)
    return result


@_softmax.defjvp
def _softmax_jvp(axis, primals, tangents):
    (x, where, initial), (x_dot, _, _) = primals, tangents
    y = _softmax(x, axis, where, initial)
    return y, y * (x_dot - jnp.sum(y * x_dot, axis, where=where, keepdims=True))


def _softmax_impl(x: ArrayLike, axis: Axis, where: ArrayLike | None) -> Array:
    return _softmax(x, axis, where, -np.inf)


_softmax_impl.__name__ = "softmax"
_softmax_jit = jit(_softmax_impl, static_argnames=("axis",))


def softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Array:
    """Softmax, ``exp(x) / sum(exp(x))`` along ``axis``, so the outputs there sum to 1.

    The derivative is JAX's custom rule ``y * (dx - sum(y * dx))``.

    Args:
      x: input array.
      axis: axis or axes along which to normalise (``None``: all axes); default -1.
      where: optional boolean mask of the entries to include; masked-out outputs are 0.

    Returns:
      An array of the same shape as ``x``. An input of ``+inf`` gives NaN, as in JAX.

    Example:
      >>> import plax
      >>> plax.nn.softmax(plax.numpy.array([0., 0.]))
      Array([0.5, 0.5], dtype=float32)
    """
    check_arraylike("softmax", x)
    if where is not None:
        check_arraylike("softmax", where)
    return _softmax_jit(x, axis=_static_axis(axis), where=where)


def _log_softmax_impl(x: ArrayLike, axis: Axis, where: ArrayLike | None) -> Array:
    x = jnp.asarray(x)
    x_max = jnp.max(x, axis, where=where, initial=-np.inf, keepdims=True)
    x_safe = x if where is None else jnp.where(where, x, -np.inf)
    shifted = x_safe - lax.stop_gradient(x_max)
    shifted_lse = jnp.log(jnp.sum(jnp.exp(shifted), axis, where=where, keepdims=True))
    result = shifted - shifted_lse
    if where is not None:
        return jnp.where(where, result, -np.inf)
    return result


_log_softmax_impl.__name__ = "log_softmax"
_log_softmax_jit = jit(_log_softmax_impl, static_argnames=("axis",))


def log_softmax(x: ArrayLike, axis: Axis = -1, where: ArrayLike | None = None) -> Array:
    """Logarithm of :func:`softmax`, ``x - logsumexp(x)`` along ``axis``, computed stably.

    Args:
      x: input array.
      axis: axis or axes along which to normalise (``None``: all axes); default -1.
      where: optional boolean mask of the entries to include; masked-out outputs are
        ``-inf``.

    Returns:
      An array of the same shape as ``x``.

    Example:
      >>> import plax
      >>> plax.nn.log_softmax(plax.numpy.array([0., 0.]))
      Array([-0.6931472, -0.6931472], dtype=float32)
    """
    check_arraylike("log_softmax", x)
    if where is not None:
        check_arraylike("log_softmax", where)
    return _log_softmax_jit(x, axis=_static_axis(axis), where=where)


def _standardize_impl(x, axis, mean, variance, epsilon, where, algorithm):
    if mean is None:
        mean = jnp.mean(x, axis, keepdims=True, where=where)
    if variance is None:
        if algorithm == "stable":
            variance = jnp.mean(jnp.square(jnp.subtract(x, mean)), axis, keepdims=True,
                                where=where)
        else:
            # mean(x^2) - mean(x)^2, as JAX's default "fast" algorithm; it can dip below 0
            variance = jnp.mean(jnp.square(x), axis, keepdims=True, where=where) \
                - jnp.square(mean)
            variance = jnp.clip(variance, 0)
    return jnp.subtract(x, mean) * lax.rsqrt(variance + epsilon)


_standardize_impl.__name__ = "standardize"
_standardize_jit = jit(_standardize_impl, static_argnames=("axis", "algorithm"))


def standardize(x: ArrayLike, axis: Axis = -1, mean: ArrayLike | None = None,
                variance: ArrayLike | None = None, epsilon: ArrayLike = 1e-5,
                where: ArrayLike | None = None, *, algorithm: str = "fast") -> Array:
    """Shifts and scales ``x`` to zero mean and unit variance along ``axis``.

    Computes ``(x - mean) / sqrt(variance + epsilon)``.

    Args:
      x: input array.
      axis: axis or axes of the statistics (``None``: all axes); default -1.
      mean: the mean to use; by default ``x.mean(axis, where=where)``.
      variance: the variance to use; by default computed from ``x``.
      epsilon: added to the variance before the square root (default 1e-5).
      where: optional boolean mask of the entries the statistics use.
      algorithm: ``"fast"`` (``mean(x**2) - mean(x)**2``, clipped at 0, JAX's default)
        or ``"stable"`` (``mean((x - mean)**2)``).

    Returns:
      An array of the shape of ``x``.

    Raises:
      ValueError: for an unknown ``algorithm``.

    Example:
      >>> import plax
      >>> plax.nn.standardize(plax.numpy.array([1., 3.]), epsilon=0.)
      Array([-1.,  1.], dtype=float32)
    """
    check_arraylike("standardize", x)
    for arg in (mean, variance, where):
        if arg is not None:
            check_arraylike("standardize", arg)
    if variance is None and algorithm not in ("fast", "stable"):
        raise ValueError(f"Unknown algorithm '{algorithm}'. Expected 'fast' or 'stable'.")
    return _standardize_jit(x, _static_axis(axis), mean, variance, epsilon, where,
                            algorithm=algorithm)
