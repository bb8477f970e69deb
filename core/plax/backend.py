"""The Backend interface: what a package implements to run plax on its hardware.

A backend is returned by a ``plax_backends`` hook (see :mod:`plax.plugins`). It
owns buffers (the objects that hold array data on a device), runs single
primitives eagerly, and compiles jaxprs for ``jit``. Several backends may drive
one platform: the NumPy reference backend and any other CPU backend (a third-party
compiling backend, or the first-party Numba backend) all run on the same CPU
devices and share host buffers (NumPy arrays), so an array moves between them without
a copy.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, ContextManager, Sequence

import numpy as np


class Backend:
    """Base class of backends. Subclasses set the class attributes and override the methods.

    Attributes:
      name: unique name used by ``jit(f, backend=name)`` and ``PLAX_BACKEND`` (``"numpy"``).
      platform: the device platform it runs on (``"cpu"``, ``"gpu"``).
      priority: among backends of one platform the highest priority is the default
        (``PLAX_BACKEND=name`` overrides it, and makes that backend's platform the default).
      reference: this backend has a kernel for every core primitive, handed out by
        :meth:`eager_impl`; compiled code of other backends falls back to them per equation
        (the NumPy backend sets it).
    """

    name: str = "?"
    platform: str = "cpu"
    priority: int = 0
    reference: bool = False

    def devices(self) -> list:
        """The devices this backend can run on, each a :class:`plax.device.Device`."""
        raise NotImplementedError

    def put(self, host_array: np.ndarray, device) -> Any:
        """Copies a host NumPy array onto ``device`` and returns the buffer."""
        raise NotImplementedError

    def to_host(self, buffer: Any) -> np.ndarray:
        """Returns the buffer's data as a NumPy array (a view where the buffer is on the host)."""
        raise NotImplementedError

    def execute(self, primitive, *buffers: Any, **params: Any) -> Any:
        """Applies ``primitive`` to ``buffers`` now; returns a buffer (a list for multi-output
        primitives). Raises :class:`UnsupportedPrimitiveError` for a primitive it declines."""
        raise NotImplementedError

    def eager_impl(self, primitive) -> Callable[..., Any] | None:
        """Optionally, the kernel ``fn(*buffers, **params)`` that :meth:`execute` would run for
        ``primitive``. Eager dispatch caches it per device and calls it directly, saving a call
        per operation. Return None (the default) to have every call go through ``execute``."""
        return None

    def compile(self, jaxpr, device) -> Callable[..., Sequence[Any]]:
        """Compiles a constvar-free jaxpr into ``executable(*buffers) -> list of buffers``.

        The executable may also have an ``as_text()`` method returning the code it runs
        (generated source, assembly...) for people to read: ``jit(f).lower(x).compile()
        .as_text()`` shows it (see :func:`executable_text`)."""
        raise NotImplementedError

    def info(self) -> dict[str, Any]:
        """Optionally, facts about this backend for ``python -m plax info`` (library versions,
        threads...), as ``{label: value}``; the default has none."""
        return {}

    def register_kernel(self, primitive, kernel: Callable[..., Any]) -> None:
        """Adds the kernel ``kernel(*buffers, **params)`` of a primitive defined outside the
        core (by a plugin), so :meth:`execute`, :meth:`eager_impl` and compiled code run it.
        Backends without a kernel table raise NotImplementedError (the default)."""
        raise NotImplementedError(f"Backend {self.name!r} does not accept kernels for new "
                                  f"primitives (tried to register {primitive}).")

    def block_until_ready(self, buffer: Any) -> None:
        """Waits until the computation producing ``buffer`` has finished (no-op if synchronous)."""

    def owns_buffer(self, buffer: Any) -> bool:
        """Whether ``buffer`` is a buffer of this backend's kind (used when moving arrays: on
        one device, a buffer of its kind is used as is). The default recognizes NumPy arrays,
        the buffers of CPU backends; backends with other buffers override it."""
        return isinstance(buffer, (np.ndarray, np.generic))

    def transfer(self, buffer: Any, src_device, dst_device) -> Any | None:
        """Optionally, a copy of ``buffer`` (a buffer of this backend's kind on ``src_device``)
        on ``dst_device``, made device to device (peer copy, DLPack exchange...).

        Called when an array moves to one of this backend's devices from another device and
        :meth:`owns_buffer` accepts the buffer. Return None (the default) to have plax copy
        through the host instead (``to_host`` of the buffer's owner, then :meth:`put`).
        """
        return None

    def dlpack(self, buffer: Any, *, stream: Any = None, max_version: tuple | None = None,
               dl_device: tuple | None = None, copy: bool | None = None) -> Any:
        """A DLPack capsule of ``buffer`` (what ``Array.__dlpack__`` returns), following the
        DLPack protocol's keyword arguments.

        The default serves host buffers: zero copy, marked read-only (plax arrays are
        immutable), for consumers of DLPack 1.0 or later (``max_version >= (1, 0)``, as
        ``np.from_dlpack`` asks); older consumers, which cannot be told, and ``copy=True``
        get a copy of their own. A device backend overrides it to export its buffers in
        place and to order the consumer's ``stream`` after the work producing them.

        Raises:
          ValueError: ``stream`` is not None (host memory has no streams), as NumPy says.
          BufferError: ``copy=False`` and the consumer cannot take read-only memory.
        """
        if stream is not None:
            raise ValueError(f"Backend {self.name!r} exports host memory: the DLPack stream "
                             f"must be None (got {stream!r}).")
        host = np.asarray(self.to_host(buffer))
        new_protocol = max_version is not None and tuple(max_version) >= (1, 0)
        kwargs = {"max_version": max_version, "dl_device": dl_device} if new_protocol else {}
        if copy:
            return np.array(host, copy=True).__dlpack__(**kwargs)
        if not new_protocol:
            if copy is False:
                raise BufferError("A plax Array is read-only and this DLPack consumer cannot "
                                  "be told so (it asked for DLPack < 1.0); export with "
                                  "copy=None or copy=True.")
            return np.array(host, copy=True).__dlpack__()
        view = host.view()
        view.flags.writeable = False
        return view.__dlpack__(**kwargs)

    def dlpack_device(self, buffer: Any, device) -> tuple[int, int]:
        """``(DLPack device type, device id)`` of ``buffer`` on ``device``: ``(1, 0)``
        (kDLCPU) for the CPU, ``(2, id)`` (kDLCUDA) for a GPU, else what the buffer's own
        ``__dlpack_device__`` says."""
        kind = DLPACK_DEVICE_TYPES.get(device.platform)
        if kind == 1:
            return (1, 0)
        if kind is not None:
            return (kind, device.id)
        own = getattr(buffer, "__dlpack_device__", None)
        if own is None:
            raise BufferError(f"Backend {self.name!r} cannot say where its buffers on "
                              f"{device!r} are for DLPack.")
        return tuple(own())

    def from_dlpack(self, obj: Any, device) -> Any:
        """A buffer on ``device`` viewing the memory of ``obj``, an object exporting
        ``__dlpack__`` from that device, without a copy where the backend can.

        The default serves host memory: ``np.from_dlpack`` (a view), then :meth:`put` (which
        keeps it, for CPU backends)."""
        return self.put(np.from_dlpack(obj), device)

    def threads_limited(self, n: int) -> ContextManager[None]:
        """Optionally, a context in which the backend's kernels called from the current
        thread use at most ``n`` threads of their own (a multi-device runtime running one
        device per thread gives each a share of the cores). The default changes nothing.

        Example:
          >>> backend = plax.devices()[0].backend
          >>> with backend.threads_limited(1):
          ...     _ = plax.jit(lambda x: x * 2)(plax.numpy.ones(3))
        """
        return contextlib.nullcontext()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name!r} platform={self.platform!r}>"


#: plax platform -> DLPack device type (``DLDeviceType``: kDLCPU = 1, kDLCUDA = 2)
DLPACK_DEVICE_TYPES = {"cpu": 1, "gpu": 2}


def executable_text(executable) -> str | None:
    """The readable code of a compiled executable, or None where its backend offers none.

    The protocol: an executable returned by :meth:`Backend.compile` may have an ``as_text()``
    method returning a string (the NumPy backend returns its generated Python program, the
    Numba backend that program followed by the source of each fused kernel). Executables
    made by :func:`plax.lowering.lower` without one still carry their program as
    ``__plax_source__``, which is returned instead.
    """
    as_text = getattr(executable, "as_text", None)
    if callable(as_text):
        return as_text()
    source = getattr(executable, "__plax_source__", None)
    return source if isinstance(source, str) else None


class UnsupportedPrimitiveError(NotImplementedError):
    """A backend declined a primitive."""

    def __init__(self, backend_name: str, primitive_name: str, why: str = ""):
        super().__init__(f"Backend {backend_name!r} does not implement primitive {primitive_name!r}"
                         + (f": {why}" if why else "") + ". Use another backend "
                         "(jit(f, backend=...), PLAX_BACKEND=...) or register an implementation.")
        self.backend_name = backend_name
        self.primitive_name = primitive_name
