"""Specs of the special-function primitives of ``plax.lax.special_functions``: igamma, igammac,
igamma_grad_a, regularized_incomplete_beta, zeta, bessel_i0e and bessel_i1e.

References are ``scipy.special`` in float64, with XLA's values where SciPy's conventions
differ (NaN for an infinite shape parameter or zeta argument); ``igamma_grad_a``'s reference
differentiates SciPy's ``gammainc`` numerically.
"""
from __future__ import annotations

import numpy as np
import scipy.special as sps

from plax import lax

from .harness import FLOAT, Case, GradCase, Spec, as_dtype, f64, rand

SPECS: list[Spec] = []

SHAPES2 = [((), ()), ((5,), (5,)), ((), (2, 3)), ((2, 3), ()), ((0,), (0,))]
SHAPES3 = [((), (), ()), ((4,), (4,), (4,)), ((), (), (2, 3)), ((2, 3), (), ()), ((0,), (0,), (0,))]


def _quiet(fn):
    def ref(*args):
        with np.errstate(all="ignore"):
            return fn(*(f64(a) for a in args))
    return ref


def _igamma_ref(a, x):
    return np.where(np.isinf(a), np.nan, sps.gammainc(a, x))


def _igammac_ref(a, x):
    return np.where(np.isinf(a), np.nan, sps.gammaincc(a, x))


def _igamma_grad_a_ref(a, x):
    h = 1e-6 * np.maximum(np.abs(a), 1.0)
    return (sps.gammainc(a + h, x) - sps.gammainc(a - h, x)) / (2 * h)


def _zeta_ref(x, q):
    return np.where(np.isinf(x) | np.isinf(q), np.nan, sps.zeta(x, q))


def _cases(ref, domains, shapes, specials=None, tol=1.0, grad_operands=None):
    """Random operands in ``domains`` (one ``(lo, hi)`` per operand) over ``shapes``, plus an
    optional case of fixed edge values (not batched)."""
    def cases(d):
        scale = tol(d) if callable(tol) else tol
        cs = [Case({}, lambda rng, ss=ss: [rand(rng, s, d, lo, hi) for s, (lo, hi) in zip(ss, domains)],
                   lambda *xs: as_dtype(_quiet(ref)(*xs), d), ",".join(str(list(s)) for s in ss),
                   scale, grad_operands=grad_operands) for ss in shapes]
        if specials is not None:
            cs.append(Case({}, lambda rng: [np.asarray(v, d) for v in specials],
                           lambda *xs: as_dtype(_quiet(ref)(*xs), d), "edge values", scale,
                           vmap=False, grad_operands=grad_operands))
        return cs
    return cases


_EDGE_A = [0.0, 1.0, 2.0, -1.0, np.inf, np.nan, 1.0, 2.0, 0.5, 1.0, 3.0]
_EDGE_X = [1.0, 0.0, np.inf, 1.0, 1.0, 1.0, -1.0, 3.0, np.nan, 1e-3, 30.0]
_GAMMA_DOMAINS = ((0.5, 5.0), (0.1, 6.0))
_rng = np.random.default_rng(2)
_A = rand(_rng, (3,), np.float32, 0.8, 4.0)
_X = rand(_rng, (3,), np.float32, 0.5, 4.0)


def _igamma_grads(prim):
    return lambda: [
        GradCase(lambda x: prim.bind(_A, x), (_X,), label="in x"),
        GradCase(lambda a: prim.bind(a, _X), (_A,), label="in a (first order)", order=1,
                 eps=1e-3, atol=2e-2)]


for _prim, _ref in ((lax.igamma_p, _igamma_ref), (lax.igammac_p, _igammac_ref)):
    SPECS.append(Spec(_prim, FLOAT, _cases(_ref, _GAMMA_DOMAINS, SHAPES2, (_EDGE_A, _EDGE_X),
                                           tol=4.0), grads=_igamma_grads(_prim)))


def _grad_a_tol(d):
    # the kernel sums the series to float32 precision; the reference is good to about 1e-8
    return {"float16": 8, "bfloat16": 8, "float64": 2e4}.get(np.dtype(d).name, 50)


SPECS.append(Spec(lax.igamma_grad_a_p, FLOAT, _cases(
    _igamma_grad_a_ref, ((0.6, 5.0), (0.2, 6.0)), SHAPES2, tol=_grad_a_tol), no_jvp=True))

_BETA_EDGE = ([1.0, 2.0, 0.5, 1.0, 2.0, 2.0, 2.0, 2.0, np.nan],
              [1.0, 3.0, 1.0, np.inf, 2.0, 2.0, 3.0, 3.0, 1.0],
              [0.5, 0.3, 0.5, 0.5, 0.0, 1.0, -0.5, 1.5, 0.5])


def _betainc_tol(d):
    return {"float32": 20, "float64": 50}.get(np.dtype(d).name, 4)


SPECS.append(Spec(lax.regularized_incomplete_beta_p, FLOAT, _cases(
    sps.betainc, ((0.5, 5.0), (0.5, 5.0), (0.05, 0.95)), SHAPES3, _BETA_EDGE, tol=_betainc_tol,
    grad_operands=(2,)),
    grads=lambda: [GradCase(
        lambda x: lax.regularized_incomplete_beta_p.bind(_A, np.float32(2.5), x),
        (rand(np.random.default_rng(3), (3,), np.float32, 0.2, 0.8),), label="in x")]))

_ZETA_EDGE = ([2.0, 1.0, 0.5, 3.0, np.inf, 2.0, 2.0, 2.0, np.nan, 4.0],
              [1.0, 1.0, 1.0, -1.5, 1.0, 0.0, -2.0, np.inf, 1.0, np.nan])
SPECS.append(Spec(lax.zeta_p, FLOAT, _cases(_zeta_ref, ((1.5, 6.0), (0.5, 4.0)), SHAPES2,
                                            _ZETA_EDGE, tol=4.0), no_jvp=True))

_UNARY_SHAPES = [((),), ((0,),), ((5,),), ((2, 3),)]
_BESSEL_EDGE = ([0.0, -0.0, 1.0, -2.0, np.inf, -np.inf, np.nan, 30.0, -50.0, 1e-8],)
for _prim, _ref in ((lax.bessel_i0e_p, sps.i0e), (lax.bessel_i1e_p, sps.i1e)):
    SPECS.append(Spec(_prim, FLOAT, _cases(_ref, ((-8.0, 8.0),), _UNARY_SHAPES, _BESSEL_EDGE,
                                           tol=2.0),
                      grads=(lambda p: lambda: [
                          GradCase(lambda x: p.bind(x), (np.array([-2.5, 0.7, 3.1], np.float32),)),
                          GradCase(lambda x: p.bind(x), (np.float32(0.0),), label="at 0",
                                   order=1)])(_prim)))
