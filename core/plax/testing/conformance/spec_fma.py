"""Conformance spec of the internal fused multiply-add (:mod:`plax.lax.fused_multiply_add`).

Every backend must give the correctly rounded ``a * b + c`` bit for bit, so the reference is
exact: the rational value of ``a * b + c`` (``fractions.Fraction``) rounded once to the
dtype by integer arithmetic, with IEEE 754's results for zeros, infinities and NaNs. The edge
cases are the ones a double rounding or an emulation gets wrong: ties, sums where
``fl(fl(a * b) + c)`` differs, products that overflow with a finite result, subnormals.
"""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from plax.lax.fused_multiply_add import fma_p

from .harness import FLOAT, Case, GradCase, Spec, dt, rand

SPECS: list[Spec] = []

#: (significand bits, smallest normal exponent, largest exponent) of each float format
_FORMATS = {"float16": (11, -14, 15), "bfloat16": (8, -126, 127), "float32": (24, -126, 127),
            "float64": (53, -1022, 1023)}


def _round(q: Fraction, d: np.dtype) -> float:
    """The nonzero rational ``q`` rounded to nearest (ties to even) in ``d``, as a float."""
    p, emin, emax = _FORMATS[d.name]
    m, sign = abs(q), (-1.0 if q < 0 else 1.0)
    e = m.numerator.bit_length() - m.denominator.bit_length()   # 2**e <= m < 2**(e + 2)
    if Fraction(2) ** e > m:
        e -= 1
    if Fraction(2) ** (e + 1) <= m:
        e += 1
    quantum = max(e, emin) - (p - 1)                            # the ulp (subnormals: fixed)
    n = round(m / Fraction(2) ** quantum)                       # Fraction rounds ties to even
    if n == 0:
        return math.copysign(0.0, sign)
    if n * Fraction(2) ** quantum >= Fraction(2) ** (emax + 1):
        return math.copysign(math.inf, sign)
    return math.copysign(math.ldexp(n, quantum), sign)


def fma_reference(a: float, b: float, c: float, d: np.dtype) -> float:
    """IEEE 754's ``fusedMultiplyAdd(a, b, c)`` in ``d`` (round to nearest, ties to even).

    Args:
      a, b, c: values of ``d`` as Python floats.
      d: the format.

    Returns:
      The correctly rounded result, as a float (exactly a value of ``d``).
    """
    if math.isnan(a) or math.isnan(b) or math.isnan(c):
        return math.nan
    if math.isinf(a) or math.isinf(b):
        if a == 0 or b == 0:
            return math.nan                                     # inf * 0
        product = math.copysign(math.inf, a) * math.copysign(1.0, b)
        return math.nan if math.isinf(c) and c != product else product
    if math.isinf(c):
        return c
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact != 0:
        return _round(exact, d)
    product_negative = (math.copysign(1.0, a) < 0) != (math.copysign(1.0, b) < 0)
    exact_zero_product = a == 0 or b == 0
    # -0 only as the sum of two negative zeros; an exact cancellation is +0
    return -0.0 if exact_zero_product and product_negative and math.copysign(1.0, c) < 0 else 0.0


def _reference(d):
    def ref(a, b, c):
        a, b, c = np.broadcast_arrays(*(np.asarray(x, d).astype(np.float64) for x in (a, b, c)))
        out = np.empty(a.shape, np.float64)
        for i in np.ndindex(a.shape):
            out[i] = fma_reference(float(a[i]), float(b[i]), float(c[i]), d)
        return out.astype(d)
    return ref


def _edges(d: np.dtype) -> np.ndarray:
    """``(a, b, c)`` rows of the cases rounding gets wrong (see the module)."""
    p, emin, emax = _FORMATS[d.name]
    h1, h2 = p // 2, p - p // 2
    big = math.ldexp(1.0, (emax + 2) // 2)                      # big * big overflows
    top = math.ldexp(2 - math.ldexp(1.0, 1 - p), emax)          # the largest finite value
    tiny = math.ldexp(1.0, emin - p + 1)                        # the smallest subnormal
    normal = math.ldexp(1.0, emin)
    x, y = 1 + math.ldexp(1.0, -h1), 1 + math.ldexp(1.0, -h2)   # x * y = 1 + .. + 2**-p: a tie
    ulp1 = math.ldexp(1.0, 1 - p)
    rows = [
        (3.0, 0.5, 1.0), (0.25, -8.0, 2.0), (x, y, 1.0),         # exact products and sums
        (x, y, 0.0), (-x, y, 0.0), (x, y, ulp1), (x, y, -ulp1),  # ties (to even, both ways)
        (x, y, tiny), (x, y, -tiny), (-x, y, tiny),              # off the tie: fl(fl(ab)+c) differs
        (x, y, -1.0), (x, -y, 1.0), (x, x, -1.0),                # cancellation: the low bits
        (big, big, -top), (-big, big, top), (big, -big, top),    # the product overflows, the sum not
        (top, top, 1.0), (top, -2.0, top), (top, 2.0, -top),     # overflow; and back into range
        (normal, 0.5, 0.0), (tiny, 0.5, 0.0), (tiny, 0.75, tiny),  # subnormal results, ties there
        (tiny, -0.5, -0.0), (tiny, tiny, 0.0), (-tiny, tiny, -0.0), (normal, 1.5, -normal),
        (-0.0, 1.0, -0.0), (0.0, -1.0, 0.0), (1.0, -1.0, 1.0), (-1.0, 0.0, -0.0),  # zeros' signs
        (math.inf, 0.0, 1.0), (math.inf, 2.0, -math.inf), (math.inf, 2.0, 1.0),
        (-math.inf, 2.0, math.inf), (1.0, 1.0, math.inf), (top, 2.0, -math.inf),
        (math.nan, 0.0, math.inf), (0.0, math.inf, math.nan), (1.0, 2.0, math.nan),
    ]
    return np.array(rows, np.float64).astype(d)


def _cancelling(rng, shape, d):
    """Random ``a``, ``b`` and ``c`` close to ``-a * b``: sums whose low bits are the point."""
    a, b = rand(rng, shape, d), rand(rng, shape, d)
    wobble = 1 + rng.standard_normal(shape) * np.exp2(-rng.integers(1, 30, shape))
    c = (-(a.astype(np.float64) * b.astype(np.float64)) * wobble).astype(d)
    return [a, b, c]


_SHAPES = [((), (), ()), ((2, 3), (2, 3), (2, 3)), ((), (2, 3), ()), ((2, 1), (1, 3), (2, 3)),
           ((0,), (0,), (0,))]


def _cases(d):
    d = dt(d)
    ref = _reference(d)
    cs = [Case({}, lambda rng, s=s: [rand(rng, s[0], d), rand(rng, s[1], d), rand(rng, s[2], d)],
               ref, f"{[list(x) for x in s]}", exact_bits=True) for s in _SHAPES]
    cs.append(Case({}, lambda rng: _cancelling(rng, (64,), d), ref, "cancelling", exact_bits=True))
    edges = _edges(d)
    cs.append(Case({}, lambda rng: [edges[:, 0], edges[:, 1], edges[:, 2]], ref, "edges",
                   exact_bits=True, vmap=False))
    return cs


def _grads():
    rng = np.random.default_rng(0)
    a, b, c = (rand(rng, (2, 3), np.float32) for _ in range(3))
    fun = lambda x, y, z: fma_p.bind(x, y, z)
    return [GradCase(fun, (a, b, c)), GradCase(fun, (np.float32(0.7), b, np.float32(-1.5)),
                                               label="scalars")]


SPECS.append(Spec(fma_p, FLOAT, _cases, grads=_grads))
