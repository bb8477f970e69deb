"""``jax.ops``: segment reductions (``segment_sum``, ``segment_prod``, ``segment_max``,
``segment_min``): ``out[s]`` reduces the rows ``data[k]`` whose ``segment_ids[k] == s``.

Each is one scatter (``scatter_add`` / ``scatter_mul`` / ``scatter_max`` / ``scatter_min``)
into an array filled with the reduction's identity, as in JAX: ids out of ``[0,
num_segments)`` (negative ones included) are dropped by default (``mode="drop"``), so
``segment_ids`` need not be sorted or dense. With ``bucket_size``, the rows are reduced in
buckets of that many first, then the buckets (more accurate sums and products of many rows).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from plax import lax
from plax.core.trace import get_aval
from plax.lax.slicing import GatherScatterMode, ScatterDimensionNumbers

__all__ = ["segment_max", "segment_min", "segment_prod", "segment_sum"]

_SCATTERS = {"sum": "scatter_add", "prod": "scatter_mul", "max": "scatter_max",
             "min": "scatter_min"}


def _identity(kind: str, dtype: np.dtype):
    if kind == "sum":
        return np.zeros((), dtype)
    if kind == "prod":
        return np.ones((), dtype)
    if dtype == np.bool_:
        return np.asarray(kind == "min")
    if dtype.kind in "fc" or dtype.name == "bfloat16":
        return np.asarray(-np.inf if kind == "max" else np.inf, dtype)
    info = np.iinfo(dtype)
    return np.asarray(info.min if kind == "max" else info.max, dtype)


def _segment(kind: str, name: str, data, segment_ids, num_segments, indices_are_sorted,
             unique_indices, bucket_size, mode):
    from plax import numpy as jnp
    from plax.numpy.util import check_arraylike
    check_arraylike(name, data, segment_ids)
    data, segment_ids = jnp.asarray(data), jnp.asarray(segment_ids)
    ids_aval = get_aval(segment_ids)
    if ids_aval.ndim != 1 or ids_aval.dtype.kind not in "iu":
        raise TypeError(f"{name}: segment_ids must be a 1-d integer array, got "
                        f"{ids_aval.str_short()}.")
    if get_aval(data).ndim < 1 or get_aval(data).shape[0] != ids_aval.shape[0]:
        raise ValueError(f"{name}: data must have one row per segment id: data shape "
                         f"{get_aval(data).shape}, segment_ids shape {ids_aval.shape}.")
    if num_segments is None:
        from plax.core.trace import Tracer
        if isinstance(segment_ids, Tracer):
            from plax.errors import ConcretizationTypeError
            raise ConcretizationTypeError(segment_ids, f"The problem arose with the {name}() "
                                          "`num_segments` argument: pass num_segments when "
                                          "segment_ids is traced.")
        ids = np.asarray(segment_ids)
        num_segments = int(np.max(ids)) + 1 if ids.size else 0
    num_segments = int(num_segments)
    if num_segments < 0:
        raise ValueError("num_segments must be non-negative.")
    mode = GatherScatterMode.FILL_OR_DROP if mode is None else GatherScatterMode.from_any(mode)
    dtype = get_aval(data).dtype
    scatter = getattr(lax, _SCATTERS[kind])
    rest = get_aval(data).shape[1:]
    if bucket_size is None:
        out = jnp.full((num_segments,) + rest, _identity(kind, dtype), dtype)
        dnums = ScatterDimensionNumbers(update_window_dims=tuple(range(1, 1 + len(rest))),
                                        inserted_window_dims=(0,),
                                        scatter_dims_to_operand_dims=(0,))
        return scatter(out, segment_ids[:, None], data, dnums,
                       indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                       mode=mode)
    n = ids_aval.shape[0]
    num_buckets = -(-n // int(bucket_size))
    out = jnp.full((num_buckets, num_segments) + rest, _identity(kind, dtype), dtype)
    bucket = lax.iota(segment_ids.dtype, n) // np.asarray(bucket_size, segment_ids.dtype)
    dnums = ScatterDimensionNumbers(update_window_dims=tuple(range(1, 1 + len(rest))),
                                    inserted_window_dims=(0, 1),
                                    scatter_dims_to_operand_dims=(0, 1))
    out = scatter(out, jnp.stack([bucket, segment_ids], axis=1), data, dnums,
                  indices_are_sorted=indices_are_sorted, unique_indices=unique_indices,
                  mode=mode)
    return getattr(jnp, kind)(out, axis=0).astype(dtype)


_ARGS = """
    Args:
      data: the rows to reduce: an array whose leading axis has one row per segment id.
      segment_ids: a 1-d integer array: the segment of each row of ``data``.
      num_segments: how many segments (static); None: ``max(segment_ids) + 1`` (which needs
        concrete ids, so pass it under ``jit``).
      indices_are_sorted: whether ``segment_ids`` is sorted (a hint).
      unique_indices: whether the ids are unique (a hint).
      bucket_size: reduce buckets of this many rows first, then the buckets.
      mode: ``"drop"`` (default: ids out of range are ignored), ``"clip"`` or
        ``"promise_in_bounds"``.

    Returns:
      An array of shape ``(num_segments,) + data.shape[1:]``: segments no row falls in hold
      the reduction's identity ({identity}).
"""


def segment_sum(data: Any, segment_ids: Any, num_segments: int | None = None,
                indices_are_sorted: bool = False, unique_indices: bool = False,
                bucket_size: int | None = None, mode=None):
    return _segment("sum", "segment_sum", data, segment_ids, num_segments, indices_are_sorted,
                    unique_indices, bucket_size, mode)


def segment_prod(data: Any, segment_ids: Any, num_segments: int | None = None,
                 indices_are_sorted: bool = False, unique_indices: bool = False,
                 bucket_size: int | None = None, mode=None):
    return _segment("prod", "segment_prod", data, segment_ids, num_segments,
                    indices_are_sorted, unique_indices, bucket_size, mode)


def segment_max(data: Any, segment_ids: Any, num_segments: int | None = None,
                indices_are_sorted: bool = False, unique_indices: bool = False,
                bucket_size: int | None = None, mode=None):
    return _segment("max", "segment_max", data, segment_ids, num_segments, indices_are_sorted,
                    unique_indices, bucket_size, mode)


def segment_min(data: Any, segment_ids: Any, num_segments: int | None = None,
                indices_are_sorted: bool = False, unique_indices: bool = False,
                bucket_size: int | None = None, mode=None):
    return _segment("min", "segment_min", data, segment_ids, num_segments, indices_are_sorted,
                    unique_indices, bucket_size, mode)


for _f, _what, _identity_text, _example in (
        (segment_sum, "Sums", "0", "Array([3, 0, 3], dtype=int32)"),
        (segment_prod, "Multiplies", "1", "Array([2, 1, 3], dtype=int32)"),
        (segment_max, "Takes the maximum of", "-inf, or the dtype's minimum",
         "Array([          2, -2147483648,           3], dtype=int32)"),
        (segment_min, "Takes the minimum of", "inf, or the dtype's maximum",
         "Array([         1, 2147483647,          3], dtype=int32)")):
    _f.__doc__ = (f"{_what} the rows of ``data`` in each segment.\n"
                  + _ARGS.format(identity=_identity_text)
                  + f"\n    Example:\n      >>> jax.ops.{_f.__name__}(jnp.array([1, 2, 3]), "
                  f"jnp.array([0, 0, 2]), 3)\n      {_example}\n")
