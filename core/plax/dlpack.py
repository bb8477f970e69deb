"""Arrays from other libraries' memory through DLPack and the CUDA array interface.

The exporter says where its memory is (``__dlpack_device__``: kDLCPU = 1, kDLCUDA = 2);
the backend of that platform turns it into one of its buffers
(:meth:`plax.backend.Backend.from_dlpack`) without a host round trip: a NumPy view on the
CPU, a CuPy view on a GPU. The export side is ``Array.__dlpack__`` and
:meth:`plax.backend.Backend.dlpack`. docs/plugins_and_devices.md says what is zero-copy.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from plax import dtypes
from plax.backend import DLPACK_DEVICE_TYPES
from plax.core.shaped_array import ShapedArray

_PLATFORM_OF_TYPE = {kind: platform for platform, kind in DLPACK_DEVICE_TYPES.items()}
_NAMES = {1: "kDLCPU", 2: "kDLCUDA"}


def exporter_platform(x: Any) -> str | None:
    """The plax platform holding the memory ``x`` exports: from its ``__dlpack_device__``,
    ``"gpu"`` for an object with only ``__cuda_array_interface__``, else None (not an
    exporter). A DLPack device type plax has no platform for raises RuntimeError."""
    where = getattr(x, "__dlpack_device__", None)
    if where is not None and hasattr(x, "__dlpack__"):
        kind, _ = where()
        platform = _PLATFORM_OF_TYPE.get(int(kind))
        if platform is None:
            raise RuntimeError(f"from_dlpack: the array is on a DLPack device of type "
                               f"{int(kind)}, which no plax platform corresponds to "
                               f"(supported: {sorted(_NAMES.values())}).")
        return platform
    if hasattr(x, "__cuda_array_interface__"):
        return "gpu"
    return None


def _source_device(x: Any, platform: str):
    """The plax device holding ``x``'s memory (RuntimeError, as JAX raises, when no installed
    backend drives that platform)."""
    from plax import plugins
    from plax.device import devices
    reg = plugins.registry()
    if platform not in reg.platforms():
        kind = DLPACK_DEVICE_TYPES[platform]
        raise RuntimeError(f"from_dlpack: the array is on a {_NAMES.get(kind, kind)} device, but "
                           f"no plax backend drives platform {platform!r}. "
                           + reg.unavailable(platform))
    devs = devices(platform)
    if platform == "cpu":
        return devs[0]
    where = getattr(x, "__dlpack_device__", None)
    dev_id = int(where()[1]) if where is not None else 0
    for d in devs:
        if d.id == dev_id:
            return d
    raise RuntimeError(f"from_dlpack: the array is on {platform} device {dev_id}, which plax "
                       f"does not have (its {platform} devices: {devs}).")


def import_array(x: Any, platform: str, copy: bool | None = None):
    """An Array on the device that holds ``x``'s memory, viewing it (``copy`` None or False)
    or copied there (``copy=True``), never through the host unless ``x`` is on the host.

    Raises:
      RuntimeError: no backend drives the platform of ``x``'s memory.
      ValueError: ``copy=False`` but plax's dtype rules need a conversion (64-bit values
        without x64), which copies.
    """
    from plax.array import Array
    device = _source_device(x, platform)
    backend = device.backend
    buf = backend.from_dlpack(x, device)
    shape, dtype = tuple(buf.shape), np.dtype(buf.dtype)
    target = dtypes.canonicalize_dtype(dtype)
    if copy and target == dtype:  # NumPy and CuPy buffers copy themselves, on their device
        buf = buf.copy() if hasattr(buf, "copy") else backend.put(
            np.array(backend.to_host(buf), copy=True), device)
    out = Array._new(buf, ShapedArray(shape, dtype), device, False)
    if target != dtype:
        if copy is False:
            raise ValueError(f"from_dlpack(copy=False): the {dtype.name} array becomes {target.name} "
                             "(64-bit types are disabled), which copies. Enable x64 or pass "
                             "copy=None.")
        from plax import lax
        return lax.convert_element_type(out, target)  # a copy, on the device
    return out


# ---------------------------------------------------------------- the jax.dlpack module's API

#: the dtypes DLPack can describe and plax exchanges (JAX's list: no float8 or int4 types)
_SUPPORTED = frozenset(np.dtype(t) for t in (
    np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, dtypes.bfloat16, np.float32, np.float64, np.complex64, np.complex128))


def is_supported_dtype(dtype: Any) -> bool:
    """Whether arrays of ``dtype`` can be exchanged through DLPack (as ``jax.dlpack``'s).

    Example:
      >>> plax.dlpack.is_supported_dtype(np.float32), plax.dlpack.is_supported_dtype("float8_e4m3fn")
      (True, False)
    """
    try:
        return np.dtype(dtype) in _SUPPORTED
    except TypeError:
        return False


def from_dlpack(external_array: Any, device: Any = None, copy: bool | None = None):
    """An Array from a DLPack exporter (``jax.dlpack.from_dlpack``): the same as
    :func:`plax.numpy.from_dlpack`.

    Example:
      >>> plax.dlpack.from_dlpack(np.arange(3.0))
      Array([0., 1., 2.], dtype=float32)
    """
    from plax.numpy import from_dlpack as _from_dlpack
    return _from_dlpack(external_array, device=device, copy=copy)
