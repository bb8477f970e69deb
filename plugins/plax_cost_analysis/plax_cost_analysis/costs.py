"""The cost of a piece of a program, and the arithmetic that combines costs.

A cost is a plain ``dict[str, float]`` with XLA's keys:

* ``"flops"``: floating-point (and integer) operations;
* ``"transcendentals"``: exp, log, sin, ... evaluations (not counted as flops, as in XLA);
* ``"bytes accessed"``: bytes read plus bytes written;
* ``"bytes accessed{i}{}"``: the part of it read through operand ``i`` of each equation;
* ``"bytes accessedout{}"``: the part of it written as results.

These helpers build and combine such dicts; rules return them.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

FLOPS = "flops"
TRANSCENDENTALS = "transcendentals"
BYTES = "bytes accessed"
OUT_BYTES = "bytes accessedout{}"
MAIN_KEYS = (FLOPS, TRANSCENDENTALS, BYTES)

Cost = dict  # dict[str, float]


def operand_key(i: int) -> str:
    """The key of the bytes read through operand ``i``: ``"bytes accessed0{}"`` for 0."""
    return f"bytes accessed{i}{{}}"


def nbytes(aval) -> float:
    """The size in bytes of a value of abstract value ``aval`` (0 for non-array values).

    Example:
      >>> from plax.core import ShapedArray
      >>> nbytes(ShapedArray((3, 4), np.float32))
      48.0
    """
    shape = getattr(aval, "shape", None)
    if shape is None:
        return 0.0
    try:
        itemsize = np.dtype(aval.dtype).itemsize
    except TypeError:  # an extended dtype (a PRNG key) without a NumPy itemsize
        itemsize = getattr(aval.dtype, "itemsize", 0)
    return float(size(aval) * itemsize)


def size(aval) -> int:
    """The number of elements of ``aval``."""
    return int(np.prod(getattr(aval, "shape", ()), dtype=np.int64))


def memory(in_avals: Sequence, out_avals: Sequence, operand_bytes: Sequence[float] | None = None,
           out_bytes: float | None = None) -> Cost:
    """The bytes part of one equation's cost: each operand read once, each result written once.

    Args:
      in_avals: the operands' abstract values.
      out_avals: the results' abstract values.
      operand_bytes: overrides the bytes read per operand (for operations that read only part
        of an operand, like a gather).
      out_bytes: overrides the bytes written.

    Example:
      >>> from plax.core import ShapedArray
      >>> f32_3x4 = ShapedArray((3, 4), np.float32)
      >>> memory([f32_3x4, f32_3x4], [f32_3x4])  # doctest: +NORMALIZE_WHITESPACE
      {'bytes accessed': 144.0, 'bytes accessed0{}': 48.0, 'bytes accessed1{}': 48.0,
       'bytes accessedout{}': 48.0}
    """
    reads = list(operand_bytes) if operand_bytes is not None else [nbytes(a) for a in in_avals]
    written = out_bytes if out_bytes is not None else sum(nbytes(a) for a in out_avals)
    cost: Cost = {BYTES: float(sum(reads) + written)}
    for i, b in enumerate(reads):
        cost[operand_key(i)] = float(b)
    cost[OUT_BYTES] = float(written)
    return cost


def with_compute(cost: Cost, flops: float = 0.0, transcendentals: float = 0.0) -> Cost:
    """``cost`` with ``flops`` and ``transcendentals`` added (returns the same dict)."""
    if flops:
        cost[FLOPS] = cost.get(FLOPS, 0.0) + float(flops)
    if transcendentals:
        cost[TRANSCENDENTALS] = cost.get(TRANSCENDENTALS, 0.0) + float(transcendentals)
    return cost


def add(*costs: Cost) -> Cost:
    """The key-wise sum of ``costs`` (a new dict).

    Example:
      >>> add({"flops": 1.0}, {"flops": 2.0, "bytes accessed": 8.0})
      {'flops': 3.0, 'bytes accessed': 8.0}
    """
    out: Cost = {}
    for c in costs:
        for k, v in c.items():
            out[k] = out.get(k, 0.0) + v
    return out


def scale(cost: Cost, factor: float) -> Cost:
    """Every entry of ``cost`` times ``factor`` (a new dict): a loop body run ``factor`` times."""
    return {k: v * factor for k, v in cost.items()}


def maximum(costs: Iterable[Cost]) -> Cost:
    """The key-wise maximum of ``costs`` (a new dict): the most expensive branch of a ``cond``,
    taken key by key as XLA does."""
    out: Cost = {}
    for c in costs:
        for k, v in c.items():
            out[k] = max(out.get(k, v), v)
    return out
