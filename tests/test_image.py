"""``jax.image``: ``resize`` and ``scale_and_translate`` for every method, against hand-derived
values and a float64 NumPy reference, and beside JAX 0.10.2 where installed."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import image

_METHODS = ["nearest", "linear", "lanczos3", "lanczos5", "cubic", "cubic-pytorch", "area"]


def _img():
    return np.random.default_rng(0).standard_normal((2, 7, 9, 3)).astype(np.float32)


def test_linear_values_derived_by_hand():
    np.testing.assert_allclose(image.resize(jnp.array([0.0, 1.0]), (4,), "linear"),
                               [0.0, 0.25, 0.75, 1.0])
    # downsampling 4 -> 2 with the antialiasing triangle stretched 2x: output centres at
    # input coordinates 0.5 and 2.5, weights (3, 3, 1, 0) / 7 and (0, 1, 3, 3) / 7
    np.testing.assert_allclose(image.resize(jnp.array([0.0, 1.0, 2.0, 3.0]), (2,), "linear"),
                               [(0 + 3 + 2) / 7, (1 + 6 + 9) / 7], rtol=1e-6)
    np.testing.assert_allclose(image.resize(jnp.array([0.0, 1.0, 2.0, 3.0]), (2,), "linear",
                                            antialias=False), [0.5, 2.5])
    np.testing.assert_allclose(image.resize(jnp.array([0.0, 1.0, 2.0, 3.0]), (2,), "area"),
                               [0.5, 2.5])


def test_nearest_picks_floor_of_the_centre():
    x = jnp.arange(5)
    np.testing.assert_array_equal(image.resize(x, (3,), "nearest"), [0, 2, 4])
    np.testing.assert_array_equal(image.resize(x, (8,), "nearest"),
                                  np.floor((np.arange(8) + 0.5) * 5 / 8).astype(int))
    assert image.resize(x, (3,), "nearest").dtype == np.int32


@pytest.mark.parametrize("method", _METHODS)
def test_constant_images_stay_constant_and_same_shape_is_identity(method):
    x = jnp.full((6, 5), 3.0)
    for shape in [(11, 4), (3, 9)]:
        np.testing.assert_allclose(image.resize(x, shape, method), np.full(shape, 3.0),
                                   rtol=1e-5)
    y = jnp.asarray(_img())
    np.testing.assert_array_equal(image.resize(y, y.shape, method), y)


def _reference_matrix(m, n, method, antialias):
    """A float64 NumPy weight matrix, for linear and area resizing."""
    scale = n / m
    ks = max(1 / scale, 1.0) if antialias else 1.0
    centres = (np.arange(n) + 0.5) / scale - 0.5
    if method == "linear":
        w = np.maximum(0, 1 - np.abs(centres[None, :] - np.arange(m)[:, None]) / ks)
    else:
        left, right = np.arange(n) / scale, (np.arange(n) + 1) / scale
        w = np.maximum(0, np.minimum(right[None, :], np.arange(m)[:, None] + 1)
                       - np.maximum(left[None, :], np.arange(m)[:, None]))
    w = w / w.sum(axis=0, keepdims=True)
    w[:, (centres < -0.5) | (centres > m - 0.5)] = 0
    return w


@pytest.mark.parametrize("method", ["linear", "area"])
@pytest.mark.parametrize("antialias", [True, False])
def test_against_a_float64_reference(method, antialias):
    x = _img()[0, :, :, 0].astype(np.float64)
    for shape in [(14, 18), (3, 4), (7, 5)]:
        want = x
        for d, n in enumerate(shape):
            if n != x.shape[d]:
                w = _reference_matrix(x.shape[d], n, method, antialias)
                want = np.moveaxis(np.tensordot(np.moveaxis(want, d, -1), w, 1), -1, d)
        got = image.resize(jnp.asarray(x, np.float32), shape, method, antialias=antialias)
        np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-5, atol=1e-5)


def test_scale_and_translate_shifts_by_the_translation():
    out = image.scale_and_translate(jnp.arange(4.0), (4,), (0,), jnp.array([1.0]),
                                    jnp.array([1.0]), "linear")
    np.testing.assert_allclose(out, [0.0, 0.0, 1.0, 2.0])
    f = plax.jit(lambda s: image.scale_and_translate(jnp.arange(4.0), (8,), (0,), s,
                                                     jnp.array([0.0]), "linear"))
    np.testing.assert_allclose(f(jnp.array([2.0])), image.resize(jnp.arange(4.0), (8,),
                                                                 "linear"), rtol=1e-6)


def test_gradient_matches_finite_differences():
    x = np.array([0.3, -1.0, 2.0, 0.5], np.float64)
    f = plax.jit(lambda v: jnp.sum(image.resize(v, (7,), "cubic") ** 2))
    g = np.asarray(plax.grad(f)(jnp.asarray(x, np.float32)), np.float64)
    eps = 1e-3
    fd = [(float(f(jnp.asarray(x + eps * e, np.float32))) - float(f(jnp.asarray(
        x - eps * e, np.float32)))) / (2 * eps) for e in np.eye(4)]
    np.testing.assert_allclose(g, fd, rtol=2e-3, atol=2e-3)


def test_errors():
    with pytest.raises(ValueError, match="shape must have length equal"):
        image.resize(jnp.ones((2, 2)), (4,), "linear")
    with pytest.raises(ValueError, match='Unknown resize method "bogus"'):
        image.resize(jnp.ones(2), (4,), "bogus")
    with pytest.raises(ValueError, match="Nearest neighbor resampling is not currently"):
        image.scale_and_translate(jnp.ones(2), (4,), (0,), jnp.ones(1), jnp.zeros(1),
                                  "nearest")
    assert image.ResizeMethod.from_string("bicubic") is image.ResizeMethod.CUBIC


@pytest.mark.parametrize("method", _METHODS)
def test_resize_beside_jax(method):
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    import jax.image  # noqa: F401
    x = _img()
    # one call up- and downsampling at once (each JAX call compiles); cubic-pytorch without
    # the filter too (its edge-padding path)
    cases = [((1, 10, 5, 3), True)] + ([((1, 10, 5, 3), False)]
                                       if method == "cubic-pytorch" else [])
    for shape, antialias in cases:
        ours = np.asarray(image.resize(x, shape, method, antialias=antialias))
        theirs = np.asarray(jax.image.resize(x, shape, method, antialias=antialias))
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("method", ["linear", "cubic-pytorch", "area"])
def test_scale_and_translate_beside_jax(method):
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    import jax.image  # noqa: F401
    x = _img()
    s, t = np.array([1.7, 0.6], np.float32), np.array([0.5, -1.2], np.float32)
    for antialias in ((True, False) if method == "cubic-pytorch" else (True,)):
        ours = image.scale_and_translate(x, (2, 9, 6, 3), (1, 2), s, t, method,
                                         antialias=antialias)
        # compiled once (JAX runs it op by op otherwise, compiling each op: seconds)
        theirs = jax.jit(jax.image.scale_and_translate, static_argnums=(1, 2, 5, 6))(
            x, (2, 9, 6, 3), (1, 2), s, t, method, antialias)
        np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-5, atol=1e-5)
