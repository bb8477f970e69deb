"""The float64 inverse error function for the generated kernels, ``erf_inv_f64`` (the float32
one is :func:`plax_numba.libm_free.erf_inv_f32`).

Giles' double-precision approximation ("Approximating the erfinv function", GPU Computing
Gems Jade Edition, 2011; the form XLA uses for float64): with ``w = -log(1 - y**2)``,
``erfinv(y) = y p(w)`` where ``p`` is one of three polynomials — of degree 22 in ``w - 3.125``
for ``w < 6.25`` (below ``w = 2`` the same polynomial re-expanded about 0, so that small ``w``
keeps its low bits), of degree 18 in ``sqrt(w) - 3.25`` for ``w < 16``, of degree 16 in
``sqrt(w) - 5`` beyond (``w`` is at most ~36.7, at ``1 - 2**-53``). ``1 - y**2`` is one fused
multiply-add, rounded once, so ``w`` keeps its relative accuracy next to +-1, where XLA's
``log1p(-y*y)`` loses it to the rounding of ``y*y``.

The logarithm is plax's own (:func:`plax_numba.libm_free._log_full`, bits and a polynomial),
``sqrt`` is LLVM's intrinsic, and all three polynomials are evaluated and one selected, so the
code has no libm call and no branch: loops calling it vectorise (the Halley iteration on libm's
``erf``/``erfc`` it replaces ran one scalar call per element per step, ~3x JAX's time).

Error: at most 6 float64 ulps against SciPy's ``erfinv`` (Boost's rational approximations,
themselves up to ~2 ulps off) over dense sweeps of ``(-1, 1)``, ``+-(1 - 10**-k)`` for k up to 16
and ``(-1e-3, 1e-3)`` (tests/numba/test_special_iterative_forms.py); at most 4 ulps against
mpmath at 30 digits on 9000 points. Giles' central polynomial itself is up to 2.5 ulps from
``erfinv(y)/y``: that, not the evaluation, sets the figure. JAX's float64 ``erf_inv`` is up to
~5e5 ulps off next to +-1 on the same sweeps (its ``1 - y*y`` rounds away the tail). +-1 give
+-inf, ``|y| > 1`` and NaN give NaN, +-0 unchanged: as the NumPy backend.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from plax_numba.libm_free import _log_full
from plax_numba.scalar import fma_f64 as fma

_inline = dict(cache=True, nogil=True, error_model="numpy", inline="always")

# Giles' coefficients (the paper's double-precision tables), highest degree first. Written out
# as nested fused multiply-adds below: a loop over a tuple compiles to an indexed array that
# stops the caller's loop from vectorising.


@njit(**_inline)
def _central(t):
    """``p`` for ``w < 6.25``, at ``t = w - 3.125``."""
    p = fma(-3.6444120640178196996e-21, t, -1.685059138182016589e-19)
    p = fma(p, t, 1.2858480715256400167e-18)
    p = fma(p, t, 1.115787767802518096e-17)
    p = fma(p, t, -1.333171662854620906e-16)
    p = fma(p, t, 2.0972767875968561637e-17)
    p = fma(p, t, 6.6376381343583238325e-15)
    p = fma(p, t, -4.0545662729752068639e-14)
    p = fma(p, t, -8.1519341976054721522e-14)
    p = fma(p, t, 2.6335093153082322977e-12)
    p = fma(p, t, -1.2975133253453532498e-11)
    p = fma(p, t, -5.4154120542946279317e-11)
    p = fma(p, t, 1.051212273321532285e-09)
    p = fma(p, t, -4.1126339803469836976e-09)
    p = fma(p, t, -2.9070369957882005086e-08)
    p = fma(p, t, 4.2347877827932403518e-07)
    p = fma(p, t, -1.3654692000834678645e-06)
    p = fma(p, t, -1.3882523362786468719e-05)
    p = fma(p, t, 0.0001867342080340571352)
    p = fma(p, t, -0.00074070253416626697512)
    p = fma(p, t, -0.0060336708714301490533)
    p = fma(p, t, 0.24015818242558961693)
    return fma(p, t, 1.6536545626831027356)


@njit(**_inline)
def _near_zero(w):
    """``p`` for ``w < 2``, at ``w``: :func:`_central` re-expanded about 0 (exactly, in
    rationals, then rounded), which keeps the low bits of small ``w`` that ``w - 3.125``
    drops, and sums terms that shrink fast there."""
    p = fma(-3.64441206401782e-21, w, 8.204741558302345e-20)
    p = fma(p, w, 4.122767544867425e-18)
    p = fma(p, w, -2.4349970534444247e-16)
    p = fma(p, w, 5.887028271052611e-15)
    p = fma(p, w, -8.615879577734874e-14)
    p = fma(p, w, 8.391602264970477e-13)
    p = fma(p, w, -5.548480745820828e-12)
    p = fma(p, w, 2.4433728031084853e-11)
    p = fma(p, w, -7.212619917396824e-11)
    p = fma(p, w, 2.143546412991193e-10)
    p = fma(p, w, -1.018695401267872e-09)
    p = fma(p, w, 1.586095571847935e-09)
    p = fma(p, w, 2.1703108401653584e-08)
    p = fma(p, w, -3.619474058439433e-08)
    p = fma(p, w, -1.013393042052167e-06)
    p = fma(p, w, 2.020458291921809e-06)
    p = fma(p, w, 4.6611254842499206e-05)
    p = fma(p, w, -0.00012804324534622326)
    p = fma(p, w, -0.002335101649489875)
    p = fma(p, w, 0.011549342038941186)
    p = fma(p, w, 0.23201366653463193)
    return fma(p, w, 0.886226925452758)


@njit(**_inline)
def _middle(t):
    """``p`` for ``6.25 <= w < 16``, at ``t = sqrt(w) - 3.25``."""
    p = fma(2.2137376921775787049e-09, t, 9.0756561938885390979e-08)
    p = fma(p, t, -2.7517406297064545428e-07)
    p = fma(p, t, 1.8239629214389227755e-08)
    p = fma(p, t, 1.5027403968909827627e-06)
    p = fma(p, t, -4.013867526981545969e-06)
    p = fma(p, t, 2.9234449089955446044e-06)
    p = fma(p, t, 1.2475304481671778723e-05)
    p = fma(p, t, -4.7318229009055733981e-05)
    p = fma(p, t, 6.8284851459573175448e-05)
    p = fma(p, t, 2.4031110387097893999e-05)
    p = fma(p, t, -0.0003550375203628474796)
    p = fma(p, t, 0.00095328937973738049703)
    p = fma(p, t, -0.0016882755560235047313)
    p = fma(p, t, 0.0024914420961078508066)
    p = fma(p, t, -0.0037512085075692412107)
    p = fma(p, t, 0.005370914553590063617)
    p = fma(p, t, 1.0052589676941592334)
    return fma(p, t, 3.0838856104922207635)


@njit(**_inline)
def _tail(t):
    """``p`` for ``w >= 16``, at ``t = sqrt(w) - 5``."""
    p = fma(-2.7109920616438573243e-11, t, -2.5556418169965252055e-10)
    p = fma(p, t, 1.5076572693500548083e-09)
    p = fma(p, t, -3.7894654401267369937e-09)
    p = fma(p, t, 7.6157012080783393804e-09)
    p = fma(p, t, -1.4960026627149240478e-08)
    p = fma(p, t, 2.9147953450901080826e-08)
    p = fma(p, t, -6.7711997758452339498e-08)
    p = fma(p, t, 2.2900482228026654717e-07)
    p = fma(p, t, -9.9298272942317002539e-07)
    p = fma(p, t, 4.5260625972231537039e-06)
    p = fma(p, t, -1.9681778105531670567e-05)
    p = fma(p, t, 7.5995277030017761139e-05)
    p = fma(p, t, -0.00021503011930044477347)
    p = fma(p, t, -0.00013871931833623122026)
    p = fma(p, t, 1.0103004648645343977)
    return fma(p, t, 4.8499064014085844221)


@njit(**_inline)
def erf_inv_f64(y):
    """``erfinv(y)`` of a float64 (``lax.erf_inv``), within 6 ulps: see the module docstring.

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
    p_central = _central(w - 3.125)
    p_middle = _middle(s - 3.25)
    p_tail = _tail(s - 5.0)
    p = p_zero if w < 2.0 else p_central if w < 6.25 else (p_middle if w < 16.0 else p_tail)
    edge = math.copysign(np.inf, y) if ay == 1.0 else np.nan
    return p * y if inside else edge
