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


def _make_quiet_state():
    """``(enter, leave)``: switch NumPy's floating-point warnings off and back on.

    On NumPy >= 2 the error state is one context variable: setting it to a prebuilt
    value costs a fraction of ``np.errstate`` (about a microsecond), which a jitted tiny
    function would otherwise pay per primitive.
    """
    import numpy as np
    try:
        from numpy._core.umath import _extobj_contextvar, _make_extobj
        ignore_all = _make_extobj(all="ignore")
    except (ImportError, AttributeError, TypeError):
        def enter():
            return np.seterr(all="ignore")

        def leave(old):
            np.seterr(**old)

        return enter, leave
    set_state, reset_state = _extobj_contextvar.set, _extobj_contextvar.reset
    return (lambda: set_state(ignore_all)), reset_state


quiet_enter, quiet_leave = _make_quiet_state()


def quiet(fn: Callable) -> Callable:
    """Runs ``fn`` with NumPy's floating-point warnings off (IEEE results, no warnings)."""
    enter, leave = quiet_enter, quiet_leave

    def wrapped(*args, **params):
        token = enter()
        try:
            return fn(*args, **params)
        finally:
            leave(token)

    wrapped.__name__ = getattr(fn, "__name__", "quiet")
    return wrapped
