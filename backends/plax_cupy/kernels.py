"""The CuPy backend's kernel table: one device kernel per primitive.

Each primitive family has its module, as the NumPy backend has (``kernels_shape``,
``kernels_indexing``, ``kernels_reduction``, ``kernels_sort``, ``kernels_linalg``,
``kernels_fft``, ``kernels_convolution``, ``kernels_windows``, ``kernels_special``, ...). A
kernel takes device buffers (CuPy arrays, or :class:`plax_cupy.backend.Bf16Buffer` where the
module says it handles bfloat16 itself) and the primitive's parameters, and returns device
buffers of exactly the shape and dtype of the primitive's abstract evaluation (a list for
multi-result primitives). It calls CuPy (``cupy.*``, ``cupy.linalg``, ``cupy.fft``,
``cupyx.scipy.special``) or a generated kernel explicitly: never a NumPy function on device
arrays, and never the host. Only host callbacks run on the host.

The table is public (:func:`impls`), like ``plax_numpy.impls()``; a plugin that adds a
primitive registers its GPU kernel with ``CupyBackend.register_kernel``.

A family may also give a primitive a **program kernel** (:func:`program_kernel`): a factory
called once per equation of a compiled program with the equation's parameters, whose result
(``fn(*device_buffers)``) the program holds for its lifetime. It is for state that must live
exactly as long as the program and no longer than it, such as the cuFFT plans a CUDA graph of
the program reads on every replay (:mod:`plax_cupy.kernels_fft`); eager calls keep the table's
kernel.
"""
from __future__ import annotations

import importlib
from typing import Callable

#: the family modules, imported (filling :data:`KERNELS`) on the first :func:`impls` call
FAMILIES = (
    "plax_cupy.kernels_shape",
    "plax_cupy.kernels_indexing",
    "plax_cupy.kernels_reduction",
    "plax_cupy.kernels_sort",
    "plax_cupy.kernels_precision",
    "plax_cupy.kernels_random",
    "plax_cupy.kernels_dot",
    "plax_cupy.kernels_linalg",
    "plax_cupy.kernels_fft",
    "plax_cupy.kernels_convolution",
    "plax_cupy.kernels_windows",
    "plax_cupy.kernels_special",
    "plax_cupy.kernels_callbacks",
)

#: primitive -> ``fn(*device_buffers, **params)``
KERNELS: dict = {}
#: primitive -> ``factory(**params) -> fn(*device_buffers)``, one per equation of a program
PROGRAM_KERNELS: dict = {}

_loaded: list = []


def kernel(*primitives) -> Callable:
    """Registers the decorated function as the GPU kernel of ``primitives``.

    Example:
      >>> @kernel(lax.rev_p)
      ... def _rev(x, *, dimensions):
      ...     return cupy.flip(x, dimensions)
    """

    def register(fn: Callable) -> Callable:
        for p in primitives:
            KERNELS[p] = fn
        return fn

    return register


def program_kernel(*primitives) -> Callable:
    """Registers the decorated factory as the program kernel of ``primitives``: called once
    per equation of a compiled program, ``factory(**params)`` returns the ``fn(*buffers)`` that
    equation runs, held by the program for its lifetime (see the module).

    Example:
      >>> @program_kernel(fft_p)
      ... class ProgramFft:
      ...     def __init__(self, *, fft_type, fft_lengths): self.plans = {}
      ...     def __call__(self, x): ...
    """

    def register(factory: Callable) -> Callable:
        for p in primitives:
            PROGRAM_KERNELS[p] = factory
        return factory

    return register


def program_impls() -> dict:
    """The program kernels: primitive -> ``factory(**params)`` (see :func:`program_kernel`),
    every family loaded. Read-only."""
    impls()
    return PROGRAM_KERNELS


def impls() -> dict:
    """The GPU kernel table: primitive -> ``fn(*cupy_arrays, **params)``, every family loaded.

    Treat it as read-only; a plugin adds a kernel with ``CupyBackend.register_kernel``.
    Families whose module does not exist yet are skipped (their primitives have no GPU path,
    which ``tests/cupy`` lists).
    """
    if not _loaded:
        for name in FAMILIES:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as err:
                if err.name != name:
                    raise
        _loaded.append(True)
    return KERNELS


__all__ = ["FAMILIES", "KERNELS", "PROGRAM_KERNELS", "impls", "kernel", "program_impls",
           "program_kernel"]
