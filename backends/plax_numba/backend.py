"""The Numba backend object: the shared CPU devices and host buffers, eager work on the
reference kernels, ``jit`` through :mod:`plax.lowering` with :class:`NumbaEmitter`."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

import plax_numpy
from plax.backend import Backend, UnsupportedPrimitiveError
from plax.device import cpu_devices
from plax.lowering import lower

from plax_numba.emitter import NumbaEmitter


class NumbaBackend(Backend):
    """Runs plax on the CPU devices, compiling jaxprs' fusion clusters with Numba.

    It shares the CPU devices and NumPy-array buffers with the NumPy backend, so arrays move
    between the two without a copy. Its priority (5) puts it above the NumPy backend (0) as
    the CPU's default; ``jit(f, backend="numpy")`` or ``PLAX_BACKEND=numpy`` still select
    the interpreter.

    Eager operations run the reference kernels (one NumPy call each: compiling a single
    operation would not be faster). Kernels registered with :meth:`register_kernel` take
    precedence, in eager dispatch and in compiled code.
    """

    name = "numba"
    platform = "cpu"
    priority = 5

    def __init__(self) -> None:
        self.reference_impls = plax_numpy.impls()  # the public reference kernel table
        self.kernels: dict = {}                      # this backend's own kernels (plugins')
        self._core: frozenset | None = None

    def devices(self) -> list:
        return list(cpu_devices())

    def put(self, host_array: np.ndarray, device) -> Any:
        return host_array

    def to_host(self, buffer: Any) -> np.ndarray:
        return buffer

    def eager_impl(self, primitive):
        fn = self.kernels.get(primitive)
        return fn if fn is not None else self.reference_impls.get(primitive)

    def execute(self, primitive, *buffers: Any, **params: Any) -> Any:
        fn = self.eager_impl(primitive)
        if fn is None:
            raise UnsupportedPrimitiveError(self.name, primitive.name)
        return fn(*buffers, **params)

    def register_kernel(self, primitive, kernel: Callable) -> None:
        self.kernels[primitive] = kernel

    def core_primitives(self) -> frozenset:
        """The primitives of plax itself, which compiled code runs on their reference kernels
        without a warning when it does not compile them (a plugin's primitive without a kernel
        of this backend gets the lowering layer's fallback warning instead)."""
        core = self._core
        if core is None:
            from plax import lax
            from plax.core import Primitive
            from plax.transforms import checkpoint
            core = {v for v in vars(lax).values() if isinstance(v, Primitive)}
            core |= {v for v in vars(checkpoint).values() if isinstance(v, Primitive)}
            core = self._core = frozenset(core)
        return core

    def compile(self, jaxpr, device) -> Callable[..., Sequence[Any]]:
        emitter = NumbaEmitter(self, device)
        fn = lower(jaxpr, emitter, self, device)
        if emitter.kernel_sources:
            parts = [fn.__plax_source__]
            for path, text in emitter.kernel_sources:
                parts.append(f"\n# ---- fused kernel ({path})\n{text}")
            fn.__plax_source__ = "\n".join(parts)
        return fn
