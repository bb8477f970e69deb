"""Fit the polynomial coefficients of :mod:`plax_numba.libm_free` and print them.

Each polynomial is a weighted least-squares fit at Chebyshev nodes of its variable, reweighted
a few dozen times towards the least maximum error (Lawson's iteration), then checked on a dense
grid. SciPy's float64 ``erf``/``erfc``/``erfcx`` are the reference (their error, ~1e-16, is far
below the fits'). The float32 kernels that carry a low part (``erfc_f32``, ``erf_inv_f32``) get
their two leading coefficients as float32 pairs ``(hi, lo)``, printed as ``c0, c0_lo, c1, c1_lo,
c2, ...``. Run it to reproduce or change the constants:

    python benchmarks/fit_libm_free.py
"""
from __future__ import annotations

import warnings

import numpy as np
import scipy.special as sp
from numpy.polynomial import polynomial as P


def fit(f, lo: float, hi: float, degree: int, var, relative: bool = True,
        nodes: int = 6000, rounds: int = 30):
    """Coefficients ``c`` (lowest first) of ``f(x) ~ sum c_k var(x)**k`` on ``[lo, hi]``, and
    the largest error on a dense grid (relative or absolute)."""
    vlo, vhi = sorted((var(lo), var(hi)))
    k = np.arange(nodes)
    v = (vlo + vhi) / 2 + (vhi - vlo) / 2 * np.cos(np.pi * (k + 0.5) / nodes)
    grid = np.linspace(lo, hi, 4_000_001)           # var is monotonic: invert it by lookup
    order = np.argsort(var(grid))
    x = np.interp(v, var(grid)[order], grid[order])
    y = f(x)
    scale = 1 / np.abs(y) if relative else np.ones_like(y)
    weight = np.ones_like(y)
    for _ in range(rounds):
        c = P.polyfit(v, y, degree, w=np.sqrt(weight) * scale)
        err = np.abs(P.polyval(v, c) - y) * scale
        weight = weight * np.sqrt(err / err.max()) + 1e-300
    xt = np.linspace(lo, hi, 1_000_001)
    yt = f(xt)
    err = np.abs(P.polyval(var(xt), c) - yt) / (np.abs(yt) if relative else 1)
    return c, float(err.max())


def erf_over_x(x):
    safe = np.where(x == 0, 1.0, x)
    return np.where(x == 0, 2 / np.sqrt(np.pi), sp.erf(safe) / safe)


def erfinv_over_y(w):
    """``erfinv(y) / y`` as a function of ``w = -log(1 - y**2)``; ``1 - y`` is formed without
    cancellation, so the reference keeps its precision as ``y`` nears 1."""
    y = np.sqrt(-np.expm1(-w))
    return sp.erfcinv(np.exp(-w) / (1 + y)) / y


def erfinv_of_s(s):
    """``erfinv(y)`` as a function of ``s = sqrt(w)``, ``w = -log(1 - y**2)``."""
    w = s * s
    return sp.erfcinv(np.exp(-w) / (1 + np.sqrt(-np.expm1(-w))))


def erfcx_times(k: float):
    """``erfcx(x) (x + k)``: ``erfc_f32``'s polynomial, in ``(x - k) / (x + k)``."""
    return lambda x: sp.erfcx(x) * (x + k)


def split(c) -> tuple:
    """float32 ``c0, c0_lo, c1, c1_lo, c2, ...`` (``c0 ~ c0 + c0_lo``, likewise ``c1``)."""
    out = []
    for i, v in enumerate(c):
        hi = np.float32(v)
        out.append(float(hi))
        if i < 2:
            out.append(float(np.float32(v - float(hi))))
    return tuple(out)


def main() -> None:
    warnings.simplefilter("ignore", np.exceptions.RankWarning)  # the fits are checked below
    square = lambda x: x * x  # noqa: E731
    jobs = [
        # name, function, interval, degree, variable, relative, dtype of the constants
        # (the erf_f32 kernel evaluates x + x Q: the constant term is printed less one)
        ("erf_f32: erf(x)/x in x**2", erf_over_x, (0, 1), 6, square, True, np.float32),
        ("erf_f32: erfc(x) in x - 2.375", sp.erfc, (1, 3.92), 14, lambda x: x - 2.375, False,
         np.float32),
        ("erfc_f32: erfcx(x) (x+2) in (x-2)/(x+2)", erfcx_times(2.0), (0, 10.1), 10,
         lambda x: (x - 2) / (x + 2), True, split),
        ("erf_inv_f32: erfinv(y)/y in w - 2.5", erfinv_over_y, (1e-12, 5), 9,
         lambda w: w - 2.5, True, split),
        ("erf_inv_f32: erfinv(y) in sqrt(w) - 3.25", erfinv_of_s, (np.sqrt(5), 4.0), 8,
         lambda s: s - 3.25, True, split),
        # not a fit for precision: the slope and intercept of 1/(2s) for erf_inv_f32's sqrt
        # correction (only a few per cent are needed)
        ("erf_inv_f32: 1/(2s) in s", lambda s: 0.5 / s, (np.sqrt(5), 4.0), 1, lambda s: s, True,
         np.float32),
    ]
    for name, f, (lo, hi), degree, var, relative, dtype in jobs:
        c, err = fit(f, lo, hi, degree, var, relative)
        kind = "relative" if relative else "absolute"
        print(f"{name} on [{lo}, {hi}], degree {degree}: {kind} error {err:.2e}")
        if name.startswith("erf_f32: erf(x)/x"):
            c[0] -= 1.0
        print("   ", dtype(c) if dtype is split else tuple(float(dtype(v)) for v in c))


if __name__ == "__main__":
    main()
