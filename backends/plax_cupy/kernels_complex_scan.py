"""``cummax``/``cummin`` of complex values on the GPU as JAX 0.10.2 computes them
(:mod:`plax.lowering.complex_extremes`): each prefix (``reverse``: each suffix) folded in its
own order from the identity by the lexicographic max/min whose tie gives the later operand and
whose NaN never wins. That rule is not associative, so the row kernels' parallel look-back
scans (:mod:`plax_cupy.kernels_rows`) cannot compute it: one thread per row walks it.

Forward, the fold carries from one prefix to the next. A suffix's fold starts at its own first
element, so ``reverse`` walks from the end keeping what decides every suffix's fold: ``r``,
the fold of the suffix without the identity (its first element where that element beats every
later one strictly, else the next suffix's ``r``), and ``t``, a *threshold* no NaN holds that an
operand beats exactly when it beats every element of the suffix (an element with a NaN real
part maps to ``+-inf + +-inf j``, one with a NaN imaginary part to ``re +- inf j``; ``t`` is
their lexicographic extreme); the suffix's result is the identity where it beats ``t``, else
``r``.
"""
from __future__ import annotations

import functools

import numpy as np

from plax_cupy import codegen, dtypes


def complex_scan_source(is_max: bool, dtype) -> tuple[str, str]:
    """The CUDA source and kernel name of the complex ``cummax`` (``cummin``) of each row of a
    C-contiguous ``(outer, n, inner)`` array, one thread per ``(outer, inner)`` row; the kernel
    takes ``(x, out, outer, n, inner, reverse)``.

    Example:
      >>> complex_scan_source(True, np.complex64)[1]
      'plax_complex_cummax_complex64'
    """
    # (built once per form: a launch hands the module lookup the same text object)
    return _complex_scan_source(bool(is_max), np.dtype(dtype))


@functools.lru_cache(maxsize=None)
def _complex_scan_source(is_max: bool, dtype: np.dtype) -> tuple[str, str]:
    t = dtypes.ctype(dtype)
    part_dtype = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
    part = dtypes.ctype(part_dtype)
    flag = "true" if is_max else "false"
    # (the bound no operand beats; NVRTC has no INFINITY macro: the literals' bit patterns)
    big = codegen.c_literal(np.inf if is_max else -np.inf, part_dtype)
    identity = codegen.c_literal(complex(-np.inf if is_max else np.inf, 0.0), dtype)
    name = f"plax_complex_cum{'max' if is_max else 'min'}_{dtype.name}"
    source = f"""
extern "C" __global__ void {name}(const {t}* __restrict__ x, {t}* __restrict__ out,
                                  long long outer, long long n, long long inner, int reverse) {{
  const {t} identity = {identity};
  for (long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x; row < outer * inner;
       row += (long long)blockDim.x * gridDim.x) {{
    const long long base = (row / inner) * n * inner + row % inner;
    if (!reverse) {{
      {t} acc = identity;
      for (long long j = 0; j < n; ++j) {{
        acc = plax_cfirst_wins(acc, x[base + j * inner], {flag}) ? acc : x[base + j * inner];
        out[base + j * inner] = acc;
      }}
      continue;
    }}
    {t} r = identity, th = identity;
    for (long long j = n - 1; j >= 0; --j) {{
      const {t} v = x[base + j * inner];
      if (j == n - 1 || plax_cfirst_wins(v, th, {flag})) r = v;
      // (NaN parts map to the bound no operand beats; the threshold holds no NaN)
      const {t} m = v.re != v.re ? plax_cplx<{part}>({big}, {big})
          : v.im != v.im ? plax_cplx<{part}>(v.re, {big}) : v;
      th = (j == n - 1 || plax_cfirst_wins(m, th, {flag})) ? m : th;
      out[base + j * inner] = plax_cfirst_wins(identity, th, {flag}) ? identity : r;
    }}
  }}
}}
"""
    return source, name


def complex_scan(is_max: bool, x, out, outer: int, n: int, inner: int, reverse: bool) -> None:
    """Writes the complex ``cummax`` (``cummin``) of the C-contiguous device array ``x``, laid
    out ``(outer, n, inner)``, into ``out`` (same layout) as one launch
    (:func:`complex_scan_source`).

    Example:
      >>> complex_scan(True, x, out, 1, x.size, 1, False)   # a 1-d x's running max
    """
    from plax_cupy.kernels_special import launch_raw
    source, name = complex_scan_source(is_max, x.dtype)
    launch_raw(source, name, outer * inner, x, out, np.int64(outer), np.int64(n),
               np.int64(inner), np.int32(reverse))
