"""The table of NumPy implementations, keyed by primitive."""
from __future__ import annotations

from typing import Callable

IMPLS: dict = {}


def impl(*primitives) -> Callable:
    """Registers the decorated function as the implementation of ``primitives``."""

    def register(fn: Callable) -> Callable:
        for p in primitives:
            IMPLS[p] = fn
        return fn

    return register


def lowp(fn: Callable) -> Callable:
    """Runs a float function in float32 for float16/bfloat16 inputs, casting the result back
    (NumPy lacks most low-precision kernels; XLA's CPU backend does the same)."""
    import numpy as np

    def wrapped(x, *rest, **params):
        dt = x.dtype
        if dt.itemsize == 2 and dt.kind in "fV":
            out = fn(x.astype(np.float32), *[r.astype(np.float32) for r in rest], **params)
            return np.asarray(out).astype(dt)
        return fn(x, *rest, **params)

    wrapped.__name__ = getattr(fn, "__name__", "lowp")
    return wrapped
