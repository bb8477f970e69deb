"""Devices: the places where buffers live, and how work is sent to them.

``plax.devices()`` lists each device once, whichever backends drive it; which
backend executes is chosen per call (``jit(f, backend="numpy")``, with any installed
backend's name), by the environment (``PLAX_BACKEND``, ``PLAX_PLATFORMS``), or by
priority. The default platform is an accelerator platform when one is present, else the
CPU; ``PLAX_BACKEND=name`` makes that backend's platform the default and its first device
the default device (``jax.config.update("jax_default_device", d)`` sets it too).
``jax.config.update("jax_num_cpu_devices", N)`` before the devices are first listed, or
``PLAX_NUM_CPU_DEVICES=N`` (or ``XLA_FLAGS=--xla_force_host_platform_device_count=N``) in the
environment, gives N CPU devices (for pmap and meshes).

Arrays move between devices, and between backends of one device, through the backend
protocol in both directions (:func:`move_buffer`): no copy where the buffer can be used as
it is, a backend's own device-to-device ``transfer`` where it has one, else through the
host. ``device_put(x, sharding)`` splits arrays over several devices (:mod:`plax.sharding`).
"""
from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
import warnings
from typing import Any, Iterator

import numpy as np

from plax.config import config, env_number
from plax.sharding_unreduced import has_unreduced


class Device:
    """A place where buffers live and work runs: ``CpuDevice(id=0)``, ``CudaDevice(id=1)``.

    Attributes:
      platform: ``"cpu"`` or ``"gpu"`` (or a third-party platform name).
      id: the index of the device on its platform.
      device_kind: a description of the hardware.
    """

    platform = "?"
    _repr_name = "Device"
    _str_name: str | None = None  # the prefix of str(device), default: the platform
    _backend_cache = None  # class defaults, for subclasses whose __init__ skips ours

    def __init__(self, id: int, device_kind: str | None = None, platform: str | None = None):
        self.id = int(id)
        if platform is not None:
            self.platform = platform
        self.device_kind = device_kind or self.platform
        self.process_index = 0
        self.host_id = 0
        self._backend_cache = None
        self._kernels: dict = {}  # primitive -> eager kernel of the backend (plax.dispatch)

    @property
    def backend(self):
        """The backend that runs eager work on this device (the platform's default)."""
        b = self._backend_cache
        if b is None:
            from plax import plugins
            reg = plugins.registry()
            ranked = reg.backends_for_platform(self.platform)
            if not ranked:
                raise RuntimeError(f"No backend drives {self!r}. {reg.unavailable(self.platform)}")
            b = self._backend_cache = ranked[0]
        return b

    client = backend

    def __repr__(self) -> str:
        return f"{self._repr_name}(id={self.id})"

    def __str__(self) -> str:
        return f"{self._str_name or self.platform}:{self.id}"  # JAX prints "cpu:0", "cuda:1"

    def __eq__(self, other) -> bool:
        # Identity first: eager dispatch compares an array's device with the target device,
        # usually the very same object. Foreign objects are unequal (False, not NotImplemented:
        # their own reflected __eq__ may raise or return a non-bool).
        return self is other or (isinstance(other, Device) and self.id == other.id
                                 and self.platform == other.platform)

    def __hash__(self) -> int:
        return hash((self.platform, self.id))


class CpuDevice(Device):
    """A CPU device. All CPU devices share host memory."""

    platform = "cpu"
    _repr_name = "CpuDevice"


class CudaDevice(Device):
    """An NVIDIA GPU, driven by a GPU backend such as plax_cupy."""

    platform = "gpu"
    _repr_name = "CudaDevice"
    _str_name = "cuda"


_XLA_DEVICE_COUNT = re.compile(r"--xla_force_host_platform_device_count=(\S*)")


def cpu_device_count() -> int:
    """The number of CPU devices asked for, read now: the one parse of the setting, shared
    by :func:`cpu_devices` and the multi-process transports (each process's count).

    In order: ``jax.config.update("jax_num_cpu_devices", N)``, else ``PLAX_NUM_CPU_DEVICES``
    / ``JAX_NUM_CPU_DEVICES`` (unset, empty or negative: the next one), else the
    ``--xla_force_host_platform_device_count=N`` of ``XLA_FLAGS`` (older notebooks), else 1.
    As in JAX, a negative count (``-1``, the option's default) leaves the count unset, so
    that the next source decides, and zero is refused.

    Returns:
      The number of CPU devices, at least 1.

    Raises:
      ValueError: a value that is not an integer, or zero (or, in ``XLA_FLAGS``, below 1),
        naming where it was set.

    Example:
      >>> os.environ["PLAX_NUM_CPU_DEVICES"] = "2"
      >>> cpu_device_count()   # (if jax_num_cpu_devices was not set with config.update)
      2
      >>> del os.environ["PLAX_NUM_CPU_DEVICES"]
    """
    n, source = config.read("num_cpu_devices"), "jax_num_cpu_devices"
    if n < 0:
        for source in ("PLAX_NUM_CPU_DEVICES", "JAX_NUM_CPU_DEVICES"):
            n = env_number(source, -1, kind=int)  # (a word: a ValueError naming the variable)
            if n >= 0:
                break
        else:
            found = _XLA_DEVICE_COUNT.findall(os.environ.get("XLA_FLAGS", ""))
            if not found:
                return 1
            # XLA itself aborts on a word and fails on a count below 1
            source, raw = "XLA_FLAGS --xla_force_host_platform_device_count", found[-1]
            try:
                n = int(raw)
            except ValueError:
                n = 0
            if n < 1:
                raise ValueError(f"{source} must be a positive integer, got {raw!r}")
    if n == 0:
        # JAX fails later, while starting its CPU client, with a message naming no setting
        raise ValueError(f"{source} must be a positive integer (a negative one leaves the "
                         "count unset), got 0")
    return n


def _refuse_after_devices(name: str) -> None:
    # JAX's error: the device count is fixed once the devices exist
    if cpu_devices.cache_info().currsize:
        raise RuntimeError(
            "jax_num_cpu_devices config should be updated before backends are initialized i.e. "
            "before any JAX operation is executed. You should initialize this config "
            "immediately after `import jax`.")


config.guard("num_cpu_devices", _refuse_after_devices)


@functools.lru_cache(maxsize=None)
def cpu_devices() -> tuple[CpuDevice, ...]:
    """The process's CPU devices, shared by every CPU backend (their number from
    :func:`cpu_device_count`)."""
    n = cpu_device_count()
    # In a multi-process run (plax.distributed.initialize) ids are global: process p's
    # devices are p*N ... p*N + N-1, as JAX numbers them.
    from plax import distributed
    rank = distributed._state["process_index"]
    out = []
    for i in range(n):
        d = CpuDevice(rank * n + i, device_kind="cpu")
        d.process_index = d.host_id = rank
        out.append(d)
    return tuple(out)


# ------------------------------------------------------------------ queries

def _registry():
    from plax import plugins
    return plugins.registry()


def devices(platform: str | None = None, backend: str | None = None) -> list[Device]:
    """The devices of a platform (default: the default platform), or of one backend.

    Args:
      platform: ``"cpu"``, ``"gpu"``, ... or a backend name; None for the default platform
        (with ``PLAX_BACKEND`` set: that backend's devices).
      backend: a backend name (``"numpy"``, or any installed backend's): the devices it drives.

    Returns:
      A list of :class:`Device`, ordered by id.

    Raises:
      RuntimeError: the platform or backend is not available; the message says whether
        configuration (``PLAX_PLATFORMS``) excluded it, and lists what is available.

    Example:
      >>> plax.devices()
      [CpuDevice(id=0)]
    """
    local = _local_devices(platform, backend)
    from plax import distributed
    remote = distributed._state["remote_devices"]
    if remote and local and local[0].platform == "cpu":
        return sorted(local + list(remote), key=lambda d: d.id)
    return local


def _local_devices(platform: str | None = None, backend: str | None = None) -> list[Device]:
    reg = _registry()
    if backend is not None:
        return reg.devices_of(reg.get_backend(backend))
    if platform is None:
        return reg.default_devices()
    reg.check_environment()
    from plax.plugins import _platform_alias
    canonical = _platform_alias(platform)
    if canonical in reg.platforms():
        return list(reg.platform_devices[canonical])
    if platform in reg.backends:
        return reg.devices_of(reg.backends[platform])
    raise RuntimeError(reg.unavailable(platform))


def local_devices(process_index: int | None = None, backend: str | None = None,
                  host_id: int | None = None) -> list[Device]:
    """The devices of this process (of the default platform, or of ``backend``): all of
    :func:`devices` except in a multi-process run (:mod:`plax.distributed`).

    Args:
      process_index: must be None or this process's index.
      backend: a backend or platform name, as for :func:`devices`.
      host_id: JAX's older name of ``process_index`` (a DeprecationWarning, as in JAX).
    """
    if host_id is not None:
        warnings.warn("The argument to jax.local_devices has been renamed from `host_id` to "
                      "`process_index`. This alias will eventually be removed; please update "
                      "your code.", DeprecationWarning, stacklevel=2)
        process_index = host_id
    if process_index is not None and process_index != globals()["process_index"]():
        raise ValueError(f"local_devices: process_index={process_index} is not this process "
                         f"({globals()['process_index']()}); only this process's devices are "
                         "addressable")
    return _local_devices(backend)


def device_count(backend: str | None = None) -> int:
    """The number of devices of the default (or given) platform, over all processes."""
    return len(devices(backend))


def local_device_count(backend: str | None = None) -> int:
    """The number of devices of this process."""
    return len(local_devices(backend=backend))


def process_index(backend: str | None = None) -> int:
    """This process's index in a multi-process run (0 otherwise); ``backend`` (a backend or
    platform name) must be available, as in JAX."""
    if backend is not None:
        devices(backend)  # its error for an unknown or unavailable backend
    from plax import distributed
    return distributed._state["process_index"]


def process_count(backend: str | None = None) -> int:
    """The number of processes of the run (1 unless :func:`plax.distributed.initialize`
    joined several); ``backend`` (a backend or platform name) must be available."""
    if backend is not None:
        devices(backend)  # its error for an unknown or unavailable backend
    from plax import distributed
    return distributed._state["process_count"]


def default_backend() -> str:
    """The platform of the default device, e.g. ``"cpu"`` (as in JAX)."""
    return default_device().platform


# ------------------------------------------------------------------ default device

class _DefaultDeviceState(threading.local):
    def __init__(self):
        self.stack: list[Device] = []


_default_state = _DefaultDeviceState()
_default_cache: list = [None]


def _invalidate_caches(known_devices=()) -> None:
    _default_cache[0] = None
    for d in (*cpu_devices(), *known_devices):
        d._backend_cache = None
        d._kernels = {}


def default_device() -> Device:
    """The device new arrays are placed on: the innermost ``with default_device(d)``, else the
    first of :func:`devices` (the ``PLAX_BACKEND`` backend's first device when that is set,
    else the default platform's first)."""
    stack = _default_state.stack
    if stack:
        return stack[-1]
    d = _default_cache[0]
    if d is None:
        d = _configured_default() or _local_devices()[0]  # never remote
        if not config.has_thread_contexts():  # else jax_default_device may differ by thread
            _default_cache[0] = d
    return d


def _configured_default() -> Device | None:
    """The device ``jax.config.update("jax_default_device", d)`` set (a Device or a platform
    name: its first device), or None."""
    d = config.read("default_device")
    if d is None or isinstance(d, Device):
        return d
    if isinstance(d, str):
        return devices(d)[0]
    raise ValueError(f"jax_default_device must be a Device (e.g. plax.devices('cpu')[0]), a "
                     f"platform name or None, got {d!r} of type {type(d).__name__}")


def _on_config_change(name: str, value: Any) -> None:
    if name == "default_device":
        _default_cache[0] = None  # resolved again on next use


config.on_change(_on_config_change)


@contextlib.contextmanager
def default_device_context(new_val: Device | str | None) -> Iterator[None]:
    """Places new arrays on ``new_val`` inside a ``with`` block (``plax.default_device(d)``).

    Args:
      new_val: a Device, a platform name (its first device), or None (no change); JAX's
        parameter name.

    Raises:
      ValueError: ``new_val`` is neither (as in JAX).
      RuntimeError: the named platform is not available.
    """
    if new_val is None:
        yield
        return
    if isinstance(new_val, str):
        new_val = devices(new_val)[0]
    if not isinstance(new_val, Device):
        raise ValueError(f"plax.default_device expects a Device (e.g. plax.devices('cpu')[0]) or "
                         f"a platform name, got {new_val!r} of type {type(new_val).__name__}.")
    _default_state.stack.append(new_val)
    try:
        yield
    finally:
        _default_state.stack.pop()


def resolve_device(device: Any, caller: str = "") -> Device:
    """A Device from a Device, a platform/backend name, a one-device sharding, or None (the
    default device).

    Args:
      device: what the user passed.
      caller: the function messages name (``"plax.device_put"``), if any.

    Raises:
      ValueError: ``device`` is not one of those, or names no available platform or backend
        (JAX raises ValueError for a bad device argument); the message names the argument.
      RuntimeError: the environment (``PLAX_BACKEND``, ``PLAX_PLATFORMS``) is invalid.
    """
    if device is None:
        return default_device()
    if isinstance(device, Device):
        return device
    got = f"{caller} got" if caller else "Got"
    if isinstance(device, str):
        reg = _registry()
        reg.check_environment()  # a bad configuration stays a RuntimeError
        try:
            return devices(device)[0]
        except RuntimeError as err:
            raise ValueError(f"{got} device={device!r}, which names no available device: "
                             f"{err}") from None
    from plax.sharding import Sharding
    if isinstance(device, Sharding) and device.num_devices == 1:
        return device._device_assignment[0]
    if isinstance(device, Sharding):
        raise ValueError(f"{got} a sharding over {device.num_devices} devices ({device!r}) where "
                         "one device is expected.")
    raise ValueError(f"{got} device={device!r} of type {type(device).__name__}; expected "
                     "None, a plax Device, a sharding with one device, or a platform or backend "
                     "name. plax.devices() lists the devices.")


# ------------------------------------------------------------------ transfers

def _on_host(backend) -> bool:
    # The protocol's rule: CPU backends keep their buffers in host memory as NumPy arrays,
    # which every CPU device and every CPU backend can use as they are.
    return backend.platform == "cpu"


def move_buffer(buf: Any, src: Device, dst: Device, *, src_backend=None, dst_backend=None) -> Any:
    """``buf`` (on ``src``, owned by ``src_backend``) as a buffer of ``dst_backend`` on ``dst``.

    In order: the same device and a buffer the destination backend can use (its own, or one
    of its kind: ``dst_backend.owns_buffer``) is returned as is; between CPU backends and
    devices (host memory) nothing is copied; a backend that owns buffers of this kind may
    copy device to device (:meth:`plax.backend.Backend.transfer`); otherwise the data goes
    through the host: ``src_backend.to_host`` then ``dst_backend.put``.

    Args:
      buf: the buffer.
      src, dst: the devices it is on and must go to.
      src_backend: the backend that made ``buf`` (default: ``src``'s default backend).
      dst_backend: the backend that will use the result (default: ``dst``'s).

    Example:
      >>> cpu = plax.devices("cpu")[0]
      >>> move_buffer(np.ones(2), cpu, cpu)
      array([1., 1.])
    """
    if src_backend is None:
        src_backend = src.backend
    if dst_backend is None:
        dst_backend = dst.backend
    # (getattr: a backend need not subclass Backend, and these two methods are optional)
    owns = getattr(dst_backend, "owns_buffer", None)
    mine = src_backend is dst_backend or (owns is not None and owns(buf))
    if mine and src == dst:
        return buf
    if _on_host(src_backend) and _on_host(dst_backend):
        return buf
    transfer = getattr(dst_backend, "transfer", None) if mine else None
    if transfer is not None:
        moved = transfer(buf, src, dst)
        if moved is not None:
            return moved
    return dst_backend.put(np.asarray(src_backend.to_host(buf)), dst)


def device_put(x: Any, device: Any = None, *, src: Any = None, may_alias: bool | None = None,
               donate: bool = False):
    """Places ``x`` (a pytree of arrays and scalars) on ``device``.

    Args:
      x: an array, NumPy array, scalar, or a pytree of them.
      device: a Device, a platform or backend name (its first device; JAX itself takes only
        devices and shardings), a :class:`plax.sharding.Sharding`, a
        :class:`~plax.sharding.PartitionSpec` (a NamedSharding on the current mesh, set with
        ``plax.set_mesh``/``plax.sharding.use_mesh``), None, or a pytree prefix of ``x``
        holding these. With a device, every leaf is placed on it and *committed* to it
        (operations keep their result there, and mixing arrays committed to different
        devices is an error). With a NamedSharding (or another sharding of several
        devices), every leaf is split as it says, one buffer per device, and carries it.
        With None, Arrays stay where they are and other leaves go to the default device,
        uncommitted.
      src: where ``x`` is now (JAX's hint for its transfers); plax reads that from each
        leaf itself, so ``src`` changes nothing.

    Returns:
      The same structure with every leaf a :class:`plax.Array` on the device.

    Raises:
      TypeError: for a leaf that is not array-like, naming it.
      ValueError: for a ``device`` that is not a device, or names none available (as JAX);
        a PartitionSpec without a current mesh, or one longer than a leaf's rank; a pytree
        of targets that is not a prefix of ``x``.

    Example:
      >>> x = plax.device_put(np.ones(3))
      >>> x.devices()
      {CpuDevice(id=0)}
    """
    from plax import tree_util
    from plax.memory import Space
    from plax.sharding import NamedSharding, PartitionSpec, Sharding, SingleDeviceSharding, _place_tree
    if isinstance(device, Space) or (type(device) is SingleDeviceSharding
                                     and device.memory_kind != "device"):
        return _put_in_memory(x, device)
    if isinstance(device, NamedSharding):
        device.is_fully_addressable  # noqa: B018 -- over an AbstractMesh: JAX's ValueError
    if isinstance(device, (PartitionSpec, NamedSharding)) or (
            isinstance(device, Sharding) and device.num_devices > 1):
        return _place_tree(x, device, "plax.device_put device")
    if isinstance(device, (tuple, list, dict)):  # a pytree prefix of x: a target per leaf
        leaves, treedef = tree_util.tree_flatten(x)
        try:
            targets = treedef.flatten_up_to(tree_util.tree_broadcast(
                device, x, is_leaf=lambda d: not isinstance(d, (tuple, list, dict))
                or isinstance(d, PartitionSpec)))
        except ValueError as err:
            raise ValueError(f"plax.device_put: device must be a device, a sharding or a pytree "
                             f"prefix of x's structure; got {device!r}:\n{err}") from None
        return treedef.unflatten([device_put(leaf, target, may_alias=may_alias, donate=donate)
                                  for leaf, target in zip(leaves, targets)])
    committed = device is not None
    dev = resolve_device(device, "plax.device_put")
    return tree_util.tree_map(lambda leaf: _put_leaf(leaf, dev, committed), x)


def _put_in_memory(x: Any, target: Any):
    """``device_put`` to a memory space (``plax.memory.Space``) or to a single-device
    sharding of another memory kind than ``"device"``: each leaf is placed (a Space keeps an
    Array on its device, as in JAX) and committed, and its sharding carries the memory kind.
    plax's CPU backends hold every kind in the one host memory, so no copy is made for the
    kind; an operation's result is in ``"device"`` memory."""
    from plax import tree_util
    from plax.array import Array, _Piece, _sharded
    from plax.core.trace import Tracer
    from plax.memory import Space, memory_kind
    from plax.sharding import SingleDeviceSharding
    if isinstance(target, Space):
        if target is Space.Any:
            raise ValueError("plax.device_put: memory space Space.Any names no memory to put "
                             "the array in; give Space.Device or Space.Host")
        kind, dev = memory_kind(target), None
    else:
        kind, dev = target.memory_kind, target._device

    def put(leaf):
        if isinstance(leaf, Tracer):
            return leaf  # traced: the value is where the program runs (docs/design_decisions.md)
        where = dev if dev is not None else (
            leaf._device if isinstance(leaf, Array) else default_device())
        placed = _put_leaf(leaf, where, True)
        if not isinstance(placed, Array) or kind == "device":
            return placed
        index = (slice(None),) * placed.ndim
        return _sharded(placed.aval, SingleDeviceSharding(where, memory_kind=kind),
                        [_Piece(where, index, placed._buf, where.backend)], True)

    return tree_util.tree_map(put, x)


def _put_leaf(leaf: Any, device: Device, committed: bool):
    from plax.array import Array, _PendingArray, _place, from_host
    from plax.core.trace import Tracer
    if isinstance(leaf, Array):
        if not committed:
            return leaf
        if type(leaf) is Array and leaf._device == device:
            return leaf if leaf._committed else Array._new(leaf._buf, leaf.aval, device, True)
        if type(leaf) is _PendingArray:
            host = leaf._pending_host()
            if host is not None and type(host) is np.ndarray:  # still on the host: place it
                return _place(host, leaf.aval, device, True)
        return Array._new(leaf._buffer_on(device), leaf.aval, device, True)
    if isinstance(leaf, Tracer):
        return leaf
    from plax.float0 import is_float0_value
    if is_float0_value(leaf):
        return np.asarray(leaf)  # no data to place: a NumPy array on every device, as in JAX
    return from_host(leaf, device=device, committed=committed)


def _shard_leaf(leaf: Any, sharding):
    """``leaf`` split over the devices of ``sharding`` (its parts copied from the host)."""
    from plax.array import Array, _host_numpy, make_array_from_callback
    from plax.core.trace import Tracer
    if isinstance(leaf, Tracer):
        return leaf
    if has_unreduced(sharding):
        from plax.sharding_unreduced import place_unreduced  # partial sums per device
        return leaf if isinstance(leaf, Array) and leaf.sharding == sharding else \
            place_unreduced(leaf, sharding)
    if isinstance(leaf, Array):
        if leaf.sharding == sharding:
            return leaf
        host = leaf._host_value()
    else:
        host, _ = _host_numpy(leaf, None)
    return make_array_from_callback(host.shape, sharding, lambda index: host[index],
                                    dtype=host.dtype)


def device_get(x: Any):
    """Copies a pytree of arrays to the host: every Array leaf becomes a NumPy array.

    Example:
      >>> plax.device_get({"w": jnp.ones(2)})
      {'w': array([1., 1.], dtype=float32)}
    """
    from plax import tree_util
    from plax.array import Array

    def get(leaf):
        if isinstance(leaf, Array):
            return leaf._host_value(copy=True)
        return leaf

    return tree_util.tree_map(get, x)
