"""GPU kernels of the windowed reductions (``reduce_window_sum``, ``reduce_window_max``,
``reduce_window_min``).

float32 and complex64 operands run as one plax-compiled kernel per shape and parameters
(:func:`window_source`, ``-ftz=false``): one thread per result element walks its window,
skipping padding and dilation holes (which hold the reduction's identity), sums accumulating
in double (complex128 for complex64) as the fused reductions do, max/min propagating NaN with
the fused kernels' ``plax_max``/``plax_min``. (CuPy's own reductions are compiled with
``-ftz=true`` and flushed float32 subnormals: a window of subnormals summed to zero, and a
subnormal compared equal to zero in max/min.)

Other dtypes run the core's :func:`plax.lax.windows.reduce_window_array` on CuPy, as the
reference kernels (``plax_numpy.impls_windows``) run it on NumPy: the operand dilated and
padded with the reduction's identity in one strided copy, a strided window view of it (no
copy), and one CuPy reduction over the window axes -- float64 and integers never flush, and
16-bit floats widened to float32 are never float32 subnormals. float16 reduces in float32,
integers wrap.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np

import cupy

from plax.lax.windows import (reduce_window_array, reduce_window_max_p, reduce_window_min_p,
                              reduce_window_sum_p, reduction_identity, window_output_shape)
from plax.lowering import signed_zeros
from plax_cupy import codegen, dtypes
from plax_cupy.kernels import kernel

#: the dtypes reduced by the plax-compiled window kernel, per reduction (float32 would flush
#: in CuPy's kernels; complex windows only sum)
WINDOW_KERNEL_DTYPES = {"sum": (np.dtype(np.float32), np.dtype(np.complex64)),
                        "max": (np.dtype(np.float32),), "min": (np.dtype(np.float32),)}


def window_source(which: str, dtype, shape, out_shape, window_dimensions, window_strides,
                  padding, base_dilation, window_dilation) -> tuple[str, str]:
    """The CUDA source and kernel name of one windowed reduction, its shapes and parameters
    baked in; the kernel takes ``(x, out, n)`` (``n`` result elements, C-contiguous arrays).

    Args:
      which: ``"sum"``, ``"max"`` or ``"min"``.
      dtype: the operand's dtype (float32, or complex64 for a sum).
      shape, out_shape: the operand's and the result's shapes.
      window_dimensions, window_strides, padding, base_dilation, window_dilation: the
        primitive's parameters, one per axis.

    Returns:
      ``(source, name)``.

    Example:
      >>> window_source("max", np.float32, (5,), (3,), (2,), (2,), ((0, 1),), (1,), (1,))[1][:17]
      'plax_reduce_windo'
    """
    dtype = np.dtype(dtype)
    t = dtypes.ctype(dtype)
    complex_sum = dtype.kind == "c"
    acc = "plax_c128" if complex_sum else ("double" if which == "sum" else t)
    identity = codegen.c_literal(reduction_identity(dtype, which), np.dtype(np.complex128)
                                 if complex_sum else (np.float64 if which == "sum" else dtype))
    if which == "sum":
        combine = "acc = acc + plax_ccast<double>(v);" if complex_sum else "acc += (double)v;"
        result = "plax_ccast<float>(acc)" if complex_sum else f"({t})acc"
    else:
        combine = f"acc = plax_{which}(acc, v);"
        result = "acc"
    key = repr((which, dtype.str, tuple(shape), tuple(out_shape), tuple(window_dimensions),
                tuple(window_strides), tuple(map(tuple, padding)), tuple(base_dilation),
                tuple(window_dilation)))
    name = "plax_reduce_window_" + hashlib.sha1(key.encode()).hexdigest()[:12]
    rank = len(shape)
    strides = [math.prod(shape[d + 1:]) for d in range(rank)]
    out_coords = []
    for d in reversed(range(rank)):
        out_coords.append(f"    const long long o{d} = rem % {out_shape[d]}LL; rem /= {out_shape[d]}LL;")
    taps = []
    for d in reversed(range(rank)):
        lo = padding[d][0]
        bd = base_dilation[d]
        taps += [f"      const long long k{d} = w % {window_dimensions[d]}LL; w /= {window_dimensions[d]}LL;",
                 f"      const long long q{d} = o{d} * {window_strides[d]}LL + k{d} * "
                 f"{window_dilation[d]}LL - ({lo}LL);",
                 f"      if (q{d} < 0 || q{d} > {(shape[d] - 1) * bd}LL"
                 + (f" || q{d} % {bd}LL != 0" if bd != 1 else "") + ") continue;",
                 f"      off += (q{d} / {bd}LL) * {strides[d]}LL;"]
    source = "\n".join([
        f'extern "C" __global__ void {name}(const {t}* __restrict__ x, {t}* __restrict__ out,',
        "                                   long long n) {",
        "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;",
        "       i += (long long)blockDim.x * gridDim.x) {",
        "    long long rem = i;",
        *out_coords,
        f"    {acc} acc = {identity};",
        f"    for (long long tap = 0; tap < {math.prod(window_dimensions)}LL; ++tap) {{",
        "      long long w = tap, off = 0;",
        *taps,
        f"      const {t} v = x[off];",
        f"      {combine}",
        "    }",
        f"    out[i] = {result};",
        "  }",
        "}",
        ""])
    return source, name


def _reducer(which: str):
    def reduce_window(x, *, window_dimensions, window_strides, padding, base_dilation,
                      window_dilation):
        params = dict(window_dimensions=tuple(window_dimensions),
                      window_strides=tuple(window_strides),
                      padding=tuple(tuple(p) for p in padding),
                      base_dilation=tuple(base_dilation), window_dilation=tuple(window_dilation))
        if x.ndim == 0 or np.dtype(x.dtype) not in WINDOW_KERNEL_DTYPES[which]:
            out = reduce_window_array(x, which, xp=cupy, **params)
            if which == "sum":
                return out
            # CuPy's max/min return either of two equal zeros: XLA's -0 < +0 (whether a
            # window holds the preferred zero is the window max of that flag)
            return signed_zeros.fix_reduced_zeros(
                out, x, which, lambda found: reduce_window_array(found, "max", xp=cupy, **params),
                xp=cupy)
        from plax_cupy.kernels_special import launch_raw
        out_shape = window_output_shape(x.shape, *params.values())
        out = cupy.empty(out_shape, x.dtype)
        if out.size == 0:
            return out
        if x.size == 0:  # every window holds padding only: the identity
            return cupy.full(out_shape, reduction_identity(x.dtype, which), x.dtype)
        source, name = window_source(which, x.dtype, x.shape, out_shape, **params)
        launch_raw(source, name, out.size, cupy.ascontiguousarray(x), out, np.int64(out.size))
        return out

    reduce_window.__name__ = f"reduce_window_{which}"
    reduce_window.__doc__ = f"""The {which} of each window of a device array.

    Args:
      x: device array; the other parameters are the primitive's (window dimensions, strides,
        ``(low, high)`` padding, base and window dilation, one per axis).

    Returns:
      One {which} per window position, of ``x``'s dtype.

    Example:
      >>> reduce_window_{which}(cupy.arange(4.0), window_dimensions=(2,), window_strides=(2,),
      ...                      padding=((0, 0),), base_dilation=(1,), window_dilation=(1,))
    """
    return reduce_window


reduce_window_sum = kernel(reduce_window_sum_p)(_reducer("sum"))
reduce_window_max = kernel(reduce_window_max_p)(_reducer("max"))
reduce_window_min = kernel(reduce_window_min_p)(_reducer("min"))
