"""Scalar helpers the generated kernels call (compiled by numba into the caller's loop).

Each follows XLA's semantics where they differ from Python's or C's: NaN-propagating
max/min, truncating integer division with division by zero giving -1, ``rem`` by zero giving
the dividend. The generated code casts every result to the output dtype, so helpers compute
in a wide type (int64, float64) where that is exact.
"""
from __future__ import annotations

import numpy as np
from numba import njit

_opts = dict(cache=True, nogil=True, error_model="numpy", inline="never")


@njit(**_opts)
def fmax(a, b):
    """``np.maximum`` on scalars: NaN wins; otherwise ``a if a > b else b``."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a > b else b


@njit(**_opts)
def fmin(a, b):
    """``np.minimum`` on scalars: NaN wins; otherwise ``a if a < b else b``."""
    if a != a:
        return a
    if b != b:
        return b
    return a if a < b else b


@njit(**_opts)
def idiv(x, y):
    """Truncating division of int64 values; by zero: -1 (XLA). No overflow trap on MIN / -1."""
    if y == 0:
        return np.int64(-1)
    if y == -1:
        return np.int64(0) - x
    q = x // y
    if (x - q * y) != 0 and ((x < 0) != (y < 0)):
        q += 1
    return q


@njit(**_opts)
def irem(x, y):
    """C's ``fmod`` on int64 values (the dividend's sign); by zero: the dividend (XLA)."""
    if y == 0:
        return x
    if y == -1:
        return np.int64(0)
    r = x % y
    if r != 0 and ((r < 0) != (x < 0)):
        r -= y
    return r


@njit(**_opts)
def fsign(x):
    """``np.sign`` of a float: -1, 0 (for either zero) or 1, NaN for NaN."""
    if x > 0:
        return 1.0
    if x < 0:
        return -1.0
    if x != x:
        return x
    return 0.0


@njit(**_opts)
def logistic(x):
    """``1 / (1 + exp(-x))`` without overflow for large negative ``x``."""
    if x >= 0:
        return 1.0 / (1.0 + np.exp(-x))
    e = np.exp(x)
    return e / (1.0 + e)


@njit(**_opts)
def round_away(x):
    """Rounding half away from zero (``lax.round`` with ``AWAY_FROM_ZERO``)."""
    t = np.trunc(x)
    if abs(x - t) >= 0.5:
        return t + (1.0 if x > 0 else -1.0)
    return t


# ---------------------------------------------------------------- float32 exp without libm

from llvmlite import ir as _ir  # noqa: E402
from numba import types as _types  # noqa: E402
from numba.extending import intrinsic as _intrinsic  # noqa: E402


@_intrinsic
def _int32_bits_as_float32(typingctx, x):
    """The float32 whose bit pattern is the int32 ``x`` (a register bit-cast)."""
    if x != _types.int32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], _ir.FloatType())

    return _types.float32(_types.int32), codegen


_LOG2E = np.float32(1.44269504088896341)
_LN2_HI = np.float32(0.693359375)        # Cody-Waite split of ln 2 (Cephes expf)
_LN2_LO = np.float32(-2.12194440e-4)
_P0, _P1, _P2 = np.float32(1.9875691500e-4), np.float32(1.3981999507e-3), np.float32(8.3334519073e-3)
_P3, _P4, _P5 = np.float32(4.1665795894e-2), np.float32(1.6666665459e-1), np.float32(5.0000001201e-1)
_LO, _HI, _HALF, _ONE = np.float32(-104.0), np.float32(89.0), np.float32(0.5), np.float32(1.0)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def exp_f32(x):
    """``exp`` of a float32, branch-free (so loops calling it vectorise).

    Cody-Waite reduction ``x = n ln2 + r`` and Cephes' degree-6 polynomial for ``exp(r)``;
    ``2**n`` is built from its bits in two factors, so results that underflow to subnormals
    round once. Measured error: at most 1 ulp against a float64 exp over the float32 range
    (tests/numba/test_exp_f32.py); inf, -inf, NaN, overflow and underflow as IEEE.
    """
    xc = min(max(x, _LO), _HI)
    n = np.floor(xc * _LOG2E + _HALF)
    r = xc - n * _LN2_HI - n * _LN2_LO
    z = r * r
    p = (((((_P0 * r + _P1) * r + _P2) * r + _P3) * r + _P4) * r + _P5) * z + r + _ONE
    ni = np.int32(n)
    h = ni >> np.int32(1)
    s1 = _int32_bits_as_float32(np.int32((h + np.int32(127)) << np.int32(23)))
    s2 = _int32_bits_as_float32(np.int32((ni - h + np.int32(127)) << np.int32(23)))
    out = p * s1 * s2
    return x if x != x else out


# Cephes tanhf's odd polynomial for |x| < 0.625: tanh(x) = x + x z P(z), z = x*x
_T0, _T1, _T2 = np.float32(-5.70498872745e-3), np.float32(2.06390887954e-2), np.float32(-5.37397155531e-2)
_T3, _T4 = np.float32(1.33314422036e-1), np.float32(-3.33332819422e-1)
_TSMALL, _TBIG, _TWO = np.float32(0.625), np.float32(9.5), np.float32(2.0)


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def tanh_f32(x):
    """``tanh`` of a float32 without a libm call, branch-free (loops calling it vectorise).

    ``|x| < 0.625``: Cephes' odd polynomial ``x + x z P(z)``; otherwise
    ``1 - 2 / (exp_f32(2|x|) + 1)`` with the sign of ``x`` (``|x|`` clamped to 9.5, where the
    result is 1 in float32). Measured error: at most 1.32 ulps against a float64 tanh over a
    dense sweep of [-12, 12] and powers of two down to 2**-139 (tests/numba/test_exp_f32.py); +-0, +-inf and NaN as IEEE.
    """
    ax = abs(x)
    z = x * x
    p = ((((_T0 * z + _T1) * z + _T2) * z + _T3) * z + _T4) * z * x + x
    e = exp_f32(_TWO * min(ax, _TBIG))
    q = _ONE - _TWO / (e + _ONE)
    q = q if x >= 0 else -q
    r = p if ax < _TSMALL else q
    return r if ax > 0 else x  # NaN and +-0 unchanged


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def logistic_f32(x):
    """``1 / (1 + exp(-x))`` of a float32 without a libm call, branch-free.

    With ``e = exp_f32(-|x|)`` (never overflows): ``1 / (1 + e)`` for ``x >= 0`` and
    ``e / (1 + e)`` below. Measured error: at most 2.33 ulps against float64 over a dense
    sweep of [-104, 20] (tests/numba/test_exp_f32.py); subnormal results within 2**-149.
    """
    e = exp_f32(-abs(x))
    d = _ONE + e
    r = (_ONE if x >= 0 else e) / d
    return x if x != x else r


# ---------------------------------------------------------------- bit reinterpretation, nextafter

@_intrinsic
def bitcast(typingctx, x, like):
    """The value of ``like``'s type whose bit pattern is ``x``'s (``lax.bitcast_convert_type``
    between same-width numbers: a register bit-cast, no memory round trip, so loops calling it
    vectorise). ``like`` gives only the type (``bitcast(bits, np.float32(0))``)."""
    if not (isinstance(x, (_types.Integer, _types.Float))
            and isinstance(like, (_types.Integer, _types.Float))
            and x.bitwidth == like.bitwidth):
        return None

    def codegen(context, builder, signature, args):
        to = context.get_value_type(signature.return_type)
        return args[0] if args[0].type == to else builder.bitcast(args[0], to)

    return like(x, like), codegen


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def nextafter_f32(x, y):
    """``np.nextafter`` of float32 values, exactly, on the bit pattern (branch-free).

    NaN in either: ``x + y``; ``x == y``: ``y``; ``x`` zero: the smallest subnormal with
    ``y``'s sign; otherwise the pattern moves by one, up when moving away from zero.
    """
    b = bitcast(x, np.int32(0))
    away = (y > x) == (x > 0)
    moved = np.int32(b + (np.int32(1) if away else np.int32(-1)))
    tiny = np.int32(-2147483647) if y < 0 else np.int32(1)   # 0x80000001 / 0x00000001
    r = bitcast(tiny if x == 0 else moved, x)
    r = y if x == y else r
    return x + y if (x != x or y != y) else r


@njit(cache=True, nogil=True, error_model="numpy", inline="always")
def nextafter_f64(x, y):
    """``np.nextafter`` of float64 values, exactly (as :func:`nextafter_f32`)."""
    b = bitcast(x, np.int64(0))
    away = (y > x) == (x > 0)
    moved = np.int64(b + (np.int64(1) if away else np.int64(-1)))
    tiny = np.int64(-9223372036854775807) if y < 0 else np.int64(1)
    r = bitcast(tiny if x == 0 else moved, x)
    r = y if x == y else r
    return x + y if (x != x or y != y) else r
