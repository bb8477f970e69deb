"""NumPy-backend implementation of the ``fft`` primitive, on ``scipy.fft``.

``scipy.fft`` (pocketfft with SIMD) transforms float32/complex64 in single precision, as XLA
does, and runs several times faster than ``numpy.fft``; the result is cast to the
primitive's output dtype either way, so the dtypes are JAX's.
"""
from __future__ import annotations

import numpy as np

from plax.lax.fft import FftType, fft_p, fft_result_shape_dtype
from plax_numpy.registry import impl

_SCIPY_NAME = {FftType.FFT: "fftn", FftType.IFFT: "ifftn", FftType.RFFT: "rfftn",
               FftType.IRFFT: "irfftn"}


@impl(fft_p, fresh=True)  # (scipy.fft never transforms in place here; empty: zeros)
def _fft(x, *, fft_type, fft_lengths):
    import scipy.fft  # imported on first use: keeps `import plax` light
    x = np.asarray(x)
    fft_type = FftType(fft_type)
    shape, out_dtype = fft_result_shape_dtype(x.shape, x.dtype, fft_type, fft_lengths)
    if 0 in shape or 0 in x.shape:  # pocketfft rejects empty transforms; the result is empty
        return np.zeros(shape, out_dtype)
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    out = getattr(scipy.fft, _SCIPY_NAME[fft_type])(x, s=fft_lengths, axes=axes)
    return np.asarray(out, dtype=out_dtype)
