"""The second batch of plax.scipy.special (erfcx, dawsn, exp1, expi, expn, spence, comb, poch,
boxcox, boxcox1p, loggamma, bernoulli, hyp1f1, bessel_jn) against scipy.special in float64: values
with edge cases, dtypes, gradients against finite differences, jit and vmap."""
import numpy as np
import pytest
import scipy.special as sps

import plax
from plax.scipy import special as ps
from plax.test_util import check_grads


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


R = np.random.default_rng(1)


def _close(actual, expected, rtol, atol=0.0):
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(np.asarray(actual), expected, rtol=rtol, atol=atol,
                                   equal_nan=True)


def _exp1_ref(x):
    return np.where(x < 0, np.nan, sps.exp1(x))


UNARY = [
    # name, fn, reference, sampling domain, edge values, rtol
    ("erfcx", ps.erfcx, sps.erfcx, (-5, 30),
     np.array([-30.0, -1.0, 0.0, 1.9, 2.0, 2.1, 50.0, 1e10, 1e300, np.inf, -np.inf, np.nan]),
     1e-13),
    ("dawsn", ps.dawsn, sps.dawsn, (-15, 15),
     np.array([0.0, -0.0, 1e-300, 0.1999, 0.2, 0.9241, 1e5, 1e15, -3.0, np.inf, -np.inf,
               np.nan]), 1e-13),
    ("exp1", ps.exp1, _exp1_ref, (0.01, 50),
     np.array([0.0, 1e-10, 1.0, 2.0, 2.0001, 700.0, 800.0, np.inf, -1.0, np.nan]), 1e-13),
    ("expi", ps.expi, sps.expi, (-50, 39),
     np.array([-800.0, -3.0, 0.0, 1e-8, 1.0, 41.0, 100.0, 700.0, np.inf, -np.inf, np.nan]),
     1e-12),
    ("spence", ps.spence, sps.spence, (0, 10),
     np.array([0.0, 1e-300, 1e-10, 0.5, 1.0, 1.5, 2.0, 2.0000001, 1e10, 1e300, np.inf, -1.0,
               np.nan]), 1e-13),
    ("loggamma", ps.loggamma, lambda x: np.where(x > 0, sps.loggamma(x), np.nan), (0.01, 30),
     np.array([-1.5, -1.0, 0.0, 0.5, 1.0, np.inf, np.nan]), 1e-13),
]


@pytest.mark.parametrize("name,fn,ref,dom,edge,rtol", UNARY, ids=[u[0] for u in UNARY])
def test_unary_values(name, fn, ref, dom, edge, rtol):
    for shape in [(), (9,), (3, 4)]:
        x = R.uniform(*dom, size=shape)
        out = fn(x)
        assert out.dtype == np.float64 and out.shape == shape
        _close(out, ref(x), rtol, atol=1e-300)
    _close(fn(edge), ref(edge), rtol)
    x = R.uniform(*dom, size=(5,))
    _close(plax.jit(fn)(x), np.asarray(fn(x)), 1e-15)
    _close(plax.vmap(fn)(x), np.asarray(fn(x)), 1e-15)
    with plax.config.override("jax_enable_x64", False):
        assert fn(np.float32(0.5)).dtype == np.float32
        assert fn(np.int32(1)).dtype == np.float32


def test_expi_near_its_root():
    x = np.linspace(0.3, 0.45, 31)
    _close(ps.expi(x), sps.expi(x), 0, atol=1e-15)


def test_float32_accuracy():
    with plax.config.override("jax_enable_x64", False):
        x = np.linspace(0.05, 20, 200, dtype=np.float32)
        for fn, ref in [(ps.erfcx, sps.erfcx), (ps.dawsn, sps.dawsn), (ps.exp1, sps.exp1)]:
            _close(fn(x), ref(x.astype(np.float64)), 5e-6)
        _close(ps.expi(x), sps.expi(x.astype(np.float64)), 5e-6, atol=1e-6)


def test_expn_values():
    x = np.concatenate([R.uniform(0, 2, 20), R.uniform(2, 60, 20),
                        [0.0, 1e-12, 2.0, np.inf, -1.0, np.nan]])
    for n in [0, 1, 2, 3, 7, 20, 40]:
        _close(ps.expn(n, x), sps.expn(n, x), 1e-12)
    n = R.integers(0, 12, size=(3, 1))
    xs = R.uniform(0.1, 10, size=(4,))
    out = ps.expn(n, xs)
    assert out.shape == (3, 4) and out.dtype == np.float64
    _close(out, sps.expn(n, xs), 1e-12)
    assert np.isnan(float(ps.expn(-1, 1.0))) and np.isnan(float(ps.expn(1.5, 1.0)))
    _close(plax.vmap(ps.expn)(np.arange(4.0), xs), sps.expn(np.arange(4), xs), 1e-12)


GRADS = [("erfcx", ps.erfcx, (1.3,)), ("erfcx big", ps.erfcx, (5.0,)),
         ("erfcx neg", ps.erfcx, (-0.7,)), ("dawsn", ps.dawsn, (0.8,)),
         ("dawsn small", ps.dawsn, (0.05,)), ("exp1", ps.exp1, (0.7,)),
         ("exp1 cf", ps.exp1, (3.5,)), ("expi", ps.expi, (1.7,)), ("expi neg", ps.expi, (-2.2,)),
         ("loggamma", ps.loggamma, (2.5,)), ("boxcox", ps.boxcox, (2.5, 0.3)),
         ("spence", ps.spence, (0.3,)), ("spence mid", ps.spence, (1.2,)),
         ("spence far", ps.spence, (3.0,)),
         ("boxcox1p", ps.boxcox1p, (0.5, -0.4)), ("poch", ps.poch, (2.5, 1.5)),
         ("comb", lambda n, k: ps.comb(n, k), (7.3, 2.4)),
         ("hyp1f1", ps.hyp1f1, (1.3, 2.1, 0.7)), ("hyp1f1 neg x", ps.hyp1f1, (0.7, 1.9, -2.5))]


@pytest.mark.parametrize("name,fn,args", GRADS, ids=[g[0] for g in GRADS])
def test_grads(name, fn, args):
    order = 1 if name.startswith("hyp1f1") else 2
    check_grads(fn, tuple(np.float64(a) for a in args), order=order, modes=("fwd", "rev"))


def test_spence_grad_at_one():
    check_grads(ps.spence, (np.float64(1.0),), order=1)
    assert float(plax.grad(ps.spence)(1.0)) == -1.0


def test_expn_grad():
    check_grads(lambda x: ps.expn(3, x), (np.float64(0.8),), order=2)
    check_grads(lambda x: ps.expn(0, x), (np.float64(2.5),), order=1)
    assert float(plax.grad(ps.expn)(2.0, 1.5)) == 0.0


def test_comb():
    N = np.array([5, 10, 50, 100, 3.5, -1, 5, 0, 20])
    k = np.array([2, 3, 25, 50, 1.5, 1, 7, 0, -1])
    _close(ps.comb(N, k), sps.comb(N, k), 1e-13)
    rep = sps.comb(N, k, repetition=True)
    _close(ps.comb(N, k, repetition=True), np.where(N < 0, 0.0, rep), 1e-13)  # 0 as JAX
    assert float(ps.comb(40, 20)) == float(sps.comb(40, 20, exact=True))  # integers exact
    assert ps.comb(5, 2).dtype == np.float64
    _close(plax.vmap(lambda n: ps.comb(n, 2.0))(np.arange(6.0)), sps.comb(np.arange(6), 2), 0)


def test_poch():
    z = np.array([3, 0.5, -0.5, -2, -2, 2.5, -3, 170, 1.5, 4.2])
    m = np.array([2, 1.5, 2, 1, 3, -1.5, 2.5, 30, 0, -2.7])
    _close(ps.poch(z, m), sps.poch(z, m), 1e-12)
    zs, ms = R.uniform(0.1, 20, (3, 4)), R.uniform(-0.05, 8, (4,))
    _close(ps.poch(zs, ms), sps.poch(zs, ms), 1e-12)
    _close(plax.jit(ps.poch)(zs, ms), sps.poch(zs, ms), 1e-12)


def test_boxcox():
    x = np.array([0.0, 0.5, 1.0, 2.0, 10.0, -1.0, np.inf])
    for lam in [0.0, 0.5, -1.5, 2.0, 1e-12]:
        _close(ps.boxcox(x, lam), sps.boxcox(x, lam), 1e-13)
    x1 = np.array([-1.0, -0.5, 0.0, 1e-10, 2.0, -2.0])
    for lam in [0.0, 0.5, -1.5, 2.0]:
        _close(ps.boxcox1p(x1, lam), sps.boxcox1p(x1, lam), 1e-13)
    lam = R.uniform(-2, 2, (5,))
    _close(plax.vmap(ps.boxcox)(np.full(5, 3.0), lam), sps.boxcox(3.0, lam), 1e-13)


def test_bernoulli():
    for n in [0, 1, 2, 5, 20]:
        b = ps.bernoulli(n)
        assert b.shape == (n + 1,) and b.dtype == np.float64
        _close(b, sps.bernoulli(n), 1e-10)  # SciPy's are approximations; ours are exact
    assert float(ps.bernoulli(30)[30]) == 8615841276005 / 14322  # exact rational
    with pytest.raises(ValueError, match="non-negative"):
        ps.bernoulli(-1)
    with plax.config.override("jax_enable_x64", False):
        assert ps.bernoulli(3).dtype == np.float32


def test_hyp1f1_values():
    a = np.array([1, 0.5, 2, 3, 0.3, 5, 1, 0, 2, 10, 1.5, 4.0])
    b = np.array([2, 1.5, 3, 1, 2.5, 2, 1, 3, 2, 20, 0.0, 4.0])
    x = np.array([1, -3, 10, -20, 50, 150, 2, 1, -150, 30, 1.0, -2.0])
    _close(ps.hyp1f1(a, b, x), sps.hyp1f1(a, b, x), 1e-12)
    aa, bb, xx = R.uniform(0.1, 5, (6,)), R.uniform(0.1, 5, (6,)), R.uniform(-20, 20, (6,))
    _close(ps.hyp1f1(aa, bb, xx), sps.hyp1f1(aa, bb, xx), 1e-11)
    _close(plax.vmap(ps.hyp1f1)(aa, bb, xx), sps.hyp1f1(aa, bb, xx), 1e-11)
    _close(plax.jit(ps.hyp1f1)(aa, bb, xx), sps.hyp1f1(aa, bb, xx), 1e-11)
    assert ps.hyp1f1(1, 2, 1).dtype == np.float64


def test_bessel_jn():
    z = np.array([0.0, 1e-8, 0.5, 1.0, 5.0, 10.0, 20.0, -3.0])
    out = ps.bessel_jn(z, v=5)
    assert out.shape == (6, 8) and out.dtype == np.float64
    _close(out, np.stack([sps.jv(n, z) for n in range(6)]), 0, atol=1e-13)
    zz = R.uniform(-10, 10, (2, 3))
    assert ps.bessel_jn(zz, v=2).shape == (3, 2, 3)
    _close(plax.vmap(lambda s: ps.bessel_jn(s, v=3))(z), np.stack([sps.jv(n, z)
                                                                  for n in range(4)]).T,
           0, atol=1e-13)
    _close(plax.jit(lambda s: ps.bessel_jn(s, v=1))(z), np.stack([sps.jv(n, z)
                                                                 for n in range(2)]),
           0, atol=1e-13)
    check_grads(lambda s: ps.bessel_jn(s, v=2), (np.array([0.7, 3.1]),), order=1)
    with plax.config.override("jax_enable_x64", False):
        z32 = np.array([1e-4, 0.5, 1.0, 5.0, 15.0], np.float32)
        _close(ps.bessel_jn(z32, v=3), np.stack([sps.jv(n, z32.astype(float)) for n in range(4)]),
               0, atol=2e-6)


def test_bad_input():
    with pytest.raises(ValueError, match="non-negative"):
        ps.bessel_jn(1.0, v=-1)
    with pytest.raises(NotImplementedError, match="real"):
        ps.loggamma(1j)
    with pytest.raises(ValueError, match="complex"):
        ps.poch(1j, 2.0)
