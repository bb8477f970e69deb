"""Order statistics and correlations of plax.numpy (median, quantile/percentile and their NaN
variants with every method, nanargmax/nanargmin, nancumsum/nancumprod, cov, corrcoef): values
against NumPy in float64, dtypes against JAX's recording, gradients, jit and vmap."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import plax
import plax.numpy as jnp
from plax.test_util import check_grads
from jnp_extras_dtype_table import EXPRESSIONS, check_like_recorded, describe_plax

X64 = {"jax_enable_x64": True}
METHODS = ["linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf"]
SHAPES_AXES = [((7,), None), ((3, 4), 1), ((3, 4), 0), ((2, 3, 5), (0, 2)), ((2, 3, 5), None)]


def _x64():
    return plax.config.override("jax_enable_x64", True)


def _np_quantile(fn, x, q, axis, method, keepdims, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(x, q, axis=axis, method=method, keepdims=keepdims, **kw)


@pytest.mark.parametrize("expr", EXPRESSIONS["statistics"])
def test_dtype_weak_type_and_value_like_jax(expr):
    check_like_recorded(expr, describe_plax)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("shape,axis", SHAPES_AXES)
@pytest.mark.parametrize("keepdims", [False, True])
def test_quantile_against_numpy(method, shape, axis, keepdims):
    rng = np.random.default_rng(len(shape) * 7 + len(method))
    # distinct values and q away from ties keep 'nearest' (JAX rounds ties down) comparable
    x = rng.permutation(np.arange(np.prod(shape), dtype=np.float64)).reshape(shape) * 0.37
    q = np.array([0.0, 0.13, 0.61, 1.0])
    with _x64():
        for fn, ref in [(jnp.quantile, np.quantile), (jnp.nanquantile, np.nanquantile)]:
            got = fn(x, q, axis=axis, method=method, keepdims=keepdims)
            np.testing.assert_allclose(np.asarray(got), _np_quantile(
                ref, x, q, axis, method, keepdims), rtol=1e-12)
        got = jnp.percentile(x, 100 * q[1], axis=axis, method=method, keepdims=keepdims)
        np.testing.assert_allclose(np.asarray(got), _np_quantile(
            np.percentile, x, 100 * q[1], axis, method, keepdims), rtol=1e-12)


@pytest.mark.parametrize("method", METHODS)
def test_nan_handling_against_numpy(method):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6))
    x[0, 2] = x[2, :] = x[3, 1] = np.nan
    q = np.array([0.2, 0.5])
    with _x64():
        for fn, ref in [(jnp.nanquantile, np.nanquantile), (jnp.quantile, np.quantile)]:
            np.testing.assert_allclose(np.asarray(fn(x, q, axis=1, method=method)),
                                       _np_quantile(ref, x, q, 1, method, False), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(jnp.nanpercentile(x, 40, axis=1, method=method)),
                                   _np_quantile(np.nanpercentile, x, 40, 1, method, False),
                                   rtol=1e-12)


def test_median_and_nanmedian_against_numpy():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4, 5))
    with _x64():
        for axis in [None, 0, (1, 2)]:
            for keepdims in [False, True]:
                np.testing.assert_allclose(np.asarray(jnp.median(x, axis, keepdims=keepdims)),
                                           np.median(x, axis, keepdims=keepdims), rtol=1e-12)
        x[1, 1, :] = np.nan
        x[0, 2, 3] = np.nan
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            np.testing.assert_allclose(np.asarray(jnp.nanmedian(x, 2)), np.nanmedian(x, 2))
            np.testing.assert_allclose(np.asarray(jnp.median(x, 2)), np.median(x, 2))


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.float16, np.float32])
def test_quantile_integer_and_low_precision_inputs(dtype):
    x = np.array([5, 1, 7, 3, 9, 2], dtype)
    out = jnp.quantile(x, 0.3)
    np.testing.assert_allclose(float(out), np.quantile(x.astype(np.float64), 0.3), rtol=2e-3)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=1, max_size=12),
       st.floats(0, 1), st.sampled_from(["linear", "lower", "higher", "midpoint"]))
def test_quantile_hypothesis(values, q, method):
    x = np.array(values)
    with _x64():
        np.testing.assert_allclose(float(jnp.quantile(x, q, method=method)),
                                   np.quantile(x, q, method=method), rtol=1e-9, atol=1e-9)


def test_weighted_inverted_cdf_against_numpy():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 7))
    w = rng.uniform(0.1, 2.0, (3, 7))
    with _x64():
        for q in [0.0, 0.3, 0.5, 0.99]:
            got = jnp.quantile(x, q, axis=1, method="inverted_cdf", weights=w)
            exp = np.quantile(x, q, axis=1, method="inverted_cdf", weights=w)
            np.testing.assert_allclose(np.asarray(got), exp)
        got = jnp.quantile(x, 0.4, axis=1, method="inverted_cdf", weights=w[0])
        np.testing.assert_allclose(np.asarray(got), np.quantile(
            x, 0.4, axis=1, method="inverted_cdf", weights=np.broadcast_to(w[0], x.shape)))


def test_quantile_errors():
    x = np.arange(6.0)
    with pytest.raises(ValueError, match="method"):
        jnp.quantile(x, 0.5, method="bogus")
    with pytest.raises(ValueError, match="rank <= 1"):
        jnp.quantile(x, np.ones((2, 2)) * 0.5)
    with pytest.raises(ValueError, match="complex"):
        jnp.quantile(x.astype(np.complex64), 0.5)
    with pytest.raises(NotImplementedError, match="weights"):
        jnp.quantile(x, 0.5, weights=np.ones(6))
    with pytest.raises(ValueError, match="overwrite_input"):
        jnp.median(x, overwrite_input=True)
    with pytest.raises(TypeError):
        jnp.quantile([1.0, 2.0], 0.5)


def test_nanargmax_nanargmin_against_numpy():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 5))
    x[0, 1] = x[2, 3] = np.nan
    for axis in [None, 0, 1]:
        np.testing.assert_array_equal(np.asarray(jnp.nanargmax(x, axis)), np.nanargmax(x, axis))
        np.testing.assert_array_equal(np.asarray(jnp.nanargmin(x, axis)), np.nanargmin(x, axis))
    assert jnp.nanargmax(x, 1, keepdims=True).shape == (4, 1)
    x[1, :] = np.nan  # JAX: -1 for an all-NaN slice (NumPy raises)
    assert int(jnp.nanargmax(x, 1)[1]) == -1 and int(jnp.nanargmin(x, 1)[1]) == -1
    np.testing.assert_array_equal(np.asarray(jnp.nanargmax(np.array([3, 9, 2]))), 1)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_])
def test_nancumsum_nancumprod_against_numpy(dtype):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((3, 4)) * 2).astype(dtype)
    if dtype == np.float32:
        x[0, 1] = x[2, 2] = np.nan
    for axis in [None, 0, 1]:
        np.testing.assert_allclose(np.asarray(jnp.nancumsum(x, axis)), np.nancumsum(x, axis),
                                   rtol=1e-5)
        np.testing.assert_allclose(np.asarray(jnp.nancumprod(x, axis, dtype=np.float32)),
                                   np.nancumprod(x, axis, dtype=np.float32), rtol=1e-5)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy on zero degrees of freedom
@pytest.mark.parametrize("kw", [{}, {"rowvar": False}, {"bias": True}, {"ddof": 3},
                                {"fweights": "f"}, {"aweights": "a"},
                                {"fweights": "f", "aweights": "a", "ddof": 2}])
@pytest.mark.parametrize("shape", [(7,), (3, 7), (1, 7)])
def test_cov_against_numpy(kw, shape):
    rng = np.random.default_rng(8)
    m = rng.standard_normal(shape)
    n_obs = shape[-1] if kw.get("rowvar", True) else shape[0]
    if len(shape) == 1:
        n_obs = shape[0]
    kw = dict(kw)
    if kw.get("fweights") == "f":
        kw["fweights"] = rng.integers(1, 4, n_obs)
    if kw.get("aweights") == "a":
        kw["aweights"] = rng.uniform(0.2, 2, n_obs)
    with _x64():
        np.testing.assert_allclose(np.asarray(jnp.cov(m, **kw)), np.cov(m, **kw), rtol=1e-10)
        if shape == (1, 7) and kw.get("rowvar") is False:
            return  # a one-row y is never transposed (JAX and NumPy): shapes do not match
        y = rng.standard_normal(shape)
        np.testing.assert_allclose(np.asarray(jnp.cov(m, y, **kw)), np.cov(m, y, **kw),
                                   rtol=1e-10)


def test_cov_complex_and_corrcoef_against_numpy():
    rng = np.random.default_rng(9)
    z = rng.standard_normal((3, 6)) + 1j * rng.standard_normal((3, 6))
    m = rng.standard_normal((3, 6))
    with _x64():
        np.testing.assert_allclose(np.asarray(jnp.cov(z)), np.cov(z), rtol=1e-10)
        np.testing.assert_allclose(np.asarray(jnp.corrcoef(m)), np.corrcoef(m), rtol=1e-10)
        np.testing.assert_allclose(np.asarray(jnp.corrcoef(m, m[::-1], rowvar=False)),
                                   np.corrcoef(m, m[::-1], rowvar=False), rtol=1e-10)
        np.testing.assert_allclose(np.asarray(jnp.corrcoef(z)), np.corrcoef(z), rtol=1e-10)
        np.testing.assert_allclose(float(jnp.corrcoef(m[0])), 1.0)


def test_gradients_against_finite_differences():
    rng = np.random.default_rng(10)
    x = jnp.asarray(rng.permutation(np.arange(12.0)).reshape(3, 4) * 0.3 + 0.05)
    with _x64():
        x = jnp.asarray(np.asarray(x, np.float64))
        check_grads(lambda a: jnp.quantile(a, 0.3, axis=1), (x,), 1)
        check_grads(lambda a: jnp.percentile(a, np.array([20.0, 70.0]), axis=0,
                                             method="midpoint"), (x,), 1)
        check_grads(lambda a: jnp.median(a, axis=1), (x,), 1)
        check_grads(lambda a: jnp.nanmedian(a), (x,), 1)
        check_grads(lambda a: jnp.nanquantile(a, 0.8), (x,), 1)
        check_grads(lambda a: jnp.nancumsum(a, 1), (x,), 1)
        check_grads(lambda a: jnp.nancumprod(a, 0), (x,), 1)
        check_grads(lambda a: jnp.cov(a), (x,), 2)
        check_grads(lambda a: jnp.corrcoef(a, rowvar=False), (x,), 1)


def test_jit_and_vmap():
    rng = np.random.default_rng(11)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    x[1, 2] = np.nan
    fns = {
        "quantile": lambda a: jnp.quantile(a, np.array([0.25, 0.5]), method="nearest"),
        "nanpercentile": lambda a: jnp.nanpercentile(a, 30.0),
        "median": jnp.median, "nanmedian": jnp.nanmedian,
        "inverted_cdf": lambda a: jnp.nanquantile(a, 0.5, method="inverted_cdf"),
        "nanargmax": jnp.nanargmax, "nanargmin": jnp.nanargmin,
        "nancumsum": jnp.nancumsum, "nancumprod": jnp.nancumprod,
        "cov": lambda a: jnp.cov(a.reshape(2, 3)), "corrcoef": lambda a: jnp.corrcoef(a[:4])}
    for name, fn in fns.items():
        eager = np.stack([np.asarray(fn(row)) for row in x])
        np.testing.assert_allclose(np.asarray(plax.vmap(fn)(x)), eager, rtol=1e-5,
                                   err_msg=name)
        np.testing.assert_allclose(np.asarray(plax.jit(fn)(x[0])), eager[0], rtol=1e-5,
                                   err_msg=name)
