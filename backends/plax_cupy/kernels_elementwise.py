"""plax-compiled elementwise kernels for the kernel table's float paths: one C++ expression
over same-shape operands, compiled by plax's own NVRTC call (``-ftz=false``) so float32
subnormals are kept, where CuPy's own ufuncs (``cupy.nextafter``, ``cupy.minimum``, ...) are
compiled by CuPy with ``-ftz=true`` and flush them.

The expressions call the fused kernels' helpers (:data:`plax_cupy.codegen.PREAMBLE`:
``plax_nextafter``, ``plax_max``, ``plax_min``), so a table kernel and the generated kernel of
the same primitive give the same bits.
"""
from __future__ import annotations

import numpy as np

import cupy

from plax_cupy import dtypes


def elementwise_source(expression: str, ctypes_in: tuple[str, ...], ctype_out: str) -> tuple[str, str]:
    """The source and kernel name of ``out[i] = expression`` over ``n`` elements, the operands
    named ``a0``, ``a1``, ... in ``expression``.

    Args:
      expression: a C++ expression of ``a0``, ``a1``, ...
      ctypes_in: the operands' C types.
      ctype_out: the result's C type.

    Returns:
      ``(source, name)``; the kernel takes ``(a0, a1, ..., out, n)``.

    Example:
      >>> elementwise_source("plax_nextafter(a0, a1)", ("float", "float"), "float")[1][:15]
      'plax_elementwis'
    """
    import hashlib
    digest = hashlib.sha1(repr((expression, ctypes_in, ctype_out)).encode()).hexdigest()[:12]
    name = f"plax_elementwise_{digest}"
    params = ", ".join(f"const {c}* __restrict__ p{i}" for i, c in enumerate(ctypes_in))
    loads = " ".join(f"const {c} a{i} = p{i}[i];" for i, c in enumerate(ctypes_in))
    source = f"""
extern "C" __global__ void {name}({params}, {ctype_out}* __restrict__ out, long long n) {{
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {{
    {loads}
    out[i] = {expression};
  }}
}}
"""
    return source, name


def elementwise(expression: str, out_dtype, *operands: "cupy.ndarray") -> "cupy.ndarray":
    """``expression`` elementwise over ``operands`` (broadcast together), as one plax-compiled
    kernel (see the module).

    Args:
      expression: a C++ expression of ``a0``, ``a1``, ... (the operands in order).
      out_dtype: the result's dtype (a type of :data:`plax_cupy.dtypes.CTYPES`, not 16-bit).
      *operands: device arrays.

    Returns:
      A new C-contiguous device array of the broadcast shape.

    Example:
      >>> elementwise("plax_nextafter(a0, a1)", np.float32, x, y)   # doctest: +SKIP
    """
    from plax_cupy.kernels_special import launch_raw
    arrays = [cupy.ascontiguousarray(a) for a in cupy.broadcast_arrays(*operands)]
    out = cupy.empty(arrays[0].shape, np.dtype(out_dtype))
    if out.size:
        source, name = elementwise_source(expression, tuple(dtypes.ctype(a.dtype) for a in arrays),
                                          dtypes.ctype(out_dtype))
        launch_raw(source, name, out.size, *arrays, out, np.int64(out.size))
    return out
