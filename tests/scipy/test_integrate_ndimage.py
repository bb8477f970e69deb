"""plax.scipy.integrate.trapezoid and plax.scipy.ndimage.map_coordinates against SciPy in
float64 (map_coordinates against SciPy's grid-modes, which are JAX's), gradients, jit, vmap."""
import numpy as np
import pytest
import scipy.integrate as si
import scipy.ndimage as snd

import plax
import plax.numpy as jnp
from plax.scipy.integrate import trapezoid
from plax.scipy.ndimage import map_coordinates
from plax.test_util import check_grads


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


R = np.random.default_rng(0)


def test_trapezoid_values():
    y = R.normal(size=(4, 6))
    x1 = np.sort(R.normal(size=6))
    xn = np.sort(R.normal(size=(4, 6)), axis=1)
    np.testing.assert_allclose(trapezoid(y), si.trapezoid(y), rtol=1e-13)
    np.testing.assert_allclose(trapezoid(y, x1), si.trapezoid(y, x1), rtol=1e-13)
    np.testing.assert_allclose(trapezoid(y, xn), si.trapezoid(y, xn), rtol=1e-13)
    np.testing.assert_allclose(trapezoid(y, dx=0.3, axis=0), si.trapezoid(y, dx=0.3, axis=0),
                               rtol=1e-13)
    np.testing.assert_allclose(trapezoid(y.T, x1, axis=0), si.trapezoid(y.T, x1, axis=0),
                               rtol=1e-13)
    assert trapezoid(np.arange(5)).dtype == np.float64
    assert float(trapezoid(np.arange(5))) == 8.0
    with plax.config.override("jax_enable_x64", False):
        assert trapezoid(np.ones(3, np.int32)).dtype == np.float32


def test_trapezoid_transforms():
    y, x = R.normal(size=(3, 5)), np.sort(R.normal(size=5))
    check_grads(lambda y, x: trapezoid(y, x), (y, x), order=2)
    np.testing.assert_allclose(plax.vmap(lambda r: trapezoid(r, x))(y), si.trapezoid(y, x),
                               rtol=1e-13)
    np.testing.assert_allclose(plax.jit(trapezoid)(y), si.trapezoid(y), rtol=1e-13)
    with pytest.raises(ValueError, match="points"):
        trapezoid(y, np.ones(4))


SCIPY_MODE = {"constant": "grid-constant", "nearest": "nearest", "wrap": "grid-wrap",
              "mirror": "mirror", "reflect": "reflect"}


@pytest.mark.parametrize("mode", sorted(SCIPY_MODE))
@pytest.mark.parametrize("order", [0, 1])
def test_map_coordinates_against_scipy(mode, order):
    img = R.normal(size=(5, 7))
    coords = [R.uniform(-6, 10, size=(3, 4)), R.uniform(-6, 12, size=(3, 4))]
    if order == 0:  # keep clear of .5 ties, where SciPy rounds differently
        coords = [np.round(c) + R.uniform(-0.4, 0.4, size=c.shape) for c in coords]
    out = map_coordinates(img, coords, order, mode=mode, cval=1.5)
    ref = snd.map_coordinates(img, coords, order=order, mode=SCIPY_MODE[mode], cval=1.5)
    assert out.shape == (3, 4) and out.dtype == np.float64
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-13)


def test_map_coordinates_3d_int_and_ties():
    vol = R.normal(size=(3, 4, 5))
    coords = [R.uniform(0, 2, 6), R.uniform(0, 3, 6), R.uniform(0, 4, 6)]
    np.testing.assert_allclose(map_coordinates(vol, coords, 1),
                               snd.map_coordinates(vol, coords, order=1), rtol=1e-12)
    img = np.arange(12).reshape(3, 4)
    out = map_coordinates(img, [np.array([0.5, 1.25]), np.array([1.5, 2.5])], 1)
    assert out.dtype == img.dtype
    np.testing.assert_array_equal(out, [4, 8])  # 3.5 -> 4 and 7.75 -> 8: halves away from 0
    # order 0 rounds halves away from zero, as JAX does
    out0 = map_coordinates(np.arange(5.0), [np.array([0.5, 1.5, 2.5, -0.5])], 0, mode="nearest")
    np.testing.assert_array_equal(out0, [1.0, 2.0, 3.0, 0.0])


def test_map_coordinates_transforms():
    img = R.normal(size=(4, 5))
    c = [R.uniform(0.1, 2.9, 3), R.uniform(0.1, 3.9, 3)]
    check_grads(lambda im, a, b: map_coordinates(im, [a, b], 1, mode="nearest"),
                (img, c[0], c[1]), order=1)
    f = lambda a: map_coordinates(img, [a, jnp.full_like(a, 1.3)], 1)
    xs = R.uniform(0, 3, size=(2, 4))
    np.testing.assert_allclose(plax.vmap(f)(xs), np.stack([np.asarray(f(x)) for x in xs]))
    np.testing.assert_allclose(plax.jit(f)(xs[0]), f(xs[0]))


def test_map_coordinates_bad_input():
    with pytest.raises(ValueError, match="length input.ndim"):
        map_coordinates(np.ones((2, 2)), [np.zeros(3)], 1)
    with pytest.raises(NotImplementedError, match="order"):
        map_coordinates(np.ones(3), [np.zeros(3)], 3)
    with pytest.raises(NotImplementedError, match="mode"):
        map_coordinates(np.ones(3), [np.zeros(3)], 1, mode="grid-mirror")
