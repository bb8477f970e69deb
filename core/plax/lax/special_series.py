"""Coefficient tables and iteration limits of the iterative special functions -- the incomplete
gamma family (``igamma``, ``igammac``, ``igamma_grad_a``, ``random_gamma_grad``), Hurwitz's
``zeta`` and ``polygamma``, and the regularized incomplete beta function (``betainc``) -- for
every backend that evaluates them itself (the Numba scalar forms in ``plax_numba.special_gamma``,
``special_zeta`` and ``special_beta``; the CUDA device forms in ``plax_cupy.special_source``):
one derivation and one set of limits, so the backends agree. Plain Python numbers; the methods
themselves (Cephes', with Temme's prefactor) are described where they are written.

Example:
  >>> from plax.lax import special_series
  >>> special_series.bernoulli(2), special_series.bernoulli(12)
  (Fraction(1, 6), Fraction(-691, 2730))
"""
from __future__ import annotations

import math
from fractions import Fraction

#: float32's stopping tolerance of every series and continued fraction (each float32 form
#: evaluates in float64 and rounds once): 2**-16 of a float32 ulp
STOP_TOLERANCE_F32 = 2.0 ** -40

# ---------------------------------------------------------------- incomplete gamma

#: the incomplete gamma series' and Legendre fraction's term cap (enough for ``a ~ 5e6`` near
#: ``x = a``)
GAMMA_MAX_TERMS = 20_000
#: the term cap of the continued fraction's derivative in ``a`` (``random_gamma_grad``; JAX's)
GAMMA_GRAD_FRACTION_TERMS = 2000
#: above this shape, within ``|x - a| < GAMMA_NEAR_CENTRE * a``, Temme's uniform asymptotic
#: expansion replaces the series and fraction (which would need more than their term cap)
GAMMA_HUGE_SHAPE, GAMMA_NEAR_CENTRE = 5e6, 2e-3

#: ``(-1)**k zeta(k) / k``, ``k = 2..27``: ``lgamma(1 + a) = -euler a + sum_k c_k a**k``
#: (``|a| < 1``; used below ``|a| = 0.2``, where the terms fall by 5 per step)
LGAMMA1P_TAYLOR = (
    0.8224670334241132, -0.40068563438653143, 0.27058080842778454, -0.207385551028674,
    0.16955717699740822, -0.14404989676884614, 0.12550966952474304, -0.11133426586956469,
    0.10009945751278179, -0.09095401714582904, 0.083353840546109, -0.0769325164113522,
    0.07143294629536134, -0.06666870588242046, 0.06250095514121304, -0.05882397865868458,
    0.055555767627403614, -0.05263167937961666, 0.05000004769810169, -0.04761907033014223,
    0.04545455629320467, -0.04347826605304026, 0.04166666915034121, -0.04000000119214014,
    0.03846153903467519, -0.037037037312989324)
#: Euler's constant
EULER = 0.5772156649015329

#: Temme's ``C0(eta) = 1/(lambda - 1) - 1/eta`` near ``eta = 0``: its Taylor coefficients
TEMME_C0 = (-1.0 / 3.0, 1.0 / 12.0, -2.0 / 135.0, 1.0 / 864.0, 1.0 / 2835.0, -139.0 / 777600.0)

#: ``log(1 + d) - d = -s d + 2 s**3 sum_k s**(2k) / (2k + 3)`` with ``s = d / (2 + d)``: the
#: number of terms (``|s| <= 1/3`` below ``|d| = 0.5``, where 20 reach 1e-19)
LOG1PMX_TERMS = 20


def log1pmx_coefficients() -> list[float]:
    """``1 / (2k + 1)`` for ``k = 1..LOG1PMX_TERMS``: the series of ``(atanh(s) - s) / s**3``
    in ``s**2``, lowest power first.

    Returns:
      The coefficients, each a correctly rounded float64.

    Example:
      >>> log1pmx_coefficients()[:2] == [1 / 3, 1 / 5]
      True
    """
    return [1.0 / (2 * k + 1) for k in range(1, LOG1PMX_TERMS + 1)]


#: Stirling's series ``lgamma(a) - ((a - 1/2) log a - a + log(2 pi) / 2) = (1/a) sum_k
#: c_k w**k`` with ``w = a**-2``, to ``a**-11`` (truncation below 1e-19 from ``a = 10``)
STIRLING_CORRECTION = tuple(float(c) for c in (Fraction(1, 12), Fraction(-1, 360),
                                               Fraction(1, 1260), Fraction(-1, 1680),
                                               Fraction(1, 1188), Fraction(-691, 360360)))

# ---------------------------------------------------------------- zeta

def bernoulli(n: int) -> Fraction:
    """The Bernoulli number ``B_n`` exactly (``B_1 = -1/2``), by the Akiyama-Tanigawa
    recurrence.

    Args:
      n: the index, ``n >= 0``.

    Returns:
      ``B_n`` as a ``Fraction``.

    Example:
      >>> bernoulli(4)
      Fraction(-1, 30)
    """
    a = [Fraction(0)] * (n + 1)
    for m in range(n + 1):
        a[m] = Fraction(1, m + 1)
        for j in range(m, 0, -1):
            a[j - 1] = j * (a[j - 1] - a[j])
    return a[0] if n != 1 else Fraction(-1, 2)


#: ``(2j)! / B_2j``, ``j = 1..12``: the divisors of the Euler-Maclaurin tail of Hurwitz's zeta
#: (Cephes' table ``A``)
EULER_MACLAURIN_DIVISORS = tuple(float(Fraction(math.factorial(2 * j)) / bernoulli(2 * j))
                                 for j in range(1, 13))
#: the offset from which zeta's Euler-Maclaurin tail is taken: float64, and float32 (its looser
#: tolerance gets there from 5, four ``pow`` calls fewer)
ZETA_LIFT_F64, ZETA_LIFT_F32 = 9.0, 5.0
#: above this ``q``, ``zeta(s, q) = (1/(s - 1) + 1/(2q)) q**(1 - s)`` to rounding
ZETA_LARGE_Q = 1e8

# ---------------------------------------------------------------- incomplete beta

#: the continued fractions' term cap (Cephes')
BETA_FRACTION_TERMS = 300
#: the power series' term cap (``b x <= 1``: its terms fall like ``(bx)**n / n!``)
BETA_SERIES_TERMS = 10_000
#: where both parameters exceed this the prefactor's logarithms cancel to nothing: the beta
#: distribution's normal limit instead
BETA_NORMAL_LIMIT = 1e13
