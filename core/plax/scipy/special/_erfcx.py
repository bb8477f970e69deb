"""The scaled complementary error function ``erfcx(x) = exp(x^2) erfc(x)``."""
from __future__ import annotations

import math

import plax
from plax import lax
from plax import numpy as jnp

from ._util import Array, ArrayLike, const, inexact

__all__ = ["erfcx"]

_CF_FROM = 2.0   # below: exp(x^2) * erfc(x); above: Laplace's continued fraction
_CF_TERMS = 80


def _erfcx_cf(x: Array) -> Array:
    """``erfcx(x) = 1/sqrt(pi) / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...))))``, ``x >= 2``,
    evaluated backwards from a fixed depth."""
    def body(j, t):
        k = const(x, _CF_TERMS) - (j.astype(x.dtype) if hasattr(j, "astype") else const(x, j))
        return x + k / 2 / t

    t = lax.fori_loop(0, _CF_TERMS, body, x)
    return const(x, 1 / math.sqrt(math.pi)) / t


@plax.custom_jvp
def _erfcx(x: Array) -> Array:
    small = x < _CF_FROM
    xs = jnp.where(small, x, const(x, 0.0))
    direct = lax.exp(xs * xs) * lax.erfc(xs)
    xl = jnp.where(small | jnp.isposinf(x), const(x, _CF_FROM), x)
    out = jnp.where(small, direct, _erfcx_cf(xl))
    return jnp.where(jnp.isposinf(x), const(x, 0.0), out)


_erfcx.defjvps(lambda t, ans, x: (2 * x * ans - const(x, 2 / math.sqrt(math.pi))) * t)


def erfcx(x: ArrayLike) -> Array:
    """The scaled complementary error function ``exp(x^2) * erfc(x)``, elementwise.

    Accurate where ``erfc`` underflows: ``erfcx(x) ~ 1 / (x sqrt(pi))`` for large ``x``.

    Args:
      x: arraylike; integers promote to floats.

    Returns:
      ``erfcx(x)``: ``inf`` for very negative ``x``, 0 at ``+inf``; derivative
      ``2 x erfcx(x) - 2 / sqrt(pi)``.

    Example:
      >>> from plax.scipy.special import erfcx
      >>> round(float(erfcx(1.0)), 6)
      0.427584
    """
    x, = inexact("erfcx", x)
    return _erfcx(x)
