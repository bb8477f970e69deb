"""Fit the four polynomials of :func:`plax_numba.special_erf.erf_inv_f64` and print them as
the module's Python source.

``erfinv(y) = y p(w)`` with ``w = -log(1 - y**2)``. Each piece interpolates ``p`` at the
Chebyshev nodes of its variable (``w`` on ``[0, 2]``, ``w - 4.125`` on ``[2, 6.25]``,
``sqrt(w) - 3.25`` on ``[2.5, 4]``, ``sqrt(w) - 5`` on ``[4, 6.1]``), solved in mpmath at 50
digits (float64 least squares stalls near 1e-14: the power basis is ill-conditioned), then
rounds the coefficients to float64 and prints the largest relative error of the rounded
polynomial, evaluated exactly, on a grid (in units of 2**-53). Needs mpmath:

    python benchmarks/fit_erf_inv_f64.py
"""
from __future__ import annotations

import mpmath

mpmath.mp.dps = 50

#: (function name, first bound, last bound, centre, degree, variable is sqrt(w))
PIECES = [("_near_zero", 0, 2, 0, 18, False), ("_central", 2, 6.25, 4.125, 20, False),
          ("_middle", 2.5, 4, 3.25, 20, True), ("_tail", 4, 6.1, 5, 18, True)]


def p_of_w(w):
    """``erfinv(y) / y`` at ``w = -log(1 - y**2)``, to mpmath's precision."""
    y = mpmath.sqrt(-mpmath.expm1(-w))
    return mpmath.sqrt(mpmath.pi) / 2 if y == 0 else mpmath.erfinv(y) / y


def fit(lo, hi, centre, degree, of_sqrt):
    """float64 coefficients (lowest first) interpolating ``p`` at ``degree + 1`` Chebyshev
    nodes of ``[lo, hi]``, in powers of ``v - centre``, and their largest relative error."""
    f = (lambda v: p_of_w(v * v)) if of_sqrt else p_of_w
    lo, hi, n = mpmath.mpf(lo), mpmath.mpf(hi), degree + 1
    nodes = [(lo + hi) / 2 + (hi - lo) / 2 * mpmath.cos(mpmath.pi * (2 * k + 1) / (2 * n))
             for k in range(n)]
    a = mpmath.matrix([[(v - centre) ** j for j in range(n)] for v in nodes])
    c = mpmath.lu_solve(a, mpmath.matrix([f(v) for v in nodes]))
    coef = [float(c[j]) for j in range(n)]
    worst = mpmath.mpf(0)
    for i in range(400):
        v = lo + (hi - lo) * i / 399
        approx = mpmath.polyval([mpmath.mpf(x) for x in reversed(coef)], v - centre)
        worst = max(worst, abs(approx / f(v) - 1))
    return coef, float(worst * 2 ** 53)


def source(name, coef, var):
    """The Horner evaluation of ``coef`` (lowest first) in ``var`` as nested fmas."""
    c = coef[::-1]
    lines = [f"    p = fma({c[0]!r}, {var}, {c[1]!r})"]
    lines += [f"    p = fma(p, {var}, {x!r})" for x in c[2:-1]]
    lines.append(f"    return fma(p, {var}, {c[-1]!r})")
    return f"def {name}({var}):\n" + "\n".join(lines)


def main() -> None:
    for name, lo, hi, centre, degree, of_sqrt in PIECES:
        coef, err = fit(lo, hi, centre, degree, of_sqrt)
        print(f"# {name}: degree {degree} on [{lo}, {hi}], error {err:.2f} x 2**-53")
        print(source(name, coef, "t") + "\n")


if __name__ == "__main__":
    main()
