"""The coefficients of the two expansions behind ``bessel_i0e`` and ``bessel_i1e``, exact
rationals rounded once to float64, for every backend that evaluates them itself (the Numba
scalar forms, the CUDA device functions): one derivation, so the backends agree.

Below some ``|x|`` the power series of ``I_nu(x) / x^nu`` in ``q = x^2 / 4`` converges fast;
above it Hankel's asymptotic expansion of ``I_nu(x) e^-x sqrt(2 pi x)`` in ``u = 1/x`` does.
Where each backend switches, and how many terms it takes, is its own choice (its precision).
"""
from __future__ import annotations

import math
from fractions import Fraction


def series_coefficients(nu: int, terms: int) -> list[float]:
    """``1 / (k! (k+nu)! 2^nu)`` for ``k < terms``: the power series of ``I_nu(x) / x^nu`` in
    ``q = x^2 / 4``, each rounded once from the exact rational.

    Args:
      nu: the order (0 or 1 for ``bessel_i0e``/``bessel_i1e``).
      terms: how many coefficients.

    Returns:
      The coefficients, lowest power first.

    Example:
      >>> series_coefficients(0, 3)
      [1.0, 1.0, 0.25]
    """
    return [float(Fraction(1, math.factorial(k) * math.factorial(k + nu) * 2 ** nu))
            for k in range(terms)]


def hankel_coefficients(nu: int, terms: int) -> list[float]:
    """``(-1)^k a_k(nu)`` for ``k < terms``: Hankel's expansion of ``I_nu(x) e^-x sqrt(2 pi x)``
    in ``u = 1/x``, ``a_k = prod_{j<=k} (4 nu^2 - (2j - 1)^2) / (k! 8^k)``.

    Args:
      nu: the order.
      terms: how many coefficients.

    Returns:
      The coefficients, lowest power of ``u`` first.

    Example:
      >>> hankel_coefficients(0, 3)
      [1.0, 0.125, 0.0703125]
    """
    out, a = [], Fraction(1)
    for k in range(terms):
        if k:
            a *= Fraction(-(4 * nu * nu - (2 * k - 1) ** 2), 8 * k)
        out.append(float(a))
    return out
