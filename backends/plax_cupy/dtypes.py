"""The dtype map of the CUDA code generator: which NumPy dtypes fused kernels handle, as which
CUDA C types, and how reductions accumulate them.

Fused kernels handle booleans, the signed and unsigned integers of 8 to 64 bits, float32 and
float64. float16, bfloat16 and the complex types are *not* in the map: NVRTC from the
``nvidia-cuda-nvrtc-cu12`` wheel has no ``cuda_fp16.h``/``cuda_bf16.h``/``cuComplex.h`` to
include, so an equation on them is declined by the code generator and runs as one CuPy
operation instead (CuPy's own kernels handle float16 and complex; bfloat16 goes to the host),
with one warning per primitive and dtype.
"""
from __future__ import annotations

import numpy as np

#: NumPy dtype -> CUDA C type name (also valid C++ for the host check, see codegen)
CTYPES: dict = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.int8): "signed char",
    np.dtype(np.int16): "short",
    np.dtype(np.int32): "int",
    np.dtype(np.int64): "long long",
    np.dtype(np.uint8): "unsigned char",
    np.dtype(np.uint16): "unsigned short",
    np.dtype(np.uint32): "unsigned int",
    np.dtype(np.uint64): "unsigned long long",
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
}

#: the unsigned type of each integer width, for arithmetic that must wrap (C's signed overflow
#: is undefined; unsigned arithmetic wraps modulo 2**bits, which is what XLA specifies)
UNSIGNED_OF_WIDTH = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int",
                     8: "unsigned long long"}


class UnsupportedDtype(TypeError):
    """A dtype fused CUDA kernels do not handle (the message names it)."""


def ctype(dtype) -> str:
    """The CUDA C type of ``dtype``.

    Args:
      dtype: anything ``np.dtype`` accepts.

    Returns:
      The C type name, e.g. ``"unsigned int"`` for uint32.

    Raises:
      UnsupportedDtype: float16, bfloat16, complex and other dtypes outside :data:`CTYPES`.

    Example:
      >>> ctype(np.float32)
      'float'
    """
    try:
        return CTYPES[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise UnsupportedDtype(f"fused CUDA kernels do not handle dtype {dtype}") from None


def supported(dtype) -> bool:
    """Whether fused kernels handle ``dtype`` (see :data:`CTYPES`)."""
    try:
        return np.dtype(dtype) in CTYPES
    except TypeError:
        return False


def unsigned_ctype(dtype) -> str:
    """The unsigned C type of ``dtype``'s width (for wrapping integer arithmetic)."""
    return UNSIGNED_OF_WIDTH[np.dtype(dtype).itemsize]


def accumulator(dtype, kind: str) -> np.dtype:
    """The dtype a reduction of ``kind`` (``"sum"``, ``"prod"``, ``"max"``, ...) accumulates
    ``dtype`` in.

    Sums and products of floats accumulate in float64 (fewer rounding steps than float32; the
    reduction is memory-bound, so the wider arithmetic is free on every current GPU); sums and
    products of integers in the unsigned 64-bit type, whose wrap-around gives the exact result
    modulo ``2**bits`` once cast back; every other reduction in the dtype itself.

    Example:
      >>> accumulator(np.float32, "sum")
      dtype('float64')
      >>> accumulator(np.int8, "prod")
      dtype('uint64')
    """
    dtype = np.dtype(dtype)
    if kind in ("sum", "prod"):
        if dtype.kind == "f":
            return np.dtype(np.float64)
        if dtype.kind in "iu":
            return np.dtype(np.uint64)
    return dtype
