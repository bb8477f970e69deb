"""GPU kernels of slicing, gather and the scatter family, with XLA's semantics (as the NumPy
backend's ``impls_indexing``): dynamic starts clamped so the window fits, gather's ``CLIP``,
``FILL_OR_DROP`` and ``PROMISE_IN_BOUNDS`` modes, scatters that drop out-of-bounds windows
unless the mode is ``CLIP``.

Everything runs on the device: start indices are device arrays and are never read on the host.
dynamic_slice, dynamic_update_slice and gather are one generated CUDA kernel each (the
start indices read and clamped by the kernel; elements moved as words of their width, so one
source serves every dtype of a width, bfloat16's bits included). A scatter that combines (add, mul, min, max) sorts its targets (a stable sort, so
updates of one element keep their order) and combines the updates of each element with a
segmented scan of ``log2(n)`` steps, then writes each element once: deterministic, no atomics,
every dtype including float16, complex and booleans. A plain scatter writes, of several updates
to one element, the last one, as the reference kernel does.
"""
from __future__ import annotations

import math

import numpy as np

import cupy

from plax import lax
from plax.lax.slicing import GatherScatterMode
from plax_cupy import dtypes
from plax_cupy.backend import BF16, Bf16Buffer
from plax_cupy.kernels import kernel
from plax_cupy.kernels_shape import on_bits
from plax_cupy.kernels_sort import maximum, minimum

_I64 = np.int64


@kernel(lax.slice_p)
@on_bits
def slice_(x, *, start_indices, limit_indices, strides):
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
        clamp.append(f"  const long long hi{d} = dim{d} - size{d};")
        if index.kind == "u":  # compare before converting: large values must not wrap
            clamp.append(f"  const long long lo{d} = (unsigned long long)*s{d} > (unsigned long long)hi{d}"
                         f" ? hi{d} : (long long)*s{d};")
        else:
            clamp.append(f"  const long long v{d} = (long long)*s{d};")
            clamp.append(f"  const long long lo{d} = v{d} < 0 ? 0 : (v{d} > hi{d} ? hi{d} : v{d});")
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
    from plax_cupy.kernels_special import launch_raw
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
def dynamic_slice(x, *starts, slice_sizes):
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
def dynamic_update_slice(x, update, *starts):
    """``x`` with ``update`` written at ``starts`` (clamped so it fits): a copy and one
    generated kernel."""
    out = x.copy()
    if not x.ndim:
        out[...] = update
        return out
    update = update if update.flags.c_contiguous else cupy.ascontiguousarray(update)
    _box_launch("plax_box_write", out, update.astype(x.dtype, copy=False), starts)
    return out


def _start_columns(operand_shape, indices, index_map, operand_batching_dims,
                   indices_batching_dims):
    """Per operand axis, the (n,) int64 start positions of every index vector (batching axes
    filled in from the position in the batch)."""
    batch_shape = indices.shape[:-1]
    n = math.prod(batch_shape)
    flat = indices.reshape(n, indices.shape[-1])
    cols = [cupy.zeros(n, _I64) for _ in operand_shape]
    for k, d in enumerate(index_map):
        col = flat[:, k]
        if col.dtype.kind == "u":  # large unsigned values are out of bounds, not negative
            col = cupy.minimum(col, col.dtype.type(min(np.iinfo(col.dtype).max, 1 << 62)))
        cols[d] = col.astype(_I64)
    for od, idim in zip(operand_batching_dims, indices_batching_dims):
        line = cupy.arange(batch_shape[idim], dtype=_I64)
        shape = [batch_shape[idim] if i == idim else 1 for i in range(len(batch_shape))]
        cols[od] = cupy.broadcast_to(line.reshape(shape), batch_shape).reshape(n)
    return cols


def _in_bounds(cols, shape, sizes):
    ok = None
    for c, d, w in zip(cols, shape, sizes):
        inside = (c >= 0) & (c <= d - w)
        ok = inside if ok is None else ok & inside
    return ok


def _window_index(cols, window):
    """Advanced-index tuple addressing ``window`` (full rank) at each of the n starts."""
    rank = len(window)
    return tuple(c.reshape([-1] + [1] * rank)
                 + cupy.arange(w, dtype=_I64).reshape([1] + [w if i == d else 1 for i in range(rank)])
                 for d, (c, w) in enumerate(zip(cols, window)))


def _fill_bits(dtype, fill_value, bf16: bool) -> list:
    """The bits of the scalar a ``FILL_OR_DROP`` gather gives out of bounds, as the unsigned
    words its mover type holds (two for 16-byte elements): ``fill_value`` in the operand's
    dtype, by default NaN, the lowest signed or highest unsigned integer, or True."""
    dtype = BF16 if bf16 else np.dtype(dtype)
    if fill_value is not None:
        value = np.asarray(fill_value)
        with np.errstate(all="ignore"):
            value = value.astype(dtype)
    elif dtype.kind in "fc" or bf16:
        value = np.asarray(np.nan).astype(dtype)
    elif dtype.kind == "i":
        value = np.asarray(np.iinfo(dtype).min, dtype)
    elif dtype.kind == "u":
        value = np.asarray(np.iinfo(dtype).max, dtype)
    else:
        value = np.asarray(True)
    words = np.ascontiguousarray(value.reshape(1)).view(np.dtype(f"u{min(dtype.itemsize, 8)}"))
    return [int(w) for w in words]


def gather_source(operand_shape, indices_shape, index_dtype, itemsize: int, *, dimension_numbers,
                  slice_sizes, mode, fill_bits) -> str:
    """CUDA C++ source of ``plax_gather``: XLA's gather of one signature in one kernel.

    Each thread computes output elements: it splits the element's position into batch and
    window coordinates, reads the batch's index vector (of ``index_dtype``, on the device),
    clamps the window's start so it fits (``CLIP``, ``PROMISE_IN_BOUNDS``) or writes the fill
    value where it does not (``FILL_OR_DROP``), and copies one ``itemsize``-byte word.
    Parameters: ``(operand, indices, out, n)``.

    Example:
      >>> from plax.lax.slicing import GatherDimensionNumbers
      >>> dn = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
      ...                             start_index_map=(0,))
      >>> "plax_gather" in gather_source((5, 3), (2, 1), np.int32, 4, dimension_numbers=dn,
      ...                                slice_sizes=(1, 3), mode=GatherScatterMode.CLIP,
      ...                                fill_bits=[0])
      True
    """
    dn = dimension_numbers
    rank = len(operand_shape)
    batch_shape = tuple(indices_shape[:-1])
    k_len = indices_shape[-1]
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    kept = [d for d in range(rank) if d not in dropped]
    out_rank = len(batch_shape) + len(kept)
    batch_pos = [p for p in range(out_rank) if p not in dn.offset_dims]
    out_shape = [0] * out_rank
    for j, p in enumerate(batch_pos):
        out_shape[p] = batch_shape[j]
    for k, p in enumerate(dn.offset_dims):
        out_shape[p] = slice_sizes[kept[k]]
    mover = _MOVERS[itemsize]
    ictype = dtypes.ctype(index_dtype)
    unsigned = np.dtype(index_dtype).kind == "u"
    lines = ["struct plax_pair64 { unsigned long long lo, hi; };",
             f'extern "C" __global__ void plax_gather(const {mover}* __restrict__ a, '
             f"const {ictype}* __restrict__ idx, {mover}* __restrict__ out, long long n) {{",
             "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;"
             " i += (long long)blockDim.x * gridDim.x) {",
             "    long long rem = i;"]
    for p in reversed(range(out_rank)):
        lines.append(f"    const long long c{p} = rem % {out_shape[p]}LL; rem /= {out_shape[p]}LL;")
    batch = " + ".join(f"c{p} * {math.prod(batch_shape[j + 1:])}LL" for j, p in enumerate(batch_pos)) or "0"
    lines.append(f"    const long long base = ({batch}) * {k_len}LL;")
    lines.append("    bool inside = true; long long off = 0;")
    batching = dict(zip(dn.operand_batching_dims, dn.start_indices_batching_dims))
    for d in range(rank):
        hi = operand_shape[d] - slice_sizes[d]
        if d in dn.start_index_map:
            k = dn.start_index_map.index(d)
            if unsigned:  # huge unsigned values stay out of bounds instead of wrapping
                start = (f"(idx[base + {k}] > 0x3fffffffffffffffULL ? 0x3fffffffffffffffLL : "
                         f"(long long)idx[base + {k}])")
            else:
                start = f"(long long)idx[base + {k}]"
        elif d in batching:
            start = f"c{batch_pos[batching[d]]}"
        else:
            start = "0LL"
        window = f"c{dn.offset_dims[kept.index(d)]}" if d in kept else "0LL"
        lines += [f"    long long s{d} = {start};",
                  f"    inside = inside && s{d} >= 0 && s{d} <= {hi}LL;",
                  f"    s{d} = s{d} < 0 ? 0 : (s{d} > {hi}LL ? {hi}LL : s{d});",
                  f"    off += (s{d} + {window}) * {math.prod(operand_shape[d + 1:])}LL;"]
    if mode == GatherScatterMode.FILL_OR_DROP:
        if itemsize == 16:
            fill = f"plax_pair64{{{fill_bits[0]}ULL, {fill_bits[1]}ULL}}"
        else:
            fill = f"({mover}){fill_bits[0]}ULL"
        lines.append(f"    if (inside) out[i] = a[off]; else {{ const {mover} f = {fill}; out[i] = f; }}")
    else:
        lines.append("    (void)inside; out[i] = a[off];")
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


@kernel(lax.gather_p)
def gather(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
           unique_indices, mode, fill_value):
    """XLA's gather: one window of ``slice_sizes`` per index vector, its start clamped (``CLIP``,
    ``PROMISE_IN_BOUNDS``) or, out of bounds, filled with ``fill_value`` (``FILL_OR_DROP``);
    one generated kernel (:func:`gather_source`), bfloat16 moved as its bits."""
    from plax_cupy.kernels_special import launch_raw
    bf16 = isinstance(operand, Bf16Buffer)
    data = operand.bits if bf16 else operand
    data = data if data.flags.c_contiguous else cupy.ascontiguousarray(data)
    indices = indices if indices.flags.c_contiguous else cupy.ascontiguousarray(indices)
    source = gather_source(data.shape, indices.shape, indices.dtype, data.dtype.itemsize,
                           dimension_numbers=dimension_numbers, slice_sizes=tuple(slice_sizes),
                           mode=mode, fill_bits=_fill_bits(data.dtype, fill_value, bf16))
    dn = dimension_numbers
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    kept = [d for d in range(data.ndim) if d not in dropped]
    batch = iter(indices.shape[:-1])
    window = iter(slice_sizes[d] for d in kept)
    shape = tuple(next(window) if p in dn.offset_dims else next(batch)
                  for p in range(len(indices.shape) - 1 + len(kept)))
    out = cupy.empty(shape, data.dtype)
    if out.size:
        launch_raw(source, "plax_gather", out.size, data, indices, out, np.int64(out.size))
    return Bf16Buffer(out) if bf16 else out


gather.bf16 = "bits"


# ---------------------------------------------------------------- scatter

def _add(a, b):
    return cupy.logical_or(a, b) if a.dtype.kind == "b" else a + b


def _mul(a, b):
    return cupy.logical_and(a, b) if a.dtype.kind == "b" else a * b


def _segmented_scan(keys, values, combine):
    """Inclusive scan of ``values`` within runs of equal ``keys`` (sorted, so each run is
    contiguous), ``log2(n)`` steps of whole-array operations: the last element of each run
    holds the combination of its run, in order."""
    n = values.shape[0]
    step = 1
    while step < n:
        same = keys[step:] == keys[:-step]
        head = values[:-step]
        if values.ndim > 1:
            same = same.reshape((-1,) + (1,) * (values.ndim - 1))
        tail = cupy.where(same, combine(head, values[step:]), values[step:])
        values = cupy.concatenate([values[:step], tail])
        step *= 2
    return values


def _scatter(combine):
    def scatter(operand, indices, updates, *, dimension_numbers, indices_are_sorted,
                unique_indices, mode):
        dn = dimension_numbers
        rank = operand.ndim
        dropped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
        scatter_axes = [i for i in range(updates.ndim) if i not in dn.update_window_dims]
        win = iter(updates.shape[d] for d in dn.update_window_dims)
        window = tuple(1 if i in dropped else next(win) for i in range(rank))
        n = math.prod(updates.shape[a] for a in scatter_axes)
        u = cupy.transpose(updates, scatter_axes + list(dn.update_window_dims)).reshape(-1)
        size = operand.size
        # one slot past the end takes the updates of dropped windows (never read back)
        flat = cupy.empty(size + 1, operand.dtype)
        flat[:size] = operand.reshape(-1)
        if u.size:
            cols = _start_columns(operand.shape, indices, dn.scatter_dims_to_operand_dims,
                                  dn.operand_batching_dims, dn.scatter_indices_batching_dims)
            keep = _in_bounds(cols, operand.shape, window)
            cols = [cupy.clip(c, 0, d - w) for c, d, w in zip(cols, operand.shape, window)]
            strides = [math.prod(operand.shape[d + 1:]) for d in range(rank)]
            target = cupy.zeros((n,) + window, _I64)
            for idx, stride in zip(_window_index(cols, window), strides):
                target = target + idx * stride
            if mode != GatherScatterMode.CLIP and keep is not None:
                target = cupy.where(keep.reshape((-1,) + (1,) * rank), target, size)
            target = target.reshape(-1)
            order = cupy.argsort(target, kind="stable")
            keys = target[order]
            values = u[order]
            last = cupy.concatenate([keys[1:] != keys[:-1], cupy.ones(1, bool)])
            if combine is not None:
                values = combine(flat[keys], _segmented_scan(keys, values, combine))
            flat[cupy.where(last, keys, size)] = values
        return flat[:size].reshape(operand.shape)
    return scatter


kernel(lax.scatter_p)(_scatter(None))
kernel(lax.scatter_add_p)(_scatter(_add))
kernel(lax.scatter_mul_p)(_scatter(_mul))
kernel(lax.scatter_min_p)(_scatter(minimum))
kernel(lax.scatter_max_p)(_scatter(maximum))
