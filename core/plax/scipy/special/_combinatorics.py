"""Counting and power transforms: comb, poch, bernoulli, loggamma, boxcox and boxcox1p."""
from __future__ import annotations

import operator
from fractions import Fraction

import numpy as np

import plax
from plax import lax
from plax import numpy as jnp

from ._gamma import gammasgn
from ._util import Array, ArrayLike, const, inexact

__all__ = ["comb", "poch", "bernoulli", "loggamma", "boxcox", "boxcox1p"]


def comb(N: ArrayLike, k: ArrayLike, *, repetition: bool = False) -> Array:
    """The number of ways to choose ``k`` of ``N`` things, ``N! / (k! (N - k)!)``, as floats.

    Uses ``gammaln``; where ``N`` and ``k`` are integers the result is rounded to the nearest
    integer (exact below ``2**53`` in float64).

    Args:
      N: the number of things; integers promote to floats.
      k: the number taken; broadcast with ``N``.
      repetition: count combinations with repetition, ``comb(N + k - 1, k)``.

    Returns:
      The count; 0 where ``N < 0``, ``k < 0`` or ``k > N`` (without repetition).

    Example:
      >>> from plax.scipy.special import comb
      >>> float(comb(5, 2)), float(comb(5, 2, repetition=True))
      (10.0, 15.0)
    """
    N, k = inexact("comb", N, k)
    zero, one = const(N, 0.0), const(N, 1.0)
    if repetition:
        return jnp.where((k == 0) & (N >= 0), one, comb(N + k - one, k))
    valid = (k <= N) & (N >= 0) & (k >= 0)
    n_ = jnp.where(valid, N, zero)
    k_ = jnp.where(valid, k, zero)
    out = lax.exp(lax.lgamma(n_ + one) - lax.lgamma(k_ + one) - lax.lgamma(n_ - k_ + one))
    integral = (n_ == jnp.round(n_)) & (k_ == jnp.round(k_))
    out = jnp.where(integral, jnp.round(out), out)
    return jnp.where(valid, out, zero)


def _poch_value(z: Array, m: Array) -> Array:
    one = const(z, 1.0)
    zm = z + m
    z_pole = (z <= 0) & (z == jnp.floor(z))
    zm_pole = (zm <= 0) & (zm == jnp.floor(zm))
    sz = jnp.where(z_pole, one, z)
    szm = jnp.where(zm_pole, one, zm)
    ratio = (gammasgn(szm) * gammasgn(sz)
             * lax.exp(lax.lgamma(szm) - lax.lgamma(sz)))
    # both at poles: (z)_m = (-1)^m Gamma(1 - z) / Gamma(1 - z - m) (m an integer there)
    sign = jnp.where(jnp.fmod(m, 2) == 0, one, -one)
    both = sign * lax.exp(lax.lgamma(one - z) - lax.lgamma(one - zm))
    out = jnp.where(z_pole & zm_pole, both,
                    jnp.where(z_pole, const(z, 0.0),
                              jnp.where(zm_pole, const(z, np.inf), ratio)))
    return jnp.where(m == 0, one, out)


@plax.custom_jvp
def _poch(z: Array, m: Array) -> Array:
    return _poch_value(z, m)


_poch.defjvps(lambda t, ans, z, m: (lax.digamma(z + m) - lax.digamma(z)) * ans * t,
              lambda t, ans, z, m: lax.digamma(z + m) * ans * t)


def poch(z: ArrayLike, m: ArrayLike) -> Array:
    """The Pochhammer symbol (rising factorial) ``(z)_m = Gamma(z + m) / Gamma(z)``.

    Args:
      z: real arraylike; integers promote to floats.
      m: real arraylike; broadcast with ``z``.

    Returns:
      ``(z)_m``: 1 where ``m == 0``, 0 where only ``z`` is a pole of Gamma, ``inf`` where only
      ``z + m`` is; differentiable in both arguments.

    Example:
      >>> from plax.scipy.special import poch
      >>> float(poch(3.0, 2.0))  # 3 * 4
      12.0...
    """
    z, m = inexact("poch", z, m)
    if jnp.issubdtype(z.dtype, jnp.complexfloating):
        raise ValueError("poch does not support complex-valued inputs.")
    return _poch(z, m)


def bernoulli(n: int) -> Array:
    """The Bernoulli numbers ``B_0, ..., B_n`` (with ``B_1 = -1/2``), as floats.

    Computed exactly in rational arithmetic on the host, then rounded once.

    Args:
      n: a concrete non-negative Python integer.

    Returns:
      An array of ``n + 1`` values of the default float dtype.

    Raises:
      ValueError: if ``n`` is negative.

    Example:
      >>> from plax.scipy.special import bernoulli
      >>> [round(float(b), 6) for b in bernoulli(4)]
      [1.0, -0.5, 0.166667, 0.0, -0.033333]
    """
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"n must be a non-negative integer; got n={n}")
    numbers: list[Fraction] = []
    for m in range(n + 1):  # sum_{k<=m} C(m+1, k) B_k = 0
        acc, binom = Fraction(0), 1
        for k, b in enumerate(numbers):
            acc += binom * b
            binom = binom * (m + 1 - k) // (k + 1)
        numbers.append(Fraction(1) if m == 0 else -acc / (m + 1))
    return jnp.asarray(np.array([float(b) for b in numbers]), dtype=jnp.result_type(float))


def loggamma(x: ArrayLike) -> Array:
    """The principal branch of ``log Gamma(x)`` for real ``x``.

    Args:
      x: real arraylike; integers promote to floats. Complex input is not supported.

    Returns:
      ``gammaln(x)`` for ``x > 0``, NaN for ``x <= 0`` (the real branch, as JAX).

    Example:
      >>> from plax.scipy.special import loggamma
      >>> round(float(loggamma(4.0)), 6)  # log(3!)
      1.791759
    """
    x, = inexact("loggamma", x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise NotImplementedError("plax.scipy.special.loggamma supports real inputs only")
    return jnp.where(x > 0, lax.lgamma(x), const(x, np.nan))


def _boxcox_of_log(log_x: Array, lmbda: Array) -> Array:
    """``(exp(lmbda * log_x) - 1) / lmbda``, and ``log_x`` where ``lmbda == 0``."""
    zero = lmbda == 0
    safe = jnp.where(zero, jnp.ones_like(lmbda), lmbda)
    return jnp.where(zero, log_x, jnp.expm1(safe * log_x) / safe)


def boxcox(x: ArrayLike, lmbda: ArrayLike) -> Array:
    """The Box-Cox transform ``(x**lmbda - 1) / lmbda`` (``log x`` for ``lmbda == 0``).

    Args:
      x: positive arraylike.
      lmbda: the power; broadcast with ``x``.

    Returns:
      The transform, via ``expm1(lmbda * log x) / lmbda`` (NaN for ``x < 0``).

    Example:
      >>> from plax.scipy.special import boxcox
      >>> float(boxcox(4.0, 0.5))
      2.0
    """
    x, lmbda = inexact("boxcox", x, lmbda)
    return _boxcox_of_log(jnp.log(x), lmbda)


def boxcox1p(x: ArrayLike, lmbda: ArrayLike) -> Array:
    """The Box-Cox transform of ``1 + x``, accurate for small ``x``.

    Args:
      x: arraylike greater than -1.
      lmbda: the power; broadcast with ``x``.

    Returns:
      ``((1 + x)**lmbda - 1) / lmbda`` (``log1p(x)`` for ``lmbda == 0``).

    Example:
      >>> from plax.scipy.special import boxcox1p
      >>> float(boxcox1p(3.0, 0.5))
      2.0
    """
    x, lmbda = inexact("boxcox1p", x, lmbda)
    return _boxcox_of_log(jnp.log1p(x), lmbda)
