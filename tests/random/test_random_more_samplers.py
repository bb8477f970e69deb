"""plax.random's derived samplers (chisquare, f, t, rayleigh, wald, pareto, lognormal, maxwell,
double_sided_maxwell, weibull_min, triangular, geometric): the recipe against a NumPy
computation on plax's own basic samples (same subkeys), the distribution against scipy.stats
(Kolmogorov-Smirnov on fixed keys), and JAX's numbers where JAX is installed (a few ulps: the
elementary functions of XLA and of the host libm differ in the last bit)."""
import numpy as np
import pytest
import scipy.stats as st

import plax
from plax import random


def _ulps_close(a, b, ulps=8):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    if a.dtype.kind in "iu":
        np.testing.assert_array_equal(a, b)
        return
    eps = np.finfo(a.dtype).eps
    np.testing.assert_allclose(a, b, rtol=ulps * eps, atol=0)


KEY = random.PRNGKey(11)
N = 4000

CASES = [
    # name, args after the key (shape last), scipy distribution
    ("chisquare", (3.0,), st.chi2(3.0)),
    ("f", (4.0, 7.0), st.f(4.0, 7.0)),
    ("t", (4.0,), st.t(4.0)),
    ("rayleigh", (1.5,), st.rayleigh(scale=1.5)),
    ("wald", (1.2,), st.invgauss(1.2)),
    ("pareto", (3.0,), st.pareto(3.0)),
    ("lognormal", (0.5,), st.lognorm(0.5)),
    ("weibull_min", (2.0, 1.5), st.weibull_min(1.5, scale=2.0)),
    ("triangular", (0.0, 0.3, 2.0), st.triang(0.15, scale=2.0)),
]


@pytest.mark.parametrize("name,args,dist", CASES, ids=[c[0] for c in CASES])
def test_distribution(name, args, dist):
    x = np.asarray(getattr(random, name)(KEY, *args, shape=(N,)))
    assert x.shape == (N,) and x.dtype == np.float32
    assert st.kstest(x.astype(np.float64), dist.cdf).pvalue > 1e-3


def test_maxwell_and_double_sided():
    x = np.asarray(random.maxwell(KEY, (N,)))
    assert st.kstest(x.astype(np.float64), st.maxwell.cdf).pvalue > 1e-3
    y = np.asarray(random.double_sided_maxwell(KEY, 1.0, 2.0, (N,)))
    # |y - loc| / scale is Maxwell; the signs are balanced
    assert st.kstest(np.abs(y - 1.0) / 2.0, st.maxwell.cdf).pvalue > 1e-3
    assert abs(np.mean(y > 1.0) - 0.5) < 0.05
    assert random.double_sided_maxwell(KEY, np.zeros(3), 1.0, (2,)).shape == (2, 3)


def test_geometric():
    x = np.asarray(random.geometric(KEY, 0.3, (N,)))
    assert x.dtype == np.int32 and x.min() >= 1
    counts = np.bincount(x, minlength=40)[1:40]
    expected = st.geom(0.3).pmf(np.arange(1, 40)) * N
    assert st.chisquare(counts[:12], expected[:12] * counts[:12].sum() / expected[:12].sum()
                        ).pvalue > 1e-3
    with pytest.raises(ValueError, match="int"):
        random.geometric(KEY, 0.3, dtype=np.float32)


def test_recipes_against_numpy():
    """The transformations, recomputed in NumPy from plax's basic samplers with the same
    subkeys (so only rounding separates them)."""
    with plax.config.override("jax_enable_x64", True):
        key = random.PRNGKey(5)
        k1, k2 = random.split(key)
        u = np.asarray(random.uniform(key, (50,), dtype=np.float64))
        n = np.asarray(random.normal(key, (50,), dtype=np.float64))
        _ulps_close(random.rayleigh(key, 2.0, (50,)), 2.0 * np.sqrt(-2 * np.log(u)))
        _ulps_close(random.lognormal(key, 0.7, (50,)), np.exp(0.7 * n))
        _ulps_close(random.pareto(key, 3.0, (50,)), np.exp(-np.log1p(-u) / 3.0))
        _ulps_close(random.weibull_min(key, 2.0, 1.5, (50,)), (-np.log1p(-u)) ** (1 / 1.5) * 2.0)
        g = np.asarray(random.gamma(k2, 2.0, (50,), dtype=np.float64))
        _ulps_close(random.t(key, 4.0, (50,)),
                    np.asarray(random.normal(k1, (50,), dtype=np.float64)) * np.sqrt(2.0 / g))
        n3 = np.asarray(random.normal(key, (50, 3), dtype=np.float64))
        _ulps_close(random.maxwell(key, (50,)), np.sqrt((n3 ** 2).sum(-1)))
        lo, mode, hi = 0.0, 0.3, 2.0
        tri = np.where(u < (mode - lo) / (hi - lo), lo + np.sqrt(u * (hi - lo) * (mode - lo)),
                       hi - np.sqrt((1 - u) * (hi - lo) * (hi - mode)))
        _ulps_close(random.triangular(key, lo, mode, hi, (50,)), tri)


def test_shapes_dtypes_and_transforms():
    assert random.chisquare(KEY, np.ones((2, 3))).shape == (2, 3)
    assert random.f(KEY, np.ones(3), 2.0).shape == (3,)
    with pytest.raises(ValueError):
        random.t(KEY, np.ones(3), shape=(4,))
    with pytest.raises(ValueError, match="float"):
        random.rayleigh(KEY, 1.0, dtype=np.int32)
    with plax.config.override("jax_enable_x64", True):
        assert random.wald(KEY, 1.0, (2,)).dtype == np.float64
        assert random.geometric(KEY, 0.5, (2,)).dtype == np.int64
    keys = random.split(KEY, 3)
    batched = plax.vmap(lambda k: random.t(k, 3.0, (4,)))(keys)
    for i in range(3):
        _ulps_close(batched[i], random.t(keys[i], 3.0, (4,)))
    _ulps_close(plax.jit(lambda k: random.wald(k, 1.3, (6,)))(KEY), random.wald(KEY, 1.3, (6,)))


JAX_CASES = [("chisquare", (3.0, (6,))), ("f", (2.0, 5.0, (6,))), ("t", (4.0, (6,))),
             ("rayleigh", (1.5, (6,))), ("wald", (1.2, (6,))), ("pareto", (3.0, (6,))),
             ("lognormal", (0.5, (6,))), ("maxwell", ((6,),)),
             ("double_sided_maxwell", (0.5, 2.0, (6,))), ("weibull_min", (1.0, 2.0, (6,))),
             ("triangular", (0.0, 0.3, 1.0, (6,))), ("geometric", (0.3, (6,))),
             ("binomial", (np.array([5.0, 50, 500, np.nan, -1, np.inf]),
                           np.array([0.5, 0.9, 0.2, 0.5, 0.5, 0.5])))]


@pytest.mark.parametrize("x64", [False, True])
def test_same_numbers_as_jax(x64):
    jax = pytest.importorskip("jax", reason="cross-check with JAX (not installed in CI)")
    import jax.random as jr
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", x64)
    try:
        with plax.config.override("jax_enable_x64", x64):
            # with x64 a sample (JAX compiles each sampler for a second or two)
            cases = JAX_CASES if not x64 else [c for c in JAX_CASES
                                               if c[0] in ("f", "wald", "binomial")]
            for name, args in cases:
                want = np.asarray(getattr(jr, name)(jr.PRNGKey(7), *args))
                got = np.asarray(getattr(random, name)(random.PRNGKey(7), *args))
                if name == "binomial":   # integer-valued: exactly JAX's
                    np.testing.assert_array_equal(got, want)
                else:
                    _ulps_close(got, want, ulps=16)
            if x64:
                return   # multinomial once (JAX compiles its loops slowly)
            want = np.asarray(jr.multinomial(jr.PRNGKey(4), 20.0, np.array([0.2, 0.3, 0.5])))
            got = np.asarray(random.multinomial(random.PRNGKey(4), 20.0,
                                                np.array([0.2, 0.3, 0.5])))
            np.testing.assert_array_equal(got, want)
    finally:
        jax.config.update("jax_enable_x64", old)


def test_binomial_and_multinomial():
    for n, p in [(12, 0.3), (400, 0.25), (400, 0.8)]:
        x = np.asarray(random.binomial(KEY, n, p, (3000,)))
        assert x.dtype == np.float32 and (x == np.floor(x)).all() and x.min() >= 0 and x.max() <= n
        # mean and variance within 5 standard errors of the binomial's
        mean, var = n * p, n * p * (1 - p)
        assert abs(x.mean() - mean) < 5 * np.sqrt(var / x.size)
        assert abs(x.var() - var) < 5 * var * np.sqrt(2 / x.size) + 0.5
        # chi-square over the values with at least 20 expected draws, the tails pooled
        pmf = st.binom(n, p).pmf(np.arange(n + 1)) * x.size
        keep = np.flatnonzero(pmf >= 20)
        lo, hi = keep[0], keep[-1]
        observed = [(x < lo).sum()] + [(x == v).sum() for v in range(lo, hi + 1)] + \
            [(x > hi).sum()]
        expected = [pmf[:lo].sum()] + list(pmf[lo:hi + 1]) + [pmf[hi + 1:].sum()]
        observed, expected = np.array(observed), np.array(expected)
        used = expected > 0
        assert st.chisquare(observed[used], expected[used] * observed[used].sum()
                            / expected[used].sum()).pvalue > 1e-4
    special = random.binomial(KEY, np.array([np.nan, -1.0, np.inf, 5.0]),
                              np.array([0.5, 0.5, 0.5, np.nan]))
    np.testing.assert_array_equal(np.isnan(special), [True, True, False, True])
    assert np.isinf(special[2])
    probs = np.array([0.1, 0.6, 0.3])
    counts = np.asarray(random.multinomial(KEY, 50.0, probs, shape=(400, 3)))
    assert counts.shape == (400, 3) and (counts.sum(-1) == 50).all()
    np.testing.assert_allclose(counts.mean(0), 50 * probs, atol=0.6)
    keys = random.split(KEY, 3)
    batched = plax.vmap(lambda k: random.binomial(k, 30.0, 0.4, (5,)))(keys)
    for i in range(3):
        np.testing.assert_array_equal(batched[i], random.binomial(keys[i], 30.0, 0.4, (5,)))
    np.testing.assert_array_equal(plax.jit(lambda k: random.binomial(k, 300.0, 0.4, (5,)))(KEY),
                                  random.binomial(KEY, 300.0, 0.4, (5,)))
