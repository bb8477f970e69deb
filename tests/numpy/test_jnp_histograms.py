"""bincount, digitize, histogram_bin_edges, histogram, histogram2d and histogramdd of
plax.numpy: values against NumPy in float64, dtypes against JAX's recording, gradients of
weighted histograms, jit and vmap, and the concretization error that points to length=."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import plax
import plax.numpy as jnp
from plax.test_util import check_grads
from jnp_extras_dtype_table import EXPRESSIONS, check_like_recorded, describe_plax


def _x64():
    return plax.config.override("jax_enable_x64", True)


@pytest.mark.parametrize("expr", EXPRESSIONS["histograms"])
def test_dtype_weak_type_and_value_like_jax(expr):
    check_like_recorded(expr, describe_plax)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=20), st.integers(0, 15),
       st.booleans())
def test_bincount_hypothesis(values, minlength, weighted):
    x = np.array(values)
    w = np.linspace(-1, 2, len(values)) if weighted else None
    with _x64():
        np.testing.assert_allclose(np.asarray(jnp.bincount(x, w, minlength)),
                                   np.bincount(x, w, minlength))


def test_bincount_length_clips_and_drops_as_jax():
    x = np.array([-1, -1, 1, 3, 10])
    np.testing.assert_array_equal(np.asarray(jnp.bincount(x, length=5)), [2, 1, 0, 1, 0])
    with pytest.raises(TypeError, match="integer"):
        jnp.bincount(np.array([1.0]))
    with pytest.raises(ValueError, match="1-dimensional"):
        jnp.bincount(np.ones((2, 2), np.int32))


def test_bincount_under_jit_needs_length():
    x = np.array([0, 2, 2, 5])
    with pytest.raises(plax.errors.ConcretizationTypeError, match="length"):
        plax.jit(jnp.bincount)(x)
    got = plax.jit(lambda v: jnp.bincount(v, length=7))(x)
    np.testing.assert_array_equal(np.asarray(got), np.bincount(x, minlength=7))
    batch = np.array([[0, 1, 1], [2, 2, 2]])
    np.testing.assert_array_equal(np.asarray(plax.vmap(lambda v: jnp.bincount(v, length=3))(
        batch)), [np.bincount(r, minlength=3) for r in batch])


@pytest.mark.parametrize("right", [False, True])
@pytest.mark.parametrize("bins", [np.array([0.0, 1.0, 2.5, 4.0]), np.array([4.0, 2.5, 1.0, 0.0]),
                                  np.array([1.0])])
@pytest.mark.parametrize("shape", [(), (5,), (3, 4)])
def test_digitize_against_numpy(right, bins, shape):
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 5, shape)
    if shape:
        x.flat[0] = 1.0  # on an edge
    np.testing.assert_array_equal(np.asarray(jnp.digitize(x, bins, right)),
                                  np.digitize(x, bins, right))
    np.testing.assert_array_equal(np.asarray(jnp.digitize(x, bins, right, method="sort")),
                                  np.digitize(x, bins, right))


@pytest.mark.parametrize("density", [None, True])
@pytest.mark.parametrize("rng_", [None, (-1.0, 1.0)])
@pytest.mark.parametrize("bins", [1, 4, 10, "edges"])
@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_histogram_against_numpy(density, rng_, bins, dtype):
    rng = np.random.default_rng(2)
    a = (rng.standard_normal((4, 5)) * (3 if dtype == np.int32 else 1)).astype(dtype)
    if bins == "edges":
        bins = np.array([-2.0, -0.5, 0.0, 1.5, 2.0])
    with _x64():
        c, e = jnp.histogram(a, bins, rng_, density=density)
        nc, ne = np.histogram(a, bins, rng_, density=density)
        # integer data is binned in float32 even with x64 (JAX's rule)
        np.testing.assert_allclose(np.asarray(c), nc, rtol=1e-6)
        np.testing.assert_allclose(np.asarray(e), ne, rtol=1e-6)
        w = np.abs(a) + 0.5
        c, _ = jnp.histogram(a, bins, rng_, weights=w, density=density)
        np.testing.assert_allclose(np.asarray(c), np.histogram(a, bins, rng_, weights=w,
                                                               density=density)[0], rtol=1e-6)
        np.testing.assert_allclose(np.asarray(jnp.histogram_bin_edges(a, bins, rng_)),
                                   np.histogram_bin_edges(a, bins, rng_), rtol=1e-6)


def test_histogram_bin_edges_of_constant_data_and_errors():
    with _x64():
        np.testing.assert_allclose(np.asarray(jnp.histogram_bin_edges(np.ones(3), 4)),
                                   np.histogram_bin_edges(np.ones(3), 4))
    with pytest.raises(NotImplementedError):
        jnp.histogram(np.ones(3), bins="auto")
    with pytest.raises(ValueError, match="weights"):
        jnp.histogram(np.ones(3), weights=np.ones(2))


@pytest.mark.parametrize("bins", [3, [2, 4], "edges", "pair"])
@pytest.mark.parametrize("density", [None, True])
def test_histogram2d_against_numpy(bins, density):
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(25), rng.standard_normal(25)
    if bins == "edges":
        bins = np.array([-1.0, 0.0, 0.5, 2.0])
    elif bins == "pair":
        bins = [np.array([-1.0, 0.0, 1.0]), np.array([-2.0, 0.0, 1.0, 2.0])]
    w = rng.uniform(0.5, 2.0, 25)
    with _x64():
        for kw in [{}, {"weights": w}, {"range": [[-1, 1], [-2, 2]]}]:
            if "range" in kw and not np.isscalar(bins) and not isinstance(bins, list):
                continue
            got = jnp.histogram2d(x, y, bins, density=density, **kw)
            exp = np.histogram2d(x, y, bins, density=density, **kw)
            for g, e in zip(got, exp):
                np.testing.assert_allclose(np.asarray(g), e)


@pytest.mark.parametrize("bins", [2, [2, 3, 4], [3, np.array([-1.0, 0.0, 1.0]), 2]])
@pytest.mark.parametrize("density", [None, True])
def test_histogramdd_against_numpy(bins, density):
    rng = np.random.default_rng(4)
    s = rng.standard_normal((40, 3))
    with _x64():
        for kw in [{}, {"weights": np.abs(s[:, 0])}]:
            c, edges = jnp.histogramdd(s, bins, density=density, **kw)
            nc, nedges = np.histogramdd(s, bins, density=density, **kw)
            np.testing.assert_allclose(np.asarray(c), nc)
            for g, e in zip(edges, nedges):
                np.testing.assert_allclose(np.asarray(g), e)


def test_gradients_of_weighted_histograms():
    rng = np.random.default_rng(5)
    with _x64():
        a = rng.standard_normal(12)
        w = rng.uniform(0.5, 2.0, 12)
        check_grads(lambda w: jnp.histogram(a, 3, (-2.0, 2.0), weights=w)[0], (w,), 1)
        check_grads(lambda w: jnp.bincount(np.array([0, 2, 2, 1]), w), (w[:4],), 1)
        check_grads(lambda w: jnp.histogram2d(a[:6], a[6:], 2, weights=w)[0], (w[:6],), 1)


def test_jit_and_vmap():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((3, 10)).astype(np.float32)
    fns = {
        "histogram": lambda v: jnp.histogram(v, 4, (-2.0, 2.0))[0],
        "histogram_auto_range": lambda v: jnp.histogram(v, 4)[0],
        "histogram_bin_edges": lambda v: jnp.histogram_bin_edges(v, 3),
        "digitize": lambda v: jnp.digitize(v, np.array([-1.0, 0.0, 1.0])),
        "histogram2d": lambda v: jnp.histogram2d(v[:5], v[5:], 2)[0],
        "histogramdd": lambda v: jnp.histogramdd(v.reshape(5, 2), 3)[0],
    }
    for name, fn in fns.items():
        eager = np.stack([np.asarray(fn(row)) for row in a])
        np.testing.assert_allclose(np.asarray(plax.vmap(fn)(a)), eager, rtol=1e-6, err_msg=name)
        np.testing.assert_allclose(np.asarray(plax.jit(fn)(a[0])), eager[0], rtol=1e-6,
                                   err_msg=name)
