"""Sampler signatures: shapes, dtypes, parameter broadcasting, vmap over parameters, bad input."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import numpy as jnp
from plax import random

KEY = random.PRNGKey(0)


def np_(x):
    return np.asarray(x)


@pytest.mark.parametrize("call,shape,dtype", [
    (lambda k: random.uniform(k), (), np.float32),
    (lambda k: random.uniform(k, (2, 3), jnp.float16), (2, 3), np.float16),
    (lambda k: random.uniform(k, (2, 3), minval=jnp.zeros(3), maxval=2.0), (2, 3), np.float32),
    (lambda k: random.normal(k, (4,)), (4,), np.float32),
    (lambda k: random.truncated_normal(k, jnp.zeros((2, 1)), jnp.ones(3)), (2, 3), np.float32),
    (lambda k: random.bernoulli(k, jnp.full((3,), 0.5)), (3,), np.bool_),
    (lambda k: random.randint(k, (2,), 0, 5, jnp.int8), (2,), np.int8),
    (lambda k: random.rademacher(k, (2,), jnp.float32), (2,), np.float32),
    (lambda k: random.gamma(k, jnp.ones((2, 2))), (2, 2), np.float32),
    (lambda k: random.gamma(k, 2.0, (3,)), (3,), np.float32),
    (lambda k: random.beta(k, jnp.ones(3), 2.0), (3,), np.float32),
    (lambda k: random.dirichlet(k, jnp.ones((2, 4))), (2, 4), np.float32),
    (lambda k: random.dirichlet(k, jnp.ones(4), (5,)), (5, 4), np.float32),
    (lambda k: random.poisson(k, jnp.ones(3)), (3,), np.int32),
    (lambda k: random.poisson(k, 2.0, (2,), jnp.int8), (2,), np.int8),
    (lambda k: random.choice(k, jnp.arange(6).reshape(2, 3), (4,), axis=1), (2, 4), np.int32),
    (lambda k: random.categorical(k, jnp.zeros((2, 5)), shape=(3, 2)), (3, 2), np.int32),
    (lambda k: random.categorical(k, jnp.zeros((2, 5)), axis=0), (5,), np.int32),
    (lambda k: random.multivariate_normal(k, jnp.zeros((2, 3)), jnp.eye(3)), (2, 3), np.float32),
    (lambda k: random.orthogonal(k, 3, (2,)), (2, 3, 3), np.float32),
    (lambda k: random.ball(k, 4, shape=(2,)), (2, 4), np.float32),
    (lambda k: random.permutation(k, jnp.ones((3, 2))), (3, 2), np.float32),
])
def test_shapes_and_dtypes(call, shape, dtype):
    out = call(KEY)
    assert out.shape == shape and out.dtype == np.dtype(dtype)


def test_default_dtypes_follow_x64(x64):
    assert random.uniform(KEY).dtype == np.float64
    assert random.normal(KEY).dtype == np.float64
    assert random.randint(KEY, (), 0, 3).dtype == np.int64
    assert random.poisson(KEY, 2.0).dtype == np.int64
    assert random.bits(KEY).dtype == np.uint64


@pytest.mark.parametrize("sampler", [
    lambda k, a: random.gamma(k, a),
    lambda k, a: random.beta(k, a, 2.0),
    lambda k, a: random.bernoulli(k, a / 10.0),
    lambda k, a: random.poisson(k, a),
    lambda k, a: random.uniform(k, (2,), minval=-a, maxval=a),
    lambda k, a: random.truncated_normal(k, -a, a),
])
def test_vmap_over_parameters_matches_a_loop(sampler):
    a = jnp.array([0.5, 2.0, 7.5])
    batched = np_(plax.vmap(sampler, in_axes=(None, 0))(KEY, a))
    for i in range(3):
        np.testing.assert_array_equal(batched[i], np_(sampler(KEY, a[i])))


def test_jit_with_traced_parameters_matches_eager():
    def f(k, lo, hi, a, lam):
        return (random.uniform(k, (3,), minval=lo, maxval=hi), random.gamma(k, a, (3,)),
                random.poisson(k, lam, (3,)), random.truncated_normal(k, lo, hi, (3,)))

    args = (KEY, jnp.float32(-1.0), jnp.float32(2.0), jnp.float32(1.5), jnp.float32(12.0))
    for e, j in zip(f(*args), plax.jit(f)(*args)):
        # a compiling backend may fuse or reorder the float math: equal to a few ulps
        np.testing.assert_allclose(np_(e), np_(j), rtol=2e-6, atol=0)


# ------------------------------------------------------------------ bad input

@pytest.mark.parametrize("call,exc,match", [
    (lambda: random.normal(KEY, (-1,)), ValueError, "shape"),
    (lambda: random.normal(KEY, (2.5,)), TypeError, "shape"),
    (lambda: random.uniform(KEY, (2,), minval=1.0, maxval=0.0), ValueError, "minval"),
    (lambda: random.randint(KEY, (2,), 5, 1), ValueError, "minval"),
    (lambda: random.truncated_normal(KEY, 1.0, -1.0), ValueError, "lower"),
    (lambda: random.uniform(KEY, (2,), jnp.int32), ValueError, "float dtype"),
    (lambda: random.normal(KEY, (2,), jnp.int32), ValueError, "float or complex"),
    (lambda: random.randint(KEY, (2,), 0, 3, jnp.float32), ValueError, "integer dtype"),
    (lambda: random.uniform(KEY, (2,), minval=jnp.zeros(3)), ValueError, "broadcast"),
    (lambda: random.gamma(KEY, jnp.ones(3), (2,)), ValueError, "broadcast"),
    (lambda: random.bernoulli(KEY, 1), TypeError, "floating"),
    (lambda: random.bernoulli(KEY, 0.5, mode="medium"), ValueError, "mode"),
    (lambda: random.gumbel(KEY, mode="medium"), ValueError, "mode"),
    (lambda: random.choice(KEY, 3, (2,), p=jnp.ones(4) / 4), ValueError, "p must be"),
    (lambda: random.choice(KEY, 3, (5,), replace=False), ValueError, "larger sample"),
    (lambda: random.choice(KEY, 0, (1,)), ValueError, "greater than 0"),
    (lambda: random.choice(KEY, 3, 2), TypeError, "sequence"),
    (lambda: random.categorical(KEY, jnp.zeros(3), shape=(4,), replace=False), ValueError,
     "cannot exceed"),
    (lambda: random.categorical(KEY, jnp.zeros((2, 3)), shape=(4, 3)), ValueError, "broadcast"),
    (lambda: random.permutation(KEY, 2.5), TypeError, "integer"),
    (lambda: random.dirichlet(KEY, 1.0), ValueError, "alpha.ndim"),
    (lambda: random.multivariate_normal(KEY, jnp.zeros(3), jnp.eye(2)), ValueError, "cov.shape"),
    (lambda: random.multivariate_normal(KEY, jnp.zeros(2), jnp.eye(2), method="qr"), ValueError,
     "method"),
    (lambda: plax.jit(lambda k, n: random.permutation(k, n))(KEY, 3), TypeError, "static"),
])
def test_bad_arguments(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_traced_bounds_are_not_checked_but_clamp_like_jax():
    # Under jit the order of the bounds is unknown at trace time; JAX's formulas then apply:
    # uniform returns minval, randint returns minval.
    out = plax.jit(lambda lo, hi: random.uniform(KEY, (3,), minval=lo, maxval=hi))(2.0, 1.0)
    np.testing.assert_array_equal(np_(out), [2.0, 2.0, 2.0])
    out = plax.jit(lambda lo, hi: random.randint(KEY, (3,), lo, hi))(5, 1)
    np.testing.assert_array_equal(np_(out), [5, 5, 5])
