"""The ``fft`` primitive's GPU kernel (``plax_cupy.kernels_fft``) on the simulated GPU against
the NumPy backend's: the four transforms, ranks 1 to 3, batched, every dtype they take, odd and
empty lengths (run by test_kernels_b_simulated.py)."""
from __future__ import annotations

import numpy as np
import pytest

from plax.lax.fft import FftType, fft_p
from test_kernels_a_simulated import on_a_gpu
from test_kernels_b_simulated import close

pytestmark = on_a_gpu

COMPLEX = [np.complex64, np.complex128]
REAL = [np.float32, np.float64]
ids = lambda d: np.dtype(d).name  # noqa: E731


def data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", COMPLEX, ids=ids)
@pytest.mark.parametrize("fft_type", [FftType.FFT, FftType.IFFT], ids=lambda t: t.name)
@pytest.mark.parametrize("lengths", [(8,), (5,), (4, 6), (3, 4, 5)], ids=str)
def test_complex_transforms(dtype, fft_type, lengths):
    close(fft_p, data((2,) + lengths, dtype), fft_type=fft_type, fft_lengths=lengths, scale=10)
    close(fft_p, data(lengths, dtype), fft_type=fft_type, fft_lengths=lengths, scale=10)


@pytest.mark.parametrize("dtype", REAL, ids=ids)
@pytest.mark.parametrize("lengths", [(8,), (7,), (4, 6), (3, 4, 5)], ids=str)
def test_real_transforms_and_their_inverse(dtype, lengths):
    x = data((3,) + lengths, dtype)
    spectrum = close(fft_p, x, fft_type=FftType.RFFT, fft_lengths=lengths, scale=10)
    assert spectrum.dtype == np.result_type(dtype, np.complex64)
    back = close(fft_p, spectrum, fft_type=FftType.IRFFT, fft_lengths=lengths, scale=10)
    assert back.dtype == np.dtype(dtype)
    np.testing.assert_allclose(back, x, rtol=1e-4, atol=1e-4)
    # a half spectrum not produced by RFFT (imaginary DC and Nyquist parts are dropped)
    half = data((3,) + lengths[:-1] + (lengths[-1] // 2 + 1,), np.result_type(dtype, np.complex64), 1)
    close(fft_p, half, fft_type=FftType.IRFFT, fft_lengths=lengths, scale=10)


def test_empty_transforms():
    close(fft_p, np.zeros((0, 4), np.complex64), fft_type=FftType.FFT, fft_lengths=(4,))
    close(fft_p, np.zeros((2, 0), np.float32), fft_type=FftType.RFFT, fft_lengths=(0,))
    close(fft_p, np.zeros((0, 3), np.complex128), fft_type=FftType.IRFFT, fft_lengths=(4,))
