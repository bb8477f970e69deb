"""The toy backend: boxed NumPy buffers on a "toy" device, computed by plax_numpy's kernels."""
from __future__ import annotations

import numpy as np

from plax.backend import Backend, UnsupportedPrimitiveError
from plax.devices import Device


class ToyDevice(Device):
    """The toy platform's device: ``ToyDevice(id=0)``."""

    platform = "toy"
    _repr_name = "ToyDevice"


class ToyBuffer:
    """A buffer on the toy device: a NumPy array the core never touches directly."""

    __slots__ = ("data",)

    def __init__(self, data: np.ndarray):
        self.data = data

    def __repr__(self) -> str:
        return f"ToyBuffer({self.data!r})"


def _wrap(out):
    if isinstance(out, (list, tuple)):
        return [ToyBuffer(np.asarray(o)) for o in out]
    return ToyBuffer(np.asarray(out))


class ToyBackend(Backend):
    """Runs plax primitives for the ``toy`` platform by unboxing buffers for NumPy kernels."""

    name = "toy"
    platform = "toy"
    priority = 0

    def __init__(self) -> None:
        from plax_numpy.backend import _load_impls
        self.impls = _load_impls()
        self._devices = [ToyDevice(0, device_kind="toy simulator")]
        self.executed: list[str] = []  # primitive names run eagerly, for tests to inspect

    def devices(self) -> list:
        return list(self._devices)

    def put(self, host_array: np.ndarray, device) -> ToyBuffer:
        return ToyBuffer(np.array(host_array, copy=True))

    def to_host(self, buffer: ToyBuffer) -> np.ndarray:
        return buffer.data

    def owns_buffer(self, buffer) -> bool:
        return isinstance(buffer, ToyBuffer)

    def execute(self, primitive, *buffers, **params):
        fn = self.impls.get(primitive)
        if fn is None:
            raise UnsupportedPrimitiveError(self.name, primitive.name)
        self.executed.append(primitive.name)
        return _wrap(fn(*[b.data for b in buffers], **params))

    def compile(self, jaxpr, device):
        from plax_numpy.backend import compile_jaxpr
        inner = compile_jaxpr(jaxpr, self.impls, self.name)

        def executable(*buffers):
            return _wrap(inner(*[b.data for b in buffers]))

        executable.__plax_source__ = inner.__plax_source__
        return executable
