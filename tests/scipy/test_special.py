"""plax.scipy.special against scipy.special in float64: values (edge values included), dtypes,
gradients against finite differences, jit and vmap."""
import numpy as np
import pytest
import scipy.special as sps

import plax
import plax.numpy as jnp
from plax.scipy import special as ps
from plax.test_util import check_grads


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


R = np.random.default_rng(0)
EDGE = np.array([0.0, -0.0, -1.0, -2.5, 0.5, 3.0, np.inf, -np.inf, np.nan])


def _gammasgn(x):
    return np.where((x < 0) & (x == np.floor(x)) | np.isnan(x) | np.isneginf(x), np.nan,
                    sps.gammasgn(x))


def _gamma(x):
    return np.where((x < 0) & (x == np.floor(x)) | np.isneginf(x), np.nan,
                    np.where(x == 0, np.copysign(np.inf, x), sps.gamma(x)))


def _digamma(x):
    return np.where((x <= 0) & (x == np.floor(x)), np.nan, sps.psi(x))


def _gammaln(x):
    return np.where(np.isneginf(x), np.inf, sps.gammaln(x))


def _entr(x):
    return sps.entr(x)


# name, plax fn, reference, sampling domain, edge values, rtol
UNARY = [
    ("erf", ps.erf, sps.erf, (-3, 3), EDGE, 1e-13),
    ("erfc", ps.erfc, sps.erfc, (-3, 6), EDGE, 1e-13),
    ("erfinv", ps.erfinv, sps.erfinv, (-0.99, 0.99), np.array([-1, 1, 0, 2, np.nan]), 1e-12),
    ("gammaln", ps.gammaln, _gammaln, (0.1, 30), EDGE, 1e-12),
    ("gamma", ps.gamma, _gamma, (-4.5, 8), EDGE, 1e-12),
    ("gammasgn", ps.gammasgn, _gammasgn, (-4.5, 8), EDGE, 0),
    ("digamma", ps.digamma, _digamma, (0.1, 20), EDGE, 1e-12),
    ("expit", ps.expit, sps.expit, (-20, 20), EDGE, 1e-13),
    ("logit", ps.logit, sps.logit, (0.01, 0.99), np.array([0, 1, 0.5, 2, -1, np.nan]), 1e-12),
    ("entr", ps.entr, _entr, (0, 5), EDGE, 1e-13),
    ("ndtr", ps.ndtr, sps.ndtr, (-10, 10), EDGE, 1e-13),
    ("ndtri", ps.ndtri, sps.ndtri, (0.001, 0.999),
     np.array([0, 1, -1, 2, 1e-300, 1e-20, 0.999999, np.nan]), 1e-12),
    ("log_ndtr", ps.log_ndtr, sps.log_ndtr, (-40, 10),
     np.array([-50, -20.5, -19.5, 0, 6, 9, np.inf, -np.inf, np.nan]), 1e-10),
    ("i0", ps.i0, sps.i0, (-10, 10), EDGE, 1e-12),
    ("i0e", ps.i0e, sps.i0e, (-10, 10), EDGE, 1e-12),
    ("i1", ps.i1, sps.i1, (-10, 10), EDGE, 1e-12),
    ("i1e", ps.i1e, sps.i1e, (-10, 10), EDGE, 1e-12),
    ("factorial", ps.factorial, lambda n: sps.factorial(n, exact=False), (0, 15),
     np.array([-1.0, 0, 3, 3.5]), 1e-12),
]


def _close(actual, expected, rtol):
    np.testing.assert_allclose(np.asarray(actual), expected, rtol=rtol, atol=rtol * 1e-3 or 0,
                               equal_nan=True)


@pytest.mark.parametrize("name,fn,ref,dom,edge,rtol", UNARY, ids=[u[0] for u in UNARY])
def test_unary_values(name, fn, ref, dom, edge, rtol):
    for shape in [(), (7,), (2, 3)]:
        x = R.uniform(*dom, size=shape)
        out = fn(x)
        assert out.dtype == np.float64 and out.shape == shape
        with np.errstate(all="ignore"):
            _close(out, ref(x), rtol)
    with np.errstate(all="ignore"):
        _close(fn(edge), ref(edge), rtol)
    # jit and vmap agree with eager
    x = R.uniform(*dom, size=(4,))
    _close(plax.jit(fn)(x), np.asarray(fn(x)), 1e-14)
    _close(plax.vmap(fn)(x), np.asarray(fn(x)), 1e-14)


@pytest.mark.parametrize("name,fn", [(u[0], u[1]) for u in UNARY if u[0] != "gammasgn"])
def test_unary_int_promotes(name, fn):
    assert fn(np.int32(1)).dtype == np.float32
    assert fn(1).dtype == np.float64  # a weak Python int follows the default float (x64)
    with plax.config.override("jax_enable_x64", False):
        assert fn(np.float32(0.5)).dtype == np.float32


GRAD_UNARY = [("erf", ps.erf, 0.3), ("erfc", ps.erfc, 0.3), ("erfinv", ps.erfinv, 0.4),
              ("gammaln", ps.gammaln, 2.5), ("gamma", ps.gamma, 2.5), ("digamma", ps.digamma, 2.5),
              ("expit", ps.expit, 0.3), ("logit", ps.logit, 0.3), ("entr", ps.entr, 0.7),
              ("ndtr", ps.ndtr, -1.3), ("ndtri", ps.ndtri, 0.2), ("log_ndtr", ps.log_ndtr, -3.0),
              ("log_ndtr tail", ps.log_ndtr, -25.0), ("i0", ps.i0, 1.3), ("i0e", ps.i0e, -1.3),
              ("i1", ps.i1, 1.3), ("i1e", ps.i1e, -1.3)]


@pytest.mark.parametrize("name,fn,x", GRAD_UNARY, ids=[g[0] for g in GRAD_UNARY])
def test_unary_grads(name, fn, x):
    check_grads(fn, (np.float64(x),), order=2, modes=("fwd", "rev"))


def test_bessel_grad_at_zero():
    assert float(plax.grad(ps.i1e)(0.0)) == 0.5
    assert float(plax.grad(ps.i0e)(0.0)) == 0.0


def test_log_ndtr_grad_far_tail():
    np.testing.assert_allclose(float(plax.grad(ps.log_ndtr)(-50.0)), 50.019984032, rtol=1e-9)


# binary and ternary (xlogy and xlog1py are 0 wherever x == 0, NaN y included, as in JAX)
def _zeta(x, q):
    return np.where(np.isinf(x) | np.isinf(q), np.nan, sps.zeta(x, q))


def _gammainc(a, x):
    return np.where(np.isinf(a), np.nan, sps.gammainc(a, x))


def _gammaincc(a, x):
    return np.where(np.isinf(a), np.nan, sps.gammaincc(a, x))


NARY = [
    ("gammainc", ps.gammainc, _gammainc, [(0.2, 10), (0, 15)], 1e-12),
    ("gammaincc", ps.gammaincc, _gammaincc, [(0.2, 10), (0, 15)], 1e-11),
    ("betainc", ps.betainc, sps.betainc, [(0.2, 8), (0.2, 8), (0, 1)], 1e-11),
    ("betaln", ps.betaln, sps.betaln, [(0.1, 30), (0.1, 30)], 1e-11),
    ("beta", ps.beta, sps.beta, [(-3.7, 10), (0.1, 10)], 1e-11),
    ("xlogy", ps.xlogy, lambda x, y: np.where(x == 0, 0.0, sps.xlogy(x, y)), [(-2, 2), (0, 5)], 1e-13),
    ("xlog1py", ps.xlog1py, lambda x, y: np.where(x == 0, 0.0, sps.xlog1py(x, y)), [(-2, 2), (-1, 5)], 1e-13),
    ("zeta", ps.zeta, _zeta, [(1.1, 8), (0.1, 5)], 1e-11),
    ("rel_entr", ps.rel_entr, sps.rel_entr, [(-0.5, 3), (-0.5, 3)], 1e-13),
    ("kl_div", ps.kl_div, sps.kl_div, [(-0.5, 3), (-0.5, 3)], 1e-13),
    ("polygamma", lambda n, x: ps.polygamma(n.astype(np.int64), x),
     lambda n, x: sps.polygamma(n.astype(int), x), [(0, 4), (0.2, 6)], 1e-10),
]
NARY_EDGE = np.array([0.0, 1.0, 2.0, -1.0, np.inf, np.nan, 0.5])


@pytest.mark.parametrize("name,fn,ref,doms,rtol", NARY, ids=[n[0] for n in NARY])
def test_nary_values(name, fn, ref, doms, rtol):
    n = len(doms)
    for shapes in [[()] * n, [(5,)] * n, [(2, 3)] + [()] * (n - 1), [(3,)] + [(2, 1)] * (n - 1)]:
        args = [R.uniform(lo, hi, size=s) for (lo, hi), s in zip(doms, shapes)]
        if name == "polygamma":
            args[0] = np.floor(args[0])
        out = fn(*args)
        assert out.dtype == np.float64 and out.shape == np.broadcast_shapes(*shapes)
        with np.errstate(all="ignore"):
            _close(out, ref(*args), rtol)
    if name not in ("polygamma", "betaln", "beta"):  # every pairing of edge values
        grids = np.meshgrid(*[NARY_EDGE] * n, indexing="ij")
        args = [g.ravel() for g in grids]
        with np.errstate(all="ignore"):
            _close(fn(*args), ref(*args), rtol)
    args = [R.uniform(lo, hi, size=(4,)) for lo, hi in doms]
    if name == "polygamma":
        args[0] = np.floor(args[0])
    eager = np.asarray(fn(*args))
    _close(plax.jit(fn)(*args), eager, 1e-14)
    _close(plax.vmap(fn)(*args), eager, 1e-14)


def test_nary_dtypes():
    assert ps.gammainc(np.int32(2), np.float32(1)).dtype == np.float32
    assert ps.betainc(1, 2, 0.5).dtype == np.float64
    assert ps.xlogy(np.int32(2), np.int32(3)).dtype == np.float32
    with pytest.raises(ValueError, match="integer"):
        ps.polygamma(1.0, 2.0)
    with pytest.raises(NotImplementedError, match="Riemann"):
        ps.zeta(2.0)


GRAD_NARY = [
    ("gammainc", ps.gammainc, (2.5, 1.7), 1),
    ("gammaincc", ps.gammaincc, (2.5, 1.7), 1),
    ("betaln", ps.betaln, (2.5, 1.7), 2),
    ("beta", ps.beta, (2.5, 1.7), 2),
    ("xlogy", ps.xlogy, (1.5, 2.5), 2),
    ("xlog1py", ps.xlog1py, (1.5, 0.5), 2),
    ("rel_entr", ps.rel_entr, (1.5, 0.5), 2),
    ("kl_div", ps.kl_div, (1.5, 0.5), 2),
]


@pytest.mark.parametrize("name,fn,args,order", GRAD_NARY, ids=[g[0] for g in GRAD_NARY])
def test_nary_grads(name, fn, args, order):
    check_grads(fn, tuple(np.float64(a) for a in args), order=order, modes=("fwd", "rev"))


def test_betainc_grad_x_only():
    check_grads(lambda x: ps.betainc(2.0, 3.0, x), (np.float64(0.3),), order=2)
    with pytest.raises(ValueError, match="a and b"):
        plax.grad(ps.betainc)(2.0, 3.0, 0.3)


def test_polygamma_grad():
    check_grads(lambda x: ps.polygamma(1, x), (np.float64(1.7),), order=1)


def test_xlogy_grad_at_zero_matches_jax():
    gx, gy = plax.grad(ps.xlogy, argnums=(0, 1))(0.0, 1.0)
    assert float(gx) == 0.0 and float(gy) == 0.0


def test_multigammaln():
    a = R.uniform(3, 10, size=(2, 3))
    for d in (1, 2, 4):
        _close(ps.multigammaln(a, d), sps.multigammaln(a, d), 1e-12)
    check_grads(lambda a: ps.multigammaln(a, 3), (np.float64(4.2),), order=2)
    _close(plax.vmap(lambda a: ps.multigammaln(a, 2))(a[0]), sps.multigammaln(a[0], 2), 1e-12)


def test_logsumexp():
    a = R.normal(size=(3, 4))
    b = R.uniform(-1, 2, size=(3, 4))
    for axis in (None, 0, 1, (0, 1), -1):
        for keepdims in (False, True):
            _close(ps.logsumexp(a, axis=axis, keepdims=keepdims),
                   sps.logsumexp(a, axis=axis, keepdims=keepdims), 1e-13)
            got, sign = ps.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=True)
            want, wsign = sps.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=True)
            _close(got, want, 1e-12)
            _close(sign, wsign, 0)
    assert np.isnan(float(ps.logsumexp(np.array([1.0, 2.0]), b=np.array([1.0, -1.0]))))
    assert float(ps.logsumexp(np.array([-np.inf, -np.inf]))) == -np.inf
    assert float(ps.logsumexp(np.array([1.0, np.inf]))) == np.inf
    mask = np.array([True, False, True, True])
    _close(ps.logsumexp(a, axis=1, where=mask), sps.logsumexp(a[:, mask], axis=1), 1e-13)
    check_grads(lambda a: ps.logsumexp(a, axis=1), (a,), order=2)
    _close(plax.vmap(lambda r: ps.logsumexp(r))(a), sps.logsumexp(a, axis=1), 1e-13)
    _close(plax.jit(ps.logsumexp, static_argnames="axis")(a, axis=0),
           sps.logsumexp(a, axis=0), 1e-13)
    assert ps.logsumexp(np.arange(3, dtype=np.int32)).dtype == np.float32


@pytest.mark.parametrize("fn,ref", [(ps.softmax, sps.softmax), (ps.log_softmax, sps.log_softmax)])
def test_softmax(fn, ref):
    x = R.normal(size=(3, 4))
    for axis in (None, 0, -1, (0, 1)):
        _close(fn(x, axis=axis), ref(x, axis=axis), 1e-13)
    check_grads(lambda x: fn(x, axis=1), (x,), order=2)
    _close(plax.vmap(lambda r: fn(r))(x), ref(x, axis=1), 1e-13)
    _close(plax.jit(fn)(x), ref(x), 1e-13)
    assert fn(jnp.arange(3)).dtype == np.float64
