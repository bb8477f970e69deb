"""Scalar forms of the regularized incomplete beta function ``I_x(a, b)``
(``lax.betainc``, primitive ``regularized_incomplete_beta``) for the generated kernels:
``betainc_f32`` and ``betainc_f64``.

Cephes' ``incbet``: the power series where ``b x <= 1`` and ``x <= 0.95``; otherwise, with
``a`` and ``b`` swapped (and ``x`` for ``1 - x``) above the mean ``a / (a + b)``, one of its
two continued fractions (``x (a+b-2) < a-1`` or not), times ``x**a (1-x)**b / (a B(a, b))``
(from ``pow`` and ``gamma`` where they stay in range, else from logarithms). Evaluated in
float64; float32 rounds once. For a float32 result the iterations stop at ``2**-40`` relative
instead of ``2**-53`` and the prefactor always comes from logarithms (libm's ``gamma`` and
``pow`` were two thirds of the time): the float64 value is then ~1e-12 off, far below
float32's ulp, and the function takes ~0.65 of its former time. Its ``-log B(a, b)`` comes
from Stirling's series after a shift by 10 (:func:`log_beta_parts`: three ``log`` calls),
not from libm's ``lgamma`` three times (that part of the work: 408 -> 300 ms per 1M
elements, serial, on the loaded 2-core host; error in tests/numba/test_betainc_log_beta.py).
The fractions stop at 300 terms (Cephes' cap), which is where accuracy ends for ``a + b`` of
many thousands.

Edge values follow the NumPy backend (SciPy's ``betainc``): 0 at ``x = 0`` and 1 at
``x = 1``; ``a = 0`` gives 1 and ``b = 0`` gives 0 for ``0 < x < 1``; NaN for
negative parameters, ``x`` outside ``[0, 1]``, NaN operands, and both of ``a, b`` zero or
infinite. Where both parameters exceed 1e13 (the prefactor's logarithms cancel to nothing)
the normal limit of the beta distribution is returned.

Measured error against SciPy in float64 over ``a, b`` in ``[0.1, 60]`` and ``x`` in ``[0, 1]``
(tests/numba/test_special_zeta_beta_forms.py): float32 within 1 ulp, float64 within the
bound stated there.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from plax_numba.compiled_once import compiled_once

from plax.lax.special_series import BETA_FRACTION_TERMS, BETA_NORMAL_LIMIT, BETA_SERIES_TERMS
from plax_numba.inlining import scalar_helper
from plax_numba.special_gamma import _stirling_correction

_core = dict(cache=True, nogil=True, error_model="numpy", inline="never")

_EPS = 2.0 ** -53
_EPS32 = 2.0 ** -40      # float32 results: iterations and prefactor to ~1e-12, far below its ulp
_BIG, _BIG_INV = 4503599627370496.0, 2.22044604925031308085e-16
_MAX_GAMMA = 171.624376956302725
_LOG_MAX, _LOG_MIN = 709.782712893384, -745.1332191019411
_TERMS = BETA_FRACTION_TERMS
_SERIES_TERMS = BETA_SERIES_TERMS   # the power series' cap (b x <= 1: its terms fall like (bx)**n/n!)


@njit(**_core)
def log_beta_factor(a, b):
    """``lgamma(a + b) - lgamma(a) - lgamma(b)`` (minus the log of the beta function) without
    the cancellation of the large terms when one parameter is large: with ``b >= a``, ``b >=
    10``, ``lgamma(a+b) - lgamma(b) = a log b + (a + b - 1/2) log1p(a/b) - a`` plus the
    difference of Stirling's corrections."""
    if a > b:
        a, b = b, a
    if b < 10.0:
        return math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
    ratio = (a * math.log(b) + (a + b - 0.5) * math.log1p(a / b) - a
             + _stirling_correction(a + b) - _stirling_correction(b))
    return ratio - math.lgamma(a)


_HALF_LOG_2PI = 0.91893853320467274178    # log(2 pi) / 2
_TINY = 1e-100          # below it the shifts' products could underflow: libm's lgamma


@scalar_helper
def _rising10(z):
    """``z (z+1) ... (z+9)``, so that ``lgamma(z) = lgamma(z + 10) - log(_rising10(z))``: a
    fixed number of products in a tree (a loop to the first ``z + n >= 10`` ran a data-
    dependent number of steps, mispredicted and serial: slower than libm's ``lgamma``)."""
    p01 = z * (z + 1.0)
    p23 = (z + 2.0) * (z + 3.0)
    p45 = (z + 4.0) * (z + 5.0)
    p67 = (z + 6.0) * (z + 7.0)
    p89 = (z + 8.0) * (z + 9.0)
    return ((p01 * p23) * (p45 * p67)) * p89


@scalar_helper
def _stirling_log(z):
    """``lgamma(z) - log(2 pi)/2`` for ``z >= 10`` by Stirling's series to ``z**-11``
    (truncation below 4e-16 there; one division)."""
    r = 1.0 / z
    w = r * r
    series = ((((691.0 / 360360.0 * w - 1.0 / 1188.0) * w + 1.0 / 1680.0) * w
               - 1.0 / 1260.0) * w + 1.0 / 360.0) * w
    return (z - 0.5) * math.log(z) - z + (1.0 / 12.0 - series) * r


@njit(**_core)
def log_beta_parts(a, b):
    """``(l, m)`` with ``l + log(m) = lgamma(a + b) - lgamma(a) - lgamma(b)``
    (:func:`log_beta_factor`) without libm's ``lgamma``, whose three calls per element made
    a third of ``betainc_f32``'s time; the caller folds ``log(m)`` into a logarithm it takes
    anyway. With ``b >= a``: for ``b < 10`` each of ``a``, ``b`` and ``a + b`` is shifted by
    10 (``lgamma(z) = lgamma(z + 10) - log(z (z+1) ... (z+9))``, :func:`_rising10`, the three
    products in ``m``) and takes Stirling's series there: three ``log`` calls and no branch
    on the data; for ``b >= 10``, the large-``b`` form of :func:`log_beta_factor` with
    ``lgamma(a)`` the same way. Absolute error ~5e-14 for parameters up to 30 (the terms that
    cancel stay below ~100), as :func:`log_beta_factor`'s beyond: what the float32 path of
    :func:`betainc_core` asks (2**-40). Parameters below 1e-100 (where the products could
    underflow) take :func:`log_beta_factor` (``m = 1``)."""
    if a > b:
        a, b = b, a
    if a < _TINY:
        return log_beta_factor(a, b), 1.0
    if b >= 10.0:
        ratio = (a * math.log(b) + (a + b - 0.5) * math.log1p(a / b) - a
                 + _stirling_correction(a + b) - _stirling_correction(b))
        if a >= 10.0:
            return ratio - _stirling_log(a) - _HALF_LOG_2PI, 1.0
        return ratio - _stirling_log(a + 10.0) - _HALF_LOG_2PI, _rising10(a)
    c = a + b
    return (_stirling_log(c + 10.0) - _stirling_log(a + 10.0) - _stirling_log(b + 10.0)
            - _HALF_LOG_2PI, _rising10(a) / _rising10(c) * _rising10(b))


@scalar_helper
def _log_beta_times(a, b, v, eps):
    """``lgamma(a + b) - lgamma(a) - lgamma(b) + log(v)`` (``v > 0``): for the float32 path
    (``eps`` above 2**-53) from :func:`log_beta_parts` with one logarithm; for float64 from
    :func:`log_beta_factor` (libm's ``lgamma``, a few ulps)."""
    if eps == _EPS:
        return log_beta_factor(a, b) + math.log(v)
    l, m = log_beta_parts(a, b)
    return l + math.log(v * m)


@scalar_helper
def _inverse_beta(a, b):
    """``Gamma(a + b) / (Gamma(a) Gamma(b))`` from libm's ``gamma`` (for ``a + b < 171.6``), or
    0 where that fails: ``Gamma(a) Gamma(b)`` overflows for a tiny ``a`` beside ``b`` near 171
    (inf / inf gave NaN), and the caller then takes the logarithms."""
    r = math.gamma(a + b) / (math.gamma(a) * math.gamma(b))
    return r if r < np.inf else 0.0            # NaN fails the test too


@njit(**_core)
def _power_series(a, b, x, eps):
    """``I_x(a, b)`` by its power series (``b x <= 1``, ``x <= 0.95``), terms down to ``eps``
    relative."""
    ai = 1.0 / a
    u = (1.0 - b) * x
    v = u / (a + 1.0)
    t1 = v
    t = u
    n = 2.0
    s = 0.0
    z = eps * ai
    for _ in range(_SERIES_TERMS):
        if not abs(v) > z:
            break
        u = (n - b) * x / n
        t *= u
        v = t / (a + n)
        s += v
        n += 1.0
    s += t1
    s += ai
    u = a * math.log(x)
    ratio = _inverse_beta(a, b) if eps == _EPS and a + b < _MAX_GAMMA else 0.0
    if ratio > 0.0 and abs(u) < _LOG_MAX:
        return s * ratio * math.pow(x, a)
    t = _log_beta_times(a, b, s, eps) + u
    return math.exp(t) if t > _LOG_MIN else 0.0


@njit(**_core)
def _fraction(a, b, x, second, eps):
    """Cephes' continued fraction ``incbcf`` (``second`` False) or ``incbd`` (True, in
    ``z = x / (1 - x)``), with rescaling, at most 300 terms, to ``3 eps`` relative."""
    k1 = a
    k2 = b - 1.0 if second else a + b
    k3 = a
    k4 = a + 1.0
    k5 = 1.0
    k6 = a + b if second else b - 1.0
    k7 = a + 1.0
    k8 = a + 2.0
    z = x / (1.0 - x) if second else x
    pkm2, qkm2, pkm1, qkm1 = 0.0, 1.0, 1.0, 1.0
    ans, r = 1.0, 1.0
    thresh = 3.0 * eps
    for _ in range(_TERMS):
        xk = -(z * k1 * k2) / (k3 * k4)
        pk = pkm1 + pkm2 * xk
        qk = qkm1 + qkm2 * xk
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        xk = (z * k5 * k6) / (k7 * k8)
        pk = pkm1 + pkm2 * xk
        qk = qkm1 + qkm2 * xk
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        if qk != 0.0:
            r = pk / qk
        t = 1.0
        if r != 0.0:
            t = abs((ans - r) / r)
            ans = r
        if t < thresh:
            break
        k1 += 1.0
        k3 += 2.0
        k4 += 2.0
        k5 += 1.0
        k7 += 2.0
        k8 += 2.0
        if second:
            k2 -= 1.0
            k6 += 1.0
        else:
            k2 += 1.0
            k6 -= 1.0
        if abs(qk) + abs(pk) > _BIG:
            pkm2 *= _BIG_INV
            pkm1 *= _BIG_INV
            qkm2 *= _BIG_INV
            qkm1 *= _BIG_INV
        if abs(qk) < _BIG_INV or abs(pk) < _BIG_INV:
            pkm2 *= _BIG
            pkm1 *= _BIG
            qkm2 *= _BIG
            qkm1 *= _BIG
    return ans


@njit(**_core)
def _edge(a, b, x):
    """``I_x(a, b)`` outside the iterations' domain, as SciPy; NaN when inside (no edge)."""
    if a != a or b != b or x != x or a < 0.0 or b < 0.0 or x < 0.0 or x > 1.0:
        return np.nan
    if (a == 0.0 and b == 0.0) or (a == np.inf and b == np.inf):
        return np.nan
    if x == 0.0:
        return 0.0
    if x == 1.0:
        return 1.0
    if a == 0.0 or b == np.inf:
        return 1.0
    return 0.0                                   # b == 0 or a == inf


@njit(**_core)
def betainc_core(a, b, x, eps):
    """``I_x(a, b)`` in float64 (see the module docstring), iterated to ``eps`` relative
    (``_EPS`` for a float64 result; a larger ``eps`` also takes the prefactor from logarithms,
    which costs a quarter of ``gamma``'s and ``pow``'s time)."""
    if not (a > 0.0 and b > 0.0 and x > 0.0 and x < 1.0 and a < np.inf and b < np.inf):
        return _edge(a, b, x)
    if b * x <= 1.0 and x <= 0.95:
        return _power_series(a, b, x, eps)
    if a > BETA_NORMAL_LIMIT and b > BETA_NORMAL_LIMIT:       # the prefactor's logarithms cancel to nothing
        return _normal_limit(a, b, x)
    r = _fractions(a, b, x, eps)
    return r if (r >= 0.0 and r <= 1.0) else _normal_limit(a, b, x)


@njit(**_core)
def _normal_limit(a, b, x):
    """``I_x(a, b)`` for huge ``a + b`` where the logarithms of the prefactor overflow: the
    beta distribution's normal limit (mean ``a/(a+b)``, variance ``ab/((a+b)**2 (a+b+1))``)."""
    n = a + b
    mean = a / n
    sd = math.sqrt(mean * (b / n) / (n + 1.0))
    return 0.5 * math.erfc(-(x - mean) / (sd * math.sqrt(2.0)))


@njit(**_core)
def _fractions(a, b, x, eps):
    """``I_x(a, b)`` by a continued fraction (or the swapped power series) and the
    prefactor (``b x > 1`` or ``x > 0.95``)."""
    w = 1.0 - x
    # above the mean by symmetry, unless 1 - x rounds to 1 (the fraction still converges
    # for such tiny x: below (a+1)/(a+b+2) up to rounding)
    flip = x > a / (a + b) and w < 1.0
    # log x and log(1 - x) from the operand itself (1 - x rounds away a tiny x)
    log_x, log_xc = math.log(x), math.log1p(-x)
    if flip:
        a, b = b, a
        xc, x = x, w
        log_x, log_xc = log_xc, log_x
    else:
        xc = w
    if flip and b * x <= 1.0 and x <= 0.95:
        return 1.0 - _power_series(a, b, x, eps)
    if x * (a + b - 2.0) - (a - 1.0) < 0.0:
        w = _fraction(a, b, x, False, eps)
    else:
        w = _fraction(a, b, x, True, eps) / xc
    y = a * log_x
    t = b * log_xc
    ratio = _inverse_beta(a, b) if eps == _EPS and a + b < _MAX_GAMMA else 0.0
    if ratio > 0.0 and abs(y) < _LOG_MAX and abs(t) < _LOG_MAX:
        t = math.pow(xc, b) * math.pow(x, a) / a * w * ratio
    else:
        y += t + _log_beta_times(a, b, w / a, eps)
        t = math.exp(y) if y > _LOG_MIN else 0.0
    return 1.0 - t if flip else t


@scalar_helper
def _betainc_f64(a, b, x):
    """``I_x(a, b)`` of float64 operands (``lax.betainc``)."""
    return betainc_core(a, b, x, _EPS)


betainc_f64 = compiled_once(_betainc_f64, "float64(float64, float64, float64)",
                            __name__, "betainc_f64")


@scalar_helper
def _betainc_f32(a, b, x):
    """``I_x(a, b)`` of float32 operands, in float64 to ``2**-40`` relative (float32 keeps
    24 bits: what remains is its own rounding), rounded once."""
    return np.float32(betainc_core(np.float64(a), np.float64(b), np.float64(x), _EPS32))


betainc_f32 = compiled_once(_betainc_f32, "float32(float32, float32, float32)",
                            __name__, "betainc_f32")
