"""CUDA C++ forms of the functions generated kernels call that CUDA's math library lacks:
complex ``asin``, ``acos``, ``atan``, ``asinh``, ``acosh``, ``atanh``; ``bessel_i0e`` and
``bessel_i1e``; ``digamma``.

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

**digamma** in double (float widened, rounded once): reflection ``psi(x) = psi(1 - x) -
pi / tan(pi (x - round x))`` below 0, the recurrence ``psi(y) = psi(y + 1) - 1/y`` lifting ``y``
to 10, then the asymptotic series ``log y - 1/(2y) - sum_k B_2k / (2k y^2k)``. NaN at the poles
(0, -1, -2, ...: XLA's convention), at -inf and for NaN; +inf at +inf.
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

from plax.lax.bessel_series import hankel_coefficients, series_coefficients

__all__ = ["BESSEL_SOURCE", "COMPLEX_INVERSE_SOURCE", "DIGAMMA_SOURCE", "helpers_for"]


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
                      r"""__device__ __forceinline__ double plax_digamma(double x) {
  if (x != x || x == -plax_bitcast<double>(0x7ff0000000000000ull)) return plax_qnan(x);
  if (x <= 0.0 && x == floor(x)) return plax_qnan(x);  // the poles (XLA: NaN)
  if (isinf(x)) return x;
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
__device__ __forceinline__ float plax_digamma(float x) { return (float)plax_digamma((double)x); }""",
                      "#endif", ""])


DIGAMMA_SOURCE = _digamma_source()


#: helper name (as the generated code calls it) -> the snippet defining it
_SNIPPETS = (("plax_ca(?:sin|cos|tan)h?", COMPLEX_INVERSE_SOURCE),
             ("plax_bessel_i[01]e", BESSEL_SOURCE),
             ("plax_digamma", DIGAMMA_SOURCE))


def helpers_for(code: str) -> str:
    """The snippets defining the helpers ``code`` (generated kernel source, preamble excluded)
    calls, in a fixed order; ``""`` when it calls none.

    Example:
      >>> "PLAX_DIGAMMA" in helpers_for("const float t0 = plax_digamma(a0_v);")
      True
    """
    return "".join(src for pattern, src in _SNIPPETS if re.search(rf"\b{pattern}\(", code))
