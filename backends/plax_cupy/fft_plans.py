"""cuFFT plans that a compiled program owns, so that a CUDA graph of the program can replay its
transforms.

``cupy.fft`` takes its plan from CuPy's plan cache (``cupy/fft/_cache.pyx``: an LRU of 16 plans
per thread and device): a 17th transform anywhere in the process evicts the least recently used
plan, and CuPy's cache holds its only reference, so the plan is destroyed (``cufftDestroy``) and
its work area goes back to the pool -- while a graph that captured a transform through it still
reads both on every replay. A compiled program therefore makes its own plans:

* one :class:`OwnedPlan` per ``fft`` equation and operand signature (shape, dtype, device),
  made on the program's first call, which runs plainly (never while the stream captures:
  ``cufftMakePlanMany`` allocates and uploads the plan's tables with synchronous calls);
* a ``cupy.cuda.cufft.PlanNd`` made directly (not through ``get_fft_plan``, which hands back a
  cached plan when CuPy has one, shared with every eager transform of that shape): CuPy's plans
  run with cuFFT's auto-allocation off and take their work area from CuPy's allocator
  (``memory.alloc`` in ``PlanNd.__init__``), once, kept by the plan;
* held by the program's equation kernel for the program's lifetime, beside the graphs that
  read it (:class:`plax_cupy.graphs.GraphedProgram` holds both).

Executing one is ``PlanNd.fft``: ``cufftSetStream`` to the current stream then ``cufftExec*``,
which CuPy's binding does not refuse under capture (``cupy/cuda/cufft.pyx``: no capture check,
unlike its cuBLAS binding) and cuFFT allows for single-GPU plans without callbacks (the cuFFT
guide, "CUDA Graphs Support"); it allocates nothing at execution (the work area is the plan's).
The operand is made C-contiguous first where it is not, and copied for ``IRFFT`` (cuFFT's
complex-to-real transforms may overwrite their input); the inverse transforms are scaled after
the exec, as ``cupy.fft`` does.
"""
from __future__ import annotations

import dataclasses
import math
import threading

import numpy as np

from plax.lax.fft import FftType, fft_result_shape_dtype

#: (transform, operand dtype) -> cuFFT's type name in ``cupy.cuda.cufft``
CUFFT_TYPES = {
    (FftType.FFT, "complex64"): "CUFFT_C2C", (FftType.FFT, "complex128"): "CUFFT_Z2Z",
    (FftType.IFFT, "complex64"): "CUFFT_C2C", (FftType.IFFT, "complex128"): "CUFFT_Z2Z",
    (FftType.RFFT, "float32"): "CUFFT_R2C", (FftType.RFFT, "float64"): "CUFFT_D2Z",
    (FftType.IRFFT, "complex64"): "CUFFT_C2R", (FftType.IRFFT, "complex128"): "CUFFT_Z2D",
}


@dataclasses.dataclass(frozen=True)
class PlanLayout:
    """A batch of transforms over the trailing axes of a C-contiguous array, as cuFFT's
    ``cufftMakePlanMany`` takes it (what ``cupy.fft._get_cufft_plan_nd`` computes for trailing
    axes of a C-ordered array).

    Attributes:
      lengths: the transform's lengths (``fft_lengths``): cuFFT's ``n``.
      batch: how many transforms (the product of the leading axes).
      in_dims, out_dims: the trailing dimensions of the operand and of the result (cuFFT's
        ``inembed``/``onembed``; each transform's distance is their product, its stride 1).
      cufft_type: the name of cuFFT's type in ``cupy.cuda.cufft`` (``"CUFFT_C2C"``...).
      inverse: whether it is ``IFFT``/``IRFFT`` (``CUFFT_INVERSE``, then scaled).
      out_shape, out_dtype: the result's (the primitive's abstract evaluation).
    """

    lengths: tuple
    batch: int
    in_dims: tuple
    out_dims: tuple
    cufft_type: str
    inverse: bool
    out_shape: tuple
    out_dtype: str

    @property
    def overwrites_input(self) -> bool:
        """Whether cuFFT may write into the operand (complex-to-real transforms)."""
        return self.cufft_type in ("CUFFT_C2R", "CUFFT_Z2D")

    @property
    def empty(self) -> bool:
        """Whether there is nothing to transform (cuFFT refuses empty plans)."""
        return self.batch == 0 or 0 in self.in_dims or 0 in self.out_shape

    def plan_arguments(self, cufft) -> tuple:
        """The arguments of ``cufft.PlanNd`` (the module ``cupy.cuda.cufft``) for this layout:
        ``shape, inembed, istride, idist, onembed, ostride, odist, fft_type, batch, order,
        last_axis, last_size``."""
        kind = self.cufft_type
        last_size = (None if kind in ("CUFFT_C2C", "CUFFT_Z2Z")
                     else self.out_dims[-1] if kind in ("CUFFT_R2C", "CUFFT_D2Z")
                     else self.lengths[-1])
        return (self.lengths, self.in_dims, 1, math.prod(self.in_dims), self.out_dims, 1,
                math.prod(self.out_dims), getattr(cufft, kind), self.batch, "C",
                len(self.out_shape) - 1, last_size)


def plan_layout(shape, dtype, fft_type, fft_lengths) -> PlanLayout:
    """The cuFFT layout of the ``fft`` primitive on an operand of ``shape`` and ``dtype``.

    Args:
      shape, dtype: the operand's.
      fft_type: a :class:`plax.lax.fft.FftType` (or its value).
      fft_lengths: the primitive's parameter (1 to 3 lengths).

    Returns:
      The :class:`PlanLayout`.

    Raises:
      TypeError: a dtype cuFFT has no transform of that type for (or the primitive refuses).

    Example:
      >>> plan_layout((4, 8), "complex64", FftType.FFT, (8,)).batch
      4
    """
    fft_type, lengths = FftType(fft_type), tuple(int(n) for n in fft_lengths)
    out_shape, out_dtype = fft_result_shape_dtype(shape, dtype, fft_type, lengths)
    name = CUFFT_TYPES.get((fft_type, np.dtype(dtype).name))
    if name is None:
        raise TypeError(f"cuFFT has no {fft_type.name} transform of {dtype} operands")
    k = len(lengths)
    return PlanLayout(lengths, math.prod(shape[:-k]), tuple(shape[-k:]), tuple(out_shape[-k:]),
                      name, fft_type in (FftType.IFFT, FftType.IRFFT), tuple(out_shape),
                      str(out_dtype))


class PlanCaptureError(RuntimeError):
    """A program's cuFFT plan would be made while its stream captures a CUDA graph (plans are
    made on the program's first, plain, call; the capture fails and the program runs plainly)."""


class OwnedPlan:
    """A cuFFT plan (``cupy.cuda.cufft.PlanNd``) of one layout, with its work area, owned by
    whoever holds this object (a compiled program's ``fft`` equation).

    Args:
      layout: the :class:`PlanLayout`; not :attr:`PlanLayout.empty`.

    Raises:
      PlanCaptureError: the current stream is capturing.

    Example:
      >>> plan = OwnedPlan(plan_layout(x.shape, x.dtype, FftType.FFT, (8,)))  # doctest: +SKIP
      >>> y = plan(x)                                                         # doctest: +SKIP
    """

    def __init__(self, layout: PlanLayout):
        import cupy
        from cupy.cuda import cufft
        if cupy.cuda.get_current_stream().is_capturing():
            raise PlanCaptureError(
                f"a cuFFT plan ({layout.cufft_type}, lengths {layout.lengths}, batch "
                f"{layout.batch}) would be made while the stream captures a CUDA graph")
        self.layout = layout
        self.direction = cufft.CUFFT_INVERSE if layout.inverse else cufft.CUFFT_FORWARD
        self.plan = cufft.PlanNd(*layout.plan_arguments(cufft))

    def __call__(self, x: "cupy.ndarray") -> "cupy.ndarray":
        """The transform of ``x`` (of the layout's shape and dtype), on the current stream."""
        import cupy
        layout = self.layout
        if layout.overwrites_input or not x.flags.c_contiguous:
            x = x.copy(order="C")
        out = cupy.empty(layout.out_shape, layout.out_dtype)
        self.plan.fft(x, out, self.direction)
        if layout.inverse:   # (as cupy.fft scales its inverse transforms)
            out /= math.prod(layout.lengths)
        return out


class ProgramPlans:
    """The plans of one ``fft`` equation of a compiled program, by operand signature: made on
    first use (outside any capture), kept for the program's lifetime.

    Args:
      fft_type, fft_lengths: the equation's parameters.
    """

    def __init__(self, fft_type, fft_lengths):
        self.fft_type, self.fft_lengths = FftType(fft_type), tuple(fft_lengths)
        self.plans: dict = {}
        self._lock = threading.Lock()

    def plan_for(self, x) -> tuple[PlanLayout, OwnedPlan | None]:
        """The layout of ``x`` and its plan (``None`` for an empty transform)."""
        key = (tuple(x.shape), str(x.dtype), x.device.id)
        found = self.plans.get(key)
        if found is None:
            with self._lock:   # (plain calls of a program may overlap: one plan a signature)
                found = self.plans.get(key)
                if found is None:
                    layout = plan_layout(x.shape, x.dtype, self.fft_type, self.fft_lengths)
                    found = self.plans[key] = (layout, None if layout.empty else OwnedPlan(layout))
        return found


__all__ = ["CUFFT_TYPES", "OwnedPlan", "PlanCaptureError", "PlanLayout", "ProgramPlans",
           "plan_layout"]
