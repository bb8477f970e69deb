"""Specs of the elementwise primitives: unary and binary arithmetic, transcendental and special
functions, comparisons, bitwise ops and shifts, complex parts, select_n, clamp and conversions.

Integer references follow XLA explicitly (exact Python integers, then two's complement wrap):
truncating division, division by zero gives -1 and ``rem`` by zero the dividend, shifts by the
bit width or more (or by a negative amount) give 0 or the sign, float-to-int conversion
saturates with NaN -> 0.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special as sps

from plax import lax

from .harness import (ALL, BOOL_OR_INT, COMPLEX, FLOAT, INEXACT, INT, NUM, ORDERED, Case,
                      GradCase, Spec, as_dtype, dt, f64, pyints, rand, rand_bits, rand_distinct,
                      wrap, zero_ordered_max, zero_ordered_min)

SPECS: list[Spec] = []

UNARY_SHAPES = [(), (0,), (5,), (2, 3)]
# (shape of x, shape of y): equal shapes, a rank-0 operand on either side, empty
# size-1 axes broadcast against the other operand's (JAX's rule: equal ranks, each size
# equal or 1), on one side as vmap stages them and on both
BINARY_SHAPES = [((), ()), ((5,), (5,)), ((2, 3), (2, 3)), ((), (2, 3)), ((2, 3), ()),
                 ((0,), (0,)), ((0, 2), ()), ((1, 3), (2, 3)), ((2, 1), (1, 3))]

SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5])


def add(spec: Spec) -> Spec:
    SPECS.append(spec)
    return spec


def _rand_domain(rng, shape, d, domain, cdomain):
    if d.kind == "c":
        (rlo, rhi), (ilo, ihi) = cdomain
        return (rng.uniform(rlo, rhi, shape) + 1j * rng.uniform(ilo, ihi, shape)).astype(d)
    return rand(rng, shape, d, *domain)


# ------------------------------------------------------------------ unary float/complex

def unary_inexact(prim, ref, dtypes=INEXACT, domain=(-3.0, 3.0), cdomain=((-1.5, 1.5), (-1.5, 1.5)),
                  grad_domain=None, specials=True, out=None, tol_scale=1.0):
    """A float (and complex) unary op: random values in ``domain`` plus IEEE special values."""

    def cases(d):
        out_d = d if out is None else out(d)
        cs = [Case({}, lambda rng, s=s: [_rand_domain(rng, s, d, domain, cdomain)],
                   lambda x: as_dtype(ref(f64(x)), out_d), f"{d.name}{list(s)}", tol_scale)
              for s in UNARY_SHAPES]
        if specials and d.kind != "c":
            with np.errstate(all="ignore"):
                cs.append(Case({}, lambda rng: [SPECIALS.astype(d)],
                               lambda x: as_dtype(_quiet(ref, f64(x)), out_d), "specials",
                               tol_scale, vmap=False))
        return cs

    def grads():
        lo, hi = grad_domain or domain
        x = rand(np.random.default_rng(0), (3,), np.float32, lo, hi)
        return [GradCase(lambda x: prim.bind(x), (x,))]

    return add(Spec(prim, dtypes, cases, grads=grads))


def _quiet(fn, *args):
    with np.errstate(all="ignore"):
        return fn(*args)


def _logistic(x):
    return 1.0 / (1.0 + np.exp(-x))


unary_inexact(lax.exp_p, np.exp)
unary_inexact(lax.exp2_p, np.exp2)
unary_inexact(lax.log_p, np.log, domain=(0.1, 5.0), cdomain=((0.2, 3), (-2, 2)))
unary_inexact(lax.log1p_p, np.log1p, domain=(-0.8, 3.0), cdomain=((0.0, 2), (-1, 1)))
unary_inexact(lax.expm1_p, np.expm1)
unary_inexact(lax.tanh_p, np.tanh)
unary_inexact(lax.logistic_p, _logistic)
unary_inexact(lax.sin_p, np.sin)
unary_inexact(lax.cos_p, np.cos)
unary_inexact(lax.tan_p, np.tan, domain=(-1.2, 1.2), cdomain=((-1, 1), (-1, 1)), tol_scale=2)
unary_inexact(lax.asin_p, np.arcsin, domain=(-0.9, 0.9), cdomain=((-0.7, 0.7), (-0.7, 0.7)))
unary_inexact(lax.acos_p, np.arccos, domain=(-0.9, 0.9), cdomain=((-0.7, 0.7), (-0.7, 0.7)))
unary_inexact(lax.atan_p, np.arctan, cdomain=((-2, 2), (-0.7, 0.7)))
unary_inexact(lax.sinh_p, np.sinh)
unary_inexact(lax.cosh_p, np.cosh)
unary_inexact(lax.asinh_p, np.arcsinh, cdomain=((-2, 2), (-0.7, 0.7)))
unary_inexact(lax.acosh_p, np.arccosh, domain=(1.1, 4.0), cdomain=((1.2, 3), (-1, 1)))
unary_inexact(lax.atanh_p, np.arctanh, domain=(-0.9, 0.9), cdomain=((-0.7, 0.7), (-0.7, 0.7)))
unary_inexact(lax.sqrt_p, np.sqrt, domain=(0.1, 5.0), cdomain=((0.2, 3), (-2, 2)))
unary_inexact(lax.rsqrt_p, lambda x: 1.0 / np.sqrt(x), domain=(0.1, 5.0),
              cdomain=((0.2, 3), (-2, 2)), grad_domain=(0.5, 3.0))
unary_inexact(lax.cbrt_p, np.cbrt, dtypes=FLOAT, grad_domain=(0.5, 3.0))

# special functions (references: scipy.special in float64)
unary_inexact(lax.erf_p, sps.erf, dtypes=FLOAT)
unary_inexact(lax.erfc_p, sps.erfc, dtypes=FLOAT)
unary_inexact(lax.erf_inv_p, sps.erfinv, dtypes=FLOAT, domain=(-0.9, 0.9),
              grad_domain=(-0.6, 0.6), tol_scale=2)


def _lgamma_ref(x):
    """log|gamma(x)| from Python's math.lgamma; +inf at the poles and at -inf (C's lgamma)."""
    def one(v):
        if v == -math.inf:
            return math.inf
        try:
            return math.lgamma(v)
        except ValueError:  # a pole: 0, -1, -2, ...
            return math.inf
    return np.vectorize(one, otypes=[np.float64])(x) if np.size(x) else np.zeros(np.shape(x))


def _at_poles_nan(fn):
    """``fn`` with NaN at the non-positive integers (XLA's digamma/polygamma convention)."""
    def ref(*args):
        x = args[-1]
        return np.where((x <= 0) & (x == np.floor(x)), np.nan, fn(*args))
    return ref


unary_inexact(lax.lgamma_p, _lgamma_ref, dtypes=FLOAT, domain=(-4.5, 6.0), tol_scale=2,
              grad_domain=(0.5, 3.0))
unary_inexact(lax.digamma_p, _at_poles_nan(sps.psi), dtypes=FLOAT, domain=(-4.5, 6.0),
              tol_scale=2, grad_domain=(0.8, 3.0))


def _real_of(d):
    return np.dtype(np.float32) if d == np.complex64 else np.dtype(np.float64)

for _prim, _ref in ((lax.real_p, np.real), (lax.imag_p, np.imag)):
    unary_inexact(_prim, _ref, dtypes=COMPLEX, out=_real_of, specials=False)
    SPECS[-1].grads = (lambda p: lambda: [GradCase(
        lambda z: p.bind(z), (rand(np.random.default_rng(0), (3,), np.complex64),))])(_prim)


def _conj_out(d):
    return np.dtype(np.complex128) if d in (np.float64, np.complex128) else np.dtype(np.complex64)


unary_inexact(lax.conj_p, np.conj, out=_conj_out, specials=False)
SPECS[-1].grads = lambda: [
    GradCase(lambda z: lax.conj_p.bind(z), (rand(np.random.default_rng(0), (3,), np.complex64),),
             label="complex"),
    GradCase(lambda x: lax.real_p.bind(lax.conj_p.bind(x)),
             (rand(np.random.default_rng(0), (3,), np.float32),), label="real operand")]


def _polygamma_cases(d):
    def sample(rng, s):
        m = rng.integers(0, 3, size=s[0]).astype(d)
        return [m, rand(rng, s[1], d, 0.5, 4.0)]
    shapes = [((), ()), ((4,), (4,)), ((), (2, 3)), ((0,), (0,))]
    ref = _at_poles_nan(lambda m, x: sps.polygamma(m.astype(int), x))
    cs = [Case({}, lambda rng, s=s: sample(rng, s), lambda m, x: as_dtype(ref(f64(m), f64(x)), d),
               f"{list(s[0])},{list(s[1])}", tol_scale=3) for s in shapes]
    m = np.array([1, 2, 0, 1, 0.5, -1, 3], d)
    x = np.array([0, -2, -1.5, np.nan, 2, 2, -0.5], d)
    cs.append(Case({}, lambda rng: [m, x], lambda m, x: as_dtype(_polygamma_ref(f64(m), f64(x)), d),
                   "poles and invalid orders", tol_scale=3, vmap=False))
    return cs


def _polygamma_ref(m, x):
    """polygamma for any order: NaN unless ``m`` is a non-negative integer, NaN at the poles."""
    valid = (m >= 0) & (m == np.floor(m))
    out = _at_poles_nan(lambda m, x: sps.polygamma(m.astype(int), x))(np.where(valid, m, 0), x)
    return np.where(valid, out, np.nan)


add(Spec(lax.polygamma_p, FLOAT, _polygamma_cases, grads=lambda: [GradCase(
    lambda x: lax.polygamma_p.bind(np.array([1.0, 0.0, 2.0], np.float32), x),
    (rand(np.random.default_rng(0), (3,), np.float32, 1.0, 3.0),), eps=1e-3, atol=5e-2)]))


# ------------------------------------------------------------------ unary on every number type

def _int_or_float_unary(prim, int_ref, float_ref, dtypes, nondiff=False, grad_domain=None,
                        extra_params=({},), out=None):
    """A unary op defined on integers (exact reference, wrap-around) and floats (float64)."""

    def cases(d):
        out_d = d if out is None else out(d)
        cs = []
        for params in extra_params:
            for s in UNARY_SHAPES:
                if d.kind in "iub":
                    sample = lambda rng, s=s: [rand_bits(rng, s, d)]
                    ref = lambda x, p=params: wrap(int_ref(pyints(x), d, **p), out_d) \
                        if out_d != np.bool_ else np.asarray(int_ref(x, d, **p), bool)
                else:
                    sample = lambda rng, s=s: [rand(rng, s, d)]
                    ref = lambda x, p=params: as_dtype(float_ref(f64(x), **p), out_d)
                cs.append(Case(params, sample, ref, f"{d.name}{list(s)} {params}"))
            if dt(d).kind == "f" or d.name == "bfloat16":
                cs.append(Case(params, lambda rng: [SPECIALS.astype(d)],
                               lambda x, p=params: as_dtype(_quiet(float_ref, f64(x), **p), out_d),
                               f"specials {params}", vmap=False))
        return cs

    grads = None
    if not nondiff:
        def grads():
            lo, hi = grad_domain or (-3, 3)
            return [GradCase((lambda p: lambda x: prim.bind(x, **p))(p),
                             (rand(np.random.default_rng(0), (3,), np.float32, lo, hi),), label=str(p))
                    for p in extra_params]
    return add(Spec(prim, dtypes, cases, grads=grads, nondiff=nondiff))


def _quiet_call(fn):
    def g(*a, **k):
        with np.errstate(all="ignore"):
            return fn(*a, **k)
    return g


_int_or_float_unary(lax.neg_p, lambda x, d: -x, _quiet_call(np.negative), NUM)


def _sign_int(x, d):
    return np.vectorize(lambda v: (v > 0) - (v < 0), otypes=[object])(x) if x.size else x


def _sign_float(x):
    if np.iscomplexobj(x):
        mag = np.abs(x)
        return np.where(mag == 0, 0, x / np.where(mag == 0, 1, mag))
    return np.sign(x)


_int_or_float_unary(lax.sign_p, _sign_int, _sign_float, NUM, nondiff=True)
SIGNED_INT = tuple(d for d in INT if d.startswith("int"))
_int_or_float_unary(lax.abs_p, lambda x, d: np.vectorize(abs, otypes=[object])(x) if x.size else x,
                    np.abs, SIGNED_INT + FLOAT + COMPLEX, grad_domain=(0.5, 3),
                    out=lambda d: _real_of(d) if d.kind == "c" else d)
SPECS[-1].grads = lambda: [
    GradCase(lambda x: lax.abs_p.bind(x), (np.array([-2.0, -0.7, 1.3], np.float32),)),
    GradCase(lambda z: lax.abs_p.bind(z), (np.array([1 + 1j, -0.5 + 2j, 3 - 1j], np.complex64),),
             label="complex")]


def _not_ref(x, d):
    if d == np.bool_:
        return ~np.asarray(x, bool)
    return np.vectorize(lambda v: ~v, otypes=[object])(x) if x.size else x


_int_or_float_unary(lax.not_p, _not_ref, None, BOOL_OR_INT, nondiff=True)


def _popcount(x, d):
    bits = 8 * d.itemsize
    return np.vectorize(lambda v: bin(v % (1 << bits)).count("1"), otypes=[object])(x) if x.size else x


_int_or_float_unary(lax.population_count_p, _popcount, None, INT, nondiff=True)


def _round_ref(x, rounding_method):
    if rounding_method == 1:
        return np.rint(x)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def _round_cases(d):
    ties = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -0.51, 3.0])
    cs = []
    for method in (0, 1):
        p = {"rounding_method": method}
        for s in UNARY_SHAPES:
            cs.append(Case(p, lambda rng, s=s: [rand(rng, s, d)],
                           lambda x, m=method: as_dtype(_round_ref(f64(x), m), d), f"{list(s)} {p}"))
        cs.append(Case(p, lambda rng: [ties.astype(d)],
                       lambda x, m=method: as_dtype(_round_ref(f64(x), m), d), f"ties {p}"))
        cs.append(Case(p, lambda rng: [SPECIALS.astype(d)],
                       lambda x, m=method: as_dtype(_round_ref(f64(x), m), d), f"specials {p}",
                       vmap=False))
    return cs


add(Spec(lax.round_p, FLOAT, _round_cases, nondiff=True))


def _float_unary_nondiff(prim, ref, out=None):
    def cases(d):
        out_d = d if out is None else out
        cs = [Case({}, lambda rng, s=s: [rand(rng, s, d)], lambda x: as_dtype(ref(f64(x)), out_d),
                   f"{list(s)}") for s in UNARY_SHAPES]
        cs.append(Case({}, lambda rng: [SPECIALS.astype(d)], lambda x: as_dtype(ref(f64(x)), out_d),
                       "specials", vmap=False))
        return cs
    return add(Spec(prim, FLOAT, cases, nondiff=True))


_float_unary_nondiff(lax.floor_p, np.floor)
_float_unary_nondiff(lax.ceil_p, np.ceil)
_float_unary_nondiff(lax.is_finite_p, np.isfinite, out=np.dtype(bool))


def _integer_pow_cases(d):
    cs = []
    exps = (0, 1, 2, 3, 5) + ((-1, -2) if d.kind in "fcV" else ())
    for y in exps:
        for s in ((), (5,), (0, 2)):
            if d.kind in "iu":
                sample = lambda rng, s=s: [rand_bits(rng, s, d)]
                ref = lambda x, y=y: wrap(pyints(x) ** y, d)
            else:
                lo = 0.5 if y < 0 else -2.0
                sample = lambda rng, s=s, lo=lo: [_rand_domain(rng, s, d, (lo, 2.0), ((0.5, 1.5), (-1, 1)))]
                ref = lambda x, y=y: as_dtype(f64(x) ** y, d)
            cs.append(Case({"y": y}, sample, ref, f"{list(s)} y={y}", tol_scale=4))
    return cs


add(Spec(lax.integer_pow_p, NUM, _integer_pow_cases, grads=lambda: [
    GradCase((lambda y: lambda x: lax.integer_pow_p.bind(x, y=y))(y),
             (rand(np.random.default_rng(0), (3,), np.float32, 0.5, 2.0),), label=f"y={y}")
    for y in (0, 1, 2, 3, -2)]))


# ------------------------------------------------------------------ binary arithmetic

def _binary_cases(d, int_ref, float_ref, *, int_sample=None, float_sample=None, out=None,
                  specials=False, tol_scale=1.0):
    out_d = d if out is None else out
    cs = []
    for sx, sy in BINARY_SHAPES:
        if d.kind in "iub":
            sample = int_sample or (lambda rng, sx, sy: [rand_bits(rng, sx, d), rand_bits(rng, sy, d)])
            ref = (lambda x, y: wrap(int_ref(pyints(x), pyints(y)), out_d)) if out_d != np.bool_ \
                else (lambda x, y: np.asarray(int_ref(x, y), bool))
        else:
            sample = float_sample or (lambda rng, sx, sy: [rand(rng, sx, d), rand(rng, sy, d)])
            ref = lambda x, y: as_dtype(_quiet(float_ref, f64(x), f64(y)), out_d)
        cs.append(Case({}, lambda rng, sx=sx, sy=sy, sample=sample: sample(rng, sx, sy), ref,
                       f"{list(sx)},{list(sy)}", tol_scale))
    if specials and (d.kind == "f" or d.name == "bfloat16"):
        xs = np.repeat(SPECIALS, len(SPECIALS))
        ys = np.tile(SPECIALS, len(SPECIALS))
        cs.append(Case({}, lambda rng: [xs.astype(d), ys.astype(d)],
                       lambda x, y: as_dtype(_quiet(float_ref, f64(x), f64(y)), out_d), "specials",
                       tol_scale, vmap=False))
    return cs


def _objmap(fn):
    """An elementwise function of Python ints over object arrays (empty-safe)."""
    def g(x, y):
        x, y = np.broadcast_arrays(np.asarray(x, object), np.asarray(y, object))
        if x.size == 0:
            return np.zeros(x.shape, object)
        return np.vectorize(fn, otypes=[object])(x, y)
    return g


def _binary(prim, int_ref, float_ref, dtypes, *, grads=None, nondiff=False, out=None,
            specials=True, vmap_dtype=None, **kw):
    spec = Spec(prim, dtypes, lambda d: _binary_cases(d, int_ref, float_ref, out=out,
                                                      specials=specials, **kw),
                grads=grads, nondiff=nondiff, vmap_dtype=vmap_dtype)
    return add(spec)


def _g2(prim, x, y, label="", **kw):
    return GradCase(lambda a, b: prim.bind(a, b), (x, y), label=label, **kw)


_R = np.random.default_rng(0)
_X = rand(_R, (2, 3), np.float32, 0.5, 2.0)
_Y = rand(_R, (2, 3), np.float32, 0.5, 2.0)
del _R


def _rng():
    """A fresh generator, so grad cases do not depend on the order they are built in."""
    return np.random.default_rng(1)
_S = np.float32(1.3)


def _size_one_grads(prim):
    """Gradients through size-1 broadcasting: the cotangent of an operand of shape (1, 3)
    (or (2, 1)) is the output's summed over the broadcast axis."""
    return [_g2(prim, _X[:1], _Y, "size-1 lhs"), _g2(prim, _X, _Y[:, :1], "size-1 rhs"),
            _g2(prim, _X[:, :1], _Y[:1], "size-1 both")]

for _p, _ref in ((lax.add_p, lambda x, y: x + y), (lax.add_any_p, lambda x, y: x + y),
                 (lax.sub_p, lambda x, y: x - y), (lax.mul_p, lambda x, y: x * y)):
    _binary(_p, _objmap(_ref), _ref, NUM,
            grads=(lambda p: lambda: [_g2(p, _X, _Y), _g2(p, _S, _Y, "scalar lhs"),
                                      _g2(p, _X, _S, "scalar rhs"), *_size_one_grads(p)])(_p))


def _int_div(a, b):
    if b == 0:
        return -1
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _int_rem(a, b):
    if b == 0:
        return a
    return a - _int_div(a, b) * b


def _divisors(rng, sx, sy, d):
    """Integer operands that exercise truncation, division by zero and INT_MIN / -1."""
    x, y = rand_bits(rng, sx, d), rand_bits(rng, sy, d)
    small = rand(rng, sy, d, -4, 4)
    y = np.where(rng.random(sy) < 0.5, small, y).astype(d)
    return [x, y]


def _float_divisor(d):
    def sample(rng, sx, sy):
        y = rand(rng, sy, d, 0.5, 3.0) * np.where(rng.random(sy) < 0.5, -1, 1).astype(d)
        return [rand(rng, sx, d), np.asarray(y).astype(d)]
    return sample


def _div_like(prim, int_fn, float_fn, dtypes, grads):
    def cases(d):
        cs = _binary_cases(d, _objmap(int_fn), float_fn, specials=True,
                           int_sample=lambda rng, sx, sy: _divisors(rng, sx, sy, d),
                           float_sample=_float_divisor(d))
        if d.kind == "i":
            info = np.iinfo(d)
            x = np.array([info.min, info.min, 7, -7, 7, -7, 5, 0, info.max], d)
            y = np.array([-1, 1, 2, 2, -2, -2, 0, 0, -1], d)
            cs.append(Case({}, lambda rng: [x, y],
                           lambda a, b: wrap(_objmap(int_fn)(pyints(a), pyints(b)), d), "edges"))
        if d.kind == "u":
            x = np.array([7, 7, 0, np.iinfo(d).max], d)
            y = np.array([2, 0, 0, 3], d)
            cs.append(Case({}, lambda rng: [x, y],
                           lambda a, b: wrap(_objmap(int_fn)(pyints(a), pyints(b)), d), "edges"))
        return cs
    return add(Spec(prim, dtypes, cases, grads=grads))


_div_like(lax.div_p, _int_div, lambda x, y: x / y, NUM,
          lambda: [_g2(lax.div_p, _X, _Y), _g2(lax.div_p, _S, _Y, "scalar lhs"),
                   _g2(lax.div_p, _X, _S, "scalar rhs"), *_size_one_grads(lax.div_p)])
_div_like(lax.rem_p, _int_rem, np.fmod, INT + FLOAT,
          lambda: [_g2(lax.rem_p, rand(_rng(), (4,), np.float32, 2.3, 2.7),
                       rand(_rng(), (4,), np.float32, 1.0, 1.1)),
                   _g2(lax.rem_p, rand(_rng(), (4,), np.float32, -2.7, -2.3), np.float32(1.05),
                       "scalar rhs")])


def _pow_cases(d):
    def sample(rng, sx, sy):
        return [_rand_domain(rng, sx, d, (0.3, 2.5), ((0.3, 2), (-1, 1))),
                _rand_domain(rng, sy, d, (-2, 2), ((-1, 1), (-1, 1)))]
    return _binary_cases(d, None, np.power, float_sample=sample, tol_scale=4)


add(Spec(lax.pow_p, INEXACT, _pow_cases, grads=lambda: [
    _g2(lax.pow_p, _X, rand(_rng(), (2, 3), np.float32, -2, 2)),
    _g2(lax.pow_p, _S, _Y, "scalar base"), _g2(lax.pow_p, _X, np.float32(2.5), "scalar exponent"),
    *_size_one_grads(lax.pow_p)]))


def _lexi(fn_real, pick_x):
    """max/min: NaN-propagating for floats, lexicographic (real, imag) for complex."""
    def ref(x, y):
        if np.iscomplexobj(x):
            x, y = np.broadcast_arrays(x, y)
            take_x = pick_x(x, y)
            return np.where(take_x, x, y)
        return fn_real(x, y)
    return ref


def _cmp_gt(x, y):
    return (x.real > y.real) | ((x.real == y.real) & (x.imag >= y.imag))


def _cmp_lt(x, y):
    return (x.real < y.real) | ((x.real == y.real) & (x.imag <= y.imag))


def _maxmin(prim, fn, pick, py):
    def cases(d):
        cs = _binary_cases(d, _objmap(py), _lexi(fn, pick), specials=True)
        for c in cs:
            # every pair of specials, +0 and -0 among them: bit for bit, in XLA's order
            c.exact_bits = c.label == "specials"
        if d.kind == "c":  # ties of the real part decided by the imaginary part
            x = np.array([1 + 2j, 1 + 3j, -1 - 1j, 2 + 0j], d)
            y = np.array([1 + 3j, 0 + 9j, -1 + 1j, 2 + 0j], d)
            cs.append(Case({}, lambda rng: [x, y], lambda a, b: _lexi(fn, pick)(a, b), "lexicographic"))
        return cs
    def grads():
        both = rand_distinct(_rng(), (2, 6), np.float32)  # no ties between x and y
        return [_g2(prim, both[:, :3], both[:, 3:]),
                _g2(prim, np.float32(0.13), rand_distinct(_rng(), (2, 3), np.float32), "scalar")]
    return add(Spec(prim, ORDERED + COMPLEX, cases, grads=grads))


_maxmin(lax.max_p, zero_ordered_max, _cmp_gt, max)
_maxmin(lax.min_p, zero_ordered_min, _cmp_lt, min)

_binary(lax.atan2_p, None, np.arctan2, FLOAT,
        grads=lambda: [_g2(lax.atan2_p, _X, _Y), _g2(lax.atan2_p, _S, _Y, "scalar"),
                       *_size_one_grads(lax.atan2_p)])


def _nextafter_ref(d):
    """nextafter in ``d`` itself, from the bit patterns (independent of any float arithmetic)."""
    bits = np.dtype(f"u{d.itemsize}")

    def ref(x, y):
        x, y = np.broadcast_arrays(np.asarray(x, d), np.asarray(y, d))
        out = np.empty(x.shape, d)
        xf, yf = x.astype(np.float64), y.astype(np.float64)
        for i in np.ndindex(x.shape):
            a, b = xf[i], yf[i]
            if math.isnan(a) or math.isnan(b):
                out[i] = np.nan
            elif a == b:
                out[i] = y[i]
            elif a == 0:
                tiny = np.array(1, bits).view(d)
                out[i] = tiny if b > 0 else -tiny
            else:
                u = int(np.array(x[i], d).view(bits))
                away = (b > a) == (a > 0)  # moving away from zero grows the magnitude bits
                u = u + 1 if away else u - 1
                out[i] = np.array(u, bits).view(d)
        return out
    return ref


def _nextafter_cases(d):
    cs = _binary_cases(d, None, None)
    for c in cs:
        c.ref = _nextafter_ref(d)
        c.exact_bits = True
    xs = np.array([0, 0, 1, 1, -1, np.inf, -np.inf, np.nan, 2, 65504 if d == np.float16 else 1e10])
    ys = np.array([1, -1, 2, 0, -2, 0, 0, 1, np.nan, np.inf])
    cs.append(Case({}, lambda rng: [xs.astype(d), ys.astype(d)], _nextafter_ref(d), "edges",
                   vmap=False, exact_bits=True))
    return cs


add(Spec(lax.nextafter_p, FLOAT, _nextafter_cases, nondiff=True))


def _complex_cases(d):
    return _binary_cases(d, None, lambda x, y: x + 1j * y, out=_conj_out(d), specials=False)


add(Spec(lax.complex_p, FLOAT, _complex_cases, grads=lambda: [
    GradCase(lambda x, y: lax.complex_p.bind(x, y), (_X, _Y)),
    GradCase(lambda x, y: lax.complex_p.bind(x, y), (_S, _Y), label="scalar")]))


# ------------------------------------------------------------------ comparisons and bitwise

_BOOL = np.dtype(bool)


def _compare(prim, op, dtypes):
    def cases(d):
        def float_ref(x, y):
            return op(x, y)
        def small(rng, sx, sy):  # integer values, so that equal operands occur
            wide = np.complex128 if d.kind == "c" else np.float64
            return [np.round(rand(rng, s, wide, -2, 2)).astype(d) for s in (sx, sy)]
        cs = _binary_cases(d, None, float_ref, out=_BOOL, specials=True,
                           float_sample=small if d.kind in "fcV" else None)
        if d.kind in "iub":
            for c in cs:
                c.sample = (lambda s: lambda rng: [rand(rng, a.shape, d, -2, 2)
                                                    for a in s(rng)])(c.sample)
                c.ref = lambda x, y: op(pyints(x), pyints(y)).astype(bool)
        return cs
    return add(Spec(prim, dtypes, cases, nondiff=True))


_compare(lax.eq_p, lambda x, y: x == y, ALL)
_compare(lax.ne_p, lambda x, y: x != y, ALL)
_compare(lax.lt_p, lambda x, y: x < y, ORDERED)
_compare(lax.le_p, lambda x, y: x <= y, ORDERED)
_compare(lax.gt_p, lambda x, y: x > y, ORDERED)
_compare(lax.ge_p, lambda x, y: x >= y, ORDERED)


def _bitwise(prim, py):
    def cases(d):
        if d == np.bool_:
            return _binary_cases(d, lambda x, y: py(np.asarray(x, bool), np.asarray(y, bool)), None)
        return _binary_cases(d, _objmap(py), None)
    return add(Spec(prim, BOOL_OR_INT, cases, nondiff=True, vmap_dtype="int32"))


_bitwise(lax.and_p, lambda a, b: a & b)
_bitwise(lax.or_p, lambda a, b: a | b)
_bitwise(lax.xor_p, lambda a, b: a ^ b)


def _shift(prim, fn):
    def cases(d):
        bits = 8 * d.itemsize

        def sample(rng, sx, sy):
            amounts = rand(rng, sy, np.int64, -2, bits + 2).astype(d) if d.kind == "i" else \
                rand(rng, sy, np.int64, 0, bits + 2).astype(d)
            return [rand_bits(rng, sx, d), amounts]

        def ref(x, y):
            return wrap(_objmap(lambda a, s: fn(a, s, bits))(pyints(x), pyints(y)), d)
        cs = _binary_cases(d, None, None, int_sample=sample)
        for c in cs:
            c.ref = ref
        return cs
    return add(Spec(prim, INT, cases, nondiff=True, vmap_dtype="int32"))


def _shl(a, s, bits):
    return a << s if 0 <= s < bits else 0


def _shr_logical(a, s, bits):
    return (a % (1 << bits)) >> s if 0 <= s < bits else 0


def _shr_arith(a, s, bits):
    signed = a % (1 << bits)
    if signed >= 1 << (bits - 1):
        signed -= 1 << bits  # the bit pattern read as signed: the sign bit is replicated
    if not 0 <= s < bits:
        s = bits - 1
    return signed >> s


_shift(lax.shift_left_p, _shl)
_shift(lax.shift_right_logical_p, _shr_logical)
_shift(lax.shift_right_arithmetic_p, _shr_arith)


# ------------------------------------------------------------------ select_n and clamp

def _select_cases(d):
    cs = []
    for n, wdt in ((1, bool), (2, bool), (3, np.int32)):
        for shape, wshape in (((5,), (5,)), ((2, 3), ()), ((), ()), ((0, 2), (0, 2)), ((2, 3), (2, 3))):
            def sample(rng, n=n, wdt=wdt, shape=shape, wshape=wshape):
                which = rng.integers(0, n, size=wshape).astype(wdt) if wdt is not bool or n > 1 \
                    else np.zeros(wshape, bool)
                cases = [rand_bits(rng, shape, d) if d.kind in "iub" else rand(rng, shape, d)
                         for _ in range(n)]
                return [which] + cases

            def ref(which, *cases):
                w = np.broadcast_to(np.asarray(which).astype(np.int64), cases[0].shape)
                return np.choose(w, [f64(c) for c in cases]) if cases[0].size else f64(cases[0])
            cs.append(Case({}, sample, ref, f"{n} cases {wdt.__name__}{list(wshape)} {list(shape)}"))
    return cs


def _select_grads():
    which = np.array([[0, 2, 1], [1, 0, 2]], np.int32)
    return [GradCase(lambda a, b: lax.select_n_p.bind(np.array([True, False, True]), a, b),
                     (_X[0], _Y[0]), label="bool"),
            GradCase(lambda a, b, c: lax.select_n_p.bind(which, a, b, c), (_X, _Y, _X + 1),
                     label="int32")]


add(Spec(lax.select_n_p, ALL, _select_cases, grads=_select_grads))


def _clamp_cases(d):
    cs = []
    for sx, sb in (((5,), ()), ((2, 3), (2, 3)), ((), ()), ((0,), ()), ((2, 3), None)):
        def sample(rng, sx=sx, sb=sb):
            if d == np.bool_:
                lo, hi = np.zeros(sb or (), bool), np.ones(sb or sx, bool)
            else:
                lo = rand(rng, sb or (), d, -2, 0)
                hi = rand(rng, sb or sx, d, 0, 2)
            return [lo, rand(rng, sx, d, -3, 3), hi]
        cs.append(Case({}, sample, _clamp_ref, f"{list(sx)} bounds {sb}"))
    if d.kind == "f" or d.name == "bfloat16":
        # min(max(x, lo), hi) in XLA's order of zeros, bit for bit (the shape of the array
        # bounds case: the same compiled program)
        lo = np.array([[-0.0, 0.0, -0.0], [-1.0, -1.0, -1.0]], d)
        x = np.array([[0.0, -0.0, -0.0], [-0.0, 0.0, 0.0]], d)
        hi = np.array([[1.0, 1.0, 1.0], [0.0, -0.0, 0.0]], d)
        cs.append(Case({}, lambda rng: [lo, x, hi], _clamp_ref, "signed zeros", vmap=False,
                       exact_bits=True))
    return cs


def _clamp_ref(lo, x, hi):
    if np.asarray(x).dtype.kind in "biu":  # exact in the operands' own type
        return np.minimum(np.maximum(x, lo), hi)
    return zero_ordered_min(zero_ordered_max(f64(x), f64(lo)), f64(hi))


def _clamp_grads():
    x = np.array([-1.5, -0.25, 0.3, 0.9, 1.7], np.float32)
    lo, hi = np.float32(-0.5), np.float32(1.0)
    return [GradCase(lambda lo, x, hi: lax.clamp_p.bind(lo, x, hi), (lo, x, hi), label="scalar bounds"),
            GradCase(lambda lo, x, hi: lax.clamp_p.bind(lo, x, hi),
                     (np.full(5, -0.5, np.float32), x, np.full(5, 1.0, np.float32)),
                     label="array bounds")]


add(Spec(lax.clamp_p, ORDERED, _clamp_cases, grads=_clamp_grads))


# ------------------------------------------------------------------ conversions

def _convert_ref(x, new):
    """XLA's convert: float -> int truncates and saturates (NaN -> 0); -> bool is ``!= 0``;
    complex -> real keeps the real part; int -> int wraps."""
    x = np.asarray(x)
    new = dt(new)
    if new == np.bool_:
        return x != 0
    if x.dtype.kind == "c" and new.kind != "c":
        x = x.real
    if new.kind in "iu" and (x.dtype.kind == "f" or x.dtype == dt("bfloat16")):
        info = np.iinfo(new)
        def one(v):
            if math.isnan(v):
                return 0
            if math.isinf(v):
                return int(info.max) if v > 0 else int(info.min)
            return min(max(math.trunc(v), int(info.min)), int(info.max))
        return wrap(np.vectorize(one, otypes=[object])(x.astype(np.float64)) if x.size else
                    np.zeros(x.shape, object), new)
    if new.kind in "iu":
        return wrap(pyints(x), new)
    with np.errstate(all="ignore"):
        return x.astype(new)  # NumPy's conversions round correctly (overflow to inf)


def _convert_operand(rng, d, shape):
    if d.kind in "iub":
        return rand_bits(rng, shape, d)
    vals = np.concatenate([SPECIALS, [1.7, -1.7, 3e4, -3e4, 200.5, -129.5, 65504, 1e10, -1e10]])
    vals = np.asarray(vals)
    if d == np.float16:
        vals = np.clip(vals, -65504, 65504)
    base = rand(rng, shape, np.float64, -300, 300)
    flat = base.reshape(-1)
    flat[:min(flat.size, vals.size)] = vals[:flat.size]
    if d.kind == "c":
        return (base + 1j * rand(rng, shape, np.float64)).astype(d)
    with np.errstate(all="ignore"):
        return base.astype(d)


def _convert_cases(d):
    cs = []
    for new in ALL:
        nd = dt(new)
        p = {"new_dtype": nd, "weak_type": False}
        for shape in ((), (0,), (24,)):
            cs.append(Case(p, lambda rng, s=shape: [_convert_operand(rng, d, s)],
                           lambda x, nd=nd: _convert_ref(x, nd), f"{d.name}->{new} {list(shape)}"))
    return cs


def _convert_grads():
    x = rand(_rng(), (3,), np.float32)
    cvt = lambda new: lambda v: lax.convert_element_type_p.bind(v, new_dtype=dt(new), weak_type=False)
    return [GradCase(lambda v: cvt("float32")(cvt("float64")(v)), (x,), x64=True, label="f32->f64->f32"),
            GradCase(cvt("float32"), (x.astype(np.float64),), x64=True, label="f64->f32",
                     eps=1e-3, atol=2e-2),
            GradCase(cvt("complex64"), (x,), label="f32->c64"),
            GradCase(cvt("float32"), (x.astype(np.complex64),), label="c64->f32")]


add(Spec(lax.convert_element_type_p, ALL, _convert_cases, grads=_convert_grads, x64=True))


def _bitcast_cases(d):
    cs = []
    for new in NUM:
        nd = dt(new)
        if d.kind == "c" or nd.kind == "c":
            if nd != d:
                continue
        ratio = d.itemsize / nd.itemsize
        for shape in ((), (3,), (0,), (2, 3)):
            if ratio < 1:
                k = int(1 / ratio)
                if shape == ():
                    continue
                shape = shape + (k,)
            def sample(rng, s=shape):
                raw = rng.integers(0, 256, size=tuple(s) + (d.itemsize,), dtype=np.uint8)
                return [np.ascontiguousarray(raw).view(d).reshape(s)]

            def ref(x, nd=nd):
                x = np.asarray(x)
                flat = np.frombuffer(x.tobytes(), dtype=nd)
                if d.itemsize > nd.itemsize:
                    return flat.reshape(x.shape + (d.itemsize // nd.itemsize,))
                if d.itemsize < nd.itemsize:
                    return flat.reshape(x.shape[:-1])
                return flat.reshape(x.shape)
            cs.append(Case({"new_dtype": nd}, sample, ref, f"{d.name}->{new} {list(shape)}",
                           exact_bits="strict"))  # NaN payloads must survive a bitcast
    return cs


add(Spec(lax.bitcast_convert_type_p, NUM, _bitcast_cases, nondiff=True, x64=True))


def _identity_cases(d):
    return [Case({}, lambda rng, s=s: [rand_bits(rng, s, d) if d.kind in "iub" else rand(rng, s, d)],
                 lambda x: x, f"{list(s)}", exact_bits=True) for s in UNARY_SHAPES]


add(Spec(lax.stop_gradient_p, ALL, _identity_cases, nondiff=True))


# ------------------------------------------------------------------ square, clz, mulhi

def _square_int(x, d):
    return np.vectorize(lambda v: v * v, otypes=[object])(x) if x.size else x


_int_or_float_unary(lax.square_p, _square_int, _quiet_call(np.square), NUM)


def _clz_ref(x, d):
    bits = 8 * d.itemsize
    return (np.vectorize(lambda v: bits - (v % (1 << bits)).bit_length(), otypes=[object])(x)
            if x.size else x)


_int_or_float_unary(lax.clz_p, _clz_ref, None, INT, nondiff=True)


def _mulhi_cases(d):
    bits = 8 * d.itemsize
    cs = _binary_cases(d, _objmap(lambda a, b: (a * b) >> bits), None)
    # the extremes: products of the most negative and largest values
    info = np.iinfo(d)
    edge = np.array([info.min, info.max, 0, 1, -1 if info.min < 0 else 2], dtype=d)
    xs, ys = np.repeat(edge, edge.size), np.tile(edge, edge.size)
    cs.append(Case({}, lambda rng: [xs, ys],
                   lambda x, y: wrap(_objmap(lambda a, b: (a * b) >> bits)(pyints(x), pyints(y)),
                                     d), "extremes", vmap=False))
    return cs


add(Spec(lax.mulhi_p, INT, _mulhi_cases, nondiff=True, vmap_dtype="int32"))
