"""plax.nn softmax, log_softmax, logsumexp, logmeanexp, standardize and one_hot: values against
NumPy float64, values and gradients against JAX's recorded answers, jit, vmap, errors."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import errors, nn

import nn_cases


def _np_lse(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis)


def _np_softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def _x(shape, seed=0):
    return 2 * np.random.default_rng(seed).standard_normal(shape)


CASES = [((5,), -1), ((3, 4), -1), ((3, 4), 0), ((2, 3, 4), (0, 2)), ((2, 3, 4), None),
         ((2, 3, 4), 1)]


@pytest.mark.parametrize("shape,axis", CASES)
def test_softmax_family_against_numpy(shape, axis):
    for width, rtol in (("float32", 2e-6), ("float64", 1e-13)):
        with plax.config.override("jax_enable_x64", width == "float64"):
            x = _x(shape, len(shape)).astype(width)
            xa = jnp.asarray(x)
            x64 = x.astype(np.float64)
            sm = nn.softmax(xa, axis=axis)
            assert sm.dtype == np.dtype(width)
            np.testing.assert_allclose(sm, _np_softmax(x64, axis), rtol=rtol, atol=rtol / 10)
            np.testing.assert_allclose(nn.log_softmax(xa, axis=axis),
                                       x64 - _np_lse(x64, axis, keepdims=True),
                                       rtol=rtol, atol=rtol)
            np.testing.assert_allclose(nn.logsumexp(xa, axis=axis), _np_lse(x64, axis),
                                       rtol=rtol, atol=rtol)
            np.testing.assert_allclose(nn.logmeanexp(xa, axis=axis),
                                       np.log(np.mean(np.exp(x64), axis=axis)),
                                       rtol=rtol, atol=rtol)


def test_softmax_is_stable_for_large_inputs_and_inf_gives_nan():
    x = jnp.array([1000.0, 1000.0, -1000.0])
    np.testing.assert_allclose(nn.softmax(x), [0.5, 0.5, 0.0])
    np.testing.assert_allclose(nn.log_softmax(x)[:2], [-np.log(2)] * 2, rtol=1e-6)
    assert np.isfinite(float(nn.logsumexp(x)))
    assert np.isnan(np.asarray(nn.softmax(jnp.array([np.inf, 1.0])))).all()


def test_softmax_where_masks_out_entries():
    x = _x((3, 5), 1).astype(np.float32)
    where = np.random.default_rng(2).standard_normal((3, 5)) > 0
    where[:, 0] = True
    got = np.asarray(nn.softmax(jnp.asarray(x), where=jnp.asarray(where)))
    ref = np.where(where, np.exp(x), 0)
    ref = ref / ref.sum(-1, keepdims=True)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)
    got = np.asarray(nn.log_softmax(jnp.asarray(x), where=jnp.asarray(where)))
    assert np.all(got[~where] == -np.inf)
    np.testing.assert_allclose(got[where], np.log(ref[where]), rtol=1e-5)


def test_logsumexp_with_b_and_sign():
    x = _x((4, 3), 3)
    b = np.array([1.0, -2.0, 0.5])
    with plax.config.override("jax_enable_x64", True):
        out, sign = nn.logsumexp(jnp.asarray(x), axis=1, b=jnp.asarray(b), return_sign=True)
        s = (np.exp(x) * b).sum(1)
        np.testing.assert_allclose(out, np.log(np.abs(s)), rtol=1e-13)
        np.testing.assert_array_equal(sign, np.sign(s))
        plain = np.asarray(nn.logsumexp(jnp.asarray(x), axis=1, b=jnp.asarray(b)))
        np.testing.assert_array_equal(np.isnan(plain), s < 0)
        kept = nn.logsumexp(jnp.asarray(x), axis=0, keepdims=True)
        assert kept.shape == (1, 3)


def test_standardize_against_numpy():
    x = _x((3, 6), 4)
    with plax.config.override("jax_enable_x64", True):
        for axis in (-1, 0, None, (0, 1)):
            for algorithm in ("fast", "stable"):
                got = nn.standardize(jnp.asarray(x), axis=axis, algorithm=algorithm)
                ref = (x - x.mean(axis, keepdims=True)) / np.sqrt(x.var(axis, keepdims=True)
                                                                  + 1e-5)
                np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
        got = nn.standardize(jnp.asarray(x), mean=1.0, variance=4.0, epsilon=0.0)
        np.testing.assert_allclose(got, (x - 1) / 2, rtol=1e-14)
    with pytest.raises(ValueError, match="Unknown algorithm"):
        nn.standardize(jnp.ones(3), algorithm="exact")


_REDUCTIONS = nn_cases.reductions(nn, jnp)


@pytest.mark.parametrize("width", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(_REDUCTIONS))
def test_values_and_gradients_equal_jax(name, width):
    fn, x = _REDUCTIONS[name]
    rec = nn_cases.answers()[f"reductions_{width}"][name]
    rtol, atol = (1e-5, 1e-6) if width == "float32" else (1e-12, 1e-13)
    with plax.config.override("jax_enable_x64", width == "float64"):
        xa = jnp.asarray(x.astype(width))
        value = fn(xa)
        assert str(value.dtype) == rec["dtype"] and list(value.shape) == rec["shape"]
        w = jnp.asarray(nn_cases.weights(value.shape).astype(width))
        grad = plax.grad(lambda t: jnp.sum(fn(t) * w))(xa)
    np.testing.assert_allclose(np.asarray(value, np.float64).ravel(),
                               nn_cases.floats(rec["value"]), rtol=rtol, atol=atol)
    np.testing.assert_allclose(np.asarray(grad, np.float64).ravel(),
                               nn_cases.floats(rec["grad"]), rtol=rtol, atol=atol)


def test_gradients_against_finite_differences():
    x = _x((3, 4), 5)
    with plax.config.override("jax_enable_x64", True):
        for fn in (lambda t: nn.softmax(t, axis=0), nn.log_softmax,
                   lambda t: nn.logsumexp(t, axis=1), nn.standardize,
                   lambda t: nn.logmeanexp(t, axis=0)):
            w = np.random.default_rng(6).standard_normal(fn(jnp.asarray(x)).shape)

            def scalar(t):
                return jnp.sum(fn(t) * w)

            g = np.asarray(plax.grad(scalar)(jnp.asarray(x)))
            fd = np.zeros_like(x)
            for idx in np.ndindex(x.shape):
                e = np.zeros_like(x)
                e[idx] = 1e-6
                fd[idx] = (float(scalar(jnp.asarray(x + e)))
                           - float(scalar(jnp.asarray(x - e)))) / 2e-6
            np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


def test_softmax_custom_rule_gives_finite_gradients_at_minus_inf():
    x = jnp.array([0.0, -np.inf, 1.0])
    g = plax.grad(lambda t: nn.softmax(t)[0])(x)
    assert np.isfinite(np.asarray(g)).all()
    assert float(g[1]) == 0.0


@pytest.mark.parametrize("fn", [nn.softmax, nn.log_softmax, nn.standardize,
                                lambda t: nn.logsumexp(t, axis=-1),
                                lambda t: nn.logmeanexp(t, axis=-1)])
def test_jit_and_vmap(fn):
    x = jnp.asarray(_x((4, 5), 7).astype(np.float32))
    eager = np.asarray(fn(x))
    np.testing.assert_allclose(np.asarray(plax.jit(fn)(x)), eager, rtol=1e-6, atol=1e-6)
    loop = np.stack([np.asarray(fn(x[i])) for i in range(4)])
    np.testing.assert_allclose(np.asarray(plax.vmap(fn)(x)), loop, rtol=1e-6, atol=1e-6)


def test_one_hot_values_axis_and_dtype():
    x = jnp.array([[0, 2], [5, -1]])
    got = nn.one_hot(x, 3)
    assert got.shape == (2, 2, 3) and got.dtype == np.float32
    np.testing.assert_array_equal(got, np.eye(3)[[[0, 2], [0, 0]]] * [[[1], [1]], [[0], [0]]])
    np.testing.assert_array_equal(nn.one_hot(x, 3, axis=0), np.moveaxis(np.asarray(got), -1, 0))
    np.testing.assert_array_equal(nn.one_hot(x, 3, axis=1), np.moveaxis(np.asarray(got), -1, 1))
    assert nn.one_hot(x, 3, dtype=jnp.int8).dtype == np.int8
    assert nn.one_hot(jnp.int32(1), 4).shape == (4,)
    np.testing.assert_array_equal(plax.jit(nn.one_hot, static_argnums=1)(x, 3), got)
    np.testing.assert_array_equal(plax.vmap(lambda r: nn.one_hot(r, 3))(x), got)
    with plax.config.override("jax_enable_x64", True):
        assert nn.one_hot(x, 3).dtype == np.float64


def test_one_hot_bad_input_like_jax():
    x = jnp.array([0, 1])
    with pytest.raises(TypeError):
        nn.one_hot(x, 3.0)
    with pytest.raises(TypeError):
        nn.one_hot(x, None)
    with pytest.raises(errors.ConcretizationTypeError, match="num_classes"):
        plax.jit(lambda n: nn.one_hot(x, n))(3)
    with pytest.raises(ValueError):
        nn.one_hot(x, 3, axis=3)
    with pytest.warns(DeprecationWarning, match="integer-typed"):
        np.testing.assert_array_equal(nn.one_hot(jnp.array([0.0, 1.0]), 2), np.eye(2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.one_hot(np.array([1, 0], np.uint8), 2)  # integers of any width: no warning


def test_lists_are_rejected():
    with pytest.raises(TypeError):
        nn.softmax([1.0, 2.0])
    with pytest.raises(TypeError):
        nn.standardize([1.0, 2.0])
