"""plax.scipy.fft (dct/idct/dctn/idctn of type 2), plax.scipy.cluster.vq.vq and
plax.scipy.signal.detrend against SciPy in float64."""
import numpy as np
import pytest
import scipy.cluster.vq as svq
import scipy.fft as sfft
import scipy.signal as ssig

import plax
import plax.numpy as jnp
from plax import scipy as psp
from plax.test_util import check_grads

R = np.random.default_rng(5)


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


def _close(a, b, rtol=1e-12, atol=1e-12):
    np.testing.assert_allclose(np.asarray(a), b, rtol=rtol, atol=atol)


@pytest.mark.parametrize("norm", [None, "backward", "ortho", "forward"])
def test_dct_idct(norm):
    for n in (1, 2, 5, 8):
        x = R.standard_normal((3, n))
        _close(psp.fft.dct(x, norm=norm), sfft.dct(x, norm=norm))
        _close(psp.fft.idct(x, norm=norm), sfft.idct(x, norm=norm))
        _close(psp.fft.idct(psp.fft.dct(x, norm=norm), norm=norm), x)
    x = R.standard_normal((4, 6, 5))
    _close(psp.fft.dct(x, n=9, axis=1, norm=norm), sfft.dct(x, n=9, axis=1, norm=norm))
    _close(psp.fft.dct(x, n=3, axis=0, norm=norm), sfft.dct(x, n=3, axis=0, norm=norm))
    _close(psp.fft.dctn(x, norm=norm), sfft.dctn(x, norm=norm), atol=1e-11)
    _close(psp.fft.idctn(x, s=(3, 7), axes=(0, 2), norm=norm),
           sfft.idctn(x, s=(3, 7), axes=(0, 2), norm=norm))


def test_dct_types_transforms_and_errors():
    with pytest.raises(NotImplementedError, match="type 2"):
        psp.fft.dct(jnp.ones(3), type=1)
    with pytest.raises(ValueError, match="norm"):
        psp.fft.dct(jnp.ones(3), norm="bad")
    with plax.config.override("jax_enable_x64", False):
        assert psp.fft.dct(np.arange(4)).dtype == np.float32
    x = R.standard_normal((4, 8))
    _close(plax.jit(psp.fft.dct)(x), sfft.dct(x), atol=1e-11)
    _close(plax.vmap(psp.fft.idct)(x), sfft.idct(x), atol=1e-12)
    check_grads(lambda v: jnp.sum(psp.fft.dct(v, norm="ortho") ** 3), (x[0],), order=1)


def test_vq():
    obs = R.standard_normal((20, 3))
    book = R.standard_normal((4, 3))
    codes, dists = psp.cluster.vq.vq(obs, book)
    want_codes, want_dists = svq.vq(obs, book)
    np.testing.assert_array_equal(codes, want_codes)
    assert codes.dtype == np.int32
    _close(dists, want_dists, rtol=1e-12)
    codes, dists = psp.cluster.vq.vq(obs[:, 0], book[:, 0])
    want_codes, want_dists = svq.vq(obs[:, 0], book[:, 0])
    np.testing.assert_array_equal(codes, want_codes)
    _close(dists, want_dists)
    with pytest.raises(ValueError, match="features"):
        psp.cluster.vq.vq(obs, book[:, :2])


def test_detrend():
    x = R.standard_normal((3, 17)) + np.linspace(0, 5, 17)
    for kind in ("linear", "constant"):
        _close(psp.signal.detrend(x, type=kind), ssig.detrend(x, type=kind), atol=1e-12)
        _close(psp.signal.detrend(x, axis=0, type=kind), ssig.detrend(x, axis=0, type=kind),
               atol=1e-12)
    _close(psp.signal.detrend(x, bp=[5, 11]), ssig.detrend(x, bp=[5, 11]), atol=1e-12)
    with pytest.raises(ValueError, match="trend type"):
        psp.signal.detrend(x, type="quadratic")
    check_grads(lambda v: jnp.sum(psp.signal.detrend(v) ** 2), (x[0],), order=1)
