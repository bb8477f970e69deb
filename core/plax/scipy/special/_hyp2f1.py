"""Gauss's hypergeometric function ``2F1(a, b; c; x)`` for real arguments.

The series ``sum_k (a)_k (b)_k / (c)_k x^k / k!`` is summed only for ``|z| <= 3/4``; other
arguments are first mapped there:

* ``x < 0``: Pfaff, ``2F1(a, b; c; x) = (1 - x)^-a 2F1(a, c - b; c; x / (x - 1))``;
* ``3/4 < z < 1``: the ``z -> 1 - z`` connection formula
  ``G(c) G(c-a-b) / (G(c-a) G(c-b)) 2F1(a, b; a+b-c+1; 1-z)
  + (1-z)^(c-a-b) G(c) G(a+b-c) / (G(a) G(b)) 2F1(c-a, c-b; c-a-b+1; 1-z)``.
  Where ``c - a - b`` is (near) an integer its two terms have poles that cancel; there the
  value is interpolated from samples at ``c - a - b = n +- d, n +- d/2`` (error
  ``~d^4 + eps/d``, ``d = eps^(1/5)``: about 1e-12 relative in float64, 1e-5 in float32).

Polynomials (``a`` or ``b`` a non-positive integer) sum their terms directly for every ``x``.
Every series has a fixed number of terms (a ``fori_loop``), so values are differentiable in all
four arguments by ordinary autodiff, as JAX's are.
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax import numpy as jnp

from ._gamma import gammasgn
from ._util import Array, ArrayLike, const, inexact

__all__ = ["hyp2f1"]

_TERMS = 400         # 0.75^400 ~ 1e-50 leaves room for early terms growing like k^(a+b-c)
_DIRECT_UP_TO = 0.75  # the series itself for |z| up to here, the 1 - z formula beyond


def _series(a: Array, b: Array, c: Array, z: Array) -> Array:
    """``sum_{k < _TERMS} (a)_k (b)_k / (c)_k z^k / k!`` (elementwise, arrays of one shape)."""
    def body(k, carry):
        total, term = carry
        kf = lax.convert_element_type(k, z.dtype)
        term = term * (a + kf) * (b + kf) / ((c + kf) * (kf + 1)) * z
        return total + term, term

    one = jnp.ones_like(z)
    total, _ = lax.fori_loop(0, _TERMS, body, (one, one))
    return total


def _is_nonpos_int(v: Array) -> Array:
    return (v <= 0) & (v == jnp.floor(v))


def _rgamma(v: Array) -> Array:
    """``1 / Gamma(v)``: zero at the poles."""
    pole = _is_nonpos_int(v)
    safe = jnp.where(pole, const(v, 0.5), v)
    return jnp.where(pole, jnp.zeros_like(v), gammasgn(safe) * lax.exp(-lax.lgamma(safe)))


def _gamma(v: Array) -> Array:
    return gammasgn(v) * lax.exp(lax.lgamma(v))


def _one_minus_z(a: Array, b: Array, c: Array, w: Array) -> Array:
    """The connection formula for ``2F1(a, b; c; 1 - w)``, ``0 < w < 1/4``, at non-integer
    ``c - a - b``; the two series share one loop."""
    s = c - a - b
    g = _gamma(c)
    coef1 = g * _gamma(s) * _rgamma(c - a) * _rgamma(c - b)
    coef2 = g * _gamma(-s) * _rgamma(a) * _rgamma(b) * lax.exp(s * jnp.log(w))
    both = _series(jnp.stack([a, c - a]), jnp.stack([b, c - b]), jnp.stack([1 - s, 1 + s]),
                   jnp.stack([w, w]))
    return coef1 * both[0] + coef2 * both[1]


def _near_one(a: Array, b: Array, c: Array, w: Array) -> Array:
    """``2F1(a, b; c; 1 - w)`` for ``0 < w < 1 - _DIRECT_UP_TO``, through the limit where
    ``s = c - a - b`` is within ``delta / 2`` of an integer ``n``: the formula is sampled at
    ``s = n + t`` for ``t`` in ``+-delta, +-delta/2`` (``c`` moved accordingly) and the cubic
    through those samples is evaluated at the actual ``s``."""
    s = c - a - b
    n = jnp.round(s)
    d = s - n
    delta = float(jnp.finfo(w.dtype).eps) ** 0.2
    near = jnp.abs(d) < delta / 2
    nodes = (-delta, -delta / 2, delta / 2, delta)
    # the plain formula first; where s is near an integer it is replaced, so it is evaluated at
    # a harmless s there
    c_plain = jnp.where(near, c + const(c, 0.5), c)
    base = a + b + n
    cs = jnp.stack([c_plain] + [base + t for t in nodes])
    k = cs.shape[0]
    vals = _one_minus_z(jnp.stack([a] * k), jnp.stack([b] * k), cs, jnp.stack([w] * k))
    limit = jnp.zeros_like(w)
    for i, ti in enumerate(nodes):
        weight = jnp.ones_like(w)
        for j, tj in enumerate(nodes):
            if j != i:
                weight = weight * (d - tj) / (ti - tj)
        limit = limit + weight * vals[i + 1]
    return jnp.where(near, limit, vals[0])


def _hyp2f1(a: Array, b: Array, c: Array, x: Array) -> Array:
    one, zero = const(x, 1.0), jnp.zeros_like(x)
    poly_a, poly_b = _is_nonpos_int(a), _is_nonpos_int(b)
    poly = poly_a | poly_b
    # Pfaff for x < 0 (choosing the pair that keeps a polynomial a polynomial); z in [0, 1)
    neg = (x < 0) & ~poly
    xs = jnp.where(x < 1, x, zero)
    z = jnp.where(neg, xs / (xs - 1), x)
    b_t = jnp.where(neg, c - b, b)
    pref = jnp.where(neg, lax.exp(-a * jnp.log1p(-jnp.where(neg, xs, zero))), one)
    # the direct series: |z| <= 1/2, or any x for polynomials
    direct = poly | (jnp.abs(z) <= _DIRECT_UP_TO)
    zd = jnp.where(direct, z, zero)
    value_direct = _series(a, b_t, c, zd)
    # 1/2 < z < 1: the connection formula in w = 1 - z
    w = jnp.where(direct | (z >= 1), const(x, 0.125), 1 - z)
    value_far = _near_one(a, b_t, c, w)
    out = pref * jnp.where(direct, value_direct, value_far)
    # x = 1 (non-polynomial): Gauss's sum if c > a + b, else it diverges
    s = c - a - b
    gauss = jnp.where(s > 0, _gamma(c) * _gamma(jnp.where(s > 0, s, one))
                      * _rgamma(c - a) * _rgamma(c - b), const(x, np.inf))
    out = jnp.where((x == 1) & ~poly, gauss, out)
    out = jnp.where((x > 1) & ~poly, const(x, np.nan), out)
    out = jnp.where((a == 0) | (b == 0) | (x == 0), one, out)
    out = jnp.where(_is_nonpos_int(c) & ~((a == 0) | (b == 0)), const(x, np.inf), out)
    nan = jnp.isnan(a) | jnp.isnan(b) | jnp.isnan(c) | jnp.isnan(x)
    return jnp.where(nan, const(x, np.nan), out)


def hyp2f1(a: ArrayLike, b: ArrayLike, c: ArrayLike, x: ArrayLike) -> Array:
    """Gauss's hypergeometric function ``2F1(a, b; c; x) = sum_k (a)_k (b)_k / (c)_k x^k / k!``.

    JAX-compatible :obj:`scipy.special.hyp2f1` for real arguments, over the whole real line
    ``x <= 1`` (JAX's own is accurate only for ``0 <= x < 1``).

    Args:
      a, b, c: real arraylike parameters.
      x: real arraylike argument; all four broadcast together.

    Returns:
      The promoted inexact array: ``inf`` where ``c`` is a non-positive integer (unless ``a`` or
      ``b`` is 0) and at ``x = 1`` with ``c <= a + b``; NaN for ``x > 1`` unless the series is a
      polynomial (``a`` or ``b`` a non-positive integer, of degree below 400). Differentiable in
      all arguments.

    Example:
      >>> from plax.scipy.special import hyp2f1
      >>> hyp2f1(0.5, 1.5, 2.5, 0.3)
      Array(1.1080625, dtype=float32)
    """
    a, b, c, x = inexact("hyp2f1", a, b, c, x)
    return _hyp2f1(a, b, c, x)
