"""float32 ``log``, ``expm1``, ``erf`` and ``erfc`` without libm calls, for the generated kernels.

``log``, ``expm1`` and ``erfc`` widen their float32 argument to float64, evaluate a polynomial
there (with fused multiply-adds, :func:`plax_numba.scalar.fma_f64`) and round once to float32:
float64 carries ~29 bits more than the result needs, so what shows is the final rounding
(0.50, 0.50 and 0.57 ulp). ``erf`` runs in float32 arithmetic (twice the lanes; 1.05 ulp). The
bounds are measured against NumPy/SciPy in float64 over dense sweeps and powers of two
(tests/numba/test_libm_free.py); JAX's own float32 ``expm1``/``erf``/``erfc`` are 5.4/5.4/66
ulps off on the same inputs. The code is branch-free (every case is computed and one selected),
so loops calling these vectorise instead of making one scalar libm call per element (1M float32
``erf`` in a fused loop: 13.4 ms before, through SciPy; see docs/performance.md).

The float32 ``exp``, ``tanh`` and ``logistic`` live in :mod:`plax_numba.scalar` (float32
arithmetic, tuned for the selu and MLP benchmarks). ``log1p`` has no kernel here: the random
samplers call it and must match the NumPy backend bit for bit, so clusters run NumPy's own
``log1p`` loop (``codegen.reference_only``), which is SIMD on this kind of machine.

The coefficients are fitted by ``benchmarks/fit_libm_free.py`` (weighted least squares at
Chebyshev nodes, reweighted towards the least maximum error); the series for ``log`` (of
``atanh``) and ``exp`` are Taylor's.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from plax_numba.scalar import bitcast, fma_f32 as fma32, fma_f64 as fma

_inline = dict(cache=True, nogil=True, error_model="numpy", inline="always")
_F = np.float32

# ln 2 split so that n * _LN2_HI is exact for |n| < 2**21 (32 significant bits), and the rest
_LN2_HI, _LN2_LO = 0.6931471806019545, -4.2009150726810846e-11
_LN2 = 0.6931471805599453
_LOG2E = 1.4426950408889634
_ROUNDER = 6755399441055744.0            # 1.5 * 2**52: adding it rounds to an integer
_ROUNDER_BITS = np.int64(0x4338000000000000)
_MANTISSA = np.int64(0x000FFFFFFFFFFFFF)
_ONE_BITS = np.int64(0x3FF0000000000000)
_SQRT2 = 1.4142135623730951
_INF32, _NAN32 = _F(np.inf), _F(np.nan)

# The polynomials below are written out as nested fused multiply-adds (Horner's rule): a loop
# over a tuple of coefficients compiles to an indexed array that stops the caller's loop from
# vectorising (three times slower).


@njit(**_inline)
def exp_f64(d):
    """``exp(d)`` in float64 for ``-1020 ln 2 <= d <= 1020 ln 2``, relative error below 1e-11
    (no range checks: the callers clamp). ``n = round(d / ln 2)`` by the 1.5 * 2**52 rounder,
    ``r = d - n ln 2`` (Cody-Waite, |r| <= ln2/2), Taylor's series of ``exp(r)`` to ``r**9``
    (truncation below 7e-12), then ``2**n`` added to the exponent field."""
    t = d * _LOG2E + _ROUNDER
    n = t - _ROUNDER
    ni = bitcast(t, np.int64(0)) - _ROUNDER_BITS
    r = fma(-n, _LN2_LO, fma(-n, _LN2_HI, d))
    q = fma(fma(fma(fma(fma(fma(fma(1 / 362880, r, 1 / 40320), r, 1 / 5040), r, 1 / 720), r,
                        1 / 120), r, 1 / 24), r, 1 / 6), r, 0.5)
    p = fma(fma(q, r, 1.0), r, 1.0)
    return bitcast(bitcast(p, np.int64(0)) + (ni << np.int64(52)), 0.0)


@njit(**_inline)
def log_f32(x):
    """``log`` of a float32 (0.5 ulp after the final rounding).

    ``x = m 2**e`` with ``m`` in ``[sqrt(1/2), sqrt(2))`` (read from float64 bits, where
    float32 subnormals are normal), ``log m = 2 atanh(s)`` with ``s = (m-1)/(m+1)``, |s| <=
    0.172, by its odd series to ``s**11`` (truncation below 5e-11 relative), plus ``e ln 2``.
    For ``x`` near 1, ``e`` is 0 and nothing cancels. 0 -> -inf, negative -> NaN, inf and NaN
    unchanged.
    """
    d = np.float64(x)
    b = bitcast(d, np.int64(0))
    e = (b >> np.int64(52)) - np.int64(1023)
    m = bitcast((b & _MANTISSA) | _ONE_BITS, 0.0)          # in [1, 2)
    high = m > _SQRT2
    m = m * 0.5 if high else m
    e = e + np.int64(1) if high else e
    f = m - 1.0
    s = f / (2.0 + f)
    z = s * s
    p = s * fma(fma(fma(fma(fma(2 / 11, z, 2 / 9), z, 2 / 7), z, 2 / 5), z, 2 / 3), z, 2.0)
    r = _F(fma(np.float64(e), _LN2, p))
    r = r if x < _INF32 else x                             # inf and NaN unchanged
    r = -_INF32 if x == 0 else r
    return _NAN32 if x < 0 else r


@njit(**_inline)
def expm1_f32(x):
    """``exp(x) - 1`` of a float32 (0.5 ulp after the final rounding).

    For |x| < 0.5 Taylor's series to ``x**10`` (truncation below 3e-11 relative); otherwise
    :func:`exp_f64` minus one, which cancels at most a factor 1.6 of float64's precision.
    Arguments are clamped to ``[-40, 89]`` (-1 and inf in float32 beyond); NaN and ±0
    unchanged.
    """
    d = min(max(np.float64(x), -40.0), 89.0)
    q = fma(fma(fma(fma(fma(fma(fma(fma(1 / 3628800, d, 1 / 362880), d, 1 / 40320), d, 1 / 5040),
                            d, 1 / 720), d, 1 / 120), d, 1 / 24), d, 1 / 6), d, 0.5)
    small = fma(q * d, d, d)
    large = exp_f64(d) - 1.0
    r = _F(small if abs(d) < 0.5 else large)
    return x if x != x or x == 0 else r                    # NaN and -0 unchanged


# erfc in float64: erf(x) / x as a polynomial in x**2 on [0, 1] (relative error 1.2e-9), and
# erfcx(x) = exp(x**2) erfc(x) as a polynomial in t = 1 / (2 + x) on [1, 10.5] (relative 1.1e-10)
_E0, _E1, _E2 = 1.1283791657264177, -0.37612625822183016, 0.11283585125328684
_E3, _E4, _E5 = -0.026853810961188437, 0.005188325835278494, -0.0008010177372378344
_E6 = 7.853807701072893e-05
_C0, _C1, _C2 = 6.615562943086345e-07, 0.5641456949902247, 1.1296483980426628
_C3, _C4, _C5 = 1.9537092348607612, 3.037387218977655, 1.2506450481531266
_C6, _C7, _C8 = 5.486743880931889, -18.559912535275767, -20.94498120858542
_C9, _C10 = 81.10070837787408, -56.38936888302372
_TAIL_MAX = 10.5    # erfc(10.5) < 2**-160: float32's erfc is 0 from 10.06 on


@njit(**_inline)
def _erf_small(d):
    """``erf(d)`` in float64 for |d| <= 1."""
    z = d * d
    return d * fma(fma(fma(fma(fma(fma(_E6, z, _E5), z, _E4), z, _E3), z, _E2), z, _E1), z, _E0)


@njit(**_inline)
def _erfc_tail(a):
    """``erfc(a)`` in float64 for ``1 <= a`` (clamped to 10.5, where it underflows float32):
    ``exp(-a**2) erfcx(a)``; ``a**2`` of a float32 is exact in float64."""
    a = min(a, _TAIL_MAX)
    t = 1.0 / (2.0 + a)
    g = fma(fma(fma(fma(fma(fma(_C10, t, _C9), t, _C8), t, _C7), t, _C6), t, _C5), t, _C4)
    g = fma(fma(fma(fma(g, t, _C3), t, _C2), t, _C1), t, _C0)
    return exp_f64(-(a * a)) * g


@njit(**_inline)
def erfc_f32(x):
    """``1 - erf(x)`` of a float32 (0.57 ulp, relative also where the result is tiny):
    ``1 - x P(x**2)`` for |x| < 1, ``exp(-x**2) erfcx(x)`` for ``x >= 1`` and
    ``2 - erfc(-x)`` for ``x <= -1``, in float64. NaN unchanged."""
    d = np.float64(x)
    a = abs(d)
    tail = _erfc_tail(max(a, 1.0))
    r = _F(1.0 - _erf_small(d) if a < 1.0 else (tail if d > 0 else 2.0 - tail))
    return x if x != x else r


# erf in float32 arithmetic (16 lanes): x + x Q(x**2) on |x| < 1 (Q fitted to erf(x)/x - 1,
# relative 1.2e-9; the form keeps the leading 1 exact), and 1 - P(|x| - 2.375) on [1, 3.92]
# (P fitted to erfc, absolute 6.6e-9; the shift is exact, a scaled argument would cost 0.6 ulp)
_Q0, _Q1, _Q2 = _F(0.12837916612625122), _F(-0.3761262595653534), _F(0.1128358542919159)
_Q3, _Q4, _Q5 = _F(-0.026853810995817184), _F(0.005188325885683298), _F(-0.0008010177407413721)
_Q6 = _F(7.853807619540021e-05)
_P0, _P1, _P2 = _F(0.0007829330861568451), _F(-0.0040064346976578236), _F(0.009515663608908653)
_P3, _P4, _P5 = _F(-0.013731326907873154), _F(0.013130760751664639), _F(-0.008353055454790592)
_P6, _P7, _P8 = _F(0.0031221341341733932), _F(-0.00013402043259702623), _F(-0.0006067199283279479)
_P9, _P10 = _F(0.0003516842843964696), _F(-4.452006396604702e-05)
_P11, _P12 = _F(-4.2096158722415566e-05), _F(1.6707279428374022e-05)
_P13, _P14 = _F(1.191780711451429e-06), _F(-1.0908333933912218e-06)
_ONE32, _ERF_ONE, _ERF_MID = _F(1.0), _F(3.92), _F(2.375)   # erf rounds to 1 from 3.9192 on


@njit(**_inline)
def erf_f32(x):
    """``erf`` of a float32 in float32 arithmetic, within 1.05 ulp (JAX's: 5.4): ``x + x Q(x**2)``
    for |x| < 1, ``sign(x) (1 - P(|x| - 2.375))`` up to 3.92, ±1 beyond. NaN unchanged."""
    a = abs(x)
    z = x * x
    q = fma32(fma32(fma32(fma32(fma32(fma32(_Q6, z, _Q5), z, _Q4), z, _Q3), z, _Q2), z, _Q1),
              z, _Q0)
    small = fma32(x, q, x)
    u = min(a, _ERF_ONE) - _ERF_MID
    p = fma32(fma32(fma32(fma32(fma32(fma32(fma32(_P14, u, _P13), u, _P12), u, _P11), u, _P10),
                          u, _P9), u, _P8), u, _P7)
    p = fma32(fma32(fma32(fma32(fma32(fma32(fma32(p, u, _P6), u, _P5), u, _P4), u, _P3), u, _P2),
                    u, _P1), u, _P0)
    big = _ONE32 if a >= _ERF_ONE else _ONE32 - p
    big = big if x > 0 else -big
    r = small if a < _ONE32 else big
    return x if x != x else r
