"""GPU kernel of the ``fft`` primitive: cuFFT through ``cupy.fft``.

The four transforms over the trailing ``len(fft_lengths)`` axes map onto ``cupy.fft.fftn``,
``ifftn``, ``rfftn`` and ``irfftn`` (whose plans CuPy caches). cuFFT transforms
float32/complex64 in single precision and float64/complex128 in double, as XLA does; the
result has the primitive's dtype (``RFFT``: the complex type of the input, ``IRFFT``: the
real type).
"""
from __future__ import annotations

import cupy

from plax.lax.fft import FftType, fft_p, fft_result_shape_dtype
from plax_cupy.kernels import kernel


@kernel(fft_p)
def fft(x: "cupy.ndarray", *, fft_type: FftType | int,
        fft_lengths: tuple[int, ...]) -> "cupy.ndarray":
    """A discrete Fourier transform over the trailing axes of a device array (cuFFT).

    Args:
      x: device array; complex for ``FFT``/``IFFT``/``IRFFT``, float for ``RFFT``.
      fft_type: a :class:`plax.lax.fft.FftType` (or its value).
      fft_lengths: the transform's lengths, one per trailing axis.

    Returns:
      The transform, of the primitive's shape and dtype (``IFFT``/``IRFFT`` scaled by
      ``1 / prod(fft_lengths)``).

    Example:
      >>> fft(cupy.ones(4, np.complex64), fft_type=FftType.FFT, fft_lengths=(4,))  # [4, 0, 0, 0]
    """
    fft_type = FftType(fft_type)
    fft_lengths = tuple(fft_lengths)
    shape, out_dtype = fft_result_shape_dtype(x.shape, x.dtype, fft_type, fft_lengths)
    if 0 in shape or 0 in x.shape:  # cuFFT rejects empty transforms; the result is empty
        return cupy.zeros(shape, out_dtype)
    axes = tuple(range(x.ndim - len(fft_lengths), x.ndim))
    transform = {FftType.FFT: cupy.fft.fftn, FftType.IFFT: cupy.fft.ifftn,
                 FftType.RFFT: cupy.fft.rfftn, FftType.IRFFT: cupy.fft.irfftn}[fft_type]
    return transform(x, s=fft_lengths, axes=axes).astype(out_dtype, copy=False)
