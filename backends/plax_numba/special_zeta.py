"""Scalar forms of Hurwitz's zeta function and of ``polygamma`` for the generated kernels
(``zeta_f32``/``zeta_f64``, ``polygamma_f32``/``polygamma_f64``).

``zeta(s, q) = sum_{k>=0} (k + q)**-s`` (Cephes' method): the first terms summed directly
until the offset exceeds 9 and at least nine are in, then the Euler-Maclaurin tail
``N**(1-s)/(s-1) - N**-s/2 + sum_j B_2j / (2j)! s(s+1)...(s+2j-2) N**(1-s-2j)``, twelve
Bernoulli terms at most (their coefficients exact rationals computed here). ``polygamma(m,
x)`` is ``digamma`` for ``m = 0`` (:func:`plax_numba.special.digamma_f64`) and ``(-1)**(m+1)
m! zeta(m + 1, x)`` above. float32 evaluates in float64 (stopping once terms fall below
2**-40 of the total, 2**-16 of a float32 ulp) and rounds once.

Edge values follow the NumPy backend: ``zeta`` is +inf at ``s = 1`` and at non-positive
integer ``q``, NaN for ``s < 1``, for non-integer ``s`` at negative ``q`` and for infinite
operands; ``polygamma`` is NaN for orders that are not non-negative integers and at the poles
(0, -1, -2, ...), and 0 at ``x = +inf`` for ``m >= 1`` (SciPy's).

Measured error against SciPy in float64 (tests/numba/test_special_zeta_beta_forms.py): float32
0.5 ulp plus SciPy's own error; float64 a few ulps for ``q > 0``; negative ``q`` sums terms of
both signs and loses what their cancellation costs (as SciPy).
"""
from __future__ import annotations

import math
import numpy as np
from numba import njit

from plax.lax.special_series import (EULER_MACLAURIN_DIVISORS, STOP_TOLERANCE_F32,
                                     ZETA_LIFT_F32, ZETA_LIFT_F64)
from plax_numba.special import digamma_f64

_core = dict(cache=True, nogil=True, error_model="numpy", inline="never")
_inline = dict(cache=True, nogil=True, error_model="numpy", inline="always")
_EPS = 2.0 ** -53
_EPS32 = STOP_TOLERANCE_F32   # float32's stopping tolerance: 2**-16 of its ulp


#: (2j)! / B_2j, j = 1..12: the Euler-Maclaurin terms' divisors (Cephes' table ``A``)
_EM_DIVISORS = EULER_MACLAURIN_DIVISORS


@njit(**_core)
def zeta_core(s, q, eps, lift):
    """Hurwitz's ``zeta(s, q)`` in float64, terms summed until they fall below ``eps`` of the
    total, the Euler-Maclaurin tail taken from offset ``lift`` on (9 for float64; float32's
    looser tolerance gets there from 5, four ``pow`` calls fewer; see the module
    docstring)."""
    # Cephes' order of tests (zeta(1, nan) and zeta(nan, 0) are inf, as SciPy's)
    if abs(s) == np.inf or abs(q) == np.inf:
        return np.nan
    if s == 1.0:
        return np.inf
    if s < 1.0:
        return np.nan
    if q <= 0.0:
        if q == math.floor(q):
            return np.inf
        if s != math.floor(s):
            return np.nan
    if s != s or q != q:
        return np.nan
    if q > 1e8:
        return (1.0 / (s - 1.0) + 0.5 / q) * math.pow(q, 1.0 - s)
    total = math.pow(q, -s)
    a = q
    b = 0.0
    i = 0
    while i < lift or a <= lift:
        i += 1
        a += 1.0
        b = math.pow(a, -s)
        total += b
        if abs(b / total) < eps:
            return total
    w = a
    total += b * w / (s - 1.0)
    total -= 0.5 * b
    f = 1.0
    k = 0.0
    for j in range(12):
        f *= s + k
        b /= w
        t = f * b / _EM_DIVISORS[j]
        total += t
        if abs(t / total) < eps:
            break
        k += 1.0
        f *= s + k
        b /= w
        k += 1.0
    return total


@njit(**_core)
def polygamma_core(m, x, eps):
    """``polygamma(m, x)`` in float64, its zeta summed to ``eps`` (see the module
    docstring)."""
    if m != m or x != x:
        return np.nan
    if m < 0.0 or m != math.floor(m) or m == np.inf:
        return np.nan
    if x <= 0.0 and x == math.floor(x):
        return np.nan
    if m == 0.0:
        return digamma_f64(x)
    if x == np.inf:
        return 0.0
    sign = 1.0 if (m % 2.0) == 1.0 else -1.0
    lift = ZETA_LIFT_F64 if eps < _EPS32 else ZETA_LIFT_F32
    return sign * math.gamma(m + 1.0) * zeta_core(m + 1.0, x, eps, lift)


@njit(**_inline)
def zeta_f64(s, q):
    """Hurwitz's ``zeta(s, q)`` of float64 operands (``lax.zeta``)."""
    return zeta_core(s, q, _EPS, ZETA_LIFT_F64)


@njit(**_inline)
def zeta_f32(s, q):
    """Hurwitz's ``zeta(s, q)`` of float32 operands, in float64, rounded once."""
    return np.float32(zeta_core(np.float64(s), np.float64(q), _EPS32, ZETA_LIFT_F32))


@njit(**_inline)
def polygamma_f64(m, x):
    """``polygamma(m, x)`` of float64 operands (``lax.polygamma``)."""
    return polygamma_core(m, x, _EPS)


@njit(**_inline)
def polygamma_f32(m, x):
    """``polygamma(m, x)`` of float32 operands, in float64, rounded once."""
    return np.float32(polygamma_core(np.float64(m), np.float64(x), _EPS32))
