"""plax.scipy.signal against scipy.signal in float64: every mode and method, real and complex,
swapped operand sizes, gradients, jit and vmap."""
import numpy as np
import pytest
import scipy.signal as ss

import plax
import plax.numpy as jnp
from plax.scipy import signal as ps
from plax.test_util import check_grads


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


R = np.random.default_rng(0)
SHAPES = [((7,), (3,)), ((3,), (7,)), ((5,), (5,)), ((5, 6), (2, 3)), ((2, 3), (5, 6)),
          ((4, 4), (4, 4)), ((4, 5, 3), (2, 2, 2))]
MODES = ["full", "same", "valid"]


def _data(shape, complex_):
    x = R.normal(size=shape)
    return x + 1j * R.normal(size=shape) if complex_ else x


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a), b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("s1,s2", SHAPES)
@pytest.mark.parametrize("complex_", [False, True])
def test_nd_against_scipy(s1, s2, complex_):
    a, b = _data(s1, complex_), _data(s2, complex_)
    for mode in MODES:
        for method in ["auto", "direct", "fft"]:
            _close(ps.convolve(a, b, mode=mode, method=method), ss.convolve(a, b, mode=mode))
            _close(ps.correlate(a, b, mode=mode, method=method), ss.correlate(a, b, mode=mode))
        _close(ps.fftconvolve(a, b, mode=mode), ss.fftconvolve(a, b, mode=mode))
        if len(s1) == 2:
            _close(ps.convolve2d(a, b, mode=mode), ss.convolve2d(a, b, mode=mode))
            _close(ps.correlate2d(a, b, mode=mode), ss.correlate2d(a, b, mode=mode))


def test_fftconvolve_axes_and_singletons():
    a, b = R.normal(size=(3, 8)), R.normal(size=(3, 4))
    _close(ps.fftconvolve(a, b, axes=1), ss.fftconvolve(a, b, axes=1))
    _close(ps.fftconvolve(a, b, mode="same", axes=[-1]), ss.fftconvolve(a, b, "same", axes=-1))
    _close(ps.fftconvolve(a[:, :1], b[:1, :1]), ss.fftconvolve(a[:, :1], b[:1, :1]))


def test_dtypes():
    out = ps.convolve(np.arange(4), np.arange(2))
    assert out.dtype == np.float64
    _close(out, ss.convolve(np.arange(4), np.arange(2)))
    with plax.config.override("jax_enable_x64", False):
        assert ps.convolve(np.ones(4, np.float32), np.ones(2, np.float32)).dtype == np.float32
        assert ps.fftconvolve(np.ones(4, np.int32), np.ones(2, np.int32)).dtype == np.float32
    assert ps.correlate(np.ones(4, complex), np.ones(2)).dtype == np.complex128


def test_grads():
    a, b = R.normal(size=(6,)), R.normal(size=(3,))
    for mode in MODES:
        check_grads(lambda x, y: ps.convolve(x, y, mode=mode), (a, b), order=2)
        check_grads(lambda x, y: ps.correlate(x, y, mode=mode, method="fft"), (a, b), order=1)
    check_grads(lambda x, y: ps.convolve2d(x, y, mode="same"),
                (R.normal(size=(4, 4)), R.normal(size=(2, 3))), order=1)


def test_jit_and_vmap():
    xs, k = R.normal(size=(3, 9)), R.normal(size=(4,))
    for fn in [ps.convolve, ps.correlate, ps.fftconvolve]:
        for mode in MODES:
            f = lambda x: fn(x, k, mode=mode)
            ref = np.stack([np.asarray(f(x)) for x in xs])
            _close(plax.vmap(f)(xs), ref)
            _close(plax.jit(f)(xs[0]), ref[0])
    f2 = lambda x: ps.correlate2d(x, jnp.ones((2, 2)), mode="valid")
    imgs = R.normal(size=(2, 4, 5))
    _close(plax.vmap(f2)(imgs), np.stack([np.asarray(f2(i)) for i in imgs]))


def test_bad_input():
    with pytest.raises(ValueError, match="mode"):
        ps.convolve(np.ones(3), np.ones(2), mode="bogus")
    with pytest.raises(ValueError, match="method"):
        ps.convolve(np.ones(3), np.ones(2), method="bogus")
    with pytest.raises(ValueError, match="dimensions"):
        ps.convolve(np.ones(3), np.ones((2, 2)))
    with pytest.raises(ValueError, match="at least as large"):
        ps.convolve(np.ones((3, 2)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="dimensionality"):
        ps.fftconvolve(np.ones(3), np.ones((2, 2)))
    with pytest.raises(ValueError, match="2-dimensional"):
        ps.convolve2d(np.ones(3), np.ones(2))
    with pytest.raises(NotImplementedError, match="boundary"):
        ps.correlate2d(np.ones((3, 3)), np.ones((2, 2)), boundary="wrap")
    with pytest.raises(ValueError, match="zero-size"):
        ps.convolve(np.ones(3), np.ones(0))
