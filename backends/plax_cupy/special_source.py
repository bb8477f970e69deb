"""CUDA C++ forms of the functions generated kernels call that CUDA's math library lacks:
complex ``asin``, ``acos``, ``atan``, ``asinh``, ``acosh``, ``atanh``; ``bessel_i0e`` and
``bessel_i1e``; ``digamma``; the incomplete gamma family (``igamma``, ``igammac``,
``igamma_grad_a``, ``random_gamma_grad``), ``zeta``, ``polygamma`` and ``betainc``; and
``logaddexp`` as NumPy computes it (``cumlogsumexp``'s combine in the row kernels and in the
one-kernel scan).

Each form is a snippet of device functions, included in a kernel's translation unit only
where the kernel calls it (:func:`helpers_for`, after :data:`plax_cupy.codegen.PREAMBLE`), and
guarded by ``#ifndef`` so that units holding several kernels (the tests batch hundreds into one)
define it once. Like the preamble, the snippets build with NVRTC and, under ``PLAX_HOST`` /
``PLAX_SIM``, with the host C++ compiler. This module never imports CuPy (or Numba).

**Complex inverse functions** (templates over ``float`` and ``double``: complex64 computes in
float, as XLA does). ``asin`` and ``acos`` follow Hull, Fairgrieve and Tang (ACM TOMS 23, 1997):
with ``R = |z + 1|``, ``S = |z - 1|``, ``A = (R + S) / 2`` and ``B = x / A`` (``x, y >= 0`` by
symmetry), the real part is ``asin(B)`` / ``acos(B)`` while ``B`` is at most 0.6417, else an
``atan`` of a ratio formed without cancellation; the imaginary part is ``log1p`` of ``A - 1``
(formed without cancellation) while ``A <= 1.5``, else ``log(A + sqrt(A^2 - 1))``. Next to the
real segment ``[-1, 1]`` (``y`` below ``sqrt(eps) (1 - x)``) the first-order forms ``asin x``,
``y / sqrt(1 - x^2)`` keep the imaginary part when ``y^2`` underflows; beyond ``1 / eps``,
``asin z = -i log(2 i z)`` to rounding (no overflow: ``log |z|`` from the larger part). ``asinh``
and ``acosh`` are the same computation rotated (``asinh z = i asin(-i z)``,
``acosh z = +-i acos z``). ``atanh`` is Kahan's: real part ``log1p(4x / ((1 - x)^2 + y^2)) / 4``
(through logarithms where the denominator is below ``eps``), imaginary part
``atan2(2y, (1 - x)(1 + x) - y^2) / 2``, and ``1/z + i pi/2`` beyond ``1 / eps``; ``atan z =
-i atanh(i z)``. Branch cuts, signed zeros and the values at infinite and NaN parts are
NumPy's (C99 Annex G where it specifies them, NumPy's choice where C99 leaves a sign open),
as plax's reference kernels give them; XLA's differ at some signed zeros and NaN parts.

**Bessel functions** ``exp(-|x|) I_nu(x)``, nu = 0, 1, in double (a float argument widened, the
result rounded once): the power series ``(x/2)^nu sum_k (x^2/4)^k / (k! (k+nu)!)`` below a split
(22 for double, 12 for float; every term positive), Hankel's asymptotic expansion
``(2 pi x)^-1/2 sum_k (-1)^k a_k(nu) / x^k`` above it; Horner's rule over coefficients computed
exactly (``plax.lax.bessel_series``, shared with the Numba backend). The algorithm of the
Numba backend's scalar forms (``plax_numba.special``), written for CUDA.

**digamma** in double: reflection ``psi(x) = psi(1 - x) - pi / tan(pi (x - round x))`` below 0,
the recurrence ``psi(y) = psi(y + 1) - 1/y`` lifting ``y`` to 10, then the asymptotic series
``log y - 1/(2y) - sum_k B_2k / (2k y^2k)``. A float argument from 4 on takes the series
directly in single precision (psi > 1.25 there, nothing cancels: at most 2.1 ulps from SciPy's
float64 value on the host build, CUDA's ``logf`` adding up to about one); below 4 it is widened
and the double result rounded once (psi's zeros make single precision lose its accuracy there).
NaN at the poles (0, -1, -2, ...: XLA's convention), at -inf and for NaN; +inf at +inf.

The scaled Bessel functions stay in double for float arguments: a single-precision form (the
same expansions, ``expf``) measured 3.5 ulps on the host build inside the series' range and
8 next to the split, before CUDA's ``expf`` (2 ulps) adds its share.

**The iterative functions** are the algorithms of the Numba backend's scalar forms
(``plax_numba.special_gamma``, ``special_zeta``, ``special_beta``: Cephes' series and continued
fractions, Temme's prefactor and uniform expansion, the Euler-Maclaurin tail of Hurwitz's zeta,
the derivative recurrences of JAX's ``random_gamma_grad``), with their tables and iteration
limits from :mod:`plax.lax.special_series`, in double; a float argument (float32, a half type's
float value) is widened, iterated to float32's tolerance (2^-40) and rounded once. Measured on
the host build against the NumPy backend's float64 kernels over the Numba forms' sweeps
(tests/cupy/test_codegen_special_iterative.py): float32 within half an ulp (the gamma
derivatives within the float32 convention where the prefactor underflows), float64 within the
Numba forms' bounds; edge values the NumPy backend's (SciPy's conventions).
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

import numpy as np

from plax.lax import special_series
from plax.lax.bessel_series import hankel_coefficients, series_coefficients

__all__ = ["BESSEL_SOURCE", "BETA_SOURCE", "COMPLEX_INVERSE_SOURCE", "DIGAMMA_SOURCE",
           "IGAMMA_SOURCE", "LOGADDEXP_SOURCE", "SPECIAL_COMMON_SOURCE", "ZETA_SOURCE", "helpers_for"]


COMPLEX_INVERSE_SOURCE = r"""#ifndef PLAX_COMPLEX_INVERSE
#define PLAX_COMPLEX_INVERSE
// ---- complex asin, acos, atan, asinh, acosh, atanh (plax_cupy/special_source.py)
#if defined(PLAX_HOST) || defined(PLAX_SIM)
using std::log1p; using std::atan; using std::asin; using std::acos;
#endif
__device__ __forceinline__ float plax_ci_eps(float) { return 0x1p-23f; }
__device__ __forceinline__ double plax_ci_eps(double) { return 0x1p-52; }
__device__ __forceinline__ float plax_ci_inf(float) { return plax_bitcast<float>(0x7f800000u); }
__device__ __forceinline__ double plax_ci_inf(double) { return plax_bitcast<double>(0x7ff0000000000000ull); }
#define PLAX_CI_PI(T) ((T)3.14159265358979323846264338327950288)
#define PLAX_CI_PI_2(T) ((T)1.57079632679489661923132169163975144)
#define PLAX_CI_PI_4(T) ((T)0.785398163397448309615660845819875721)
#define PLAX_CI_LN2(T) ((T)0.693147180559945309417232121458176568)
// log(hypot(x, y)) of x, y >= 0 without overflow
template <typename T> __device__ __forceinline__ T plax_ci_log_hypot(T x, T y) {
  const T m = x > y ? x : y, s = x > y ? y : x;
  if (m == (T)0) return log(m);
  const T r = s / m;
  return log(m) + (T)0.5 * log1p(r * r);
}
// asin and acos of x + iy, x and y finite and >= 0 (Hull, Fairgrieve & Tang): the real parts
// of asin and acos and the imaginary part's magnitude (the same for both)
template <typename T> __device__ void plax_casin_core(T x, T y, T* re_asin, T* re_acos, T* im) {
  const T one = (T)1, half = (T)0.5, eps = plax_ci_eps(x);
  if (x > one / eps || y > one / eps) {  // asin z = -i log(2iz) to rounding
    *re_asin = atan2(x, y);
    *re_acos = atan2(y, x);
    *im = PLAX_CI_LN2(T) + plax_ci_log_hypot(x, y);
    return;
  }
  if (x < one && y < sqrt(eps) * (one - x)) {  // next to the real segment: first order in y
    *re_asin = asin(x);
    *re_acos = acos(x);
    *im = y / sqrt((one - x) * (one + x));
    return;
  }
  const T r = hypot(x + one, y), s = hypot(x - one, y), a = half * (r + s), b = x / a;
  const T y2 = y * y;
  if (b <= (T)0.6417) {
    *re_asin = asin(b);
    *re_acos = acos(b);
  } else if (x <= one) {
    const T d = sqrt(half * (a + x) * (y2 / (r + (x + one)) + (s + (one - x))));
    *re_asin = atan(x / d);
    *re_acos = atan(d / x);
  } else {
    const T apx = a + x;
    const T d = y * sqrt(half * (apx / (r + (x + one)) + apx / (s + (x - one))));
    *re_asin = atan(x / d);
    *re_acos = atan(d / x);
  }
  if (a <= (T)1.5) {  // A - 1 = t / 2 without cancellation (halved last: t may be subnormal)
    const T t = x < one ? y2 / (r + (x + one)) + y2 / (s + (one - x))
                        : y2 / (r + (x + one)) + (s + (x - one));
    *im = log1p(half * t + sqrt(t * (a + one) * half));
  } else {
    *im = log(a + sqrt((a - one) * (a + one)));
  }
}
template <typename T> __device__ __forceinline__ bool plax_ci_finite(plax_complex<T> z) {
  return isfinite(z.re) && isfinite(z.im);
}
template <typename T> __device__ plax_complex<T> plax_casin(plax_complex<T> z) {
  const T x = z.re, y = z.im, nan = plax_qnan(x), inf = plax_ci_inf(x);
  if (!plax_ci_finite(z)) {
    if (isinf(y)) return plax_cplx<T>(x != x ? nan : (isinf(x) ? copysign(PLAX_CI_PI_4(T), x) : copysign((T)0, x)), y);
    if (isinf(x)) return y != y ? plax_cplx<T>(nan, inf) : plax_cplx<T>(copysign(PLAX_CI_PI_2(T), x), copysign(inf, y));
    if (y != y && x == (T)0) return plax_cplx<T>(x, nan);
    return plax_cplx<T>(nan, nan);
  }
  T re_asin, re_acos, im;
  plax_casin_core(fabs(x), fabs(y), &re_asin, &re_acos, &im);
  return plax_cplx<T>(copysign(re_asin, x), copysign(im, y));
}
template <typename T> __device__ plax_complex<T> plax_cacos(plax_complex<T> z) {
  const T x = z.re, y = z.im, nan = plax_qnan(x), inf = plax_ci_inf(x);
  if (!plax_ci_finite(z)) {
    if (isinf(y)) {
      if (x != x) return plax_cplx<T>(nan, -y);
      if (isinf(x)) return plax_cplx<T>(x > (T)0 ? PLAX_CI_PI_4(T) : (T)3 * PLAX_CI_PI_4(T), -y);
      return plax_cplx<T>(PLAX_CI_PI_2(T), -y);
    }
    if (isinf(x)) {
      if (y != y) return plax_cplx<T>(nan, -inf);
      return plax_cplx<T>(x > (T)0 ? (T)0 : PLAX_CI_PI(T), -copysign(inf, y));
    }
    if (y != y && x == (T)0) return plax_cplx<T>(PLAX_CI_PI_2(T), nan);
    return plax_cplx<T>(nan, nan);
  }
  T re_asin, re_acos, im;
  plax_casin_core(fabs(x), fabs(y), &re_asin, &re_acos, &im);
  return plax_cplx<T>(copysign((T)1, x) < (T)0 ? PLAX_CI_PI(T) - re_acos : re_acos, -copysign(im, y));
}
template <typename T> __device__ plax_complex<T> plax_casinh(plax_complex<T> z) {
  const T x = z.re, y = z.im, nan = plax_qnan(x), inf = plax_ci_inf(x);
  if (!plax_ci_finite(z)) {
    if (isinf(x)) return plax_cplx<T>(x, y != y ? nan : (isinf(y) ? copysign(PLAX_CI_PI_4(T), y) : copysign((T)0, y)));
    if (isinf(y)) return x != x ? plax_cplx<T>(inf, nan) : plax_cplx<T>(copysign(inf, x), copysign(PLAX_CI_PI_2(T), y));
    if (x != x && y == (T)0) return plax_cplx<T>(nan, y);
    return plax_cplx<T>(nan, nan);
  }
  T re_asin, re_acos, im;  // asinh(x + iy) = i asin(y - ix): asin's parts, rotated
  plax_casin_core(fabs(y), fabs(x), &re_asin, &re_acos, &im);
  return plax_cplx<T>(copysign(im, x), copysign(re_asin, y));
}
template <typename T> __device__ plax_complex<T> plax_cacosh(plax_complex<T> z) {
  const T x = z.re, y = z.im, nan = plax_qnan(x), inf = plax_ci_inf(x);
  if (!plax_ci_finite(z)) {
    if (isinf(y)) {
      if (x != x) return plax_cplx<T>(inf, nan);
      if (isinf(x)) return plax_cplx<T>(inf, copysign(x > (T)0 ? PLAX_CI_PI_4(T) : (T)3 * PLAX_CI_PI_4(T), y));
      return plax_cplx<T>(inf, copysign(PLAX_CI_PI_2(T), y));
    }
    if (isinf(x)) {
      if (y != y) return plax_cplx<T>(inf, nan);
      return plax_cplx<T>(inf, copysign(x > (T)0 ? (T)0 : PLAX_CI_PI(T), y));
    }
    if (y != y && x == (T)0) return plax_cplx<T>(nan, PLAX_CI_PI_2(T));
    return plax_cplx<T>(nan, nan);
  }
  const plax_complex<T> w = plax_cacos(z);  // acosh z = +-i acos z, with a real part >= 0
  return plax_cplx<T>(fabs(w.im), copysign(w.re, y));
}
// atanh of x + iy, x and y finite and >= 0 (Kahan)
template <typename T> __device__ plax_complex<T> plax_catanh_core(T x, T y) {
  const T one = (T)1, eps = plax_ci_eps(x);
  if (x > one / eps || y > one / eps) {  // 1/z + i pi/2 to rounding; 1/z scaled
    T re;
    if (x >= y) { const T q = y / x; re = (one / x) / (one + q * q); }
    else { const T q = x / y; re = (q / y) / (one + q * q); }
    return plax_cplx<T>(re, PLAX_CI_PI_2(T));
  }
  const T omx = one - x, d = omx * omx + y * y;
  T re;
  if (d < eps) {  // log1p(4x/d) = log(4x/d) to rounding, and d may underflow
    re = (T)0.5 * PLAX_CI_LN2(T) + (T)0.25 * log(x) - (T)0.5 * plax_ci_log_hypot(fabs(omx), y);
  } else {
    re = (T)0.25 * log1p((T)4 * x / d);
  }
  return plax_cplx<T>(re, (T)0.5 * atan2((T)2 * y, omx * (one + x) - y * y));
}
template <typename T> __device__ plax_complex<T> plax_catanh(plax_complex<T> z) {
  const T x = z.re, y = z.im, nan = plax_qnan(x);
  if (!plax_ci_finite(z)) {
    if (isinf(y)) return plax_cplx<T>(x != x ? (T)0 : copysign((T)0, x), copysign(PLAX_CI_PI_2(T), y));
    if (isinf(x)) return plax_cplx<T>(copysign((T)0, x), y != y ? nan : copysign(PLAX_CI_PI_2(T), y));
    if (y != y && x == (T)0) return plax_cplx<T>(x, nan);
    return plax_cplx<T>(nan, nan);
  }
  const plax_complex<T> w = plax_catanh_core(fabs(x), fabs(y));
  return plax_cplx<T>(copysign(w.re, x), copysign(w.im, y));
}
template <typename T> __device__ plax_complex<T> plax_catan(plax_complex<T> z) {
  const T x = z.re, y = z.im, nan = plax_qnan(x);
  if (!plax_ci_finite(z)) {
    if (isinf(y)) return plax_cplx<T>(x != x ? nan : copysign(PLAX_CI_PI_2(T), x), copysign((T)0, y));
    if (isinf(x)) return plax_cplx<T>(copysign(PLAX_CI_PI_2(T), x), y != y ? (T)0 : copysign((T)0, y));
    if (x != x && y == (T)0) return plax_cplx<T>(nan, y);
    return plax_cplx<T>(nan, nan);
  }
  // atan z = -i atanh(iz), iz = -y + ix
  const plax_complex<T> w = plax_catanh_core(fabs(y), fabs(x));
  return plax_cplx<T>(copysign(w.im, x), copysign(w.re, y));
}
#endif
"""


# ---------------------------------------------------------------- Bessel functions

def _horner(name: str, coefficients: list[float]) -> str:
    """A ``__device__`` double function ``name(z)``: the polynomial by Horner's rule with fused
    multiply-adds, unrolled over the exact coefficients (hexadecimal literals)."""
    lines = [f"__device__ __forceinline__ double {name}(double z) {{",
             f"  double r = {coefficients[-1].hex()};"]
    lines += [f"  r = fma(r, z, {c.hex()});" for c in reversed(coefficients[:-1])]
    lines += ["  return r;", "}"]
    return "\n".join(lines)


def _horner_float(name: str, coefficients: list[float]) -> str:
    """As :func:`_horner`, in single precision: ``float`` coefficients (each rounded once from
    the float64 one) and ``fmaf``."""
    c = [float(np.float32(v)).hex() + "f" for v in coefficients]
    lines = [f"__device__ __forceinline__ float {name}(float z) {{", f"  float r = {c[-1]};"]
    lines += [f"  r = fmaf(r, z, {v});" for v in reversed(c[:-1])]
    lines += ["  return r;", "}"]
    return "\n".join(lines)


# (split, series terms, Hankel terms): double -- 60 series terms reach 2^-60 of the sum below
# 22, and Hankel's smallest term (near k = 2|x|) is below 2^-60 from 22 on; float (computed in
# double, rounded once) -- at 12 both reach below 1e-10 relative, far under float's 6e-8
_BESSEL_DOUBLE = (22.0, 60, 30)
_BESSEL_FLOAT = (12.0, 26, 20)


def _bessel_source() -> str:
    polys = []
    for suffix, (_, series, hankel) in (("64", _BESSEL_DOUBLE), ("32", _BESSEL_FLOAT)):
        for nu in (0, 1):
            polys.append(_horner(f"plax_i{nu}_series{suffix}", series_coefficients(nu, series)))
            polys.append(_horner(f"plax_i{nu}_hankel{suffix}", hankel_coefficients(nu, hankel)))
    fns = []
    for suffix, (split, _, _) in (("64", _BESSEL_DOUBLE), ("32", _BESSEL_FLOAT)):
        for nu in (0, 1):
            scale = " * ax" if nu else ""
            fns.append("\n".join([
                f"__device__ __forceinline__ double plax_i{nu}e_{suffix}(double x) {{",
                "  const double ax = fabs(x);",
                "  if (x != x) return x;",
                "  if (isinf(x)) return 0.0;",
                f"  if (ax < {split!r}) return exp(-ax){scale} * plax_i{nu}_series{suffix}(0.25 * ax * ax);",
                f"  return 0.3989422804014327 / sqrt(ax) * plax_i{nu}_hankel{suffix}(1.0 / ax);",
                "}"]))
    api = r"""// exp(-|x|) I0(x): even; exp(-|x|) I1(x): odd (+-0 at +-0 and +-inf); NaN for NaN
__device__ __forceinline__ double plax_bessel_i0e(double x) { return plax_i0e_64(x); }
__device__ __forceinline__ float plax_bessel_i0e(float x) { return (float)plax_i0e_32((double)x); }
__device__ __forceinline__ double plax_bessel_i1e(double x) {
  return x == 0.0 ? x : copysign(plax_i1e_64(x), x);
}
__device__ __forceinline__ float plax_bessel_i1e(float x) {
  return x == 0.0f ? x : copysign((float)plax_i1e_32((double)x), x);
}"""
    return "\n".join(["#ifndef PLAX_BESSEL_IE", "#define PLAX_BESSEL_IE",
                      "// ---- bessel_i0e, bessel_i1e (plax_cupy/special_source.py)",
                      "#if defined(PLAX_HOST) || defined(PLAX_SIM)",
                      "using std::fma;",
                      "#endif",
                      *polys, *fns, api, "#endif", ""])


BESSEL_SOURCE = _bessel_source()


# ---------------------------------------------------------------- digamma

#: digamma's positive zero x0 (1.4616321449683623412626595423257213284682...) as a double and
#: the double nearest the rest: ``x - hi - lo`` is ``x - x0`` to ~1e-33 near x0 (``x - hi`` is
#: exact there: Sterbenz)
PSI_ROOT_HI = 1.4616321449683622
PSI_ROOT_LO = float(Fraction("1.46163214496836234126265954232572132846819620400644635129598840859878644")
                    - Fraction(PSI_ROOT_HI))
#: half-width of the band around x0 where digamma is its Taylor series there, and its terms
#: (|x - x0| / x0 < 0.21 per term: 30 terms reach below 1e-20 of the sum)
PSI_ROOT_BAND = 0.3
PSI_ROOT_TERMS = 30


def hurwitz_zeta(s: int, q: float) -> float:
    """zeta(s, q) = sum over j >= 0 of (q + j)**-s for an integer ``s >= 2``, in float64 (to a
    few ulps): 40 terms, then Euler-Maclaurin's tail with eight Bernoulli terms (at q + 40 >=
    40 the next term is below 1e-30 of the sum). Computed when the source is generated.

    Example:
      >>> abs(hurwitz_zeta(2, 1.0) - math.pi ** 2 / 6) < 1e-15
      True
    """
    bernoulli = [Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30),
                 Fraction(5, 66), Fraction(-691, 2730), Fraction(7, 6), Fraction(-3617, 510)]
    n = 40
    terms = [(q + j) ** -s for j in range(n)]
    a = q + n
    terms += [a ** (1 - s) / (s - 1), 0.5 * a ** -s]
    rising = float(s)  # s (s + 1) ... (s + 2m - 2)
    for m, b in enumerate(bernoulli, start=1):
        terms.append(float(b) / math.factorial(2 * m) * rising * a ** (-s - 2 * m + 1))
        rising *= (s + 2 * m - 1) * (s + 2 * m)
    return math.fsum(terms)


def psi_root_coefficients(terms: int = PSI_ROOT_TERMS) -> list[float]:
    """digamma's Taylor coefficients at its positive zero x0, divided by ``x - x0``:
    psi(x) = (x - x0) * sum over k >= 1 of c_k (x - x0)**(k - 1), with
    c_k = psi^(k)(x0) / k! = (-1)**(k + 1) zeta(k + 1, x0)."""
    x0 = PSI_ROOT_HI + PSI_ROOT_LO
    return [(-1.0) ** (k + 1) * hurwitz_zeta(k + 1, x0) for k in range(1, terms + 1)]


def _digamma_source() -> str:
    # psi(y) ~ log y - 1/(2y) - sum_k B_2k / (2k y^2k): -B_2k / (2k), k = 1..7, in w = y^-2
    # (from 10 on, the first omitted term is below 5e-17 of the result)
    bernoulli = [Fraction(1, 6), Fraction(-1, 30), Fraction(1, 42), Fraction(-1, 30),
                 Fraction(5, 66), Fraction(-691, 2730), Fraction(7, 6)]
    series = [float(-b / (2 * (k + 1))) for k, b in enumerate(bernoulli)]
    return "\n".join(["#ifndef PLAX_DIGAMMA", "#define PLAX_DIGAMMA",
                      "// ---- digamma (plax_cupy/special_source.py)",
                      "#if defined(PLAX_HOST) || defined(PLAX_SIM)",
                      "using std::fma; using std::floor;",
                      "#endif",
                      _horner("plax_psi_series", series),
                      _horner_float("plax_psi_series_f", series),
                      _horner("plax_psi_root_series", psi_root_coefficients()),
                      f"#define PLAX_PSI_ROOT_HI {PSI_ROOT_HI.hex()}",
                      f"#define PLAX_PSI_ROOT_LO {PSI_ROOT_LO.hex()}",
                      r"""__device__ __forceinline__ double plax_digamma(double x) {
  if (x != x || x == -plax_bitcast<double>(0x7ff0000000000000ull)) return plax_qnan(x);
  if (x <= 0.0 && x == floor(x)) return plax_qnan(x);  // the poles (XLA: NaN)
  if (isinf(x)) return x;
  // near the positive zero: its Taylor series in x - x0 (the recurrence below cancels there,
  // leaving an absolute error of ~1e-16 on a value that tends to zero)
  const double d = (x - PLAX_PSI_ROOT_HI) - PLAX_PSI_ROOT_LO;
  if (fabs(d) < """ + repr(PSI_ROOT_BAND) + r""") return d * plax_psi_root_series(d);
  const bool neg = x < 0.0;
  double y = neg ? 1.0 - x : x, lifted = 0.0;
  while (y < 10.0) {  // psi(y) = psi(y + 1) - 1/y
    lifted += 1.0 / y;
    y += 1.0;
  }
  const double w = 1.0 / (y * y);
  const double psi = (log(y) - 0.5 / y + plax_psi_series(w) * w) - lifted;
  if (!neg) return psi;
  // reflection, tan taken of pi (x - round x): exact reduction, so large |x| stays accurate
  const double pi = 3.14159265358979323846264338327950288;
  return psi - pi / tan(pi * (x - rint(x)));
}
// float from 4 on (finite): the asymptotic series in single precision, where psi > 1.25 and
// log x - 1/(2x) barely cancels (at most 2.1 ulps from SciPy's float64 value on the host build;
// CUDA's logf, 1 ulp, can add about one more); in double below, where psi's zeros, the recurrence and
// the reflection would cost float its accuracy
__device__ __forceinline__ float plax_digamma(float x) {
  if (x >= 4.0f && x < plax_bitcast<float>(0x7f800000u)) {
    const float w = 1.0f / (x * x);
    return (logf(x) - 0.5f / x) + plax_psi_series_f(w) * w;
  }
  return (float)plax_digamma((double)x);
}""",
                      "#endif", ""])


DIGAMMA_SOURCE = _digamma_source()


# ---------------------------------------------------------------- iterative special functions
# The algorithms of the Numba backend's scalar forms (plax_numba.special_gamma, special_zeta,
# special_beta), written for CUDA with the same constants and limits (plax.lax.special_series):
# everything in double, a float (float32, or a half type's float value) widened, iterated to
# float32's looser tolerance and rounded once.

_EPS64 = 2.0 ** -53
_LOG_MAX64, _LOG_MIN64 = 709.782712893384, -745.1332191019411
_LOG_MAX32 = 88.72283935546875   # log(float32 max): where a float32 prefactor underflows
_BIG, _BIG_INV = 4503599627370496.0, 2.22044604925031308085e-16


def _constants(**values: float) -> str:
    """``#define NAME literal`` lines (hexadecimal literals: exact)."""
    return "\n".join(f"#define {name} ({float(v).hex()})" for name, v in values.items())


def _common_source() -> str:
    """What the iterative functions share: constants, infinity and NaN, Stirling's correction."""
    s = special_series
    return "\n".join([
        "#ifndef PLAX_SF_COMMON", "#define PLAX_SF_COMMON",
        "// ---- shared by the iterative special functions (plax_cupy/special_source.py)",
        "#if defined(PLAX_HOST) || defined(PLAX_SIM)",
        "using std::fma; using std::pow; using std::lgamma; using std::tgamma; using std::log1p;",
        "using std::erfc; using std::floor; using std::fmod;",
        "#endif",
        _constants(PLAX_SF_EPS64=_EPS64, PLAX_SF_EPS32=s.STOP_TOLERANCE_F32,
                   PLAX_SF_LOG_MAX64=_LOG_MAX64, PLAX_SF_LOG_MIN64=_LOG_MIN64,
                   PLAX_SF_LOG_MAX32=_LOG_MAX32, PLAX_SF_BIG=_BIG, PLAX_SF_BIG_INV=_BIG_INV),
        _horner("plax_stirling_series", list(s.STIRLING_CORRECTION)),
        r"""__device__ __forceinline__ double plax_sf_inf() {
  return plax_bitcast<double>(0x7ff0000000000000ull);
}
__device__ __forceinline__ double plax_sf_nan() { return plax_qnan(0.0); }
// lgamma(a) - ((a - 1/2) log a - a + log(2 pi) / 2), a >= 10 (Stirling's series)
__device__ __forceinline__ double plax_stirling_correction(double a) {
  return plax_stirling_series(1.0 / (a * a)) / a;
}""", "#endif", ""])


def _igamma_source() -> str:
    s = special_series
    return "\n".join([
        "#ifndef PLAX_IGAMMA", "#define PLAX_IGAMMA",
        "// ---- igamma, igammac, igamma_grad_a, random_gamma_grad (plax_cupy/special_source.py)",
        _constants(PLAX_SF_EULER=s.EULER, PLAX_SF_HUGE_A=s.GAMMA_HUGE_SHAPE,
                   PLAX_SF_NEAR=s.GAMMA_NEAR_CENTRE),
        f"#define PLAX_SF_MAX_TERMS {s.GAMMA_MAX_TERMS}",
        f"#define PLAX_SF_GRAD_TERMS {s.GAMMA_GRAD_FRACTION_TERMS}",
        _horner("plax_lgamma1p_taylor", list(s.LGAMMA1P_TAYLOR)),
        _horner("plax_log1pmx_series", s.log1pmx_coefficients()),
        _horner("plax_temme_c0", list(s.TEMME_C0)),
        r"""// lgamma(1 + a) without rounding 1 + a for small |a| (Taylor's series below 0.2)
__device__ double plax_lgamma1p(double a) {
  if (fabs(a) >= 0.2) return lgamma(1.0 + a);
  return (plax_lgamma1p_taylor(a) * a - PLAX_SF_EULER) * a;
}
// log(1 + d) - d without cancellation near 0: s = d / (2 + d), log(1 + d) = 2 atanh(s)
__device__ double plax_log1pmx(double d) {
  if (fabs(d) > 0.5) return log1p(d) - d;
  const double s = d / (2.0 + d), z = s * s;
  return -s * d + 2.0 * s * z * plax_log1pmx_series(z);
}
// x^a e^-x / Gamma(a), a and x > 0 finite: Temme's form from a = 10 on (no cancellation at x = a)
__device__ double plax_gamma_prefactor(double a, double x) {
  if (a >= 10.0) {
    const double d = (x - a) / a;
    const double lx = d < -0.5 ? a * log(x / a) + (a - x) : a * plax_log1pmx(d);
    const double e = lx - plax_stirling_correction(a);
    return e > PLAX_SF_LOG_MIN64 ? sqrt(a / (2.0 * 3.14159265358979323846)) * exp(e) : 0.0;
  }
  if (x < 700.0) {
    const double p = pow(x, a);
    if (p < 1e300 && p > 1e-300) return p * exp(-x) / tgamma(a);
  }
  const double e = a * log(x) - x - lgamma(a);
  return e > PLAX_SF_LOG_MIN64 ? exp(e) : 0.0;
}
// P(a, x) by its power series (x <= max(1, a))
__device__ double plax_igamma_p_series(double a, double x, double eps) {
  const double f = plax_gamma_prefactor(a, x);
  if (f == 0.0) return 0.0;
  double r = a, c = 1.0, s = 1.0;
  for (int i = 0; i < PLAX_SF_MAX_TERMS; ++i) {
    r += 1.0;
    c *= x / r;
    s += c;
    if (c <= s * eps) break;
  }
  return s * f / a;
}
// Q(a, x) by Legendre's continued fraction (x > max(1, a)), rescaled
__device__ double plax_igamma_q_fraction(double a, double x, double eps) {
  const double f = plax_gamma_prefactor(a, x);
  if (f == 0.0) return 0.0;
  double y = 1.0 - a, z = x + y + 1.0, c = 0.0;
  double pkm2 = 1.0, qkm2 = x, pkm1 = x + 1.0, qkm1 = z * x;
  double ans = pkm1 / qkm1;
  for (int i = 0; i < PLAX_SF_MAX_TERMS; ++i) {
    c += 1.0;
    y += 1.0;
    z += 2.0;
    const double yc = y * c;
    const double pk = pkm1 * z - pkm2 * yc, qk = qkm1 * z - qkm2 * yc;
    double t = 1.0;
    if (qk != 0.0) {
      const double r = pk / qk;
      t = fabs((ans - r) / r);
      ans = r;
    }
    pkm2 = pkm1; pkm1 = pk; qkm2 = qkm1; qkm1 = qk;
    if (fabs(pk) > PLAX_SF_BIG) {
      pkm2 *= PLAX_SF_BIG_INV; pkm1 *= PLAX_SF_BIG_INV;
      qkm2 *= PLAX_SF_BIG_INV; qkm1 *= PLAX_SF_BIG_INV;
    }
    if (t <= eps) break;
  }
  return ans * f;
}
// Q(a, x) for x <= 1.1 and small a: 1 - x^a / Gamma(a+1) (1 + a sum_n (-x)^n / (n! (a+n)))
__device__ double plax_igamma_q_series(double a, double x, double eps) {
  double fac = 1.0, s = 0.0;
  for (int n = 1; n < PLAX_SF_MAX_TERMS; ++n) {
    fac *= -x / n;
    const double term = fac / (a + n);
    s += term;
    if (fabs(term) <= eps * fabs(s)) break;
  }
  const double logx = log(x);
  const double lead = -expm1(a * logx - plax_lgamma1p(a));
  return lead - exp(a * logx - lgamma(a)) * s;
}
__device__ __forceinline__ bool plax_igamma_edge(double a, double x) {
  return !(a > 0.0 && x > 0.0 && a < plax_sf_inf() && x < plax_sf_inf());
}
// P(a, x) at the edges: SciPy's gammainc, NaN for infinite a
__device__ double plax_igamma_edge_p(double a, double x) {
  if (a != a || x != x || a < 0.0 || x < 0.0 || a == plax_sf_inf()) return plax_sf_nan();
  if (a == 0.0) return x > 0.0 ? 1.0 : plax_sf_nan();
  return x == 0.0 ? 0.0 : 1.0;
}
// Q (upper) or P for huge a, x near a: Temme's uniform expansion to its first correction
__device__ double plax_igamma_uniform(double a, double x, bool upper) {
  const double d = (x - a) / a;
  const double lmx = d < -0.5 ? log(x / a) - d : plax_log1pmx(d);
  const double eta = copysign(sqrt(-2.0 * lmx), d);
  const double c0 = fabs(eta) < 0.3 ? plax_temme_c0(eta) : 1.0 / d - 1.0 / eta;
  const double r = exp(a * lmx) / sqrt(2.0 * 3.14159265358979323846 * a) * c0;
  const double z = eta * sqrt(0.5 * a);
  return upper ? 0.5 * erfc(z) + r : 0.5 * erfc(-z) - r;
}
__device__ double plax_igammac_core(double a, double x, double eps) {
  if (plax_igamma_edge(a, x)) {
    const double p = plax_igamma_edge_p(a, x);
    return p != p ? p : 1.0 - p;
  }
  if (a > PLAX_SF_HUGE_A && fabs(x - a) < PLAX_SF_NEAR * a) return plax_igamma_uniform(a, x, true);
  if (x > 1.1) {
    if (x < a) return 1.0 - plax_igamma_p_series(a, x, eps);
    return plax_igamma_q_fraction(a, x, eps);
  }
  if (x <= 0.5) {
    if (-0.4 / log(x) < a) return 1.0 - plax_igamma_p_series(a, x, eps);
    return plax_igamma_q_series(a, x, eps);
  }
  if (x * 1.1 < a) return 1.0 - plax_igamma_p_series(a, x, eps);
  return plax_igamma_q_series(a, x, eps);
}
__device__ double plax_igamma_core(double a, double x, double eps) {
  if (plax_igamma_edge(a, x)) return plax_igamma_edge_p(a, x);
  if (a > PLAX_SF_HUGE_A && fabs(x - a) < PLAX_SF_NEAR * a) return plax_igamma_uniform(a, x, false);
  if (x > 1.0 && x > a) return 1.0 - plax_igammac_core(a, x, eps);
  return plax_igamma_p_series(a, x, eps);
}
// d(sample)/da by the power series (x <= max(1, a)): JAX's recurrence
__device__ double plax_gamma_grad_series(double a, double x, double eps) {
  double r = a, c = 1.0, ans = 1.0, dc_da = 0.0, dans_da = 0.0;
  for (int i = 0; i < PLAX_SF_MAX_TERMS; ++i) {
    r += 1.0;
    dc_da = dc_da * (x / r) - (c * x) / (r * r);
    dans_da += dc_da;
    c *= x / r;
    ans += c;
    if (!(fabs(dc_da / dans_da) > eps)) break;
  }
  const double dlogax_da = log(x) - plax_digamma(a + 1.0);
  return -(dans_da + ans * dlogax_da) * x / a;
}
// d(sample)/da by the continued fraction (x > max(1, a)); without iterating where the
// prefactor underflows (JAX's value there)
__device__ double plax_gamma_grad_fraction(double a, double x, double eps, bool iterate) {
  double y = 1.0 - a, z = x + y + 1.0;
  double pkm2 = 1.0, qkm2 = x, pkm1 = x + 1.0, qkm1 = z * x;
  double ans = pkm1 / qkm1;
  double dpkm2 = 0.0, dqkm2 = 0.0, dpkm1 = 0.0, dqkm1 = -x;
  double dans = (dpkm1 - ans * dqkm1) / qkm1;
  const int terms = iterate ? PLAX_SF_GRAD_TERMS + 1 : 1;
  for (int count = 1; count < terms; ++count) {
    y += 1.0;
    z += 2.0;
    const double yc = y * count;
    const double pk = pkm1 * z - pkm2 * yc, qk = qkm1 * z - qkm2 * yc;
    const double dpk = dpkm1 * z - pkm1 - dpkm2 * yc + pkm2 * count;
    const double dqk = dqkm1 * z - qkm1 - dqkm2 * yc + qkm2 * count;
    double change = 1.0;
    if (qk != 0.0) {
      const double ans_new = pk / qk, dans_new = (dpk - ans_new * dqk) / qk;
      change = fabs(dans_new - dans);
      ans = ans_new;
      dans = dans_new;
    }
    pkm2 = pkm1; pkm1 = pk; qkm2 = qkm1; qkm1 = qk;
    dpkm2 = dpkm1; dqkm2 = dqkm1; dpkm1 = dpk; dqkm1 = dqk;
    if (fabs(pk) > 1.0 / eps) {
      pkm2 *= eps; pkm1 *= eps; qkm2 *= eps; qkm1 *= eps;
      dpkm2 *= eps; dqkm2 *= eps; dpkm1 *= eps; dqkm1 *= eps;
    }
    if (!(change > eps)) break;
  }
  const double dlogax_da = log(x) - plax_digamma(a);
  return (dans + ans * dlogax_da) * x;
}
// d(gamma sample)/d(shape) at sample x; log_max: the dtype's largest finite value's log
__device__ double plax_random_gamma_grad_core(double a, double x, double eps, double log_max) {
  if (a != a || x != x || x < 0.0 || a <= 0.0) return plax_sf_nan();
  if (x == 0.0) return 0.0;
  const bool use_fraction = x > 1.0 && x > a;
  const bool enabled = a * log(x) - x - lgamma(a) >= -log_max;
  if (use_fraction) return plax_gamma_grad_fraction(a, x, eps, enabled);
  if (!enabled) return -x / a * (log(x) - plax_digamma(a + 1.0));
  return plax_gamma_grad_series(a, x, eps);
}
// dP(a, x)/da = -d(sample)/da * density(x); 0 at x = 0, NaN outside a, x > 0 finite
__device__ double plax_igamma_grad_a_core(double a, double x, double eps, double log_max) {
  if (a > 0.0 && a < plax_sf_inf() && x == 0.0) return 0.0;
  if (plax_igamma_edge(a, x)) return plax_sf_nan();
  const double density = plax_gamma_prefactor(a, x) / x;
  return -plax_random_gamma_grad_core(a, x, eps, log_max) * density;
}
__device__ __forceinline__ double plax_igamma(double a, double x) {
  return plax_igamma_core(a, x, PLAX_SF_EPS64);
}
__device__ __forceinline__ double plax_igammac(double a, double x) {
  return plax_igammac_core(a, x, PLAX_SF_EPS64);
}
__device__ __forceinline__ double plax_random_gamma_grad(double a, double x) {
  return plax_random_gamma_grad_core(a, x, PLAX_SF_EPS64, PLAX_SF_LOG_MAX64);
}
__device__ __forceinline__ double plax_igamma_grad_a(double a, double x) {
  return plax_igamma_grad_a_core(a, x, PLAX_SF_EPS64, PLAX_SF_LOG_MAX64);
}
__device__ __forceinline__ float plax_igamma(float a, float x) {
  return (float)plax_igamma_core(a, x, PLAX_SF_EPS32);
}
__device__ __forceinline__ float plax_igammac(float a, float x) {
  return (float)plax_igammac_core(a, x, PLAX_SF_EPS32);
}
// float32's underflow threshold, so the same elements skip iterating as in the reference
__device__ __forceinline__ float plax_random_gamma_grad(float a, float x) {
  return (float)plax_random_gamma_grad_core(a, x, PLAX_SF_EPS32, PLAX_SF_LOG_MAX32);
}
__device__ __forceinline__ float plax_igamma_grad_a(float a, float x) {
  return (float)plax_igamma_grad_a_core(a, x, PLAX_SF_EPS32, PLAX_SF_LOG_MAX64);
}""", "#endif", ""])


def _zeta_source() -> str:
    s = special_series
    divisors = ", ".join(float(d).hex() for d in s.EULER_MACLAURIN_DIVISORS)
    return "\n".join([
        "#ifndef PLAX_ZETA", "#define PLAX_ZETA",
        "// ---- zeta, polygamma (plax_cupy/special_source.py)",
        _constants(PLAX_ZETA_LIFT64=s.ZETA_LIFT_F64, PLAX_ZETA_LIFT32=s.ZETA_LIFT_F32,
                   PLAX_ZETA_LARGE_Q=s.ZETA_LARGE_Q),
        r"""// Hurwitz's zeta(s, q): terms summed until the offset passes `lift`, then the
// Euler-Maclaurin tail (Cephes); NaN/inf at the edges as SciPy
__device__ double plax_zeta_core(double s, double q, double eps, double lift) {
  if (isinf(s) || isinf(q)) return plax_sf_nan();
  if (s == 1.0) return plax_sf_inf();
  if (s < 1.0) return plax_sf_nan();
  if (q <= 0.0) {
    if (q == floor(q)) return plax_sf_inf();
    if (s != floor(s)) return plax_sf_nan();
  }
  if (s != s || q != q) return plax_sf_nan();
  if (q > PLAX_ZETA_LARGE_Q) return (1.0 / (s - 1.0) + 0.5 / q) * pow(q, 1.0 - s);
  double total = pow(q, -s), a = q, b = 0.0;
  int i = 0;
  while (i < lift || a <= lift) {
    i += 1;
    a += 1.0;
    b = pow(a, -s);
    total += b;
    if (fabs(b / total) < eps) return total;
  }
  const double w = a;
  total += b * w / (s - 1.0);
  total -= 0.5 * b;
  const double divisors[12] = {""" + divisors + r"""};
  double f = 1.0, k = 0.0;
  for (int j = 0; j < 12; ++j) {
    f *= s + k;
    b /= w;
    const double t = f * b / divisors[j];
    total += t;
    if (fabs(t / total) < eps) break;
    k += 1.0;
    f *= s + k;
    b /= w;
    k += 1.0;
  }
  return total;
}
// polygamma(m, x): digamma for m = 0, (-1)^(m+1) m! zeta(m + 1, x) above
__device__ double plax_polygamma_core(double m, double x, double eps, double lift) {
  if (m != m || x != x) return plax_sf_nan();
  if (m < 0.0 || m != floor(m) || isinf(m)) return plax_sf_nan();
  // orders from 2^63 on are NaN, as the NumPy backend's (it converts the order to int64)
  if (m >= 9223372036854775808.0) return plax_sf_nan();
  if (x <= 0.0 && x == floor(x)) return plax_sf_nan();
  if (m == 0.0) return plax_digamma(x);
  if (x == plax_sf_inf()) return 0.0;
  const double sign = fmod(m, 2.0) == 1.0 ? 1.0 : -1.0;
  return sign * tgamma(m + 1.0) * plax_zeta_core(m + 1.0, x, eps, lift);
}
__device__ __forceinline__ double plax_zeta(double s, double q) {
  return plax_zeta_core(s, q, PLAX_SF_EPS64, PLAX_ZETA_LIFT64);
}
__device__ __forceinline__ float plax_zeta(float s, float q) {
  return (float)plax_zeta_core(s, q, PLAX_SF_EPS32, PLAX_ZETA_LIFT32);
}
__device__ __forceinline__ double plax_polygamma(double m, double x) {
  return plax_polygamma_core(m, x, PLAX_SF_EPS64, PLAX_ZETA_LIFT64);
}
__device__ __forceinline__ float plax_polygamma(float m, float x) {
  return (float)plax_polygamma_core(m, x, PLAX_SF_EPS32, PLAX_ZETA_LIFT32);
}""", "#endif", ""])


def _beta_source() -> str:
    """betainc as the Numba form (``plax_numba.special_beta``): float64 iterates to 2**-53 and
    takes its prefactor from ``tgamma``/``pow`` where they stay in range; float32 (and the
    half types' float value) iterates to 2**-40 and always takes it from logarithms, with
    ``-log B(a, b)`` from Stirling's series after a shift by 10 (:func:`plax_log_beta_parts`:
    three ``log`` calls) instead of ``lgamma`` three times."""
    s = special_series
    return "\n".join([
        "#ifndef PLAX_BETAINC", "#define PLAX_BETAINC",
        "// ---- betainc (regularized_incomplete_beta; plax_cupy/special_source.py)",
        _constants(PLAX_BETA_MAX_GAMMA=171.624376956302725,
                   PLAX_BETA_NORMAL_LIMIT=s.BETA_NORMAL_LIMIT,
                   PLAX_BETA_HALF_LOG_2PI=0.91893853320467274178,
                   PLAX_BETA_TINY=1e-100),
        f"#define PLAX_BETA_TERMS {s.BETA_FRACTION_TERMS}",
        f"#define PLAX_BETA_SERIES_TERMS {s.BETA_SERIES_TERMS}",
        r"""// lgamma(a + b) - lgamma(a) - lgamma(b), without cancellation when one is large
__device__ double plax_log_beta_factor(double a, double b) {
  if (a > b) { const double t = a; a = b; b = t; }
  if (b < 10.0) return lgamma(a + b) - lgamma(a) - lgamma(b);
  const double ratio = a * log(b) + (a + b - 0.5) * log1p(a / b) - a
                       + plax_stirling_correction(a + b) - plax_stirling_correction(b);
  return ratio - lgamma(a);
}
// z (z+1) ... (z+9) as a fixed tree of products: lgamma(z) = lgamma(z + 10) - log of it
__device__ __forceinline__ double plax_rising10(double z) {
  const double p01 = z * (z + 1.0), p23 = (z + 2.0) * (z + 3.0), p45 = (z + 4.0) * (z + 5.0);
  const double p67 = (z + 6.0) * (z + 7.0), p89 = (z + 8.0) * (z + 9.0);
  return ((p01 * p23) * (p45 * p67)) * p89;
}
// lgamma(z) - log(2 pi) / 2 for z >= 10 (Stirling's series)
__device__ __forceinline__ double plax_stirling_log(double z) {
  return (z - 0.5) * log(z) - z + plax_stirling_correction(z);
}
// (l, *m) with l + log(*m) = plax_log_beta_factor(a, b) and no lgamma: below 10 each of a, b
// and a + b is shifted by 10 (the shifts' products in *m, which the caller folds into a
// logarithm it takes anyway); absolute error ~5e-14 for parameters up to 30, what the float32
// path's 2**-40 asks. Parameters below 1e-100 (the products could underflow) take lgamma.
__device__ double plax_log_beta_parts(double a, double b, double* m) {
  if (a > b) { const double t = a; a = b; b = t; }
  *m = 1.0;
  if (a < PLAX_BETA_TINY) return plax_log_beta_factor(a, b);
  if (b >= 10.0) {
    const double ratio = a * log(b) + (a + b - 0.5) * log1p(a / b) - a
                         + plax_stirling_correction(a + b) - plax_stirling_correction(b);
    if (a >= 10.0) return ratio - plax_stirling_log(a) - PLAX_BETA_HALF_LOG_2PI;
    *m = plax_rising10(a);
    return ratio - plax_stirling_log(a + 10.0) - PLAX_BETA_HALF_LOG_2PI;
  }
  const double c = a + b;
  *m = plax_rising10(a) / plax_rising10(c) * plax_rising10(b);
  return plax_stirling_log(c + 10.0) - plax_stirling_log(a + 10.0) - plax_stirling_log(b + 10.0)
         - PLAX_BETA_HALF_LOG_2PI;
}
// lgamma(a + b) - lgamma(a) - lgamma(b) + log(v), v > 0: float64 (eps 2**-53) from lgamma,
// the float32 path from plax_log_beta_parts with one logarithm
__device__ __forceinline__ double plax_log_beta_times(double a, double b, double v, double eps) {
  if (eps == PLAX_SF_EPS64) return plax_log_beta_factor(a, b) + log(v);
  double m;
  const double l = plax_log_beta_parts(a, b, &m);
  return l + log(v * m);
}
// Gamma(a + b) / (Gamma(a) Gamma(b)) from tgamma (for a + b below gamma's limit), or 0 where
// that fails: Gamma(a) Gamma(b) overflows for a tiny a beside b near 171 (inf / inf is NaN),
// and the caller then takes the logarithms (as the Numba form's _inverse_beta); always 0 on
// the float32 path (eps above 2**-53), which takes the logarithms
__device__ double plax_inverse_beta(double a, double b, double eps) {
  if (eps != PLAX_SF_EPS64 || !(a + b < PLAX_BETA_MAX_GAMMA)) return 0.0;
  const double r = tgamma(a + b) / (tgamma(a) * tgamma(b));
  return r < plax_sf_inf() ? r : 0.0;  // (NaN fails the test too)
}
// I_x(a, b) by its power series (b x <= 1, x <= 0.95), terms down to eps relative
__device__ double plax_betainc_series(double a, double b, double x, double eps) {
  const double ai = 1.0 / a;
  double u = (1.0 - b) * x, v = u / (a + 1.0);
  const double t1 = v;
  double t = u, n = 2.0, s = 0.0;
  const double z = eps * ai;
  for (int i = 0; i < PLAX_BETA_SERIES_TERMS; ++i) {
    if (!(fabs(v) > z)) break;
    u = (n - b) * x / n;
    t *= u;
    v = t / (a + n);
    s += v;
    n += 1.0;
  }
  s += t1;
  s += ai;
  u = a * log(x);
  const double ratio = plax_inverse_beta(a, b, eps);
  if (ratio > 0.0 && fabs(u) < PLAX_SF_LOG_MAX64) return s * ratio * pow(x, a);
  t = plax_log_beta_times(a, b, s, eps) + u;
  return t > PLAX_SF_LOG_MIN64 ? exp(t) : 0.0;
}
// Cephes' continued fraction incbcf (second false) or incbd (true, in z = x / (1 - x)), to
// 3 eps relative
__device__ double plax_betainc_fraction(double a, double b, double x, bool second, double eps) {
  double k1 = a, k2 = second ? b - 1.0 : a + b, k3 = a, k4 = a + 1.0, k5 = 1.0;
  double k6 = second ? a + b : b - 1.0, k7 = a + 1.0, k8 = a + 2.0;
  const double z = second ? x / (1.0 - x) : x;
  double pkm2 = 0.0, qkm2 = 1.0, pkm1 = 1.0, qkm1 = 1.0, ans = 1.0, r = 1.0;
  const double thresh = 3.0 * eps;
  for (int i = 0; i < PLAX_BETA_TERMS; ++i) {
    double xk = -(z * k1 * k2) / (k3 * k4);
    double pk = pkm1 + pkm2 * xk, qk = qkm1 + qkm2 * xk;
    pkm2 = pkm1; pkm1 = pk; qkm2 = qkm1; qkm1 = qk;
    xk = (z * k5 * k6) / (k7 * k8);
    pk = pkm1 + pkm2 * xk;
    qk = qkm1 + qkm2 * xk;
    pkm2 = pkm1; pkm1 = pk; qkm2 = qkm1; qkm1 = qk;
    if (qk != 0.0) r = pk / qk;
    double t = 1.0;
    if (r != 0.0) {
      t = fabs((ans - r) / r);
      ans = r;
    }
    if (t < thresh) break;
    k1 += 1.0; k3 += 2.0; k4 += 2.0; k5 += 1.0; k7 += 2.0; k8 += 2.0;
    if (second) { k2 -= 1.0; k6 += 1.0; } else { k2 += 1.0; k6 -= 1.0; }
    if (fabs(qk) + fabs(pk) > PLAX_SF_BIG) {
      pkm2 *= PLAX_SF_BIG_INV; pkm1 *= PLAX_SF_BIG_INV; qkm2 *= PLAX_SF_BIG_INV; qkm1 *= PLAX_SF_BIG_INV;
    }
    if (fabs(qk) < PLAX_SF_BIG_INV || fabs(pk) < PLAX_SF_BIG_INV) {
      pkm2 *= PLAX_SF_BIG; pkm1 *= PLAX_SF_BIG; qkm2 *= PLAX_SF_BIG; qkm1 *= PLAX_SF_BIG;
    }
  }
  return ans;
}
// I_x(a, b) outside the iterations' domain, as SciPy
__device__ double plax_betainc_edge(double a, double b, double x) {
  const double inf = plax_sf_inf();
  if (a != a || b != b || x != x || a < 0.0 || b < 0.0 || x < 0.0 || x > 1.0) return plax_sf_nan();
  if ((a == 0.0 && b == 0.0) || (a == inf && b == inf)) return plax_sf_nan();
  if (x == 0.0) return 0.0;
  if (x == 1.0) return 1.0;
  if (a == 0.0 || b == inf) return 1.0;
  return 0.0;  // b == 0 or a == inf
}
// the beta distribution's normal limit, for huge a + b
__device__ double plax_betainc_normal(double a, double b, double x) {
  const double n = a + b, mean = a / n;
  const double sd = sqrt(mean * (b / n) / (n + 1.0));
  return 0.5 * erfc(-(x - mean) / (sd * 1.41421356237309504880));
}
// by a continued fraction (or the swapped power series) and the prefactor (b x > 1 or x > 0.95)
__device__ double plax_betainc_fractions(double a, double b, double x, double eps) {
  double w = 1.0 - x;
  // above the mean by symmetry, unless 1 - x rounds to 1
  const bool flip = x > a / (a + b) && w < 1.0;
  double log_x = log(x), log_xc = log1p(-x), xc;
  if (flip) {
    const double t = a; a = b; b = t;
    xc = x; x = w;
    const double l = log_x; log_x = log_xc; log_xc = l;
  } else {
    xc = w;
  }
  if (flip && b * x <= 1.0 && x <= 0.95) return 1.0 - plax_betainc_series(a, b, x, eps);
  if (x * (a + b - 2.0) - (a - 1.0) < 0.0) w = plax_betainc_fraction(a, b, x, false, eps);
  else w = plax_betainc_fraction(a, b, x, true, eps) / xc;
  double y = a * log_x, t = b * log_xc;
  const double ratio = plax_inverse_beta(a, b, eps);
  if (ratio > 0.0 && fabs(y) < PLAX_SF_LOG_MAX64 && fabs(t) < PLAX_SF_LOG_MAX64) {
    t = pow(xc, b) * pow(x, a) / a * w * ratio;
  } else {
    y += t + plax_log_beta_times(a, b, w / a, eps);
    t = y > PLAX_SF_LOG_MIN64 ? exp(y) : 0.0;
  }
  return flip ? 1.0 - t : t;
}
// I_x(a, b) in double, iterated to eps relative (2**-53: float64; 2**-40: float32)
__device__ double plax_betainc_core(double a, double b, double x, double eps) {
  const double inf = plax_sf_inf();
  if (!(a > 0.0 && b > 0.0 && x > 0.0 && x < 1.0 && a < inf && b < inf)) return plax_betainc_edge(a, b, x);
  if (b * x <= 1.0 && x <= 0.95) return plax_betainc_series(a, b, x, eps);
  if (a > PLAX_BETA_NORMAL_LIMIT && b > PLAX_BETA_NORMAL_LIMIT) return plax_betainc_normal(a, b, x);
  const double r = plax_betainc_fractions(a, b, x, eps);
  return (r >= 0.0 && r <= 1.0) ? r : plax_betainc_normal(a, b, x);
}
__device__ __forceinline__ double plax_betainc(double a, double b, double x) {
  return plax_betainc_core(a, b, x, PLAX_SF_EPS64);
}
__device__ __forceinline__ float plax_betainc(float a, float b, float x) {
  return (float)plax_betainc_core((double)a, (double)b, (double)x, PLAX_SF_EPS32);
}""", "#endif", ""])


SPECIAL_COMMON_SOURCE = _common_source()
IGAMMA_SOURCE = _igamma_source()
ZETA_SOURCE = _zeta_source()
BETA_SOURCE = _beta_source()


#: ``log(exp(a) + exp(b))`` as NumPy's ``logaddexp`` computes it (equal operands, infinities
#: included, add ``log 2``; a NaN operand gives NaN): the combine of ``cumlogsumexp`` in the row
#: kernels (:mod:`plax_cupy.kernels_rows`) and in the persistent scan kernel
#: (:mod:`plax_cupy.scan_kernel`), one source for both
LOGADDEXP_SOURCE = r"""#ifndef PLAX_LOGADDEXP
#define PLAX_LOGADDEXP
#if defined(PLAX_HOST) || defined(PLAX_SIM)
using std::log1p; using std::exp;
#endif
template <typename T> __device__ __forceinline__ T plax_logaddexp(T a, T b) {
  if (a == b) return a + (T)0.693147180559945309417232121458176568;
  const T d = a - b;
  if (d > 0) return a + log1p(exp(-d));
  if (d <= 0) return b + log1p(exp(d));
  return d;  // NaN
}
#endif
"""


#: (name, the helpers it defines as the generated code calls them -- None: only other snippets
#: call it --, its source, the snippets it calls), in the order a unit includes them (each
#: after those it calls)
_SNIPPETS = (
    ("complex_inverse", "plax_ca(?:sin|cos|tan)h?", COMPLEX_INVERSE_SOURCE, ()),
    ("bessel", "plax_bessel_i[01]e", BESSEL_SOURCE, ()),
    ("digamma", "plax_digamma", DIGAMMA_SOURCE, ()),
    ("common", None, SPECIAL_COMMON_SOURCE, ()),
    ("igamma", "plax_(?:igammac?|igamma_grad_a|random_gamma_grad)", IGAMMA_SOURCE,
     ("digamma", "common")),
    ("zeta", "plax_(?:zeta|polygamma)", ZETA_SOURCE, ("digamma", "common")),
    ("betainc", "plax_betainc", BETA_SOURCE, ("common",)),
    ("logaddexp", "plax_logaddexp", LOGADDEXP_SOURCE, ()),
)


def helpers_for(code: str) -> str:
    """The snippets defining the helpers ``code`` (generated kernel source, preamble excluded)
    calls, and those they call in turn, in a fixed order; ``""`` when it calls none.

    Args:
      code: the generated per-element code of a kernel.

    Returns:
      The CUDA source to place after the preamble.

    Example:
      >>> "PLAX_DIGAMMA" in helpers_for("const float t0 = plax_digamma(a0_v);")
      True
      >>> "PLAX_DIGAMMA" in helpers_for("const float t0 = plax_igamma(a0_v, a1_v);")
      True
    """
    needed = {name for name, pattern, _, _ in _SNIPPETS
              if pattern and re.search(rf"\b{pattern}\(", code)}
    for name, _, _, calls in reversed(_SNIPPETS):  # a snippet only calls earlier ones
        if name in needed:
            needed.update(calls)
    return "".join(src for name, _, src, _ in _SNIPPETS if name in needed)
