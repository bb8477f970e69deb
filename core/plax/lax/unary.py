"""Elementwise unary primitives: arithmetic, transcendental, rounding, bitwise and complex parts."""
from __future__ import annotations

import math

import numpy as np

import plax.lax.binary as B
from plax import dtypes
from plax.core.primitive import Primitive
from plax.lowering.fusion import ELEMENTWISE, register_fusible
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.lax.base import (BOOL_OR_INT, COMPLEX, FLOAT, INEXACT, INT, INTEGRAL, NUMBER,
                           asarray, check_dtype)
from plax.transforms.batching import defvectorized
from plax.transforms.jvp import Zero, defjvp, defjvp2, deflinear, defzero


def _unop(name: str, allowed, out_dtype=None) -> Primitive:
    """A unary elementwise primitive whose output has its operand's shape.

    ``out_dtype`` maps the operand dtype to the output dtype (default: unchanged).
    """
    prim = Primitive(name)

    def abstract_eval(x, **params):
        check_dtype(name, x, allowed)
        dt = x.dtype if out_dtype is None else out_dtype(x.dtype)
        return ShapedArray(x.shape, dt, x.weak_type)  # as JAX: weak in, weak out, whatever the dtype

    prim.def_abstract_eval(abstract_eval)
    defvectorized(prim)
    register_fusible(prim, ELEMENTWISE)
    return prim


def _bind1(prim):
    def op(x):
        return prim.bind(asarray(x))
    op.__name__ = prim.name
    op.__doc__ = f"Elementwise ``{prim.name}`` (see jax.lax.{prim.name})."
    return op


def _bind1_accuracy(prim):
    """``_bind1`` with JAX's ``accuracy=`` of the transcendental functions: None, a
    ``lax.Tolerance`` or a ``lax.AccuracyMode``. plax's kernels are always the accurate ones,
    so a valid request changes nothing; a positional-or-keyword default, so a call without it
    costs no more than before."""
    name = prim.name

    def op(x, accuracy=None):
        if accuracy is not None:
            _check_accuracy(name, accuracy)
        return prim.bind(asarray(x))
    op.__name__ = name
    op.__doc__ = (f"Elementwise ``{name}`` (see jax.lax.{name}); ``accuracy`` (a Tolerance or "
                  "AccuracyMode) is accepted, the result is always the accurate one.")
    return op


def _check_accuracy(name, accuracy):
    from plax.lax.extras import AccuracyMode, Tolerance
    if not isinstance(accuracy, (Tolerance, AccuracyMode)):
        raise NotImplementedError(f"lax.{name}: accuracy {accuracy!r} not supported (None, a "
                                  "lax.Tolerance or a lax.AccuracyMode)")


def _scalar(value, like):
    return B.full_like_scalar(value, like)


neg_p = _unop("neg", NUMBER)
sign_p = _unop("sign", NUMBER)
floor_p = _unop("floor", (FLOAT,))
ceil_p = _unop("ceil", (FLOAT,))
round_p = _unop("round", (FLOAT,))
is_finite_p = _unop("is_finite", (FLOAT,), lambda d: np.dtype(bool))
exp_p = _unop("exp", INEXACT)
exp2_p = _unop("exp2", INEXACT)
log_p = _unop("log", INEXACT)
log1p_p = _unop("log1p", INEXACT)
expm1_p = _unop("expm1", INEXACT)
tanh_p = _unop("tanh", INEXACT)
logistic_p = _unop("logistic", INEXACT)
sin_p = _unop("sin", INEXACT)
cos_p = _unop("cos", INEXACT)
tan_p = _unop("tan", INEXACT)
asin_p = _unop("asin", INEXACT)
acos_p = _unop("acos", INEXACT)
atan_p = _unop("atan", INEXACT)
sinh_p = _unop("sinh", INEXACT)
cosh_p = _unop("cosh", INEXACT)
asinh_p = _unop("asinh", INEXACT)
acosh_p = _unop("acosh", INEXACT)
atanh_p = _unop("atanh", INEXACT)
sqrt_p = _unop("sqrt", INEXACT)
rsqrt_p = _unop("rsqrt", INEXACT)
cbrt_p = _unop("cbrt", (FLOAT,))
abs_p = _unop("abs", (INT, FLOAT, COMPLEX), dtypes.real_dtype)  # as in JAX: not unsigned
not_p = _unop("not", BOOL_OR_INT)
population_count_p = _unop("population_count", INTEGRAL)
real_p = _unop("real", (COMPLEX,), dtypes.real_dtype)
imag_p = _unop("imag", (COMPLEX,), dtypes.real_dtype)
conj_p = _unop("conj", (FLOAT, COMPLEX), dtypes.complex_dtype_for)

(neg, sign, floor, ceil, is_finite, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, abs,
 bitwise_not, population_count, real, imag) = map(_bind1, (
    neg_p, sign_p, floor_p, ceil_p, is_finite_p, asin_p, acos_p, atan_p, sinh_p, cosh_p,
    asinh_p, acosh_p, atanh_p, abs_p, not_p, population_count_p, real_p, imag_p))
# the transcendental functions whose JAX forms take ``accuracy=``
(exp, exp2, log, log1p, expm1, tanh, logistic, sin, cos, tan, sqrt, rsqrt, cbrt) = map(
    _bind1_accuracy, (exp_p, exp2_p, log_p, log1p_p, expm1_p, tanh_p, logistic_p, sin_p, cos_p,
                      tan_p, sqrt_p, rsqrt_p, cbrt_p))


class RoundingMethod:
    """How ``round`` breaks ties: away from zero (0, the default) or to nearest even (1)."""

    AWAY_FROM_ZERO = 0
    TO_NEAREST_EVEN = 1


def round(x, rounding_method: int = RoundingMethod.AWAY_FROM_ZERO):
    """Rounds to the nearest integer; ties away from zero unless ``rounding_method=1``."""
    return round_p.bind(asarray(x), rounding_method=int(rounding_method))


def conj(x):
    """Complex conjugate; a real operand gives a complex result, as in JAX."""
    return conj_p.bind(asarray(x))


# ------------------------------------------------------------------ derivatives

deflinear(neg_p, lambda ct, x: [neg(ct)])
for _p in (sign_p, floor_p, ceil_p, round_p, is_finite_p, not_p, population_count_p):
    defzero(_p)

defjvp2(exp_p, lambda t, ans, x: B.mul(t, ans))
defjvp2(exp2_p, lambda t, ans, x: B.mul(t, B.mul(ans, _scalar(math.log(2.0), x))))
defjvp(log_p, lambda t, x: B.div(t, x))
defjvp(log1p_p, lambda t, x: B.div(t, B.add(x, _scalar(1, x))))
defjvp2(expm1_p, lambda t, ans, x: B.mul(t, B.add(ans, _scalar(1, x))))
defjvp2(tanh_p, lambda t, ans, x: B.mul(t, B.sub(_scalar(1, x), B.mul(ans, ans))))
defjvp2(logistic_p, lambda t, ans, x: B.mul(t, B.mul(ans, B.sub(_scalar(1, x), ans))))
defjvp(sin_p, lambda t, x: B.mul(t, cos(x)))
defjvp(cos_p, lambda t, x: B.mul(t, neg(sin(x))))
defjvp2(tan_p, lambda t, ans, x: B.mul(t, B.add(_scalar(1, x), B.mul(ans, ans))))
defjvp(asin_p, lambda t, x: B.mul(t, rsqrt(B.sub(_scalar(1, x), B.mul(x, x)))))
defjvp(acos_p, lambda t, x: B.mul(t, neg(rsqrt(B.sub(_scalar(1, x), B.mul(x, x))))))
defjvp(atan_p, lambda t, x: B.div(t, B.add(_scalar(1, x), B.mul(x, x))))
defjvp(sinh_p, lambda t, x: B.mul(t, cosh(x)))
defjvp(cosh_p, lambda t, x: B.mul(t, sinh(x)))
defjvp(asinh_p, lambda t, x: B.mul(t, rsqrt(B.add(B.mul(x, x), _scalar(1, x)))))
defjvp(acosh_p, lambda t, x: B.mul(t, rsqrt(B.mul(B.sub(x, _scalar(1, x)), B.add(x, _scalar(1, x))))))
defjvp(atanh_p, lambda t, x: B.div(t, B.sub(_scalar(1, x), B.mul(x, x))))
defjvp2(sqrt_p, lambda t, ans, x: B.div(t, B.mul(_scalar(2, x), ans)))
defjvp2(rsqrt_p, lambda t, ans, x: B.mul(t, B.mul(_scalar(-0.5, x), B.div(ans, x))))
defjvp2(cbrt_p, lambda t, ans, x: B.mul(t, B.div(_scalar(1 / 3, x), B.mul(ans, ans))))


def _abs_jvp(t, x):
    if dtypes.is_complex(x.dtype):
        # d|z| = Re(conj(z) * dz) / |z|, taken as 0 at z = 0.
        a = abs(x)
        safe = B.select_where(B.eq(a, _scalar(0, a)), B.full_like_scalar(1, a), a)
        return B.div(real(B.mul(conj(x), t)), safe)
    # JAX's convention: the derivative at 0 is 1 (d|x| = t where x >= 0, else -t)
    return B.select_where(B.ge(x, _scalar(0, x)), t, neg(t))


defjvp(abs_p, _abs_jvp)

def _strong_zeros(ct):
    # JAX's real/imag transposes pair the cotangent with a strongly typed zero, so a weakly
    # typed complex primal gets a strongly typed cotangent (grad of |z|**2 at 3. + 4j)
    a = B.aval_of(ct)
    return B.zeros_like_shape(a.shape, a.dtype)


deflinear(real_p, lambda ct, x: [B.complex(ct, _strong_zeros(ct))])
deflinear(imag_p, lambda ct, x: [B.complex(_strong_zeros(ct), neg(ct))])


@register_rule("jvp", conj_p)
def _conj_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return conj(x), conj(t)


@register_rule("transpose", conj_p)
def _conj_transpose(ct, x):
    if type(ct) is Zero:
        return [None]
    if dtypes.is_complex(x.aval.dtype):
        return [conj(ct)]
    return [real(ct)]


# ------------------------------------------------------------------ integer_pow

integer_pow_p = Primitive("integer_pow")
register_fusible(integer_pow_p, ELEMENTWISE)


@integer_pow_p.def_abstract_eval
def _integer_pow_abstract_eval(x, *, y):
    check_dtype("integer_pow", x, NUMBER)
    if dtypes.is_integer(x.dtype) and y < 0:
        raise TypeError(f"integer_pow with a negative exponent ({y}) needs an inexact operand, "
                        f"got {x.dtype.name}.")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def integer_pow(x, y: int):
    """``x ** y`` for a static Python integer ``y`` (computed by repeated multiplication)."""
    if not isinstance(y, (int, np.integer)):
        raise TypeError(f"integer_pow requires a static integer exponent, got {y!r}")
    return integer_pow_p.bind(asarray(x), y=int(y))


def _integer_pow_jvp(t, x, *, y):
    # y * x ** (y - 1), staged as JAX's rule stages it: the tangent itself for y = 1, and
    # ``2 * x`` for y = 2 (no ``integer_pow[y=1]``)
    if y == 0:
        return B.zeros_like(t)
    if y == 1:
        return t
    return B.mul(t, B.mul(_scalar(y, x), x if y == 2 else integer_pow(x, y - 1)))


defjvp(integer_pow_p, _integer_pow_jvp)
defvectorized(integer_pow_p)
