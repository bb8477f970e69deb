"""GPU kernels of the reductions (sum, prod, max, min, and, or, xor, argmax, argmin) and the
cumulative ops (cumsum, cumprod, cummax, cummin, cumlogsumexp), for the dtypes and forms the
fused reduction kernels decline (float16, bfloat16, complex, several axes, ...).

Sums and products of float32 and complex64, and max/min of float32, are plax-compiled row
kernels (:func:`row_reduce`: CuPy's reductions flush float32 subnormals); other dtypes use
CuPy's (CUB) reductions; float16 accumulates in float32, as the reference kernels do. max/min propagate NaN; complex max/min fold JAX's rule
(:mod:`plax.lowering.complex_extremes`: a tie gives the later value, a NaN never wins) in
order, the generated kernels declining them (not associative): a thread a row
(:func:`row_reduce`) up to :data:`COMPLEX_FOLD_MAX_ROW` elements, whole-array operations above. Bitwise reductions fold the reduced axis in
halves (``log2(n)`` steps). argmax, argmin and the cumulative ops on every dtype they take
are plax-compiled kernels (:mod:`plax_cupy.kernels_rows`: CuPy's own kernels flush
float32 subnormals).
"""
from __future__ import annotations

import math

import numpy as np

import cupy

from plax import lax
from plax.lowering import complex_extremes, signed_zeros
from plax_cupy import kernels_rows
from plax_cupy.kernels import kernel


def _half(dtype) -> bool:
    return dtype.itemsize == 2 and dtype.kind == "f"


def _rows(x, axes):
    """``x`` with the reduced ``axes`` moved last and flattened: shape (*kept, n)."""
    axes = tuple(axes)
    kept = [i for i in range(x.ndim) if i not in axes]
    moved = cupy.transpose(x, kept + list(axes))
    return moved.reshape(tuple(x.shape[i] for i in kept) + (math.prod(x.shape[i] for i in axes),))


#: the dtypes whose sums, products (and, float32, max/min) reduce in a plax-compiled row
#: kernel (:func:`row_reduce`): CuPy's reductions flush their float32 subnormals (bfloat16
#: reaches the table widened to float32)
ROW_REDUCE_DTYPES = (np.dtype(np.float32), np.dtype(np.complex64))


#: the longest row whose complex max/min one thread folds (:func:`row_reduce`, one launch);
#: longer rows fold from whole-array operations (``complex_extremes.reduce_extreme``), whose
#: few dozen launches cost less than one thread walking a long row (not tuned on a GPU)
COMPLEX_FOLD_MAX_ROW = 4096


def row_reduce_source(kind: str, dtype) -> tuple[str, str]:
    """The CUDA source and kernel name reducing each row of a C-contiguous ``(rows, n)``
    array with ``kind`` (``"sum"``, ``"prod"``, ``"max"``, ``"min"``), one thread per row, in
    the fused reductions' accumulator and order of combination
    (:class:`plax_cupy.codegen.Reduction`: sums and products of float32 in double, complex64
    in complex128; max/min NaN-propagating); the kernel takes ``(x, out, rows, n)``.

    Example:
      >>> row_reduce_source("sum", np.float32)[1]
      'plax_row_reduce_sum_float32'
    """
    from plax_cupy import codegen, dtypes
    red = codegen.Reduction(kind, dtype)
    t, acc = dtypes.ctype(red.dtype), dtypes.ctype(red.acc)
    if red.acc == red.dtype:
        to_acc, from_acc = "v", "s"
    elif red.dtype.kind == "c":
        to_acc, from_acc = "plax_ccast<double>(v)", "plax_ccast<float>(s)"
    else:
        to_acc, from_acc = f"(({acc})v)", f"(({t})s)"
    name = f"plax_row_reduce_{kind}_{red.dtype.name}"
    source = f"""
extern "C" __global__ void {name}(const {t}* __restrict__ x, {t}* __restrict__ out,
                                  long long rows, long long n) {{
  for (long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x; r < rows;
       r += (long long)blockDim.x * gridDim.x) {{
    {acc} s = {red.init};
    for (long long j = 0; j < n; ++j) {{
      const {t} v = x[r * n + j];
      s = {red.combine("s", to_acc)};
    }}
    out[r] = {from_acc};
  }}
}}
"""
    return source, name


def row_reduce(x, axes, kind: str):
    """``kind`` over ``axes`` of ``x`` (a dtype of :data:`ROW_REDUCE_DTYPES`, or complex for
    max/min: JAX's fold in order) as one plax-compiled kernel (:func:`row_reduce_source`).

    Args:
      x: device array.
      axes: the reduced axes.
      kind: ``"sum"``, ``"prod"``, ``"max"`` or ``"min"``.

    Returns:
      The reduced device array (the kept axes), of ``x``'s dtype.

    Example:
      >>> row_reduce(cupy.ones((2, 3), np.float32), (1,), "sum")   # [3, 3]
    """
    from plax_cupy.kernels_special import launch_raw
    rows = cupy.ascontiguousarray(_rows(x, axes))
    out = cupy.empty(rows.shape[:-1], x.dtype)
    count, n = out.size, rows.shape[-1]
    if count:
        source, name = row_reduce_source(kind, x.dtype)
        launch_raw(source, name, count, rows, out, np.int64(count), np.int64(n))
    return out


@kernel(lax.reduce_sum_p)
def _reduce_sum(x, *, axes):
    if not axes:  # nothing reduced (CuPy's reductions need not take an empty axis tuple)
        return x
    if x.dtype in ROW_REDUCE_DTYPES:
        return row_reduce(x, axes, "sum")
    if _half(x.dtype):
        return x.astype(np.float32).sum(axis=tuple(axes)).astype(x.dtype)
    return x.sum(axis=tuple(axes), dtype=x.dtype)


@kernel(lax.reduce_prod_p)
def _reduce_prod(x, *, axes):
    if not axes:
        return x
    if x.dtype in ROW_REDUCE_DTYPES:
        return row_reduce(x, axes, "prod")
    if _half(x.dtype):
        return x.astype(np.float32).prod(axis=tuple(axes)).astype(x.dtype)
    return x.prod(axis=tuple(axes), dtype=x.dtype)


def _identity(dtype, largest: bool):
    """The identity of max (``largest=False``: the lowest value) or min, as a scalar of
    ``dtype`` (a Python int would not fit uint64's maximum in every conversion)."""
    if dtype.kind == "b":
        return np.bool_(not largest)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return dtype.type(info.max if largest else info.min)
    return dtype.type(np.inf if largest else -np.inf)


def _extreme(is_max: bool):
    def reduce(x, *, axes):
        rows = _rows(x, axes)
        if rows.shape[-1] == 0:  # nothing reduced: the identity (complex: -+inf + 0j, XLA's)
            return cupy.full(rows.shape[:-1], _identity(x.dtype, not is_max), x.dtype)
        if x.dtype.kind == "c":   # JAX's left fold (not associative: no tree)
            if rows.shape[-1] <= COMPLEX_FOLD_MAX_ROW:   # a thread a row, one launch
                return row_reduce(x, axes, "max" if is_max else "min")
            # (long rows: whole-array operations, parallel, a few dozen launches)
            return complex_extremes.reduce_extreme(rows, is_max, xp=cupy)
        if x.dtype == np.float32:  # plax-compiled (CuPy's max/min flush subnormals)
            return row_reduce(x, axes, "max" if is_max else "min")
        out = rows.max(axis=-1) if is_max else rows.min(axis=-1)
        # CuPy's max/min return either of two equal zeros: XLA's -0 < +0
        return signed_zeros.fix_reduced_zeros(out, x, "max" if is_max else "min",
                                              lambda found: _rows(found, axes).any(axis=-1),
                                              xp=cupy)
    return reduce


kernel(lax.reduce_max_p)(_extreme(True))
kernel(lax.reduce_min_p)(_extreme(False))


def _fold(rows, op, identity):
    """Reduces the last axis of ``rows`` by halving it with ``op`` (associative, commutative)."""
    n = rows.shape[-1]
    if n == 0:
        return cupy.full(rows.shape[:-1], identity, rows.dtype)
    while n > 1:
        half = n // 2
        folded = op(rows[..., :half], rows[..., half:2 * half])
        rows = cupy.concatenate([folded, rows[..., 2 * half:]], axis=-1) if n % 2 else folded
        n = rows.shape[-1]
    return rows[..., 0]


def _bitwise(bool_op, int_op, identity_bits):
    def reduce(x, *, axes):
        rows = _rows(x, axes)
        if x.dtype.kind == "b":
            return _fold(rows, bool_op, identity_bits != 0)
        identity = np.array(identity_bits).astype(np.uint64).astype(x.dtype)[()]
        return _fold(rows, int_op, identity)
    return reduce


kernel(lax.reduce_and_p)(_bitwise(cupy.logical_and, cupy.bitwise_and, -1))
kernel(lax.reduce_or_p)(_bitwise(cupy.logical_or, cupy.bitwise_or, 0))
kernel(lax.reduce_xor_p)(_bitwise(cupy.logical_xor, cupy.bitwise_xor, 0))


# ---------------------------------------------------------------- cumulative

# argmax, argmin and the cumulative ops (every dtype) are plax_cupy.kernels_rows' row
# kernels (CuPy's own kernels flush float32 subnormals)
kernels_rows.register()
