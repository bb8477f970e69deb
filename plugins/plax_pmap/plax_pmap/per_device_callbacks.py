"""Debug callbacks inside ``shard_map``'s vmap formulation run once per mesh device.

JAX runs the body of a ``jit(shard_map(...))`` on every device, so ``jax.debug.print``
there prints once per device, even for a value that is the same on all of them. The vmap
formulation (:func:`plax_pmap.api._shard_map_vmap`) would call it once per distinct
block (vmap does not batch an unbatched operand). While it traces the body, a rewriter
(:data:`plax.lax.callbacks.debug_call_rewriters`) gives each debug callback the device's
mesh coordinates as extra operands, which batch it along every mesh axis; the wrapped
callback collects the calls of one execution and makes them in mesh order.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Callable, Iterator, Sequence

import numpy as np

from plax.lax import callbacks as _callbacks

__all__ = ["per_device_debug_callbacks"]


class PerDeviceCallback:
    """``cb`` called once per device: its last ``len(sizes)`` operands are the device's mesh
    coordinates; the calls are buffered until every device has made its own, then made in
    mesh order (row-major over the mesh axes)."""

    __slots__ = ("cb", "sizes", "pending", "__weakref__")

    def __init__(self, cb: Callable, sizes: Sequence[int]):
        self.cb, self.sizes, self.pending = cb, tuple(sizes), []

    def __repr__(self) -> str:
        return repr(self.cb)

    def __call__(self, *arrays, result_avals: tuple = ()) -> list:
        k = len(self.sizes)
        coords = tuple(int(np.asarray(c)) for c in arrays[len(arrays) - k:])
        self.pending.append((coords, arrays[:len(arrays) - k]))
        if len(self.pending) >= math.prod(self.sizes):
            calls, self.pending = sorted(self.pending, key=lambda c: c[0]), []
            for _, ops in calls:
                self.cb(*ops)
        return []


@contextlib.contextmanager
def per_device_debug_callbacks(axis_names: Sequence[Any],
                               sizes: Sequence[int]) -> Iterator[None]:
    """While active, debug callbacks traced in the body run once per device of a mesh with
    ``axis_names`` of ``sizes`` (bound as vmap axis names around the body)."""
    from plax_pmap.collectives import axis_index

    def rewrite(cb, operands):
        coords = [axis_index(a) for a in axis_names]
        return PerDeviceCallback(cb, sizes), list(operands) + coords

    _callbacks.debug_call_rewriters.append(rewrite)
    try:
        yield
    finally:
        _callbacks.debug_call_rewriters.pop()
