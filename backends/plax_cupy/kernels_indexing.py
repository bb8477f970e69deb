"""GPU kernels of slicing, gather and the scatter family, with XLA's semantics (as the NumPy
backend's ``impls_indexing``): dynamic starts clamped so the window fits, gather's ``CLIP``,
``FILL_OR_DROP`` and ``PROMISE_IN_BOUNDS`` modes, scatters that drop out-of-bounds windows
unless the mode is ``CLIP``.

Everything runs on the device: start indices are device arrays and are never read on the host
(clamping and bounds tests are array operations), windows are addressed with CuPy's advanced
indexing. A scatter that combines (add, mul, min, max) sorts its targets (a stable sort, so
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


def _fill_value(dtype, fill_value, bf16: bool):
    """The scalar a ``FILL_OR_DROP`` gather gives out of bounds, as a 0-d device array (of the
    bfloat16 bits when ``bf16``)."""
    if bf16:
        value = np.asarray(np.nan if fill_value is None else fill_value).astype(BF16)
        return cupy.full((), int(value.view(np.uint16)), np.uint16)
    if fill_value is not None:
        return cupy.full((), np.asarray(fill_value).astype(dtype)[()], dtype)
    if dtype.kind in "fc":
        return cupy.full((), np.nan, dtype)
    if dtype.kind == "i":
        return cupy.full((), np.iinfo(dtype).min, dtype)
    if dtype.kind == "u":
        return cupy.full((), np.iinfo(dtype).max, dtype)
    return cupy.full((), True, dtype)


@kernel(lax.gather_p)
def gather(operand, indices, *, dimension_numbers, slice_sizes, indices_are_sorted,
           unique_indices, mode, fill_value):
    """XLA's gather: one window of ``slice_sizes`` per index vector, its start clamped (``CLIP``,
    ``PROMISE_IN_BOUNDS``) or, out of bounds, filled with ``fill_value`` (``FILL_OR_DROP``)."""
    bf16 = isinstance(operand, Bf16Buffer)
    data = operand.bits if bf16 else operand
    dn = dimension_numbers
    cols = _start_columns(data.shape, indices, dn.start_index_map, dn.operand_batching_dims,
                          dn.start_indices_batching_dims)
    in_bounds = _in_bounds(cols, data.shape, slice_sizes)
    cols = [cupy.clip(c, 0, d - w) for c, d, w in zip(cols, data.shape, slice_sizes)]
    if data.ndim:
        window = data[_window_index(cols, slice_sizes)]
    else:  # a scalar operand: every index vector (of length 0) reads it
        window = cupy.broadcast_to(data.reshape(1), (math.prod(indices.shape[:-1]),))
    if mode == GatherScatterMode.FILL_OR_DROP and in_bounds is not None:
        fill = _fill_value(data.dtype, fill_value, bf16)
        window = cupy.where(in_bounds.reshape((-1,) + (1,) * len(slice_sizes)), window, fill)
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    kept = [i for i in range(data.ndim) if i not in dropped]
    batch_shape = indices.shape[:-1]
    window = window.reshape(tuple(batch_shape) + tuple(slice_sizes[i] for i in kept))
    # offset axes go to offset_dims, batch axes to the remaining output positions
    out_rank = len(batch_shape) + len(kept)
    nb = len(batch_shape)
    perm = [0] * out_rank
    for src, dst in enumerate(i for i in range(out_rank) if i not in dn.offset_dims):
        perm[dst] = src
    for k, dst in enumerate(dn.offset_dims):
        perm[dst] = nb + k
    out = cupy.transpose(window, perm)
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
