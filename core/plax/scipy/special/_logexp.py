"""Log-sum-exp, softmax, the logistic function and its inverse, and the entropy helpers:
logsumexp, softmax, log_softmax, expit, logit, xlogy, xlog1py, entr, rel_entr, kl_div."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from plax import lax
from plax import numpy as jnp
from plax.nn import log_softmax as _nn_log_softmax, softmax as _nn_softmax
# One log-sum-exp for plax.nn and plax.scipy.special, as in JAX (the same function object).
from plax.nn.softmax import logsumexp
from plax.transforms.custom_derivatives import custom_jvp

from ._util import Array, ArrayLike, const, inexact

__all__ = ["logsumexp", "softmax", "log_softmax", "expit", "logit", "xlogy", "xlog1py", "entr",
           "rel_entr", "kl_div"]

Axis = int | Sequence[int] | None


def softmax(x: ArrayLike, /, *, axis: Axis = None) -> Array:
    """``exp(x) / sum(exp(x))`` over ``axis`` (all axes by default, as SciPy).

    Args:
      x: arraylike; integers promote to floats.
      axis: axis or axes to normalise over.

    Returns:
      Non-negative values summing to one over ``axis``.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.special import softmax
      >>> softmax(jnp.array([0.0, 0.0]))
      Array([0.5, 0.5], dtype=float32)
    """
    x, = inexact("softmax", x)
    return _nn_softmax(x, axis=axis)


def log_softmax(x: ArrayLike, /, *, axis: Axis = None) -> Array:
    """``x - logsumexp(x)`` over ``axis`` (all axes by default), computed stably.

    Args:
      x: arraylike; integers promote to floats.
      axis: axis or axes to normalise over.

    Returns:
      Log-probabilities over ``axis``.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.special import log_softmax
      >>> log_softmax(jnp.array([0.0, 0.0]))
      Array([-0.6931472, -0.6931472], dtype=float32)
    """
    x, = inexact("log_softmax", x)
    return _nn_log_softmax(x, axis=axis)


def expit(x: ArrayLike) -> Array:
    """The logistic sigmoid ``1 / (1 + exp(-x))``, elementwise.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``expit(x)`` in ``[0, 1]``.

    Example:
      >>> from plax.scipy.special import expit
      >>> float(expit(0.0))
      0.5
    """
    x, = inexact("expit", x)
    return lax.logistic(x)


def logit(x: ArrayLike) -> Array:
    """The log-odds ``log(x / (1 - x))``, the inverse of :func:`expit`.

    Args:
      x: probabilities; integers promote to floats.

    Returns:
      ``logit(x)``: ``-inf`` at 0, ``inf`` at 1, NaN outside ``[0, 1]``.

    Example:
      >>> from plax.scipy.special import logit
      >>> float(logit(0.5))
      0.0
    """
    x, = inexact("logit", x)
    return lax.log(x / (const(x, 1.0) - x))


def _x_times(log_fn):
    """``x * log_fn(y)``, 0 where ``x == 0``, with the derivative of ``x * log_fn(y)``
    (JAX's rule: ``dx log_fn(y) + dy x log_fn'(y)``)."""

    @custom_jvp
    def f(x, y):
        return jnp.where(x != 0, x * log_fn(y), jnp.zeros_like(x))

    @f.defjvp
    def _jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        out = f(x, y)
        dy = x / y if log_fn is lax.log else x / (const(y, 1.0) + y)
        return out, tx * log_fn(y) + ty * dy

    return f


_xlogy = _x_times(lax.log)
_xlog1py = _x_times(lax.log1p)


def xlogy(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log(y)``, defined as 0 where ``x == 0`` (even where ``y`` is 0).

    Args:
      x, y: arraylikes; integers promote to floats; broadcast together.

    Returns:
      ``x * log(y)``, or 0 where ``x == 0``.

    Example:
      >>> from plax.scipy.special import xlogy
      >>> float(xlogy(0.0, 0.0))
      0.0
    """
    x, y = inexact("xlogy", x, y)
    return _xlogy(x, y)


def xlog1py(x: ArrayLike, y: ArrayLike) -> Array:
    """``x * log1p(y)``, defined as 0 where ``x == 0`` (even where ``y`` is -1).

    Args:
      x, y: arraylikes; integers promote to floats; broadcast together.

    Returns:
      ``x * log(1 + y)``, or 0 where ``x == 0``.

    Example:
      >>> from plax.scipy.special import xlog1py
      >>> float(xlog1py(0.0, -1.0))
      0.0
    """
    x, y = inexact("xlog1py", x, y)
    return _xlog1py(x, y)


def entr(x: ArrayLike) -> Array:
    """The elementwise entropy ``-x log(x)``: 0 at 0, ``-inf`` for negative ``x``.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``-x log(x)``.

    Example:
      >>> from plax.scipy.special import entr
      >>> round(float(entr(0.5)), 6)
      0.346574
    """
    x, = inexact("entr", x)
    return jnp.where(x < 0, const(x, -np.inf), -_xlogy(x, x))


def rel_entr(p: ArrayLike, q: ArrayLike) -> Array:
    """The elementwise relative entropy ``p log(p / q)``.

    0 where ``p == 0`` and ``q >= 0``, ``inf`` where either is negative or only ``q`` is 0.

    Args:
      p, q: arraylikes; integers promote to floats; broadcast together.

    Returns:
      ``p log(p / q)``.

    Example:
      >>> from plax.scipy.special import rel_entr
      >>> round(float(rel_entr(1.0, 2.0)), 6)
      -0.693147
    """
    p, q = inexact("rel_entr", p, q)
    both_pos = (p > 0) & (q > 0)
    one = const(p, 1.0)
    value = p * jnp.log(jnp.where(both_pos, p, one) / jnp.where(both_pos, q, one))
    out = jnp.where(both_pos, value,
                    jnp.where((p == 0) & (q >= 0), const(p, 0.0), const(p, np.inf)))
    return jnp.where(jnp.isnan(p) | jnp.isnan(q), const(p, np.nan), out)


def kl_div(p: ArrayLike, q: ArrayLike) -> Array:
    """The elementwise Kullback-Leibler divergence ``p log(p / q) - p + q``.

    ``q`` where ``p == 0`` and ``q >= 0``, ``inf`` where either is negative or only ``q`` is 0.

    Args:
      p, q: arraylikes; integers promote to floats; broadcast together.

    Returns:
      ``p log(p / q) - p + q``.

    Example:
      >>> from plax.scipy.special import kl_div
      >>> round(float(kl_div(1.0, 2.0)), 6)
      0.306853
    """
    p, q = inexact("kl_div", p, q)
    both_pos = (p > 0) & (q > 0)
    one = const(p, 1.0)
    value = p * jnp.log(jnp.where(both_pos, p, one) / jnp.where(both_pos, q, one)) - p + q
    out = jnp.where(both_pos, value, jnp.where((p == 0) & (q >= 0), q, const(p, np.inf)))
    return jnp.where(jnp.isnan(p) | jnp.isnan(q), const(p, np.nan), out)
