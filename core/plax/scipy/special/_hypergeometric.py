"""Kummer's confluent hypergeometric function ``1F1(a; b; x)``."""
from __future__ import annotations

import numpy as np

import plax
from plax import lax
from plax import numpy as jnp

from ._util import Array, ArrayLike, const, inexact

__all__ = ["hyp1f1"]

_MAX_TERMS = 500
_ASYMPTOTIC_FROM = 100.0


def _sum_series(term0: Array, ratio, weight=None) -> Array:
    """``sum_k weight(k) * t_k`` with ``t_0 = term0`` and ``t_{k+1} = t_k * ratio(k)``, summed
    until every next term ``t_k`` is below the dtype's epsilon relative to its sum."""
    eps = float(jnp.finfo(term0.dtype).eps)
    w = weight if weight is not None else (lambda k: 1)

    def cond(s):
        k, total, term = s
        return (k < _MAX_TERMS) & jnp.any(jnp.abs(term) > eps * jnp.abs(total))

    def body(s):
        k, total, term = s
        kf = k.astype(term.dtype)
        return k + 1, total + w(kf) * term, term * ratio(kf)

    init = (jnp.asarray(0), jnp.zeros_like(term0), term0)
    return lax.while_loop(cond, body, init)[1]


def _series(a: Array, b: Array, x: Array) -> Array:
    """Kummer's series ``sum_k (a)_k / (b)_k x^k / k!``."""
    return _sum_series(jnp.ones_like(x), lambda k: (a + k) / (b + k) * x / (k + 1))


def _asymptotic(a: Array, b: Array, x: Array) -> Array:
    """``Gamma(b)/Gamma(a) e^x x^(a-b) sum_k (b-a)_k (1-a)_k / (k! x^k)`` for large ``x > 0``."""
    s = _sum_series(jnp.ones_like(x), lambda k: (b - a + k) * (1 - a + k) / ((k + 1) * x))
    log_scale = lax.lgamma(b) - lax.lgamma(a) + x + (a - b) * jnp.log(x)
    from ._gamma import gammasgn
    return gammasgn(b) * gammasgn(a) * lax.exp(log_scale) * s


def _value(a: Array, b: Array, x: Array) -> Array:
    # Kummer's transformation M(a, b, x) = e^x M(b - a, b, -x) keeps the series positive
    neg = x < 0
    aa = jnp.where(neg, b - a, a)
    ax = jnp.abs(x)
    big = ax >= _ASYMPTOTIC_FROM
    one = const(x, 1.0)
    series = _series(aa, b, jnp.where(big, one, ax))
    asym = _asymptotic(aa, b, jnp.where(big, ax, const(x, 2 * _ASYMPTOTIC_FROM)))
    out = jnp.where(big, asym, series)
    out = jnp.where(neg, lax.exp(x) * out, out)
    out = jnp.where(a == 0, one, out)
    out = jnp.where((a == b) & (a != 0), lax.exp(x), out)
    return jnp.where((b == 0) & (a != 0), const(x, np.inf), out)


def _d_param(a: Array, b: Array, x: Array, which: str) -> Array:
    """``dM/da = sum_k (psi(a+k) - psi(a)) t_k`` or ``dM/db = sum_k (psi(b) - psi(b+k)) t_k``,
    with ``t_k`` the terms of Kummer's series."""
    if which == "a":
        weight = lambda k: lax.digamma(a + k) - lax.digamma(a)
    else:
        weight = lambda k: lax.digamma(b) - lax.digamma(b + k)
    return _sum_series(jnp.ones_like(x), lambda k: (a + k) / (b + k) * x / (k + 1), weight)


@plax.custom_jvp
def _hyp1f1(a: Array, b: Array, x: Array) -> Array:
    return _value(a, b, x)


_hyp1f1.defjvps(lambda t, ans, a, b, x: _d_param(a, b, x, "a") * t,
                lambda t, ans, a, b, x: _d_param(a, b, x, "b") * t,
                lambda t, ans, a, b, x: a / b * _hyp1f1(a + 1, b + 1, x) * t)


def hyp1f1(a: ArrayLike, b: ArrayLike, x: ArrayLike) -> Array:
    """Kummer's confluent hypergeometric function ``1F1(a; b; x) = sum_k (a)_k/(b)_k x^k/k!``.

    Sums the series (after Kummer's transformation ``e^x 1F1(b - a; b; -x)`` for ``x < 0``)
    until it converges, or the asymptotic series for ``|x| >= 100``. Meant for real, positive
    ``a`` and ``b`` (as in JAX); ``a == 0`` gives 1, ``a == b`` gives ``e^x``.

    Args:
      a: real arraylike; integers promote to floats.
      b: real arraylike.
      x: real arraylike; all three broadcast together.

    Returns:
      ``1F1(a; b; x)``, differentiable in all three arguments.

    Example:
      >>> from plax.scipy.special import hyp1f1
      >>> hyp1f1(1.0, 2.0, 1.0)  # (e - 1) / 1
      Array(1.7182816, dtype=float32)
    """
    a, b, x = inexact("hyp1f1", a, b, x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise ValueError("hyp1f1 does not support complex-valued inputs.")
    return _hyp1f1(a, b, x)
