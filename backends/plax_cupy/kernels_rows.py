"""plax-compiled kernels along one axis: the cumulative ops (``cumsum``, ``cumprod``,
``cummax``, ``cummin``, ``cumlogsumexp``) and ``argmax``/``argmin``.

These ran as CuPy's own kernels (``cupy.cumsum``, ``cupy.argmax``, ...), which CuPy compiles
with ``-ftz=true``: float32 subnormals were flushed to zero in running sums and products, and a
subnormal compared equal to zero in ``argmax``/``argmin``. Here each is a small hand-written
kernel compiled by plax's own NVRTC call (:func:`plax_cupy.kernel_modules.module`,
:data:`plax_cupy.nvrtc.DEVICE_OPTIONS`: ``-ftz=false``), so subnormals are kept as NumPy and
XLA keep them.

Layout: an operand is viewed as ``(outer, n, inner)`` around the axis (C order), one row per
``(outer, inner)`` pair; one thread block works on a row at a time (a grid-stride loop over
rows). A cumulative row is split in contiguous chunks, one per thread: each thread folds its
chunk, the chunk totals are scanned in shared memory (Hillis-Steele, ``log2(threads)`` steps),
and each thread rescans its chunk from the total before it. ``reverse`` reads the row from its
end. float16 is computed in float32 and rounded once, as the reference kernels accumulate it
(bfloat16 reaches the table widened to float32 by the backend).
"""
from __future__ import annotations

import math

import numpy as np

import cupy

from plax import lax
from plax.lax.cumlogsumexp import cumlogsumexp_p
from plax_cupy import dtypes
from plax_cupy.kernels import kernel

#: threads per block of the row kernels (a power of two: the shared-memory scan halves it)
THREADS = 256

#: ``op`` -> C++ combining ``a`` (earlier in scan order) with ``b`` (later); ``U`` is the
#: unsigned type of an integer's width (wrapping, as XLA; signed overflow is undefined in C++)
_COMBINE = {
    "sum": "plax_row_add(a, b)",
    "prod": "plax_row_mul(a, b)",
    "max": "plax_max(a, b)",
    "min": "plax_min(a, b)",
    "logsumexp": "plax_logaddexp(a, b)",
}

_HELPERS = r"""
template <typename T> __device__ __forceinline__ T plax_row_add(T a, T b) { return a + b; }
template <typename T> __device__ __forceinline__ T plax_row_mul(T a, T b) { return a * b; }
#define PLAX_ROW_WRAP(T, U) \
  template <> __device__ __forceinline__ T plax_row_add<T>(T a, T b) { return (T)((U)a + (U)b); } \
  template <> __device__ __forceinline__ T plax_row_mul<T>(T a, T b) { return (T)((U)a * (U)b); }
PLAX_ROW_WRAP(int, unsigned int)  // (narrower types are promoted to int: no overflow)
PLAX_ROW_WRAP(long long, unsigned long long)
// log(exp(a) + exp(b)) as NumPy's logaddexp: equal operands (infinities included) add log 2
template <typename T> __device__ __forceinline__ T plax_logaddexp(T a, T b) {
  if (a == b) return a + (T)0.693147180559945309417232121458176568;
  const T d = a - b;
  if (d > 0) return a + log1p(exp(-d));
  if (d <= 0) return b + log1p(exp(d));
  return d;  // NaN
}
"""


def cumulative_source(op: str, ctype: str) -> tuple[str, str]:
    """The CUDA C++ source and kernel name of a cumulative ``op`` on ``ctype`` elements.

    Args:
      op: ``"sum"``, ``"prod"``, ``"max"``, ``"min"`` or ``"logsumexp"``.
      ctype: the element's C type (:func:`plax_cupy.dtypes.ctype`; not a 16-bit float).

    Returns:
      ``(source, name)``; the kernel takes ``(x, y, rows, n, inner, reverse)``.

    Example:
      >>> source, name = cumulative_source("sum", "float")
      >>> name
      'plax_cumulative_sum_float'
    """
    name = f"plax_cumulative_{op}_{ctype.replace(' ', '_')}"
    combine = _COMBINE[op]
    source = _HELPERS + f"""
__device__ __forceinline__ {ctype} {name}_op({ctype} a, {ctype} b) {{ return {combine}; }}
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {ctype}* __restrict__ y,
    long long rows, long long n, long long inner, int reverse) {{
  __shared__ {ctype} totals[{THREADS}];
  const long long threads = blockDim.x, t = threadIdx.x;
  const long long chunk = (n + threads - 1) / threads;
  const long long active = chunk ? (n + chunk - 1) / chunk : 0;  // threads holding elements
  const long long lo = t * chunk, hi = lo + chunk < n ? lo + chunk : n;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {{
    const long long base = (row / inner) * n * inner + row % inner;
    // element p of the scan order
    #define PLAX_AT(p) (base + (reverse ? n - 1 - (p) : (p)) * inner)
    {ctype} acc;
    if (t < active) {{
      acc = x[PLAX_AT(lo)];
      for (long long p = lo + 1; p < hi; ++p) acc = {name}_op(acc, x[PLAX_AT(p)]);
      totals[t] = acc;
    }}
    __syncthreads();
    for (long long s = 1; s < active; s <<= 1) {{  // inclusive scan of the chunk totals
      const bool take = t >= s && t < active;
      {ctype} before;
      if (take) before = totals[t - s];
      __syncthreads();
      if (take) totals[t] = {name}_op(before, totals[t]);
      __syncthreads();
    }}
    if (t < active) {{
      acc = t ? {name}_op(totals[t - 1], x[PLAX_AT(lo)]) : x[PLAX_AT(lo)];
      y[PLAX_AT(lo)] = acc;
      for (long long p = lo + 1; p < hi; ++p) {{
        acc = {name}_op(acc, x[PLAX_AT(p)]);
        y[PLAX_AT(p)] = acc;
      }}
    }}
    #undef PLAX_AT
    __syncthreads();  // (totals is reused by the next row)
  }}
}}
"""
    return source, name


def argextreme_source(is_max: bool, ctype: str, index_ctype: str) -> tuple[str, str]:
    """The CUDA C++ source and kernel name of ``argmax`` (``is_max``) or ``argmin`` along an
    axis: the first index of the largest (smallest) value, the first NaN where there is one,
    as NumPy and XLA.

    Args:
      is_max: argmax, else argmin.
      ctype: the operand's C type (a real type; not a 16-bit float).
      index_ctype: the result's C type.

    Returns:
      ``(source, name)``; the kernel takes ``(x, out, rows, n, inner)``.

    Example:
      >>> argextreme_source(True, "float", "int")[1]
      'plax_argmax_float_int'
    """
    kind = "argmax" if is_max else "argmin"
    name = f"plax_{kind}_{ctype.replace(' ', '_')}_{index_ctype.replace(' ', '_')}"
    better = "v > best" if is_max else "v < best"
    source = f"""
extern "C" __global__ void {name}(const {ctype}* __restrict__ x, {index_ctype}* __restrict__ out,
    long long rows, long long n, long long inner) {{
  __shared__ {ctype} values[{THREADS}];
  __shared__ long long where[{THREADS}];
  const long long threads = blockDim.x, t = threadIdx.x;
  for (long long row = blockIdx.x; row < rows; row += gridDim.x) {{
    const long long base = (row / inner) * n * inner + row % inner;
    {ctype} best = x[base];
    long long at = -1;  // (no element of this thread's stride yet)
    for (long long p = t; p < n; p += threads) {{
      const {ctype} v = x[base + p * inner];
      // (p rises: on a tie the earlier index stays; the first NaN stays once taken)
      if (at < 0 || (best == best && (v != v || {better}))) {{ best = v; at = p; }}
    }}
    values[t] = best; where[t] = at;
    __syncthreads();
    for (long long s = threads / 2; s > 0; s >>= 1) {{  // tree: the better, else the earlier
      if (t < s && where[t + s] >= 0) {{
        const {ctype} v = values[t + s], b = values[t];
        const long long i = where[t + s], j = where[t];
        const bool b_nan = b != b, v_nan = v != v;
        const bool wins = j < 0 || (v_nan && (!b_nan || i < j)) ||
            (!b_nan && !v_nan && ({"v > b" if is_max else "v < b"} || (v == b && i < j)));
        if (wins) {{ values[t] = v; where[t] = i; }}
      }}
      __syncthreads();
    }}
    if (t == 0) out[row] = ({index_ctype})where[0];
    __syncthreads();
  }}
}}
"""
    return source, name


def _layout(shape, axis: int) -> tuple[int, int, int]:
    """``(outer, n, inner)`` of a C-order ``shape`` around ``axis``."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def _launch(source: str, name: str, rows: int, *args) -> None:
    """One block of :data:`THREADS` threads per row (a grid-stride loop covers rows beyond the
    grid), compiled by plax (keeping subnormals) and counted as one launch."""
    from plax_cupy import codegen, kernel_modules, runtime
    module = kernel_modules.module(codegen.PREAMBLE + source, (name,))
    grid = max(1, min(rows, codegen.DEFAULT_SM_COUNT * codegen.WAVES * 4))
    module.get_function(name)((grid,), (THREADS,), tuple(args))
    runtime.note_launch()


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    return np.dtype(np.float32) if dtype == np.float16 else dtype


def _cumulative(op: str, fallback):
    def run(x, *, axis, reverse):
        dtype = np.dtype(x.dtype)
        if dtype == np.bool_ or dtype not in dtypes.CTYPES:
            return fallback(x, axis=axis, reverse=reverse)
        compute = _compute_dtype(dtype)
        work = cupy.ascontiguousarray(x.astype(compute, copy=False))
        out = cupy.empty(work.shape, compute)
        outer, n, inner = _layout(work.shape, axis)
        if work.size:
            source, name = cumulative_source(op, dtypes.ctype(compute))
            _launch(source, name, outer * inner, work, out, np.int64(outer * inner), np.int64(n),
                    np.int64(inner), np.int32(bool(reverse)))
        return out.astype(dtype, copy=False)
    return run


def _arg(is_max: bool):
    def run(x, *, axes, index_dtype):
        (axis,) = axes
        dtype = np.dtype(x.dtype)
        compute = _compute_dtype(dtype)
        work = cupy.ascontiguousarray(x.astype(compute, copy=False))
        outer, n, inner = _layout(work.shape, axis)
        out = cupy.empty(work.shape[:axis] + work.shape[axis + 1:], np.dtype(index_dtype))
        if out.size:
            if n == 0:
                raise ValueError(f"{'argmax' if is_max else 'argmin'} of an empty axis {axis} "
                                 f"(shape {tuple(x.shape)}): there is no index to return")
            source, name = argextreme_source(is_max, dtypes.ctype(compute),
                                             dtypes.ctype(index_dtype))
            _launch(source, name, outer * inner, work, out, np.int64(outer * inner),
                    np.int64(n), np.int64(inner))
        return out
    return run


def register(fallbacks: dict) -> None:
    """Registers the row kernels for the cumulative ops and argmax/argmin; ``fallbacks`` maps
    a cumulative primitive to the CuPy-based kernel kept for the dtypes these decline (bool)."""
    for prim, op in ((lax.cumsum_p, "sum"), (lax.cumprod_p, "prod"), (lax.cummax_p, "max"),
                     (lax.cummin_p, "min"), (cumlogsumexp_p, "logsumexp")):
        kernel(prim)(_cumulative(op, fallbacks[prim]))
    kernel(lax.argmax_p)(_arg(True))
    kernel(lax.argmin_p)(_arg(False))
