"""The table of NumPy implementations, keyed by primitive."""
from __future__ import annotations

from typing import Callable

from plax.lowering.emitter import fresh_result
from plax.lowering.host import numpy_errors_off

# The kernels of plax.lax's primitive families that load on first use: the family's module ->
# the module of its kernels. Those kernels load when a lookup misses while their family is
# loaded (a primitive of a family that is not loaded cannot be looked up), so neither the
# backend's first eager op nor ``import plax_numpy`` pays for linalg, convolution, FFT, ...
LAZY_KERNELS = {
    "plax.lax.control_flow": "plax_numpy.impls_control_flow",
    "plax.lax.callbacks": "plax_numpy.impls_callbacks",
    "plax.lax.fft": "plax_numpy.impls_fft",
    "plax.lax.convolution": "plax_numpy.impls_convolution",
    "plax.lax.windows": "plax_numpy.impls_windows",
    "plax.lax.top_k": "plax_numpy.impls_top_k",
    "plax.lax.precision": "plax_numpy.impls_precision",
    "plax.lax.cumlogsumexp": "plax_numpy.impls_precision",
    "plax.lax.linalg": "plax_numpy.impls_linalg",
    "plax.lax.extra_elementwise": "plax_numpy.impls_extra_elementwise",
    "plax.lax.fused_multiply_add": "plax_numpy.impls_fma",
    "plax.lax.bit_generator": "plax_numpy.impls_rng_bit_generator",
}


class KernelTable(dict):
    """primitive -> kernel, loading the kernels of the lazily loaded lax families (see
    :data:`LAZY_KERNELS`) when a lookup (``[]``, ``get``, ``in``) misses."""

    def __init__(self, lazy: dict):
        super().__init__()
        self._pending = dict(lazy)

    def load_pending(self, everything: bool = False) -> bool:
        """Imports the kernels of the pending families that are loaded (of all of them with
        ``everything``, loading those families); True if any were imported."""
        import importlib
        import sys
        loaded = False
        for family, kernels in list(self._pending.items()):
            if everything or family in sys.modules:
                importlib.import_module(kernels)
                self._pending.pop(family, None)
                loaded = True
        return loaded

    def __missing__(self, primitive):
        if self._pending and self.load_pending():
            return self[primitive]
        raise KeyError(primitive)

    def get(self, primitive, default=None):
        try:
            return self[primitive]
        except KeyError:
            return default

    def __contains__(self, primitive) -> bool:
        return (super().__contains__(primitive)
                or (bool(self._pending) and self.load_pending() and super().__contains__(primitive)))


IMPLS: KernelTable = KernelTable(LAZY_KERNELS)


def impl(*primitives, fresh: bool = False) -> Callable:
    """Registers the decorated function as the implementation of ``primitives``.

    Args:
      primitives: the primitives it implements.
      fresh: the kernel allocates its results on every path (never an operand, a view of
        one, a read-only or a cached array): it is marked
        :func:`plax.lowering.fresh_result`, so a jitted program may reuse its operands'
        buffers in place while its results live.

    Returns:
      The decorator (which returns the function it registers).

    Example:
      >>> @impl(lax.concatenate_p, fresh=True)  # doctest: +SKIP
      ... def _concatenate(*xs, dimension): return np.concatenate(xs, axis=dimension)
    """

    def register(fn: Callable) -> Callable:
        if fresh:
            fn = fresh_result(fn)
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


quiet_enter, quiet_leave = numpy_errors_off()  # shared with every host-kernel backend


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
