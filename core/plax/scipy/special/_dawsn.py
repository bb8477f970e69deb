"""Dawson's integral ``D(x) = exp(-x^2) integral_0^x exp(t^2) dt``."""
from __future__ import annotations

import math

import numpy as np

import plax
from plax import numpy as jnp

from ._util import Array, ArrayLike, const, inexact

__all__ = ["dawsn"]

_H = 0.2              # Rybicki's spacing: the error is about exp(-(pi / (2 h))^2), ~1e-27
_ODD = np.arange(-31, 32, 2, dtype=np.float64)  # exp(-(31 h)^2) is below float64's epsilon
_TAYLOR_BELOW = 0.2
_TAYLOR_TERMS = 12


def _taylor(x: Array) -> Array:
    """``D(x) = sum_k (-2)^k x^(2k+1) / (2k+1)!!`` for small ``|x|``."""
    x2 = x * x
    total, term = jnp.zeros_like(x), x
    for k in range(_TAYLOR_TERMS):
        total = total + term
        term = term * (-2.0) * x2 / (2 * k + 3)
    return total


def _rybicki(x: Array) -> Array:
    """Rybicki's sum ``1/sqrt(pi) sum_{n odd} exp(-(x - (n0 + n) h)^2) / (n0 + n)``, with
    ``n0`` the even integer nearest ``x / h``, for ``x >= 0``."""
    n0 = 2 * jnp.round(x / (2 * _H))
    offset = x - n0 * _H
    odd = jnp.asarray(_ODD, dtype=x.dtype)
    terms = jnp.exp(-(offset[..., None] - odd * _H) ** 2) / (n0[..., None] + odd)
    return const(x, 1 / math.sqrt(math.pi)) * jnp.sum(terms, axis=-1)


@plax.custom_jvp
def _dawsn(x: Array) -> Array:
    ax = jnp.abs(x)
    small = ax < _TAYLOR_BELOW
    finite = jnp.isfinite(ax)
    large = jnp.where(small | ~finite, const(x, 1.0), ax)
    out = jnp.where(small, _taylor(jnp.where(small, ax, const(x, 0.0))), _rybicki(large))
    out = jnp.where(finite, out, const(x, 0.0))
    return jnp.where(jnp.isnan(x), x, jnp.where(x < 0, -out, out))


_dawsn.defjvps(lambda t, ans, x: (1 - 2 * x * ans) * t)


def dawsn(x: ArrayLike) -> Array:
    """Dawson's integral ``D(x) = exp(-x^2) integral_0^x exp(t^2) dt``, elementwise.

    Taylor series near 0, Rybicki's exponentially convergent sum elsewhere.

    Args:
      x: real arraylike; integers promote to floats.

    Returns:
      ``D(x)``, odd in ``x``, 0 at ``+-inf``; derivative ``1 - 2 x D(x)``.

    Example:
      >>> from plax.scipy.special import dawsn
      >>> dawsn(1.0)
      Array(0.5380795, dtype=float32)
    """
    x, = inexact("dawsn", x)
    return _dawsn(x)
