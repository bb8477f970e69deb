"""GPU kernel of ``conv_general_dilated``: one generated CUDA kernel per call, or an im2col
copy and one cuBLAS product where each output sums many terms.

**Direct kernel** (:func:`conv_source`; most convolutions): one thread per output element,
which walks its window and its group's input features and accumulates ``lhs * rhs``, reading
both operands in their own layouts and writing the result in the output's (no transposes, no
padded or dilated copy: padding and lhs-dilation holes are skipped by index arithmetic, as the
window kernels of ``kernels_windows`` skip them). Every dimension numbers, strides, padding
(negative crops), lhs and rhs dilation, feature and batch group count the primitive takes;
accumulation in the compute dtype of :func:`plax.lax.convolution.conv_compute_dtype` (float32
for float16/bfloat16, whose bits are read as they are; int64 for booleans; integers wrap
through their unsigned type), compiled by plax's NVRTC call (``-ftz=false``: subnormal partial
sums are kept). One launch, where the previous per-offset products counted one product and one
accumulation per kernel offset (8 launches more for a 3x3 kernel).

**Implicit GEMM** (:func:`gather_source`, :func:`_via_gemm`; float16, bfloat16, float32 and
float64 where each output sums at least :data:`GEMM_MIN_TERMS` products over at least
:data:`GEMM_MIN_FEATURES` output features per group, or more than :data:`DIRECT_MAX_TERMS`):
one generated gather kernel writes the im2col matrix straight from the operand in its own
layout (strides, padding, lhs and rhs dilation, feature and batch groups by index arithmetic;
zeros for padding and holes; the 16-bit types as their bits), and one batched cuBLAS product
per call contracts it with the kernel for every group at once -- the half-precision types on
tensor cores with float32 accumulation, as ``dot_general``'s (:func:`plax_cupy.kernels_dot`).
The product's form follows the layouts so that it needs no copy where it can: ``kernel @
columns`` (``(G, O/G, K) @ (G, K, N*P)``) where the output feature axis is the kernel's first
and not the result's last (OIHW into NCHW: the result as it comes for a batch of one),
``rows @ kernel`` (``(G, N*P, K) @ (G, K, O/G)``) otherwise (HWIO into NHWC: as it comes,
without groups). Any other layout costs one copy of the kernel or of the result. Launches: the
gather and the product (two), plus those copies.

**im2col through CuPy** (:func:`_via_im2col`): the other dtypes (integers, booleans,
complex) where an output sums more than :data:`DIRECT_MAX_TERMS` products: the window view
(:func:`plax.lax.convolution.window_view`) copied into the im2col matrix and contracted in one
batched ``cupy.matmul``.

The thresholds are guesses, not yet measured on a GPU (docs/gpu.md says how to tune them).

The values are the reference kernel's (``plax_numpy.impls_convolution``) to the rounding of a
different summation order.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import numpy as np

import cupy

from plax.lax.convolution import (conv_compute_dtype, conv_general_dilated_p, conv_output_shape,
                                  dilate_and_pad,
                                  from_channels_last, to_channels_last, window_view)
from plax_cupy import codegen, dtypes
from plax_cupy.backend import BF16, Bf16Buffer, narrow_bf16, widen_bf16
from plax_cupy.kernels import kernel
from plax_cupy.kernels_dot import matmul

#: above this many products per output element (window positions times input features per
#: group), the im2col copy and one cuBLAS product replace the direct kernel
DIRECT_MAX_TERMS = 1024
#: from this many products per output element, and :data:`GEMM_MIN_FEATURES` output features
#: per group, the implicit GEMM (gather and cuBLAS) replaces the direct kernel
GEMM_MIN_TERMS = 128
#: the fewest output features per group for the implicit GEMM below :data:`DIRECT_MAX_TERMS`
#: (a depthwise convolution would be a matrix-vector product: the direct kernel serves it)
GEMM_MIN_FEATURES = 16
#: the largest im2col matrix (elements) the implicit GEMM writes; larger ones run directly
IM2COL_MAX_ELEMENTS = 1 << 28
#: the operand dtypes of the implicit GEMM (results: the same, or float32 for 16-bit floats)
GEMM_DTYPES = ("float16", "bfloat16", "float32", "float64")
#: the unsigned C type the gather moves each element as, by item size (bits are copied as
#: they are; the zero pattern is every type's +0)
_BITS_CTYPE = {2: "unsigned short", 4: "unsigned int", 8: "unsigned long long"}
_BITS_DTYPE = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _c_strides(shape) -> list[int]:
    return [math.prod(shape[a + 1:]) for a in range(len(shape))]


def conv_source(lhs_dtype, rhs_dtype, out_dtype, lhs_shape, rhs_shape, out_shape, *,
                window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
                feature_group_count: int, batch_group_count: int) -> tuple[str, str]:
    """The CUDA source and kernel name of one convolution, shapes and parameters baked in; the
    kernel takes ``(lhs, rhs, out, n)``: C-contiguous operands and result (bfloat16 as its
    bits), ``n`` result elements, one thread per result element (grid-stride).

    Args:
      lhs_dtype, rhs_dtype: the operands' dtypes.
      out_dtype: the result's dtype (``preferred_element_type`` or the operands').
      lhs_shape, rhs_shape, out_shape: the shapes, laid out as ``dimension_numbers`` says.
      window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
        feature_group_count, batch_group_count: the primitive's parameters.

    Returns:
      ``(source, name)``.

    Example:
      >>> from plax.lax.convolution import ConvDimensionNumbers
      >>> dn = ConvDimensionNumbers((0, 1, 2), (0, 1, 2), (0, 1, 2))
      >>> conv_source(np.float32, np.float32, np.float32, (1, 1, 5), (1, 1, 3), (1, 1, 3),
      ...             window_strides=(1,), padding=((0, 0),), lhs_dilation=(1,),
      ...             rhs_dilation=(1,), dimension_numbers=dn, feature_group_count=1,
      ...             batch_group_count=1)[1][:10]
      'plax_conv_'
    """
    lhs_dtype, rhs_dtype, out_dtype = map(np.dtype, (lhs_dtype, rhs_dtype, out_dtype))
    compute = conv_compute_dtype(out_dtype)
    ls, rs, os_ = (tuple(s) for s in dimension_numbers)
    nsp = len(lhs_shape) - 2
    key = repr((lhs_dtype.str, rhs_dtype.str, out_dtype.str, tuple(lhs_shape), tuple(rhs_shape),
                tuple(out_shape), tuple(window_strides), tuple(map(tuple, padding)),
                tuple(lhs_dilation), tuple(rhs_dilation), ls, rs, os_, feature_group_count,
                batch_group_count, str(lhs_dtype), str(rhs_dtype), str(out_dtype)))
    name = "plax_conv_" + hashlib.sha1(key.encode()).hexdigest()[:12]
    xs, ws = _c_strides(lhs_shape), _c_strides(rhs_shape)
    n_out, o_total = out_shape[os_[0]], out_shape[os_[1]]
    cg = rhs_shape[rs[1]]                       # input features per group
    per_fgroup = o_total // feature_group_count  # output features per feature group
    per_bgroup = o_total // batch_group_count    # output features per batch group
    if compute.kind in "iub":  # integers wrap: products and sums in 64-bit unsigned, narrowed
        acc_t = "unsigned long long"
        acc_init, term = "0ull", "a * b"
        acc_value = f"(({dtypes.ctype(compute)})({dtypes.unsigned_ctype(compute)})acc)"
    else:
        acc_t = dtypes.value_ctype(compute)
        acc_init = codegen.c_literal(0, compute)
        term, acc_value = "a * b", "acc"

    def load(ptr: str, index: str, dtype) -> str:
        value = codegen.load_expr(f"{ptr}[{index}]", dtype)
        src = np.dtype(np.float32) if dtypes.is_half(dtype) else dtype
        return codegen.convert_expr(value, src, compute)

    lines = [
        f'extern "C" __global__ void {name}(const {dtypes.ctype(lhs_dtype)}* __restrict__ x,',
        f"    const {dtypes.ctype(rhs_dtype)}* __restrict__ w, "
        f"{dtypes.ctype(out_dtype)}* __restrict__ out, long long n) {{",
        "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;",
        "       i += (long long)blockDim.x * gridDim.x) {",
        "    long long rem = i;"]
    for a in reversed(range(len(out_shape))):
        lines.append(f"    const long long c{a} = rem % {out_shape[a]}LL; rem /= {out_shape[a]}LL;")
    lines += [
        f"    const long long o = c{os_[1]};",
        # the group of ``o``: its feature group picks input features, its batch group the batch
        f"    const long long x_base = ((o / {per_bgroup}LL) * {n_out}LL + c{os_[0]}) * {xs[ls[0]]}LL"
        f" + (o / {per_fgroup}LL) * {cg * xs[ls[1]]}LL;",
        f"    const long long w_base = o * {ws[rs[0]]}LL;",
        f"    {acc_t} acc = {acc_init};"]
    indent = "    "
    x_off, w_off = "x_base", "w_base"
    for d in range(nsp):
        size, ld = lhs_shape[ls[2 + d]], lhs_dilation[d]
        window = rhs_shape[rs[2 + d]]
        lines += [
            f"{indent}for (long long k{d} = 0; k{d} < {window}LL; ++k{d}) {{",
            f"{indent}  const long long q{d} = c{os_[2 + d]} * {window_strides[d]}LL + k{d} * "
            f"{rhs_dilation[d]}LL - ({padding[d][0]}LL);",
            f"{indent}  if (q{d} < 0 || q{d} > {(size - 1) * ld}LL"
            + (f" || q{d} % {ld}LL != 0" if ld != 1 else "") + ") continue;",
            f"{indent}  const long long xo{d} = {x_off} + (q{d} / {ld}LL) * {xs[ls[2 + d]]}LL;",
            f"{indent}  const long long wo{d} = {w_off} + k{d} * {ws[rs[2 + d]]}LL;"]
        indent += "  "
        x_off, w_off = f"xo{d}", f"wo{d}"
    lines += [
        f"{indent}for (long long ci = 0; ci < {cg}LL; ++ci) {{",
        f"{indent}  const {acc_t if compute.kind in 'iub' else dtypes.value_ctype(compute)} "
        f"a = {load('x', f'{x_off} + ci * {xs[ls[1]]}LL', lhs_dtype)};",
        f"{indent}  const {acc_t if compute.kind in 'iub' else dtypes.value_ctype(compute)} "
        f"b = {load('w', f'{w_off} + ci * {ws[rs[1]]}LL', rhs_dtype)};",
        f"{indent}  acc = acc + {term};",
        f"{indent}}}"]
    for d in reversed(range(nsp)):
        indent = indent[:-2]
        lines.append(f"{indent}}}")
    result = codegen.convert_expr(acc_value, compute, out_dtype)
    lines += [f"    out[i] = {codegen.store_expr(result, out_dtype)};", "  }", "}", ""]
    return "\n".join(lines), name


@dataclass(frozen=True)
class GemmPlan:
    """How :func:`_via_gemm` computes one convolution: the im2col matrix's shape and the form
    of the product.

    Attributes:
      groups: ``G``, the feature or batch group count (one of them is 1).
      rows: ``N/bg`` times the output's spatial size: one row per output position.
      k: products per output (window positions times input features per group).
      features: output features per group (``O/G``).
      kernel_first: the product is ``kernel @ columns`` (the matrix is ``(G, k, rows)``) rather
        than ``rows @ kernel`` (``(G, rows, k)``).
      k_axes: the kernel's axes that make up ``k``, in its memory order (the gather writes
        ``k`` in this order, so the kernel reshapes into it without a copy).
    """

    groups: int
    rows: int
    k: int
    features: int
    kernel_first: bool
    k_axes: tuple


def gemm_plan(lhs_shape, rhs_shape, out_shape, dimension_numbers, feature_group_count: int,
              batch_group_count: int) -> GemmPlan:
    """The :class:`GemmPlan` of a convolution (shapes in their layouts).

    Example:
      >>> from plax.lax.convolution import ConvDimensionNumbers
      >>> dn = ConvDimensionNumbers((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))  # NHWC, HWIO
      >>> gemm_plan((2, 8, 8, 4), (3, 3, 4, 16), (2, 8, 8, 16), dn, 1, 1)
      GemmPlan(groups=1, rows=128, k=36, features=16, kernel_first=False, k_axes=(0, 1, 2))
    """
    _, rs, os_ = (tuple(s) for s in dimension_numbers)
    groups = feature_group_count * batch_group_count
    k_axes = tuple(a for a in range(len(rhs_shape)) if a != rs[0])
    return GemmPlan(groups=groups,
                    rows=out_shape[os_[0]] * math.prod(out_shape[a] for a in os_[2:]),
                    k=math.prod(rhs_shape[a] for a in k_axes),
                    features=rhs_shape[rs[0]] // groups, k_axes=k_axes,
                    # (a channels-last result comes out of ``rows @ kernel`` as it is)
                    kernel_first=rs[0] == 0 and os_[1] != len(out_shape) - 1)


def gather_source(itemsize: int, lhs_shape, rhs_shape, out_shape, *, window_strides, padding,
                  lhs_dilation, rhs_dilation, dimension_numbers, feature_group_count: int,
                  batch_group_count: int) -> tuple[str, str]:
    """The CUDA source and kernel name of the im2col gather of :func:`_via_gemm`: the kernel
    takes ``(x, cols, n)``, the operand's C-contiguous memory and the matrix (elements moved as
    unsigned integers of ``itemsize`` bytes), ``n`` matrix elements, one thread per element
    (grid-stride), laid out as :func:`gemm_plan` says.

    Args:
      itemsize: the operand's bytes per element (2, 4 or 8).
      lhs_shape, rhs_shape, out_shape: the shapes, laid out as ``dimension_numbers`` says.
      window_strides, padding, lhs_dilation, rhs_dilation, dimension_numbers,
        feature_group_count, batch_group_count: the primitive's parameters.

    Returns:
      ``(source, name)``.

    Example:
      >>> from plax.lax.convolution import ConvDimensionNumbers
      >>> dn = ConvDimensionNumbers((0, 1, 2), (0, 1, 2), (0, 1, 2))
      >>> gather_source(4, (1, 1, 5), (1, 1, 3), (1, 1, 3), window_strides=(1,),
      ...               padding=((0, 0),), lhs_dilation=(1,), rhs_dilation=(1,),
      ...               dimension_numbers=dn, feature_group_count=1, batch_group_count=1)[1][:16]
      'plax_conv_gather'
    """
    ls, rs, os_ = (tuple(s) for s in dimension_numbers)
    plan = gemm_plan(lhs_shape, rhs_shape, out_shape, dimension_numbers, feature_group_count,
                     batch_group_count)
    key = repr((itemsize, tuple(lhs_shape), tuple(rhs_shape), tuple(out_shape),
                tuple(window_strides), tuple(map(tuple, padding)), tuple(lhs_dilation),
                tuple(rhs_dilation), ls, rs, os_, feature_group_count, batch_group_count))
    name = "plax_conv_gather_" + hashlib.sha1(key.encode()).hexdigest()[:12]
    bits = _BITS_CTYPE[itemsize]
    nsp = len(lhs_shape) - 2
    xs = _c_strides(lhs_shape)
    out_sp = [out_shape[a] for a in os_[2:]]
    cg = rhs_shape[rs[1]]
    batch_per_group = out_shape[os_[0]]
    lines = [
        f'extern "C" __global__ void {name}(const {bits}* __restrict__ x,',
        f"    {bits}* __restrict__ cols, long long n) {{",
        "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;",
        "       i += (long long)blockDim.x * gridDim.x) {",
        "    long long rem = i;"]
    # the matrix's index, innermost first: (G, rows, k) or (G, k, rows)
    inner = [("r", plan.rows), ("kk", plan.k)] if plan.kernel_first else [("kk", plan.k), ("r", plan.rows)]
    for var, size in inner:
        lines.append(f"    long long {var} = rem % {size}LL; rem /= {size}LL;")
    lines.append("    const long long g = rem;")
    # k: the kernel's non-output axes in memory order, the last fastest
    for a in reversed(plan.k_axes):
        part = "ci" if a == rs[1] else f"k{rs.index(a) - 2}"
        lines.append(f"    const long long {part} = kk % {rhs_shape[a]}LL; kk /= {rhs_shape[a]}LL;")
    # a row: the output batch entry within its group, then the output position, the last fastest
    for d in reversed(range(nsp)):
        lines.append(f"    const long long o{d} = r % {out_sp[d]}LL; r /= {out_sp[d]}LL;")
    batch = f"g * {batch_per_group}LL + r" if batch_group_count > 1 else "r"
    feature = f"g * {cg}LL + ci" if feature_group_count > 1 else "ci"
    lines += [f"    long long off = ({batch}) * {xs[ls[0]]}LL + ({feature}) * {xs[ls[1]]}LL;",
              "    bool inside = true;"]
    for d in range(nsp):
        size, ld = lhs_shape[ls[2 + d]], lhs_dilation[d]
        lines += [
            f"    const long long q{d} = o{d} * {window_strides[d]}LL + k{d} * {rhs_dilation[d]}LL"
            f" - ({padding[d][0]}LL);",
            f"    if (q{d} < 0 || q{d} > {(size - 1) * ld}LL"
            + (f" || q{d} % {ld}LL != 0" if ld != 1 else "") + ") inside = false;",
            f"    else off += (q{d} / {ld}LL) * {xs[ls[2 + d]]}LL;"]
    lines += [f"    cols[i] = inside ? x[off] : ({bits})0;", "  }", "}", ""]
    return "\n".join(lines), name


def _gemm_applies(lhs_dtype, out_dtype, plan: GemmPlan, terms: int) -> bool:
    """Whether the implicit GEMM computes this convolution (dtypes, thresholds, memory)."""
    lhs_dtype, out_dtype = np.dtype(lhs_dtype), np.dtype(out_dtype)
    if lhs_dtype.name not in GEMM_DTYPES or out_dtype.name not in (lhs_dtype.name, "float32"):
        return False
    if out_dtype != lhs_dtype and lhs_dtype.itemsize != 2:
        return False
    if plan.groups * plan.rows * plan.k > IM2COL_MAX_ELEMENTS:
        return False
    return terms > DIRECT_MAX_TERMS or (terms >= GEMM_MIN_TERMS
                                        and plan.features >= GEMM_MIN_FEATURES)


def _via_gemm(lhs, rhs, out_dtype, out_shape, plan: GemmPlan, params: dict):
    """The implicit GEMM (module docstring): the gather kernel, one batched cuBLAS product, and
    a copy of the kernel or of the result only where their layouts need one."""
    from plax_cupy import runtime
    from plax_cupy.kernels_dot import _product
    from plax_cupy.kernels_special import launch_raw
    in_dtype = np.dtype(lhs.dtype)
    x, w = _bits(lhs), _bits(rhs)
    bits = _BITS_DTYPE[in_dtype.itemsize]
    g, rows, k, f = plan.groups, plan.rows, plan.k, plan.features
    cols = cupy.empty((g, k, rows) if plan.kernel_first else (g, rows, k), bits)
    source, name = gather_source(in_dtype.itemsize, lhs.shape, rhs.shape, out_shape, **params)
    launch_raw(source, name, cols.size, x.view(bits), cols, np.int64(cols.size))
    rs, os_ = tuple(params["dimension_numbers"][1]), tuple(params["dimension_numbers"][2])
    store = w.dtype  # the operands' storage (bfloat16: its bits), as dot_general hands them over
    cols = cols.view(store)
    # the kernel as (G, f, k) (kernel first: its output axis leads, a view) or (G, k, f): its
    # output axis split into (g, f) (a view), then moved into place (a copy, unless in place)
    o_axis = rs[0]
    split = w.reshape(w.shape[:o_axis] + (g, f) + w.shape[o_axis + 1:])
    at = [a if a < o_axis else a + 1 for a in plan.k_axes]  # the k axes in ``split``
    order = [o_axis, o_axis + 1] + at if plan.kernel_first else [o_axis] + at + [o_axis + 1]
    wk = cupy.transpose(split, order)
    if not wk.flags.c_contiguous:
        wk = cupy.ascontiguousarray(wk)
        runtime.note_launch()
    a, b = (wk.reshape(g, f, k), cols) if plan.kernel_first else (cols, wk.reshape(g, k, f))
    product = _product(a, b, in_dtype, np.dtype(out_dtype), g, a.shape[1], b.shape[2], k, None)
    runtime.note_launch()
    # the result's axes: (g, f, n, spatial...) or (g, n, spatial..., f); the output's memory
    # order with its feature axis as (g, f)
    nsp = len(out_shape) - 2
    out_sp = [out_shape[a] for a in os_[2:]]
    n = out_shape[os_[0]]
    named = (["g", "f", "n"] + [f"s{d}" for d in range(nsp)] if plan.kernel_first
             else ["g", "n"] + [f"s{d}" for d in range(nsp)] + ["f"])
    sizes = dict(g=g, f=f, n=n, **{f"s{d}": out_sp[d] for d in range(nsp)})
    want = []
    for axis in range(len(out_shape)):
        want += (["n"] if axis == os_[0] else ["g", "f"] if axis == os_[1]
                 else [f"s{os_.index(axis) - 2}"])
    order = [named.index(a) for a in want]
    moved = [i for i in order if sizes[named[i]] != 1]  # (axes of size 1 move for free)
    if moved == sorted(moved):
        out = product.reshape(out_shape)
    else:
        result = product.reshape([sizes[a] for a in named])
        out = cupy.ascontiguousarray(cupy.transpose(result, order)).reshape(out_shape)
        runtime.note_launch()
    return Bf16Buffer(out) if np.dtype(out_dtype) == BF16 else out


def _im2col_conv(xg, wg, nsp, strides, rhs_dilation, out_sp):
    """Every group at once: ``xg`` ``(G, N, spatial..., C)`` already dilated and padded, ``wg``
    ``(G, window..., C, O)``; returns ``(G, N * prod(out_sp), O)``."""
    groups, n, c, o = xg.shape[0], xg.shape[1], xg.shape[-1], wg.shape[-1]
    window = wg.shape[1:1 + nsp]
    rows = n * math.prod(out_sp)
    # im2col: (G, N, out..., C) + window -> (G, rows, window..., C) in one copy, one product
    view = window_view(xg, tuple(range(2, 2 + nsp)), window, strides, rhs_dilation, out_sp,
                       xp=cupy)
    last = view.ndim - 1 - nsp  # C's axis in the view, before the window axes
    cols = cupy.moveaxis(view, last, -1).reshape(groups, rows, math.prod(window) * c)
    return matmul(cols, wg.reshape(groups, math.prod(window) * c, o))  # (capturable: kernels_dot)


@kernel(conv_general_dilated_p)
def conv_general_dilated(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                         dimension_numbers, feature_group_count: int, batch_group_count: int,
                         precision, preferred_element_type):
    """A general dilated convolution on the device (any dimension numbers, strides, padding,
    lhs and rhs dilation, feature and batch groups): one generated kernel, or an im2col copy and
    one cuBLAS product where each output sums more than :data:`DIRECT_MAX_TERMS` products.

    Args:
      lhs, rhs: device arrays (bfloat16 as :class:`~plax_cupy.backend.Bf16Buffer` bits) laid
        out as ``dimension_numbers`` says; the other parameters are the primitive's
        (``plax.lax.conv_general_dilated``).

    Returns:
      The convolution, laid out as the output spec of ``dimension_numbers``, of dtype
      ``preferred_element_type`` (else ``lhs``'s); bfloat16 as a ``Bf16Buffer``.

    Example:
      >>> conv_general_dilated(x, w, window_strides=(1, 1), padding=((0, 0), (0, 0)), ...)
    """
    del precision  # float32 products are float32 (TF32 off), as dot_general's
    params = dict(window_strides=tuple(window_strides), padding=tuple(map(tuple, padding)),
                  lhs_dilation=tuple(lhs_dilation), rhs_dilation=tuple(rhs_dilation),
                  dimension_numbers=dimension_numbers,
                  feature_group_count=feature_group_count, batch_group_count=batch_group_count)
    out_dtype = np.dtype(preferred_element_type or lhs.dtype)
    out_shape = conv_output_shape(lhs.shape, rhs.shape, params["window_strides"],
                                  params["padding"], params["lhs_dilation"],
                                  params["rhs_dilation"], dimension_numbers, batch_group_count)
    out_store = dtypes.storage_dtype(out_dtype)
    nsp = lhs.ndim - 2
    rs = dimension_numbers[1]
    terms = rhs.shape[rs[1]] * math.prod(rhs.shape[a] for a in rs[2:])
    if math.prod(out_shape) and terms:
        plan = gemm_plan(lhs.shape, rhs.shape, out_shape, dimension_numbers,
                         feature_group_count, batch_group_count)
        if _gemm_applies(lhs.dtype, out_dtype, plan, terms):
            return _via_gemm(lhs, rhs, out_dtype, out_shape, plan, params)
    if terms > DIRECT_MAX_TERMS and math.prod(out_shape):
        return _via_im2col(lhs, rhs, out_dtype, nsp, **params)
    out = cupy.empty(out_shape, out_store)
    if out.size and not (lhs.size and rhs.size):  # an empty sum: zeros
        out = cupy.zeros(out_shape, out_store)
    elif out.size:
        from plax_cupy.kernels_special import launch_raw
        source, name = conv_source(lhs.dtype, rhs.dtype, out_dtype, lhs.shape, rhs.shape,
                                   out_shape, **params)
        launch_raw(source, name, out.size, _bits(lhs), _bits(rhs), out, np.int64(out.size))
    return Bf16Buffer(out) if out_dtype == BF16 else out


conv_general_dilated.bf16 = "bits"  # the kernel reads bfloat16 bits itself


def _bits(x) -> "cupy.ndarray":
    """The C-contiguous device memory of an operand (a bfloat16 buffer's bits)."""
    return cupy.ascontiguousarray(x.bits if isinstance(x, Bf16Buffer) else x)


def _via_im2col(lhs, rhs, out_dtype, nsp, *, window_strides, padding, lhs_dilation,
                rhs_dilation, dimension_numbers, feature_group_count, batch_group_count):
    """The convolution channels last, the operand dilated and padded in one strided copy, the
    im2col matrix and one batched product (:func:`_im2col_conv`); bfloat16 through float32."""
    lhs, rhs = (widen_bf16(a) if isinstance(a, Bf16Buffer) else a for a in (lhs, rhs))
    wide_out = np.dtype(np.float32) if out_dtype == BF16 else out_dtype
    compute = conv_compute_dtype(out_dtype)
    x, w = to_channels_last(lhs, rhs, dimension_numbers, compute, xp=cupy)
    x = dilate_and_pad(x, tuple(range(1, 1 + nsp)), lhs_dilation, padding, 0, xp=cupy)
    n, c, o = x.shape[0], x.shape[-1], w.shape[-1]
    g, b = feature_group_count, batch_group_count
    groups = g * b  # one of them is 1
    window = w.shape[:nsp]
    spans = [(k - 1) * d + 1 for k, d in zip(window, rhs_dilation)]
    out_sp = tuple((x.shape[1 + i] - spans[i]) // window_strides[i] + 1
                   if x.shape[1 + i] >= spans[i] else 0 for i in range(nsp))
    ng, og = n // b, o // groups
    if b > 1:  # batch groups: group j holds the batch entries j * ng ... (j + 1) * ng - 1
        xg = x.reshape((b, ng) + x.shape[1:])
    else:      # feature groups: group j holds the channels j * cg ... (j + 1) * cg - 1
        xg = cupy.moveaxis(x.reshape(x.shape[:-1] + (g, c // g)), -2, 0)
    # group j's outputs are the features j * og ... (j + 1) * og - 1
    wg = cupy.moveaxis(w.reshape(window + (w.shape[-2], groups, og)), -2, 0)
    flat = _im2col_conv(cupy.ascontiguousarray(xg), cupy.ascontiguousarray(wg), nsp,
                        window_strides, rhs_dilation, out_sp)
    out = cupy.moveaxis(flat.reshape((groups, ng) + out_sp + (og,)), 0, -2)
    out = from_channels_last(out.reshape((ng,) + out_sp + (o,)), dimension_numbers, wide_out,
                             xp=cupy)
    return narrow_bf16(out) if out_dtype == BF16 else out
