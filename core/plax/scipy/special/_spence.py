"""Spence's function ``spence(x) = integral_1^x log(t) / (1 - t) dt = Li2(1 - x)``."""
from __future__ import annotations

import math

import numpy as np

import plax
from plax import lax
from plax import numpy as jnp

from ._util import Array, ArrayLike, const, inexact

__all__ = ["spence"]

_TERMS = 60  # the dilogarithm's series at |z| <= 1/2: 2**-60 / 60**2 is far below float64 eps
_PI2_6 = math.pi ** 2 / 6


def _li2_series(z: Array) -> Array:
    """``Li2(z) = sum_{k>=1} z^k / k^2`` for ``|z| <= 1/2``."""
    def body(k, carry):
        total, power = carry
        kf = k.astype(z.dtype) if hasattr(k, "astype") else const(z, k)
        power = power * z
        return total + power / (kf * kf), power

    return lax.fori_loop(1, _TERMS + 1, body, (jnp.zeros_like(z), jnp.ones_like(z)))[0]


def _spence_value(x: Array) -> Array:
    """``Li2(1 - x)`` for ``x >= 0``, each range mapped into the series' disc:
    ``[0, 1/2)`` by reflection, ``[1/2, 3/2]`` directly, ``(3/2, 2]`` by Landen's identity and
    ``x > 2`` by inversion and Landen's identity."""
    one, half = const(x, 1.0), const(x, 0.5)
    pi2_6 = const(x, _PI2_6)
    low = x < 0.5
    mid = (x >= 0.5) & (x <= 1.5)
    upper = (x > 1.5) & (x <= 2.0)
    far = x > 2.0
    # pick one series argument per element; the others stay at a harmless 0
    xl = jnp.where(low & (x > 0), x, half)
    xu = jnp.where(upper, x, const(x, 2.0))
    xf = jnp.where(far & jnp.isfinite(x), x, const(x, 4.0))
    arg = jnp.where(low, xl, jnp.where(mid, one - x,
                                       jnp.where(upper, (xu - one) / xu, one / xf)))
    li2 = _li2_series(jnp.where(low | mid | upper | far, arg, const(x, 0.0)))
    low_v = pi2_6 - jnp.log(xl) * jnp.log1p(-xl) - li2
    low_v = jnp.where(x == 0, pi2_6, low_v)
    upper_v = -li2 - half * jnp.log(xu) ** 2
    far_v = (-pi2_6 - half * jnp.log(xf - one) ** 2 + li2
             + half * jnp.log(xf / (xf - one)) ** 2)
    out = jnp.where(low, low_v, jnp.where(mid, li2, jnp.where(upper, upper_v, far_v)))
    bad = (x < 0) | jnp.isnan(x) | jnp.isposinf(x)  # NaN at +inf, as SciPy and JAX
    return jnp.where(bad, const(x, np.nan), out)


@plax.custom_jvp
def _spence(x: Array) -> Array:
    return _spence_value(x)


def _spence_dx(x: Array) -> Array:
    """``d spence / dx = log(x) / (1 - x)``, ``-1`` at ``x = 1``."""
    one = const(x, 1.0)
    at_one = x == 1
    safe = jnp.where(at_one, const(x, 2.0), x)
    return jnp.where(at_one, -one, jnp.log(safe) / (one - safe))


_spence.defjvps(lambda t, ans, x: _spence_dx(x) * t)


def spence(x: ArrayLike) -> Array:
    """Spence's function (the dilogarithm ``Li2(1 - x)``), for real ``x >= 0``.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``integral_1^x log(t) / (1 - t) dt``: ``pi**2 / 6`` at 0, 0 at 1, NaN for ``x < 0`` and ``+inf``;
      derivative ``log(x) / (1 - x)``.

    Example:
      >>> from plax.scipy.special import spence
      >>> round(float(spence(0.0)), 6)  # pi**2 / 6
      1.644934
    """
    x, = inexact("spence", x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise NotImplementedError("plax.scipy.special.spence supports real inputs only")
    return _spence(x)
