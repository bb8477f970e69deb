"""NumPy's own loops, called natively from generated kernels, where a kernel must give
exactly NumPy's bits.

``log1p`` is one (:func:`plax_numba.codegen.reference_only`): NumPy's loops (SIMD on
AVX-512 machines) have no reproducible scalar equivalent in numba, and the samplers of
:mod:`plax.random` compute the inverse error function from ``log1p``, so a native loop
holding a sampler (``random.gamma``'s rejection loop, a small ``random.normal`` program's
whole-program kernel) calls NumPy's ``log1p`` loop here and stays bit-identical to the NumPy
backend and to its own reference tier.

The call is native: the kernel calls the C function NumPy's ufunc runs
(:mod:`plax_numba.numpy_loops`: an external symbol whose address the process registers with
LLVM's linker), with the same length and strides as ``np.log1p`` on the same array, so the
same code path and bits (NumPy's SIMD loops take a different path for a lone element than
inside an array: a scalar is a call of length 1, as ``np.log1p`` of a scalar is). No Python
object is touched, so the kernels keep ``nogil`` and get a native artifact
(:mod:`plax_numba.native_emit`) that loads without numba. (These were numba object-mode
calls, ~1-3 us each, holding the GIL, and kept the kernels on numba's loader.)

Arrays are passed flat (rank 1, any stride: the caller ravels and reshapes); rank-0 values
as scalars.
"""
from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from plax_numba import numpy_loops

# the loops' addresses, for numba's linker (compiling here, or loading from its disk cache)
numpy_loops.register(llvm)


def _call_loop(context, builder, ufunc: str, char: str, pointers, n, steps) -> None:
    """Emits a call of NumPy's ``ufunc`` loop for dtype ``char`` over ``n`` elements at
    ``pointers`` (input, output) with byte ``steps``, passing the loop's data pointer: the
    symbols of :mod:`plax_numba.numpy_loops`."""
    name, data_name = numpy_loops.symbol(ufunc, char), numpy_loops.data_symbol(ufunc, char)
    i8p = ir.IntType(8).as_pointer()
    intp = context.get_value_type(types.intp)
    fnty = ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), intp.as_pointer(),
                                           intp.as_pointer(), i8p])
    loop = cgutils.get_or_insert_function(builder.module, fnty, name)
    args = cgutils.alloca_once(builder, i8p, size=len(pointers))
    for i, p in enumerate(pointers):
        builder.store(builder.bitcast(p, i8p), builder.gep(args, [context.get_constant(
            types.intp, i)]))
    dims = cgutils.alloca_once_value(builder, n)
    step_array = cgutils.alloca_once(builder, intp, size=len(steps))
    for i, s in enumerate(steps):
        builder.store(s, builder.gep(step_array, [context.get_constant(types.intp, i)]))
    data = builder.module.globals.get(data_name)
    if data is None:  # (an external global: the cell numpy_loops.register gives the linker)
        data = ir.GlobalVariable(builder.module, i8p, data_name)
    builder.call(loop, [args, dims, step_array, builder.load(data)])


def _char(dtype) -> str:
    return np.dtype(str(dtype)).char


@intrinsic
def _log1p_into(typingctx, x, out):
    """``out[:] = np.log1p(x)`` by NumPy's loop; both rank-1 arrays of one float dtype and
    length."""
    if not (isinstance(x, types.Array) and isinstance(out, types.Array) and x.ndim == 1
            and out.ndim == 1 and x.dtype == out.dtype
            and x.dtype in (types.float32, types.float64)):
        return None
    char = _char(x.dtype)

    def codegen(context, builder, sig, args):
        xa = context.make_array(sig.args[0])(context, builder, args[0])
        oa = context.make_array(sig.args[1])(context, builder, args[1])
        n = builder.extract_value(xa.shape, 0)
        steps = [builder.extract_value(xa.strides, 0), builder.extract_value(oa.strides, 0)]
        _call_loop(context, builder, "log1p", char, [xa.data, oa.data], n, steps)
        return context.get_dummy_value()

    return types.none(x, out), codegen


@intrinsic
def _log1p_scalar(typingctx, x):
    """``np.log1p(x)`` of a float scalar by NumPy's loop (one element)."""
    if x not in (types.float32, types.float64):
        return None
    char = _char(x)

    def codegen(context, builder, sig, args):
        ty = context.get_value_type(sig.args[0])
        src = cgutils.alloca_once_value(builder, args[0])
        dst = cgutils.alloca_once(builder, ty)
        size = context.get_constant(types.intp, np.dtype(char).itemsize)
        _call_loop(context, builder, "log1p", char, [src, dst],
                   context.get_constant(types.intp, 1), [size, size])
        return builder.load(dst)

    return x(x), codegen


@njit(cache=True, nogil=True, inline="always")
def log1p_into(x, out):
    """``out[:] = np.log1p(x)`` by NumPy's loop, for rank-1 float32 or float64 arrays of one
    length (any stride): a chunk of a split cluster (:mod:`plax_numba.codegen_split`)."""
    _log1p_into(x, out)


@njit(cache=True, nogil=True)
def log1p_f32(x):
    """NumPy's ``log1p`` of a rank-1 float32 array."""
    y = np.empty(x.shape[0], np.float32)
    _log1p_into(x, y)
    return y


@njit(cache=True, nogil=True)
def log1p_f64(x):
    """NumPy's ``log1p`` of a rank-1 float64 array."""
    y = np.empty(x.shape[0], np.float64)
    _log1p_into(x, y)
    return y


@njit(cache=True, nogil=True)
def log1p_scalar_f32(x):
    """NumPy's ``log1p`` of a float32 scalar."""
    return _log1p_scalar(np.float32(x))


@njit(cache=True, nogil=True)
def log1p_scalar_f64(x):
    """NumPy's ``log1p`` of a float64 scalar."""
    return _log1p_scalar(np.float64(x))
