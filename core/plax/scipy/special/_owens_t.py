"""Owen's T function ``T(h, a) = 1/(2 pi) int_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx``.

For ``|a| <= 1``, Gauss-Legendre quadrature of the defining integral over ``[0, min(|a|, 9/|h|)]``
(beyond ``9/|h|`` the integrand is below ``exp(-40)`` of its value at 0, so cutting there keeps
relative accuracy for large ``h``). For ``|a| > 1``, Owen's reflection
``T(h, a) = Q(h)/2 + Q(a h)/2 - Q(h) Q(a h) - T(a h, 1/a)`` (``h, a >= 0``,
``Q(h) = ndtr(-h)``), written with upper tails so nothing cancels for large ``h``.
"""
from __future__ import annotations

import functools
import math

import numpy as np

import plax
from plax import lax
from plax import numpy as jnp

from ._util import Array, ArrayLike, const, inexact

__all__ = ["owens_t"]

_NODES = 24
_CUTOFF = 9.0


@functools.lru_cache(maxsize=None)
def _gauss_legendre(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights on ``[0, 1]``."""
    x, w = np.polynomial.legendre.leggauss(n)
    return (x + 1) / 2, w / 2


def _quadrature(h: Array, a: Array) -> Array:
    """``T(h, a)`` for ``h >= 0`` and ``0 <= a <= 1``."""
    nodes, weights = _gauss_legendre(_NODES)
    nodes = jnp.asarray(nodes, dtype=h.dtype)
    weights = jnp.asarray(weights, dtype=h.dtype)
    safe_h = jnp.where(h > 0, h, const(h, 1.0))
    upper = jnp.where(h > 0, jnp.minimum(a, _CUTOFF / safe_h), a)
    x = upper[..., None] * nodes
    hh = (h * h)[..., None]
    one_x2 = 1 + x * x
    integrand = jnp.exp(-hh * one_x2 / 2) / one_x2
    return upper * jnp.sum(weights * integrand, axis=-1) / const(h, 2 * math.pi)


def _upper_tail(x: Array) -> Array:
    return lax.erfc(x / const(x, math.sqrt(2.0))) / 2


@plax.custom_jvp
def _owens_t(h: Array, a: Array) -> Array:
    ah_, aa = jnp.abs(h), jnp.abs(a)
    finite = jnp.isfinite(ah_) & jnp.isfinite(aa)
    hf = jnp.where(finite, ah_, jnp.zeros_like(h))
    af = jnp.where(finite, aa, jnp.zeros_like(a))
    big_a = af > 1
    # |a| <= 1: the integral itself; |a| > 1: the reflection onto (a h, 1/a).
    inner_a = jnp.where(big_a, 1 / jnp.where(big_a, af, const(a, 1.0)), af)
    inner_h = jnp.where(big_a, af * hf, hf)
    t_inner = _quadrature(inner_h, inner_a)
    qh, qah = _upper_tail(hf), _upper_tail(af * hf)
    reflected = qh / 2 + qah / 2 - qh * qah - t_inner
    out = jnp.where(big_a, reflected, t_inner)
    # Limits: T(inf, a) = 0; T(h, inf) = Q(|h|) / 2 (1/4 at h = 0).
    out = jnp.where(jnp.isinf(aa) & jnp.isfinite(ah_), _upper_tail(jnp.where(jnp.isfinite(ah_), ah_, const(h, 0.0))) / 2, out)
    out = jnp.where(jnp.isinf(ah_) & ~jnp.isnan(aa), jnp.zeros_like(out), out)
    out = jnp.where(jnp.isnan(h) | jnp.isnan(a), const(h, np.nan), out)
    return jnp.where(a < 0, -out, out)


def _dt_dh(h: Array, a: Array) -> Array:
    return -jnp.exp(-h * h / 2) * lax.erf(a * h / const(h, math.sqrt(2.0))) / const(
        h, 2 * math.sqrt(2 * math.pi))


def _dt_da(h: Array, a: Array) -> Array:
    one_a2 = 1 + a * a
    return jnp.exp(-h * h * one_a2 / 2) / (const(h, 2 * math.pi) * one_a2)


_owens_t.defjvps(lambda t, ans, h, a: _dt_dh(h, a) * t,
                 lambda t, ans, h, a: _dt_da(h, a) * t)


def owens_t(h: ArrayLike, a: ArrayLike) -> Array:
    """Owen's T function ``T(h, a) = 1/(2 pi) int_0^a exp(-h^2 (1 + x^2) / 2) / (1 + x^2) dx``.

    JAX-compatible :obj:`scipy.special.owens_t`.

    Args:
      h: real arraylike.
      a: real arraylike, broadcast with ``h``.

    Returns:
      ``T(h, a)`` in the promoted inexact dtype: even in ``h``, odd in ``a``;
      ``T(0, a) = atan(a) / (2 pi)``, ``T(h, inf) = ndtr(-|h|) / 2``, ``T(inf, a) = 0``.
      Differentiable in both arguments (closed-form derivatives).

    Example:
      >>> from plax.scipy.special import owens_t
      >>> owens_t(0.5, 1.2)
      Array(0.11762398, dtype=float32)
    """
    h, a = inexact("owens_t", h, a)
    return _owens_t(h, a)
