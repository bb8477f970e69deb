"""Scalar helpers the generated kernels call (compiled by numba into the caller's loop).

Each follows XLA's semantics where they differ from Python's or C's: NaN-propagating
max/min with -0 below +0, truncating integer division with division by zero giving -1,
``rem`` by zero giving the dividend. The generated code casts every result to the output dtype, so helpers compute
in a wide type (int64, float64) where that is exact.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from plax_numba.inlining import scalar_helper

_opts = dict(cache=True, nogil=True, error_model="numpy", inline="never")


@scalar_helper
def fmax(a, b):
    """XLA's ``max`` on float scalars: NaN wins (``a``'s first), ``-0 < +0``, otherwise the
    larger. One select, no branches, inlined: loops calling it (relu, clamps) vectorise."""
    # a NaN ``b`` fails every test and is the result; of two equal operands ``a`` is taken
    # when ``b`` is -0 (two zeros give +0 unless both are -0)
    return a if (a > b) | (a != a) | ((a == b) & (math.copysign(1.0, b) < 0.0)) else b


@scalar_helper
def fmin(a, b):
    """XLA's ``min`` on float scalars: NaN wins (``a``'s first), ``-0 < +0``, otherwise the
    smaller. One select, as :func:`fmax`."""
    # of two equal operands ``a`` is taken when ``b`` is +0 (two zeros give -0 unless both
    # are +0)
    return a if (a < b) | (a != a) | ((a == b) & (math.copysign(1.0, b) > 0.0)) else b


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


# ---------------------------------------------------------------- bit casts, float32 exp without libm

from numba import types as _types  # noqa: E402
from numba.extending import intrinsic as _intrinsic  # noqa: E402


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


def _fma_for(kind):
    def typer(typingctx, a, b, c):
        if not (a == b == c == kind):
            return None

        def codegen(context, builder, signature, args):
            return builder.fma(*args)

        return kind(kind, kind, kind), codegen
    return typer


fma_f32 = _intrinsic(_fma_for(_types.float32))
fma_f32.__doc__ = """``a * b + c`` of float32 values rounded once (LLVM's ``llvm.fma``).

    Exactly rounded, so the result is the same on every CPU; where the CPU has FMA units the
    vectorised loop uses them, elsewhere LLVM calls libm's ``fmaf`` (slower, same bits). Only
    the polynomial kernels use it (here and in :mod:`plax_numba.libm_free`): their error
    bounds are measured with it. The generated kernels never contract ``a * b + c`` on their
    own (results must match the reference backend's rounding).
    """
fma_f64 = _intrinsic(_fma_for(_types.float64))
fma_f64.__doc__ = """``a * b + c`` of float64 values rounded once: :func:`fma_f32` for float64."""


def constant_table(values, name: str):
    """An intrinsic ``load(i)`` giving ``values[i]`` (as float64) from a constant LLVM global.

    A global NumPy array would do the same, but numba reference-counts it on every access,
    and those calls stop the caller's loop from vectorising; this compiles to one (gathered)
    load. ``name`` must be unique per table (it names the global); ``i`` is not bounds-checked.
    """
    from llvmlite import ir
    data = tuple(float(v) for v in values)

    def typer(typingctx, index):
        if not isinstance(index, _types.Integer):
            return None

        def codegen(context, builder, signature, args):
            kind = ir.ArrayType(ir.DoubleType(), len(data))
            table = builder.module.globals.get(name)
            if table is None:
                table = ir.GlobalVariable(builder.module, kind, name=name)
                table.global_constant = True
                table.linkage = "internal"
                table.initializer = ir.Constant(kind, data)
            i = args[0]
            if i.type.width < 64:
                i = builder.sext(i, ir.IntType(64))
            zero = ir.Constant(ir.IntType(64), 0)
            return builder.load(builder.gep(table, [zero, i], inbounds=True))

        return _types.float64(index), codegen
    return _intrinsic(typer)


# exp(r) = 1 + r + r**2 Q(r) on |r| <= ln2/2 after a Cody-Waite split of ln 2 (Cephes expf):
# Q of degree 4, fitted for the least maximum relative error (3.1e-9, far below float32's
# 6e-8 rounding; Cephes' degree-5 Q costs one more fused multiply-add for nothing float32 can
# show); the constants live in a numba-free module the LLVM first tier reads too
from plax_numba.f32_coefficients import (  # noqa: E402
    LOG2E as _LOG2E, LN2_HI as _LN2_HI, LN2_LO as _LN2_LO, Q0 as _Q0, Q1 as _Q1, Q2 as _Q2,
    Q3 as _Q3, Q4 as _Q4, LO as _LO, HI as _HI, ONE as _ONE, ROUNDER as _ROUNDER,
    ROUNDER_BITS as _ROUNDER_BITS)


@scalar_helper
def exp_f32(x):
    """``exp`` of a float32, branch-free (so loops calling it vectorise).

    ``n = round(x / ln2)`` by adding 1.5 * 2**23 (the integer lands in the low mantissa bits,
    no conversion instruction), Cody-Waite reduction ``r = x - n ln2``, a degree-6 polynomial
    for ``exp(r)`` evaluated with fused multiply-adds (:func:`fma_f32`), then ``2**n`` applied
    in two steps: an exponent-field add that stays in the normal range, and one multiply that
    is exact for normal results and rounds once for subnormal ones or overflows to inf.
    Measured error: at most 0.99 ulp against a float64 exp over every float32 input (an
    exhaustive sweep; subnormal results within 2**-149); tests/numba/test_exp_f32.py samples
    it. inf, -inf, NaN, overflow and underflow as IEEE.
    """
    xc = min(max(x, _LO), _HI)
    t = fma_f32(xc, _LOG2E, _ROUNDER)
    n = t - _ROUNDER
    ni = bitcast(t, np.int32(0)) - _ROUNDER_BITS
    r = fma_f32(-n, _LN2_HI, xc)
    r = fma_f32(-n, _LN2_LO, r)
    q = fma_f32(fma_f32(fma_f32(fma_f32(_Q4, r, _Q3), r, _Q2), r, _Q1), r, _Q0)
    # not fma(q, r*r, r): rounding q*r*r on its own keeps the bound below 1 ulp
    p = (q * (r * r) + r) + _ONE                    # in [0.70, 1.42]
    # p * 2**e1 by its exponent field (p's exponent is 126 or 127, so the sum stays normal),
    # then 2**(n - e1), which is 1 unless the result is subnormal (n < -125) or overflows
    e1 = min(max(ni, np.int32(-125)), np.int32(127))
    scaled = bitcast(np.int32(bitcast(p, np.int32(0)) + (e1 << np.int32(23))), p)
    out = scaled * bitcast(np.int32((ni - e1 + np.int32(127)) << np.int32(23)), p)
    return x if x != x else out


# tanh(x) = x N(z) / D(z), z = x*x, on |x| <= 9.1 (beyond it float32's tanh is +-1): N and D
# of degree 4 with N(0) = D(0) = 1, fitted for the least maximum relative error (2.4e-8) and
# rounded to float32 one coefficient at a time, the others refitted (2.5e-8;
# benchmarks/fit_tanh_f32.py)
from plax_numba.f32_coefficients import (  # noqa: E402
    N1 as _N1, N2 as _N2, N3 as _N3, N4 as _N4, D1 as _D1, D2 as _D2, D3 as _D3, D4 as _D4,
    TBIG as _TBIG)


@scalar_helper
def tanh_f32(x):
    """``tanh`` of a float32 without a libm call or ``exp``, branch-free (loops calling it
    vectorise).

    One rational ``x N(x**2) / D(x**2)`` on ``x`` clamped to ``[-9.1, 9.1]`` (the clamped
    value already rounds to +-1), ``N`` and ``D`` of degree 4 by Estrin's scheme: about 14
    operations with a chain of 8 and one division, which is what a ``scan`` whose carry
    goes through ``tanh`` waits for at every step (the former ``1 - 2 / (exp(2|x|) + 1)``
    with a polynomial below 0.625, 1.31 ulps, took ~2x the time there). Measured error: at
    most 4.96 ulps against a float64 tanh (the float32 evaluation of ``N`` and ``D``; JAX's
    float32 ``tanh`` is 4.8 ulps off on the same inputs) over a dense sweep of [-12, 12],
    every third float32 from 2**-7 to 12 and powers of two down to 2**-139
    (tests/numba/test_tanh_logistic_f32.py, benchmarks/fit_tanh_f32.py); +-0, +-inf and NaN
    as IEEE (+-0 keeps its sign: ``0 * N / D``).
    """
    xc = min(max(x, -_TBIG), _TBIG)
    z = xc * xc
    z2 = z * z
    # Estrin's scheme: two dependent fused multiply-adds after z**2 instead of four
    n = fma_f32(z2, fma_f32(z2, _N4, fma_f32(z, _N3, _N2)), fma_f32(z, _N1, _ONE))
    d = fma_f32(z2, fma_f32(z2, _D4, fma_f32(z, _D3, _D2)), fma_f32(z, _D1, _ONE))
    r = (xc * n) / d
    return r if x == x else x  # NaN unchanged (the clamp may not keep it)


@scalar_helper
def logistic_f32(x):
    """``1 / (1 + exp(-x))`` of a float32 without a libm call, branch-free.

    With ``e = exp_f32(-|x|)`` (never overflows): ``1 / (1 + e)`` for ``x >= 0`` and
    ``e / (1 + e)`` below. Measured error: at most 2.26 ulps against float64 over a dense
    sweep of [-104, 20] (tests/numba/test_tanh_logistic_f32.py); subnormal results within
    2**-149.
    """
    e = exp_f32(-abs(x))
    d = _ONE + e
    r = (_ONE if x >= 0 else e) / d
    return x if x != x else r


# ---------------------------------------------------------------- nextafter

@scalar_helper
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


@scalar_helper
def nextafter_f64(x, y):
    """``np.nextafter`` of float64 values, exactly (as :func:`nextafter_f32`)."""
    b = bitcast(x, np.int64(0))
    away = (y > x) == (x > 0)
    moved = np.int64(b + (np.int64(1) if away else np.int64(-1)))
    tiny = np.int64(-9223372036854775807) if y < 0 else np.int64(1)
    r = bitcast(tiny if x == 0 else moved, x)
    r = y if x == y else r
    return x + y if (x != x or y != y) else r


@scalar_helper
def fma_odd_f32(a, b, c):
    """``a * b + c`` of float16/bfloat16 values (held as float32) rounded to odd in float32,
    so that the one rounding to the narrow format that follows is the correctly rounded fma
    (24 bits >= 11 + 2 and 8 + 2). Computed in float64, where the product is exact: the
    sum's error by two-sum, then float32's nearest value moved one step toward the exact sum
    where it is inexact and even (the NumPy backend's ``plax_numpy.impls_fma``, scalar)."""
    p = np.float64(a) * np.float64(b)
    z = np.float64(c)
    s = p + z
    zz = s - p
    e = (p - (s - zz)) + (z - zz)
    f = np.float32(s)
    d = s - np.float64(f)
    toward = d if d != 0 else e
    odd = (bitcast(f, np.int32(0)) & np.int32(1)) != 0
    keep = odd or toward == 0 or not np.isfinite(f)
    return f if keep else nextafter_f32(f, np.float32(np.inf) if toward > 0 else np.float32(-np.inf))


# ---------------------------------------------------------------- float16 and bfloat16
#
# The generated kernels hold float16/bfloat16 values as float32 locals (every such value is
# exactly a float32) and read and write the arrays as their uint16 bit patterns (numba has no
# bfloat16, and its float16 support is partial): an operation on them computes in float32 and
# rounds once to the narrow format (round to nearest, ties to even), which is what the NumPy
# backend's kernels do (NumPy's half arithmetic and ml_dtypes' bfloat16 compute in float32).

_F16_MAGIC = np.float32(5.192296858534828e+33)   # 2**112: float16's exponent bias to float32's


@scalar_helper
def f16_value(h):
    """The float32 value of the float16 whose bit pattern is ``h`` (a uint16), exactly.

    The exponent and mantissa shifted into float32's fields and scaled by ``2**112`` (exact
    for normal and subnormal values alike); infinities and NaN get float32's all-ones
    exponent. Branch-free (selects), so loops calling it vectorise.
    """
    b = np.int32(h)
    body = np.int32((b & np.int32(0x7FFF)) << np.int32(13))
    scaled = bitcast(body, np.float32(0)) * _F16_MAGIC
    special = bitcast(np.int32(body | np.int32(0x7F800000)), np.float32(0))
    r = special if body >= np.int32(0x0F800000) else scaled
    sign = np.int32((b & np.int32(0x8000)) << np.int32(16))
    return bitcast(np.int32(bitcast(r, np.int32(0)) | sign), np.float32(0))


@scalar_helper
def f16_bits(x):
    """The uint16 bit pattern of the float16 nearest to the float32 ``x`` (ties to even).

    Overflow gives +-inf, NaN a quiet NaN; subnormal results round once, by adding a magic
    number whose ulp is float16's smallest subnormal; normal ones by adding half an ulp less
    one (plus the kept mantissa's last bit, for ties to even) before dropping 13 bits.
    Branch-free.
    """
    u = bitcast(np.float32(x), np.int32(0))
    sign = np.int32((u >> np.int32(16)) & np.int32(0x8000))
    a = np.int32(u & np.int32(0x7FFFFFFF))
    # overflow (|x| >= 65520 rounds to inf; from 2**16 on the normal path would wrap) and NaN
    big = np.int32(0x7E00) if a > np.int32(0x7F800000) else np.int32(0x7C00)
    # subnormal results (|x| < 2**-14): x + 0.5 leaves x's float16 rounding in the low bits
    sub = np.int32(bitcast(bitcast(a, np.float32(0)) + np.float32(0.5), np.int32(0))
                   - np.int32(0x3F000000))
    odd = (a >> np.int32(13)) & np.int32(1)
    normal = np.int32((a - np.int32(0x38000000) + np.int32(0x0FFF) + odd) >> np.int32(13))
    r = sub if a < np.int32(0x38800000) else normal
    r = big if a >= np.int32(0x47800000) else r
    return np.uint16(r | sign)


_SIGN32 = np.int32(-0x80000000)


@scalar_helper
def round_f16(x):
    """``x`` rounded to float16 (ties to even), as a float32: ``f16_value(f16_bits(x))``,
    bit for bit (every float16 pattern, the midpoints and their neighbours, random float32
    patterns: tests/numba/test_low_float_loops.py).

    In float32 arithmetic: adding and subtracting ``c = +-2**(e+13)`` (``x``'s sign, ``2**e``
    its binade) rounds ``x`` to 11 significant bits in the FPU's round-to-nearest-even; below
    float16's normal range ``c = +-0.5`` rounds to its subnormal spacing, ``2**-24``. The sign
    is put back (so ``-0`` and values rounding to zero keep it), and from 65520 on (the
    rounding boundary above float16's largest value) the result is an infinity of ``x``'s
    sign; NaN stays NaN. A few float operations instead of the bit form's two integer
    conversions: in a loop that does not vectorise (a fused reduction along the loop's axis)
    the bit form cost ~15 ns per element on the 2-core host, this one ~2 ns with one rounding
    per element; with two roundings per element such loops measured 4 to 30 ms per 1M
    elements from one compilation to the next (cause not found: not the data, not a branch).
    """
    x = np.float32(x)
    u = bitcast(x, np.int32(0))
    sign = np.int32(u & _SIGN32)
    e = np.int32(np.int32(u & np.int32(0x7F800000)) + np.int32(13 << 23))
    e = e if e > np.int32(0x3F000000) else np.int32(0x3F000000)  # (also where it wrapped)
    c = bitcast(np.int32(e | sign), np.float32(0))
    r = (x + c) - c
    r = bitcast(np.int32(bitcast(r, np.int32(0)) | sign), np.float32(0))
    big = bitcast(np.int32(sign | np.int32(0x7F800000)), np.float32(0))
    return big if abs(x) >= np.float32(65520.0) else r


@scalar_helper
def bf16_value(h):
    """The float32 value of the bfloat16 whose bit pattern is ``h`` (a uint16): its 16 bits
    are float32's high half."""
    return bitcast(np.int32(np.int32(h) << np.int32(16)), np.float32(0))


@scalar_helper
def bf16_bits(x):
    """The uint16 bit pattern of the bfloat16 nearest to the float32 ``x`` (ties to even; NaN
    gives a quiet NaN of the same sign, overflow +-inf), as ml_dtypes rounds. Branch-free."""
    u = np.uint32(bitcast(np.float32(x), np.int32(0)))
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    nan = (u >> np.uint32(16)) | np.uint32(0x40)
    return np.uint16(nan if x != x else rounded)


@scalar_helper
def round_bf16(x):
    """``x`` rounded to bfloat16 (ties to even), as a float32."""
    return bf16_value(bf16_bits(x))
