"""The float64 inverse error function for the generated kernels, ``erf_inv_f64`` (the float32
one is :func:`plax_numba.libm_free.erf_inv_f32`).

A starting value from Giles' single-precision approximation ("Approximating the erfinv
function", GPU Computing Gems, 2011; relative error ~1e-7, extended beyond float32's range by
continuity of its second branch), then Halley's steps (three inside float32's range, a few more next to +-1 where
the start is rougher) on ``erf(z) = y`` — on
``erfc(z) = 1 - y`` for ``|y| > 1/2``, where ``1 - y`` is exact and ``erfc`` keeps its
relative accuracy, so the result stays accurate next to +-1 where ``erf`` is flat. Halley's
step triples the correct digits; libm's ``erf``/``erfc`` (one scalar call each per step)
bound the result. Measured against SciPy's ``erfinv``
(tests/numba/test_special_zeta_beta_forms.py): within a few float64 ulps over ``(-1, 1)``,
powers of two and ``1 - 2**-k``. +-1 give +-inf, ``|y| > 1`` and NaN give NaN, +-0 unchanged.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

_core = dict(cache=True, nogil=True, error_model="numpy", inline="never")
_TWO_OVER_SQRT_PI = 1.1283791670955126
_CONVERGED = 1e-6


@njit(**_core)
def _start(y):
    """Giles' float32 approximation of ``erfinv(y)`` for ``0 <= y < 1``, in float64."""
    w = -math.log((1.0 - y) * (1.0 + y))
    if w < 5.0:
        w -= 2.5
        p = 2.81022636e-08
        p = 3.43273939e-07 + p * w
        p = -3.5233877e-06 + p * w
        p = -4.39150654e-06 + p * w
        p = 0.00021858087 + p * w
        p = -0.00125372503 + p * w
        p = -0.00417768164 + p * w
        p = 0.246640727 + p * w
        p = 1.50140941 + p * w
    else:
        w = math.sqrt(w) - 3.0
        p = -0.000200214257
        p = 0.000100950558 + p * w
        p = 0.00134934322 + p * w
        p = -0.00367342844 + p * w
        p = 0.00573950773 + p * w
        p = -0.0076224613 + p * w
        p = 0.00943887047 + p * w
        p = 1.00167406 + p * w
        p = 2.83297682 + p * w
    return p * y


@njit(**_core)
def erf_inv_f64(y):
    """``erfinv(y)`` of a float64 (``lax.erf_inv``): see the module docstring."""
    ay = abs(y)
    if not ay < 1.0:
        if ay == 1.0:
            return math.copysign(np.inf, y)
        return np.nan
    if ay == 0.0:
        return y
    z = _start(ay)
    upper = ay > 0.5
    tail = 1.0 - ay                 # exact for ay > 1/2 (Sterbenz)
    for _ in range(12):
        slope = _TWO_OVER_SQRT_PI * math.exp(-z * z)
        if upper:
            u = (math.erfc(z) - tail) / -slope
        else:
            u = (math.erf(z) - ay) / slope
        step = u / (1.0 + z * u)
        z -= step
        # Halley's step cubes the relative error: a step below 1e-6 of z leaves ~1e-18 (under
        # float64's rounding), so no confirming step is needed -- one step from Giles' start
        # inside float32's range. (Waiting for a step below 1e-17 ran into the rounding noise
        # of erf/erfc and took up to the twelve steps.)
        if abs(step) <= _CONVERGED * z:
            break
    return math.copysign(z, y)
