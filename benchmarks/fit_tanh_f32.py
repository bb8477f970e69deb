"""Fits the rational ``tanh(x) ~ x N(z) / D(z)`` (``z = x*x``) of ``plax_numba.scalar.tanh_f32``.

    python benchmarks/fit_tanh_f32.py

``N`` and ``D`` have degree 4 and ``N(0) = D(0) = 1`` (so tiny ``x`` give ``x``). The fit is
linearised (``x N(z) - t D(z) = 0``) and solved by least squares weighted with ``1 / (t D)``
from the previous iteration, so the residual is the relative error; the weights then grow
with the error (Lawson's iteration) towards the least maximum. float32 coefficients are
fixed one at a time, lowest degree first, the others refitted each time, so the later ones
absorb the earlier ones' rounding. Prints the maximum relative error (float64 evaluation)
and the coefficients.
"""
from __future__ import annotations

import numpy as np

CLAMP = 9.1          # float32's tanh is +-1 beyond
DEGREE = 4


def _nodes(n: int = 8000) -> np.ndarray:
    x = (1 - np.cos(np.linspace(0, np.pi, n))) / 2 * CLAMP   # Chebyshev-like, dense at ends
    return x[x > 1e-3]


def fit(fixed: dict, x: np.ndarray, iters: int = 80) -> tuple[np.ndarray, float]:
    """Coefficients ``[n1..n4, d1..d4]`` with those in ``fixed`` (index -> value) held, and
    the maximum relative error."""
    t, z = np.tanh(x), x * x
    cols = [x * z ** k for k in range(1, DEGREE + 1)] + [-t * z ** k for k in range(1, DEGREE + 1)]
    a = np.stack(cols, 1)
    free = [i for i in range(2 * DEGREE) if i not in fixed]
    d_prev, w = np.ones_like(x), np.ones_like(x)
    for it in range(iters):
        rhs = t - x - sum(a[:, i] * v for i, v in fixed.items())
        scale = w / (t * d_prev)
        c, *_ = np.linalg.lstsq(a[:, free] * scale[:, None], rhs * scale, rcond=None)
        full = np.zeros(2 * DEGREE)
        for i, v in fixed.items():
            full[i] = v
        full[free] = c
        num = 1 + sum(full[k] * z ** (k + 1) for k in range(DEGREE))
        den = 1 + sum(full[DEGREE + k] * z ** (k + 1) for k in range(DEGREE))
        err = (x * num / den - t) / t
        d_prev = den
        if it > 5:
            w = w * np.abs(err) ** 0.5
            w /= w.mean()
    return full, float(np.abs(err).max())


def main() -> None:
    x = _nodes()
    full, err = fit({}, x)
    print(f"float64 coefficients: relative error {err:.3e}")
    fixed: dict = {}
    for i in [0, DEGREE, 1, DEGREE + 1, 2, DEGREE + 2, 3, DEGREE + 3]:
        fixed[i] = float(np.float32(full[i]))
        if len(fixed) < 2 * DEGREE:
            full, err = fit(fixed, x)
    full = np.array([fixed[i] for i in range(2 * DEGREE)])
    _, err = fit(fixed, x, iters=1)
    print(f"float32 coefficients: relative error {err:.3e}")
    print("N:", [float(np.float32(v)) for v in full[:DEGREE]])
    print("D:", [float(np.float32(v)) for v in full[DEGREE:]])


if __name__ == "__main__":
    main()
