"""The float64 inverse error function for the generated kernels, ``erf_inv_f64`` (the float32
one is :func:`plax_numba.libm_free.erf_inv_f32`).

Giles' form of the approximation ("Approximating the erfinv function", GPU Computing Gems
Jade Edition, 2011; XLA's float64 ``erf_inv`` uses his coefficients) with polynomials fitted
here: with ``w = -log(1 - y**2)``, ``erfinv(y) = y p(w)`` where ``p`` is one of four
polynomials — of degree 18 in ``w`` for ``w < 2`` (``|y| < 0.93``), of degree 20 in
``w - 4.125`` for ``w < 6.25``, of degree 20 in ``sqrt(w) - 3.25`` for ``w < 16``, of degree 18
in ``sqrt(w) - 5`` beyond (``w`` is at most ~36.1, at ``1 - 2**-53``). Giles' own coefficients
are up to 2.5 (central) and 4.6 (tail) ulps from ``erfinv(y)/y``; these are within 0.4 ulp
(benchmarks/fit_erf_inv_f64.py). ``1 - y**2`` is one fused multiply-add, rounded once, so ``w``
keeps its relative accuracy next to +-1, where XLA's ``log1p(-y*y)`` loses it to the rounding
of ``y*y``.

The logarithm is plax's own (:func:`plax_numba.libm_free._log_full`, bits and a polynomial),
``sqrt`` is LLVM's intrinsic, and all four polynomials are evaluated and one selected, so the
code has no libm call and no branch: loops calling it vectorise (the Halley iteration on libm's
``erf``/``erfc`` it replaces ran one scalar call per element per step, ~3x JAX's time).

Error: at most 4 float64 ulps against SciPy's ``erfinv`` (Boost's rational approximations,
themselves up to ~3 ulps off) over dense sweeps of ``(-1, 1)``, ``+-(1 - 10**-k)`` for k up to 16
and ``(-1e-3, 1e-3)`` (tests/numba/test_special_iterative_forms.py); at most 2 ulps (mean 0.3)
against mpmath at 30 digits on 9000 points of ``[0, 1)``. JAX's float64 ``erf_inv`` is up to
~5e5 ulps off next to +-1 on the same sweeps (its ``1 - y*y`` rounds away the tail). +-1 give
+-inf, ``|y| > 1`` and NaN give NaN, +-0 unchanged: as the NumPy backend.
"""
from __future__ import annotations

import math

import numpy as np

from plax_numba.compiled_once import twin
from plax_numba.inlining import scalar_helper
from plax_numba.libm_free import _log_full
from plax_numba.scalar import fma_f64 as fma


# The coefficients are fitted by benchmarks/fit_erf_inv_f64.py (interpolation at Chebyshev
# nodes in mpmath; each piece within 0.4 x 2**-53 of erfinv(y)/y once rounded to float64).
# Written out as nested fused multiply-adds: a loop over a tuple compiles to an indexed
# array that stops the caller's loop from vectorising.


@scalar_helper
def _near_zero(t):
    """``p`` for ``w < 2``, at ``t = w``."""
    p = fma(-3.209077339908504e-16, t, 1.6046655795227858e-15)
    p = fma(p, t, 4.588118011911965e-14)
    p = fma(p, t, -5.385369260154397e-13)
    p = fma(p, t, 1.0978985236811639e-12)
    p = fma(p, t, 1.0686706071170764e-11)
    p = fma(p, t, -1.3685179169694872e-11)
    p = fma(p, t, -5.273477177180696e-10)
    p = fma(p, t, 7.571157830527238e-10)
    p = fma(p, t, 2.279194501319851e-08)
    p = fma(p, t, -3.729478083523125e-08)
    p = fma(p, t, -1.0125542538053537e-06)
    p = fma(p, t, 2.019988662332711e-06)
    p = fma(p, t, 4.661144048223337e-05)
    p = fma(p, t, -0.0001280432942783496)
    p = fma(p, t, -0.0023351016416082214)
    p = fma(p, t, 0.01154934203827072)
    p = fma(p, t, 0.2320136665346545)
    return fma(p, t, 0.886226925452758)


@scalar_helper
def _central(t):
    """``p`` for ``2 <= w < 6.25``, at ``t = w - 4.125``."""
    p = fma(-5.058126138254758e-19, t, 8.412396540881276e-19)
    p = fma(p, t, 3.49022014518446e-17)
    p = fma(p, t, -2.648718219807227e-16)
    p = fma(p, t, 5.300967115475802e-17)
    p = fma(p, t, 1.4556592386699305e-14)
    p = fma(p, t, -1.271339127177034e-13)
    p = fma(p, t, 2.1962226815026578e-13)
    p = fma(p, t, 5.7927511629006735e-12)
    p = fma(p, t, -6.343695009434008e-11)
    p = fma(p, t, 1.979496356479846e-10)
    p = fma(p, t, 2.1544472610879252e-09)
    p = fma(p, t, -3.117302154508846e-08)
    p = fma(p, t, 1.449104708780667e-07)
    p = fma(p, t, 6.273197004675851e-07)
    p = fma(p, t, -1.5095674340548157e-05)
    p = fma(p, t, 0.00010930641145746958)
    p = fma(p, t, -0.00014693690018375552)
    p = fma(p, t, -0.007286705803949055)
    p = fma(p, t, 0.22654076904845152)
    return fma(p, t, 1.8872102492009424)


@scalar_helper
def _middle(t):
    """``p`` for ``6.25 <= w < 16``, at ``t = sqrt(w) - 3.25``."""
    p = fma(7.680200479077053e-09, t, -1.5305397964152548e-08)
    p = fma(p, t, -2.091453334773126e-08)
    p = fma(p, t, 1.3158663683192966e-07)
    p = fma(p, t, -2.4549818963339823e-07)
    p = fma(p, t, -2.761716223816241e-08)
    p = fma(p, t, 1.4815977874022539e-06)
    p = fma(p, t, -3.985705945648173e-06)
    p = fma(p, t, 2.93257845538535e-06)
    p = fma(p, t, 1.2465028224217455e-05)
    p = fma(p, t, -4.732068066544697e-05)
    p = fma(p, t, 6.828711739251955e-05)
    p = fma(p, t, 2.4031512865758357e-05)
    p = fma(p, t, -0.0003550378137852452)
    p = fma(p, t, 0.0009532893415794137)
    p = fma(p, t, -0.0016882755354488555)
    p = fma(p, t, 0.00249144209795696)
    p = fma(p, t, -0.0037512085082247342)
    p = fma(p, t, 0.005370914553555033)
    p = fma(p, t, 1.0052589676941655)
    return fma(p, t, 3.0838856104922208)


@scalar_helper
def _tail(t):
    """``p`` for ``w >= 16``, at ``t = sqrt(w) - 5``."""
    p = fma(-1.5439278197208357e-11, t, 4.2802433037309425e-11)
    p = fma(p, t, 4.6977303445962895e-11)
    p = fma(p, t, -4.3738896637340697e-10)
    p = fma(p, t, 1.3589365341577091e-09)
    p = fma(p, t, -3.471437933896719e-09)
    p = fma(p, t, 7.777428539826636e-09)
    p = fma(p, t, -1.525516018129263e-08)
    p = fma(p, t, 2.9044909320789473e-08)
    p = fma(p, t, -6.75560303537366e-08)
    p = fma(p, t, 2.2904362741369038e-07)
    p = fma(p, t, -9.930294774982885e-07)
    p = fma(p, t, 4.526054328559671e-06)
    p = fma(p, t, -1.9681770676949253e-05)
    p = fma(p, t, 7.59952779202494e-05)
    p = fma(p, t, -0.00021503011983024694)
    p = fma(p, t, -0.000138719318373517)
    p = fma(p, t, 1.0103004648645455)
    return fma(p, t, 4.849906401408584)


@scalar_helper
def erf_inv_f64(y):
    """``erfinv(y)`` of a float64 (``lax.erf_inv``), within 2 ulps of erfinv (4 of SciPy's
    value): see the module docstring.

    Args:
      y: a float64.

    Returns:
      The float64 ``z`` with ``erf(z) = y``; +-inf at +-1, NaN for ``|y| > 1`` and NaN.

    Example:
      >>> erf_inv_f64(0.5)  # doctest: +SKIP
      0.4769362762044699
    """
    ay = abs(y)
    inside = ay < 1.0                          # False for NaN too
    t = fma(-ay, ay, 1.0)                      # 1 - y**2 rounded once
    t = t if inside else 0.5                   # keeps the log's argument positive and normal
    w = -_log_full(t)
    s = math.sqrt(w)
    p_zero = _near_zero(w)
    p_central = _central(w - 4.125)
    p_middle = _middle(s - 3.25)
    p_tail = _tail(s - 5.0)
    p = p_zero if w < 2.0 else p_central if w < 6.25 else (p_middle if w < 16.0 else p_tail)
    edge = math.copysign(np.inf, y) if ay == 1.0 else np.nan
    return p * y if inside else edge


#: what kernels over few elements call (plax_numba.codegen.INLINE_FROM; the same bits, one call
#: where the inlined form costs LLVM ~1 CPU s per kernel)
erf_inv_f64_once = twin(erf_inv_f64, "float64(float64)", __name__)
