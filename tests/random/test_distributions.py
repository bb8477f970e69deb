"""Statistical tests of every sampler: moments and Kolmogorov-Smirnov tests against scipy.stats.

Seeds are fixed, so every test is deterministic; the thresholds (p > 1e-3,
moments within ~5 standard errors) would fail only for a wrong distribution.
"""
from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as st

import plax
from plax import numpy as jnp
from plax import random

N = 20_000
P_MIN = 1e-3


def np_(x):
    return np.asarray(x)


def ks(samples, dist):
    return st.kstest(np.asarray(samples, np.float64).ravel(), dist.cdf).pvalue


def assert_mean(samples, mean, std, n=None):
    n = samples.size if n is None else n
    assert abs(samples.mean() - mean) < 5 * std / np.sqrt(n), (samples.mean(), mean)


@pytest.fixture(params=[True, False], ids=["partitionable", "original"], autouse=True)
def mode(request):
    with plax.config.override("jax_threefry_partitionable", request.param):
        yield request.param


def key(i=0):
    return random.PRNGKey(1000 + i)


def test_uniform():
    x = np_(random.uniform(key(), (N,), minval=-2.0, maxval=3.0))
    assert x.dtype == np.float32 and x.min() >= -2.0 and x.max() < 3.0
    assert ks(x, st.uniform(-2.0, 5.0)) > P_MIN
    assert_mean(x, 0.5, 5 / np.sqrt(12))


def test_uniform_float64(x64):
    x = np_(random.uniform(key(), (N,), jnp.float64))
    assert x.dtype == np.float64 and ks(x, st.uniform()) > P_MIN
    # float64 draws use 52 random mantissa bits, not float32's 23
    assert len(np.unique(x)) == N


def test_normal():
    x = np_(random.normal(key(), (N,)))
    assert ks(x, st.norm()) > P_MIN
    assert_mean(x, 0.0, 1.0)
    assert abs(x.var() - 1) < 5 * np.sqrt(2 / N)


def test_complex_normal():
    z = np_(random.normal(key(), (N,), jnp.complex64))
    assert z.dtype == np.complex64
    assert ks(z.real * np.sqrt(2), st.norm()) > P_MIN and ks(z.imag * np.sqrt(2), st.norm()) > P_MIN
    assert abs(np.mean(np.abs(z) ** 2) - 1) < 0.05


def test_truncated_normal():
    x = np_(random.truncated_normal(key(), -0.5, 1.5, (N,)))
    assert x.min() > -0.5 and x.max() < 1.5
    assert ks(x, st.truncnorm(-0.5, 1.5)) > P_MIN


def test_bernoulli():
    x = np_(random.bernoulli(key(), 0.3, (N,)))
    assert x.dtype == np.bool_
    assert_mean(x.astype(float), 0.3, np.sqrt(0.21))
    hi = np_(random.bernoulli(key(1), 1e-9, (N,), mode="high"))
    assert not hi.any()
    p = jnp.array([0.0, 0.5, 1.0])
    draws = np_(plax.vmap(lambda k: random.bernoulli(k, p))(random.split(key(2), 500)))
    np.testing.assert_array_equal(draws[:, 0], False)
    np.testing.assert_array_equal(draws[:, 2], True)


def test_rademacher():
    x = np_(random.rademacher(key(), (N,)))
    assert x.dtype == np.int32 and set(np.unique(x)) == {-1, 1}
    assert_mean(x.astype(float), 0.0, 1.0)


def test_randint():
    x = np_(random.randint(key(), (N,), 3, 10))
    assert x.dtype == np.int32 and x.min() == 3 and x.max() == 9
    counts = np.bincount(x - 3, minlength=7)
    assert st.chisquare(counts).pvalue > P_MIN
    u8 = np_(random.randint(key(1), (N,), 0, 256, jnp.uint8))
    assert u8.dtype == np.uint8 and u8.max() == 255
    assert np.all(np_(random.randint(key(2), (5,), 4, 4)) == 4)


def test_choice_and_permutation():
    p = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    x = np_(random.choice(key(), 4, (N,), p=jnp.asarray(p)))
    assert st.chisquare(np.bincount(x, minlength=4), N * p).pvalue > P_MIN
    no_repl = np_(random.choice(key(1), 100, (30,), replace=False))
    assert len(set(no_repl)) == 30
    firsts = np_(plax.vmap(lambda k: random.permutation(k, 5)[0])(random.split(key(2), 5000)))
    assert st.chisquare(np.bincount(firsts, minlength=5)).pvalue > P_MIN
    perm = np_(random.permutation(key(3), jnp.arange(20) * 3))
    np.testing.assert_array_equal(np.sort(perm), np.arange(20) * 3)
    rows = np_(random.permutation(key(4), jnp.arange(12).reshape(3, 4), axis=1))
    np.testing.assert_array_equal(np.sort(rows, axis=1), np.arange(12).reshape(3, 4))
    # without `independent`, whole columns move together
    assert len({tuple(r - r[0]) for r in rows}) == 1


def test_choice_without_replacement_with_p():
    p = np.array([0.5, 0.3, 0.1, 0.1], np.float32)
    firsts = np_(plax.vmap(lambda k: random.choice(k, 4, (2,), replace=False, p=jnp.asarray(p))[0])(
        random.split(key(), 4000)))
    assert st.chisquare(np.bincount(firsts, minlength=4), 4000 * p).pvalue > P_MIN


def test_categorical():
    probs = np.array([0.1, 0.6, 0.3])
    x = np_(random.categorical(key(), jnp.log(jnp.asarray(probs)), shape=(N,)))
    assert st.chisquare(np.bincount(x, minlength=3), N * probs).pvalue > P_MIN
    logits = jnp.log(jnp.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]))
    batch = np_(random.categorical(key(1), logits, shape=(100, 2)))
    assert set(np.unique(batch[:, 0])) <= {0, 1} and np.all(batch[:, 1] == 2)
    distinct = np_(random.categorical(key(2), jnp.zeros(5), shape=(5,), replace=False))
    np.testing.assert_array_equal(np.sort(distinct), np.arange(5))


@pytest.mark.parametrize("name,dist", [
    ("exponential", st.expon()), ("laplace", st.laplace()), ("logistic", st.logistic()),
    ("cauchy", st.cauchy()), ("gumbel", st.gumbel_r()),
])
def test_one_parameter_free_samplers(name, dist):
    x = np_(getattr(random, name)(key(), (N,)))
    assert x.dtype == np.float32 and np.all(np.isfinite(x))
    assert ks(x, dist) > P_MIN


@pytest.mark.parametrize("mode_", ["high", "highest"])
def test_gumbel_modes(mode_):
    assert ks(np_(random.gumbel(key(), (N,), mode=mode_)), st.gumbel_r()) > P_MIN


@pytest.mark.parametrize("a", [0.2, 1.0, 3.5, 60.0])
def test_gamma(a):
    x = np_(random.gamma(key(), a, (N,)))
    assert np.all(x >= 0)
    assert ks(x, st.gamma(a)) > P_MIN
    assert_mean(x, a, np.sqrt(a))


def test_loggamma_is_log_of_gamma():
    lx = np_(random.loggamma(key(), 0.05, (N,)))
    assert ks(np.exp(lx.astype(np.float64)), st.gamma(0.05)) > P_MIN
    np.testing.assert_allclose(np.exp(np_(random.loggamma(key(1), 2.0, (50,)))),
                               np_(random.gamma(key(1), 2.0, (50,))), rtol=1e-5)


def test_beta_and_dirichlet():
    assert ks(np_(random.beta(key(), 0.7, 2.5, (N,))), st.beta(0.7, 2.5)) > P_MIN
    alpha = np.array([0.5, 1.5, 3.0])
    d = np_(random.dirichlet(key(1), jnp.asarray(alpha), (N,)))
    assert d.shape == (N, 3)
    np.testing.assert_allclose(d.sum(-1), 1.0, rtol=1e-5)
    # each coordinate is Beta(alpha_i, sum - alpha_i)
    assert ks(d[:, 0], st.beta(0.5, 4.5)) > P_MIN
    assert ks(d[:, 2], st.beta(3.0, 2.0)) > P_MIN


@pytest.mark.parametrize("lam", [0.7, 4.0, 25.0, 400.0])
def test_poisson(lam):
    x = np_(random.poisson(key(), lam, (N,)))
    assert x.dtype == np.int32 and x.min() >= 0
    assert_mean(x.astype(float), lam, np.sqrt(lam))
    assert abs(x.var() / lam - 1) < 0.06
    if lam < 10:  # exact pmf check for the small-rate (Knuth) branch
        k = np.arange(int(lam * 4 + 10))
        observed = np.bincount(x, minlength=k.size)[:k.size]
        expected = N * st.poisson(lam).pmf(k)
        keep = expected > 5
        assert st.chisquare(observed[keep], expected[keep] * observed[keep].sum()
                            / expected[keep].sum()).pvalue > P_MIN
    assert np.all(np_(random.poisson(key(1), 0.0, (10,))) == 0)


def test_multivariate_normal():
    mean = np.array([1.0, -2.0, 0.5])
    cov = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])
    x = np_(random.multivariate_normal(key(), jnp.asarray(mean), jnp.asarray(cov), (N,)))
    assert x.shape == (N, 3)
    np.testing.assert_allclose(x.mean(0), mean, atol=5 * np.sqrt(2.0 / N))
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.06)
    # projections onto any direction are normal with the projected variance
    v = np.array([0.3, -0.5, 0.8])
    assert ks((x - mean) @ v / np.sqrt(v @ cov @ v), st.norm()) > P_MIN


def test_orthogonal():
    q = np_(random.orthogonal(key(), 4, (50,)))
    gram = np.einsum("bij,bkj->bik", q, q)
    np.testing.assert_allclose(gram, np.broadcast_to(np.eye(4), (50, 4, 4)), atol=1e-5)
    wide = np_(random.orthogonal(key(1), 2, (), m=5))
    np.testing.assert_allclose(wide @ wide.T, np.eye(2), atol=1e-5)
    # Haar measure on O(3): each entry is uniform on [-1, 1]
    entries = np_(random.orthogonal(key(2), 3, (N // 4,)))[:, 0, 0]
    assert ks(entries, st.uniform(-1, 2)) > P_MIN


def test_generalized_normal_and_ball():
    assert ks(np_(random.generalized_normal(key(), 1.5, (N,))), st.gennorm(1.5)) > P_MIN
    points = np_(random.ball(key(1), 3, shape=(N,)))
    radii = np.linalg.norm(points, axis=-1)
    assert radii.max() <= 1.0
    # uniform in the 3-ball: radius**3 is uniform on [0, 1]
    assert ks(radii ** 3, st.uniform()) > P_MIN
    l1 = np_(random.ball(key(2), 2, p=1, shape=(1000,)))
    assert np.abs(l1).sum(-1).max() <= 1.0


@pytest.mark.parametrize("method", ["svd", "eigh"])
def test_multivariate_normal_by_decomposition(method):
    """``method="svd"``/``"eigh"`` factor ``cov`` as ``U sqrt(S)``: the same distribution (with
    "svd", also for a singular covariance, which Cholesky cannot factor)."""
    mean = np.array([1.0, -2.0, 0.5])
    cov = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, -0.2], [0.1, -0.2, 0.5]])
    x = np_(random.multivariate_normal(key(), jnp.asarray(mean), jnp.asarray(cov), (N,),
                                       method=method))
    assert x.shape == (N, 3)
    np.testing.assert_allclose(x.mean(0), mean, atol=5 * np.sqrt(2.0 / N))
    np.testing.assert_allclose(np.cov(x.T), cov, atol=0.06)
    v = np.array([0.3, -0.5, 0.8])
    assert ks((x - mean) @ v / np.sqrt(v @ cov @ v), st.norm()) > P_MIN
    if method == "eigh":  # a zero eigenvalue may come out slightly negative (NaN, as in JAX)
        return
    rank_one = np.outer([1.0, 2.0], [1.0, 2.0])
    y = np_(random.multivariate_normal(key(1), jnp.zeros(2), jnp.asarray(rank_one), (1000,),
                                       method=method))
    assert np.all(np.isfinite(y))
    np.testing.assert_allclose(y[:, 1], 2 * y[:, 0], atol=1e-3)
