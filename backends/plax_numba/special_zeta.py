"""Scalar forms of Hurwitz's zeta function and of ``polygamma`` for the generated kernels
(``zeta_f32``/``zeta_f64``, ``polygamma_f32``/``polygamma_f64``).

``zeta(s, q) = sum_{k>=0} (k + q)**-s`` (Cephes' method): the first terms summed directly
until the offset exceeds 9 and at least nine are in, then the Euler-Maclaurin tail
``N**(1-s)/(s-1) - N**-s/2 + sum_j B_2j / (2j)! s(s+1)...(s+2j-2) N**(1-s-2j)``, twelve
Bernoulli terms at most (their coefficients exact rationals computed here). ``polygamma(m,
x)`` is ``digamma`` for ``m = 0`` (:func:`plax_numba.special.digamma_f64`) and ``(-1)**(m+1)
m! zeta(m + 1, x)`` above. float32 ``zeta`` is a branch-free fixed-length form evaluated in
float64 and rounded once (:func:`zeta_f32`: four direct terms, eight Euler-Maclaurin terms,
powers by :mod:`plax_numba.libm_free`'s ``exp``/``log``; negative ``q`` through three sums of
positive ``q``), so loops calling it vectorise; float32 ``polygamma`` uses that form for
integer orders up to 63 at positive ``x`` and the summing form otherwise.

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

from plax.lax.special_series import (EULER_MACLAURIN_DIVISORS, STOP_TOLERANCE_F32, ZETA_LARGE_Q,
                                     ZETA_LIFT_F32, ZETA_LIFT_F64)
from plax_numba.compiled_once import compiled_once, twin
from plax_numba.inlining import scalar_helper
from plax_numba.libm_free import _log_full, exp_f64
from plax_numba.special import digamma_f64

_core = dict(cache=True, nogil=True, error_model="numpy", inline="never")
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


@scalar_helper
def _zeta_f64(s, q):
    """Hurwitz's ``zeta(s, q)`` of float64 operands (``lax.zeta``)."""
    return zeta_core(s, q, _EPS, ZETA_LIFT_F64)


zeta_f64 = compiled_once(_zeta_f64, "float64(float64, float64)", __name__, "zeta_f64")


#: float32's fixed-length form: direct terms ``(q + k)**-s`` for ``k < _DIRECT32``, then
#: ``_TAIL32`` Euler-Maclaurin terms at ``a = q + _DIRECT32``, taken for ``1 < s <= _S_MAX32``
#: and ``q > 0``: relative error below 2e-11 there (float32 needs ~1e-9 to round as the exact
#: value does; measured against :func:`zeta_core` in float64 over s in (1, 64], q in
#: [1e-3, 1e7], tests/numba/test_special_zeta_f32.py)
_DIRECT32, _TAIL32 = 4, 8
_S_MAX32 = 64.0
#: the Euler-Maclaurin coefficients ``B_2j / (2j)!`` of float32's tail
_EM_INVERSES32 = tuple(1.0 / d for d in EULER_MACLAURIN_DIVISORS[:_TAIL32])
_TWO_PI = 2.0 * math.pi
_S_OVERFLOW = 2.5e13   # s**23 overflows float64 from here on (zeta_core's NaN, with q > 1)
_LOG_LIMIT = 1000.0 * math.log(2.0)   # exp_f64's range (the result's float32 rounding is 0/inf)


@scalar_helper
def _power(b, s):
    """``b**-s`` in float64 for a positive finite ``b``, by the ``exp``/``log`` of
    :mod:`plax_numba.libm_free` (no libm call; relative error ~1e-15 times ``|s log b|``);
    underflow gives ~2**-1000 and overflow ~2**1000 (0 and inf once rounded to float32)."""
    d = -s * _log_full(b)
    return exp_f64(min(max(d, -_LOG_LIMIT), _LOG_LIMIT))


@scalar_helper
def _zeta_fixed(s, q):
    """Hurwitz's zeta in float64 for ``s > 1`` and ``q > 0``: four direct terms and eight
    Euler-Maclaurin terms, no loop of data-dependent length and no libm call. Where
    ``2 pi a < s`` (``a = q + 4``) the Euler-Maclaurin terms grow instead of falling, and the
    whole tail beyond the direct terms is below ``exp(-8 pi)`` of the result: they are left
    out (so huge ``s`` gives no overflow)."""
    total = 0.0
    for k in range(_DIRECT32):
        total += _power(q + k, s)
    a = q + _DIRECT32
    head = _power(a, s)                     # a**-s
    w = 1.0 / a
    total += head * (a / (s - 1.0) + 0.5)   # the integral a**(1-s)/(s-1) and half of a**-s
    # sum_j B_2j/(2j)! s (s+1)...(s+2j-2) a**(-s-2j+1)
    t = head * w * s
    tail = t * _EM_INVERSES32[0]
    w2 = w * w
    for j in range(1, _TAIL32):
        t *= (s + (2 * j - 1)) * (s + 2 * j) * w2
        tail += t * _EM_INVERSES32[j]
    return total + (tail if _TWO_PI * a >= s else 0.0)


@scalar_helper
def zeta_f32(s, q):
    """Hurwitz's ``zeta(s, q)`` of float32 operands, in float64, rounded once; branch-free,
    so loops calling it vectorise.

    ``q > 0``: the fixed-length form :func:`_zeta_fixed` (five powers by ``exp``/``log``
    without libm calls, eight Euler-Maclaurin terms). Negative non-integer ``q = f - m``
    (``0 < f < 1``, integer ``s``): ``zeta(s, f) + (-1)**s (zeta(s, 1 - f) -
    zeta(s, m + 1 - f))``, the terms ``(f - j)**-s`` for ``j = 1..m`` as a difference of two
    sums of positive ``q`` (every element evaluates the three forms; two are used only
    there). Edge values as :func:`zeta_core` (Cephes'): inf at ``s = 1`` and at non-positive
    integer ``q``, NaN for ``s < 1``, for non-integer ``s`` at negative ``q`` and for NaN
    or infinite operands. Measured error: at most 0.51 float32 ulp against SciPy's float64
    zeta for ``q > 0`` (tests/numba/test_special_zeta_f32.py: the float64 form is good to
    ~2e-11); for negative ``q`` the three sums' ~1e-11 relative error shows where their
    signed total cancels (as SciPy's, at float64's 1e-16)."""
    sd, qd = np.float64(s), np.float64(q)
    integer_s = sd == math.floor(sd)
    fl = math.floor(qd)
    f = qd - fl                        # in [0, 1)
    m = -fl                            # q = f - m
    negative = qd < 0.0
    safe_s = sd if sd > 1.0 else 2.0   # every lane computes something finite
    x1 = qd if not negative else f
    x1 = x1 if (x1 > 0.0 and x1 < np.inf) else 1.0
    x2 = 1.0 - f if negative else 1.0
    x3 = m + 1.0 - f if negative else 1.0
    x3 = x3 if x3 < np.inf else 1.0
    first = _zeta_fixed(safe_s, x1)
    shift = _zeta_fixed(safe_s, x2) - _zeta_fixed(safe_s, x3)
    odd = sd - 2.0 * math.floor(0.5 * sd) == 1.0
    r = first + ((-shift if odd else shift) if negative else 0.0)
    # Cephes' tests, the first of its order assigned last (zeta(1, nan) and zeta(nan, 0)
    # are inf, as SciPy's)
    r = np.nan if (sd != sd or qd != qd) else r
    # Cephes' sum is 0 * inf there (every term underflows, s (s+1)...(s+22) overflows;
    # above ZETA_LARGE_Q its asymptotic form gives 0)
    r = np.nan if (sd > _S_OVERFLOW and qd > 1.0 and qd <= ZETA_LARGE_Q) else r
    r = np.nan if (negative and not integer_s) else r
    r = np.inf if (qd <= 0.0 and qd == fl) else r
    r = np.nan if sd < 1.0 else r
    r = np.inf if sd == 1.0 else r
    r = np.nan if (abs(sd) == np.inf or abs(qd) == np.inf) else r
    return np.float32(r)


#: :func:`zeta_f32` compiled once and called (:mod:`plax_numba.compiled_once`): what kernels
#: over few elements call, where the inlined form's compile (~4 CPU s per kernel: LLVM
#: vectorising its five powers three times over) is not repaid; the inlined form runs ~6x
#: faster per element (it vectorises with its loop), so large kernels keep it
#: (:data:`plax_numba.codegen.INLINE_FROM`)
zeta_f32_once = twin(zeta_f32, "float32(float32, float32)", __name__)


@scalar_helper
def _polygamma_f64(m, x):
    """``polygamma(m, x)`` of float64 operands (``lax.polygamma``)."""
    return polygamma_core(m, x, _EPS)


polygamma_f64 = compiled_once(_polygamma_f64, "float64(float64, float64)",
                              __name__, "polygamma_f64")


@scalar_helper
def _polygamma_f32(m, x):
    """``polygamma(m, x)`` of float32 operands, in float64, rounded once: for integer orders
    ``1 <= m <= 63`` and ``x > 0``, ``(-1)**(m+1) m! zeta(m + 1, x)`` by :func:`zeta_f32`'s
    fixed-length form; otherwise :func:`polygamma_core`."""
    md, xd = np.float64(m), np.float64(x)
    if md >= 1.0 and md < _S_MAX32 and md == math.floor(md) and xd > 0.0 and xd < np.inf:
        sign = 1.0 if (md % 2.0) == 1.0 else -1.0
        return np.float32(sign * math.gamma(md + 1.0) * _zeta_fixed(md + 1.0, xd))
    return np.float32(polygamma_core(md, xd, _EPS32))


polygamma_f32 = compiled_once(_polygamma_f32, "float32(float32, float32)",
                              __name__, "polygamma_f32")
