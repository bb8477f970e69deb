"""GPU kernels of the ``fft`` primitive: cuFFT.

* **Eager** (:func:`fft`): the four transforms over the trailing ``len(fft_lengths)`` axes map
  onto ``cupy.fft.fftn``, ``ifftn``, ``rfftn`` and ``irfftn``, whose plans CuPy caches.
* **In a compiled program** (:class:`ProgramFft`, a program kernel): each ``fft`` equation
  owns its cuFFT plans (:mod:`plax_cupy.fft_plans`), made on the program's first call and held
  as long as the program, so the program replays as a CUDA graph (a plan from CuPy's cache may
  be destroyed by any later transform while a graph still reads it).

cuFFT transforms float32/complex64 in single precision and float64/complex128 in double, as
XLA does; the result has the primitive's dtype (``RFFT``: the complex type of the input,
``IRFFT``: the real type).
"""
from __future__ import annotations

import cupy

from plax.lax.fft import FftType, fft_p, fft_result_shape_dtype
from plax_cupy.fft_plans import ProgramPlans
from plax_cupy.kernels import kernel, program_kernel


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


@program_kernel(fft_p)
class ProgramFft:
    """The ``fft`` of one equation of a compiled program, on cuFFT plans it owns.

    Args:
      fft_type: a :class:`plax.lax.fft.FftType` (or its value).
      fft_lengths: the transform's lengths, one per trailing axis.

    Returns (when called on a device array): what :func:`fft` returns.

    Example:
      >>> run = ProgramFft(fft_type=FftType.FFT, fft_lengths=(4,))      # doctest: +SKIP
      >>> run(cupy.ones(4, np.complex64))                               # [4, 0, 0, 0]
    """

    def __init__(self, *, fft_type: FftType | int, fft_lengths: tuple[int, ...]):
        self.plans = ProgramPlans(fft_type, fft_lengths)

    def __call__(self, x: "cupy.ndarray") -> "cupy.ndarray":
        layout, plan = self.plans.plan_for(x)
        if plan is None:   # cuFFT rejects empty transforms; the result is empty
            return cupy.zeros(layout.out_shape, layout.out_dtype)
        return plan(x)
