"""GPU kernels of the precision and bit-level primitives, and of the elementwise ones on the
dtypes fused kernels may decline (float16, bfloat16, complex): convert_element_type,
bitcast_convert_type, reduce_precision, nextafter, square, clz, mulhi, select_n, clamp,
complex, real, imag, conj.

Integer arithmetic on the bits (reduce_precision's rounding, clz's binary search, mulhi's
32-bit halves, nextafter's step of one unit) is CuPy array arithmetic on unsigned views, so it
wraps as XLA specifies; conversions follow XLA (float to integer saturates and maps NaN to 0,
complex to real keeps the real part). nextafter and select_n take bfloat16 operands as their
bits (``bf16 = "bits"``): nextafter's step of one unit only exists on the bits; so do
bitcast_convert_type's.
"""
from __future__ import annotations

import numpy as np

import cupy

from plax import lax
from plax.lax.extra_elementwise import clz_array, clz_p, mulhi_array, mulhi_p, square_p
from plax.lax.fused_multiply_add import fma_p
from plax.lax.precision import reduce_precision_array, reduce_precision_p
from plax.lowering import signed_zeros
from plax_cupy.backend import BF16, Bf16Buffer
from plax_cupy.codegen import convert_expr
from plax_cupy.kernels import kernel
from plax_cupy.kernels_elementwise import astype, elementwise, primitive_elementwise
from plax_cupy.kernels_shape import on_bits


def _contiguous(x):
    return x if x.flags.c_contiguous else x.copy()


# ---------------------------------------------------------------- conversions

@kernel(lax.convert_element_type_p)
def _convert_element_type(x, *, new_dtype, weak_type):
    new_dtype = np.dtype(new_dtype)
    if new_dtype.kind == "b":
        if x.dtype in (np.float32, np.complex64):
            # plax-compiled: CuPy's comparison is setp.ne.ftz.f32, which takes a float32
            # subnormal (bfloat16's too, widened) for zero
            return elementwise(convert_expr("a0", x.dtype, new_dtype), new_dtype, x)
        return x != 0
    if x.dtype.kind == "c" and new_dtype.kind != "c":
        x = x.real
    if new_dtype.kind in "iu" and x.dtype.kind == "f":
        # XLA: truncate, saturate out-of-range values, NaN -> 0. The bounds 2**(bits-1) and
        # 2**bits are exact in float64; values are clipped below the upper one before the
        # cast (which is undefined out of range) and the saturated ones set afterwards.
        info = np.iinfo(new_dtype)
        upper, lower = float(info.max) + 1.0, float(info.min)
        t = cupy.trunc(x.astype(np.float64))
        t = cupy.where(cupy.isnan(t), 0.0, t)
        out = cupy.clip(t, lower, np.nextafter(upper, 0.0)).astype(new_dtype)
        return cupy.where(t >= upper, new_dtype.type(info.max), out)
    return astype(x, new_dtype)   # (float32 <-> float64 plax-compiled: CuPy's cvt flushes)


@kernel(lax.bitcast_convert_type_p)
def _bitcast_convert_type(x, *, new_dtype):
    """The same bits as another type; between widths the last axis splits or joins, as XLA's.
    bfloat16 is taken and given as its uint16 bits (``bf16 = "bits"``)."""
    new_dtype = np.dtype(new_dtype)
    to_bf16 = new_dtype == BF16
    target = np.dtype(np.uint16) if to_bf16 else new_dtype
    x = _contiguous(x.bits if isinstance(x, Bf16Buffer) else x)
    old, new = x.dtype.itemsize, target.itemsize
    if old == new:
        out = x.view(target)
    elif old > new:
        out = x.reshape(x.shape + (1,)).view(target).reshape(x.shape + (old // new,))
    else:
        out = x.view(target).reshape(x.shape[:-1])
    return Bf16Buffer(out) if to_bf16 else out


_bitcast_convert_type.bf16 = "bits"


@kernel(reduce_precision_p)
def _reduce_precision(x, *, exponent_bits, mantissa_bits):
    """Rounds on the bits (:func:`plax.lax.precision.reduce_precision_array`). bfloat16
    operands arrive widened to float32, which holds every bfloat16 value exactly and gives the
    same rounding (bfloat16 and float32 share their exponent range)."""
    return reduce_precision_array(x, exponent_bits, mantissa_bits, xp=cupy)


#: the expression of float16/bfloat16 ``nextafter`` on the operands' 16-bit patterns (``a0``,
#: ``a1``): the generated kernels' own helpers, so the table gives ``jit``'s bits
_NEXTAFTER_16 = {"float16": "plax_f16_bits(plax_nextafter_f16(plax_f16_value(a0), plax_f16_value(a1)))",
                 "bfloat16": "plax_bf16_bits(plax_nextafter_bf16(plax_bf16_value(a0), "
                             "plax_bf16_value(a1)))"}


@kernel(lax.nextafter_p)
def _nextafter(x, y):
    """The next representable value after ``x`` towards ``y`` (``y`` where equal, NaN if either
    is NaN); float16 and bfloat16 step their bit pattern by one. One plax-compiled kernel on
    every float dtype: CuPy's ``nextafter`` flushes float32 subnormals, the very values
    nextafter steps to from zero, and its comparisons of widened bfloat16 values (float32
    subnormals below 1.2e-38) flush them too."""
    if isinstance(x, Bf16Buffer):
        return Bf16Buffer(elementwise(_NEXTAFTER_16["bfloat16"], np.uint16, x.bits, y.bits))
    if x.dtype == np.float16:
        return elementwise(_NEXTAFTER_16["float16"], np.uint16, x.view(np.uint16),
                           y.view(np.uint16)).view(np.float16)
    return elementwise("plax_nextafter(a0, a1)", x.dtype, x, y)


_nextafter.bf16 = "bits"


@kernel(fma_p)
def _fma(a, b, c):
    """``a * b + c`` rounded once: the device's ``fma``/``fmaf``; float16 and bfloat16 through
    the generated kernels' own ``plax_fma_odd_f32`` (rounded to odd in float32, then once to the
    narrow type), on their 16-bit patterns. One plax-compiled kernel (no flushing)."""
    if isinstance(a, Bf16Buffer):
        return Bf16Buffer(elementwise(_FMA_16.format(t="bf16"), np.uint16, a.bits, b.bits, c.bits))
    if a.dtype == np.float16:
        halves = (x.view(np.uint16) for x in (a, b, c))
        return elementwise(_FMA_16.format(t="f16"), np.uint16, *halves).view(np.float16)
    return elementwise("fmaf(a0, a1, a2)" if a.dtype == np.float32 else "fma(a0, a1, a2)",
                       a.dtype, a, b, c)


_fma.bf16 = "bits"
_FMA_16 = ("plax_{t}_bits(plax_fma_odd_f32(plax_{t}_value(a0), plax_{t}_value(a1), "
           "plax_{t}_value(a2)))")


# ---------------------------------------------------------------- extra elementwise

@kernel(square_p)
def _square(x):
    """``x * x`` in ``x``'s dtype (integers wrap); float32/float64 and complex as a
    plax-compiled kernel (CuPy's product flushes float32 subnormal results: squares of values
    between about 3.7e-23 and 1.1e-19)."""
    if x.dtype in (np.float32, np.float64, np.complex64, np.complex128):
        return elementwise("a0 * a0", x.dtype, x)
    return x * x


@kernel(clz_p)
def _clz(x):
    """Leading zero bits (:func:`plax.lax.extra_elementwise.clz_array`)."""
    return clz_array(x, xp=cupy)


@kernel(mulhi_p)
def _mulhi(x, y):
    """The high half of the double-width product
    (:func:`plax.lax.extra_elementwise.mulhi_array`)."""
    return mulhi_array(x, y, xp=cupy)


# ---------------------------------------------------------------- select, clamp, complex

@kernel(lax.select_n_p)
@on_bits
def _select_n(which, *cases):
    """``cases[which]`` elementwise (``which`` boolean or int32, in range)."""
    if len(cases) == 1:
        shape = np.broadcast_shapes(which.shape, cases[0].shape)  # (of the shapes only)
        return cupy.broadcast_to(cases[0], shape).copy()
    if which.dtype.kind == "b":
        return cupy.where(which, cases[1], cases[0])
    out = cases[-1]
    for i in range(len(cases) - 2, -1, -1):
        out = cupy.where(which == i, cases[i], out)
    return out


@kernel(lax.clamp_p)
def _clamp(lo, x, hi):
    if x.dtype in (np.float32, np.float64):  # plax-compiled: CuPy's max/min flush subnormals
        return elementwise("plax_min(plax_max(a1, a0), a2)", x.dtype, lo, x, hi)
    # (float16/bfloat16: XLA's -0 < +0 where CuPy returns either of two equal zeros)
    return signed_zeros.minimum(signed_zeros.maximum(x, lo, xp=cupy), hi,
                                xp=cupy).astype(x.dtype)


@kernel(lax.complex_p)
def _complex(x, y):
    """``x + i y`` with the parts written directly (``x + 1j * y`` would turn an infinite ``y``
    into a NaN real part)."""
    out_dtype = np.dtype(np.complex128 if x.dtype == np.float64 else np.complex64)
    x, y = cupy.broadcast_arrays(x, y)
    pairs = cupy.empty(x.shape + (2,), x.dtype)
    pairs[..., 0] = x
    pairs[..., 1] = y
    return pairs.view(out_dtype).reshape(x.shape)


@kernel(lax.real_p)
def _real(x):
    return x.real.copy() if x.dtype.kind == "c" else x


@kernel(lax.imag_p)
def _imag(x):
    return x.imag.copy() if x.dtype.kind == "c" else cupy.zeros(x.shape, x.dtype)


@kernel(lax.conj_p)
def _conj(x):
    if x.dtype.kind == "c":  # plax-compiled: CuPy's conj negates with flushing arithmetic
        return primitive_elementwise(lax.conj_p, x)
    return x.astype(np.complex128 if x.dtype == np.float64 else np.complex64)
