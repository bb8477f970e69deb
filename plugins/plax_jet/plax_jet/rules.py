"""The ``jet`` rules of plax's primitives, on normalized Taylor coefficients.

With ``x(t) = x0 + x1 t + ... + xK t^K`` (``xs = [x1, ..., xK]``), each rule computes the
coefficients of ``f(x(t))`` up to ``t^K``: linear primitives map each coefficient, products
convolve them (Cauchy products), and the transcendental functions follow from the ODE each
satisfies (``exp' = exp``, ``log' = 1/x``, ...), one order at a time.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from plax import dtypes, lax
from plax.core import get_aval, register_rule
from plax.lax import binary, convert, cumulative, reduction, shape, slicing, unary
from plax.lax.dot import dot_general_p
from plax.lax.extra_elementwise import square_p
from plax.lax.select import select_n_p
from plax.transforms.call import jit_p


def _order(series) -> int:
    return next(len(s) for s in series if s is not None)


def _terms(x, s, k: int) -> list:
    """The K coefficients of operand ``x`` (zeros when its series is None)."""
    if s is not None:
        return s
    z = lax.full(get_aval(x).shape, 0, get_aval(x).dtype)
    return [z] * k


# ------------------------------------------------------------------ coefficient arithmetic
# Each helper takes and returns full coefficient lists [c0, c1, ..., cK] (c0 the primal).

def _cauchy(a: list, b: list, mul: Callable = lax.mul) -> list:
    """Coefficients of a product: ``c_k = sum_i a_i b_(k-i)``."""
    out = []
    for k in range(len(a)):
        acc = mul(a[0], b[k])
        for i in range(1, k + 1):
            acc = lax.add(acc, mul(a[i], b[k - i]))
        out.append(acc)
    return out


def _div(a: list, b: list) -> list:
    """Coefficients of ``a / b``: ``q_k = (a_k - sum_{i>=1} b_i q_(k-i)) / b_0``."""
    q = []
    for k in range(len(a)):
        acc = a[k]
        for i in range(1, k + 1):
            acc = lax.sub(acc, lax.mul(b[i], q[k - i]))
        q.append(lax.div(acc, b[0]))
    return q


def _scale(x, c: float):
    return lax.mul(x, lax.full((), c, get_aval(x).dtype))


def _ode(x: list, y0, z_of: Callable[[list, int], object]) -> list:
    """Coefficients of ``y`` with ``y' = z(y) x'``: ``y_k = (1/k) sum_j j x_j z_(k-j)``,
    where ``z_of(ys, m)`` gives coefficient ``m`` of ``z`` from ``ys = [y0..y_m]``."""
    y, z = [y0], []
    for k in range(1, len(x)):
        z.append(z_of(y, k - 1))
        acc = None
        for j in range(1, k + 1):
            term = _scale(lax.mul(x[j], z[k - j]), j / k)
            acc = term if acc is None else lax.add(acc, term)
        y.append(acc)
    return y


def _exp(x: list) -> list:
    return _ode(x, lax.exp(x[0]), lambda y, m: y[m])


def _log(x: list) -> list:
    inv = _div([lax.full_like(x[0], 1)] + [lax.full_like(x[0], 0)] * (len(x) - 1), x)
    y0 = lax.log(x[0])
    # y' = x'/x: y_k = (1/k) sum_j j x_j inv_(k-j)
    return _ode(x, y0, lambda y, m: inv[m])


def _pow_const(x: list, p) -> list:
    """Coefficients of ``x ** p`` for an exponent without a series (``x0 != 0``)."""
    y = [lax.pow(x[0], p)]
    for k in range(1, len(x)):
        acc = None
        for j in range(1, k + 1):
            w = lax.sub(lax.mul(p, lax.full_like(p, j)), lax.full_like(p, k - j))
            term = lax.mul(lax.mul(w, x[j]), y[k - j])
            acc = term if acc is None else lax.add(acc, term)
        y.append(lax.div(acc, _scale(x[0], float(k))))
    return y


# ------------------------------------------------------------------ rule makers

def _primitive_rule(fn: Callable[[list, dict], list]):
    """A unary rule from ``fn(full coefficients, params) -> full coefficients``."""
    def rule(primals, series, **params):
        (x,), (s,) = primals, series
        out = fn([x] + list(s), params)
        return out[0], out[1:]
    return rule


def deflinear_jet(prim) -> None:
    """Registers the jet rule of a primitive linear in all its operands jointly: it maps
    each coefficient (operands without a series contribute zeros)."""
    def rule(primals, series, **params):
        k = _order(series)
        out = prim.bind(*primals, **params)
        cols = [_terms(x, s, k) for x, s in zip(primals, series)]
        return out, [prim.bind(*[c[i] for c in cols], **params) for i in range(k)]
    register_rule("jet", prim)(rule)


def defstructural_jet(prim, linear: tuple[int, ...]) -> None:
    """Registers the jet rule of a primitive linear in the operands ``linear`` (the others,
    indices or predicates, are taken from the primals and must carry no series)."""
    def rule(primals, series, **params):
        k = _order(series)
        out = prim.bind(*primals, **params)
        terms = []
        for i in range(k):
            ops = [(_terms(x, s, k)[i] if n in linear else x)
                   for n, (x, s) in enumerate(zip(primals, series))]
            terms.append(prim.bind(*ops, **params))
        return out, terms
    register_rule("jet", prim)(rule)


def defbilinear_jet(prim) -> None:
    """Registers the jet rule of a primitive bilinear in its two operands (Cauchy product)."""
    def rule(primals, series, **params):
        k = _order(series)
        a = [primals[0]] + _terms(primals[0], series[0], k)
        b = [primals[1]] + _terms(primals[1], series[1], k)
        out = _cauchy(a, b, lambda u, v: prim.bind(u, v, **params))
        return out[0], out[1:]
    register_rule("jet", prim)(rule)


def defzero_jet(prim) -> None:
    """Registers the jet rule of a piecewise-constant primitive: no series."""
    register_rule("jet", prim)(lambda primals, series, **params:
                               (prim.bind(*primals, **params), None))


# ------------------------------------------------------------------ registrations

for _p in (binary.add_p, binary.sub_p, binary.add_any_p, unary.neg_p, reduction.reduce_sum_p,
           shape.reshape_p, shape.broadcast_in_dim_p, shape.transpose_p, shape.squeeze_p,
           shape.expand_dims_p, shape.rev_p, shape.pad_p, shape.concatenate_p, shape.stack_p,
           slicing.slice_p, cumulative.cumsum_p, unary.real_p, unary.imag_p, unary.conj_p):
    deflinear_jet(_p)

@register_rule("jet", shape.unstack_p)
def _unstack_jet(primals, series, *, axis):
    # linear, with one result per slice: each result's series is its slice of each term
    (x,), (s,) = primals, series
    out = shape.unstack_p.bind(x, axis=axis)
    cols = [shape.unstack_p.bind(t, axis=axis) for t in _terms(x, s, _order(series))]
    return out, [[c[j] for c in cols] for j in range(len(out))]


@register_rule("jet", shape.split_p)
def _split_jet(primals, series, *, sizes, axis):
    # linear, with one result per piece: each result's series is its piece of each term
    (x,), (s,) = primals, series
    out = shape.split_p.bind(x, sizes=sizes, axis=axis)
    cols = [shape.split_p.bind(t, sizes=sizes, axis=axis) for t in _terms(x, s, _order(series))]
    return out, [[c[j] for c in cols] for j in range(len(out))]


defstructural_jet(select_n_p, linear=tuple(range(1, 64)))
defstructural_jet(slicing.dynamic_slice_p, linear=(0,))
defstructural_jet(slicing.dynamic_update_slice_p, linear=(0, 1))
defstructural_jet(slicing.gather_p, linear=(0,))
defstructural_jet(slicing.scatter_add_p, linear=(0, 2))
defstructural_jet(slicing.scatter_p, linear=(0, 2))

defbilinear_jet(binary.mul_p)
defbilinear_jet(dot_general_p)

for _p in (unary.sign_p, unary.floor_p, unary.ceil_p, unary.round_p, convert.stop_gradient_p):
    defzero_jet(_p)


@register_rule("jet", convert.convert_element_type_p)
def _convert_jet(primals, series, *, new_dtype, **params):
    out = convert.convert_element_type_p.bind(*primals, new_dtype=new_dtype, **params)
    if not dtypes.is_inexact(np.dtype(new_dtype)):
        return out, None
    (x,), (s,) = primals, series
    return out, [convert.convert_element_type_p.bind(t, new_dtype=new_dtype, **params)
                 for t in _terms(x, s, _order(series))]


@register_rule("jet", binary.div_p)
def _div_jet(primals, series):
    k = _order(series)
    a = [primals[0]] + _terms(primals[0], series[0], k)
    b = [primals[1]] + _terms(primals[1], series[1], k)
    out = _div(a, b)
    return out[0], out[1:]


register_rule("jet", unary.exp_p)(_primitive_rule(lambda x, p: _exp(x)))
register_rule("jet", unary.log_p)(_primitive_rule(lambda x, p: _log(x)))


@register_rule("jet", unary.expm1_p)
def _expm1_jet(primals, series):
    (x,), (s,) = primals, series
    out = _exp([x] + list(s))
    return lax.expm1(x), out[1:]


@register_rule("jet", unary.log1p_p)
def _log1p_jet(primals, series):
    (x,), (s,) = primals, series
    out = _log([lax.add(x, lax.full_like(x, 1))] + list(s))
    return lax.log1p(x), out[1:]


def _sin_cos(x: list) -> tuple[list, list]:
    """Coefficients of sin and cos together: ``s' = c x'``, ``c' = -s x'``."""
    s, c = [lax.sin(x[0])], [lax.cos(x[0])]
    for k in range(1, len(x)):
        ds = dc = None
        for j in range(1, k + 1):
            a = _scale(lax.mul(x[j], c[k - j]), j / k)
            b = _scale(lax.mul(x[j], s[k - j]), -j / k)
            ds = a if ds is None else lax.add(ds, a)
            dc = b if dc is None else lax.add(dc, b)
        s.append(ds)
        c.append(dc)
    return s, c


register_rule("jet", unary.sin_p)(_primitive_rule(lambda x, p: _sin_cos(x)[0]))
register_rule("jet", unary.cos_p)(_primitive_rule(lambda x, p: _sin_cos(x)[1]))


def _one_minus_square(y: list, m: int):
    """Coefficient ``m`` of ``1 - y^2``."""
    acc = lax.neg(_cauchy(y[:m + 1], y[:m + 1])[m])
    return lax.add(acc, lax.full_like(acc, 1)) if m == 0 else acc


def _y_minus_square(y: list, m: int):
    """Coefficient ``m`` of ``y - y^2``."""
    return lax.sub(y[m], _cauchy(y[:m + 1], y[:m + 1])[m])


register_rule("jet", unary.tanh_p)(_primitive_rule(
    lambda x, p: _ode(x, lax.tanh(x[0]), _one_minus_square)))
register_rule("jet", unary.logistic_p)(_primitive_rule(
    lambda x, p: _ode(x, lax.logistic(x[0]), _y_minus_square)))


def _sqrt(x: list) -> list:
    """``y^2 = x``: ``y_k = (x_k - sum_{0<i<k} y_i y_(k-i)) / (2 y_0)``."""
    y = [lax.sqrt(x[0])]
    two_y0 = _scale(y[0], 2.0)
    for k in range(1, len(x)):
        acc = x[k]
        for i in range(1, k):
            acc = lax.sub(acc, lax.mul(y[i], y[k - i]))
        y.append(lax.div(acc, two_y0))
    return y


register_rule("jet", unary.sqrt_p)(_primitive_rule(lambda x, p: _sqrt(x)))
register_rule("jet", unary.rsqrt_p)(_primitive_rule(
    lambda x, p: _div([lax.full_like(x[0], 1)] + [lax.full_like(x[0], 0)] * (len(x) - 1),
                      _sqrt(x))))


def _integer_pow(x: list, n: int) -> list:
    """``x ** n`` by repeated Cauchy products (exact where ``x0 == 0``)."""
    if n == 0:
        return [lax.full_like(x[0], 1)] + [lax.full_like(x[0], 0)] * (len(x) - 1)
    if n < 0:
        return _div([lax.full_like(x[0], 1)] + [lax.full_like(x[0], 0)] * (len(x) - 1),
                    _integer_pow(x, -n))
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else _cauchy(result, base)
        n >>= 1
        if n:
            base = _cauchy(base, base)
    return result


register_rule("jet", unary.integer_pow_p)(_primitive_rule(lambda x, p: _integer_pow(x, p["y"])))
register_rule("jet", square_p)(_primitive_rule(lambda x, p: _integer_pow(x, 2)))  # (jnp.square)


@register_rule("jet", binary.pow_p)
def _pow_jet(primals, series):
    (x, y), (sx, sy) = primals, series
    k = _order(series)
    if sy is None:  # x ** const: the power rule, one order at a time
        out = _pow_const([x] + list(sx), y)
        return out[0], out[1:]
    # x ** y = exp(y log x)
    logx = _log([x] + _terms(x, sx, k))
    out = _exp(_cauchy([y] + list(sy), logx))
    return lax.pow(x, y), out[1:]


@register_rule("jet", unary.abs_p)
def _abs_jet(primals, series):
    (x,), (s,) = primals, series
    sign = lax.sign(x)
    return lax.abs(x), [lax.mul(sign, t) for t in s]


def _fit(x, shape):
    """A rank-0 operand broadcast to ``shape`` (select_n needs equal shapes)."""
    return x if get_aval(x).shape == tuple(shape) else lax.broadcast_in_dim(x, shape, ())


def _choose(prim, pick_first):
    """max/min: the coefficients of the chosen operand (their mean where the two tie)."""
    def rule(primals, series):
        (x, y) = primals
        k = _order(series)
        a, b = _terms(x, series[0], k), _terms(y, series[1], k)
        out_shape = get_aval(prim.bind(x, y)).shape
        a, b = [_fit(u, out_shape) for u in a], [_fit(v, out_shape) for v in b]
        first, tie = _fit(pick_first(x, y), out_shape), _fit(lax.eq(x, y), out_shape)
        half = lax.full((), 0.5, get_aval(x).dtype)
        out = [lax.select(tie, lax.mul(lax.add(u, v), half), lax.select(first, u, v))
               for u, v in zip(a, b)]
        return prim.bind(x, y), out
    return rule


register_rule("jet", binary.max_p)(_choose(binary.max_p, lax.gt))
register_rule("jet", binary.min_p)(_choose(binary.min_p, lax.lt))


def _reduce_chooser(prim):
    """reduce_max/min: the mean of the coefficients at the positions of the extremum."""
    def rule(primals, series, *, axes):
        (x,), (s,) = primals, series
        out = prim.bind(x, axes=axes)
        kept = tuple(d for d in range(get_aval(x).ndim) if d not in axes)
        at = lax.convert_element_type(
            lax.eq(x, lax.broadcast_in_dim(out, get_aval(x).shape, kept)), get_aval(x).dtype)
        count = reduction.reduce_sum_p.bind(at, axes=axes)
        return out, [lax.div(reduction.reduce_sum_p.bind(lax.mul(t, at), axes=axes), count)
                     for t in s]
    return rule


register_rule("jet", reduction.reduce_max_p)(_reduce_chooser(reduction.reduce_max_p))
register_rule("jet", reduction.reduce_min_p)(_reduce_chooser(reduction.reduce_min_p))


@register_rule("jet", jit_p)
def _jit_jet(primals, series, *, jaxpr, name, **_placement):
    # the body is expanded under a jet trace of its own (a jitted call is not kept as a call,
    # so a jit(f, device=..., backend=...) runs where its caller runs)
    from plax.core import jaxpr_as_fun
    from plax_jet.trace import jet_coefficients
    return jet_coefficients(jaxpr_as_fun(jaxpr), primals, series, _order(series))
