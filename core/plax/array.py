"""Array: an immutable n-dimensional array that carries its placement.

A plain Array holds one backend *buffer* (a NumPy array for CPU devices), its abstract
value (shape, dtype, weak type) and its device; the buffer belongs to the backend that
drives that device by default. Two private subclasses cover the other cases, so that the
eager and jit fast paths (which test ``type(x) is Array``) stay as cheap as they were:

* ``_PendingArray``: a host value made while a transform traces (``jnp.array(2.0)`` inside
  ``jit``), put on its device only if something computes with it there. Tracing reads its
  host value for literals and constants, so it never makes a device round trip.
* ``_ShardedArray``: one buffer per device of a :class:`plax.sharding.Sharding`, each
  tagged with the backend that owns it (``plax.make_array_from_single_device_arrays``,
  ``plax.make_array_from_callback``, ``plax.device_put(x, sharding)``).

Operators and methods are installed by :mod:`plax.numpy.array_methods` (shared with
tracers), so ``x + y`` binds the ``add`` primitive whatever is tracing it.
"""
from __future__ import annotations

import numbers
import threading
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from plax import dtypes
from plax.core.shaped_array import ShapedArray
from plax.core.trace import Tracer, state as _trace_state
from plax.sharding import (AxisType, NamedSharding, Shard, Sharding, SingleDeviceSharding,
                           index_key, index_shape)
from plax.sharding_unreduced import has_unreduced


class Array:
    """An immutable array on a device (JAX's ``jax.Array``).

    Create one with :func:`plax.numpy.array`, :func:`plax.device_put` or any plax
    operation. Arrays cannot be changed in place: ``x[0] = 1`` raises TypeError;
    use ``x = x.at[0].set(1)``. ``x.sharding`` says where its parts live (one device
    unless it was built over several, see :mod:`plax.sharding`).

    Example:
      >>> x = jnp.array([1.0, 2.0])
      >>> x
      Array([1., 2.], dtype=float32)
    """

    __slots__ = ("_buf", "aval", "_device", "_committed", "__weakref__")
    __array_priority__ = 100

    @staticmethod
    def _new(buf: Any, aval: ShapedArray, device, committed: bool = False) -> "Array":
        a = object.__new__(Array)
        a._buf = buf
        a.aval = aval
        a._device = device
        a._committed = committed
        return a

    def __init__(self, *args, **kwargs):
        raise TypeError("plax.Array cannot be constructed directly; use plax.numpy.array(...) "
                        "or plax.device_put(...).")

    # ---- abstract value
    shape = property(lambda self: self.aval.shape)
    dtype = property(lambda self: self.aval.dtype)
    ndim = property(lambda self: len(self.aval.shape))
    size = property(lambda self: self.aval.size)
    weak_type = property(lambda self: self.aval.weak_type)
    itemsize = property(lambda self: self.aval.dtype.itemsize)
    nbytes = property(lambda self: self.aval.size * self.aval.dtype.itemsize)

    # ---- placement
    @property
    def device(self):
        """The device the array lives on (for an array on several devices: its sharding,
        as in JAX)."""
        return self._device

    def devices(self) -> set:
        """The set of devices holding the array (one device for an unsharded array)."""
        return {self._device}

    @property
    def committed(self) -> bool:
        """Whether the array was explicitly placed (``device_put(x, d)``) and so stays there."""
        return self._committed

    @property
    def sharding(self) -> Sharding:
        """Which part of the array each device holds (:mod:`plax.sharding`)."""
        return SingleDeviceSharding(self._device)

    @property
    def addressable_shards(self) -> list[Shard]:
        """One :class:`plax.sharding.Shard` per device: its device, index and data.

        Example:
          >>> [s.index for s in jnp.ones(2).addressable_shards]
          [(slice(None, None, None),)]
        """
        return [Shard(self._device, (slice(None),) * self.ndim, 0, self)]

    global_shards = addressable_shards
    is_fully_addressable = property(lambda self: True)
    is_fully_replicated = property(lambda self: True)

    def block_until_ready(self) -> "Array":
        """Waits for the computation producing this array to finish, then returns it."""
        self._device.backend.block_until_ready(self._buf)
        return self

    def copy_to_host_async(self) -> None:
        """Starts copying to the host (a no-op for host buffers)."""

    def delete(self) -> None:
        """Frees the array's buffer; using the array afterwards raises RuntimeError, as in JAX."""
        if type(self) is Array:
            from plax.transforms.donation import mark_deleted
            mark_deleted(self)
        else:
            self._buf = None

    def is_deleted(self) -> bool:
        return self._buf is None

    def _buffer_on(self, device) -> Any:
        """The array's data as a buffer of ``device``'s default backend (moved if need be)."""
        if device == self._device:
            return self._buf
        from plax.device import move_buffer
        return move_buffer(self._buf, self._device, device)

    def _owned_buffer(self) -> tuple[Any, Any]:
        """(buffer, the backend that owns it) of a single-device array."""
        return self._buf, self._device.backend

    # ---- host conversion
    def _host_value(self, copy: bool = False) -> np.ndarray:
        if self._buf is None:
            raise RuntimeError("Array has been deleted.")
        backend = self._device.backend
        return _host_view(backend.to_host(self._buf), copy)

    def _host_if_local(self) -> np.ndarray | None:
        """The host value when reading it moves nothing (host buffers), else None. Tracing
        inlines rank-0 constants as literals only then: never a device round trip."""
        if self._device.backend.platform == "cpu":
            return self._host_value()
        return None

    def __array__(self, dtype=None, copy=None):
        host = self._host_value(copy=bool(copy))
        if dtype is not None and np.dtype(dtype) != host.dtype:
            if copy is False:
                raise ValueError("A dtype conversion requires a copy; copy=False is not possible.")
            return host.astype(dtype)
        return host

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule of the array's buffer, from the backend that owns it
        (:meth:`plax.backend.Backend.dlpack`): zero copy where the consumer can be told the
        memory is read-only (DLPack 1.0) or where the buffer is on a GPU, which honours the
        consumer's ``stream``; a copy of its own otherwise (or with ``copy=True``).

        Example:
          >>> np.from_dlpack(jnp.arange(3))
          array([0, 1, 2], dtype=int32)
        """
        buf, backend = self._owned_buffer()
        return backend.dlpack(buf, stream=stream, max_version=max_version, dl_device=dl_device,
                              copy=copy)

    def __dlpack_device__(self) -> tuple:
        """``(DLPack device type, device id)`` of the buffer: ``(1, 0)`` (kDLCPU) on the CPU,
        ``(2, id)`` (kDLCUDA) on a CUDA GPU."""
        buf, backend = self._owned_buffer()
        return backend.dlpack_device(buf, self._device)

    @property
    def __cuda_array_interface__(self) -> dict:
        """The CUDA array interface of a GPU array's buffer (zero copy, for Numba, CuPy,
        PyTorch). AttributeError on other devices, as in JAX."""
        if self._device.platform != "gpu":
            raise AttributeError("__cuda_array_interface__ is only defined for GPU buffers.")
        return self._owned_buffer()[0].__cuda_array_interface__

    def __array_namespace__(self, *, api_version=None):
        """The Array API namespace of this array, ``plax.numpy`` (standard version 2024.12).

        Raises:
          ValueError: for an ``api_version`` other than None or ``"2024.12"`` (as JAX does
            for the versions it does not implement).
        """
        import plax.numpy
        if api_version is not None and api_version != plax.numpy.__array_api_version__:
            raise ValueError(f"api_version={api_version!r} is not available; available versions "
                             f"are: [{plax.numpy.__array_api_version__!r}]")
        return plax.numpy

    def item(self, *args):
        """The value of a one-element array (or of ``x[args]``) as a Python scalar."""
        return self._host_value().item(*args)

    def tolist(self):
        """The array as nested Python lists of Python scalars."""
        return self._host_value().tolist()

    def __reduce__(self):
        # Rebuilt on the default device of the unpickling process, weak type kept (as JAX does).
        return (_unpickle, (self._host_value(copy=True), self.aval.weak_type))

    def __copy__(self) -> "Array":
        return self

    def __deepcopy__(self, memo) -> "Array":
        return self

    # ---- Python protocol conversions
    def _scalar_value(self, what: str):
        if self.aval.shape:
            raise TypeError(f"Only scalar arrays can be converted to Python scalars ({what}); "
                            f"this array has shape {self.shape}. Index or reduce it first.")
        return self._host_value().item()

    def __bool__(self) -> bool:
        if self.aval.size != 1:
            raise ValueError(f"The truth value of an array with more than one element is "
                             f"ambiguous. Use a.any() or a.all()\n(The array has shape "
                             f"{self.shape}.)")  # JAX's (and NumPy's) first line
        return bool(self._host_value().reshape(()).item())

    def __float__(self) -> float:
        return float(self._scalar_value("float"))

    def __int__(self) -> int:
        return int(self._scalar_value("int"))

    def __complex__(self) -> complex:
        return complex(self._scalar_value("complex"))

    def __index__(self) -> int:
        if self.ndim != 0 or not dtypes.is_integer(self.dtype):
            raise TypeError(f"Only integer scalar arrays can be converted to a scalar index; got "
                            f"an array of shape {self.shape} and dtype {self.dtype}.")
        return int(self._scalar_value("int"))

    def __len__(self) -> int:
        if not self.aval.shape:
            raise TypeError("len() of unsized object")
        return self.aval.shape[0]

    def __iter__(self):
        if not self.aval.shape:
            raise TypeError("iteration over a 0-d array")
        from plax.numpy import unstack
        return iter(unstack(self)) if self.aval.shape[0] else iter(())

    def __hash__(self):
        raise TypeError("unhashable type: 'Array'. Like NumPy arrays, plax arrays are not "
                        "hashable; convert to a tuple or a Python scalar (x.item()) to use one "
                        "as a dict key or a static jit argument.")

    def __setitem__(self, idx, value):
        # JAX's text ('Array' object does not support item assignment)
        raise TypeError("JAX arrays are immutable and do not support in-place item assignment. "
                        "Instead of x[idx] = y, use x = x.at[idx].set(y) or another .at[] "
                        "method: "
                        "https://docs.jax.dev/en/latest/_autosummary/jax.numpy.ndarray.at.html")

    # ---- printing
    def __repr__(self) -> str:
        prefix = "Array("
        dtype_str = f"dtype={self.dtype.name}"
        if self.weak_type:
            dtype_str += ", weak_type=True"
        width = np.get_printoptions()["linewidth"]
        if self.aval.size == 0:
            body = f"[], shape={self.shape}"
        else:
            body = np.array2string(self._host_value(), prefix=prefix, suffix=",",
                                   separator=", ", max_line_width=width)
        # Like JAX: the dtype goes on the body's last line, after a space, or after padding
        # as wide as the prefix when that line is already long.
        last_line = len(body) - body.rfind("\n") + 1
        sep = " " * len(prefix) if last_line + len(dtype_str) + 2 > width else " "
        return f"{prefix}{body},{sep}{dtype_str})"

    def __str__(self) -> str:
        return str(self._host_value())

    def __format__(self, spec: str) -> str:
        if self.ndim == 0:
            return format(self._host_value().item(), spec)
        return format(str(self), spec)


def _host_view(host: Any, copy: bool) -> np.ndarray:
    """``host`` as a NumPy array: a private copy, or a read-only view."""
    host = np.asarray(host)
    if copy:
        return host.copy()
    if host.flags.writeable:
        host = host.view()
        host.flags.writeable = False  # the array's memory must not be mutated through NumPy
    return host


_BUF = Array.__dict__["_buf"]  # the slot itself, under the subclasses' ``_buf`` properties
_pending_lock = threading.Lock()


class _PendingArray(Array):
    """An Array whose value is still on the host: made while a transform was tracing.

    Tracing needs only its abstract value and, for literals and constants, its host value.
    The first read of ``_buf`` (an operation that computes with it on its device) puts the
    value there and turns the object into a plain :class:`Array`, so later uses take the
    fast paths. The ``_buf`` slot holds the host value until then.
    """

    __slots__ = ()

    @property
    def _buf(self):
        with _pending_lock:  # one put, even if two threads compute with it at once
            if type(self) is _PendingArray:
                host = _BUF.__get__(self)
                if host is not None:
                    device = self._device
                    _BUF.__set__(self, device.backend.put(host, device))
                self.__class__ = Array
        return _BUF.__get__(self)

    @_buf.setter
    def _buf(self, value):
        _BUF.__set__(self, value)

    def _pending_host(self):
        """The host value (None if deleted), or ``_PROMOTED`` once the value is on the device
        (another thread may promote the object at any time)."""
        with _pending_lock:
            return _BUF.__get__(self) if type(self) is _PendingArray else _PROMOTED

    def block_until_ready(self) -> "Array":
        return self

    def is_deleted(self) -> bool:
        return self._pending_host() is None or _BUF.__get__(self) is None

    def _buffer_on(self, device) -> Any:
        host = self._pending_host()
        if host is _PROMOTED or host is None or device == self._device:
            return Array._buffer_on(self, device)
        return device.backend.put(host, device)  # straight from the host to where it is used

    def _host_value(self, copy: bool = False) -> np.ndarray:
        host = self._pending_host()
        if host is _PROMOTED:
            return Array._host_value(self, copy)
        if host is None:
            raise RuntimeError("Array has been deleted.")
        return _host_view(host, copy)

    def _host_if_local(self) -> np.ndarray | None:
        return self._host_value()


_PROMOTED = object()


class _Piece:
    """One device's buffer of a sharded array, with the backend that owns it."""

    __slots__ = ("device", "index", "buffer", "backend")

    def __init__(self, device, index: tuple, buffer: Any, backend):
        self.device = device
        self.index = index
        self.buffer = buffer
        self.backend = backend


_NOT_GATHERED = object()

#: how many times a sharded array's pieces were assembled into one device's buffer (an
#: operation computed on one device from gathered operands); see :func:`gather_count`
_gathers = [0]


def gather_count() -> int:
    """How many times an array held in pieces on several devices has been gathered into one
    device's buffer so far (to compute on one device), for tests and benchmarks that check
    sharded work stays on the devices. Reading a value on the host is not counted.

    Returns:
      The count since the process started (compare two readings).

    Example:
      >>> before = gather_count()
      >>> _ = jnp.sin(jnp.ones(4))   # one device's array: nothing to gather
      >>> gather_count() - before
      0
    """
    return _gathers[0]


class _ShardedArray(Array):
    """An Array held as one buffer per device of its sharding (or as one buffer that a
    backend other than its device's default owns).

    The ``_device`` slot holds the first device of the sharding: where an operation gathers
    the array (the gathered buffer is cached in the ``_buf`` slot), until a multi-device
    plugin computes on the shards where they are.
    """

    __slots__ = ("_sharding", "_pieces")

    @property
    def _buf(self):
        buf = _BUF.__get__(self)
        if buf is _NOT_GATHERED:
            buf = self._gather(self._device)
            _BUF.__set__(self, buf)
        elif buf is None:
            self._check_alive()  # deleted (or donated): JAX's RuntimeError
        return buf

    @_buf.setter
    def _buf(self, value):
        _BUF.__set__(self, value)

    @property
    def device(self):
        return self._sharding if len(self._pieces) > 1 else self._device

    def devices(self) -> set:
        return {p.device for p in self._pieces}

    @property
    def sharding(self) -> Sharding:
        return self._sharding

    @property
    def addressable_shards(self) -> list[Shard]:
        shards, seen = [], {}
        for p in self._pieces:
            key = index_key(p.index)
            replica = seen[key] = seen.get(key, -1) + 1
            aval = ShapedArray(index_shape(p.index, self.shape), self.dtype, self.weak_type)
            shards.append(Shard(p.device, p.index, replica,
                                from_buffer(p.buffer, aval, p.device, True, p.backend)))
        return shards

    global_shards = addressable_shards

    @property
    def is_fully_replicated(self) -> bool:
        return self._sharding.is_fully_replicated

    def _unreduced(self) -> bool:
        """Whether the array holds partial sums (its spec has unreduced axes)."""
        return has_unreduced(self._sharding)

    def __array__(self, dtype=None, copy=None):
        if self._unreduced():
            # partial sums: JAX's error (reshard to a spec without unreduced axes first)
            raise NotImplementedError("device_indices_map doesn't work with unreduced. Please "
                                      "file a bug at https://github.com/jax-ml/jax/issues")
        return Array.__array__(self, dtype, copy)

    def __repr__(self) -> str:
        if self._unreduced():  # partial sums: JAX prints the type, not a value
            return (f"Array(shape={self.shape}, dtype={self.dtype.name}, "
                    f"sharding={self._sharding!r})")
        return Array.__repr__(self)

    def __str__(self) -> str:
        if self._unreduced():
            return repr(self)
        return Array.__str__(self)

    def _sharding_is_named(self) -> bool:
        from plax.sharding import NamedSharding
        return isinstance(self._sharding, NamedSharding)

    def block_until_ready(self) -> "Array":
        self._check_alive()
        for p in self._pieces:
            p.backend.block_until_ready(p.buffer)
        return self

    def delete(self) -> None:
        self._pieces = ()
        _BUF.__set__(self, None)

    def is_deleted(self) -> bool:
        return not self._pieces

    def _check_alive(self) -> None:
        if not self._pieces:
            # JAX's words, with the sharded type (``float32[8@i]``)
            raise RuntimeError(f"Array has been deleted with shape={self.aval}.")

    def _buffer_on(self, device) -> Any:
        if device == self._device:
            return self._buf
        return self._gather(device)

    def _owned_buffer(self) -> tuple[Any, Any]:
        self._check_alive()
        if len(self._pieces) != 1:
            raise ValueError(f"An array on {len(self._pieces)} devices has no single buffer")
        p = self._pieces[0]
        return p.buffer, p.backend

    def _full_pieces(self) -> list[_Piece]:
        if self._unreduced():
            return []  # partial sums: the value is assembled (summed) from all of them
        shape = self.shape
        return [p for p in self._pieces if len(p.index) == len(shape) and all(
            isinstance(i, slice) and i.indices(n) == (0, n, 1) for i, n in zip(p.index, shape))]

    def _gather(self, device) -> Any:
        """The whole array as a buffer of ``device``'s default backend: a piece that holds it
        all, moved (preferably the one already there), else the pieces assembled on the host."""
        from plax.device import move_buffer
        self._check_alive()
        full = self._full_pieces()
        if full:
            src = next((p for p in full if p.device == device), full[0])
            return move_buffer(src.buffer, src.device, device, src_backend=src.backend)
        _gathers[0] += 1
        return device.backend.put(self._assemble(), device)

    def _assemble(self) -> np.ndarray:
        if self._unreduced():
            from plax.sharding_unreduced import summed_value
            return summed_value(self)
        out = np.empty(self.shape, self.dtype)
        done = set()
        for p in self._pieces:
            key = index_key(p.index)
            if key not in done:
                done.add(key)
                out[p.index] = np.asarray(p.backend.to_host(p.buffer))
        return out

    def _host_value(self, copy: bool = False) -> np.ndarray:
        self._check_alive()
        full = self._full_pieces()
        if full:
            p = full[0]
            return _host_view(p.backend.to_host(p.buffer), copy)
        return _host_view(self._assemble(), False) if not copy else self._assemble()

    def _host_if_local(self) -> np.ndarray | None:
        return None  # sharded constants stay constvars

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        # the pieces may be on several devices: a host copy of the whole, the consumer's own
        if stream is not None:
            raise ValueError("A sharded plax Array is exported through the host: stream must "
                             "be None")
        host = self._host_value(copy=True)
        if max_version is None:
            return host.__dlpack__()
        return host.__dlpack__(max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        return (1, 0)  # __dlpack__ hands out a host copy

    @property
    def __cuda_array_interface__(self) -> dict:
        raise AttributeError("__cuda_array_interface__ is only defined for GPU buffers "
                             "(a sharded Array is not one buffer).")


_scalar_avals: dict = {}


def scalar_aval(dtype: np.dtype, weak_type: bool) -> ShapedArray:
    """A cached rank-0 ShapedArray (scalars are converted on every eager op)."""
    key = (dtype, weak_type)
    aval = _scalar_avals.get(key)
    if aval is None:
        aval = _scalar_avals[key] = ShapedArray((), dtype, weak_type)
    return aval


def _unpickle(host: np.ndarray, weak_type: bool) -> Array:
    return from_host(host, weak_type=weak_type)


#: (defined in :mod:`plax.dtypes`: the host values an operation or a ``jit`` call takes as
#: arrays, NumPy arrays and scalars and Python scalars, and those scalars)
_PY_SCALARS, HOST_VALUE_TYPES = dtypes.PY_SCALAR_TYPES, dtypes.HOST_VALUE_TYPES
#: what a traced function takes and returns as an array: plax's arrays and tracers, and host
#: values (``jit``'s arguments, ``plax.numpy``'s ``is_arraylike``, a function's outputs)
ARRAYLIKE_TYPES = (Array, Tracer, *HOST_VALUE_TYPES)


def host_or_uncommitted(x: Any) -> bool:
    """Whether ``x`` is committed to no device, as JAX 0.10 decides it for an operand of an
    operation or a ``jit`` call: a host value (a NumPy array or scalar, a Python scalar) or
    an uncommitted one-device Array. Under a set mesh JAX types such a value ``P()`` and
    places it there, and checks no device of it. Committed, sharded and pending Arrays,
    refs (JAX 0.10 commits every ref), tracers (typed by their trace) and other objects
    (one with ``__jax_array__``, which JAX 0.10 refuses as an operand) are not.

    Args:
      x: an operand or argument leaf.

    Returns:
      True for a host value or an uncommitted one-device Array.

    Example:
      >>> host_or_uncommitted(np.ones(2)), host_or_uncommitted(jnp.ones(2))
      (True, True)
      >>> host_or_uncommitted(plax.device_put(jnp.ones(2), plax.devices()[0]))
      False
    """
    if type(x) is Array:  # (the usual operand first: one type check)
        return not x._committed
    return not isinstance(x, Array) and isinstance(x, HOST_VALUE_TYPES)


def _host_numpy(x: Any, dtype: np.dtype | None) -> tuple[np.ndarray, bool]:
    """(numpy value, weak_type) for a host value, with plax's dtype rules applied."""
    t = type(x)
    if t in _PY_SCALARS or (isinstance(x, numbers.Number)
                            and not isinstance(x, (np.generic, np.ndarray))):
        dt, weak = dtypes.dtype_and_weak_type(x if t in _PY_SCALARS else _py_scalar(x))
        if dtype is not None:
            dt, weak = dtype, False
        if t is int and dtypes.is_integer(dt):
            info = np.iinfo(dt)
            if not info.min <= x <= info.max:
                raise OverflowError(f"Python int {x} too large to convert to {dt.name}")
        return np.asarray(x, dtype=dt), weak
    if isinstance(x, (np.ndarray, np.generic)):
        arr = np.asarray(x)
        bad_kind = arr.dtype == object or arr.dtype.kind in "USMmV"
        # bfloat16 has kind "V" too; float0 (the tangent type of integers) is allowed.
        if bad_kind and arr.dtype not in dtypes.supported_dtypes and arr.dtype != dtypes.float0:
            names = ", ".join(map(str, dtypes.supported_dtypes))
            raise TypeError(f"NumPy array of dtype {arr.dtype} is not a valid plax array type. "
                            f"Supported dtypes: {names}.")
        target = dtype if dtype is not None else dtypes.canonicalize_dtype(arr.dtype)
        return arr.astype(target, copy=True), False
    from plax.errors import jax_array_operand
    refused = jax_array_operand(x)
    if refused is not None:
        raise refused
    raise TypeError(f"Value {x!r} of type {t.__name__} is not a valid plax array type: expected "
                    "an array, a NumPy array, or a Python scalar.")


def _py_scalar(x):
    if isinstance(x, bool):
        return bool(x)
    if isinstance(x, numbers.Integral):
        return int(x)
    if isinstance(x, numbers.Real):
        return float(x)
    return complex(x)


def _place(host: np.ndarray, aval: ShapedArray, device, committed: bool) -> Array:
    """An Array of ``host`` on ``device``: put there now, or, while a transform traces, kept
    on the host until something computes with it there (tracing only reads it)."""
    if host.dtype.kind == "V" and host.dtype == dtypes.float0:
        # float0 carries no data: its buffer is the NumPy array on every device, never put
        return Array._new(host, aval, device, committed)
    if _trace_state.depth:
        a = object.__new__(_PendingArray)
        _BUF.__set__(a, host)
        a.aval = aval
        a._device = device
        a._committed = committed
        return a
    return Array._new(device.backend.put(host, device), aval, device, committed)


def from_host(x: Any, device=None, committed: bool = False, dtype: Any = None,
              weak_type: bool | None = None) -> Array:
    """Copies a host value (NumPy array or Python scalar) into a new Array on ``device``.

    Python scalars become weakly typed (unless ``weak_type`` says otherwise); NumPy float64
    becomes float32 unless x64 is enabled. While a transform traces, the copy stays on the
    host until an operation needs it on the device.
    """
    from plax.device import default_device
    dev = device if device is not None else default_device()
    target = dtypes.canonicalize_dtype(dtype) if dtype is not None else None
    host, weak = _host_numpy(x, target)
    if weak_type is not None:
        weak = weak_type
    aval = scalar_aval(host.dtype, weak) if host.ndim == 0 else ShapedArray(host.shape, host.dtype, weak)
    return _place(host, aval, dev, committed)


def from_owned_host(host: np.ndarray, weak_type: bool = False, device=None) -> Array:
    """An Array on ``device`` (default: the default device) taking ownership of ``host``.

    The fast sibling of :func:`from_host` for callers that made ``host`` themselves: it must
    be a NumPy array of a canonical plax dtype that nothing else references (it is not
    copied or checked).
    """
    if device is None:
        from plax.device import default_device
        device = default_device()
    aval = (scalar_aval(host.dtype, weak_type) if host.ndim == 0
            else ShapedArray(host.shape, host.dtype, weak_type))
    return _place(host, aval, device, False)


def trace_constant(x: Any) -> Any:
    """What a staging trace records for the constant ``x``, without touching any device.

    Python scalars stay Python scalars (weakly typed); NumPy scalars and rank-0 arrays become
    NumPy scalars of plax's canonical dtype; other NumPy arrays become canonical NumPy copies,
    as do Arrays made while tracing whose value is still on the host (a compiled function
    puts such constants on its own device once). Other Arrays are recorded as they are.
    Tracing turns the scalars into literals.

    Raises:
      TypeError: ``x`` is not an Array, a scalar or a NumPy array.
      OverflowError: a Python int does not fit the default integer type.
    """
    t = type(x)
    if t is float or t is bool or t is complex:
        return x
    if t is _PendingArray:
        host = x._pending_host()
        strong_array = x.aval.shape and not x.aval.weak_type  # NumPy keeps no weak type
        return host if strong_array and type(host) is np.ndarray else x
    if isinstance(x, Array):
        return x
    host, weak = _host_numpy(x, None)  # checks ints' range and the dtype
    if weak:
        return _py_scalar(x)
    return host[()] if host.ndim == 0 else host


# ------------------------------------------------------------------ arrays from device buffers

def from_buffer(buffer: Any, aval: ShapedArray, device, committed: bool = False,
                backend=None) -> Array:
    """An Array around a buffer on ``device`` that ``backend`` made (for backends and plugins).

    Args:
      buffer: a buffer of ``backend`` on ``device``, holding a value of type ``aval``.
      aval: its shape, dtype and weak type.
      device: where it lives.
      committed: whether the array is committed to ``device``.
      backend: the backend that owns ``buffer``; None or the device's default backend gives a
        plain Array. Another backend's buffer is kept tagged with it, and converted for the
        default backend (through the host, unless the two share buffers) when an operation
        needs it.

    Example:
      >>> dev = plax.devices()[0]
      >>> from_buffer(np.ones(2, np.float32), ShapedArray((2,), np.dtype("float32")), dev)
      Array([1., 1.], dtype=float32)
    """
    if backend is None or backend is device.backend:
        return Array._new(buffer, aval, device, committed)
    return _sharded(aval, SingleDeviceSharding(device),
                    [_Piece(device, (slice(None),) * len(aval.shape), buffer, backend)], committed)


def _sharded(aval: ShapedArray, sharding: Sharding, pieces: list, committed: bool,
             typed: bool = True) -> Array:
    """An Array of ``pieces`` laid out as ``sharding``. ``typed``: its aval records a
    sharding over an Explicit mesh (sharding in types); False: ``aval`` is kept as given (a
    caller that knows the type, e.g. the one a value it replaces had)."""
    a = object.__new__(_ShardedArray)
    _BUF.__set__(a, _NOT_GATHERED)
    if typed and isinstance(sharding, NamedSharding) and \
            AxisType.Explicit in sharding.mesh.axis_types \
            and not (type(aval) is ShapedArray and aval.sharding is sharding and
                     not aval.unreduced):  # (typed so already: kept)
        # Sharding in types: the aval records it (plax.typeof prints f32[8@X,4]).
        aval = ShapedArray(aval.shape, aval.dtype, aval.weak_type, aval.vma, sharding)
    a.aval = aval
    a._device = pieces[0].device
    a._committed = committed
    a._sharding = sharding
    a._pieces = tuple(pieces)
    return a


def from_device_buffers(shape: Sequence[int], dtype: Any, sharding: Sharding,
                        buffers: Mapping[Any, Any] | Sequence[Any], *,
                        backends: Mapping[Any, Any] | Sequence[Any] | None = None,
                        weak_type: bool = False, committed: bool = True) -> Array:
    """An Array from one backend buffer per device of ``sharding`` (for multi-device plugins).

    Args:
      shape, dtype: the global array's.
      sharding: which index of the global array each device holds.
      buffers: ``{device: buffer}``, or a sequence in the sharding's device order; each holds
        that device's shard (``plax.sharding.index_shape(index, shape)``).
      backends: the backend owning each buffer (same form); default: each device's default.
      weak_type: the global array's weak type.
      committed: whether the array is committed to its devices (as JAX's are).

    Returns:
      A plain Array for a :class:`~plax.sharding.SingleDeviceSharding` buffer of the device's
      default backend, else an Array that keeps the buffers where they are.

    Raises:
      ValueError: a device of the sharding has no buffer, or a buffer no device.
    """
    order = sharding._device_assignment
    bufs = _by_device(buffers, order, "buffers")
    owners = _by_device(backends, order, "backends") if backends is not None else {}
    aval = ShapedArray(tuple(shape), dtypes.canonicalize_dtype(dtype), weak_type)
    indices = sharding.devices_indices_map(aval.shape)
    pieces = [_Piece(d, indices[d], bufs[d], owners.get(d) or d.backend) for d in order]
    if isinstance(sharding, SingleDeviceSharding):
        return from_buffer(pieces[0].buffer, aval, pieces[0].device, committed, pieces[0].backend)
    return _sharded(aval, sharding, pieces, committed)


def _by_device(values, order: tuple, what: str) -> dict:
    if isinstance(values, Mapping):
        found = dict(values)
    else:
        values = list(values)
        if len(values) != len(order):
            raise ValueError(f"Expected {len(order)} {what} (one per device of the sharding: "
                             f"{list(order)}), got {len(values)}")
        found = dict(zip(order, values))
    missing = [d for d in order if d not in found]
    extra = [d for d in found if d not in order]
    if missing or extra:
        raise ValueError(f"{what} must name exactly the sharding's devices {list(order)}; "
                         f"missing {missing}, not in the sharding {extra}")
    return found


def make_array_from_single_device_arrays(shape: Sequence[int], sharding: Sharding,
                                         arrays: Sequence[Array], *,
                                         dtype: Any = None) -> Array:
    """A global Array from one single-device Array per device of ``sharding`` (no copy).

    Args:
      shape: the global array's shape.
      sharding: which index of the global array each device holds.
      arrays: one Array per device of the sharding, in any order, each on its device with
        the shape of that device's shard.
      dtype: the dtype (default: the arrays'; they must all have it).

    Returns:
      An Array committed to the sharding's devices; its buffers are the given arrays'.

    Raises:
      TypeError: an element of ``arrays`` is not a plax Array.
      ValueError: the number of arrays, their devices, shapes or dtypes do not fit the
        sharding.

    Example:
      >>> dev = plax.devices()[0]
      >>> x = plax.make_array_from_single_device_arrays(
      ...     (2,), plax.sharding.SingleDeviceSharding(dev), [jnp.ones(2)])
      >>> x.committed, x.sharding.device_set == {dev}
      (True, True)
    """
    if not isinstance(sharding, Sharding):
        raise TypeError(f"make_array_from_single_device_arrays expects a plax.sharding.Sharding, "
                        f"got {sharding!r}")
    arrays = list(arrays)
    order = sharding._device_assignment
    if len(arrays) != len(order):
        raise ValueError(f"Expected {len(order)} per-device arrays (one per device of "
                         f"{sharding!r}), but got {len(arrays)}")
    shape = tuple(shape)
    indices = sharding.devices_indices_map(shape)
    dts = {a.dtype for a in arrays if isinstance(a, Array)}
    if dtype is not None:
        dts.add(dtypes.canonicalize_dtype(dtype))
    if len(dts) > 1:
        raise ValueError(f"The per-device arrays must have one dtype, got {sorted(map(str, dts))}")
    buffers, backends = {}, {}
    for a in arrays:
        if not isinstance(a, Array):
            raise TypeError(f"make_array_from_single_device_arrays expects plax Arrays, got "
                            f"{type(a).__name__}: {a!r}")
        if len(a.devices()) != 1:
            raise ValueError(f"make_array_from_single_device_arrays expects single-device "
                             f"Arrays, got one on {sorted(map(repr, a.devices()))}")
        d = a._device
        if d not in indices:
            raise ValueError(f"An array is on {d!r}, which is not a device of {sharding!r}")
        if d in buffers:
            raise ValueError(f"Two arrays are on {d!r}; give one per device of the sharding")
        want = index_shape(indices[d], shape)
        if a.shape != want:
            raise ValueError(f"Expected shard shape {want} doesn't match the single device array "
                             f"shape {a.shape}, for {d!r} of an array of shape {shape} with "
                             f"sharding {sharding!r}")
        buffers[d], backends[d] = a._owned_buffer()
    return from_device_buffers(shape, dts.pop(), sharding, buffers, backends=backends)


def make_array_from_callback(shape: Sequence[int], sharding: Sharding,
                             data_callback: Callable[[tuple], Any], dtype: Any = None) -> Array:
    """A global Array whose shards ``data_callback(index)`` gives, device by device.

    Args:
      shape: the global array's shape.
      sharding: which index of the global array each device holds.
      data_callback: called with each distinct index (a tuple of slices and ints) of the
        global array; returns that part (a NumPy array, an Array or a scalar).
      dtype: the dtype to convert the parts to (default: theirs, canonicalized).

    Example:
      >>> data = np.arange(4.0)
      >>> x = plax.make_array_from_callback((4,), plax.sharding.SingleDeviceSharding(
      ...     plax.devices()[0]), lambda index: data[index])
      >>> x
      Array([0., 1., 2., 3.], dtype=float32)
    """
    from plax.device import _put_leaf
    shape = tuple(shape)
    made: dict = {}
    arrays = []
    for d, index in sharding.devices_indices_map(shape).items():
        key = index_key(index)
        if key not in made:  # a replicated part is computed once, then copied
            part = data_callback(index)
            if dtype is not None and not isinstance(part, Array):
                part = np.asarray(part, dtype=dtypes.canonicalize_dtype(dtype))
            made[key] = part
        arrays.append(_put_leaf(made[key], d, True))
    return make_array_from_single_device_arrays(shape, sharding, arrays, dtype=dtype)
