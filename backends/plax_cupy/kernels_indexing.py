"""GPU kernels of slicing, gather and the scatter family, with XLA's semantics (as the NumPy
backend's ``impls_indexing``): dynamic starts clamped so the window fits, gather's ``CLIP``,
``FILL_OR_DROP`` and ``PROMISE_IN_BOUNDS`` modes, scatters that drop out-of-bounds windows
unless the mode is ``CLIP``.

Everything runs on the device, in generated CUDA kernels: start and index vectors are read
(and clamped or bounds-checked) by the kernels, never on the host.

* dynamic_slice, dynamic_update_slice, gather: one kernel each, moving elements as words of
  their width (one source serves every dtype of a width, bfloat16's bits included);
* the scatters: a kernel computes each update element's target (-1 where dropped), a stable
  sort orders the targets (updates of one element keep their order), and a kernel combines
  each run of equal targets at its head, in order, writing every element once: deterministic,
  no atomics, the reference's ``ufunc.at`` order and per-step rounding (float16 and bfloat16
  included); a plain scatter keeps the last update, as the reference kernel does.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

import cupy

from plax import lax
from plax.lax.slicing import GatherScatterMode, gather_fill_value
from plax_cupy import codegen, dtypes
from plax_cupy.backend import BF16, Bf16Buffer
from plax_cupy.codegen_structural import coordinates
from plax_cupy.gather_index import gather_layout, gather_read, start_inside
from plax_cupy.kernels import kernel
from plax_cupy.kernels_shape import on_bits
from plax_cupy.kernels_special import launch_raw

_I64 = np.int64


@kernel(lax.slice_p)
@on_bits
def _slice(x, *, start_indices, limit_indices, strides):
    strides = strides or (1,) * len(start_indices)
    return x[tuple(slice(a, b, s) for a, b, s in zip(start_indices, limit_indices, strides))]


# ---------------------------------------------------------------- dynamic_slice, dynamic_update_slice

#: the C type that moves an element of each width (complex128: two 8-byte words)
_MOVERS = {1: "unsigned char", 2: "unsigned short", 4: "unsigned int", 8: "unsigned long long",
           16: "plax_pair64"}


def box_source(rank: int, itemsize: int, index_dtype) -> str:
    """CUDA C++ source of ``plax_box_read`` and ``plax_box_write``: copy a box of an array of
    ``rank`` axes out of it (dynamic_slice) or into it (dynamic_update_slice), one launch each.

    The box's start indices are device scalars of ``index_dtype``, read and clamped to
    ``[0, dim - size]`` by the kernel itself (XLA's rule), so the host never reads them;
    elements are moved as ``itemsize``-byte words. The parameters are
    ``(array, box, start_0.., dim_0.., size_0.., n)`` with ``n`` the box's element count.

    Example:
      >>> "plax_box_read" in box_source(2, 4, np.int32)
      True
    """
    index = np.dtype(index_dtype)
    ictype = dtypes.ctype(index)
    params = ", ".join([f"const {ictype}* __restrict__ s{d}" for d in range(rank)]
                       + [f"long long dim{d}" for d in range(rank)]
                       + [f"long long size{d}" for d in range(rank)] + ["long long n"])
    clamp = []
    for d in range(rank):
        clamp += [f"  const {ictype} v{d} = *s{d};",
                  f"  const long long lo{d} = {codegen.clamped_start(f'v{d}', index, f'dim{d} - size{d}')};"]
    offset = ["    long long rem = i, off = 0, stride = 1, k;"]
    for d in reversed(range(rank)):
        offset.append(f"    k = rem % size{d}; rem /= size{d}; off += (k + lo{d}) * stride; stride *= dim{d};")
    loop = ("  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;"
            " i += (long long)blockDim.x * gridDim.x) {")
    mover = _MOVERS[itemsize]
    lines = ["struct plax_pair64 { unsigned long long lo, hi; };"]
    for name, qual_a, qual_b, body in (("plax_box_read", "const ", "", "box[i] = a[off];"),
                                       ("plax_box_write", "", "const ", "a[off] = box[i];")):
        lines += [f'extern "C" __global__ void {name}({qual_a}{mover}* __restrict__ a, '
                  f"{qual_b}{mover}* __restrict__ box, {params}) {{",
                  *clamp, loop, *offset, f"    {body}", "  }", "}"]
    return "\n".join(lines) + "\n"


def _box_launch(name: str, array, box, starts) -> None:
    n = box.size
    if not n:
        return
    index_dtype = np.dtype(starts[0].dtype)
    source = box_source(array.ndim, array.dtype.itemsize, index_dtype)
    launch_raw(source, name, n, array, box,
               *[s if s.flags.c_contiguous else s.copy() for s in starts],
               *[np.int64(d) for d in array.shape], *[np.int64(d) for d in box.shape],
               np.int64(n))


@kernel(lax.dynamic_slice_p)
@on_bits
def _dynamic_slice(x, *starts, slice_sizes):
    """The box of ``slice_sizes`` at ``starts`` (device scalars, clamped so the box fits):
    one generated kernel, the starts read on the device."""
    if not x.ndim:
        return x.copy()
    x = x if x.flags.c_contiguous else cupy.ascontiguousarray(x)
    out = cupy.empty(tuple(slice_sizes), x.dtype)
    _box_launch("plax_box_read", x, out, starts)
    return out


@kernel(lax.dynamic_update_slice_p)
@on_bits
def _dynamic_update_slice(x, update, *starts):
    """``x`` with ``update`` written at ``starts`` (clamped so it fits): a copy and one
    generated kernel."""
    out = x.copy()
    if not x.ndim:
        out[...] = update
        return out
    update = update if update.flags.c_contiguous else cupy.ascontiguousarray(update)
    _box_launch("plax_box_write", out, update.astype(x.dtype, copy=False), starts)
    return out


def _fill_bits(dtype, fill_value, bf16: bool) -> list:
    """The bits of the scalar a ``FILL_OR_DROP`` gather gives out of bounds, as the unsigned
    words its mover type holds (two for 16-byte elements): ``fill_value`` in the operand's
    dtype, by default NaN, the lowest signed or highest unsigned integer, or True
    (:func:`plax.lax.slicing.gather_fill_value`)."""
    dtype = BF16 if bf16 else np.dtype(dtype)
    value = gather_fill_value(dtype, fill_value)
    words = np.ascontiguousarray(value.reshape(1)).view(np.dtype(f"u{min(dtype.itemsize, 8)}"))
    return [int(w) for w in words]


def gather_source(operand_shape, indices_shape, index_dtype, itemsize: int, *, dimension_numbers,
                  slice_sizes, mode, fill_bits) -> str:
    """CUDA C++ source of ``plax_gather``: XLA's gather of one signature in one kernel.

    Each thread computes output elements: it splits the element's position into batch and
    window coordinates, reads the batch's index vector (of ``index_dtype``, on the device),
    clamps the window's start so it fits (``CLIP``, ``PROMISE_IN_BOUNDS``) or writes the fill
    value where it does not (``FILL_OR_DROP``), and copies one ``itemsize``-byte word. The
    index arithmetic is :func:`plax_cupy.gather_index.gather_read`'s, which a gather fused into
    its reader's kernel uses too. Parameters: ``(operand, indices, out, n)``.

    Example:
      >>> from plax.lax.slicing import GatherDimensionNumbers
      >>> dn = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
      ...                             start_index_map=(0,))
      >>> "plax_gather" in gather_source((5, 3), (2, 1), np.int32, 4, dimension_numbers=dn,
      ...                                slice_sizes=(1, 3), mode=GatherScatterMode.CLIP,
      ...                                fill_bits=[0])
      True
    """
    out_shape, _, _ = gather_layout(len(operand_shape), indices_shape, dimension_numbers,
                                    slice_sizes)
    mover = _MOVERS[itemsize]
    ictype = dtypes.ctype(index_dtype)
    fill = mode == GatherScatterMode.FILL_OR_DROP
    names = (f"g{k}" for k in itertools.count())
    body: list = []
    off, inside = gather_read(body, coordinates("i", out_shape), operand_shape, indices_shape,
                              index_dtype, dimension_numbers=dimension_numbers,
                              slice_sizes=slice_sizes, index_value=lambda flat: f"idx[{flat}]",
                              fresh=lambda: next(names), bounds=fill)
    lines = ["struct plax_pair64 { unsigned long long lo, hi; };",
             f'extern "C" __global__ void plax_gather(const {mover}* __restrict__ a, '
             f"const {ictype}* __restrict__ idx, {mover}* __restrict__ out, long long n) {{",
             "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;"
             " i += (long long)blockDim.x * gridDim.x) {"]
    lines += ["    " + line for line in body]
    if inside is not None:
        if itemsize == 16:
            value = f"plax_pair64{{{fill_bits[0]}ULL, {fill_bits[1]}ULL}}"
        else:
            value = f"({mover}){fill_bits[0]}ULL"
        lines.append(f"    if {inside} out[i] = a[{off}]; else {{ const {mover} f = {value}; out[i] = f; }}")
    else:
        lines.append(f"    out[i] = a[{off}];")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


@kernel(lax.gather_p)
def _gather(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
           unique_indices, mode, fill_value):
    """XLA's gather: one window of ``slice_sizes`` per index vector, its start clamped (``CLIP``,
    ``PROMISE_IN_BOUNDS``) or, out of bounds, filled with ``fill_value`` (``FILL_OR_DROP``);
    one generated kernel (:func:`gather_source`), bfloat16 moved as its bits."""
    bf16 = isinstance(operand, Bf16Buffer)
    data = operand.bits if bf16 else operand
    data = data if data.flags.c_contiguous else cupy.ascontiguousarray(data)
    indices = indices if indices.flags.c_contiguous else cupy.ascontiguousarray(indices)
    source = gather_source(data.shape, indices.shape, indices.dtype, data.dtype.itemsize,
                           dimension_numbers=dimension_numbers, slice_sizes=tuple(slice_sizes),
                           mode=mode, fill_bits=_fill_bits(data.dtype, fill_value, bf16))
    shape, _, _ = gather_layout(data.ndim, indices.shape, dimension_numbers, slice_sizes)
    out = cupy.empty(shape, data.dtype)
    if out.size:
        launch_raw(source, "plax_gather", out.size, data, indices, out, np.int64(out.size))
    return Bf16Buffer(out) if bf16 else out


_gather.bf16 = "bits"


# ---------------------------------------------------------------- scatter

def scatter_targets_source(operand_shape, indices_shape, index_dtype, window, *,
                           dimension_numbers, mode) -> str:
    """CUDA C++ source of ``plax_scatter_targets``: the flat operand position each update
    element goes to, or -1 where its window is out of bounds and dropped (every mode but
    ``CLIP``, which clamps the start instead).

    Update elements are numbered as the reference kernel orders them: index vector major, then
    the window (``window``: the full-rank window shape, 1 on inserted and batching axes), the
    updates having been transposed so. Parameters: ``(indices, targets, m)``.

    Example:
      >>> from plax.lax.slicing import ScatterDimensionNumbers
      >>> dn = ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0,),
      ...                              scatter_dims_to_operand_dims=(0,))
      >>> "plax_scatter_targets" in scatter_targets_source((5,), (3, 1), np.int32, (1,),
      ...                                                 dimension_numbers=dn, mode=None)
      True
    """
    dn = dimension_numbers
    rank = len(operand_shape)
    batch_shape = tuple(indices_shape[:-1])
    k_len = indices_shape[-1]
    ictype = dtypes.ctype(index_dtype)
    index_map = list(dn.scatter_dims_to_operand_dims)
    lines = [f'extern "C" __global__ void plax_scatter_targets(const {ictype}* __restrict__ idx, '
             "long long* __restrict__ targets, long long m) {",
             "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m;"
             " i += (long long)blockDim.x * gridDim.x) {",
             "    long long rem = i;"]
    for d in reversed(range(rank)):
        lines.append(f"    const long long w{d} = rem % {window[d]}LL; rem /= {window[d]}LL;")
    lines += ["    const long long b = rem;", f"    const long long base = b * {k_len}LL;",
              "    bool inside = true; long long off = 0;"]
    batching = dict(zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims))
    for d in range(rank):
        hi = operand_shape[d] - window[d]
        if d in index_map:   # (a start read from the index vector: clamped, and tested)
            lines.append(f"    const {ictype} v{d} = idx[base + {index_map.index(d)}LL];")
            if mode != GatherScatterMode.CLIP:   # (out of bounds: dropped)
                lines.append(f"    inside = inside && {start_inside(f'v{d}', index_dtype, hi)};")
            # (clamped in every mode: the start tested above is the index as it is, and the
            # offset is made of one in bounds, so that no start far out of bounds overflows
            # the multiplication, undefined behaviour in C++ that a compiler may fold into an
            # in-bounds write; a dropped window's offset is not used)
            start = codegen.clamped_start(f"v{d}", index_dtype, hi)
        elif d in batching:   # (the index vector's position along the batch axis it follows)
            j = batching[d]
            start = f"((b / {math.prod(batch_shape[j + 1:])}LL) % {batch_shape[j]}LL)"
        else:
            start = "0LL"
        lines.append(f"    off += ({start} + w{d}) * {math.prod(operand_shape[d + 1:])}LL;")
    lines += ["    targets[i] = inside ? off : -1LL;", "  }", "}"]
    return "\n".join(lines) + "\n"


def _combine_expr(kind: str, dtype, acc: str, v: str) -> str:
    """The C expression combining stored elements ``acc`` and ``v`` of ``dtype`` into a stored
    element, as NumPy's ``ufunc.at`` does one step: float16/bfloat16 computed in float and
    rounded, integers wrapping, NaN winning min/max, booleans as logic."""
    dtype = np.dtype(dtype)
    if kind == "set":
        return v
    if kind in ("min", "max"):
        if dtypes.is_half(dtype):  # the chosen element keeps its bits
            a, b = codegen.load_expr(acc, dtype), codegen.load_expr(v, dtype)
            pick = "<" if kind == "min" else ">"
            # equal values (-0 < +0, as XLA): the AND of their bits for max (-0 only for two
            # -0s), the OR for min; equal nonzero halves have equal bits
            tie = (f"{dtypes.ctype(dtype)}{{(unsigned short)({acc}.bits "
                   f"{'&' if kind == 'max' else '|'} {v}.bits)}}")
            return (f"(({a}) != ({a}) ? {acc} : (({b}) != ({b}) ? {v} : (({a}) {pick} ({b}) ? "
                    f"{acc} : (({a}) == ({b}) ? {tie} : {v}))))")
        return f"plax_{kind}({acc}, {v})"
    if dtype.kind == "b":
        return f"({acc} {'||' if kind == 'add' else '&&'} {v})"
    if dtype.kind in "iu":
        wide = codegen._wide_unsigned(dtype)
        op = "+" if kind == "add" else "*"
        return f"({dtypes.ctype(dtype)})(({wide})({acc}) {op} ({wide})({v}))"
    op = "+" if kind == "add" else "*"
    return codegen.store_expr(f"({codegen.load_expr(acc, dtype)} {op} {codegen.load_expr(v, dtype)})",
                              dtype)


def scatter_combine_source(kind: str, dtype) -> str:
    """CUDA C++ source of ``plax_scatter_combine``: each run of equal targets (sorted, stable,
    so in update order) is combined by the thread at its head, in order, into the operand's
    element, which is written once: deterministic, no atomics, NumPy's ``ufunc.at`` order.
    Parameters: ``(out, sorted_targets, order, updates, m)``; a target of -1 is dropped.

    Example:
      >>> "plax_scatter_combine" in scatter_combine_source("add", np.float16)
      True
    """
    st = dtypes.ctype(dtype)
    return "\n".join([
        f'extern "C" __global__ void plax_scatter_combine({st}* __restrict__ out, '
        "const long long* __restrict__ keys, const long long* __restrict__ order, "
        f"const {st}* __restrict__ u, long long m) {{",
        "  for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < m;"
        " j += (long long)blockDim.x * gridDim.x) {",
        "    const long long key = keys[j];",
        "    if (key < 0 || (j > 0 && keys[j - 1] == key)) continue;",
        f"    {st} acc = out[key];",
        "    for (long long k = j; k < m && keys[k] == key; ++k) {",
        f"      const {st} v = u[order[k]];",
        f"      acc = {_combine_expr(kind, dtype, 'acc', 'v')};",
        "    }",
        "    out[key] = acc;",
        "  }",
        "}", ""])


def _scatter(kind: str):
    def scatter(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                unique_indices, mode):
        bf16 = isinstance(operand, Bf16Buffer)
        dtype = BF16 if bf16 else np.dtype(operand.dtype)
        data = operand.bits if bf16 else operand
        updates = updates.bits if isinstance(updates, Bf16Buffer) else updates
        dn = dimension_numbers
        rank = data.ndim
        dropped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
        scatter_axes = [i for i in range(updates.ndim) if i not in dn.update_window_dims]
        win = iter(updates.shape[d] for d in dn.update_window_dims)
        window = tuple(1 if i in dropped else next(win) for i in range(rank))
        out = cupy.ascontiguousarray(data).copy() if not data.flags.c_contiguous else data.copy()
        m = updates.size
        if m and out.size:  # (into an empty operand a clip would aim at -1: nothing to do)
            # update elements in the reference's order: index vector major, then the window
            u = cupy.ascontiguousarray(cupy.transpose(updates, scatter_axes + list(dn.update_window_dims)))
            indices = indices if indices.flags.c_contiguous else cupy.ascontiguousarray(indices)
            targets = cupy.empty(m, np.int64)
            launch_raw(scatter_targets_source(data.shape, indices.shape, indices.dtype, window,
                                              dimension_numbers=dn, mode=mode),
                       "plax_scatter_targets", m, indices, targets, np.int64(m))
            order = cupy.argsort(targets, kind="stable")
            keys = cupy.ascontiguousarray(targets[order])
            launch_raw(scatter_combine_source(kind, dtype), "plax_scatter_combine", m,
                       out, keys, order, u, np.int64(m))
        return Bf16Buffer(out) if bf16 else out
    scatter.bf16 = "bits"  # combined in float and rounded to bfloat16 per step, as NumPy does
    return scatter


kernel(lax.scatter_p)(_scatter("set"))
kernel(lax.scatter_add_p)(_scatter("add"))
kernel(lax.scatter_mul_p)(_scatter("mul"))
kernel(lax.scatter_min_p)(_scatter("min"))
kernel(lax.scatter_max_p)(_scatter("max"))
