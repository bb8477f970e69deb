"""XLA's gather as C index arithmetic: which operand element an element of gather's result
reads, and whether its window lies in bounds.

One builder, :func:`gather_read`, serves the gather kernel of its own
(:func:`plax_cupy.kernels_indexing.gather_source`, which reads the index vectors from memory)
and a gather computed inside its reader's kernel (``plax_cupy.codegen_structural``, where the
index vectors may be computed by fused producers): both give it the result element's
coordinates and a function reading one element of the indices.

The rule (``lax.gather``): the element's batch coordinates (the result axes that are not
``offset_dims``) pick an index vector (the last axis of the indices); its entries start the
window on the operand axes of ``start_index_map``, an operand batching axis starts at the
batch coordinate it follows, any other axis at 0; each start is clamped to
``[0, dim - slice_size]`` (``CLIP``, ``PROMISE_IN_BOUNDS``), and under ``FILL_OR_DROP`` an
element whose window does not fit reads the fill value instead. The element's window
coordinates (the ``offset_dims``) are added on the operand axes that are not collapsed or
batching axes.
"""
from __future__ import annotations

import math
import re
from typing import Callable

import numpy as np

from plax_cupy import dtypes


def gather_layout(operand_rank: int, indices_shape, dimension_numbers, slice_sizes
                  ) -> tuple[tuple, list, list]:
    """The result's shape, its batch axes and the operand axes its window axes cover.

    Args:
      operand_rank: the operand's rank.
      indices_shape: the indices' shape (index vectors along the last axis).
      dimension_numbers: a :class:`plax.lax.slicing.GatherDimensionNumbers`.
      slice_sizes: the window's size on each operand axis.

    Returns:
      ``(result shape, result axes of the batch coordinates, operand axes of the window
      coordinates)``, the last two in order.

    Example:
      >>> from plax.lax.slicing import GatherDimensionNumbers
      >>> dn = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
      ...                             start_index_map=(0,))
      >>> gather_layout(2, (4, 1), dn, (1, 3))
      ((4, 3), [0], [1])
    """
    dn = dimension_numbers
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    kept = [d for d in range(operand_rank) if d not in dropped]
    batch_shape = tuple(indices_shape[:-1])
    out_rank = len(batch_shape) + len(kept)
    batch_pos = [p for p in range(out_rank) if p not in dn.offset_dims]
    shape = [0] * out_rank
    for j, p in enumerate(batch_pos):
        shape[p] = int(batch_shape[j])
    for k, p in enumerate(dn.offset_dims):
        shape[p] = int(slice_sizes[kept[k]])
    return tuple(shape), batch_pos, kept


def start_inside(value: str, dtype, limit: int) -> str:
    """The C condition that the window start ``value`` (a local of integer ``dtype``) lies in
    ``[0, limit]`` (``FILL_OR_DROP``'s bounds test, gather's and scatter's; the clamp is
    :func:`plax_cupy.codegen.clamped_start`): an unsigned one compared as unsigned, so 2^63
    and beyond stay out of bounds.

    Example:
      >>> start_inside("s", np.uint64, 4), start_inside("s", np.int8, 4)
      ('s <= 4ULL', 's >= 0LL && s <= 4LL')
    """
    return f"{value} <= {limit}ULL" if np.dtype(dtype).kind == "u" else \
        f"{value} >= 0LL && {value} <= {limit}LL"


def gather_read(lines: list, coords: list, operand_shape, indices_shape, index_dtype, *,
                dimension_numbers, slice_sizes, index_value: Callable[[str], str],
                fresh: Callable[[], str], bounds: bool = True) -> tuple[str, str | None]:
    """Appends to ``lines`` the C statements locating the operand element that gather's result
    element at ``coords`` reads.

    Args:
      lines: where the statements go (``const long long`` locals named by ``fresh``).
      coords: C expressions of the result element's coordinates, one per result axis.
      operand_shape: the operand's shape.
      indices_shape: the indices' shape.
      index_dtype: the indices' dtype: an unsigned start is compared as unsigned (else 2^63
        and beyond would wrap negative), its clamp :func:`plax_cupy.codegen.clamped_start`'s.
      dimension_numbers: a :class:`plax.lax.slicing.GatherDimensionNumbers`.
      slice_sizes: the window's size on each operand axis.
      index_value: ``fn(flat)`` -> the C expression of the indices' element at the C flat
        index ``flat`` (a load, or a value computed there, its statements in ``lines``).
      fresh: ``fn()`` -> a new local name.
      bounds: whether to test the starts (``FILL_OR_DROP``); False (``CLIP``,
        ``PROMISE_IN_BOUNDS``) reads no start that the clamp makes 0.

    Returns:
      ``(flat offset, inside)``: C expressions of the element's flat (C-order) index in the
      operand, its starts clamped so the window fits, and of whether every start was in
      bounds already (None where no start is read from the indices, or not ``bounds``).

    Example:
      >>> from plax.lax.slicing import GatherDimensionNumbers
      >>> dn = GatherDimensionNumbers(offset_dims=(1,), collapsed_slice_dims=(0,),
      ...                             start_index_map=(0,))
      >>> names = iter(f"g{k}" for k in range(9))
      >>> lines = []
      >>> gather_read(lines, ["c0", "c1"], (5, 3), (2, 1), np.int32, dimension_numbers=dn,
      ...             slice_sizes=(1, 3), index_value=lambda f: f"idx[{f}]",
      ...             fresh=lambda: next(names))
      ('g1 * 3LL + c1', '(g0 >= 0LL && g0 <= 4LL)')
    """
    from plax_cupy.codegen import clamped_start   # (codegen imports this module: not at its top)
    dn = dimension_numbers
    rank = len(operand_shape)
    _, batch_pos, kept = gather_layout(rank, indices_shape, dn, slice_sizes)
    batch_shape = tuple(indices_shape[:-1])
    index_map = list(dn.start_index_map)
    batching = dict(zip(dn.operand_batching_dims, dn.start_indices_batching_dims))
    base = None
    if any(bounds or int(operand_shape[d]) > int(slice_sizes[d]) for d in index_map):
        # (the flat index of the element's index vector in the indices)
        batch = " + ".join(
            coords[p] if math.prod(batch_shape[j + 1:]) == 1 else
            f"{coords[p]} * {math.prod(batch_shape[j + 1:])}LL"
            for j, p in enumerate(batch_pos)) or "0LL"
        k_len = int(indices_shape[-1])
        if k_len == 1 and re.fullmatch(r"\w+|\(\w+\)", batch):
            base = batch   # (a coordinate or a named local already)
        else:
            base = fresh()
            lines.append(f"const long long {base} = {batch if k_len == 1 else f'({batch}) * {k_len}LL'};")
    inside, terms = [], []
    for d in range(rank):
        hi = int(operand_shape[d]) - int(slice_sizes[d])
        start = None
        if d in index_map and (bounds or hi > 0):
            k = index_map.index(d)
            v = index_value(f"{base} + {k}LL" if k else base)
            s = fresh()
            lines.append(f"const {dtypes.ctype(index_dtype)} {s} = {v};")
            inside.append(start_inside(s, index_dtype, hi))
            if hi > 0:
                start = fresh()
                lines.append(f"const long long {start} = {clamped_start(s, index_dtype, hi)};")
        elif d in batching:
            start = coords[batch_pos[batching[d]]]
        window = coords[dn.offset_dims[kept.index(d)]] if d in kept else None
        position = " + ".join(x for x in (start, window) if x is not None)
        stride = math.prod(int(n) for n in operand_shape[d + 1:])
        if position and int(operand_shape[d]) != 1:
            terms.append(position if stride == 1 else
                         f"{position} * {stride}LL" if " + " not in position else
                         f"({position}) * {stride}LL")
    return " + ".join(terms) or "0LL", (f"({' && '.join(inside)})" if inside and bounds else None)
