"""The toy backend: boxed NumPy buffers on a "toy" device, computed by the reference kernels.

It is the worked example of docs/plugin_guide.md: a backend built only on plax's public
API (``plax.backend``, ``plax.device``, ``plax.lowering`` and ``plax_numpy.impls()``).

The environment (read when the plugin's hook runs) configures it, so plax's own tests can
check that they pass whatever backend a user has installed:

* ``PLAX_TOY_PLATFORM`` unset or ``toy``: a platform of its own (as a GPU backend would
  be), one ``ToyDevice(id=0)``, buffers boxed in :class:`ToyBuffer`; ``cpu``: a second CPU
  backend with a higher priority than the NumPy backend (so it becomes the CPU's default),
  on the shared CPU devices with plain NumPy buffers; any other name: like ``toy``.
* ``PLAX_TOY_PRIORITY`` overrides the priority (default: 0, or 10 on ``cpu``).
* ``PLAX_TOY_COMPILES``: a comma-separated list of primitive names; ``jit`` then compiles
  only those and leaves the rest to plax's fallback (the reference kernels on the host).
"""
from __future__ import annotations

import os

import numpy as np

import plax_numpy
from plax.backend import Backend, UnsupportedPrimitiveError
from plax.device import Device, cpu_devices
from plax.lowering import Emitter, body_kernel, lower


class ToyDevice(Device):
    """The toy platform's device: ``ToyDevice(id=0)``."""

    platform = "toy"
    _repr_name = "ToyDevice"  # repr(device) == "ToyDevice(id=0)"


class ToyBuffer:
    """A buffer on the toy device: a NumPy array the core never touches directly."""

    __slots__ = ("data",)

    def __init__(self, data: np.ndarray):
        self.data = data

    def __repr__(self) -> str:
        return f"ToyBuffer({self.data!r})"


class ToyBackend(Backend):
    """Runs plax primitives for the ``toy`` platform by unboxing buffers for NumPy kernels.

    Args:
      platform: the platform to register (default: ``$PLAX_TOY_PLATFORM``, else ``"toy"``).
      priority: its priority (default: ``$PLAX_TOY_PRIORITY``, else 10 on ``cpu``, 0 elsewhere).
      compiles: names of the primitives ``compile`` handles itself (default:
        ``$PLAX_TOY_COMPILES``, else every primitive with a kernel).
    """

    name = "toy"        # jit(f, backend="toy"), PLAX_BACKEND=toy
    platform = "toy"    # plax.devices("toy"), PLAX_PLATFORMS=toy
    priority = 0        # the highest priority on a platform is its default

    def __init__(self, platform: str | None = None, priority: int | None = None,
                 compiles: set[str] | None = None) -> None:
        self.impls = plax_numpy.impls()  # the reference kernels, over NumPy arrays
        self.platform = platform or os.environ.get("PLAX_TOY_PLATFORM") or "toy"
        self.on_host = self.platform == "cpu"
        if priority is None:
            raw = os.environ.get("PLAX_TOY_PRIORITY")
            priority = int(raw) if raw else (10 if self.on_host else 0)
        self.priority = priority
        if compiles is None and os.environ.get("PLAX_TOY_COMPILES"):
            compiles = set(os.environ["PLAX_TOY_COMPILES"].split(","))
        self.compiles = compiles
        if self.on_host:  # CPU backends share the CPU devices and host buffers
            self._devices = list(cpu_devices())
        else:
            self._devices = [ToyDevice(0, device_kind="toy simulator", platform=self.platform)]
        self.executed: list[str] = []  # primitive names run eagerly, for tests to inspect

    def devices(self) -> list:
        return list(self._devices)

    def put(self, host_array: np.ndarray, device):
        """A host NumPy array as a buffer of this backend (a copy: buffers are immutable)."""
        if self.on_host:
            return host_array
        return ToyBuffer(np.array(host_array, copy=True))

    def to_host(self, buffer) -> np.ndarray:
        return buffer if self.on_host else buffer.data

    def owns_buffer(self, buffer) -> bool:
        """Whether ``buffer`` is one of ours (plax asks when it moves arrays)."""
        if self.on_host:
            return isinstance(buffer, (np.ndarray, np.generic))
        return isinstance(buffer, ToyBuffer)

    def execute(self, primitive, *buffers, **params):
        """Runs one primitive now; returns a buffer (a list for multi-result primitives)."""
        fn = self.impls.get(primitive)
        if fn is None:
            raise UnsupportedPrimitiveError(self.name, primitive.name)
        self.executed.append(primitive.name)
        if self.on_host:
            return fn(*buffers, **params)
        return _box(fn(*[b.data for b in buffers], **params))

    def register_kernel(self, primitive, kernel) -> None:
        self.impls[primitive] = kernel

    def compile(self, jaxpr, device):
        """``executable(*buffers) -> list of buffers`` for a jaxpr without constvars."""
        return lower(jaxpr, ToyEmitter(self), self, device)


class ToyEmitter(Emitter):
    """One step per equation: the reference kernel between unboxing and boxing.

    Declining an equation (returning None) leaves it to plax's fallback, which runs the
    reference kernel on the host and warns once per primitive; a declined ``cond``,
    ``while`` or ``scan`` runs as plax's loop over bodies this backend compiles.
    """

    def __init__(self, backend: ToyBackend):
        self.backend = backend

    def emit_equation(self, eqn):
        if body_kernel(eqn.primitive) is not None:
            return None  # cond/while/scan: plax runs the loop, compiling the bodies with us
        backend = self.backend
        fn = backend.impls.get(eqn.primitive)
        if fn is None or (backend.compiles is not None
                          and eqn.primitive.name not in backend.compiles):
            return None
        params = eqn.params
        if backend.on_host:
            return lambda *bufs: fn(*bufs, **params)
        return lambda *bufs: _box(fn(*[b.data for b in bufs], **params))

    def constant(self, host_value):
        return host_value if self.backend.on_host else ToyBuffer(host_value)


def _box(out):
    if isinstance(out, (list, tuple)):
        return [ToyBuffer(np.asarray(o)) for o in out]
    return ToyBuffer(np.asarray(out))
