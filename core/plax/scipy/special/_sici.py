"""The sine and cosine integrals ``Si`` and ``Ci``.

Power series for ``|x| < 4``; beyond, ``E1(ix) = -Ci(x) + i (Si(x) - pi/2)`` with ``E1``'s
continued fraction ``E1(z) = e^-z / (z + 1 - 1 / (z + 3 - 4 / (z + 5 - 9 / ...)))`` evaluated
from its tail in real arithmetic (so every backend runs it without complex kernels).
"""
from __future__ import annotations

import math

import numpy as np

import plax
from plax import numpy as jnp

from ._util import Array, ArrayLike, const, inexact

__all__ = ["sici"]

_EULER = 0.5772156649015329
_SERIES_BELOW = 4.0
_SERIES_TERMS = 24   # x^(2k) / (2k)! at x = 4, k = 24: ~1e-30
_CF_TERMS = 40       # ~1e-16 absolute error for x >= 4
_ASYMPTOTIC_ABOVE = 1e8


def _series(x: Array) -> tuple[Array, Array]:
    """``Si = sum_k (-1)^k x^(2k+1) / ((2k+1) (2k+1)!)`` and
    ``Ci - gamma - log x = sum_{k>=1} (-1)^k x^(2k) / (2k (2k)!)``, for ``0 < x < 4``."""
    x2 = x * x
    si, ci = jnp.zeros_like(x), jnp.zeros_like(x)
    odd = x            # (-1)^k x^(2k+1) / (2k+1)!
    even = -x2 / 2     # (-1)^k x^(2k) / (2k)!, from k = 1
    for k in range(_SERIES_TERMS):
        si = si + odd / (2 * k + 1)
        ci = ci + even / (2 * k + 2)
        odd = -odd * x2 / ((2 * k + 2) * (2 * k + 3))
        even = -even * x2 / ((2 * k + 3) * (2 * k + 4))
    return si, const(x, _EULER) + jnp.log(x) + ci


def _continued_fraction(x: Array) -> tuple[Array, Array]:
    """``(Si, Ci)`` from ``E1(ix)``'s continued fraction, for ``x >= 4``; complex arithmetic
    written out on (real, imaginary) pairs."""
    # t = ix + (2k - 1) - k^2 / t, from k = K down to 1, starting from t = ix + 2K + 1.
    tr, ti = jnp.full_like(x, 2 * _CF_TERMS + 1), x
    for k in range(_CF_TERMS, 0, -1):
        d = tr * tr + ti * ti
        tr, ti = (2 * k - 1) - k * k * tr / d, x + k * k * ti / d
    d = tr * tr + ti * ti
    # E1(ix) = e^(-ix) / t = (cos x - i sin x) (tr - i ti) / |t|^2
    c, s = jnp.cos(x), jnp.sin(x)
    er = (c * tr - s * ti) / d
    ei = -(s * tr + c * ti) / d
    return const(x, math.pi / 2) + ei, -er


@plax.custom_jvp
def _sici(x: Array) -> tuple[Array, Array]:
    ax = jnp.abs(x)
    small = ax < _SERIES_BELOW
    one = const(x, 1.0)
    si_s, ci_s = _series(jnp.where(small & (ax > 0), ax, one))
    big = jnp.where(small | jnp.isinf(ax), const(x, 2 * _SERIES_BELOW), ax)
    si_l, ci_l = _continued_fraction(big)
    si = jnp.where(small, si_s, si_l)
    ci = jnp.where(small, ci_s, ci_l)
    # Far out, where |t|^2 above could overflow: Si = pi/2 - f cos x - g sin x,
    # Ci = f sin x - g cos x with f ~ 1/x, g ~ 1/x^2 (the next terms are below 1e-16).
    far = ax > _ASYMPTOTIC_ABOVE
    xf = jnp.where(far & jnp.isfinite(ax), ax, const(x, 2 * _ASYMPTOTIC_ABOVE))
    f, g = 1 / xf, 1 / (xf * xf)
    si = jnp.where(far, const(x, math.pi / 2) - f * jnp.cos(xf) - g * jnp.sin(xf), si)
    ci = jnp.where(far, f * jnp.sin(xf) - g * jnp.cos(xf), ci)
    si = jnp.where(jnp.isinf(ax), const(x, math.pi / 2), si)
    ci = jnp.where(jnp.isinf(ax), const(x, 0.0), ci)
    ci = jnp.where(ax == 0, const(x, -np.inf), ci)
    si = jnp.where(ax == 0, jnp.zeros_like(x), si)
    neg = jnp.signbit(x)
    si = jnp.where(neg, -si, si)
    # SciPy returns the real part of Ci for x < 0 (Ci(-x) = Ci(x) + i pi), NaN at -inf.
    ci = jnp.where(jnp.isneginf(x), const(x, np.nan), ci)
    nan = jnp.isnan(x)
    return jnp.where(nan, x, si), jnp.where(nan, x, ci)


@_sici.defjvp
def _sici_jvp(primals, tangents):
    x, = primals
    t, = tangents
    si, ci = _sici(x)
    safe = jnp.where(x == 0, const(x, 1.0), x)
    sinc = jnp.where(x == 0, const(x, 1.0), jnp.sin(safe) / safe)
    return (si, ci), (sinc * t, jnp.cos(x) / x * t)


def sici(x: ArrayLike) -> tuple[Array, Array]:
    """The sine and cosine integrals ``Si(x) = int_0^x sin t / t dt`` and
    ``Ci(x) = gamma + log x + int_0^x (cos t - 1) / t dt``.

    JAX-compatible :obj:`scipy.special.sici` (real arguments).

    Args:
      x: real arraylike; integers promote to floats.

    Returns:
      ``(Si, Ci)``: ``Si`` is odd with limits ``+-pi/2``; ``Ci(0) = -inf``, ``Ci(inf) = 0``, and
      for ``x < 0`` the real part ``Ci(|x|)`` as SciPy returns (NaN at ``-inf``).
      Differentiable: ``Si' = sin x / x``, ``Ci' = cos x / x``.

    Example:
      >>> from plax.scipy.special import sici
      >>> si, ci = sici(1.0)
      >>> jnp.round(si, 5), jnp.round(ci, 5)
      (Array(0.94608, dtype=float32), Array(0.3374, dtype=float32))
    """
    x, = inexact("sici", x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise TypeError(f"sici: complex arguments are not supported (as in JAX); got {x.dtype}")
    return _sici(x)
