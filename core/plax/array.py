"""Array: an immutable n-dimensional array that carries its device.

An Array holds a backend *buffer* (a NumPy array for CPU devices), its abstract
value (shape, dtype, weak type) and its device. Operators and methods are
installed by :mod:`plax.numpy.array_methods` (shared with tracers), so ``x + y``
binds the ``add`` primitive whatever is tracing it.
"""
from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from plax import dtypes
from plax.core.shaped_array import ShapedArray


def _format_array(host: np.ndarray, prefix: str) -> str:
    if host.size == 0 and host.shape != (0,) or host.size == 0 and host.ndim > 1:
        return "[]"
    if host.dtype == dtypes.bfloat16:
        host = host.astype(np.float32)  # numpy prints bfloat16 like float32
    return np.array2string(host, separator=", ", prefix=prefix)


class Array:
    """An immutable array on a device (JAX's ``jax.Array``).

    Create one with :func:`plax.numpy.array`, :func:`plax.device_put` or any plax
    operation. Arrays cannot be changed in place: ``x[0] = 1`` raises TypeError;
    use ``x = x.at[0].set(1)``.

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
        """The device the array lives on."""
        return self._device

    def devices(self) -> set:
        """The set of devices holding the array (one device for an unsharded array)."""
        return {self._device}

    @property
    def committed(self) -> bool:
        """Whether the array was explicitly placed (``device_put(x, d)``) and so stays there."""
        return self._committed

    @property
    def sharding(self):
        return SingleDeviceSharding(self._device)

    def is_fully_addressable(self) -> bool:
        return True

    is_fully_replicated = property(lambda self: True)

    def block_until_ready(self) -> "Array":
        """Waits for the computation producing this array to finish, then returns it."""
        self._device.backend.block_until_ready(self._buf)
        return self

    def copy_to_host_async(self) -> None:
        """Starts copying to the host (a no-op for host buffers)."""

    def delete(self) -> None:
        self._buf = None

    def is_deleted(self) -> bool:
        return self._buf is None

    # ---- host conversion
    def _host_value(self, copy: bool = False) -> np.ndarray:
        if self._buf is None:
            raise RuntimeError("Array has been deleted.")
        backend = self._device.backend
        host = np.asarray(backend.to_host(self._buf))
        if copy:
            return host.copy()
        if host.flags.writeable:
            host = host.view()
            host.flags.writeable = False  # the array's memory must not be mutated through NumPy
        return host

    def __array__(self, dtype=None, copy=None):
        host = self._host_value(copy=bool(copy))
        if dtype is not None and np.dtype(dtype) != host.dtype:
            if copy is False:
                raise ValueError("A dtype conversion requires a copy; copy=False is not possible.")
            return host.astype(dtype)
        return host

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        host = self._host_value(copy=True)  # dlpack consumers may write; give them their own copy
        if max_version is None:
            return host.__dlpack__(stream=stream)
        return host.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device,
                               copy=copy)

    def __dlpack_device__(self):
        buf = self._buf
        if hasattr(buf, "__dlpack_device__") and not isinstance(buf, np.generic):
            return buf.__dlpack_device__()
        return (1, 0)  # kDLCPU

    def __array_namespace__(self, *, api_version=None):
        import plax.numpy
        return plax.numpy

    def item(self, *args):
        """The value of a one-element array (or of ``x[args]``) as a Python scalar."""
        return self._host_value().item(*args)

    def tolist(self):
        """The array as nested Python lists of Python scalars."""
        return self._host_value().tolist()

    def __reduce__(self):
        from plax.numpy import asarray
        return (asarray, (self._host_value(copy=True),))

    def __copy__(self) -> "Array":
        return self

    def __deepcopy__(self, memo) -> "Array":
        return self

    # ---- Python protocol conversions
    def _scalar_value(self, what: str):
        if self.aval.size != 1:
            raise TypeError(f"Only arrays of size 1 can be converted to Python {what}s; this "
                            f"array has shape {self.shape}. Index or reduce it first.")
        return self._host_value().reshape(()).item()

    def __bool__(self) -> bool:
        if self.aval.size != 1:
            raise ValueError(f"The truth value of an array with more than one element is "
                             f"ambiguous (shape {self.shape}). Use a.any() or a.all().")
        return bool(self._scalar_value("bool"))

    def __float__(self) -> float:
        return float(self._scalar_value("float"))

    def __int__(self) -> int:
        return int(self._scalar_value("int"))

    def __complex__(self) -> complex:
        return complex(self._scalar_value("complex"))

    def __index__(self) -> int:
        if self.ndim != 0 or not dtypes.is_integer(self.dtype) and not dtypes.is_bool(self.dtype):
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
        raise TypeError("unhashable type: 'Array'. Arrays are mutable-looking containers and are "
                        "not hashable; convert to a tuple or a Python scalar (x.item()) to use one "
                        "as a dict key or a static jit argument.")

    def __setitem__(self, idx, value):
        raise TypeError("'Array' object does not support item assignment. JAX arrays are "
                        "immutable. Instead of ``x[idx] = y``, use ``x = x.at[idx].set(y)`` or "
                        "another .at[] method: "
                        "https://jax.readthedocs.io/en/latest/_autosummary/jax.numpy.ndarray.at.html")

    # ---- printing
    def __repr__(self) -> str:
        prefix = "Array("
        dtype_str = f"dtype={self.dtype.name}"
        if self.weak_type:
            dtype_str += ", weak_type=True"
        host = self._host_value()
        if host.size == 0:
            return f"{prefix}[], shape={self.shape}, {dtype_str})"
        body = _format_array(host, prefix)
        sep = ", " if "\n" not in body or len(body.splitlines()[-1]) + len(dtype_str) < 75 else ",\n" + " " * len(prefix)
        return f"{prefix}{body}{sep}{dtype_str})"

    def __str__(self) -> str:
        host = self._host_value()
        if host.dtype == dtypes.bfloat16:
            return str(host)
        return str(host)

    def __format__(self, spec: str) -> str:
        if self.ndim == 0:
            return format(self._host_value().item(), spec)
        return format(str(self), spec)


class SingleDeviceSharding:
    """The placement of an unsharded array: all of it on one device."""

    def __init__(self, device):
        self._device = device
        self.device_set = {device}

    def __repr__(self) -> str:
        return f"SingleDeviceSharding(device={self._device!r})"

    def __eq__(self, other) -> bool:
        return isinstance(other, SingleDeviceSharding) and other._device == self._device

    def __hash__(self) -> int:
        return hash(self._device)


_scalar_avals: dict = {}


def scalar_aval(dtype: np.dtype, weak_type: bool) -> ShapedArray:
    """A cached rank-0 ShapedArray (scalars are converted on every eager op)."""
    key = (dtype, weak_type)
    aval = _scalar_avals.get(key)
    if aval is None:
        aval = _scalar_avals[key] = ShapedArray((), dtype, weak_type)
    return aval


def _host_numpy(x: Any, dtype: np.dtype | None) -> tuple[np.ndarray, bool]:
    """(numpy value, weak_type) for a host value, with plax's dtype rules applied."""
    t = type(x)
    if t in (bool, int, float, complex) or isinstance(x, (bool, numbers.Number)) and not isinstance(x, (np.generic, np.ndarray)):
        dt, weak = dtypes.dtype_and_weak_type(x if t in (bool, int, float, complex) else _py_scalar(x))
        if dtype is not None:
            dt, weak = dtype, False
        if t is int and dtypes.is_integer(dt):
            info = np.iinfo(dt)
            if not info.min <= x <= info.max:
                raise OverflowError(f"Python int {x} too large to convert to {dt.name}")
        return np.asarray(x, dtype=dt), weak
    if isinstance(x, (np.ndarray, np.generic)):
        arr = np.asarray(x)
        if arr.dtype == object or (arr.dtype.kind in "USMmV"
                                   and arr.dtype not in (dtypes.float0, dtypes.bfloat16)):
            raise TypeError(f"NumPy array of dtype {arr.dtype} is not a valid plax array type.")
        target = dtype if dtype is not None else dtypes.canonicalize_dtype(arr.dtype)
        return arr.astype(target, copy=True), False
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


def from_host(x: Any, device=None, committed: bool = False, dtype: Any = None,
              weak_type: bool | None = None) -> Array:
    """Copies a host value (NumPy array or Python scalar) into a new Array on ``device``.

    Python scalars become weakly typed (unless ``weak_type`` says otherwise); NumPy float64
    becomes float32 unless x64 is enabled.
    """
    from plax.devices import default_device
    dev = device if device is not None else default_device()
    target = dtypes.canonicalize_dtype(dtype) if dtype is not None else None
    host, weak = _host_numpy(x, target)
    if weak_type is not None:
        weak = weak_type
    buf = dev.backend.put(host, dev)
    aval = scalar_aval(host.dtype, weak) if host.ndim == 0 else ShapedArray(host.shape, host.dtype, weak)
    return Array._new(buf, aval, dev, committed)
