"""GPU kernel of ``dot_general``: one batched cuBLAS product after moving axes into place.

The operands are transposed to ``(batch, m, k)`` and ``(batch, k, n)`` (a copy only where the
axes are not already in that order), then:

* **bfloat16 and float16**: tensor cores through ``cublasGemmStridedBatchedEx`` on the 16-bit
  operands (a :class:`~plax_cupy.backend.Bf16Buffer`'s bits are passed as ``CUDA_R_16BF``),
  accumulating in float32 (``CUBLAS_COMPUTE_32F``) and writing the result type directly
  (cuBLAS rounds the float32 sums to nearest even, as the reference rounds its float32
  product) or float32 where ``preferred_element_type`` asks for it;
* **int8**: ``CUDA_R_8I`` operands accumulated in int32 (``CUBLAS_COMPUTE_32I``) where cuBLAS
  takes the shape (``n`` and ``k`` multiples of 4), the int32 sums wrapped to the result type;
  other integers and booleans (as int32) through ``cupy.matmul``;
* **float32**: ``cupy.matmul`` (cuBLAS SGEMM) when no precision is asked for: TF32 tensor
  cores stay off, as plax's CPU backends compute float32 products in float32
  (``PLAX_GPU_ALLOW_TF32=1`` makes no precision count as ``DEFAULT``). A precision asked for,
  per product (``precision=``) or by ``jax_default_matmul_precision`` (which ``dot_general``
  records when none is given), selects the math as XLA's GPU backend does
  (:func:`float32_compute_type`): ``DEFAULT`` and ``HIGH`` (``"bfloat16"``,
  ``"tensorfloat32"``) run on TF32 tensor cores (``CUBLAS_COMPUTE_32F_FAST_TF32``),
  ``HIGHEST`` (``"float32"``) in float32; the algorithm presets ``TF32_TF32_F32``,
  ``BF16_BF16_F32`` and ``F16_F16_F32`` select TF32, bfloat16 (``..._FAST_16BF``) and
  float16 (``..._FAST_16F``) operands with float32 accumulation, the other presets float32;
* float64 and complex: ``cupy.matmul`` (DGEMM, CGEMM, ZGEMM).

Where the cuBLAS library cannot be loaded, lacks the call (the simulated GPU of
``tests/cupy/fake_cupy.py`` has no ``cupy.cuda.cublas``) or refuses the types (bfloat16 before
Ampere), the product runs in float32 (or int32) through ``cupy.matmul`` and is rounded to the
result type: the same values, slower, with one :class:`~plax_cupy.backend.PlaxCupyFallbackWarning`
per dtype and reason.

The kernel takes bfloat16 operands as :class:`~plax_cupy.backend.Bf16Buffer` itself
(``dot_general.bf16 == "bits"``), so they are never widened before the product.

While the stream captures a CUDA graph (:mod:`plax_cupy.graphs`), CuPy's cuBLAS binding refuses
to run (``NotImplementedError``), so the same cuBLAS calls are made through
:mod:`plax_cupy.cublas_direct` instead, ``cupy.matmul``'s included (:func:`matmul`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

import cupy

from plax import lax
from plax.config import env_flag
from plax.lax.dot import dot_result_dtype
from plax_cupy import cublas_direct
from plax_cupy.kernels import kernel

# cudaDataType_t (library_types.h) and cublasComputeType_t / cublasGemmAlgo_t (cublas_api.h)
CUDA_R_32F, CUDA_R_64F, CUDA_R_16F, CUDA_R_8I, CUDA_R_32I, CUDA_R_16BF = 0, 1, 2, 3, 10, 14
CUDA_C_32F, CUDA_C_64F = 4, 5
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32I, CUBLAS_COMPUTE_32F_FAST_TF32 = 68, 72, 77
CUBLAS_COMPUTE_32F_FAST_16F, CUBLAS_COMPUTE_32F_FAST_16BF = 74, 75
CUBLAS_OP_N = 0
CUBLAS_GEMM_DEFAULT = -1

_BF16_NAME = "bfloat16"


@dataclass(frozen=True)
class Gemm:
    """One row-major batched product ``C[b] = A[b] @ B[b]`` for ``cublasGemmStridedBatchedEx``.

    Attributes:
      batch, m, n, k: ``A`` is ``(batch, m, k)``, ``B`` ``(batch, k, n)``, ``C`` ``(batch, m, n)``,
        all C-contiguous.
      ab_type: the ``cudaDataType_t`` of ``A`` and ``B``.
      c_type: the ``cudaDataType_t`` of ``C``.
      compute_type: the ``cublasComputeType_t``.
    """

    batch: int
    m: int
    n: int
    k: int
    ab_type: int
    c_type: int
    compute_type: int


def gemm_arguments(handle: int, gemm: Gemm, a_ptr: int, b_ptr: int, c_ptr: int,
                   alpha_ptr: int, beta_ptr: int) -> tuple:
    """The argument tuple of ``cublas.gemmStridedBatchedEx`` computing ``gemm``.

    cuBLAS is column-major: a row-major ``(m, n)`` matrix is its column-major transpose, so
    ``C = A @ B`` is computed as ``C^T = B^T A^T`` -- ``B`` passed first, ``m`` and ``n``
    swapped, no transposition flags, leading dimensions the row lengths.

    Args:
      handle: the cuBLAS handle.
      gemm: the product.
      a_ptr, b_ptr, c_ptr: device pointers of ``A``, ``B``, ``C``.
      alpha_ptr, beta_ptr: host pointers of the scalars 1 and 0 in the compute type's scalar
        type (float32 for ``CUBLAS_COMPUTE_32F*``, int32 for ``CUBLAS_COMPUTE_32I``).

    Returns:
      ``(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B, Btype, ldb,
      strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo)``.

    Example:
      >>> g = Gemm(batch=1, m=2, n=3, k=4, ab_type=CUDA_R_16BF, c_type=CUDA_R_16BF,
      ...          compute_type=CUBLAS_COMPUTE_32F)
      >>> gemm_arguments(0, g, 100, 200, 300, 1, 2)[3:6]   # cuBLAS's m, n, k
      (3, 2, 4)
    """
    g = gemm
    return (handle, CUBLAS_OP_N, CUBLAS_OP_N, g.n, g.m, g.k,
            alpha_ptr, b_ptr, g.ab_type, g.n, g.k * g.n,
            a_ptr, g.ab_type, g.k, g.m * g.k,
            beta_ptr, c_ptr, g.c_type, g.n, g.m * g.n,
            g.batch, g.compute_type, CUBLAS_GEMM_DEFAULT)


def int8_shape_ok(m: int, n: int, k: int) -> bool:
    """Whether cuBLAS's int8 GEMM takes this row-major product: its leading dimensions (``n``
    for ``B``, ``k`` for ``A``, ``n`` for ``C``) must be multiples of 4."""
    return n % 4 == 0 and k % 4 == 0 and m > 0


_library: list = []


def cublas_library() -> Any | None:
    """CuPy's cuBLAS binding (``cupy.cuda.cublas``), or None where it cannot be used: the
    library does not load (no ``libcublas``), CuPy lacks ``gemmStridedBatchedEx`` or a cuBLAS
    handle, or ``cupy`` is the simulated GPU (which has no ``cupy.cuda.cublas``). Cached."""
    if not _library:
        _library.append(_find_cublas())
    return _library[0]


def _find_cublas():
    cuda = getattr(cupy, "cuda", None)
    try:
        lib = getattr(cuda, "cublas", None)  # CuPy loads libcublas here (ImportError if absent)
        device = getattr(cuda, "device", None)
    except (ImportError, OSError, RuntimeError):
        return None
    if lib is None or device is None or not hasattr(lib, "gemmStridedBatchedEx") \
            or not hasattr(device, "get_cublas_handle"):
        return None
    return lib


def _warn(key, message: str) -> None:
    from plax_cupy.backend import warn_once
    warn_once(("dot_general",) + key, f"plax_cupy: dot_general {message}")


def _run_gemm(lib, gemm: Gemm, a, b, c, scalar=None) -> None:
    """``c[...] = a @ b`` by cuBLAS on the current device and stream; while the stream
    captures a CUDA graph, through :mod:`plax_cupy.cublas_direct` (CuPy's binding refuses a
    capturing stream). ``scalar``: the type of alpha and beta (default: the compute type's)."""
    stream = cupy.cuda.get_current_stream()
    if stream.is_capturing():
        lib = cublas_direct.binding() or lib
    handle = cupy.cuda.device.get_cublas_handle()
    if scalar is None:
        scalar = np.int32 if gemm.compute_type == CUBLAS_COMPUTE_32I else np.float32
    one, zero = np.ones((), scalar), np.zeros((), scalar)
    cublas_direct.call_with_host_scalars(
        lib, handle, stream.ptr, lib.gemmStridedBatchedEx,
        *gemm_arguments(handle, gemm, a.data.ptr, b.data.ptr, c.data.ptr, one.ctypes.data,
                        zero.ctypes.data))


def _arrange(x, batch, free, contract, lhs: bool):
    """``x`` as a C-contiguous ``(batch, m, k)`` (lhs) or ``(batch, k, n)`` (rhs) array."""
    order = list(batch) + (list(free) + list(contract) if lhs else list(contract) + list(free))
    y = x if order == list(range(x.ndim)) else cupy.transpose(x, order)
    nb = math.prod(x.shape[d] for d in batch)
    rows = math.prod(x.shape[d] for d in (free if lhs else contract))
    cols = math.prod(x.shape[d] for d in (contract if lhs else free))
    return cupy.ascontiguousarray(y).reshape(nb, rows, cols)


@kernel(lax.dot_general_p)
def dot_general(lhs, rhs, *, dimension_numbers, precision=None, preferred_element_type=None):
    """``dot_general`` on device buffers (CuPy arrays; bfloat16 as Bf16Buffer bits).

    Args:
      lhs, rhs: the operands (of one dtype, or two: both converted to the result's).
      dimension_numbers: ``((lhs_contract, rhs_contract), (lhs_batch, rhs_batch))``.
      precision: as ``lax.dot_general``; only decides TF32 for float32 (see module doc).
      preferred_element_type: the result dtype (default: the operands').

    Returns:
      The product, of shape ``batch + lhs_free + rhs_free`` and the result dtype.

    Example:
      >>> dot_general(x, y, dimension_numbers=(((1,), (0,)), ((), ())))   # x @ y
    """
    from plax_cupy.backend import Bf16Buffer
    (lc, rc), (lb, rb) = dimension_numbers
    in_dtype, rhs_dtype = np.dtype(lhs.dtype), np.dtype(rhs.dtype)
    out_dtype = dot_result_dtype(in_dtype, rhs_dtype, preferred_element_type)
    lf = [i for i in range(lhs.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(rhs.ndim) if i not in rc and i not in rb]
    shape = tuple([lhs.shape[d] for d in lb] + [lhs.shape[d] for d in lf]
                  + [rhs.shape[d] for d in rf])
    raw_l = lhs.bits if isinstance(lhs, Bf16Buffer) else lhs
    raw_r = rhs.bits if isinstance(rhs, Bf16Buffer) else rhs
    a = _arrange(raw_l, lb, lf, lc, lhs=True)
    b = _arrange(raw_r, rb, rf, rc, lhs=False)
    nb, m, k = a.shape
    n = b.shape[2]
    if rhs_dtype != in_dtype:  # mixed operands (int8 x float32): cupy.matmul, both widened
        out = _matmul(a, b, in_dtype, out_dtype, rhs_dtype)
    else:
        out = _product(a, b, in_dtype, out_dtype, nb, m, n, k, float32_compute_type(precision))
    if out_dtype.name == _BF16_NAME:
        return Bf16Buffer(out.reshape(shape))
    return out.reshape(shape)


dot_general.bf16 = "bits"  # takes Bf16Buffers itself (see CupyBackend._wrap)


_HALF_TYPES = {"float16": CUDA_R_16F, _BF16_NAME: CUDA_R_16BF}

# Precision names (and JAX's strings for them) -> the Precision they stand for
_PRECISIONS = {"DEFAULT": "DEFAULT", "FASTEST": "DEFAULT", "BFLOAT16": "DEFAULT",
               "HIGH": "HIGH", "TENSORFLOAT32": "HIGH", "BFLOAT16_3X": "HIGH",
               "HIGHEST": "HIGHEST", "FLOAT32": "HIGHEST"}
# Dot algorithm presets with a reduced-precision float32 math mode in cuBLAS (the others,
# F32_F32_F32 and the multi-pass emulations of float32 among them, run in float32)
_PRESETS = {"TF32_TF32_F32": CUBLAS_COMPUTE_32F_FAST_TF32,
            "BF16_BF16_F32": CUBLAS_COMPUTE_32F_FAST_16BF,
            "F16_F16_F32": CUBLAS_COMPUTE_32F_FAST_16F}


def float32_compute_type(precision) -> int | None:
    """The cuBLAS compute type of a float32 product under ``precision`` (as ``dot_general``
    records it: None, a Precision name or a pair of them, or a dot algorithm preset's name),
    or None for plain float32 SGEMM.

    ``DEFAULT`` and ``HIGH`` select TF32 tensor cores, as XLA's GPU backend does; ``HIGHEST``
    float32 (on either operand). No precision is float32, unless ``PLAX_GPU_ALLOW_TF32=1``
    makes it ``DEFAULT``.

    Example:
      >>> float32_compute_type(("HIGH", "HIGH")) == CUBLAS_COMPUTE_32F_FAST_TF32
      True
      >>> float32_compute_type("BF16_BF16_F32") == CUBLAS_COMPUTE_32F_FAST_16BF
      True
      >>> float32_compute_type(("HIGHEST", "HIGHEST")) is None
      True
    """
    if precision is None:
        if not env_flag("PLAX_GPU_ALLOW_TF32", False):
            return None
        precision = "DEFAULT"
    names = [str(p).rsplit(".", 1)[-1].upper()
             for p in (precision if isinstance(precision, (tuple, list)) else (precision,))]
    if len(names) == 1 and names[0] not in _PRECISIONS:
        return _PRESETS.get(names[0])
    if any(_PRECISIONS.get(n, "HIGHEST") == "HIGHEST" for n in names):
        return None
    return CUBLAS_COMPUTE_32F_FAST_TF32


def _product(a, b, in_dtype, out_dtype, nb, m, n, k, f32_compute: int | None):
    """The ``(nb, m, n)`` product of arranged operands, as ``out_dtype``'s storage (bfloat16:
    uint16 bits)."""
    lib = cublas_library()
    empty = nb * m * n == 0 or k == 0
    if in_dtype.name in _HALF_TYPES and out_dtype.name in (in_dtype.name, "float32") and not empty:
        c_type = _HALF_TYPES[out_dtype.name] if out_dtype == in_dtype else CUDA_R_32F
        gemm = Gemm(nb, m, n, k, _HALF_TYPES[in_dtype.name], c_type, CUBLAS_COMPUTE_32F)
        done = _try_gemm(lib, gemm, a, b, np.uint16 if out_dtype.name == _BF16_NAME else out_dtype,
                         in_dtype.name)
        if done is not None:
            return done
    if in_dtype == np.int8 and out_dtype.kind in "iu" and int8_shape_ok(m, n, k) and not empty:
        done = _try_gemm(lib, Gemm(nb, m, n, k, CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I),
                         a, b, np.int32, "int8")
        if done is not None:
            return done.astype(out_dtype)  # int32 sums wrap to the result type, as XLA's
    if in_dtype == np.float32 and out_dtype == np.float32 and f32_compute is not None \
            and not empty:
        done = _try_gemm(lib, Gemm(nb, m, n, k, CUDA_R_32F, CUDA_R_32F, f32_compute),
                         a, b, np.float32, "float32")
        if done is not None:
            return done
    return _matmul(a, b, in_dtype, out_dtype)


def _try_gemm(lib, gemm: Gemm, a, b, c_dtype, name: str):
    """``gemm`` by cuBLAS into a new array of ``c_dtype``; None (with one warning) where
    cuBLAS is missing or refuses it."""
    if lib is None:
        _warn((name, "no-cublas"), f"on {name}: cuBLAS's gemmStridedBatchedEx is not available "
              "here; the product runs through cupy.matmul in a wider type instead (same values, "
              "no tensor cores).")
        return None
    c = cupy.empty((gemm.batch, gemm.m, gemm.n), c_dtype)
    try:
        _run_gemm(lib, gemm, a, b, c)
    except Exception as err:  # CUBLASError: NOT_SUPPORTED (e.g. bfloat16 before sm_80), ...
        if not type(err).__name__.startswith("CUBLAS"):
            raise
        _warn((name, "refused"), f"on {name}: cuBLAS refused the product ({err}); it runs "
              "through cupy.matmul in a wider type instead (same values, no tensor cores).")
        return None
    return c


def _matmul(a, b, in_dtype, out_dtype, b_dtype=None):
    """The product through ``cupy.matmul``: 16-bit floats widened to float32, booleans to
    int32, then rounded/converted to ``out_dtype`` (bfloat16 to its bits). ``b_dtype`` is
    ``b``'s dtype where it differs from ``a``'s (``in_dtype``)."""
    from plax_cupy.backend import narrow_bf16
    compute = out_dtype
    complex_in = in_dtype.kind == "c" or (b_dtype is not None and b_dtype.kind == "c")
    if complex_in and out_dtype.kind != "c":
        # a real preferred_element_type of complex operands: the complex product's real part
        compute = dot_result_dtype(in_dtype, b_dtype or in_dtype)
    elif compute.kind == "b":
        compute = np.dtype(np.int32)
    elif compute.itemsize == 2 and compute.kind in "fV":
        compute = np.dtype(np.float32)
    out = matmul(_widen(a, in_dtype, compute), _widen(b, b_dtype or in_dtype, compute))
    if complex_in and out_dtype.kind != "c":
        out = out.real
    if out_dtype.kind == "b":
        return out != 0
    if out_dtype.name == _BF16_NAME:
        return narrow_bf16(out).bits
    from plax_cupy.kernels_elementwise import astype
    return astype(out, out_dtype)


#: the cudaDataType_t CuPy's matmul passes cuBLAS (as operand, result and compute type)
_CUPY_MATMUL_TYPES = {"float32": CUDA_R_32F, "float64": CUDA_R_64F, "complex64": CUDA_C_32F,
                      "complex128": CUDA_C_64F}


def matmul(a, b):
    """``cupy.matmul(a, b)``; while the current stream captures a CUDA graph, a float or
    complex product of C-contiguous ``(batch, m, k)`` and ``(batch, k, n)`` operands of one
    dtype is made by the very cuBLAS call CuPy's ``matmul`` makes
    (``cublasGemmStridedBatchedEx``, the dtype's ``cudaDataType_t`` as compute type: the same
    bits), through :mod:`plax_cupy.cublas_direct`, since CuPy's binding refuses a capturing
    stream.

    Args:
      a, b: CuPy arrays.

    Returns:
      The product (a new CuPy array).

    Example:
      >>> matmul(cupy.ones((1, 2, 3), "f"), cupy.ones((1, 3, 4), "f")).shape   # doctest: +SKIP
      (1, 2, 4)
    """
    kind = _CUPY_MATMUL_TYPES.get(a.dtype.name)
    if kind is None or a.dtype != b.dtype or a.ndim != 3 or b.ndim != 3 \
            or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1] or 0 in a.shape + b.shape \
            or not (a.flags.c_contiguous and b.flags.c_contiguous) \
            or not cupy.cuda.get_current_stream().is_capturing():
        return cupy.matmul(a, b)
    direct = cublas_direct.binding()
    if direct is None:
        return cupy.matmul(a, b)   # (refused: the capture fails, the program runs plainly)
    (nb, m, k), n = a.shape, b.shape[2]
    c = cupy.empty((nb, m, n), a.dtype)
    _run_gemm(direct, Gemm(nb, m, n, k, kind, kind, kind), a, b, c, scalar=a.dtype.type)
    return c


def _widen(x, dtype, compute):
    """Arranged operand ``x`` (bfloat16 as bits) as ``compute`` values (float32 to float64
    through plax's conversion kernel: CuPy's ``astype`` flushes float32 subnormals)."""
    from plax_cupy.kernels_elementwise import astype
    if dtype.name == _BF16_NAME:
        x = (x.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return astype(x, compute)


__all__ = ["Gemm", "cublas_library", "dot_general", "gemm_arguments", "int8_shape_ok", "matmul"]
