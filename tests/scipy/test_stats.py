"""plax.scipy.stats against scipy.stats in float64: every function of every distribution over
several shapes and points outside the support, gradients of the log densities, jit and vmap."""
import numpy as np
import pytest
import scipy.stats as ss

import plax
from plax.scipy import stats as ps
from plax.test_util import check_grads


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


R = np.random.default_rng(1)

# distribution, shape parameters (after x), domain of x for sampling
CONT = [
    ("norm", (0.3, 1.7), (-4, 4)),
    ("uniform", (-0.5, 2.0), (-1, 2)),
    ("expon", (0.2, 1.5), (-1, 6)),
    ("laplace", (0.3, 1.2), (-4, 4)),
    ("logistic", (0.3, 1.2), (-6, 6)),
    ("cauchy", (0.3, 1.2), (-6, 6)),
    ("t", (3.5, 0.2, 1.3), (-5, 5)),
    ("chi2", (3.0, 0.1, 1.2), (-1, 8)),
    ("gamma", (2.5, 0.1, 1.2), (-1, 8)),
    ("beta", (2.5, 1.7, -0.1, 1.3), (-0.3, 1.4)),
    ("pareto", (2.5, 0.1, 1.2), (0.5, 6)),
    ("gennorm", (1.5,), (-3, 3)),
    ("vonmises", (2.0,), (-3, 3)),
    ("truncnorm", (-1.0, 2.0, 0.2, 1.3), (-2, 3)),
]
FUNCS = ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf", "ppf", "isf"]
PARAMS = [(d, f, args, dom) for d, args, dom in CONT for f in FUNCS if hasattr(getattr(ps, d), f)]


@pytest.mark.parametrize("dist,fn,args,dom", PARAMS, ids=[f"{p[0]}.{p[1]}" for p in PARAMS])
def test_continuous_values(dist, fn, args, dom):
    ours, ref = getattr(getattr(ps, dist), fn), getattr(getattr(ss, dist), fn)
    lo, hi = (0.0, 1.0) if fn in ("ppf", "isf") else dom
    for shape in [(), (6,), (2, 3)]:
        x = R.uniform(lo, hi, size=shape)
        out = ours(x, *args)
        assert out.shape == shape and out.dtype == np.float64
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(np.asarray(out), ref(x, *args), rtol=1e-9, atol=1e-12)
    x = R.uniform(lo, hi, size=(5,))
    eager = np.asarray(ours(x, *args))
    np.testing.assert_allclose(plax.jit(ours)(x, *args), eager, rtol=1e-13)
    np.testing.assert_allclose(plax.vmap(lambda v: ours(v, *args))(x), eager, rtol=1e-13)
    assert ours(np.int32(1), *[np.float32(a) for a in args]).dtype == np.float32


@pytest.mark.parametrize("dist,args,dom", CONT, ids=[c[0] for c in CONT])
def test_continuous_grads(dist, args, dom):
    mod = getattr(ps, dist)
    lo, hi = dom
    x = np.float64(lo + 0.37 * (hi - lo))
    check_grads(lambda x, *a: mod.logpdf(x, *a), (x,) + tuple(np.float64(a) for a in args),
                order=1, modes=("fwd", "rev"), eps=1e-5)
    if hasattr(mod, "cdf"):
        check_grads(lambda x: mod.cdf(x, *args), (x,), order=1, eps=1e-5)


def test_norm_tails_and_defaults():
    x = np.array([-40.0, -10.0, 0.0, 10.0, 40.0])
    np.testing.assert_allclose(ps.norm.logcdf(x), ss.norm.logcdf(x), rtol=1e-10)
    np.testing.assert_allclose(ps.norm.logsf(x), ss.norm.logsf(x), rtol=1e-10)
    q = np.array([0.0, 1e-30, 0.5, 1.0, -0.1])
    np.testing.assert_allclose(ps.norm.ppf(q), ss.norm.ppf(q), rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(ps.norm.isf(q, 1.0, 2.0), ss.norm.isf(q, 1.0, 2.0), rtol=1e-10,
                               atol=1e-14)


DISC = [
    ("bernoulli", "pmf", (0.3,), np.array([-1.0, 0, 1, 2])),
    ("bernoulli", "logpmf", (0.3,), np.array([-1.0, 0, 1, 2])),
    ("bernoulli", "cdf", (0.3,), np.array([-1.0, 0, 0.5, 1, 2])),
    ("bernoulli", "ppf", (0.3,), np.array([0.3, 0.7, 0.71, 1.0, -0.1, 1.1])),
    ("binom", "pmf", (7, 0.3), np.array([-1.0, 0, 3, 7, 8])),
    ("binom", "logpmf", (7, 0.3), np.array([-1.0, 0, 3, 7, 8])),
    ("poisson", "pmf", (2.5,), np.array([-1.0, 0, 2, 2.5, 9])),
    ("poisson", "logpmf", (2.5,), np.array([-1.0, 0, 2, 9])),
    ("poisson", "cdf", (2.5,), np.array([-1.0, 0, 2, 2.5, 9])),
    ("geom", "pmf", (0.3,), np.array([0.0, 1, 2, 9])),
    ("geom", "logpmf", (0.3,), np.array([0.0, 1, 2, 9])),
]


@pytest.mark.parametrize("dist,fn,args,k", DISC, ids=[f"{d[0]}.{d[1]}" for d in DISC])
def test_discrete_values(dist, fn, args, k):
    ours, ref = getattr(getattr(ps, dist), fn), getattr(getattr(ss, dist), fn)
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(np.asarray(ours(k, *args)), ref(k, *args), rtol=1e-10,
                                   atol=1e-14)
    kk = np.tile(k, (2, 1))
    np.testing.assert_allclose(plax.vmap(lambda v: ours(v, *args))(kk), np.asarray(ours(kk, *args)))
    np.testing.assert_allclose(plax.jit(ours)(k, *args), np.asarray(ours(k, *args)))
    assert ours(np.int32(1), *[np.float32(a) for a in args]).dtype == np.float32


def test_discrete_loc_and_grads():
    np.testing.assert_allclose(ps.poisson.pmf(5, 2.0, 2), ss.poisson.pmf(5, 2.0, 2))
    np.testing.assert_allclose(ps.binom.logpmf(5, 7, 0.4, 1), ss.binom.logpmf(5, 7, 0.4, 1))
    check_grads(lambda mu: ps.poisson.logpmf(3.0, mu), (np.float64(2.5),), order=2)
    check_grads(lambda p: ps.binom.logpmf(3.0, 7.0, p), (np.float64(0.3),), order=2)
    check_grads(lambda p: ps.geom.logpmf(3.0, p), (np.float64(0.3),), order=2)
    check_grads(lambda p: ps.bernoulli.logpmf(1.0, p), (np.float64(0.3),), order=2)


def test_dirichlet():
    alpha = np.array([1.5, 2.0, 3.0])
    x = R.dirichlet(alpha, size=4).T  # (K, 4)
    np.testing.assert_allclose(ps.dirichlet.logpdf(x, alpha), ss.dirichlet.logpdf(x, alpha),
                               rtol=1e-10)
    np.testing.assert_allclose(ps.dirichlet.pdf(x[:, 0], alpha), ss.dirichlet.pdf(x[:, 0], alpha),
                               rtol=1e-10)
    np.testing.assert_allclose(ps.dirichlet.logpdf(x[:2], alpha), ss.dirichlet.logpdf(x, alpha),
                               rtol=1e-10)
    assert float(ps.dirichlet.logpdf(np.array([0.2, 0.3, 0.6]), alpha)) == -np.inf
    np.testing.assert_allclose(plax.vmap(lambda v: ps.dirichlet.logpdf(v, alpha), 1)(x),
                               ss.dirichlet.logpdf(x, alpha), rtol=1e-10)
    check_grads(lambda a: ps.dirichlet.logpdf(x[:, 0], a), (alpha,), order=2)
    with pytest.raises(ValueError, match="alpha"):
        ps.dirichlet.logpdf(x, alpha[:, None])


def test_multivariate_normal():
    n = 3
    m = R.normal(size=(n, n))
    cov = m @ m.T + n * np.eye(n)
    mean = R.normal(size=n)
    x = R.normal(size=(4, n))
    want = ss.multivariate_normal.logpdf(x, mean, cov)
    np.testing.assert_allclose(ps.multivariate_normal.logpdf(x, mean, cov), want, rtol=1e-10)
    np.testing.assert_allclose(ps.multivariate_normal.pdf(x, mean, cov), np.exp(want), rtol=1e-10)
    np.testing.assert_allclose(ps.multivariate_normal.logpdf(x, mean, 2.0),
                               ss.multivariate_normal.logpdf(x, mean, 2.0), rtol=1e-10)
    np.testing.assert_allclose(ps.multivariate_normal.logpdf(0.7, 0.1, 2.0),
                               ss.multivariate_normal.logpdf(0.7, 0.1, 2.0), rtol=1e-10)
    np.testing.assert_allclose(plax.vmap(lambda v: ps.multivariate_normal.logpdf(v, mean, cov))(x),
                               want, rtol=1e-10)
    np.testing.assert_allclose(plax.jit(ps.multivariate_normal.logpdf)(x, mean, cov), want,
                               rtol=1e-10)
    check_grads(lambda x, mu: ps.multivariate_normal.logpdf(x, mu, cov), (x[0], mean), order=2)
    with pytest.raises(NotImplementedError):
        ps.multivariate_normal.logpdf(x, mean, cov, allow_singular=True)


def test_plax_scipy_namespace():
    import plax.scipy
    assert plax.scipy.stats.norm is ps.norm
    assert plax.scipy.special.erf is not None
