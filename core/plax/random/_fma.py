"""A correctly rounded fused multiply-add, ``a * b + c`` with one rounding, from plain float ops.

JAX's CPU compiler contracts ``x * y + z`` into one hardware FMA, so to give
JAX's bits (e.g. for ``uniform(minval=..., maxval=...)``) plax must round the
same way. NumPy has no ``fma``, and plax has no fma primitive, so this
emulates it exactly with error-free transformations (Dekker's product,
Knuth's sum) and Boldo & Melquiond's round-to-odd step ("Emulation of FMA and
correctly-rounded sums: proved algorithms using rounding to odd", IEEE
Trans. Computers 57(4), 2008). It needs no wider type, so float32 and
float64 both work with x64 off or on.
"""
from __future__ import annotations

import numpy as np

from plax import dtypes, lax
from plax.core.trace import get_aval


def _const(value, like_dtype):
    return lax.full((), value, like_dtype)


def _two_sum(a, b):
    """``(s, e)`` with ``s = fl(a + b)`` and ``s + e == a + b`` exactly."""
    s = lax.add(a, b)
    bb = lax.sub(s, a)
    e = lax.add(lax.sub(a, lax.sub(s, bb)), lax.sub(b, bb))
    return s, e


def _split(a, dtype):
    """Veltkamp's split: ``a == hi + lo`` with each half fitting in half the mantissa."""
    nmant = dtypes.finfo(dtype).nmant + 1
    factor = _const(float(2 ** ((nmant + 1) // 2) + 1), dtype)
    t = lax.mul(factor, a)
    hi = lax.sub(t, lax.sub(t, a))
    return hi, lax.sub(a, hi)


def _two_product(a, b, dtype):
    """``(p, e)`` with ``p = fl(a * b)`` and ``p + e == a * b`` exactly (barring overflow)."""
    p = lax.mul(a, b)
    ah, al = _split(a, dtype)
    bh, bl = _split(b, dtype)
    e = lax.add(lax.add(lax.add(lax.sub(lax.mul(ah, bh), p), lax.mul(ah, bl)), lax.mul(al, bh)),
                lax.mul(al, bl))
    return p, e


def _add_round_to_odd(x, y, dtype):
    """``x + y`` rounded to odd: exact sums unchanged, inexact ones to the odd neighbour."""
    s, e = _two_sum(x, y)
    uint = np.dtype(f"uint{dtypes.finfo(dtype).bits}")
    even = lax.eq(lax.bitwise_and(lax.bitcast_convert_type(s, uint), _const(1, uint)),
                  _const(0, uint))
    inexact = lax.ne(e, _const(0, dtype))
    toward = lax.select(lax.gt(e, _const(0, dtype)), lax.full_like(s, np.inf),
                        lax.full_like(s, -np.inf))
    return lax.select(lax.bitwise_and(even, inexact), lax.nextafter(s, toward), s)


def _fma_exact(a, b, c):
    dtype = get_aval(a).dtype
    uh, ul = _two_product(a, b, dtype)
    th, tl = _two_sum(c, uh)
    v = _add_round_to_odd(tl, ul, dtype)
    out = lax.add(th, v)
    # Overflow in the splitting (huge operands) or non-finite inputs: the plain formula is
    # then as good as any, and matches the hardware's infinities and NaNs.
    naive = lax.add(lax.mul(a, b), c)
    return lax.select(lax.is_finite(out), out, naive)


def fma(a, b, c):
    """``a * b + c`` rounded once, for equal-shaped (or rank-0) float operands of one dtype.

    Differentiable: the derivative is that of ``a * b + c``.

    Example:
      >>> fma(jnp.float32(0.1), jnp.float32(3.0), jnp.float32(-0.3))  # 0.1f * 3 - 0.3f, exactly
      Array(-7.450581e-09, dtype=float32)
    """
    return _fma_jvp_wrapped(a, b, c)


def _make_fma_custom_jvp():
    from plax.transforms.custom_derivatives import custom_jvp

    @custom_jvp
    def fma_(a, b, c):
        return _fma_exact(a, b, c)

    @fma_.defjvp
    def _fma_jvp(primals, tangents):
        a, b, c = primals
        ta, tb, tc = tangents
        out = fma_(a, b, c)
        return out, lax.add(lax.add(lax.mul(ta, b), lax.mul(a, tb)), tc)

    return fma_


_fma_jvp_wrapped = _make_fma_custom_jvp()
