"""lax.reduce_precision and lax.cumlogsumexp: values against NumPy references (and JAX bit
for bit when installed), gradients, vmap, jit and errors."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax
from plax.test_util import check_grads
from plax.testing.conformance.spec_precision import cumlogsumexp_ref, reduce_precision_ref

RNG = np.random.default_rng(0)


def _wide_floats(n=3000):
    x = RNG.standard_normal(n) * 10.0 ** RNG.integers(-40, 40, n)
    return np.concatenate([x, [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, -1e-45]])


@pytest.mark.parametrize("bits", [(5, 10), (8, 7)])
def test_reduce_precision_emulates_casts(bits):
    with np.errstate(over="ignore"):
        x = _wide_floats().astype(np.float32)
    got = np.asarray(lax.reduce_precision(x, *bits))
    expected = reduce_precision_ref(x, exponent_bits=bits[0], mantissa_bits=bits[1])
    np.testing.assert_array_equal(got, expected)
    assert np.array_equal(np.signbit(got), np.signbit(expected))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("bits", [(5, 10), (8, 7), (4, 3), (2, 0), (8, 23), (3, 30)])
def test_reduce_precision_matches_jax_bits(dtype, bits):
    jlax = pytest.importorskip("jax.lax")
    from plax import dtypes
    d = dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)
    with np.errstate(over="ignore"):
        x = _wide_floats().astype(d)
    got = np.asarray(lax.reduce_precision(x, *bits))
    expected = np.asarray(jlax.reduce_precision(x, *bits))
    nan = np.isnan(expected.astype(np.float64))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float64)), nan)
    np.testing.assert_array_equal(got.view(np.uint8).reshape(len(x), -1)[~nan],
                                  expected.view(np.uint8).reshape(len(x), -1)[~nan])


def test_reduce_precision_transforms():
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    f = lambda x: lax.reduce_precision(x, 5, 10)  # noqa: E731
    # the derivative is the rounding of the tangent, as in JAX
    _, t = plax.jvp(f, (x,), (np.full_like(x, 1.3),))
    np.testing.assert_array_equal(np.asarray(t), np.asarray(f(np.full_like(x, 1.3))))
    np.testing.assert_array_equal(np.asarray(plax.grad(lambda x: f(x).sum())(x)), np.ones_like(x))
    np.testing.assert_array_equal(np.asarray(plax.vmap(f, 1)(x)), np.asarray(f(x)).T)
    np.testing.assert_array_equal(np.asarray(plax.jit(f)(x)), np.asarray(f(x)))
    with pytest.raises(TypeError, match="int32"):
        lax.reduce_precision(np.ones(2, np.int32), 5, 10)
    with pytest.raises(ValueError, match="exponent_bits must be positive; got 0"):
        lax.reduce_precision(x, 0, 3)
    with pytest.raises(ValueError, match="mantissa_bits must be non-negative; got -1"):
        lax.reduce_precision(x, 5, -1)


@pytest.mark.parametrize("axis,reverse", [(0, False), (1, True), (-1, False), (0, True)])
def test_cumlogsumexp(axis, reverse):
    x = RNG.uniform(-5, 5, (4, 6)).astype(np.float32)
    got = lax.cumlogsumexp(x, axis, reverse)
    expected = cumlogsumexp_ref(x, axis=axis % 2, reverse=reverse)
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6, atol=1e-6)
    check_grads(lambda x: lax.cumlogsumexp(x, axis, reverse), (x,), order=2,
                modes=("fwd", "rev"))
    batch = RNG.uniform(-5, 5, (3, 4, 6)).astype(np.float32)
    f = lambda x: lax.cumlogsumexp(x, axis, reverse)  # noqa: E731
    np.testing.assert_allclose(np.asarray(plax.vmap(f, 2, 0)(np.moveaxis(batch, 0, 2))),
                               np.stack([np.asarray(f(b)) for b in batch]), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(plax.jit(f)(x)), np.asarray(f(x)), rtol=1e-6)


def test_cumlogsumexp_extremes_and_matches_jax():
    x = np.array([-np.inf, -np.inf, 0.0, 1000.0, -3.0], np.float32)
    got = lax.cumlogsumexp(x)
    np.testing.assert_allclose(np.asarray(got), cumlogsumexp_ref(x, axis=0, reverse=False))
    g = plax.grad(lambda x: lax.cumlogsumexp(x)[-1])(x)
    assert np.all(np.isfinite(np.asarray(g)))
    jlax = pytest.importorskip("jax.lax")
    np.testing.assert_allclose(np.asarray(got), np.asarray(jlax.cumlogsumexp(x)))
    with pytest.raises(TypeError, match="int32"):
        lax.cumlogsumexp(np.ones(3, np.int32))
