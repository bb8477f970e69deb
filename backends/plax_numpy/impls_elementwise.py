"""NumPy implementations of the elementwise primitives (unary, binary, select, convert, special).

Integer semantics follow XLA, not NumPy: division truncates, division by zero
gives -1 (and ``rem`` gives the dividend), shifts by the bit width or more give
0 (or the sign for arithmetic shifts), float-to-int conversion saturates and
maps NaN to 0.

A kernel registered ``fresh`` (:func:`plax_numpy.registry.impl`) ends in a ufunc, ``np.where``,
``np.empty`` or a copying ``astype`` on every path, so its result is new writeable memory. The
others may hand back their operand or a view of it: ``integer_pow`` with ``y=1``, ``real`` and
``imag`` of a complex operand, ``bitcast_convert_type`` and ``stop_gradient``.
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax.dtypes import bfloat16
from plax.lowering import signed_zeros
from plax.lowering.emitter import fresh_result, returns_fresh
from plax_numpy.registry import impl, lowp, quiet



_quiet = quiet  # IEEE semantics: inf/nan results are values, not warnings


def _ufunc(prim, ufunc, low_precision: bool = True):
    fn = _quiet(lambda *args: ufunc(*args))
    fn = lowp(fn) if low_precision else fn
    # jit's code generator calls the ufunc directly when the operand dtypes allow it
    fn.__plax_ufunc__ = (ufunc, low_precision, None)
    # a ufunc called without ``out=`` allocates its result (np.real/np.imag are views)
    impl(prim, fresh=isinstance(ufunc, np.ufunc))(fn)


# ------------------------------------------------------------------ unary

for _prim, _uf in [
    (lax.exp_p, np.exp), (lax.exp2_p, np.exp2), (lax.log_p, np.log), (lax.log1p_p, np.log1p),
    (lax.expm1_p, np.expm1), (lax.tanh_p, np.tanh), (lax.sin_p, np.sin), (lax.cos_p, np.cos),
    (lax.tan_p, np.tan), (lax.asin_p, np.arcsin), (lax.acos_p, np.arccos), (lax.atan_p, np.arctan),
    (lax.sinh_p, np.sinh), (lax.cosh_p, np.cosh), (lax.asinh_p, np.arcsinh),
    (lax.acosh_p, np.arccosh), (lax.atanh_p, np.arctanh), (lax.sqrt_p, np.sqrt),
    (lax.cbrt_p, np.cbrt), (lax.floor_p, np.floor), (lax.ceil_p, np.ceil),
]:
    _ufunc(_prim, _uf)

_ufunc(lax.neg_p, np.negative, low_precision=False)
_ufunc(lax.is_finite_p, np.isfinite, low_precision=False)
_ufunc(lax.real_p, np.real, low_precision=False)
_ufunc(lax.imag_p, np.imag, low_precision=False)


@impl(lax.sign_p, fresh=True)
@_quiet
def _sign(x):
    if x.dtype.kind == "u":
        return (x != 0).astype(x.dtype)
    if x.dtype.itemsize == 2 and x.dtype.kind in "fV":
        return np.sign(x.astype(np.float32)).astype(x.dtype)
    return np.sign(x)


@impl(lax.abs_p, fresh=True)
@_quiet
def _abs(x):
    if x.dtype == bfloat16:
        return np.abs(x.astype(np.float32)).astype(x.dtype)
    return np.abs(x)


@impl(lax.rsqrt_p, fresh=True)
@lowp
@_quiet
def _rsqrt(x):
    one = np.ones((), x.dtype)
    return np.divide(one, np.sqrt(x))


@impl(lax.logistic_p, fresh=True)
@lowp
@_quiet
def _logistic(x):
    if x.dtype.kind == "c":
        return 1 / (1 + np.exp(-x))
    import scipy.special
    return scipy.special.expit(x)


@impl(lax.round_p, fresh=True)
@lowp
@_quiet
def _round(x, *, rounding_method):
    if rounding_method == 1:
        return np.rint(x)
    t = np.trunc(x)
    frac = x - t
    return t + np.where(np.abs(frac) >= 0.5, np.sign(x), np.zeros((), x.dtype)).astype(x.dtype)


@impl(lax.not_p, fresh=True)
def _not(x):
    return np.invert(x)


@impl(lax.population_count_p, fresh=True)
def _population_count(x):
    # NumPy counts the bits of |x| for signed types; XLA counts the two's complement pattern.
    x = np.asarray(x)
    return np.bitwise_count(x.view(np.dtype(f"u{x.dtype.itemsize}"))).astype(x.dtype)


@impl(lax.conj_p, fresh=True)
def _conj(x):
    if x.dtype.kind == "c":
        return np.conj(x)
    return x.astype(np.complex128 if x.dtype == np.float64 else np.complex64)


@impl(lax.integer_pow_p)
@_quiet
def _integer_pow(x, *, y):
    # Square-and-multiply in the operand's dtype, as XLA computes it.
    if y == 0:
        return np.ones_like(x)
    base = x.astype(np.float32) if x.dtype == bfloat16 else x
    n, acc = abs(y), None
    while n:
        if n & 1:
            acc = base if acc is None else acc * base
        n >>= 1
        if n:
            base = base * base
    if y < 0:
        acc = np.ones((), acc.dtype) / acc
    return np.asarray(acc).astype(x.dtype) if x.dtype == bfloat16 else acc


# ------------------------------------------------------------------ binary

_ufunc(lax.atan2_p, np.arctan2)


# not NumPy's ufuncs on floats: JAX orders -0 below +0 (plax.lowering.signed_zeros), and
# complex values lexicographically, a tie or a NaN giving the second operand
# (plax.lowering.complex_extremes, which signed_zeros' kernels call in their non-float
# branch, so a float call pays no complex check); jit's code generator still calls them
# directly on integers and bools, which have one zero
for _prim, _fn, _uf in [(lax.max_p, signed_zeros.maximum, np.maximum),
                        (lax.min_p, signed_zeros.minimum, np.minimum)]:
    _fn = lowp(_quiet(_fn))
    _fn.__plax_ufunc__ = (_uf, True, "biu")
    impl(_prim, fresh=True)(_fn)


@impl(lax.pow_p, fresh=True)
@lowp
@_quiet
def _pow(x, y):
    if y.dtype.kind in "iu":  # an integer exponent: converted to the base's dtype, as XLA's
        y = y.astype(x.dtype)
    out = np.power(x, y)
    if out.dtype.kind != "f":
        return out
    # NumPy computes x ** 0.5 as sqrt(x), which gives -0 and nan at x = -0 and -inf; IEEE pow
    # (and XLA, the Array API) gives |x| ** y there whenever y is not an odd integer. Only an
    # exponent of +-0.5 can take that path, so other exponents cost one look at y.
    x, y = np.asarray(x), np.asarray(y)
    if not (np.abs(y) == 0.5).any():
        return out
    negative_edge = np.signbit(x) & ((x == 0) | np.isinf(x))
    if negative_edge.any():
        odd_integer = (np.floor(y) == y) & (np.abs(np.fmod(y, 2)) == 1)
        out = np.where(negative_edge & ~odd_integer, np.power(np.abs(x), y), out)
    return out


@impl(lax.nextafter_p, fresh=True)
@_quiet
def _nextafter(x, y):
    x, y = np.broadcast_arrays(np.asarray(x), np.asarray(y))
    if x.dtype.itemsize > 2:
        return np.nextafter(x, y)
    # float16/bfloat16: the next value differs by one in the bit pattern (computing in float32
    # and rounding back would land on x again).
    bits = np.dtype(np.uint16)
    xf, yf = x.astype(np.float32), y.astype(np.float32)
    away = (yf > xf) == (xf > 0)   # moving away from zero makes the magnitude bits grow
    moved = x.view(bits).astype(np.int32) + np.where(away, 1, -1)
    from_zero = np.where(yf < 0, 0x8001, 0x0001)  # the smallest subnormal, with y's sign
    out_bits = np.where(xf == 0, from_zero, moved).astype(bits)
    out = out_bits.view(x.dtype)
    out = np.where(xf == yf, y, out)
    return np.where(np.isnan(xf) | np.isnan(yf), np.array(np.nan, x.dtype), out).astype(x.dtype)

for _prim, _uf in [(lax.add_p, np.add), (lax.add_any_p, np.add), (lax.sub_p, np.subtract),
                   (lax.mul_p, np.multiply), (lax.eq_p, np.equal), (lax.ne_p, np.not_equal),
                   (lax.lt_p, np.less), (lax.le_p, np.less_equal), (lax.gt_p, np.greater),
                   (lax.ge_p, np.greater_equal), (lax.and_p, np.bitwise_and),
                   (lax.or_p, np.bitwise_or), (lax.xor_p, np.bitwise_xor)]:
    _ufunc(_prim, _uf, low_precision=False)


def _float_or(float_op, int_op):
    """An XLA division-like op: ``float_op`` on inexact operands (bfloat16 computed in float32),
    ``int_op(x, y, zero, safe)`` on integers, with the divisor made safe where it is zero."""

    def fn(x, y):
        if x.dtype.kind not in "iu":
            if x.dtype == bfloat16:
                return float_op(x.astype(np.float32), y.astype(np.float32)).astype(x.dtype)
            return float_op(x, y)
        x, y = np.broadcast_arrays(x, y)
        zero = y == 0
        safe = np.where(zero, np.ones((), y.dtype), y)
        return int_op(x, y, zero, safe).astype(x.dtype)

    return _quiet(fn)


def _int_div(x, y, zero, safe):
    q = np.floor_divide(x, safe)
    # floor -> truncation toward zero where the signs differ and the division is inexact
    if x.dtype.kind == "i":
        fix = (np.remainder(x, safe) != 0) & ((x < 0) != (safe < 0))
        q = q + fix.astype(q.dtype)
    return np.where(zero, np.array(-1).astype(x.dtype), q)


def _int_rem(x, y, zero, safe):
    return np.where(zero, x, np.fmod(x, safe))


impl(lax.div_p, fresh=True)(_float_or(np.divide, _int_div))
impl(lax.rem_p, fresh=True)(_float_or(np.fmod, _int_rem))


def _bits(dtype) -> int:
    return dtype.itemsize * 8


@impl(lax.shift_left_p, fresh=True)
def _shift_left(x, y):
    nbits = _bits(x.dtype)
    big = (y < 0) | (y >= nbits) if y.dtype.kind == "i" else (y >= nbits)
    safe = np.where(big, np.zeros((), y.dtype), y)
    return np.where(big, np.zeros((), x.dtype), np.left_shift(x, safe)).astype(x.dtype)


@impl(lax.shift_right_logical_p, fresh=True)
def _shift_right_logical(x, y):
    x, y = np.asarray(x), np.asarray(y)
    unsigned = np.dtype(f"u{x.dtype.itemsize}")
    big = (y < 0) | (y >= _bits(x.dtype)) if y.dtype.kind == "i" else (y >= _bits(x.dtype))
    safe = np.where(big, np.zeros((), y.dtype), y).astype(unsigned)
    out = np.where(big, np.zeros((), unsigned), np.right_shift(x.view(unsigned), safe))
    return np.asarray(out, unsigned).view(x.dtype)


@impl(lax.shift_right_arithmetic_p, fresh=True)
def _shift_right_arithmetic(x, y):
    nbits = _bits(x.dtype)
    big = (y < 0) | (y >= nbits) if y.dtype.kind == "i" else (y >= nbits)
    safe = np.where(big, np.array(nbits - 1).astype(y.dtype), y)
    if x.dtype.kind == "u":
        signed = np.dtype(f"i{x.dtype.itemsize}")
        out = np.right_shift(np.asarray(x).view(signed), np.asarray(safe).astype(signed))
        return np.asarray(out).view(x.dtype)
    return np.right_shift(x, safe).astype(x.dtype)


@impl(lax.complex_p, fresh=True)
def _complex(x, y):
    out_dtype = np.complex128 if x.dtype == np.float64 else np.complex64
    # parts written directly: x + 1j * y would turn an infinite y into NaN + inf j
    x, y = np.broadcast_arrays(x, y)
    out = np.empty(x.shape, out_dtype)
    out.real = x
    out.imag = y
    return out


# ------------------------------------------------------------------ select and clamp

@impl(lax.select_n_p, fresh=True)
def _select_n(which, *cases):
    if which.dtype == np.bool_:
        if len(cases) == 1:
            return np.broadcast_to(cases[0], np.broadcast_shapes(which.shape, cases[0].shape)).copy()
        return _select_bool(which, cases[0], cases[1])
    return np.choose(which, cases)


_BLEND_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _select_bool(which, on_false, on_true):
    """``np.where(which, on_true, on_false)`` as a branch-free bit blend for large arrays.

    np.where branches per element and runs at a few ns per element on unpredictable masks;
    ``f ^ ((f ^ t) & -which)`` on the bit patterns is exact for every dtype and several
    times faster.
    """
    on_false, on_true = np.asarray(on_false), np.asarray(on_true)
    bits = _BLEND_BITS.get(on_true.dtype.itemsize)
    if bits is None or which.size < 4096 or on_true.shape != on_false.shape or \
            which.shape != on_true.shape:
        return np.where(which, on_true, on_false)
    mask = which.view(np.uint8).astype(bits)   # 0 or 1
    np.negative(mask, out=mask)                # 0 or all ones
    f = on_false.view(bits)
    out = np.bitwise_xor(f, on_true.view(bits))
    np.bitwise_and(out, mask, out=out)
    np.bitwise_xor(out, f, out=out)
    return out.view(on_true.dtype)


@impl(lax.clamp_p, fresh=True)
def _clamp(lo, x, hi):
    return signed_zeros.minimum(signed_zeros.maximum(x, lo), hi).astype(x.dtype)


# ------------------------------------------------------------------ conversion

@impl(lax.convert_element_type_p, fresh=True)
@_quiet
def _convert(x, *, new_dtype, weak_type):
    src = x.dtype
    if new_dtype.kind == "b":
        return np.asarray(x != 0)
    if src.kind == "c" and new_dtype.kind != "c":
        x = np.real(x)
        src = x.dtype
    if new_dtype.kind in "iu" and (src.kind == "f" or src == bfloat16):
        # XLA saturates out-of-range values and maps NaN to 0.
        info = np.iinfo(new_dtype)
        t = np.trunc(np.nan_to_num(np.asarray(x, np.float64), nan=0.0, posinf=np.inf,
                                   neginf=-np.inf))
        # 2**(bits-1) (or 2**bits) is exact in float64, unlike int64's maximum: compare there and
        # fill the saturated entries in the integer domain.
        upper, lower = float(info.max) + 1.0, float(info.min)
        inside = (t >= lower) & (t < upper)
        out = np.where(inside, t, 0.0).astype(new_dtype)
        out = np.where(t >= upper, np.array(info.max, new_dtype), out)
        return np.asarray(np.where(t < lower, np.array(info.min, new_dtype), out))
    if new_dtype == bfloat16 and src != np.float32:
        # XLA rounds to bfloat16 from float32 only: a wider value (float64, an int) is
        # rounded to float32 first, so a value just past a tie lands on the even neighbour as
        # in JAX (ml_dtypes from 0.7 rounds float64 directly).
        x = np.asarray(x, np.float32)
    return np.asarray(x).astype(new_dtype)


@impl(lax.bitcast_convert_type_p)
def _bitcast(x, *, new_dtype):
    x = np.asarray(x)
    if not x.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
        x = x.copy()
    old, new = x.dtype.itemsize, new_dtype.itemsize
    if old == new:
        return x.view(new_dtype)
    if old > new:
        return x.reshape(x.shape + (1,)).view(new_dtype).reshape(x.shape + (old // new,))
    return x.view(new_dtype).reshape(x.shape[:-1])


@impl(lax.stop_gradient_p)
def _identity(x):
    return x


# ------------------------------------------------------------------ special functions

def _scipy(name):
    def fn(*args):
        import scipy.special
        return getattr(scipy.special, name)(*args)
    fn.__name__ = name
    return fn


impl(lax.erf_p, fresh=True)(lowp(_quiet(_scipy("erf"))))
impl(lax.erfc_p, fresh=True)(lowp(_quiet(_scipy("erfc"))))
impl(lax.erf_inv_p, fresh=True)(lowp(_quiet(_scipy("erfinv"))))
def _poles(x):
    """The non-positive integers, where digamma and polygamma are NaN (XLA's convention)."""
    return (x <= 0) & (x == np.floor(x))


@impl(lax.lgamma_p, fresh=True)
@lowp
@_quiet
def _lgamma(x):
    import scipy.special
    # scipy gives -inf at -inf; log|gamma| grows without bound there (C's lgamma gives +inf)
    return np.where(np.isneginf(x), np.array(np.inf, x.dtype), scipy.special.gammaln(x))


@impl(lax.digamma_p, fresh=True)
@lowp
@_quiet
def _digamma(x):
    import scipy.special
    return np.where(_poles(x), np.array(np.nan, x.dtype), scipy.special.psi(x))


@impl(lax.polygamma_p, fresh=True)
@lowp
@_quiet
def _polygamma(m, x):
    import scipy.special
    integral = (m >= 0) & (m == np.floor(m))
    safe_m = np.where(integral, m, 0).astype(np.int64)
    out = scipy.special.polygamma(safe_m, x)
    # NaN for orders that are not non-negative integers, and at the poles
    out = np.where(integral & ~_poles(x), out, np.nan)
    return np.asarray(out).astype(x.dtype)


# Several scipy/numpy functions return float64 for float32 input in corner cases; the
# dispatcher relies on exact output dtypes, so cast results of the table above.
def _cast_result(fn):
    def wrapped(*args, **params):
        out = fn(*args, **params)
        want = args[0].dtype if args else None
        if want is not None and getattr(out, "dtype", want) != want and want.kind in "fc":
            return np.asarray(out).astype(want)
        return out
    wrapped.__name__ = fn.__name__
    if returns_fresh(fn):   # (its result or a copy of it: new memory still)
        fresh_result(wrapped)
    return wrapped


from plax_numpy.registry import IMPLS as _IMPLS  # noqa: E402

for _p in (lax.erf_p, lax.erfc_p, lax.erf_inv_p, lax.lgamma_p, lax.digamma_p, lax.logistic_p,
           lax.polygamma_p):
    _IMPLS[_p] = _cast_result(_IMPLS[_p])

from plax_numpy import impls_special  # noqa: E402,F401  (igamma, betainc, zeta, bessel_i0e, ...)
