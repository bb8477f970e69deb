"""Elementwise functions of plax.numpy (NumPy's ufuncs), with JAX's promotion rules.

Each function promotes its arguments (``util.promote_args``: dtypes, then ranks only, as
JAX; the primitives broadcast rank 0 and size-1 axes themselves) and binds lax primitives. Functions that are only defined on inexact values
(``exp``, ``sin``, ``true_divide``, ...) promote integers to the default float.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from plax import dtypes, lax
from plax.array import Array
from plax.core.trace import Tracer, get_aval
from plax.transforms.jit import jit, jit_when_traced
from plax.numpy import reductions as _reductions, ufunc_fast_methods as _fast
from plax.numpy.ufunc_class import ufunc
from plax.numpy.util import (reject_out, asarray_weak, broadcast_all, broadcast_nonscalars, check_arraylike,
                             promote_args, promote_args_inexact, promote_shapes, to_dtype)


def _dt(x) -> np.dtype:
    return get_aval(x).dtype


def _const(x, value):
    """A rank-0 constant of ``x``'s dtype, weakly typed when ``x`` is a weakly typed scalar.

    This is how JAX makes the constants inside its jnp functions, so composites keep
    Python-scalar results weak (``jnp.floor_divide(7, 2)``) but not weak arrays.
    """
    a = get_aval(x)
    return lax.full((), value, a.dtype, weak_type=a.weak_type and not a.shape)


def _strong_const(x, value):
    """A strongly typed rank-0 constant of ``x``'s dtype (JAX's choice in some functions,
    e.g. ``log2`` and ``isinf``, whose results are then never weak)."""
    return lax.full((), value, _dt(x))


def _full_like(x, value, dtype=None):
    """``value`` in ``x``'s shape: of ``x``'s dtype and weak type, or strongly of ``dtype``."""
    a = get_aval(x)
    if dtype is None:
        return lax.full(a.shape, value, a.dtype, weak_type=a.weak_type)
    return lax.full(a.shape, value, dtype, weak_type=False)


def _with_weak(x, weak: bool):
    """``x`` with its weak type set to ``weak`` (composites built from strong constants lose it)."""
    a = get_aval(x)
    return x if a.weak_type == weak else lax.convert_element_type(x, a.dtype, weak)


def promote_args_numeric(fun_name: str, *args):
    """Like ``promote_args``, but booleans become the default integer type (as in JAX, for
    arithmetic that has no boolean meaning: floor_divide, remainder, power, shifts, ...)."""
    check_arraylike(fun_name, *args)
    dt, weak = dtypes.result_type(*args, return_weak_type_flag=True)
    if dt == np.bool_:
        dt = dtypes.default_int_dtype()
    return promote_shapes(fun_name, *[to_dtype(a, dt, weak) for a in args])


def _reject_complex(name: str, x) -> None:
    if dtypes.is_complex(_dt(x)):
        raise ValueError(f"jnp.{name} is not well defined for complex inputs (got "
                         f"{_dt(x).name}); convert to real values first, e.g. with jnp.abs or "
                         "jnp.real.")


def _fast_pair(x, y):
    """Both operands arrays of one dtype and weak type, of one shape or one of them rank 0:
    promotion would change nothing (the eager hot path)."""
    if type(x) is Array and type(y) is Array:
        ax, ay = x.aval, y.aval
        return ax is ay or (ax.dtype == ay.dtype and ax.weak_type == ay.weak_type
                            and (ax.shape == ay.shape or not ax.shape or not ay.shape))
    return False


_scalar_cache: dict = {}


def _scalar_like(array: Array, value, inexact: bool):
    """``value`` (a Python int or float) as the rank-0 operand of an op with ``array``, or None
    when promotion would change ``array`` (then the general path runs).

    The converted scalars are cached per (value, dtype, weak type, device): Arrays are
    immutable, so ``x * 2.0`` in a loop costs no conversion.
    """
    aval = array.aval
    py_dtype = dtypes.default_float_dtype() if type(value) is float else dtypes.default_int_dtype()
    dt, weak = dtypes.result_type_of_avals(((aval.dtype, aval.weak_type), (py_dtype, True)))
    if dt != aval.dtype or weak != aval.weak_type or (inexact and dt.kind not in "fc"):
        return None
    device = array._device
    cacheable = value == value  # NaN equals no key
    key = (type(value), value, dt, weak, id(device))
    if type(value) is float and value == 0.0 and math.copysign(1.0, value) < 0:
        key = (float, "-0.0", dt, weak, id(device))  # -0.0 == 0.0: keep the signs apart
    if cacheable:
        hit = _scalar_cache.get(key)
        if hit is not None and hit._device is device:
            return hit
    if type(value) is int:
        info = np.iinfo(py_dtype)
        if not info.min <= value <= info.max:
            return None  # the general path raises the OverflowError
        host = np.array(value, py_dtype).astype(dt)  # wraps to dt, as JAX does
    else:
        host = np.array(value, dt)
    from plax.array import from_host
    out = from_host(host, device=device, weak_type=weak)
    if cacheable:
        if len(_scalar_cache) >= 512:
            _scalar_cache.clear()
        _scalar_cache[key] = out
    return out


# One-line summaries and verified examples of the factory-made functions above and below
# (their docstrings are assembled from these; tests/numpy/test_jnp_docs.py runs the examples).
_SUMMARIES = {
    'floor': 'The largest integer not greater than each element (integers are returned as is).',
    'ceil': 'The smallest integer not less than each element (integers are returned as is).',
    'exp': 'The exponential ``e ** x``, elementwise.',
    'exp2': '``2 ** x``, elementwise.',
    'expm1': '``exp(x) - 1``, accurate for small ``x``.',
    'log': 'The natural logarithm, elementwise.',
    'log1p': '``log(1 + x)``, accurate for small ``x``.',
    'sqrt': 'The non-negative square root, elementwise.',
    'cbrt': 'The real cube root, elementwise.',
    'sin': 'The sine, elementwise (radians).',
    'cos': 'The cosine, elementwise (radians).',
    'tan': 'The tangent, elementwise (radians).',
    'arcsin': 'The inverse sine, elementwise.',
    'arccos': 'The inverse cosine, elementwise.',
    'arctan': 'The inverse tangent, elementwise.',
    'sinh': 'The hyperbolic sine, elementwise.',
    'cosh': 'The hyperbolic cosine, elementwise.',
    'tanh': 'The hyperbolic tangent, elementwise.',
    'arcsinh': 'The inverse hyperbolic sine, elementwise.',
    'arccosh': 'The inverse hyperbolic cosine, elementwise.',
    'arctanh': 'The inverse hyperbolic tangent, elementwise.',
    'add': '``x + y``, elementwise (logical or for booleans).',
    'subtract': '``x - y``, elementwise.',
    'multiply': '``x * y``, elementwise (logical and for booleans).',
    'true_divide': '``x / y``, elementwise; integers are divided as floats.',
    'maximum': 'The larger of ``x`` and ``y``, elementwise (NaN propagates).',
    'minimum': 'The smaller of ``x`` and ``y``, elementwise (NaN propagates).',
    'arctan2': 'The angle of the point ``(x, y)`` from the positive x axis, ``atan(x1 / x2)`` by quadrant.',
    'nextafter': 'The next representable value after ``x`` towards ``y``.',
    'equal': '``x == y``, elementwise.',
    'not_equal': '``x != y``, elementwise.',
    'less': '``x < y``, elementwise (complex numbers compare lexicographically).',
    'less_equal': '``x <= y``, elementwise.',
    'greater': '``x > y``, elementwise.',
    'greater_equal': '``x >= y``, elementwise.',
    'bitwise_and': 'Bitwise AND of integers or booleans.',
    'bitwise_or': 'Bitwise OR of integers or booleans.',
    'bitwise_xor': 'Bitwise XOR of integers or booleans.',
    'float_power': '``x ** y`` computed in floating point (integers promote to floats).',
}
_EXAMPLES = {
    'floor': ('jnp.floor(jnp.array([-1.5, 2.5]))', 'Array([-2.,  2.], dtype=float32)'),
    'ceil': ('jnp.ceil(jnp.array([-1.5, 2.5]))', 'Array([-1.,  3.], dtype=float32)'),
    'exp': ('jnp.exp(jnp.array([0.0, 1.0]))', 'Array([1.      , 2.718282], dtype=float32)'),
    'exp2': ('jnp.exp2(jnp.array([0.0, 3.0]))', 'Array([1., 8.], dtype=float32)'),
    'expm1': ('jnp.expm1(jnp.array([0.0, 1.0]))', 'Array([0.       , 1.7182819], dtype=float32)'),
    'log': ('jnp.log(jnp.array([1.0, 4.0]))', 'Array([0.       , 1.3862944], dtype=float32)'),
    'log1p': ('jnp.log1p(jnp.array([0.0, 1.0]))', 'Array([0.       , 0.6931472], dtype=float32)'),
    'sqrt': ('jnp.sqrt(jnp.array([4.0, 9.0]))', 'Array([2., 3.], dtype=float32)'),
    'cbrt': ('jnp.cbrt(jnp.array([-8.0, 1.0]))', 'Array([-2.,  1.], dtype=float32)'),
    'sin': ('jnp.sin(jnp.array([0.0, 1.0]))', 'Array([0.      , 0.841471], dtype=float32)'),
    'cos': ('jnp.cos(jnp.array([0.0, 1.0]))', 'Array([1.       , 0.5403023], dtype=float32)'),
    'tan': ('jnp.tan(jnp.array([0.0, 1.0]))', 'Array([0.       , 1.5574077], dtype=float32)'),
    'arcsin': ('jnp.arcsin(jnp.array([0.0, 1.0]))', 'Array([0.       , 1.5707964], dtype=float32)'),
    'arccos': ('jnp.arccos(jnp.array([0.0, 1.0]))', 'Array([1.5707964, 0.       ], dtype=float32)'),
    'arctan': ('jnp.arctan(jnp.array([0.0, 1.0]))', 'Array([0.       , 0.7853982], dtype=float32)'),
    'sinh': ('jnp.sinh(jnp.array([0.0, 1.0]))', 'Array([0.       , 1.1752012], dtype=float32)'),
    'cosh': ('jnp.cosh(jnp.array([0.0, 1.0]))', 'Array([1.       , 1.5430807], dtype=float32)'),
    'tanh': ('jnp.tanh(jnp.array([0.0, 1.0]))', 'Array([0.       , 0.7615942], dtype=float32)'),
    'arcsinh': ('jnp.arcsinh(jnp.array([0.0, 1.0]))', 'Array([0.       , 0.8813736], dtype=float32)'),
    'arccosh': ('jnp.arccosh(jnp.array([1.0, 2.0]))', 'Array([0.      , 1.316958], dtype=float32)'),
    'arctanh': ('jnp.arctanh(jnp.array([0.0, 0.5]))', 'Array([0.        , 0.54930615], dtype=float32)'),
    'add': ('jnp.add(jnp.array([1, 2]), 3)', 'Array([4, 5], dtype=int32)'),
    'subtract': ('jnp.subtract(jnp.array([1, 2]), 3)', 'Array([-2, -1], dtype=int32)'),
    'multiply': ('jnp.multiply(jnp.array([1, 2]), 3)', 'Array([3, 6], dtype=int32)'),
    'true_divide': ('jnp.true_divide(jnp.array([1, 2]), 4)', 'Array([0.25, 0.5 ], dtype=float32)'),
    'maximum': ('jnp.maximum(jnp.array([1, 5]), 3)', 'Array([3, 5], dtype=int32)'),
    'minimum': ('jnp.minimum(jnp.array([1, 5]), 3)', 'Array([1, 3], dtype=int32)'),
    'arctan2': ('jnp.arctan2(jnp.array([1.0, -1.0]), 1.0)', 'Array([ 0.7853981, -0.7853981], dtype=float32)'),
    'nextafter': ('jnp.nextafter(jnp.array([1.0, 2.0]), 3.0)', 'Array([1.0000001, 2.0000002], dtype=float32)'),
    'equal': ('jnp.equal(jnp.array([1, 3]), 3)', 'Array([False,  True], dtype=bool)'),
    'not_equal': ('jnp.not_equal(jnp.array([1, 3]), 3)', 'Array([ True, False], dtype=bool)'),
    'less': ('jnp.less(jnp.array([1, 3]), 3)', 'Array([ True, False], dtype=bool)'),
    'less_equal': ('jnp.less_equal(jnp.array([1, 3]), 3)', 'Array([ True,  True], dtype=bool)'),
    'greater': ('jnp.greater(jnp.array([1, 3]), 3)', 'Array([False, False], dtype=bool)'),
    'greater_equal': ('jnp.greater_equal(jnp.array([1, 3]), 3)', 'Array([False,  True], dtype=bool)'),
    'bitwise_and': ('jnp.bitwise_and(jnp.array([12, 10]), 6)', 'Array([4, 2], dtype=int32)'),
    'bitwise_or': ('jnp.bitwise_or(jnp.array([12, 10]), 6)', 'Array([14, 14], dtype=int32)'),
    'bitwise_xor': ('jnp.bitwise_xor(jnp.array([12, 10]), 6)', 'Array([10, 12], dtype=int32)'),
    'float_power': ('jnp.float_power(jnp.array([2, 3]), 2)', 'Array([4., 9.], dtype=float32)'),
}


def _factory_doc(name: str, nargs: int, inexact: bool) -> str:
    """A JAX-style docstring for a factory-made ufunc."""
    promo = (" Integer and boolean inputs are promoted to the default float type." if inexact
             else "")
    args = ("      x: an array or a scalar.\n" if nargs == 1 else
            "      x, y: arrays or scalars, broadcast against each other and promoted with JAX's "
            "rules\n        (Python scalars are weakly typed).\n")
    expr, shown = _EXAMPLES[name]
    return (f"{_SUMMARIES[name]}\n\n    JAX's ``jnp.{name}`` (NumPy's ``numpy.{name}``).{promo}\n\n"
            f"    Args:\n{args}\n    Returns:\n      An array with the broadcast shape of the "
            f"inputs.\n\n    Example:\n      >>> {expr}\n      {shown}\n    ")


def _unary(name: str, lax_fn, inexact: bool = False, int_identity: bool = False):
    def fn(x):
        # Eager fast path: an Array that promotion would leave unchanged.
        if type(x) is Array and (not (inexact or int_identity) or x.aval.dtype.kind in "fc"):
            return lax_fn(x)
        check_arraylike(name, x)
        if int_identity and not dtypes.is_inexact(dtypes.dtype(x)):
            return asarray_weak(x)
        (x,) = promote_args_inexact(name, x) if inexact else promote_args(name, x)
        return lax_fn(x)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = _factory_doc(name, 1, inexact)
    return fn


def _binary(name: str, lax_fn, inexact: bool = False, bool_fn=None):
    def fn(x, y, /):
        if _fast_pair(x, y) and (not inexact or dtypes.is_inexact(x.aval.dtype)) and (
                bool_fn is None or x.aval.dtype != np.bool_):
            return lax_fn(x, y)
        # Eager fast paths for an Array with a Python int or float that it absorbs.
        if type(x) is Array and (type(y) is float or type(y) is int):
            s = _scalar_like(x, y, inexact)
            if s is not None:
                return lax_fn(x, s)
        elif type(y) is Array and (type(x) is float or type(x) is int):
            s = _scalar_like(y, x, inexact)
            if s is not None:
                return lax_fn(s, y)
        x, y = promote_args_inexact(name, x, y) if inexact else promote_args(name, x, y)
        if bool_fn is not None and _dt(x) == np.bool_:
            return bool_fn(x, y)
        return lax_fn(x, y)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = _factory_doc(name, 2, inexact)
    return fn


def _no_bool(name):
    def wrapped(x, y):
        raise TypeError(f"{name} does not accept boolean arguments; cast them with .astype(int) "
                        "first.")
    return wrapped


def _ufunc_object(fn, identity=None, **methods) -> ufunc:
    """``fn`` as one of JAX's ufunc objects (``jnp.add`` ...): its call takes JAX's ``out=``
    and ``where=`` keywords (None only), and ``methods`` are its fast ``reduce``/
    ``accumulate``/``at`` (:mod:`plax.numpy.ufunc_fast_methods`). The operators (``x + y``)
    call ``fn`` itself, kept as ``.call_positional``, so they pay nothing for the object."""
    return ufunc(fn, fn.__code__.co_argcount, 1, name=fn.__name__, identity=identity, call=fn,
                 **methods)


def _as_ufunc(identity=None, **methods):
    """Decorator form of :func:`_ufunc_object`."""
    return lambda fn: _ufunc_object(fn, identity, **methods)


# ------------------------------------------------------------------ arithmetic

add = _ufunc_object(_binary("add", lax.add, bool_fn=lax.bitwise_or), identity=0,
                    reduce=_reductions.sum, accumulate=_fast.cumulative("cumsum"),
                    at=_fast.scatter_at("add", "add"),
                    reduceat=_fast.segment_reduceat("add"))
subtract = _ufunc_object(_binary("subtract", lax.sub, bool_fn=_no_bool("subtract")),
                         at=_fast.scatter_at("subtract", "subtract"))
multiply = _ufunc_object(_binary("multiply", lax.mul, bool_fn=lax.bitwise_and), identity=1,
                         reduce=_reductions.prod, accumulate=_fast.cumulative("cumprod"),
                         at=_fast.scatter_at("multiply", "multiply"),
                         reduceat=_fast.segment_reduceat("multiply"))
true_divide = _binary("true_divide", lax.div, inexact=True)
divide = true_divide
maximum = _ufunc_object(_binary("maximum", lax.max), reduce=_fast.extremum_reduce("max"),
                        accumulate=_fast.cumulative("cummax"),
                        at=_fast.scatter_at("maximum", "max"),
                        reduceat=_fast.segment_reduceat("maximum"))
minimum = _ufunc_object(_binary("minimum", lax.min), reduce=_fast.extremum_reduce("min"),
                        accumulate=_fast.cumulative("cummin"),
                        at=_fast.scatter_at("minimum", "min"),
                        reduceat=_fast.segment_reduceat("minimum"))
def _atan2(y, x):
    if not dtypes.is_complex(_dt(y)):
        return lax.atan2(y, x)
    # the complex extension JAX (XLA) computes: -i log((x + i y) / sqrt(x^2 + y^2))
    i = lax.full((), 1j, _dt(y))
    r = lax.sqrt(lax.add(lax.mul(x, x), lax.mul(y, y)))
    return lax.mul(lax.neg(i), lax.log(lax.div(lax.add(x, lax.mul(i, y)), r)))


arctan2 = _binary("arctan2", _atan2, inexact=True)
nextafter = _binary("nextafter", lax.nextafter, inexact=True)
def _ordered(lax_cmp):
    """An order comparison that also orders complex numbers, lexicographically (real part
    first, as JAX and NumPy do)."""
    def cmp(x, y):
        if not dtypes.is_complex(_dt(x)):
            return lax_cmp(x, y)
        # as JAX writes it: the imaginary parts decide where the real parts are equal
        return lax.select(lax.eq(lax.real(x), lax.real(y)), lax_cmp(lax.imag(x), lax.imag(y)),
                          lax_cmp(lax.real(x), lax.real(y)))
    return cmp


equal = _binary("equal", lax.eq)
not_equal = _binary("not_equal", lax.ne)
less = _binary("less", _ordered(lax.lt))
less_equal = _binary("less_equal", _ordered(lax.le))
greater = _binary("greater", _ordered(lax.gt))
greater_equal = _binary("greater_equal", _ordered(lax.ge))
bitwise_and = _ufunc_object(_binary("bitwise_and", lax.bitwise_and), identity=-1,
                            reduce=_fast.bitwise_reduce("bitwise_and", lax.reduce_and, -1))
bitwise_or = _ufunc_object(_binary("bitwise_or", lax.bitwise_or), identity=0,
                           reduce=_fast.bitwise_reduce("bitwise_or", lax.reduce_or, 0))
bitwise_xor = _ufunc_object(_binary("bitwise_xor", lax.bitwise_xor), identity=0,
                            reduce=_fast.bitwise_reduce("bitwise_xor", lax.reduce_xor, 0))


@_as_ufunc()
def negative(x, /):
    """Elementwise ``-x``."""
    check_arraylike("negative", x)
    (x,) = promote_args("negative", x)
    if _dt(x) == np.bool_:
        raise TypeError("negative does not accept dtype bool; use jnp.logical_not, or cast to "
                        "an integer type first.")
    return lax.neg(x)


def positive(x, /):
    """Elementwise ``+x`` (a copy)."""
    check_arraylike("positive", x)
    return asarray_weak(x)


@jit_when_traced
def floor_divide(x, y, /):
    """Elementwise ``x // y``, rounding toward minus infinity (NumPy semantics)."""
    x, y = promote_args_numeric("floor_divide", x, y)
    dt = _dt(x)
    if dtypes.is_integer(dt):
        q = lax.div(x, y)
        if dt.kind == "u":
            return q
        # as JAX writes it: one less where the signs differ and the division is inexact
        fix = lax.bitwise_and(lax.ne(lax.sign(x), lax.sign(y)),
                              lax.ne(lax.rem(x, y), _const(x, 0)))
        return _where(fix, lax.sub(q, _const(q, 1)), q)
    if dtypes.is_complex(dt):
        raise TypeError("floor_divide does not support complex inputs")
    # NumPy's algorithm: divide the exact multiple x - fmod(x, y), then correct. (JAX's
    # rounds the corrected quotient instead, which differs from NumPy in the sign of zero
    # quotients and at halves: plax keeps NumPy's values.)
    x, y = broadcast_nonscalars(x, y)  # for select_n, below
    mod = lax.rem(x, y)
    div = lax.div(lax.sub(x, mod), y)
    zero = _const(x, 0)
    wrong_sign = lax.bitwise_and(lax.ne(mod, zero), lax.ne(lax.lt(y, zero), lax.lt(mod, zero)))
    div = lax.select(wrong_sign, lax.sub(div, _const(div, 1)), div)
    floor_div = lax.floor(div)
    floor_div = lax.select(lax.gt(lax.sub(div, floor_div), _const(div, 0.5)),
                           lax.add(floor_div, _const(div, 1)), floor_div)
    # where div is zero, keep its sign like NumPy; where y is zero fall back to x / y
    floor_div = lax.select(lax.eq(div, zero), lax.mul(zero, lax.div(x, y)), floor_div)
    out = lax.select(lax.eq(y, zero), lax.div(x, y), floor_div)
    return _with_weak(out, get_aval(x).weak_type)


@jit_when_traced
def remainder(x, y, /):
    """Elementwise remainder with the sign of the divisor (NumPy's ``%``)."""
    x, y = promote_args_numeric("remainder", x, y)
    dt = _dt(x)
    if dtypes.is_complex(dt):
        raise TypeError("remainder does not support complex inputs")
    # as JAX writes it; an integer divisor of 0 is taken as 1 (the remainder is 0, as NumPy's)
    zero = _const(x, 0)
    if dtypes.is_integer(dt):
        y = _where(lax.eq(y, _const(y, 0)), lax.full_like(y, 1), y)
    r = lax.rem(x, y)
    nonzero = lax.ne(r, zero)
    fix = lax.bitwise_and(lax.ne(lax.lt(r, zero), lax.lt(y, zero)), nonzero)
    return lax.select(fix, lax.add(r, y), r)


mod = remainder


@jit_when_traced
def fmod(x, y, /):
    """Elementwise remainder with the sign of the dividend (C's fmod)."""
    x, y = promote_args_numeric("fmod", x, y)
    if dtypes.is_complex(_dt(x)):
        raise TypeError("fmod does not support complex inputs")
    if dtypes.is_integer(_dt(x)):  # as JAX (and NumPy's value): a divisor of 0 gives 0
        y = _where(lax.eq(y, _const(y, 0)), lax.full_like(y, 1), y)
    return lax.rem(x, y)


@jit_when_traced
def divmod(x, y, /):
    """``(floor_divide(x, y), remainder(x, y))``."""
    return floor_divide(x, y), remainder(x, y)


def power(x, y, /):
    """Elementwise ``x ** y``. A static Python int exponent uses repeated multiplication
    (``integer_pow``); integer arrays raised to integer arrays are computed exactly.

    Example:
      >>> jnp.power(jnp.arange(4), 2)
      Array([0, 1, 4, 9], dtype=int32)
    """
    check_arraylike("power", x, y)
    if isinstance(y, (int, np.integer)) and not isinstance(y, (bool, np.bool_)):
        (xa,) = promote_args_numeric("power", x)
        if dtypes.is_integer(_dt(xa)) and y < 0:
            raise TypeError(f"Integers cannot be raised to negative powers, got "
                            f"integer_pow({get_aval(xa).str_short()}, {y})")
        return lax.integer_pow(xa, int(y))
    if dtypes.is_inexact(_dt(x)) and dtypes.is_integer(_dt(y)):
        if isinstance(x, Tracer) or isinstance(y, Tracer):
            return _power_inline(x, y)
        return lax.pow(*promote_shapes("power", x, y))  # (eagerly: no unused promotion)
    return _power(x, y)


def _power(x, y):
    """``power`` of operands other than a static integer exponent (JAX's ``_power``)."""
    x, y = promote_shapes("power", x, y)  # ranks first, dtypes after, as JAX stages them
    xp, yp = promote_args_numeric("power", x, y)
    dt = _dt(xp)
    if not dtypes.is_inexact(dt):
        return _integer_power(xp, yp)
    if dtypes.is_inexact(_dt(x)) and dtypes.is_integer(_dt(y)):
        # an inexact base and an integer exponent meet in lax.pow unpromoted, as in JAX (so
        # the derivative at x = 0 of x ** n is n * 0 ** (n - 1), not NaN; the promoted
        # exponent above is left unused, as JAX leaves it)
        return lax.pow(x, y)
    return lax.pow(xp, yp)


# an inexact base and a traced integer exponent: one inlined jit, as in JAX, so that under
# reverse mode the exponent's unused promotion is dropped (other operands reach _power
# directly: their Python scalars stay literals)
_power_inline = jit(_power, inline=True)


def _integer_power(x, y):
    """``x ** y`` for integer arrays by binary exponentiation over the bits of y."""
    dt = _dt(x)
    weak = get_aval(x).weak_type and get_aval(y).weak_type
    nbits = dt.itemsize * 8
    zero, one = lax.full((), 0, dt), lax.full((), 1, dt)
    x, y = broadcast_nonscalars(x, y)  # for select_n, below
    shape = get_aval(x).shape or get_aval(y).shape
    acc = lax.full(shape, 1, dt, weak_type=weak)
    base = x
    e = y
    for _ in range(nbits if dt.kind == "u" else nbits - 1):
        bit = lax.ne(lax.bitwise_and(e, one), zero)
        acc = lax.select(bit, lax.mul(acc, base), acc)
        base = lax.mul(base, base)
        e = lax.shift_right_logical(e, one)
    if dt.kind == "i":
        acc = lax.select(lax.lt(y, zero), lax.full(shape, 0, dt), acc)
    return acc


float_power = _binary("float_power", lax.pow, inexact=True)


def abs(x, /):
    """Elementwise absolute value (complex inputs give their magnitude)."""
    check_arraylike("abs", x)
    (x,) = promote_args("abs", x)
    dt = _dt(x)
    if dt == np.bool_ or dt.kind == "u":
        return x
    return lax.abs(x)


absolute = abs


def sign(x, /):
    """Elementwise sign: -1, 0 or 1 (``x / |x|`` for complex)."""
    check_arraylike("sign", x)
    (x,) = promote_args("sign", x)
    if _dt(x) == np.bool_:
        raise TypeError("sign does not accept dtype bool; cast to an integer type first "
                        "(x.astype(int)).")
    y = lax.sign(x)
    if dtypes.is_complex(_dt(x)):
        # The Array API (and JAX): NaN + NaN j wherever a component is NaN (NumPy's kernel
        # gives 1j for NaN + inf j).
        y = _select(lax.ne(x, x), _const(x, complex(math.nan, math.nan)), y)
    return y


floor = _unary("floor", lax.floor, int_identity=True)
ceil = _unary("ceil", lax.ceil, int_identity=True)


@jit_when_traced
def trunc(x):
    """Rounds toward zero."""
    check_arraylike("trunc", x)
    if not dtypes.is_inexact(dtypes.dtype(x)):
        return asarray_weak(x)
    (x,) = promote_args("trunc", x)
    if dtypes.is_complex(_dt(x)):
        raise TypeError("trunc does not support complex inputs")
    return lax.select(lax.lt(x, _const(x, 0)), lax.ceil(x), lax.floor(x))


fix = trunc


@jit_when_traced
def rint(x, /):
    """Rounds to the nearest integer, ties to even; integers become floats."""
    check_arraylike("rint", x)
    if not dtypes.is_inexact(dtypes.dtype(x)):
        # JAX converts integers with a plain (strongly typed) cast here
        return lax.convert_element_type(asarray_weak(x), dtypes.default_float_dtype())
    (x,) = promote_args_inexact("rint", x)
    if dtypes.is_complex(_dt(x)):
        return lax.complex(rint(lax.real(x)), rint(lax.imag(x)))
    return lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN)


@jit_when_traced(static_argnames=("decimals",))
def round(a, decimals: int = 0, out=None):
    """Rounds to ``decimals`` decimal places, ties to even (NumPy's ``round``)."""
    reject_out(out, "round")
    check_arraylike("round", a)
    (a,) = promote_args("round", a)
    dt = _dt(a)
    if dt == np.bool_:
        raise ValueError("jnp.round does not accept dtype bool; cast to an integer or floating "
                         "type first.")
    if not dtypes.is_inexact(dt):
        if decimals >= 0:
            return a
        # round half to even on the integer grid of 10**-decimals
        factor = _const(a, 10 ** (-decimals))
        q = floor_divide(a, factor)
        r = lax.sub(a, lax.mul(q, factor))
        twice = lax.mul(r, _const(a, 2))
        up = lax.bitwise_or(lax.gt(twice, factor),
                            lax.bitwise_and(lax.eq(twice, factor),
                                            lax.ne(lax.rem(q, _const(a, 2)), _const(a, 0))))
        return lax.mul(lax.select(up, lax.add(q, _const(q, 1)), q), factor)
    if dtypes.is_complex(dt):
        return lax.complex(round(lax.real(a), decimals), round(lax.imag(a), decimals))
    if decimals == 0:
        return lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN)
    factor = _const(a, 10.0 ** decimals)
    return lax.div(lax.round(lax.mul(a, factor), lax.RoundingMethod.TO_NEAREST_EVEN), factor)


around = round
round_ = round


# ------------------------------------------------------------------ transcendental

exp = _unary("exp", lax.exp, inexact=True)
exp2 = _unary("exp2", lax.exp2, inexact=True)


def _expm1(x):
    y = lax.expm1(x)
    if not dtypes.is_complex(_dt(x)):
        return y
    # The kernels' complex expm1 (NumPy's), (expm1(a) cos(b) - 2 sin(b/2)^2) + exp(a) sin(b) j,
    # misses the Array API's special cases where a is infinite or b is zero (inf + 0j gives
    # inf + NaN j, -inf + 2.5j a real part off by an ulp): patch them in
    # (tests/array_api/special_cases_complex.py).
    a, b = lax.real(x), lax.imag(x)
    re, im = lax.real(y), lax.imag(y)
    inf = _strong_const(a, np.inf)
    a_neg_inf = lax.eq(a, lax.neg(inf))
    b_nonfinite = lax.bitwise_not(lax.is_finite(b))
    im = _select(lax.eq(b, _strong_const(b, 0.0)), b, im)              # +inf + 0j, NaN + 0j
    re = _select(a_neg_inf, _strong_const(a, -1.0), re)                 # -1 + (+0 * sin(b))j
    im = _select(lax.bitwise_and(a_neg_inf, b_nonfinite), _strong_const(a, 0.0), im)
    a_pos_inf = lax.bitwise_and(lax.eq(a, inf), b_nonfinite)            # infinity + NaN j
    re = _select(a_pos_inf, inf, re)
    im = _select(a_pos_inf, _strong_const(a, np.nan), im)
    return _with_weak(lax.complex(re, im), get_aval(x).weak_type)


def _select(pred, on_true, on_false):
    """``lax.select`` with rank-0 cases broadcast to the others' shape."""
    from plax.lax.binary import select_where
    return select_where(pred, on_true, on_false)


expm1 = _unary("expm1", _expm1, inexact=True)
log = _unary("log", lax.log, inexact=True)
log1p = _unary("log1p", lax.log1p, inexact=True)
sqrt = _unary("sqrt", lax.sqrt, inexact=True)
cbrt = _unary("cbrt", lax.cbrt, inexact=True)
sin = _unary("sin", lax.sin, inexact=True)
cos = _unary("cos", lax.cos, inexact=True)
tan = _unary("tan", lax.tan, inexact=True)
arcsin = _unary("arcsin", lax.asin, inexact=True)
arccos = _unary("arccos", lax.acos, inexact=True)
arctan = _unary("arctan", lax.atan, inexact=True)
sinh = _unary("sinh", lax.sinh, inexact=True)
cosh = _unary("cosh", lax.cosh, inexact=True)
tanh = _unary("tanh", lax.tanh, inexact=True)
arcsinh = _unary("arcsinh", lax.asinh, inexact=True)
arccosh = _unary("arccosh", lax.acosh, inexact=True)
arctanh = _unary("arctanh", lax.atanh, inexact=True)
asin, acos, atan, asinh, acosh, atanh, atan2 = (arcsin, arccos, arctan, arcsinh, arccosh,
                                                  arctanh, arctan2)


def _log_base(x, base: float):
    if dtypes.is_complex(_dt(x)):
        # Each component divided by the real log(base), as JAX (a complex division would turn
        # log(0) = -inf + 0j into -inf + NaN j).
        r = lax.log(x)
        re, im = lax.real(r), lax.imag(r)
        k = _strong_const(re, math.log(base))
        return lax.complex(lax.div(re, k), lax.div(im, k))
    return lax.div(lax.log(x), _strong_const(x, math.log(base)))


def log2(x, /):
    """Base-2 logarithm."""
    (x,) = promote_args_inexact("log2", x)
    return _log_base(x, 2)


def log10(x, /):
    """Base-10 logarithm."""
    (x,) = promote_args_inexact("log10", x)
    return _log_base(x, 10)


def square(x, /):
    """Elementwise ``x * x``."""
    check_arraylike("square", x)
    (x,) = promote_args_numeric("square", x)
    return lax.integer_pow(x, 2)


def reciprocal(x, /):
    """Elementwise ``1 / x`` (integers are promoted to float)."""
    (x,) = promote_args_inexact("reciprocal", x)
    return lax.integer_pow(x, -1)


@_as_ufunc(identity=-np.inf, reduce=_fast.logaddexp_reduce(base2=False))
def logaddexp(x, y, /):
    """``log(exp(x) + exp(y))`` computed without overflow."""
    x, y = promote_args_inexact("logaddexp", x, y)
    if dtypes.is_complex(_dt(x)):
        # factor out the operand of larger real part: log(e^a + e^b) = a + log1p(e^(b - a))
        x, y = broadcast_all(x, y)  # select_n's cases
        x_big = lax.ge(lax.real(x), lax.real(y))
        big, small = lax.select(x_big, x, y), lax.select(x_big, y, x)
        return lax.add(big, lax.log1p(lax.exp(lax.sub(small, big))))
    return _logaddexp_real(x, y)


def _make_logaddexp(name: str, exp_fn, log_base: float):
    """JAX's real ``logaddexp`` (``exp_fn`` = exp, ``log_base`` = e) or ``logaddexp2`` (exp2,
    2): a custom_jvp named ``name``, its operations in JAX's order so the jaxprs print alike."""
    from plax.transforms.custom_derivatives import custom_jvp

    def primal(x, y):
        amax = lax.max(x, y)
        delta = lax.sub(x, y)
        # NaN delta: NaNs, or infinities of one sign (their sum is the answer)
        nan_delta, total = isnan(delta), lax.add(x, y)
        soft = lax.log1p(exp_fn(lax.neg(lax.abs(delta))))
        if log_base != math.e:
            soft = lax.mul(_const(amax, 1 / math.log(log_base)), soft)
        return lax.select(nan_delta, total, lax.add(amax, soft))

    def jvp(primals, tangents):
        # d/dx = base^(x - out). Differentiating the stable form instead would give 0 at
        # x == y (the kinks of max and |x - y| cancel), where the true value is 1/2. As in
        # JAX, +inf operands are read as 0 in the weights, so infinite inputs give finite
        # tangents; ``out`` is the custom_jvp itself, so higher derivatives use this rule too.
        x, y = primals
        tx, ty = tangents
        out = fn(x, y)

        def finite(v):
            return lax.select(lax.eq(v, _const(v, math.inf)), lax.full_like(v, 0), v)

        tx = lax.mul(tx, exp_fn(lax.sub(finite(x), finite(out))))
        return out, lax.add(tx, lax.mul(ty, exp_fn(lax.sub(finite(y), finite(out)))))

    primal.__name__ = name
    jvp.__name__ = f"_{name}_jvp"
    fn = custom_jvp(primal)
    fn.defjvp(jvp)
    return fn


_logaddexp_real = _make_logaddexp("logaddexp", lax.exp, math.e)
_logaddexp2_real = _make_logaddexp("logaddexp2", lax.exp2, 2.0)


@_as_ufunc(identity=-np.inf, reduce=_fast.logaddexp_reduce(base2=True))
def logaddexp2(x, y, /):
    """``log2(2**x + 2**y)`` computed without overflow."""
    x, y = promote_args_inexact("logaddexp2", x, y)
    if dtypes.is_complex(_dt(x)):
        ln2 = _const(x, math.log(2))
        return lax.div(logaddexp(lax.mul(x, ln2), lax.mul(y, ln2)), ln2)
    return _logaddexp2_real(x, y)


@jit_when_traced
def hypot(x, y, /):
    """``sqrt(x**2 + y**2)``, scaled to avoid overflow."""
    x, y = promote_args_inexact("hypot", x, y)
    _reject_complex("hypot", x)
    x, y = lax.abs(x), lax.abs(y)
    # an infinite operand gives +inf even beside NaN (IEEE hypot, the Array API, JAX); the
    # ratio below would be inf/inf or NaN there. Operations in JAX's order, so the jaxprs
    # print alike.
    any_inf = lax.bitwise_or(lax.eq(x, _const(x, math.inf)), lax.eq(y, _const(y, math.inf)))
    big, small = lax.max(x, y), lax.min(x, y)
    is_zero = lax.eq(big, _const(big, 0))
    safe_big = _where(lax.eq(big, _const(big, 0)), _full_like(big, 1), big)
    ratio = lax.div(small, safe_big)
    out = _where(is_zero, big,
                 lax.mul(big, lax.sqrt(lax.add(_const(big, 1), lax.square(ratio)))))
    inf = lax.full((), math.inf, _dt(out), weak_type=get_aval(out).weak_type)  # JAX's _const
    return _where(any_inf, inf, out)


def deg2rad(x, /):
    """Degrees to radians."""
    (x,) = promote_args_inexact("deg2rad", x)
    return lax.mul(x, _const(x, math.pi / 180))


def rad2deg(x, /):
    """Radians to degrees."""
    (x,) = promote_args_inexact("rad2deg", x)
    return lax.mul(x, _const(x, 180 / math.pi))


radians, degrees = deg2rad, rad2deg


@jit_when_traced
def sinc(x, /):
    """``sin(pi x) / (pi x)``, 1 at 0."""
    (x,) = promote_args_inexact("sinc", x)
    is_zero = lax.eq(x, _const(x, 0))
    one = _full_like(x, 1)
    safe = lax.select(is_zero, one, x)
    pix = lax.mul(safe, _const(x, math.pi))
    return lax.select(is_zero, one, lax.div(lax.sin(pix), pix))


# ------------------------------------------------------------------ predicates and logic

def isnan(x, /):
    """Elementwise NaN test (False for integers)."""
    check_arraylike("isnan", x)
    (x,) = promote_args("isnan", x)
    return lax.ne(x, x)


@jit_when_traced
def isinf(x, /):
    """Elementwise infinity test (False for integers)."""
    check_arraylike("isinf", x)
    (x,) = promote_args("isinf", x)
    dt = _dt(x)
    if not dtypes.is_inexact(dt):
        return _full_like(x, False, np.bool_)
    if dtypes.is_complex(dt):
        return logical_or(isinf(lax.real(x)), isinf(lax.imag(x)))
    return lax.eq(lax.abs(x), _strong_const(x, np.inf))


def isfinite(x, /):
    """Elementwise finiteness test (True for integers)."""
    check_arraylike("isfinite", x)
    (x,) = promote_args("isfinite", x)
    dt = _dt(x)
    if not dtypes.is_inexact(dt):
        return _full_like(x, True, np.bool_)
    if dtypes.is_complex(dt):
        return logical_and(lax.is_finite(lax.real(x)), lax.is_finite(lax.imag(x)))
    return lax.is_finite(x)


def isposinf(x, /, out=None):
    """Elementwise test for positive infinity (not defined for complex inputs; ``out``: only
    None, as in JAX)."""
    reject_out(out, "isposinf")
    check_arraylike("isposinf", x)
    (x,) = promote_args("isposinf", x)
    return _is_signed_inf("isposinf", x, np.inf)


def isneginf(x, /, out=None):
    """Elementwise test for negative infinity (not defined for complex inputs; ``out``: only
    None, as in JAX)."""
    reject_out(out, "isneginf")
    check_arraylike("isneginf", x)
    (x,) = promote_args("isneginf", x)
    return _is_signed_inf("isneginf", x, -np.inf)


def _is_signed_inf(name, x, inf):
    dt = _dt(x)
    if dtypes.is_complex(dt):
        raise ValueError(f"jnp.{name} is not well defined for complex inputs (got {dt.name}).")
    if not dtypes.is_inexact(dt):
        return _full_like(x, False, np.bool_)
    return lax.eq(x, _strong_const(x, inf))


@jit_when_traced
def signbit(x, /):
    """Whether the sign bit is set (True for -0.0)."""
    (x,) = promote_args("signbit", x)
    dt = _dt(x)
    _reject_complex("signbit", x)
    if dt.kind == "i":
        return lax.lt(x, _strong_const(x, 0))
    if dt.kind in "ub":
        return _full_like(x, False, np.bool_)
    # as JAX writes it: the sign bit shifted (arithmetically) over the whole integer
    int_dt = np.dtype(f"i{dt.itemsize}")
    bits = lax.bitcast_convert_type(x, int_dt)
    shifted = lax.shift_right_arithmetic(bits, _const(bits, 8 * dt.itemsize - 1))
    return lax.convert_element_type(shifted, np.bool_)


@jit_when_traced
def copysign(x, y, /):
    """``|x|`` with the sign of ``y``."""
    _check_broadcastable("copysign", x, y)
    x, y = promote_args_inexact("copysign", x, y)
    if dtypes.is_complex(_dt(x)):
        raise TypeError("copysign does not support complex inputs")
    # _where broadcasts the sign to |x|'s shape and back (a 0-d x with a 1-d y, as NumPy)
    return _where(signbit(y), lax.neg(lax.abs(x)), lax.abs(x))


def _check_broadcastable(name, *args):
    # functions JAX builds on jnp.where broadcast their operands first: a ValueError when the
    # shapes do not broadcast (where a plain binary ufunc of equal ranks raises TypeError)
    from plax.numpy.util import broadcast_shapes
    shapes = [np.shape(a) if not isinstance(a, Array) and not hasattr(a, "aval") else
              get_aval(a).shape for a in args]
    if len(set(shapes)) > 1:
        try:
            broadcast_shapes(*shapes)
        except ValueError as err:
            raise ValueError(f"{name}: {err}") from None


def _as_bool(x):
    x = asarray_weak(x)
    if _dt(x) == np.bool_:
        return x
    return lax.ne(x, _const(x, 0))


@_as_ufunc(identity=True,
           reduce=_fast.bitwise_reduce("logical_and", lax.reduce_and, True, logical=True))
def logical_and(x, y, /):
    """Elementwise truth-value AND."""
    x, y = promote_args("logical_and", x, y)
    return lax.bitwise_and(_as_bool(x), _as_bool(y))


@_as_ufunc(identity=False,
           reduce=_fast.bitwise_reduce("logical_or", lax.reduce_or, False, logical=True))
def logical_or(x, y, /):
    """Elementwise truth-value OR."""
    x, y = promote_args("logical_or", x, y)
    return lax.bitwise_or(_as_bool(x), _as_bool(y))


@_as_ufunc(identity=False,
           reduce=_fast.bitwise_reduce("logical_xor", lax.reduce_xor, False, logical=True))
def logical_xor(x, y, /):
    """Elementwise truth-value XOR."""
    x, y = promote_args("logical_xor", x, y)
    return lax.bitwise_xor(_as_bool(x), _as_bool(y))


def logical_not(x, /):
    """Elementwise truth-value NOT."""
    check_arraylike("logical_not", x)
    return lax.bitwise_not(_as_bool(x))


def invert(x, /):
    """Bitwise NOT (logical NOT for booleans)."""
    check_arraylike("invert", x)
    (x,) = promote_args("invert", x)
    return lax.bitwise_not(x)


bitwise_not = bitwise_invert = invert


def left_shift(x, y, /):
    """``x << y`` elementwise."""
    x, y = promote_args_numeric("left_shift", x, y)
    return lax.shift_left(x, y)


def right_shift(x, y, /):
    """``x >> y`` elementwise (arithmetic for signed types, logical for unsigned)."""
    x, y = promote_args_numeric("right_shift", x, y)
    if _dt(x).kind == "u":
        return lax.shift_right_logical(x, y)
    return lax.shift_right_arithmetic(x, y)


bitwise_left_shift, bitwise_right_shift = left_shift, right_shift


@jit_when_traced
def fmax(x1, x2):
    """Elementwise maximum that ignores NaNs."""
    # as JAX writes it: x1 where it is greater or x2 is NaN (so a NaN only when both are)
    return _where(bitwise_or(greater(x1, x2), isnan(x2)), x1, x2)


@jit_when_traced
def fmin(x1, x2):
    """Elementwise minimum that ignores NaNs."""
    # as JAX writes it: x1 where it is less or x2 is NaN (so a NaN only when both are)
    return _where(bitwise_or(less(x1, x2), isnan(x2)), x1, x2)


@jit_when_traced
def heaviside(x1, x2, /):
    """0 where x1 < 0, x2 where x1 == 0, 1 where x1 > 0."""
    _check_broadcastable("heaviside", x1, x2)
    x1, x2 = promote_args_inexact("heaviside", x1, x2)
    zero = _const(x1, 0)
    return where(lax.lt(x1, zero), zero,
                 where(lax.gt(x1, zero), _const(x1, 1), where(lax.ne(x1, x1), x1, x2)))


# ------------------------------------------------------------------ complex

def real(x, /):
    """The real part (the value itself for real inputs)."""
    check_arraylike("real", x)
    x = asarray_weak(x)
    return lax.real(x) if dtypes.is_complex(_dt(x)) else x


def imag(x, /):
    """The imaginary part (zeros for real inputs)."""
    check_arraylike("imag", x)
    x = asarray_weak(x)
    return lax.imag(x) if dtypes.is_complex(_dt(x)) else _full_like(x, 0)


def conjugate(x, /):
    """The complex conjugate (the value itself for real inputs)."""
    check_arraylike("conjugate", x)
    x = asarray_weak(x)
    return lax.conj(x) if dtypes.is_complex(_dt(x)) else x


conj = conjugate


@jit_when_traced(static_argnames=("deg",))
def angle(z, deg: bool = False):
    """The argument of complex ``z`` (in degrees if ``deg``)."""
    check_arraylike("angle", z)
    if not dtypes.is_inexact(dtypes.dtype(z)):  # JAX computes integer angles in the default float
        z = to_dtype(asarray_weak(z), dtypes.default_float_dtype())
    (z,) = promote_args_inexact("angle", z)
    re, im = real(z), imag(z)
    # JAX computes the angle in a strongly typed float, even for Python scalars
    re, im = _with_weak(re, False), _with_weak(im, False)
    out = lax.atan2(im, re)
    return rad2deg(out) if deg else out


@jit_when_traced
def isreal(x):
    """Elementwise test for a zero imaginary part."""
    check_arraylike("isreal", x)
    im = imag(x)
    return lax.eq(im, _const(im, 0))


@jit_when_traced
def iscomplex(x):
    """Elementwise test for a non-zero imaginary part."""
    check_arraylike("iscomplex", x)
    im = imag(x)
    return lax.ne(im, _const(im, 0))


# ------------------------------------------------------------------ selection

def where(condition, x=None, y=None, /, *, size=None, fill_value=None):
    """Elementwise ``x if condition else y``, broadcast and promoted; with one argument,
    ``nonzero(condition)``.

    Example:
      >>> jnp.where(jnp.array([True, False]), 1.0, 0.0)
      Array([1., 0.], dtype=float32, weak_type=True)
    """
    if x is None and y is None:
        from plax.numpy.searching import nonzero
        return nonzero(condition, size=size, fill_value=fill_value)
    if x is None or y is None:
        raise TypeError("Either both or neither of the x and y arguments should be provided to "
                        "jnp.where, got only one.")
    return _where(condition, x, y)


@jit_when_traced(name="_where")
def _where(condition, x, y):
    check_arraylike("where", condition, x, y)
    cond = _as_bool(condition)
    from plax.numpy.util import promote_dtypes
    x, y = promote_dtypes(x, y)  # shapes broadcast below (a ValueError if they cannot, as JAX)
    if get_aval(cond).shape:
        cond, x, y = broadcast_all(cond, x, y)
    else:  # select_n takes a scalar selector beside cases of any shape, as JAX leaves it
        x, y = broadcast_all(x, y)
    return lax.select(cond, x, y)


@jit_when_traced
def clip(arr=None, /, min=None, max=None, *, a=None, a_min=None, a_max=None):
    """Clamps values to ``[min, max]`` (either may be None)."""
    if arr is None:
        arr = a
    lo = min if min is not None else a_min
    hi = max if max is not None else a_max
    check_arraylike("clip", arr)
    out = asarray_weak(arr)
    if any(b is not None and dtypes.is_complex(_dt(asarray_weak(b))) for b in (out, lo, hi)):
        # (lax.clamp orders complex values by their real parts, as XLA does; jnp.clip refuses)
        raise ValueError("jnp.clip got a complex operand or bound: complex numbers have no "
                         "order to clip by. Clip the real and imaginary parts separately "
                         "(plax.numpy.real / plax.numpy.imag), or use lax.clamp, which "
                         "compares real parts as XLA does.")
    if lo is not None:
        out = maximum(lo, out)
    if hi is not None:
        out = minimum(hi, out)
    return out


@jit_when_traced(static_argnames=("copy",))
def nan_to_num(x, copy: bool = True, nan: float = 0.0, posinf=None, neginf=None):
    """Replaces NaN with ``nan`` and infinities with ``posinf``/``neginf`` (default: the dtype's
    extremes)."""
    check_arraylike("nan_to_num", x)
    x = asarray_weak(x)
    dt = _dt(x)
    if not dtypes.is_inexact(dt):
        return x
    if dtypes.is_complex(dt):
        return lax.complex(nan_to_num(real(x), nan=nan, posinf=posinf, neginf=neginf),
                           nan_to_num(imag(x), nan=nan, posinf=posinf, neginf=neginf))
    info = dtypes.finfo(dt)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    out = where(isnan(x), to_dtype(nan, dt), x)
    out = where(isposinf(out), to_dtype(posinf, dt), out)
    return where(isneginf(out), to_dtype(neginf, dt), out)


@jit_when_traced(static_argnames=("equal_nan",))
def isclose(a, b, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """Elementwise ``|a - b| <= atol + rtol * |b|`` (with NaN and infinity handling)."""
    a, b = promote_args_inexact("isclose", a, b)
    rdt = dtypes.real_dtype(_dt(a))
    # in JAX's order (its both-NaN test is staged whether or not equal_nan asks for it)
    rtol, atol = lax.convert_element_type(rtol, rdt), lax.convert_element_type(atol, rdt)
    both_nan = logical_and(isnan(a), isnan(b))
    finite = isfinite(b)
    in_range = lax.le(lax.abs(lax.sub(a, b)), lax.add(atol, lax.mul(rtol, lax.abs(b))))
    # exact equality covers equal infinities; a NaN is never in range
    out = logical_or(lax.eq(a, b), logical_and(finite, in_range))
    return logical_or(out, both_nan) if equal_nan else out


@jit_when_traced(static_argnames=("equal_nan",))
def allclose(a, b, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False):
    """Whether all elements are :func:`isclose`."""
    from plax.numpy.reductions import all as jall
    return jall(isclose(a, b, rtol, atol, equal_nan))


def array_equal(a1, a2, equal_nan: bool = False) -> Any:
    """Whether two arrays have the same shape and elements."""
    from plax.numpy.creation import asarray
    from plax.numpy.reductions import all as jall
    a1, a2 = asarray(a1), asarray(a2)  # lists are accepted here, as in JAX and NumPy
    if get_aval(a1).shape != get_aval(a2).shape:
        return lax.full((), False, np.bool_)
    eq = equal(a1, a2)
    if equal_nan:
        eq = logical_or(eq, logical_and(isnan(a1), isnan(a2)))
    return jall(eq)


def array_equiv(a1, a2) -> Any:
    """Whether two arrays are equal after broadcasting."""
    from plax.numpy.creation import asarray
    from plax.numpy.reductions import all as jall
    try:
        return jall(equal(asarray(a1), asarray(a2)))
    except (ValueError, TypeError):  # shapes that do not broadcast (TypeError for equal ranks)
        return lax.full((), False, np.bool_)
