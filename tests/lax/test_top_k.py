"""lax.top_k: values and indices against a stable NumPy sort and JAX, ties and NaN,
gradients, vmap against a loop, jit against eager, and JAX's errors."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax
from plax.test_util import check_grads
from plax.testing.conformance.harness import rand_distinct
from plax.testing.conformance.spec_top_k import top_k_ref

RNG = np.random.default_rng(0)


@pytest.mark.parametrize("shape,k,axis", [((7,), 3, -1), ((3, 6), 6, 1), ((5, 4), 2, 0),
                                          ((2, 3, 4), 1, 1), ((3, 2), 0, -1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8, np.bool_])
def test_values(shape, k, axis, dtype):
    x = RNG.integers(0, 4, shape).astype(dtype)  # many ties
    values, idx = lax.top_k(x, k, axis=axis)
    ev, ei = top_k_ref(x, k=k, axis=axis % len(shape))
    assert values.dtype == dtype and idx.dtype == np.int32
    np.testing.assert_array_equal(np.asarray(values), ev)
    np.testing.assert_array_equal(np.asarray(idx), ei)


def test_nan_is_largest_and_matches_jax():
    x = np.array([1.0, np.nan, 3.0, 3.0, -np.inf, np.inf], np.float32)
    values, idx = lax.top_k(x, 4)
    np.testing.assert_array_equal(np.asarray(idx), [1, 5, 2, 3])
    jlax = pytest.importorskip("jax.lax")
    jv, ji = jlax.top_k(x, 4)
    np.testing.assert_array_equal(np.asarray(values), np.asarray(jv))
    np.testing.assert_array_equal(np.asarray(idx), np.asarray(ji))


def test_grads_vmap_jit():
    x = rand_distinct(RNG, (3, 5), np.float32)
    f = lambda x: lax.top_k(x, 2)[0]  # noqa: E731
    check_grads(f, (x,), order=2, modes=("fwd", "rev"))
    g = plax.grad(lambda x: (f(x) ** 2).sum())(x)
    expected = np.zeros_like(x)
    _, idx = top_k_ref(x, k=2, axis=1)
    for r in range(3):
        expected[r, idx[r]] = 2 * x[r, idx[r]]
    np.testing.assert_allclose(np.asarray(g), expected, rtol=1e-6)
    batch = rand_distinct(RNG, (4, 3, 5), np.float32)
    for ax in (0, 1, 2):
        got = plax.vmap(lambda x: lax.top_k(x, 2), ax)(np.moveaxis(batch, 0, ax))
        for out, k in zip(got, range(2)):
            loop = np.stack([np.asarray(lax.top_k(b, 2)[k]) for b in batch])
            np.testing.assert_array_equal(np.asarray(out), loop)
    v, i = plax.jit(lambda x: lax.top_k(x, 3))(x)
    ev, ei = lax.top_k(x, 3)
    np.testing.assert_array_equal(np.asarray(v), np.asarray(ev))
    np.testing.assert_array_equal(np.asarray(i), np.asarray(ei))


def test_errors():
    with pytest.raises(ValueError, match="no larger than size along axis; got k=4"):
        lax.top_k(np.ones(3, np.float32), 4)
    with pytest.raises(ValueError, match="nonnegative, got -1"):
        lax.top_k(np.ones(3, np.float32), -1)
    with pytest.raises(ValueError, match="complex"):
        lax.top_k(np.ones(3, np.complex64), 1)
    with pytest.raises(ValueError, match="out of bounds"):
        lax.top_k(np.float32(1), 1)
