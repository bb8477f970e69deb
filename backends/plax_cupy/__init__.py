"""plax_cupy: the CuPy GPU backend.

One :class:`plax.device.CudaDevice` per GPU (platform ``"gpu"``, ``str`` ``cuda:0``,
``device_kind`` the GPU's name), the default platform where present. Buffers are CuPy arrays;
eager operations and ``jit`` programs run on the device's stream. ``jit`` compiles jaxprs
through :mod:`plax.lowering`: the shared fusion pass's clusters become generated CUDA kernels
(:mod:`plax_cupy.codegen`), ``dot_general`` runs on cuBLAS, linear algebra and FFTs on
cuSOLVER and cuFFT (through CuPy), control flow as host loops over compiled bodies, and
``threefry2x32`` as a CUDA kernel bit-identical to the CPU backends.

Importing this package imports nothing heavy: CuPy is imported by the plugin hook only where it
is installed (:mod:`plax_cupy.runtime`), and :mod:`plax_cupy.codegen` (kernel sources) never
imports it. Host copies and kernel launches are counted: :func:`counters` (totals) and
:class:`count` (a block's deltas). See docs/gpu.md.
"""
from __future__ import annotations

from plax_cupy.runtime import Counters, count, counters, fallback_primitives

__all__ = ["Counters", "count", "counters", "fallback_primitives", "status"]


def status() -> str:
    """One line: the GPUs the backend drives, or why it reports none.

    Example:
      >>> import plax_cupy
      >>> plax_cupy.status()   # doctest: +SKIP
      'plax_cupy: no devices: no CUDA GPU present (CUDARuntimeError: cudaErrorInsufficientDriver: ...)'
    """
    from plax_cupy.runtime import probe
    gpus, reason = probe()
    if not gpus:
        return f"plax_cupy: no devices: {reason}"
    return "plax_cupy: " + ", ".join(f"cuda:{g.id} ({g.name})" for g in gpus)
