"""The NumPy backend object: host buffers, eager execution and jaxpr compilation."""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import numpy as np

from plax.backend import Backend, UnsupportedPrimitiveError
from plax.core.jaxpr import Jaxpr
from plax.device import cpu_devices
from plax.lowering import Emitter, Step, body_kernel, lower, returns_fresh, takes_out
from plax_numpy.registry import IMPLS, quiet_enter, quiet_leave


def load_core_impls() -> dict:
    """The kernel table with the kernels of plax.lax's always-loaded primitives; those of the
    families loaded on first use (control flow, linalg, FFT, ...) load on first lookup."""
    # Importing the modules fills IMPLS; done once.
    from plax_numpy import (impls_dot, impls_elementwise, impls_indexing, impls_random,  # noqa: F401
                            impls_reduction, impls_shape)
    from plax_numpy import impls_checkpoint  # noqa: F401
    return IMPLS


def load_impls() -> dict:
    """The complete kernel table (public as :func:`plax_numpy.impls`): every family's kernels
    loaded (and so every plax.lax family)."""
    load_core_impls()
    IMPLS.load_pending(everything=True)
    return IMPLS


class NumpyBackend(Backend):
    """The reference backend: every primitive is a NumPy function; jit interprets jaxprs.

    ``compile`` lowers the jaxpr through :mod:`plax.lowering` into a straight-line Python
    function (one kernel call per equation), which keeps jit's per-call overhead to a few
    function calls. It is the reference backend: other backends' declined equations run on
    its kernels.
    """

    name = "numpy"
    platform = "cpu"
    priority = 0
    reference = True

    def __init__(self) -> None:
        self.impls = load_core_impls()

    def devices(self) -> list:
        return list(cpu_devices())

    def put(self, host_array: np.ndarray, device) -> Any:
        return host_array

    def to_host(self, buffer: Any) -> np.ndarray:
        return buffer

    def execute(self, primitive, *buffers: Any, **params: Any) -> Any:
        try:
            fn = self.impls[primitive]
        except KeyError:
            raise UnsupportedPrimitiveError(self.name, primitive.name) from None
        return fn(*buffers, **params)

    def eager_impl(self, primitive):
        return self.impls.get(primitive)  # None: execute raises UnsupportedPrimitiveError

    def register_kernel(self, primitive, kernel: Callable) -> None:
        self.impls.load_pending()  # a kernel loaded later must not replace this one
        self.impls[primitive] = kernel

    def compile(self, jaxpr: Jaxpr, device) -> Callable[..., Sequence[Any]]:
        fn = lower(jaxpr, NumpyEmitter(self.impls), self, device)
        source = fn.__plax_source__
        fn.as_text = lambda: source  # the generated program (Compiled.as_text shows it)
        return fn


class NumpyEmitter(Emitter):
    """Generates the NumPy backend's programs: one kernel call per equation, no fusion.

    Equations whose kernel is a plain NumPy ufunc call the ufunc directly (with ``out=``
    reuse of dead temporaries, and floating-point warnings switched off once around the
    whole program); the others call their kernel with the parameters bound.

    Args:
      impls: the kernel table (primitive -> ``fn(*arrays, **params)``).
    """

    def __init__(self, impls: dict):
        self.impls = impls

    def emit_equation(self, eqn) -> Step | Callable | None:
        if body_kernel(eqn.primitive) is not None:
            return None  # cond/while/scan: the core's loop, bodies compiled for this program
        fn = self.impls.get(eqn.primitive)
        if fn is None:
            return None
        ufunc = _direct_ufunc(fn, eqn)
        if ufunc is not None:
            return Step(ufunc, accepts_out=True, guarded=True)
        if takes_out(fn):  # (an update: the driver may hand over its dead operand as out=)
            return Step(functools.partial(fn, **eqn.params), accepts_out=True)
        return Step(_bind_params(fn, eqn.params), fresh_result=returns_fresh(fn))

    def guard(self):
        return quiet_enter, quiet_leave


def _direct_ufunc(fn: Callable, eqn) -> Callable | None:
    """The NumPy ufunc to call in place of ``fn`` for this equation, if that is exact.

    Elementwise impls registered from a ufunc carry ``__plax_ufunc__``: ``(ufunc,
    low_precision, kinds)``, ``kinds`` the dtype kinds on which the ufunc is exact (None:
    all). The jaxpr's types tell at compile time that no low-precision (float16/bfloat16)
    detour is needed, so the generated code can skip the impl's wrappers.
    """
    spec = getattr(fn, "__plax_ufunc__", None)
    if spec is None or eqn.params:
        return None
    ufunc, low_precision, kinds = spec
    if not isinstance(ufunc, np.ufunc):
        return None  # (np.real, np.imag: a view of the operand, and no ``out=``)
    if kinds is not None and any(v.aval.dtype.kind not in kinds for v in eqn.invars):
        return None  # (max/min: NumPy's ufunc on integers and bools only)
    if low_precision and any(v.aval.dtype.itemsize == 2 and v.aval.dtype.kind in "fV"
                             for v in eqn.invars):
        return None
    return ufunc


def _bind_params(fn: Callable, params: dict) -> Callable:
    if not params:
        return fn
    return lambda *args: fn(*args, **params)

