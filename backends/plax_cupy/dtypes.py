"""The dtype map of the CUDA code generator: which NumPy dtypes fused kernels handle, as which
CUDA C types, and how reductions accumulate them.

Fused kernels handle booleans, the signed and unsigned integers of 8 to 64 bits, float16,
bfloat16, float32, float64, complex64 and complex128. The low-precision and complex types are
the generator's own minimal C++ types, defined in its preamble (no ``cuda_fp16.h``,
``cuda_bf16.h`` or ``cuComplex.h`` needed, which NVRTC from the ``nvidia-cuda-nvrtc-cu12``
wheel lacks, and the same source builds with g++ for the host checks):

* ``plax_f16`` / ``plax_bf16``: the 16-bit pattern (a float16 CuPy array's memory; a
  :class:`~plax_cupy.backend.Bf16Buffer`'s ``bits``). Kernels compute on them in ``float``
  (their *value type*) and round every result to the type, to nearest even, as NumPy's
  float16 and ml_dtypes' bfloat16 do per operation;
* ``plax_c64`` / ``plax_c128``: a pair of ``float``/``double`` laid out as NumPy's and CuPy's
  complex values, with the arithmetic and functions NumPy computes.
"""
from __future__ import annotations

import ml_dtypes as _ml_dtypes
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
    np.dtype(np.float16): "plax_f16",
    np.dtype(_ml_dtypes.bfloat16): "plax_bf16",
    np.dtype(np.complex64): "plax_c64",
    np.dtype(np.complex128): "plax_c128",
}

#: the 16-bit floating types: stored as their bits, computed in float32 (see the module doc)
HALF_TYPES = (np.dtype(np.float16), np.dtype(_ml_dtypes.bfloat16))

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
      UnsupportedDtype: a dtype outside :data:`CTYPES` (strings, structured, float8 ...).

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


def is_half(dtype) -> bool:
    """Whether ``dtype`` is float16 or bfloat16 (stored as 16 bits, computed in float32)."""
    return np.dtype(dtype) in HALF_TYPES


def is_floating(dtype) -> bool:
    """Whether ``dtype`` is a real floating type (float16, bfloat16, float32, float64);
    bfloat16's NumPy kind is ``"V"``, so ``dtype.kind == "f"`` alone misses it."""
    return np.dtype(dtype).kind == "f" or is_half(dtype)


def value_ctype(dtype) -> str:
    """The C type kernels compute ``dtype``'s values in: ``float`` for float16 and bfloat16,
    otherwise :func:`ctype`.

    Example:
      >>> value_ctype(np.float16), value_ctype(np.complex64)
      ('float', 'plax_c64')
    """
    return "float" if is_half(dtype) else ctype(dtype)


def storage_dtype(dtype) -> np.dtype:
    """The dtype of the device array holding ``dtype``'s values: ``uint16`` for bfloat16 (its
    bits: CuPy has no bfloat16), otherwise ``dtype``. The launcher allocates outputs with it.

    Example:
      >>> storage_dtype(np.float16)
      dtype('float16')
    """
    dtype = np.dtype(dtype)
    return np.dtype(np.uint16) if dtype == HALF_TYPES[1] else dtype


def unsigned_ctype(dtype) -> str:
    """The unsigned C type of ``dtype``'s width (for wrapping integer arithmetic)."""
    return UNSIGNED_OF_WIDTH[np.dtype(dtype).itemsize]


def accumulator(dtype, kind: str) -> np.dtype:
    """The dtype a reduction of ``kind`` (``"sum"``, ``"prod"``, ``"max"``, ...) accumulates
    ``dtype`` in.

    Sums and products of floats accumulate in float64 (fewer rounding steps than float32; the
    reduction is memory-bound, so the wider arithmetic is free on every current GPU), of
    complex values in complex128; sums and products of integers in the unsigned 64-bit type,
    whose wrap-around gives the exact result modulo ``2**bits`` once cast back; max and min of
    float16/bfloat16 in float32 (their value type: exact); every other reduction in the dtype
    itself.

    Example:
      >>> accumulator(np.float32, "sum")
      dtype('float64')
      >>> accumulator(np.int8, "prod")
      dtype('uint64')
    """
    dtype = np.dtype(dtype)
    if kind in ("sum", "prod"):
        if is_floating(dtype):
            return np.dtype(np.float64)
        if dtype.kind == "c":
            return np.dtype(np.complex128)
        if dtype.kind in "iu":
            return np.dtype(np.uint64)
    if is_half(dtype):
        return np.dtype(np.float32)
    return dtype
