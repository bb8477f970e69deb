"""The second batch of plax.scipy.stats (betabinom, nbinom, multinomial, gumbel_l, gumbel_r,
wrapcauchy, poisson.entropy, mode, rankdata, sem, gaussian_kde) against scipy.stats in
float64: values, gradients against finite differences, jit and vmap."""
import numpy as np
import pytest
import scipy.stats as sst

import plax
from plax import random
from plax.scipy import stats as ps
from plax.test_util import check_grads


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


R = np.random.default_rng(2)


def _close(actual, expected, rtol=1e-12, atol=0.0):
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(np.asarray(actual), expected, rtol=rtol, atol=atol,
                                   equal_nan=True)


def test_betabinom():
    k = np.arange(-1, 12)
    for n, a, b in [(10, 2.0, 3.0), (5, 0.5, 0.7), (0, 1.0, 1.0), (10, 30.0, 1.5)]:
        _close(ps.betabinom.logpmf(k, n, a, b), sst.betabinom.logpmf(k, n, a, b), 1e-11)
        _close(ps.betabinom.pmf(k, n, a, b), sst.betabinom.pmf(k, n, a, b), 1e-11)
    _close(ps.betabinom.pmf(k, 10, 2.0, 3.0, loc=2), sst.betabinom.pmf(k, 10, 2.0, 3.0, loc=2),
           1e-11)
    assert np.isnan(float(ps.betabinom.pmf(1, 3, -1.0, 2.0)))
    ns = np.array([4.0, 6.0, 9.0])
    _close(plax.vmap(lambda n: ps.betabinom.pmf(2, n, 2.0, 3.0))(ns),
           sst.betabinom.pmf(2, ns, 2.0, 3.0), 1e-11)
    check_grads(lambda a, b: ps.betabinom.logpmf(3.0, 8.0, a, b), (1.7, 2.2), order=2)


def test_nbinom():
    k = np.arange(-1, 15)
    for n, p in [(3, 0.5), (1.5, 0.2), (10, 0.9)]:
        _close(ps.nbinom.logpmf(k, n, p), sst.nbinom.logpmf(k, n, p), 1e-11)
        _close(ps.nbinom.pmf(k, n, p, loc=1), sst.nbinom.pmf(k, n, p, loc=1), 1e-11)
    check_grads(lambda n, p: ps.nbinom.logpmf(4.0, n, p), (2.5, 0.4), order=2)
    ps_ = np.array([0.2, 0.5, 0.7])
    _close(plax.jit(plax.vmap(lambda p: ps.nbinom.pmf(3, 2, p)))(ps_),
           sst.nbinom.pmf(3, 2, ps_), 1e-12)


def test_multinomial():
    p = np.array([0.2, 0.3, 0.5])
    xs = np.array([[1, 2, 3], [0, 0, 6], [2, 2, 1], [6, 0, 0]])
    _close(ps.multinomial.logpmf(xs, 6, p), sst.multinomial.logpmf(xs, 6, p), 1e-12)
    _close(ps.multinomial.pmf(xs, 6, p), sst.multinomial.pmf(xs, 6, p), 1e-12)
    _close(plax.vmap(lambda x: ps.multinomial.pmf(x, 6, p))(xs), sst.multinomial.pmf(xs, 6, p),
           1e-12)
    check_grads(lambda q: ps.multinomial.logpmf(xs[0], 6, q), (p,), order=2)
    with pytest.raises(ValueError, match="integer"):
        ps.multinomial.logpmf(np.array([1.0, 2.0]), 3, np.array([0.5, 0.5]))


GUMBEL_FNS = ["logpdf", "pdf", "logcdf", "cdf", "logsf", "sf"]


@pytest.mark.parametrize("side", ["gumbel_l", "gumbel_r"])
def test_gumbel(side):
    mod, ref = getattr(ps, side), getattr(sst, side)
    x = np.concatenate([R.uniform(-6, 6, 20), [-40.0, -3.0, 0.0, 3.0, 40.0]])
    for name in GUMBEL_FNS:
        for loc, scale in [(0.0, 1.0), (1.5, 0.7)]:
            _close(getattr(mod, name)(x, loc, scale), getattr(ref, name)(x, loc, scale),
                   1e-11, atol=1e-300)
    q = np.array([0.0, 1e-10, 0.1, 0.5, 0.9, 1 - 1e-10, 1.0, 1.5])
    _close(mod.ppf(q, 0.3, 2.0), ref.ppf(q, 0.3, 2.0), 1e-11)
    assert np.isnan(float(mod.pdf(0.0, 0.0, -1.0)))
    for name in ["logpdf", "logcdf", "logsf"]:
        check_grads(lambda v, s: getattr(mod, name)(v, 0.2, s), (0.7, 1.3), order=2)
    _close(plax.vmap(mod.cdf)(x), ref.cdf(x), 1e-11, atol=1e-300)
    _close(plax.jit(mod.logpdf)(x), ref.logpdf(x), 1e-11)


def test_wrapcauchy():
    x = np.concatenate([R.uniform(0, 2 * np.pi, 10), [0.0, 2 * np.pi, -0.1, 7.0]])
    for c in [0.1, 0.5, 0.95]:
        _close(ps.wrapcauchy.logpdf(x, c), sst.wrapcauchy.logpdf(x, c), 1e-12)
        _close(ps.wrapcauchy.pdf(x, c), sst.wrapcauchy.pdf(x, c), 1e-12)
    assert np.isnan(float(ps.wrapcauchy.pdf(1.0, 1.5)))
    check_grads(ps.wrapcauchy.logpdf, (1.1, 0.4), order=2)
    cs = np.array([0.2, 0.6])
    _close(plax.vmap(lambda c: ps.wrapcauchy.pdf(1.0, c))(cs), sst.wrapcauchy.pdf(1.0, cs))


def test_poisson_entropy():
    mu = np.array([0.0, 1e-3, 0.5, 1.0, 5.0, 20.0, 99.0, 150.0, 249.0, 251.0, 1000.0, 3000.0])
    _close(ps.poisson.entropy(mu), sst.poisson.entropy(mu), 1e-10)
    assert ps.poisson.entropy(mu.reshape(3, 4), loc=1).shape == (3, 4)
    _close(plax.vmap(ps.poisson.entropy)(mu[:5]), sst.poisson.entropy(mu[:5]), 1e-10)
    check_grads(ps.poisson.entropy, (3.5,), order=1)
    with plax.config.override("jax_enable_x64", False):
        assert ps.poisson.entropy(np.float32(2.0)).dtype == np.float32


def test_mode():
    a = R.integers(0, 5, size=(6, 7))
    for axis in [0, 1, -1, None]:
        for keepdims in [False, True]:
            res, ref = ps.mode(a, axis=axis, keepdims=keepdims), sst.mode(a, axis=axis,
                                                                          keepdims=keepdims)
            np.testing.assert_array_equal(res.mode, ref.mode)
            np.testing.assert_array_equal(res.count, ref.count)
    f = R.normal(size=(3, 5)).round(0)
    _close(ps.mode(f, axis=1).mode, sst.mode(f, axis=1).mode, 0)
    res = plax.jit(lambda v: ps.mode(v, axis=0))(a)
    np.testing.assert_array_equal(res.mode, sst.mode(a, axis=0).mode)
    np.testing.assert_array_equal(plax.vmap(lambda v: ps.mode(v).mode)(a), sst.mode(a, axis=1).mode)
    assert isinstance(res, ps.ModeResult)
    with pytest.raises(NotImplementedError, match="nan_policy"):
        ps.mode(a, nan_policy="omit")
    with pytest.raises(ValueError, match="nan_policy"):
        ps.mode(a, nan_policy="bogus")


@pytest.mark.parametrize("method", ["average", "min", "max", "dense", "ordinal"])
def test_rankdata(method):
    a = R.integers(0, 6, size=(5, 8))
    for axis in [None, 0, 1]:
        out = ps.rankdata(a, method, axis=axis)
        assert out.dtype == np.float64
        np.testing.assert_array_equal(out, sst.rankdata(a, method, axis=axis))
    f = R.normal(size=9)
    np.testing.assert_array_equal(ps.rankdata(f, method), sst.rankdata(f, method))
    assert np.all(np.isnan(np.asarray(ps.rankdata(np.array([1.0, np.nan, 0.0]), method))))
    np.testing.assert_array_equal(plax.jit(lambda v: ps.rankdata(v, method))(a[0]),
                                  sst.rankdata(a[0], method))
    np.testing.assert_array_equal(plax.vmap(lambda v: ps.rankdata(v, method))(a),
                                  sst.rankdata(a, method, axis=1))


def test_rankdata_bad_method():
    with pytest.raises(ValueError, match="method"):
        ps.rankdata(np.ones(3), "bogus")


def test_sem():
    a = R.normal(size=(5, 6))
    for axis in [0, 1, None]:
        for ddof in [0, 1, 2]:
            _close(ps.sem(a, axis=axis, ddof=ddof), sst.sem(a, axis=axis, ddof=ddof), 1e-13)
    _close(ps.sem(a, axis=1, keepdims=True), sst.sem(a, axis=1, keepdims=True), 1e-13)
    b = a.copy()
    b[0, 1] = b[3, 4] = np.nan
    _close(ps.sem(b, axis=1, nan_policy="omit"), sst.sem(b, axis=1, nan_policy="omit"), 1e-13)
    assert np.isnan(np.asarray(ps.sem(b, axis=1))[0])
    assert ps.sem(np.arange(5)).dtype == np.float64
    check_grads(lambda v: ps.sem(v), (a[:, 0],), order=2)
    _close(plax.vmap(ps.sem)(a), sst.sem(a, axis=1), 1e-13)


def test_gaussian_kde_1d():
    data = R.normal(size=30)
    w = R.uniform(0.5, 2.0, size=30)
    pts = np.linspace(-3, 3, 7)
    for bw in [None, "scott", "silverman", 0.4, lambda k: 0.5 * k.neff ** (-0.2)]:
        for weights in [None, w]:
            kde, ref = ps.gaussian_kde(data, bw, weights), sst.gaussian_kde(data, bw, weights)
            _close(kde.covariance, ref.covariance, 1e-12)
            _close(kde.neff, ref.neff, 1e-12)
            _close(kde.evaluate(pts), ref.evaluate(pts), 1e-11)
            _close(kde(pts), ref(pts), 1e-11)
            _close(kde.logpdf(pts), ref.logpdf(pts), 1e-11)
    kde, ref = ps.gaussian_kde(data, weights=w), sst.gaussian_kde(data, weights=w)
    _close(kde.integrate_box_1d(-0.5, 1.2), ref.integrate_box_1d(-0.5, 1.2), 1e-12)
    _close(kde.integrate_gaussian(0.3, 1.7), ref.integrate_gaussian(0.3, 1.7), 1e-12)
    other, other_ref = ps.gaussian_kde(data[:10] + 1), sst.gaussian_kde(data[:10] + 1)
    _close(kde.integrate_kde(other), ref.integrate_kde(other_ref), 1e-12)
    assert (kde.d, kde.n) == (1, 30)
    assert float(kde.logpdf(200.0)[0]) == pytest.approx(float(ref.logpdf(200.0)[0]), rel=1e-10)


def test_gaussian_kde_nd_and_transforms():
    data = R.normal(size=(2, 40))
    pts = R.normal(size=(2, 5))
    kde, ref = ps.gaussian_kde(data), sst.gaussian_kde(data)
    _close(kde.pdf(pts), ref.pdf(pts), 1e-11)
    _close(kde.logpdf(pts), ref.logpdf(pts), 1e-11)
    _close(kde.pdf(pts[:, 0]), ref.pdf(pts[:, 0]), 1e-11)  # one point given as (d,)
    _close(kde.integrate_gaussian(np.zeros(2), np.eye(2)),
           ref.integrate_gaussian(np.zeros(2), np.eye(2)), 1e-12)
    # a pytree: through jit, and differentiable in the data
    _close(plax.jit(lambda k, x: k.pdf(x))(kde, pts), ref.pdf(pts), 1e-11)
    leaves, tree = plax.tree_util.tree_flatten(kde)
    assert len(leaves) == 5
    check_grads(lambda d: ps.gaussian_kde(d).logpdf(pts), (data[:, :8],), order=1)
    _close(plax.vmap(lambda p: kde.pdf(p[:, None])[0], in_axes=1)(pts), ref.pdf(pts), 1e-11)
    sample = kde.resample(random.PRNGKey(0), (500,))
    assert sample.shape == (2, 500)
    np.testing.assert_allclose(np.asarray(sample).mean(axis=1), data.mean(axis=1), atol=0.25)
    with pytest.raises(NotImplementedError):
        kde.set_bandwidth("scott")
    with pytest.raises(NotImplementedError, match="integrate_box_1d"):
        kde.integrate_box(np.zeros(2), np.ones(2))
    with pytest.raises(ValueError, match="1D"):
        kde.integrate_box_1d(0.0, 1.0)
    with pytest.raises(ValueError, match="dimension"):
        kde.pdf(np.zeros((3, 2)))
    with pytest.raises(ValueError, match="bw_method"):
        ps.gaussian_kde(data, bw_method="bogus")
    with pytest.raises(ValueError, match="multiple"):
        ps.gaussian_kde(np.array([1.0]))
