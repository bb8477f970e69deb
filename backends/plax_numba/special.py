"""Scalar forms for the generated kernels of the exponentially scaled modified Bessel
functions ``bessel_i0e`` and ``bessel_i1e`` (float32 and float64) and of float64 ``digamma``
(:func:`digamma_f64`; the float32 one is :func:`plax_numba.libm_free.digamma_f32`), so that
they fuse with their neighbours instead of running SciPy's reference kernel in a pass of their
own. The iterative special functions have modules of their own: :mod:`plax_numba.special_gamma`
(``igamma``, ``igammac``, ``igamma_grad_a``, ``random_gamma_grad``),
:mod:`plax_numba.special_zeta` (``zeta``, ``polygamma``), :mod:`plax_numba.special_beta`
(``betainc``) and :mod:`plax_numba.special_erf` (float64 ``erf_inv``).

The Bessel functions evaluate in float64 (a float32 argument is widened and the result
rounded once) from two expansions, chosen by ``|x|`` (12 for float32, 22 for float64):

* small ``|x|``: the power series ``I_nu(x) = (x/2)**nu sum_k (x**2/4)**k / (k! (k+nu)!)``
  (every term positive, so nothing cancels), scaled by ``exp(-|x|)``;
* large ``|x|``: Hankel's asymptotic expansion ``I_nu(x) e**-x ~ (2 pi x)**-1/2 sum_k
  (-1)**k a_k(nu) / x**k`` with ``a_k = prod_{j<=k} (4 nu**2 - (2j-1)**2) / (k! 8**k)``,
  truncated where its terms are below float64's resolution.

Both are fixed-length Horner polynomials over constant tables (coefficients exact rationals
computed here), every case computed and one selected, so loops calling them vectorise.
Measured error against SciPy's float64 ``i0e``/``i1e`` over a dense sweep of [-200, 200],
powers of two and the edge cases (tests/numba/test_special_scalar_forms.py,
``benchmarks/special_bench.py``): float32 at most 0.51 ulp (the final rounding of a value good to
~1e-9), float64 at most 11
ulps (SciPy's own result is a few ulps off). ``i0e`` is even, ``i1e`` odd; +-inf give 0
(with the sign for ``i1e``), NaN gives NaN, as SciPy and JAX.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from plax.lax.bessel_series import hankel_coefficients, series_coefficients
from plax_numba.compiled_once import twin
from plax_numba.inlining import scalar_helper
from plax_numba.libm_free import exp_f64
from plax_numba.scalar import constant_table, fma_f64 as fma

_INV_SQRT_2PI = 0.3989422804014327


# float64: the series below |x| = 22 (60 terms reach 2**-60 of the sum there), Hankel's
# expansion above (its smallest term, near k = 2|x|, is ~exp(-2|x|) < 2**-60 from 22 on)
_SPLIT64, _SERIES64, _HANKEL64 = 22.0, 60, 30
# float32 (computed in float64, rounded once): the split at 12, where 21 series terms and 13
# of Hankel's reach ~1e-9 relative (measured: at most 0.506 float32 ulp against SciPy over
# [-200, 200] and powers of two; 26 and 20 terms, 1e-10, gave 0.50 for ~20% more time)
_SPLIT32, _SERIES32, _HANKEL32 = 12.0, 21, 13

def _polynomial(coefficients: list[float], name: str):
    """An inlined njit ``p(z) = sum_k coefficients[k] z**k`` by Horner's rule with fused
    multiply-adds, the coefficients in a constant table (``name``) and the trip count a
    compile-time constant, so LLVM unrolls it and the caller's loop can vectorise. (A table
    passed as an argument would be a first-class function: an indirect call per element.)"""
    table = constant_table(coefficients, name)
    last = len(coefficients) - 1

    @njit(nogil=True, error_model="numpy", inline="always")  # inlined: its callers are cached
    def polynomial(z):
        r = table(last)
        for k in range(last - 1, -1, -1):
            r = fma(r, z, table(k))
        return r
    return polynomial


_series0_64 = _polynomial(series_coefficients(0, _SERIES64), "plax_i0_series64")
_series1_64 = _polynomial(series_coefficients(1, _SERIES64), "plax_i1_series64")
_hankel0_64 = _polynomial(hankel_coefficients(0, _HANKEL64), "plax_i0_hankel64")
_hankel1_64 = _polynomial(hankel_coefficients(1, _HANKEL64), "plax_i1_hankel64")
_series0_32 = _polynomial(series_coefficients(0, _SERIES32), "plax_i0_series32")
_series1_32 = _polynomial(series_coefficients(1, _SERIES32), "plax_i1_series32")
_hankel0_32 = _polynomial(hankel_coefficients(0, _HANKEL32), "plax_i0_hankel32")
_hankel1_32 = _polynomial(hankel_coefficients(1, _HANKEL32), "plax_i1_hankel32")


@scalar_helper
def bessel_i0e_f64(x):
    """``exp(-|x|) I0(x)`` of a float64 (``lax.bessel_i0e``); even, 0 at +-inf, NaN for NaN."""
    ax = abs(x)
    small = np.exp(-min(ax, _SPLIT64)) * _series0_64(0.25 * ax * ax)
    t = 1.0 / max(ax, _SPLIT64)   # (one division: sqrt(t) is 1 / sqrt(|x|))
    big = _INV_SQRT_2PI * np.sqrt(t) * _hankel0_64(t)
    r = small if ax < _SPLIT64 else big
    r = 0.0 if ax == np.inf else r
    return x if x != x else r


@scalar_helper
def bessel_i1e_f64(x):
    """``exp(-|x|) I1(x)`` of a float64 (``lax.bessel_i1e``); odd, +-0 at +-inf and 0, NaN
    for NaN."""
    ax = abs(x)
    small = np.exp(-min(ax, _SPLIT64)) * ax * _series1_64(0.25 * ax * ax)
    t = 1.0 / max(ax, _SPLIT64)   # (one division: sqrt(t) is 1 / sqrt(|x|))
    big = _INV_SQRT_2PI * np.sqrt(t) * _hankel1_64(t)
    r = small if ax < _SPLIT64 else big
    r = 0.0 if ax == np.inf else r
    r = -r if x < 0 else r
    return x if (x != x or x == 0) else r


@scalar_helper
def bessel_i0e_f32(x):
    """``exp(-|x|) I0(x)`` of a float32: evaluated in float64 (its vectorisable ``exp``,
    :func:`plax_numba.libm_free.exp_f64`) and rounded once."""
    ax = abs(np.float64(x))
    small = exp_f64(-min(ax, _SPLIT32)) * _series0_32(0.25 * ax * ax)
    t = 1.0 / max(ax, _SPLIT32)   # (one division: sqrt(t) is 1 / sqrt(|x|))
    big = _INV_SQRT_2PI * np.sqrt(t) * _hankel0_32(t)
    r = np.float32(small if ax < _SPLIT32 else big)
    return x if x != x else r


@scalar_helper
def bessel_i1e_f32(x):
    """``exp(-|x|) I1(x)`` of a float32: evaluated in float64 and rounded once (as
    :func:`bessel_i0e_f32`); odd, +-0 at +-0."""
    ax = abs(np.float64(x))
    small = exp_f64(-min(ax, _SPLIT32)) * ax * _series1_32(0.25 * ax * ax)
    t = 1.0 / max(ax, _SPLIT32)   # (one division: sqrt(t) is 1 / sqrt(|x|))
    big = _INV_SQRT_2PI * np.sqrt(t) * _hankel1_32(t)
    r = np.float32(small if ax < _SPLIT32 else big)
    r = -r if x < 0 else r
    return x if (x != x or x == 0) else r


# ---------------------------------------------------------------- float64 digamma

#: psi(z) ~ log z - 1/(2z) - sum_k B_2k / (2k z**2k): the -B_2k/(2k) for k = 1..7, in w = z**-2
_PSI_SERIES = _polynomial([-1 / 12, 1 / 120, -1 / 252, 1 / 240, -1 / 132, 691 / 32760, -1 / 12],
                          "plax_psi_series64")
#: the argument the recurrence lifts to before the series: its first omitted term is below
#: 5e-17 of the result from here on
_PSI_SHIFT = 10.0


@scalar_helper
def digamma_f64(x):
    """``psi(x) = gamma'(x) / gamma(x)`` of a float64 (``lax.digamma``).

    Below 0 the reflection ``psi(x) = psi(1 - x) - pi / tan(pi x)``, with ``tan`` taken of
    ``pi (x - round(x))`` (exact reduction, so huge negative arguments keep their accuracy);
    then ``psi(y) = psi(y + n) - sum_{k<n} 1/(y + k)`` lifting ``y`` to at least 10 in a loop
    of fixed length (one trip count for every element), and Bernoulli's asymptotic series
    there. Relative error within a few ulps except next to the zeros (the positive one at
    1.4616... and one per negative unit interval), where the error is absolute (~1e-15).
    NaN at the poles (0, -1, -2, ...; XLA's convention), at -inf and for NaN; inf -> inf.
    """
    neg = x < 0.0
    y = 1.0 - x if neg else x
    lifted = 0.0
    for _ in range(10):
        low = y < _PSI_SHIFT
        lifted += (1.0 / y) if low else 0.0
        y = y + 1.0 if low else y
    w = 1.0 / (y * y)
    psi = (np.log(y) - 0.5 / y + _PSI_SERIES(w) * w) - lifted
    frac = x - np.rint(x)
    r = psi - np.pi / np.tan(np.pi * frac) if neg else psi
    pole = x <= 0.0 and x == np.floor(x)
    r = np.nan if pole else r
    r = x if x == np.inf else r
    return x if x != x else r


# What kernels over few elements call (plax_numba.codegen.INLINE_FROM; the same bits, one call
# where the inlined form costs LLVM 0.3-0.5 CPU s per kernel)
bessel_i0e_f32_once = twin(bessel_i0e_f32, "float32(float32)", __name__)
bessel_i1e_f32_once = twin(bessel_i1e_f32, "float32(float32)", __name__)
bessel_i0e_f64_once = twin(bessel_i0e_f64, "float64(float64)", __name__)
bessel_i1e_f64_once = twin(bessel_i1e_f64, "float64(float64)", __name__)
digamma_f64_once = twin(digamma_f64, "float64(float64)", __name__)
