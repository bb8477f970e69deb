"""Scalar forms of the incomplete gamma family for the generated kernels: ``igamma``
(``P(a, x)``), ``igammac`` (``Q(a, x) = 1 - P``), ``igamma_grad_a`` (``dP/da``) and
``random_gamma_grad`` (the derivative of a gamma sample in its shape, JAX's implicit
reparameterisation), each as ``<name>_f32`` and ``<name>_f64``.

Everything is evaluated in float64; a float32 call widens its operands, iterates to a looser
tolerance (``_EPS32``, far below float32's resolution) and rounds once. The methods are
Cephes' (as SciPy's before its uniform asymptotic expansions):

* ``P`` by its power series ``x**a e**-x / Gamma(a+1) sum_k x**k / ((a+1)...(a+k))`` where
  ``x <= max(1, a)``; ``Q`` by Legendre's continued fraction above; each from the other by
  ``1 - ...`` only where that cannot cancel; ``Q`` for ``x <= 1.1`` below its crossover by the
  series of ``Gamma(a, x)`` itself (``1 - x**a / Gamma(a+1)`` by ``expm1``, so small ``a``
  keeps its relative accuracy).
* The prefactor ``x**a e**-x / Gamma(a)`` is where the error comes from; for ``a < 10`` it is
  ``pow(x, a) exp(-x) / gamma(a)`` (each factor rounded once) where nothing overflows, for
  larger ``a`` Temme's form ``sqrt(a / 2 pi) exp(a log1pmx((x-a)/a) - stirling(a))``, which
  does not cancel near ``x = a`` (``log(x**a e**-x) - lgamma(a)`` would lose ``log2(a)``
  bits there).
* For ``a > 5e6`` with ``|x - a| < 0.002 a`` (where those would need over 2e4 terms)
  Temme's uniform asymptotic expansion to its first correction term.
* ``random_gamma_grad``: the derivative of the series or of the continued fraction in ``a``,
  carried along with it (the algorithm of JAX and of the NumPy reference kernel), times
  ``x`` and minus ``d log(prefactor) / da = log x - digamma(a)``.

Measured error against SciPy in float64 over dense sweeps, powers of two and the edges
(tests/numba/test_special_gamma_forms.py, ``benchmarks/special_bench.py``): float32 within
1 ulp of the float64 value; float64 a few hundred ulps at most on ``a, x <= 1e3``, growing
like ``eps * a`` beyond (the bounds are in the tests, beside JAX's own error on the same
inputs). Edge values follow the NumPy backend (SciPy's conventions, NaN for infinite ``a``).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from plax_numba.compiled_once import compiled_once

from plax.lax.special_series import (EULER, GAMMA_GRAD_FRACTION_TERMS, GAMMA_HUGE_SHAPE,
                                     GAMMA_MAX_TERMS, GAMMA_NEAR_CENTRE, LGAMMA1P_TAYLOR,
                                     STOP_TOLERANCE_F32, TEMME_C0)
from plax_numba.inlining import scalar_helper
from plax_numba.special import digamma_f64

_core = dict(cache=True, nogil=True, error_model="numpy", inline="never")

_EPS64 = 2.0 ** -53
#: float32's tolerance: series and fractions stop at this relative change, 2**-16 of a
#: float32 ulp, so the float32 result is float64's rounded once
_EPS32 = STOP_TOLERANCE_F32
_MAX_TERMS = GAMMA_MAX_TERMS   # series/fraction cap (enough for a ~ 5e6 near x = a)
_BIG, _BIG_INV = 4503599627370496.0, 2.22044604925031308085e-16
_LOG_MAX, _LOG_MIN = 709.782712893384, -745.1332191019411
_HALF_LOG_2PI = 0.9189385332046728
_EULER = EULER

#: (-1)**k zeta(k) / k, k = 2..27: lgamma(1 + a) = -euler a + sum_k c_k a**k, |a| < 1
_LGAM1P = LGAMMA1P_TAYLOR


@njit(**_core)
def lgamma1p(a):
    """``lgamma(1 + a)`` without rounding ``1 + a`` for small ``|a|`` (Taylor's series in
    ``a`` below 0.2, whose terms fall by 5 per step)."""
    if abs(a) >= 0.2:
        return math.lgamma(1.0 + a)
    s = 0.0
    for k in range(len(_LGAM1P) - 1, -1, -1):
        s = (s + _LGAM1P[k]) * a
    return (s - _EULER) * a


@njit(**_core)
def log1pmx(d):
    """``log(1 + d) - d`` for ``d > -1`` without cancellation near 0: with ``s = d / (2 + d)``,
    ``log(1+d) = 2 atanh(s)`` and ``d - 2 s = s d``, so it is ``-s d + 2 (s**3/3 + s**5/5 +
    ...)`` (|s| <= 1/3 below |d| = 0.5: 20 terms reach 1e-19)."""
    if abs(d) > 0.5:
        return math.log1p(d) - d
    s = d / (2.0 + d)
    z = s * s
    t = 0.0
    for k in range(20, 0, -1):
        t = t * z + 1.0 / (2 * k + 1)
    return -s * d + 2.0 * s * z * t


@njit(**_core)
def _stirling_correction(a):
    """``lgamma(a) - ((a - 1/2) log a - a + log(2 pi) / 2)`` for ``a >= 10`` (Stirling's series
    to ``a**-13``: truncation below 1e-19 there)."""
    w = 1.0 / (a * a)
    p = (((((691.0 / 360360.0 * w - 1.0 / 1188.0) * w + 1.0 / 1680.0) * w - 1.0 / 1260.0) * w
          + 1.0 / 360.0) * w)
    return (1.0 / 12.0 - p) / a


@njit(**_core)
def gamma_prefactor(a, x):
    """``x**a e**-x / Gamma(a)`` for ``a, x > 0`` (finite), accurate to a few ulps of its
    exponent: see the module docstring."""
    if a >= 10.0:
        d = (x - a) / a
        # below x = a/2, 1 + d would round away x/a's low digits: log(x/a) itself
        lx = a * math.log(x / a) + (a - x) if d < -0.5 else a * log1pmx(d)
        e = lx - _stirling_correction(a)
        return math.sqrt(a / (2.0 * math.pi)) * math.exp(e) if e > _LOG_MIN else 0.0
    if x < 700.0:
        p = math.pow(x, a)
        if p < 1e300 and p > 1e-300:
            return p * math.exp(-x) / math.gamma(a)
    e = a * math.log(x) - x - math.lgamma(a)
    return math.exp(e) if e > _LOG_MIN else 0.0


@njit(**_core)
def _p_series(a, x, eps):
    """``P(a, x)`` by its power series (``x <= max(1, a)``)."""
    f = gamma_prefactor(a, x)
    if f == 0.0:
        return 0.0
    r, c, s = a, 1.0, 1.0
    for _ in range(_MAX_TERMS):
        r += 1.0
        c *= x / r
        s += c
        if c <= s * eps:
            break
    return s * f / a


@njit(**_core)
def _q_fraction(a, x, eps):
    """``Q(a, x)`` by Legendre's continued fraction (``x > max(1, a)``), Cephes' recurrence
    with rescaling."""
    f = gamma_prefactor(a, x)
    if f == 0.0:
        return 0.0
    y = 1.0 - a
    z = x + y + 1.0
    c = 0.0
    pkm2, qkm2 = 1.0, x
    pkm1, qkm1 = x + 1.0, z * x
    ans = pkm1 / qkm1
    for _ in range(_MAX_TERMS):
        c += 1.0
        y += 1.0
        z += 2.0
        yc = y * c
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        t = 1.0
        if qk != 0.0:
            r = pk / qk
            t = abs((ans - r) / r)
            ans = r
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        if abs(pk) > _BIG:
            pkm2 *= _BIG_INV
            pkm1 *= _BIG_INV
            qkm2 *= _BIG_INV
            qkm1 *= _BIG_INV
        if t <= eps:
            break
    return ans * f


@njit(**_core)
def _q_series(a, x, eps):
    """``Q(a, x)`` for ``x <= 1.1`` and small ``a``: ``1 - x**a / Gamma(a+1) (1 + a sum_n
    (-x)**n / (n! (a+n)))``, the leading ``1 - x**a/Gamma(a+1)`` by ``expm1``."""
    fac, s = 1.0, 0.0
    for n in range(1, _MAX_TERMS):
        fac *= -x / n
        term = fac / (a + n)
        s += term
        if abs(term) <= eps * abs(s):
            break
    logx = math.log(x)
    lead = -math.expm1(a * logx - lgamma1p(a))
    return lead - math.exp(a * logx - math.lgamma(a)) * s


@njit(**_core)
def _edge(a, x):
    """Whether ``(a, x)`` is outside the iterations' domain (NaN, negative, zero, infinite)."""
    return not (a > 0.0 and x > 0.0 and a < np.inf and x < np.inf)


@njit(**_core)
def _edge_p(a, x):
    """``P(a, x)`` at the edges, as SciPy's ``gammainc`` with NaN for infinite ``a``."""
    if a != a or x != x or a < 0.0 or x < 0.0 or a == np.inf:
        return np.nan
    if a == 0.0:
        return 1.0 if x > 0.0 else np.nan
    return 0.0 if x == 0.0 else 1.0          # x == inf


#: Temme's C0(eta) = 1/(lambda - 1) - 1/eta near eta = 0: its Taylor coefficients
_C0 = TEMME_C0
#: above this shape the power series and fraction would need more than their 20000 terms
#: within ``|x - a| < _NEAR * a``; Temme's uniform expansion to its first correction takes
#: over there (relative error ~a**-1.5 at the centre, more in its tails)
_HUGE_A, _NEAR = GAMMA_HUGE_SHAPE, GAMMA_NEAR_CENTRE
_GRAD_TERMS = GAMMA_GRAD_FRACTION_TERMS


@njit(**_core)
def _uniform_asymptotic(a, x, upper):
    """``Q(a, x)`` (``upper``) or ``P(a, x)`` for huge ``a`` with ``x`` near ``a``: Temme's
    ``Q = erfc(eta sqrt(a/2)) / 2 + exp(-a eta**2 / 2) / sqrt(2 pi a) C0(eta)``, with
    ``eta = sign(x - a) sqrt(-2 log1pmx((x - a) / a))``."""
    d = (x - a) / a
    lmx = (math.log(x / a) - d) if d < -0.5 else log1pmx(d)
    eta = math.copysign(math.sqrt(-2.0 * lmx), d)
    if abs(eta) < 0.3:
        c0 = 0.0
        for k in range(len(_C0) - 1, -1, -1):
            c0 = c0 * eta + _C0[k]
    else:
        c0 = 1.0 / d - 1.0 / eta
    r = math.exp(a * lmx) / math.sqrt(2.0 * math.pi * a) * c0
    z = eta * math.sqrt(0.5 * a)
    return 0.5 * math.erfc(z) + r if upper else 0.5 * math.erfc(-z) - r


@njit(**_core)
def igamma_core(a, x, eps):
    """``P(a, x)`` in float64 iterating to relative tolerance ``eps``."""
    if _edge(a, x):
        return _edge_p(a, x)
    if a > _HUGE_A and abs(x - a) < _NEAR * a:
        return _uniform_asymptotic(a, x, False)
    if x > 1.0 and x > a:
        return 1.0 - igammac_core(a, x, eps)
    return _p_series(a, x, eps)


@njit(**_core)
def igammac_core(a, x, eps):
    """``Q(a, x)`` in float64 iterating to relative tolerance ``eps`` (SciPy's choice of
    method by region, without its asymptotic expansions)."""
    if _edge(a, x):
        p = _edge_p(a, x)
        return p if p != p else 1.0 - p
    if a > _HUGE_A and abs(x - a) < _NEAR * a:
        return _uniform_asymptotic(a, x, True)
    if x > 1.1:
        if x < a:
            return 1.0 - _p_series(a, x, eps)
        return _q_fraction(a, x, eps)
    if x <= 0.5:
        if -0.4 / math.log(x) < a:
            return 1.0 - _p_series(a, x, eps)
        return _q_series(a, x, eps)
    if x * 1.1 < a:
        return 1.0 - _p_series(a, x, eps)
    return _q_series(a, x, eps)


@njit(**_core)
def _series_derivative(a, x, eps):
    """d(sample)/da by the power series (``x <= max(1, a)``), JAX's recurrence."""
    r, c, ans = a, 1.0, 1.0
    dc_da, dans_da = 0.0, 0.0
    for _ in range(_MAX_TERMS):
        r += 1.0
        dc_da = dc_da * (x / r) - (c * x) / (r * r)
        dans_da += dc_da
        c *= x / r
        ans += c
        if not abs(dc_da / dans_da) > eps:
            break
    dlogax_da = math.log(x) - digamma_f64(a + 1.0)
    return -(dans_da + ans * dlogax_da) * x / a


@njit(**_core)
def _fraction_derivative(a, x, eps, iterate):
    """d(sample)/da by the continued fraction (``x > max(1, a)``), at most 2000 terms (JAX's
    cap); ``iterate`` False gives the formula at its initial state (JAX's value where the
    prefactor underflows)."""
    y = 1.0 - a
    z = x + y + 1.0
    pkm2, qkm2 = 1.0, x
    pkm1, qkm1 = x + 1.0, z * x
    ans = pkm1 / qkm1
    dpkm2, dqkm2, dpkm1, dqkm1 = 0.0, 0.0, 0.0, -x
    dans = (dpkm1 - ans * dqkm1) / qkm1
    for count in range(1, _GRAD_TERMS + 1 if iterate else 1):
        y += 1.0
        z += 2.0
        yc = y * count
        pk = pkm1 * z - pkm2 * yc
        qk = qkm1 * z - qkm2 * yc
        dpk = dpkm1 * z - pkm1 - dpkm2 * yc + pkm2 * count
        dqk = dqkm1 * z - qkm1 - dqkm2 * yc + qkm2 * count
        change = 1.0
        if qk != 0.0:
            ans_new = pk / qk
            dans_new = (dpk - ans_new * dqk) / qk
            change = abs(dans_new - dans)
            ans, dans = ans_new, dans_new
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        dpkm2, dqkm2, dpkm1, dqkm1 = dpkm1, dqkm1, dpk, dqk
        if abs(pk) > 1.0 / eps:
            pkm2 *= eps
            pkm1 *= eps
            qkm2 *= eps
            qkm1 *= eps
            dpkm2 *= eps
            dqkm2 *= eps
            dpkm1 *= eps
            dqkm1 *= eps
        if not change > eps:
            break
    dlogax_da = math.log(x) - digamma_f64(a)
    return (dans + ans * dlogax_da) * x


@njit(**_core)
def random_gamma_grad_core(a, x, eps, log_max):
    """d(gamma sample)/d(shape) at sample ``x``; ``eps`` is the reference's stopping
    tolerance and ``log_max`` the log of the largest finite value of the dtype (below
    ``-log_max`` the prefactor counts as underflowing and the formulas are evaluated without
    iterating, as JAX)."""
    if a != a or x != x or x < 0.0 or a <= 0.0:
        return np.nan
    if x == 0.0:
        return 0.0
    use_fraction = x > 1.0 and x > a
    enabled = a * math.log(x) - x - math.lgamma(a) >= -log_max
    if use_fraction:
        return _fraction_derivative(a, x, eps, enabled)
    if not enabled:
        return -x / a * (math.log(x) - digamma_f64(a + 1.0))
    return _series_derivative(a, x, eps)


@njit(**_core)
def igamma_grad_a_core(a, x, eps, log_max):
    """``dP(a, x)/da = -d(sample)/da * density(x)`` (the NumPy reference kernel's identity);
    0 at ``x = 0``, NaN outside ``a, x > 0`` finite."""
    if a > 0.0 and a < np.inf and x == 0.0:
        return 0.0
    if _edge(a, x):
        return np.nan
    density = gamma_prefactor(a, x) / x
    return -random_gamma_grad_core(a, x, eps, log_max) * density


_LOG_MAX32 = 88.72283935546875   # log(float32 max)


@scalar_helper
def _igamma_f64(a, x):
    """``P(a, x)`` of float64 operands (``lax.igamma``)."""
    return igamma_core(a, x, _EPS64)


igamma_f64 = compiled_once(_igamma_f64, "float64(float64, float64)", __name__, "igamma_f64")


@scalar_helper
def _igamma_f32(a, x):
    """``P(a, x)`` of float32 operands: float64's value to ``_EPS32``, rounded once."""
    return np.float32(igamma_core(np.float64(a), np.float64(x), _EPS32))


igamma_f32 = compiled_once(_igamma_f32, "float32(float32, float32)", __name__, "igamma_f32")


@scalar_helper
def _igammac_f64(a, x):
    """``Q(a, x) = 1 - P(a, x)`` of float64 operands (``lax.igammac``)."""
    return igammac_core(a, x, _EPS64)


igammac_f64 = compiled_once(_igammac_f64, "float64(float64, float64)", __name__, "igammac_f64")


@scalar_helper
def _igammac_f32(a, x):
    """``Q(a, x)`` of float32 operands, rounded once from float64."""
    return np.float32(igammac_core(np.float64(a), np.float64(x), _EPS32))


igammac_f32 = compiled_once(_igammac_f32, "float32(float32, float32)", __name__, "igammac_f32")


@scalar_helper
def _random_gamma_grad_f64(a, x):
    """d(sample)/d(a) of a float64 gamma sample ``x`` (``lax.random_gamma_grad``)."""
    return random_gamma_grad_core(a, x, _EPS64, _LOG_MAX)


random_gamma_grad_f64 = compiled_once(_random_gamma_grad_f64, "float64(float64, float64)",
                                      __name__, "random_gamma_grad_f64")


@scalar_helper
def _random_gamma_grad_f32(a, x):
    """d(sample)/d(a) of a float32 sample, in float64 with float32's underflow threshold (so
    the same elements skip iterating as in the float32 reference), rounded once."""
    return np.float32(random_gamma_grad_core(np.float64(a), np.float64(x), _EPS32,
                                             _LOG_MAX32))


random_gamma_grad_f32 = compiled_once(_random_gamma_grad_f32, "float32(float32, float32)",
                                      __name__, "random_gamma_grad_f32")


@scalar_helper
def _igamma_grad_a_f64(a, x):
    """``dP(a, x)/da`` of float64 operands (``lax.igamma_grad_a``)."""
    return igamma_grad_a_core(a, x, _EPS64, _LOG_MAX)


igamma_grad_a_f64 = compiled_once(_igamma_grad_a_f64, "float64(float64, float64)",
                                  __name__, "igamma_grad_a_f64")


@scalar_helper
def _igamma_grad_a_f32(a, x):
    """``dP(a, x)/da`` of float32 operands, in float64, rounded once."""
    return np.float32(igamma_grad_a_core(np.float64(a), np.float64(x), _EPS32, _LOG_MAX))


igamma_grad_a_f32 = compiled_once(_igamma_grad_a_f32, "float32(float32, float32)",
                                  __name__, "igamma_grad_a_f32")
