"""Elementwise binary primitives: arithmetic, comparisons and bitwise operations.

Operands must have equal dtypes; their shapes broadcast by JAX's rule (see
:func:`plax.lax.base.broadcasting_shape`): a rank-0 operand broadcasts against the other
(``add a 2.0:f32[]``), and operands of equal rank may have size 1 where the other has any
size (``add a:f32[3,2] b:f32[1,2]``, as ``vmap`` stages). ``jnp`` functions do the dtype
promotion and the rank promotion before reaching these.
"""
from __future__ import annotations


import numpy as np

import plax.lax.unary as U
from plax import dtypes
from plax.core.primitive import Primitive
from plax.lowering.fusion import ELEMENTWISE, register_fusible
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.lax.base import (ANY, BOOL_OR_INT, INEXACT, INTEGRAL, NUMBER, ORDERED, FLOAT, asarray,
                           aval_of, check_dtype, same_dtypes, broadcasting_shape)
from plax.transforms.batching import broadcast_batcher, defbroadcasting
from plax.transforms.jvp import Zero, defjvp, defjvp2, defzero, deflinear, tangent_aval


def _naryop(name: str, allowed, out_dtype=None) -> Primitive:
    prim = Primitive(name)

    def abstract_eval(*avals):
        for a in avals:
            check_dtype(name, a, allowed)
        dt = same_dtypes(name, avals)
        shape = broadcasting_shape(name, avals)
        weak = all(a.weak_type for a in avals)
        return ShapedArray(shape, out_dtype or dt, weak)  # JAX keeps weak types for fixed-dtype outputs too

    prim.def_abstract_eval(abstract_eval)
    defbroadcasting(prim)
    register_fusible(prim, ELEMENTWISE)
    return prim


def _bind2(prim):
    def op(x, y):
        return prim.bind(asarray(x), asarray(y))
    op.__name__ = prim.name
    op.__doc__ = f"Elementwise ``{prim.name}`` of two arrays of equal dtype (see jax.lax.{prim.name})."
    return op


def unbroadcast(ct, operand_aval: ShapedArray):
    """Sums a cotangent down to an operand's shape: over every axis of a rank-0 operand, and
    over the size-1 axes an operand was broadcast along (JAX's ``_unbroadcast``)."""
    if type(ct) is Zero:
        return Zero(tangent_aval(operand_aval))
    ct_shape = aval_of(ct).shape
    if ct_shape == operand_aval.shape:
        return ct
    from plax.lax.reduction import reduce_sum
    if not operand_aval.shape:
        return reduce_sum(ct, tuple(range(len(ct_shape))))
    from plax.lax.shape import reshape
    axes = tuple(i for i, (c, o) in enumerate(zip(ct_shape, operand_aval.shape)) if c != o)
    return reshape(reduce_sum(ct, axes), operand_aval.shape)


# ------------------------------------------------------------------ arithmetic

add_p = _naryop("add", NUMBER)
sub_p = _naryop("sub", NUMBER)
mul_p = _naryop("mul", NUMBER)
div_p = _naryop("div", NUMBER)
rem_p = _naryop("rem", INTEGRAL + (FLOAT,))
pow_p = _naryop("pow", INEXACT)
max_p = _naryop("max", ORDERED + ("complex",))
min_p = _naryop("min", ORDERED + ("complex",))
atan2_p = _naryop("atan2", (FLOAT,))
nextafter_p = _naryop("nextafter", (FLOAT,))
# add_any sums tangents and cotangents; it is add, kept separate so linear jaxprs read clearly.
add_any_p = _naryop("add_any", NUMBER)
_ADD_ANY_BROADCASTING = broadcast_batcher(add_any_p)

add, sub, div, rem = map(_bind2, (add_p, sub_p, div_p, rem_p))


def mul(x, y, out_dtype=None):
    """Elementwise ``x * y`` of two arrays of equal dtype (see jax.lax.mul).

    ``out_dtype``: the result's dtype; as JAX documents it, the operands are converted to it
    before the product (so ``int8 * int8`` can be exact in ``int32``). A positional-or-keyword
    default, so a call without it costs nothing more.

    Example:
      >>> lax.mul(jnp.int8(3), jnp.int8(100), out_dtype=jnp.int32)
      Array(300, dtype=int32)
    """
    if out_dtype is not None:
        from plax.lax.convert import convert_element_type
        dt = dtypes.canonicalize_dtype(out_dtype)
        x, y = convert_element_type(x, dt), convert_element_type(y, dt)
    return mul_p.bind(asarray(x), asarray(y))
max, min, atan2 = map(_bind2, (max_p, min_p, atan2_p))


def nextafter(x1, x2):
    """The next representable value after ``x1`` towards ``x2``, elementwise (float arrays of
    equal dtype; JAX's parameter names)."""
    return nextafter_p.bind(asarray(x1), asarray(x2))


@pow_p.def_abstract_eval
def _pow_abstract_eval(x, y):
    # an inexact base and an exponent of its dtype, or of any integer dtype (JAX's rule: the
    # exponent is converted to the base's dtype where the power is computed)
    if not (dtypes.is_inexact(x.dtype) and (dtypes.is_integer(y.dtype) or y.dtype == x.dtype)):
        raise TypeError("the first argument to pow must have an inexact dtype (float or "
                        "complex), and the second argument must have an inexact or integer "
                        "dtype, and two inexact dtypes must match, but got "
                        f"{x.dtype} and {y.dtype} respectively.")
    return ShapedArray(broadcasting_shape("pow", (x, y)), x.dtype, x.weak_type and y.weak_type)


def pow(x, y):
    """``x ** y`` elementwise: ``x`` inexact, ``y`` of ``x``'s dtype or of an integer dtype
    (staged as it is: ``pow a b:i32[]``); see :func:`integer_pow` for a static exponent.

    Example:
      >>> lax.pow(jnp.float32(2.0), 3)
      Array(8., dtype=float32)
    """
    x, y = asarray(x), asarray(y)
    return pow_p.bind(x, y)


def _to_shape(t, aval: ShapedArray):
    """A tangent broadcast to the result's shape (from rank 0, or along size-1 axes)."""
    if aval_of(t).shape != aval.shape:
        from plax.lax.shape import broadcast_size_one
        t = broadcast_size_one(t, aval.shape)
    return t


def _additive_jvp(prim, negate_y: bool):
    """The JVP rule of ``add``/``sub`` as JAX writes it: with one symbolic-zero tangent the
    other tangent passes through (negated for ``sub``'s subtrahend, broadcast to the result's
    shape), so no zero is instantiated and nothing is added to it."""
    def rule(primals, tangents):
        out = prim.bind(*primals)
        aval = tangent_aval(aval_of(out))
        xdot, ydot = tangents
        if type(xdot) is Zero and type(ydot) is Zero:
            return out, Zero(aval)
        if type(xdot) is Zero:
            return out, _to_shape(U.neg(ydot) if negate_y else ydot, aval)
        if type(ydot) is Zero:
            return out, _to_shape(xdot, aval)
        return out, prim.bind(xdot, ydot)
    register_rule("jvp", prim)(rule)


_additive_jvp(add_p, negate_y=False)
register_rule("transpose", add_p)(
    lambda ct, x, y: [unbroadcast(ct, aval_of_any(x)), unbroadcast(ct, aval_of_any(y))])
deflinear(add_any_p, lambda ct, x, y: [unbroadcast(ct, aval_of_any(x)), unbroadcast(ct, aval_of_any(y))])


@register_rule("batch", add_any_p)
def _add_any_batch(vals, dims):
    """As JAX's batcher of ``add_any`` (its operands have one type): an unbatched operand is
    broadcast along the other's batch axis (NumPy-int dimensions, as JAX's), a batch axis
    elsewhere is moved to the other's; operands of other shapes batch as ``add`` does."""
    (x, y), (dx, dy) = vals, dims
    ax, ay = aval_of(x), aval_of(y)
    unbatched = lambda a, d: a.shape if d is None else a.shape[:d] + a.shape[d + 1:]
    if unbatched(ax, dx) != unbatched(ay, dy):
        return _ADD_ANY_BROADCASTING(vals, dims)
    if dx == dy:
        return add_any_p.bind(x, y), dx
    from plax.transforms.batching import move_axis_to
    if dx is None:
        return add_any_p.bind(_batch_broadcast(x, ay.shape[dy], dy), y), dy
    if dy is None:
        return add_any_p.bind(x, _batch_broadcast(y, ax.shape[dx], dx)), dx
    return add_any_p.bind(move_axis_to(x, dx, dy, ax.shape[dx]), y), dy


def _batch_broadcast(x, size: int, axis: int):
    shape = list(aval_of(x).shape)
    shape.insert(axis, size)
    from plax.lax.shape import broadcast_in_dim_p
    return broadcast_in_dim_p.bind(
        x, shape=tuple(shape), broadcast_dimensions=tuple(np.delete(np.arange(len(shape)), axis)))
def _neg_cotangent(ct):
    return ct if type(ct) is Zero else U.neg(ct)


_additive_jvp(sub_p, negate_y=True)
# the subtrahend's cotangent is negated before it is summed down, as JAX's rule does
register_rule("transpose", sub_p)(
    lambda ct, x, y: [unbroadcast(ct, aval_of_any(x)),
                      unbroadcast(_neg_cotangent(ct), aval_of_any(y))])


def aval_of_any(x):
    """The aval of an operand or of an UndefinedPrimal marker."""
    return x.aval


defjvp(mul_p, lambda t, x, y: mul(t, y), lambda t, x, y: mul(x, t))


@register_rule("transpose", mul_p)
def _mul_transpose(ct, x, y):
    from plax.transforms.transpose import is_undefined_primal
    if is_undefined_primal(x) and is_undefined_primal(y):
        raise TypeError("mul is not linear in both operands at once; this is a bug in a JVP rule.")
    if type(ct) is Zero:
        return [None, None]
    if is_undefined_primal(x):
        return [unbroadcast(mul(ct, y), x.aval), None]
    return [None, unbroadcast(mul(x, ct), y.aval)]


# d/dy x/y = -x * y**-2, written as JAX's rule (``integer_pow[y=-2]``)
defjvp(div_p, lambda t, x, y: div(t, y),
       lambda t, x, y: mul(mul(U.neg(t), x), U.integer_pow(y, -2)))


@register_rule("transpose", div_p)
def _div_transpose(ct, x, y):
    from plax.transforms.transpose import is_undefined_primal
    if is_undefined_primal(y):
        raise TypeError("div is not linear in its divisor; this is a bug in a JVP rule.")
    if type(ct) is Zero:
        return [None, None]
    return [unbroadcast(div(ct, y), x.aval), None]


def _rem_jvp_y(t, x, y):
    q = div(x, y)
    return mul(U.neg(t), mul(U.sign(q), U.floor(U.abs(q))))


defjvp(rem_p, lambda t, x, y: t, _rem_jvp_y)


def _pow_jvp_x(t, ans, x, y):
    # d/dx x**y = y * x**(y-1), written as JAX's rule (its ``_ones(y)``: a full array of y's
    # shape); no special case for an inexact y (0 ** 0 gives NaN), and in the strong type
    # (JAX's rule converts both operands to the result dtype)
    from plax.lax.shape import full_like
    if dtypes.is_integer(aval_of(y).dtype):
        return mul(t, _integer_exponent_jacobian(_strong(x), y))
    x, y = _strong(x), _strong(y)
    return mul(t, mul(y, pow(x, sub(y, full_like(y, 1)))))


def _integer_exponent_jacobian(x, n):
    """d/dx x**n for an integer ``n``, as JAX's rule stages it: ``n`` converted to ``x``'s
    dtype, both broadcast to one shape, then ``n * x**(n-1)`` with 1 in place of a zero ``n``
    in the factor, and 0 where ``n`` is 0 (so 0 ** 0 has derivative 0, not NaN)."""
    from plax.lax.convert import convert_element_type
    from plax.lax.select import select
    from plax.lax.shape import broadcast_size_one, full_like
    n = convert_element_type(n, aval_of(x).dtype)
    shape = broadcasting_shape("pow", (aval_of(x), aval_of(n)))
    x, n = broadcast_size_one(x, shape), broadcast_size_one(n, shape)
    n_is_zero = eq(n, full_like_scalar(0, n))
    zeros = full_like(n, 0)
    factor = select(eq(n, full_like_scalar(0, n)), full_like(n, 1), n)
    return select(n_is_zero, zeros, mul(factor, pow(x, sub(n, full_like(n, 1)))))


def _strong(x):
    a = aval_of(x)
    if not a.weak_type:
        return x
    from plax.lax.convert import convert_element_type
    return convert_element_type(x, a.dtype, weak_type=False)


def _pow_jvp_y(t, ans, x, y):
    # d/dy x**y = log(x) * x**y, reusing the result as JAX's rule does, with x's zeros
    # replaced by ones inside the log (so 0 ** y > 0 has derivative 0 * log(1) = 0)
    from plax.lax.shape import full_like
    safe_x = select_where(eq(x, full_like_scalar(0, x)), full_like(x, 1), x)
    return mul(t, mul(U.log(safe_x), ans))


defjvp2(pow_p, _pow_jvp_x, _pow_jvp_y)


def _balanced_eq(x, z, y):
    """1 where x is the unique extreme ``z``, 1/2 where x and y tie, 0 elsewhere (in ``z``'s
    dtype), computed as JAX's rule does: ``(x == z ? 1 : 0) / (y == z ? 2 : 1)``."""
    from plax.lax.shape import full_like
    return div(select_where(eq(x, z), full_like(z, 1), full_like(z, 0)),
               select_where(eq(y, z), full_like(z, 2), full_like(z, 1)))


# the derivatives reuse the result (JAX's defjvp2), where recomputing max(x, y) staged it again
defjvp2(max_p, lambda t, ans, x, y: mul(t, _balanced_eq(x, ans, y)),
        lambda t, ans, x, y: mul(t, _balanced_eq(y, ans, x)))
defjvp2(min_p, lambda t, ans, x, y: mul(t, _balanced_eq(x, ans, y)),
        lambda t, ans, x, y: mul(t, _balanced_eq(y, ans, x)))
def _sum_of_squares(x, y):
    from plax.lax.extra_elementwise import square  # (it imports this module)
    return add(square(x), square(y))


# written as JAX's rules, with ``square``
defjvp(atan2_p, lambda t, x, y: mul(t, div(y, _sum_of_squares(x, y))),
       lambda t, x, y: mul(t, div(U.neg(x), _sum_of_squares(x, y))))
defzero(nextafter_p)


# ------------------------------------------------------------------ complex

complex_p = Primitive("complex")
register_fusible(complex_p, ELEMENTWISE)


@complex_p.def_abstract_eval
def _complex_abstract_eval(x, y):
    check_dtype("complex", x, (FLOAT,))
    dt = same_dtypes("complex", [x, y])
    shape = broadcasting_shape("complex", [x, y])
    return ShapedArray(shape, dtypes.complex_dtype_for(dt), x.weak_type and y.weak_type)


def complex(x, y):
    """Builds ``x + 1j * y`` from two float arrays of equal dtype."""
    return complex_p.bind(asarray(x), asarray(y))


defbroadcasting(complex_p)
deflinear(complex_p, lambda ct, x, y: [unbroadcast(U.real(ct), x.aval),
                                       unbroadcast(U.imag(U.neg(ct)), y.aval)])


# ------------------------------------------------------------------ comparisons and bitwise

eq_p = _naryop("eq", ANY, np.dtype(bool))
ne_p = _naryop("ne", ANY, np.dtype(bool))
lt_p = _naryop("lt", ORDERED, np.dtype(bool))
le_p = _naryop("le", ORDERED, np.dtype(bool))
gt_p = _naryop("gt", ORDERED, np.dtype(bool))
ge_p = _naryop("ge", ORDERED, np.dtype(bool))
and_p = _naryop("and", BOOL_OR_INT)
or_p = _naryop("or", BOOL_OR_INT)
xor_p = _naryop("xor", BOOL_OR_INT)
shift_left_p = _naryop("shift_left", INTEGRAL)
shift_right_logical_p = _naryop("shift_right_logical", INTEGRAL)
shift_right_arithmetic_p = _naryop("shift_right_arithmetic", INTEGRAL)

for _p in (eq_p, ne_p, lt_p, le_p, gt_p, ge_p, and_p, or_p, xor_p, shift_left_p,
           shift_right_logical_p, shift_right_arithmetic_p):
    defzero(_p)

eq, ne, lt, le, gt, ge = map(_bind2, (eq_p, ne_p, lt_p, le_p, gt_p, ge_p))
bitwise_and, bitwise_or, bitwise_xor = map(_bind2, (and_p, or_p, xor_p))
shift_left, shift_right_logical, shift_right_arithmetic = map(
    _bind2, (shift_left_p, shift_right_logical_p, shift_right_arithmetic_p))


# ------------------------------------------------------------------ small helpers used by rules

def full_like_scalar(value, like):
    """A rank-0 array of ``value`` with ``like``'s dtype and weak type (broadcasts inside
    elementwise ops). Weakly typed like ``like``, as JAX's rule constants are (``full_like``):
    a Python scalar's derivative stays weakly typed through the rules that use it."""
    from plax.lax.shape import full
    a = aval_of(like)
    return full((), value, a.dtype, weak_type=a.weak_type)


def zeros_like(x):
    """Zeros of ``x``'s shape, dtype and weak type (JAX's rules' ``_zeros``, a ``full_like``)."""
    from plax.lax.shape import full
    a = aval_of(x)
    return full(a.shape, 0, a.dtype, weak_type=a.weak_type)


def zeros_like_shape(shape, dtype):
    from plax.lax.shape import full
    return full(shape, 0, dtype)


def select_where(pred, on_true, on_false):
    """``select`` for rules: operands are broadcast (from rank 0 or along size-1 axes) to the
    shape of all three, as an elementwise primitive would (select_n itself requires equal
    case shapes)."""
    from plax.lax.select import select
    from plax.lax.shape import broadcast_size_one
    shape = broadcasting_shape("select", [aval_of(v) for v in (pred, on_true, on_false)])
    on_true, on_false = (broadcast_size_one(c, shape) for c in (on_true, on_false))
    if aval_of(pred).shape:
        pred = broadcast_size_one(pred, shape)
    return select(pred, on_true, on_false)
