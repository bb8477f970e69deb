"""plax-compiled elementwise kernels for the kernel table's float paths: one C++ expression
over same-shape operands, compiled by plax's own NVRTC call (``-ftz=false``) so float32
subnormals are kept, where CuPy's own ufuncs (``cupy.nextafter``, ``cupy.minimum``, ...) are
compiled by CuPy with ``-ftz=true`` and flush them.

The expressions call the fused kernels' helpers (:data:`plax_cupy.codegen.PREAMBLE`:
``plax_nextafter``, ``plax_max``, ``plax_min``; and the special functions of
:mod:`plax_cupy.special_source`, included where called), so a table kernel and the generated
kernel of the same primitive give the same bits. :func:`primitive_elementwise` takes the
expression of a primitive from the generator itself (:func:`plax_cupy.codegen.elementwise_expr`).
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
    from plax_cupy import special_source
    source = special_source.helpers_for(expression) + f"""
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
    broadcast = cupy.broadcast_arrays(*operands)
    # (the result's shape is the broadcast one: ascontiguousarray gives a rank-0 operand a
    # dimension, as CuPy's and NumPy's do)
    out = cupy.empty(broadcast[0].shape, np.dtype(out_dtype))
    arrays = [cupy.ascontiguousarray(a) for a in broadcast]
    if out.size:
        source, name = elementwise_source(expression, tuple(dtypes.ctype(a.dtype) for a in arrays),
                                          dtypes.ctype(out_dtype))
        launch_raw(source, name, out.size, *arrays, out, np.int64(out.size))
    return out


def primitive_elementwise(primitive, *operands: "cupy.ndarray", **params) -> "cupy.ndarray":
    """The elementwise ``primitive`` over ``operands`` as one plax-compiled kernel whose
    expression is the generated kernels' own (:func:`plax_cupy.codegen.elementwise_expr`), so
    the kernel table gives ``jit``'s bits without CuPy's (flushing) ufuncs.

    Args:
      primitive: an elementwise primitive with one result.
      *operands: device arrays of one dtype the generator takes (not 16-bit: see
        :func:`elementwise`), broadcast together.
      **params: the primitive's parameters.

    Returns:
      A new C-contiguous device array of the result.

    Raises:
      plax_cupy.codegen.Unsupported: a primitive or dtype the generator does not express.

    Example:
      >>> primitive_elementwise(lax.erf_p, x)   # doctest: +SKIP
    """
    from plax.core.jaxpr import JaxprEqn, Var
    from plax.core.shaped_array import ShapedArray
    from plax_cupy import codegen
    shape = np.broadcast_shapes(*(a.shape for a in operands))  # (of the shapes only)
    avals = [ShapedArray(tuple(shape), np.dtype(a.dtype)) for a in operands]
    out_aval = primitive.abstract_eval(*avals, **params)
    if isinstance(out_aval, (list, tuple)):
        out_aval = out_aval[0]
    eqn = JaxprEqn(primitive, [Var(a) for a in avals], [Var(out_aval)], params)
    expression = codegen.elementwise_expr(eqn, [f"a{i}" for i in range(len(operands))])
    return elementwise(expression, out_aval.dtype, *operands)


#: the float types between whose single- and double-precision parts CuPy's ``astype``
#: converts with flushing instructions under ``-ftz=true`` (``cvt.ftz.f64.f32`` flushes a
#: float32 subnormal operand, ``cvt.rn.ftz.f32.f64`` a result that rounds to one)
_WIDE_FLOATS = (np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.complex64),
                np.dtype(np.complex128))


def _part_size(dtype) -> int:
    return dtype.itemsize // 2 if dtype.kind == "c" else dtype.itemsize


def astype(x: "cupy.ndarray", dtype) -> "cupy.ndarray":
    """``x.astype(dtype)`` that keeps float32 subnormals: a conversion between single- and
    double-precision floats or complex values (either way) is one plax-compiled kernel with the
    generator's conversion (:func:`plax_cupy.codegen.convert_expr`); any other conversion
    (integers, 16-bit floats, none at all) is CuPy's, which cannot flush a value there.

    Args:
      x: device array.
      dtype: the result's dtype.

    Returns:
      ``x`` itself where the dtype is already ``dtype``, else a new C-contiguous array.

    Example:
      >>> astype(cupy.asarray(np.float32([1e-40])), np.float64)   # doctest: +SKIP
    """
    from plax_cupy import codegen
    dtype = np.dtype(dtype)
    src = np.dtype(x.dtype)
    if src == dtype:
        return x
    if src in _WIDE_FLOATS and dtype in _WIDE_FLOATS and _part_size(src) != _part_size(dtype):
        return elementwise(codegen.convert_expr("a0", src, dtype), dtype, x)
    return x.astype(dtype)
