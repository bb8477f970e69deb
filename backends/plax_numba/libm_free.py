"""float32 transcendental functions without libm calls, for the generated kernels: ``log``,
``expm1``, ``erf``, ``erfc``, ``erf_inv``, ``sin``, ``cos``, ``lgamma`` and ``digamma``.

``expm1``, ``sin``, ``cos``, ``lgamma`` and ``digamma`` widen their float32 argument to
float64, evaluate a polynomial there (with fused multiply-adds,
:func:`plax_numba.scalar.fma_f64`) and round once to float32: float64 carries ~29 bits more
than the result needs, so what shows is the final rounding (0.50 to 0.54 ulp;
``lgamma``/``digamma`` lose relative precision only next to their zeros). ``log``, ``erf``,
``erfc`` and ``erf_inv`` run in float32 arithmetic (twice the lanes; 0.83, 1.05, 1.06 and 0.79
ulp); ``erfc`` and ``erf_inv`` keep each rounding that would show as a float32 low part (exact
products and sums by fma and Fast2Sum), so that their result rounds once at full size.
``sin``/``cos`` reduce their argument exactly for every float32 (Payne and Hanek's method,
tables of 2/pi computed here). The bounds are measured against NumPy/SciPy in float64 over
dense sweeps, powers of two and random bit patterns (tests/numba/test_libm_free.py); JAX's own
float32 ``log``, ``expm1``, ``erf``, ``erfc`` and ``erf_inv`` are 0.96, 5.4, 5.4, 66 and 65
ulps off on the same inputs (``erfc``: millions where its float32 result underflows early).
The code is branch-free (every case is computed and one selected), so loops calling these
vectorise instead of making one scalar libm call per element (docs/performance.md has the
timings).

The float32 ``exp``, ``tanh`` and ``logistic`` live in :mod:`plax_numba.scalar` (float32
arithmetic, tuned for the selu and MLP benchmarks). ``log1p`` has no kernel here: the random
samplers call it and must match the NumPy backend bit for bit, so clusters run NumPy's own
``log1p`` loop (``codegen.reference_only``), which is SIMD on this kind of machine.

The coefficients are fitted by ``benchmarks/fit_libm_free.py`` (weighted least squares at
Chebyshev nodes, reweighted towards the least maximum error); the series for ``log`` (of
``atanh``), ``exp``, ``sin`` and ``cos`` are Taylor's.
"""
from __future__ import annotations

import numpy as np

from plax_numba.compiled_once import twin
from plax_numba.inlining import scalar_helper
from plax_numba.scalar import bitcast, constant_table, fma_f32 as fma32, fma_f64 as fma
# exp_f32's constants: 1/ln2, the 1.5 * 2**23 rounder and exp(r) = 1 + r + r**2 Q(r) (erfc_f32)
from plax_numba.scalar import (_LOG2E as _LOG2E32, _ROUNDER as _ROUNDER32,
                               _ROUNDER_BITS as _ROUNDER32_BITS, _Q0 as _EQ0, _Q1 as _EQ1,
                               _Q2 as _EQ2, _Q3 as _EQ3, _Q4 as _EQ4)

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


@scalar_helper
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


@scalar_helper
def _log_parts(d):
    """``(e, s, z)`` for a positive, finite, normal float64 ``d = m 2**e`` with ``m`` in
    ``[sqrt(1/2), sqrt(2))`` (from the bits): ``log d = e ln 2 + 2 atanh(s)``, ``s = (m-1)/(m+1)``
    (|s| <= 0.172) and ``z = s**2``. Near 1, ``e`` is 0 and nothing cancels."""
    b = bitcast(d, np.int64(0))
    e = (b >> np.int64(52)) - np.int64(1023)
    m = bitcast((b & _MANTISSA) | _ONE_BITS, 0.0)          # in [1, 2)
    high = m > _SQRT2
    m = m * 0.5 if high else m
    e = e + np.int64(1) if high else e
    f = m - 1.0
    s = f / (2.0 + f)
    return np.float64(e), s, s * s


# log in float32 arithmetic (16 lanes): log(1 + f) = f - f**2/2 + s (f**2/2 + R(s**2)) with
# s = f / (2 + f) and R Taylor's series of 2 atanh(s)/s - 2 (to s**10: truncation below 4e-9
# relative), so the leading term f is exact and the corrections are small; k ln 2 in two parts
_R1, _R2, _R3, _R4, _R5 = _F(2 / 3), _F(2 / 5), _F(2 / 7), _F(2 / 9), _F(2 / 11)
_LN2_HI32, _LN2_LO32 = _F(0.693359375), _F(-2.12194440e-4)   # the high part has 9 bits
_SQRT2_32, _TWO23, _TINY32 = _F(1.4142135), _F(8388608.0), _F(1.17549435e-38)


@scalar_helper
def log_f32(x):
    """``log`` of a float32 in float32 arithmetic, within 0.83 ulp (JAX's: 0.96).

    ``x = m 2**k`` with ``m`` in ``[sqrt(1/2), sqrt(2))`` (subnormals scaled by 2**23 first),
    ``f = m - 1`` exact, then ``k ln2 + f - h + s (h + R)`` with ``h = f**2 / 2``. 0 -> -inf,
    negative -> NaN, inf and NaN unchanged.
    """
    sub = x < _TINY32
    ix = bitcast(x * _TWO23 if sub else x, np.int32(0))
    k = (ix >> np.int32(23)) - np.int32(127)
    k = k - np.int32(23) if sub else k
    m = bitcast(np.int32((ix & np.int32(0x7FFFFF)) | np.int32(0x3F800000)), _F(0))
    high = m > _SQRT2_32
    m = m * _F(0.5) if high else m
    k = k + np.int32(1) if high else k
    f = m - _F(1)
    s = f / (_F(2) + f)
    z = s * s
    r = z * fma32(fma32(fma32(fma32(_R5, z, _R4), z, _R3), z, _R2), z, _R1)
    h = _F(0.5) * f * f
    fk = _F(k)
    v = fk * _LN2_HI32 - ((h - fma32(s, h + r, fk * _LN2_LO32)) - f)
    v = v if x < _INF32 else x                             # inf and NaN unchanged
    v = -_INF32 if x == 0 else v
    return _NAN32 if x < 0 else v


@scalar_helper
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


# erfc in float32 arithmetic (16 lanes), for a = |x|: erfc(a) = exp(-a**2) v H(u) with v = 1/(a+2),
# u = (a-2)/(a+2) = 1 - 4v and H(u) = erfcx(a) (a+2) in [0.67, 2], fitted on [0, 10.1] (relative
# 3.4e-9; the two leading coefficients in two float32 parts); erfc(-a) = 2 - erfc(a). Each
# rounding that would show is carried on as a low part (below), so the result rounds once.
_H0, _H0_LO, _H1, _H1_LO = (_F(1.0215827226638794), _F(-1.3981986235478416e-08),
                            _F(-0.6871606707572937), _F(-2.6285949417115262e-08))
_H2, _H3, _H4 = _F(0.2794717848300934), _F(-0.03644178435206413), _F(-0.021505720913410187)
_H5, _H6, _H7 = _F(0.006475882139056921), _F(0.003062603995203972), _F(-0.0008320712950080633)
_H8, _H9, _H10 = _F(-0.000592562835663557), _F(4.6947418013587594e-05), _F(6.94847185513936e-05)
_ERFC_K, _ERFC_4K = _F(2.0), _F(4.0)
_ERFC_MAX = _F(10.1)    # erfc(10.1) < 2**-150: float32's erfc is 0 from 10.06 on
_TWO32, _HALF32 = _F(2.0), _F(0.5)


@scalar_helper
def erfc_f32(x):
    """``1 - erf(x)`` of a float32 in float32 arithmetic, within 1.06 ulp (relative also where the
    result is tiny; subnormal results within 2**-149; JAX's float32 ``erfc`` underflows early,
    millions of ulps off). NaN unchanged, ±inf -> 0 and 2.

    ``a = |x|`` (clamped to 10.1), ``erfc(a) = 2**n exp(r) v H(u)`` and ``2 - erfc(a)`` for
    ``x < 0``. The pieces keep low parts: ``a**2 = hi + lo`` exactly (fma), ``r = -hi - n ln2 -
    lo`` as ``r + r_lo``; ``1/(a+2) = v (1 + eps)`` (``a + 2``'s rounding error and the
    division's residual, both exact); ``u``'s rounding; the last two Horner steps of ``H`` (their
    residuals are exact: each sum stays within a factor 2 of its constant) and ``H``'s error
    from ``u``'s (by ``H'`` ~ ``p1 + u p2``); ``v H`` (fma). The small parts are summed first,
    ``v H`` (times ``exp(r)``, expanded) last, so that rounding is the only one of full size.
    """
    a = min(abs(x), _ERFC_MAX)
    hi = a * a
    lo = fma32(a, a, -hi)
    # exp(-hi - lo) = 2**n exp(r + r_lo), |r| <= ln2/2: as exp_f32, n ln2 in two parts
    t = fma32(-hi, _LOG2E32, _ROUNDER32)
    n = t - _ROUNDER32
    ni = bitcast(t, np.int32(0)) - _ROUNDER32_BITS
    r1 = fma32(-n, _LN2_HI32, -hi)                            # exact (n has 8 bits, ln2_hi 9)
    s = fma32(n, _LN2_LO32, lo)
    r = r1 - s
    r_lo = (r1 - r) - s
    z = r * r
    q = fma32(fma32(fma32(fma32(_EQ4, r, _EQ3), r, _EQ2), r, _EQ1), r, _EQ0)
    em1 = fma32(z, q, r)                                      # exp(r) - 1
    # 1/(a+2) = v (1 + eps): d + dd = a + 2 exactly (Fast2Sum), 1 - v d exactly (fma)
    d = a + _ERFC_K
    dd = min(a, _ERFC_K) - (d - max(a, _ERFC_K))
    v = _ONE32 / d
    eps = fma32(-dd, v, fma32(-v, d, _ONE32))
    w = _ERFC_4K * v                                          # exact
    u = _ONE32 - w
    u_lo = fma32(-w, eps, (_ONE32 - u) - w)
    p2 = fma32(fma32(fma32(fma32(_H10, u, _H9), u, _H8), u, _H7), u, _H6)
    p2 = fma32(fma32(fma32(fma32(p2, u, _H5), u, _H4), u, _H3), u, _H2)
    p1 = fma32(u, p2, _H1)
    p1_lo = fma32(u, p2, _H1 - p1) + _H1_LO
    h = fma32(u, p1, _H0)
    h_lo = fma32(u, p1, _H0 - h) + fma32(u, p1_lo, fma32(fma32(u, p2, p1), u_lo, _H0_LO))
    # v (h + h_lo) (1 + eps) (1 + em1) = prod + [prod r + prod (z q + r_lo) + small (1 + em1)]
    prod = v * h
    small = fma32(prod, eps, fma32(v, h_lo, fma32(v, h, -prod)))
    m = prod + fma32(prod, r, fma32(prod, fma32(z, q, r_lo), fma32(small, em1, small)))
    # 2**n: m * 2**e1 by the exponent field (stays normal), then one multiply that rounds once
    # where the result is subnormal
    e1 = max(ni, np.int32(-100))
    scaled = bitcast(np.int32(bitcast(m, np.int32(0)) + (e1 << np.int32(23))), m)
    pos = scaled * bitcast(np.int32((ni - e1 + np.int32(127)) << np.int32(23)), m)
    res = pos if x >= 0 else _TWO32 - pos
    return x if x != x else res


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


@scalar_helper
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


# ---------------------------------------------------------------- sin, cos

def _two_over_pi(bits: int) -> int:
    """``floor(2/pi * 2**bits)``: pi by Machin's formula in integer arithmetic, 64 guard bits."""
    guard = bits + 64
    one = 1 << guard

    def arctan_inverse(n: int) -> int:  # arctan(1/n) * 2**guard
        total, power, k = 0, one // n, 1
        while power:
            total += power // k if k % 4 == 1 else -(power // k)
            power //= n * n
            k += 2
        return total
    pi = 16 * arctan_inverse(5) - 4 * arctan_inverse(239)
    return (2 * one << bits) // pi


def _reduction_tables():
    """For each float32 exponent field ``e8``, ``V = 2**E * 2/pi mod 4`` (``x = M 2**E`` with an
    integer 24-bit ``M``) as four chunks of 24 bits each, the first starting at ``V``'s leading
    bit or at 2**1, whichever is lower: ``M * chunk`` is exact in float64."""
    scale = 460                            # bits of 2/pi below the point (E reaches -149 and 104)
    two_over_pi = _two_over_pi(scale)
    tables = np.zeros((4, 256))
    for e8 in range(256):
        e = max(e8, 1) - 150
        v = (two_over_pi << e if e >= 0 else two_over_pi >> -e) % (4 << scale)
        top = min(1, v.bit_length() - 1 - scale)
        for i in range(4):
            low = top - 24 * (i + 1) + 1   # the weight of the chunk's lowest bit
            shift = scale + low
            tables[i, e8] = float((v >> shift) & 0xFFFFFF) * 2.0 ** low
    return [constant_table(t, f"plax_numba_two_over_pi_{i}") for i, t in enumerate(tables)]


_V0, _V1, _V2, _V3 = _reduction_tables()
_PIO2 = 1.5707963267948966


@scalar_helper
def _quadrant(x):
    """``(q, r)`` with ``|x| = (4j + q) pi/2 + r``, ``|r| <= pi/4`` in float64 (absolute error
    below 2**-70: Payne and Hanek's reduction, exact for every float32 whatever its size).

    ``|x| 2/pi mod 4`` is ``M * V`` (see :func:`_reduction_tables`): the first chunk's product,
    reduced mod 4, and the second's are exact and sum exactly; the remaining two are added
    after the nearest integer is taken away, so a result near a multiple of pi/2 keeps its
    relative precision."""
    b = bitcast(x, np.int32(0))
    e8 = (b >> np.int32(23)) & np.int32(0xFF)
    m = b & np.int32(0x7FFFFF)
    mant = np.float64(m | np.int32(0x800000) if e8 > 0 else m)
    t0 = mant * _V0(e8)
    t0 = t0 - 4.0 * ((t0 * 0.25 + _ROUNDER) - _ROUNDER)     # mod 4, exact
    s = t0 + mant * _V1(e8)
    t = s + _ROUNDER
    k = t - _ROUNDER                                          # the nearest integer
    f = (s - k) + (mant * _V2(e8) + mant * _V3(e8))
    return bitcast(t, np.int64(0)) & np.int64(3), f * _PIO2


@scalar_helper
def _sin_cos(r):
    """``(sin r, cos r)`` for ``|r| <= pi/4`` in float64, Taylor's series to ``r**11`` and
    ``r**12`` (truncation below 7e-12 relative)."""
    z = r * r
    s = fma(fma(fma(fma(-1 / 39916800, z, 1 / 362880), z, -1 / 5040), z, 1 / 120), z, -1 / 6)
    c = fma(fma(fma(fma(1 / 479001600, z, -1 / 3628800), z, 1 / 40320), z, -1 / 720), z, 1 / 24)
    return fma(r * z, s, r), fma(z * z, c, 1.0 - 0.5 * z)


@scalar_helper
def sin_f32(x):
    """``sin`` of a float32, 0.5 ulp after the final rounding for every float32 (exact
    argument reduction, :func:`_quadrant`). ±0 unchanged, inf and NaN give NaN."""
    q, r = _quadrant(x)
    s, c = _sin_cos(r)
    v = c if q & 1 else s
    v = -v if (q & 2) != (x < 0) * 2 else v                  # the quadrant's sign, x's sign
    return (_F(v) if x != 0 else x) if abs(x) < _INF32 else x - x


@scalar_helper
def cos_f32(x):
    """``cos`` of a float32, 0.5 ulp after the final rounding for every float32 (see
    :func:`sin_f32`). inf and NaN give NaN."""
    q, r = _quadrant(x)
    s, c = _sin_cos(r)
    v = s if q & 1 else c
    v = -v if (q + 1) & 2 else v
    return _F(v) if abs(x) < _INF32 else x - x


# ---------------------------------------------------------------- erf_inv

# erfinv in float32 arithmetic (16 lanes), with w = -log(1 - y**2) (Giles' variable):
# erfinv(y) / y as a polynomial in w - 2.5 for w < 5 (relative 5.6e-9), erfinv(y) itself in
# sqrt(w) - 3.25 above (9.5e-10; w <= 15.95 for float32's |y| < 1); the two leading coefficients
# of each in two float32 parts. 3.25 and 2.5 are exact in float32, so the shifts are exact.
_G0, _G0_LO, _G1, _G1_LO = (_F(1.5014094114303589), _F(-5.2144596196512794e-08),
                            _F(0.24664027988910675), _F(6.235558736022995e-09))
_G2, _G3, _G4 = _F(-0.004177386872470379), _F(-0.0012527417857199907), _F(0.0002183444594265893)
_G5, _G6, _G7 = _F(-4.963386345480103e-06), _F(-3.4627087188709993e-06), _F(4.661791024318518e-07)
_G8, _G9 = _F(2.3232969326159036e-08), _F(-8.791668726360058e-09)
_T0, _T0_LO, _T1, _T1_LO = (_F(3.083845615386963), _F(1.0509062775554412e-07),
                            _F(1.0055052042007446), _F(1.622429124381597e-08))
_T2, _T3, _T4 = _F(0.004652758128941059), _F(-0.002445555292069912), _F(0.000854738347698003)
_T5, _T6, _T7 = _F(-0.00022421528410632163), _F(2.772263906081207e-05), _F(2.2624626581091434e-05)
_T8 = _F(-1.7051757822628133e-05)
_IA, _IB = _F(0.3340492844581604), _F(-0.053562816232442856)   # 1/(2s) within 4.2%
_W_MID, _W_SPLIT, _S_MID = _F(2.5), _F(5.0), _F(3.25)


@scalar_helper
def erf_inv_f32(y):
    """The inverse of ``erf`` for a float32 in float32 arithmetic, within 0.79 ulp (0.87 in
    units of 2**-149 for subnormal results; JAX's float32 ``erf_inv`` is 64 ulps off near ±1).
    ±1 -> ±inf, |y| > 1 and NaN -> NaN, ±0 unchanged.

    ``u = 1 - y**2`` by one fma, ``w = -log(u)`` as ``w + w_lo`` (the steps of :func:`log_f32`
    summed largest last, Fast2Sum's exact errors kept), then ``y g(w)`` for ``w < 5`` and
    ``±G(sqrt(w))`` above. The polynomial's argument keeps its low part too (``w_lo``, and the
    square root's exact residual by fma over ``2 sqrt(w)``), applied through the derivative
    (~ ``p1 + t p2``); the last two Horner steps carry their exact residuals, and ``y g`` its
    fma residual, so the result rounds once at full size. ``u``'s own rounding costs 0.1 ulp at
    most (``erfinv``'s relative change with ``w`` is below 0.26): not corrected.
    """
    a = abs(y)
    u = fma32(-a, a, _ONE32)
    # log(u) = k ln2 + log(1 + f) = k ln2_hi + (f - h) + (s (h + R) + k ln2_lo), as log_f32
    ix = bitcast(u, np.int32(0))
    k = (ix >> np.int32(23)) - np.int32(127)
    m = bitcast(np.int32((ix & np.int32(0x7FFFFF)) | np.int32(0x3F800000)), _F(0))
    high = m > _SQRT2_32
    m = m * _HALF32 if high else m
    k = k + np.int32(1) if high else k
    f = m - _ONE32
    s = f / (_TWO32 + f)
    z = s * s
    rr = z * fma32(fma32(fma32(fma32(_R5, z, _R4), z, _R3), z, _R2), z, _R1)
    h = _HALF32 * f * f
    fk = _F(k)
    ah = fk * _LN2_HI32                                       # exact
    b = f - h
    sm = ah + b                                               # |ah| >= |b| unless ah = 0
    c = ((ah - sm) + b) + fma32(s, h + rr, fk * _LN2_LO32)
    lw = sm + c                                               # |sm| >= |c|
    w = -lw
    w_lo = (lw - sm) - c                                      # w + w_lo = -log(u)
    # w < 5: y g(w) in v = w - 2.5, v_lo its rounding (below 1.25) and w_lo
    v = w - _W_MID
    v_lo = (w - (v + _W_MID)) + w_lo
    p2 = fma32(fma32(fma32(fma32(fma32(fma32(fma32(_G9, v, _G8), v, _G7), v, _G6), v, _G5), v,
                             _G4), v, _G3), v, _G2)
    p1 = fma32(v, p2, _G1)
    p1_lo = fma32(v, p2, _G1 - p1) + _G1_LO
    g = fma32(v, p1, _G0)
    g_lo = fma32(v, p1, _G0 - g) + fma32(v, p1_lo, fma32(fma32(v, p2, p1), v_lo, _G0_LO))
    prod = y * g
    near = prod + fma32(y, g_lo, fma32(y, g, -prod))
    near = prod if y == 0 else near                           # -0 (the sum would give +0)
    # w >= 5: G(sq) in t = sq - 3.25 (exact), sq + sq_lo = sqrt(w + w_lo)
    sq = np.sqrt(max(w, _W_SPLIT))
    sq_lo = (fma32(-sq, sq, w) + w_lo) * fma32(_IB, sq, _IA)
    t = sq - _S_MID
    q2 = fma32(fma32(fma32(fma32(fma32(fma32(_T8, t, _T7), t, _T6), t, _T5), t, _T4), t, _T3), t,
               _T2)
    q1 = fma32(t, q2, _T1)
    q1_lo = fma32(t, q2, _T1 - q1) + _T1_LO
    gg = fma32(t, q1, _T0)
    far = gg + (fma32(t, q1, _T0 - gg) + fma32(t, q1_lo, fma32(fma32(t, q2, q1), sq_lo, _T0_LO)))
    far = far if y > 0 else -far
    r = near if w < _W_SPLIT else far
    r = (_INF32 if y > 0 else -_INF32) if a == _ONE32 else r
    return r if a <= _ONE32 else _NAN32                    # NaN fails the test too


# ---------------------------------------------------------------- lgamma, digamma

@scalar_helper
def _log_full(d):
    """``log(d)`` to float64's precision (a few ulps; see :func:`_log_parts`): the series to
    ``s**21`` and ``e ln 2`` in two parts."""
    e, s, z = _log_parts(d)
    p = fma(fma(fma(fma(fma(2 / 21, z, 2 / 19), z, 2 / 17), z, 2 / 15), z, 2 / 13), z, 2 / 11)
    p = fma(fma(fma(fma(fma(p, z, 2 / 9), z, 2 / 7), z, 2 / 5), z, 2 / 3), z, 2.0)
    return fma(e, _LN2_HI, fma(s, p, e * _LN2_LO))


@scalar_helper
def _sin_cos_pi(d):
    """``(sin(pi d), cos(pi d))`` in float64 for a float64 ``d`` holding a float32 (``d -
    round(d)`` is exact), reduced to a quarter period for :func:`_sin_cos`."""
    r = d - ((d + _ROUNDER) - _ROUNDER)                     # in [-1/2, 1/2]
    a = abs(r)
    t = 0.5 - a                                             # exact
    s1, c1 = _sin_cos(np.pi * a)
    s2, c2 = _sin_cos(np.pi * t)
    near = a <= 0.25
    s = s1 if near else c2
    c = c1 if near else s2
    n = bitcast((d + _ROUNDER), np.int64(0)) & np.int64(1)  # odd integer part: both negate
    s = -s if r < 0 else s
    s = -s if n else s
    c = -c if n else c
    return s, c


_HALF_LOG_2PI = 0.9189385332046728


@scalar_helper
def _shifted(x):
    """``(y, D, N)`` for ``x >= 0``: ``y = x + 8`` and ``D = x (x+1) ... (x+7)``, ``N = D'``
    (so ``N / D = sum 1/(x+k)``) where ``x < 8``; ``y = x`` and ``D = N = 1`` otherwise."""
    small = x < 8.0
    xs = x if small else 1.0
    den, num = xs, 1.0
    for k in range(1, 8):
        num = fma(num, xs + k, den)
        den = den * (xs + k)
    return (x + 8.0 if small else x), (den if small else 1.0), (num if small else 0.0)


@scalar_helper
def lgamma_f32(x):
    """``log |gamma(x)|`` of a float32 in float64 arithmetic: Stirling's series at ``y >= 8``
    (``x`` shifted up by eight and the product divided out), the reflection formula below 0.
    0.5 ulp after the final rounding except within ~3e-7 of the zeros at 1 and 2, where the
    shift cancels and the absolute error stays below 1e-13 (JAX's float32 ``lgamma`` is
    millions of ulps off there; 1 and 2 themselves give 0). Poles and ±inf -> inf, NaN
    unchanged."""
    d = np.float64(x)
    neg = d < 0.0
    xr = 1.0 - d if neg else d
    y, den, _ = _shifted(xr)
    w = 1.0 / (y * y)
    series = fma(fma(fma(fma(fma(fma(1 / 156, w, -691 / 360360), w, 1 / 1188), w, -1 / 1680), w,
                         1 / 1260), w, -1 / 360), w, 1 / 12) / y
    lg = fma(y - 0.5, _log_full(y), _HALF_LOG_2PI - y) + series - _log_full(den)
    s, _ = _sin_cos_pi(d)
    reflected = _log_full(np.pi / max(abs(s), 1e-300)) - lg
    r = _F(reflected if neg else lg)
    pole = neg and d == np.floor(d) or x == 0
    r = _INF32 if pole or abs(x) == _INF32 else r
    r = _F(0.0) if d == 1.0 or d == 2.0 else r             # exact zeros the shift would blur
    return x if x != x else r


@scalar_helper
def digamma_f32(x):
    """``psi(x) = gamma'(x) / gamma(x)`` of a float32 in float64 arithmetic: the asymptotic
    series at ``y >= 8`` less ``sum 1/(x+k)`` (one division), the reflection formula below 0.
    0.5 ulp after the final rounding except within ~1e-7 of the positive zero 1.4616..., where
    the absolute error stays below 1e-14. NaN at the poles (0, -1, ...; XLA's convention) and
    at -inf; inf -> inf."""
    d = np.float64(x)
    neg = d < 0.0
    xr = 1.0 - d if neg else d
    y, den, num = _shifted(xr)
    w = 1.0 / (y * y)
    series = fma(fma(fma(fma(fma(fma(-1 / 12, w, 691 / 32760), w, -1 / 132), w, 1 / 240), w,
                         -1 / 252), w, 1 / 120), w, -1 / 12) * w
    psi = (_log_full(y) - 0.5 / y + series) - num / den
    s, c = _sin_cos_pi(d)
    r = _F(psi - np.pi * c / s if neg else psi)
    pole = d <= 0.0 and d == np.floor(d)
    r = _NAN32 if pole else r
    r = x if x == _INF32 else r
    return x if x != x else r


# What kernels over few elements call (plax_numba.codegen.INLINE_FROM): inlined, each form
# costs LLVM 0.2-2.5 CPU s per kernel (lgamma and digamma the most) that a small kernel never
# repays; called, it is one instruction per use and the same bits (plax_numba.compiled_once).
_UNARY32 = "float32(float32)"
log_f32_once = twin(log_f32, _UNARY32, __name__)
sin_f32_once = twin(sin_f32, _UNARY32, __name__)
cos_f32_once = twin(cos_f32, _UNARY32, __name__)
expm1_f32_once = twin(expm1_f32, _UNARY32, __name__)
erf_f32_once = twin(erf_f32, _UNARY32, __name__)
erfc_f32_once = twin(erfc_f32, _UNARY32, __name__)
erf_inv_f32_once = twin(erf_inv_f32, _UNARY32, __name__)
lgamma_f32_once = twin(lgamma_f32, _UNARY32, __name__)
digamma_f32_once = twin(digamma_f32, _UNARY32, __name__)
