"""The reference kernel of :data:`plax.lax.fused_multiply_add.fma_p`: ``a * b + c`` rounded
once, exactly, for every input (NumPy has no fma).

float16, bfloat16 and float32 compute in float64, where the product is exact (at most 2 x 24
bits, far inside float64's range): the sum's error comes from Knuth's two-sum, the sum is
rounded to odd (Boldo & Melquiond, "Emulation of FMA and correctly-rounded sums: proved
algorithms using rounding to odd", IEEE Trans. Computers 57(4), 2008), and one rounding to
the target follows: correct because the odd-rounded format has at least two more bits than
the target. float64 uses the same paper's algorithm on error-free transformations (Dekker's
product, two-sum); elements whose intermediate values could overflow or underflow (huge or
tiny operands) are computed exactly in rationals instead, so overflow and subnormal results
are rounded once too.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

from plax.lax.fused_multiply_add import fma_p
from plax_numpy.registry import impl, quiet

_F64 = np.dtype(np.float64)
_F32 = np.dtype(np.float32)


def _two_sum(x, y):
    """``(s, e)``: ``s = fl(x + y)`` and ``s + e == x + y`` exactly (finite, no overflow)."""
    s = x + y
    yy = s - x
    return s, (x - (s - yy)) + (y - yy)


def _round_to_odd(v, err):
    """``v + err`` rounded to odd, where ``v`` is that sum rounded to nearest in ``v``'s float
    type and ``err`` has the sign of the remainder (zero where exact; NaN with non-finite
    ``v``, left as it is): the truncation toward zero of the exact value with its last bit set,
    on the bit patterns (one step toward zero where the remainder points inward)."""
    v = np.asarray(v)
    u = np.dtype(f"u{v.dtype.itemsize}")
    inexact = np.abs(err) > 0
    inward = inexact & (np.signbit(err) != np.signbit(v))
    bits = v.view(u) - inward.astype(u)
    return (bits | inexact.astype(u)).view(v.dtype)


def _fma_narrow(a, b, c):
    x, y, z = a.astype(_F64), b.astype(_F64), c.astype(_F64)
    s, e = _two_sum(x * y, z)                   # the product is exact in float64
    if a.dtype == _F32:
        return _round_to_odd(s, e).astype(_F32)  # 53 >= 24 + 2 bits: one correct rounding
    # to odd in float32 (24 >= 11 + 2 and 8 + 2 bits), then once to float16/bfloat16: the
    # remainder of float32's nearest value is d + e (d = s - f exact, |e| <= |d| / 2 unless
    # d == 0); float32's overflow to infinity rounds to odd as its largest value, which
    # overflows the narrow types too
    f = s.astype(_F32)
    return _round_to_odd(f, (s - f.astype(_F64)) + e).astype(a.dtype)


#: float64 operands and intermediate values inside these magnitudes keep the error-free
#: transformations exact (Veltkamp's split multiplies by 2**27 + 1; a product's error term
#: must not underflow); outside them an element is computed in rationals
_SPLIT_MAX, _SAFE_MAX, _SAFE_MIN = 2.0 ** 990, 2.0 ** 990, 2.0 ** -900


def _split(x):
    t = 134217729.0 * x                         # 2**27 + 1
    hi = t - (t - x)
    return hi, x - hi


def _fma_f64(a, b, c):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    ep = (((ah * bh - p) + ah * bl) + al * bh) + al * bl   # p + ep == a * b exactly
    th, tl = _two_sum(c, p)
    v = _round_to_odd(*_two_sum(tl, ep))
    out = th + v
    finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    zero_product = (a == 0) | (b == 0)
    safe = (finite & (np.abs(a) < _SPLIT_MAX) & (np.abs(b) < _SPLIT_MAX)
            & (np.abs(c) < _SAFE_MAX) & (np.abs(p) < _SAFE_MAX)
            & ((np.abs(p) >= _SAFE_MIN) | zero_product)
            & ((np.abs(out) >= _SAFE_MIN) | (out == 0)))
    naive = p + c
    # an exactly zero product: p + c is exact, signed zeros included (-0 * 1 + -0 is -0)
    out = np.where(zero_product, naive, out)
    # IEEE on non-finite inputs: infinities or NaNs among the factors propagate as in
    # fl(a * b) + c; finite factors with an infinite or NaN addend give the addend
    out = np.where(finite, out, np.where(np.isfinite(a) & np.isfinite(b), c, naive))
    rest = np.flatnonzero(finite & ~safe & ~zero_product)
    if rest.size:
        out = np.array(out, copy=True)
        flat, fa, fb, fc = out.reshape(-1), a.reshape(-1), b.reshape(-1), c.reshape(-1)
        for i in rest:
            flat[i] = fma_rational(float(fa[i]), float(fb[i]), float(fc[i]))
    return out


def fma_rational(a: float, b: float, c: float) -> float:
    """``a * b + c`` of finite Python floats, computed exactly in rationals and rounded once
    to float64 (round to nearest even; overflow gives an infinity).

    Args:
      a, b, c: finite floats.

    Returns:
      The correctly rounded fused multiply-add.

    Example:
      >>> fma_rational(0.1, 10.0, -1.0)
      5.551115123125783e-17
    """
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    if exact == 0:
        return a * b + c        # exact product zero: IEEE's signed zero; otherwise +0
    try:
        return exact.numerator / exact.denominator   # int / int is correctly rounded
    except OverflowError:
        return float("inf") if exact > 0 else float("-inf")


@impl(fma_p, fresh=True)  # (np.where, astype or np.empty on every path)
@quiet
def _fma(a, b, c):
    a, b, c = np.broadcast_arrays(np.asarray(a), np.asarray(b), np.asarray(c))
    kernel = _fma_f64 if a.dtype == _F64 else _fma_narrow
    if a.size <= _CHUNK:
        return np.asarray(kernel(a, b, c), a.dtype)
    # chunk by chunk, so that the dozen float64 temporaries stay in the cache
    out = np.empty(a.shape, a.dtype)
    flat, ops = out.reshape(-1), [np.ravel(x) for x in (a, b, c)]
    for i in range(0, a.size, _CHUNK):
        flat[i:i + _CHUNK] = kernel(*(x[i:i + _CHUNK] for x in ops))
    return out


_CHUNK = 1 << 14
