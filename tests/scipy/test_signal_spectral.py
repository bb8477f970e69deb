"""plax.scipy.signal's spectral analysis (csd, welch, stft, istft) against SciPy in float64."""
import numpy as np
import pytest
import scipy.signal as ss

import plax
import plax.numpy as jnp
from plax.scipy import signal as ps
from plax.test_util import check_grads

R = np.random.default_rng(13)
X = R.standard_normal(100)
Y = R.standard_normal(100)


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


def _close(a, b, tol=1e-12):
    np.testing.assert_allclose(np.asarray(a), b, rtol=tol, atol=tol)


WELCH_KW = [dict(nperseg=16), dict(nperseg=16, noverlap=4, nfft=20, window="hamming"),
            dict(nperseg=15, scaling="spectrum", detrend="linear"),
            dict(nperseg=16, average="median"), dict(nperseg=16, return_onesided=False),
            dict(nperseg=16, window="blackman", detrend=False, fs=8.0),
            dict(nperseg=16, window=np.linspace(0.5, 1.0, 16))]


@pytest.mark.parametrize("kw", WELCH_KW, ids=[str(k) for k in range(len(WELCH_KW))])
def test_welch_and_csd(kw):
    f, p = ps.welch(X, **kw)
    f2, p2 = ss.welch(X, **kw)
    _close(f, f2)
    _close(p, p2)
    f, p = ps.csd(X, Y, **kw)
    f2, p2 = ss.csd(X, Y, **kw)
    _close(p, p2)
    # an even number of segments (the median's bias correction differs)
    _close(ps.welch(X[:88], **kw)[1], ss.welch(X[:88], **kw)[1])


def test_welch_axes_shapes_and_grads():
    x = R.standard_normal((3, 100))
    _close(ps.welch(x, nperseg=16)[1], ss.welch(x, nperseg=16)[1])
    _close(ps.welch(x.T, nperseg=16, axis=0)[1], ss.welch(x.T, nperseg=16, axis=0)[1])
    _close(ps.csd(x, X, nperseg=16)[1], ss.csd(x, X, nperseg=16)[1])
    z = X + 1j * Y
    _close(ps.welch(z, nperseg=16)[1], ss.welch(z, nperseg=16)[1])
    check_grads(lambda v: jnp.sum(ps.welch(v, nperseg=16)[1]), (X[:40],), order=1)
    with pytest.raises(ValueError, match="noverlap"):
        ps.welch(X, nperseg=16, noverlap=16)


STFT_KW = [dict(nperseg=16), dict(nperseg=16, noverlap=5, boundary="even"),
           dict(nperseg=15, padded=False, boundary=None),
           dict(nperseg=16, window="blackman", nfft=32), dict(nperseg=16, boundary="odd"),
           dict(nperseg=16, boundary="constant", return_onesided=False)]


@pytest.mark.parametrize("kw", STFT_KW, ids=[str(k) for k in range(len(STFT_KW))])
def test_stft_istft(kw):
    f, t, z = ps.stft(X, **kw)
    f2, t2, z2 = ss.stft(X, **kw)
    _close(f, f2)
    _close(t, t2)
    _close(z, z2)
    inv = {k: v for k, v in kw.items() if k in ("nperseg", "noverlap", "nfft", "window")}
    if kw.get("boundary", "zeros") is None:
        inv["boundary"] = False
    if kw.get("return_onesided") is False:
        inv["input_onesided"] = False
    with np.errstate(all="ignore"):
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t2, x2 = ss.istft(z2, **inv)
    t, x = ps.istft(z2, **inv)
    _close(t, t2)
    _close(np.real(np.asarray(x)), np.real(x2), 1e-11)
    if kw.get("boundary", "zeros") == "zeros" and "noverlap" not in kw:
        _close(np.real(np.asarray(x))[:100], X, 1e-11)   # the round trip


def test_stft_batched_axis():
    x = R.standard_normal((2, 64))
    _, _, z = ps.stft(x, nperseg=8)
    _, _, z2 = ss.stft(x, nperseg=8)
    _close(z, z2)
    _, _, z = ps.stft(x.T, nperseg=8, axis=0)
    _, _, z2 = ss.stft(x.T, nperseg=8, axis=0)
    assert z.shape == z2.shape
    _close(z, z2)
