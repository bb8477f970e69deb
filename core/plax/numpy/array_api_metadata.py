"""Array API standard metadata: ``__array_api_version__`` and ``__array_namespace_info__``.

Mirrors ``jax._src.numpy.array_api_metadata``; plax declares the 2024.12 standard, as JAX 0.10 does.
"""
from __future__ import annotations

import numpy as np

from plax import dtypes

__array_api_version__ = "2024.12"

_KINDS = {
    "bool": ("bool",),
    "signed integer": ("int8", "int16", "int32", "int64"),
    "unsigned integer": ("uint8", "uint16", "uint32", "uint64"),
    "real floating": ("float32", "float64"),
    "complex floating": ("complex64", "complex128"),
}
_KINDS["integral"] = _KINDS["signed integer"] + _KINDS["unsigned integer"]
_KINDS["numeric"] = _KINDS["integral"] + _KINDS["real floating"] + _KINDS["complex floating"]
_X64_ONLY = {"int64", "uint64", "float64", "complex128"}


def __array_namespace_info__() -> ArrayNamespaceInfo:
    """The Array API inspection object for :mod:`plax.numpy`.

    Example:
      >>> jnp.__array_namespace_info__().default_dtypes()["real floating"]
      dtype('float32')
    """
    return ArrayNamespaceInfo()


class ArrayNamespaceInfo:
    """Capabilities, devices and dtypes of :mod:`plax.numpy`, as the Array API asks."""

    _capabilities = {
        "boolean indexing": False,  # within transformations, as JAX
        "data-dependent shapes": False,  # within transformations, as JAX
        "max dimensions": 64,  # as JAX (a 2024.12 key)
    }

    def capabilities(self) -> dict:
        return dict(self._capabilities)

    def default_device(self):
        # As JAX: arrays are uncommitted by default, so there is no default device.
        return None

    def devices(self) -> list:
        from plax.device import devices
        return [None, *devices()]  # None: "uncommitted", as JAX

    def default_dtypes(self, *, device=None) -> dict:
        del device  # the same on every device
        return {
            "real floating": dtypes.default_float_dtype(),
            "complex floating": dtypes.default_complex_dtype(),
            "integral": dtypes.default_int_dtype(),
            "indexing": dtypes.default_int_dtype(),
        }

    def dtypes(self, *, device=None, kind: str | tuple[str, ...] | None = None) -> dict:
        del device  # the same on every device
        if kind is None:
            names = _KINDS["bool"] + _KINDS["numeric"]
        else:
            kinds = kind if isinstance(kind, tuple) else (kind,)
            for k in kinds:
                if k not in _KINDS:  # KeyError, as JAX
                    raise KeyError(f"kind must be one of {sorted(_KINDS)} or a tuple of "
                                     f"them, got {k!r}")
            names = tuple(n for k in kinds for n in _KINDS[k])
        x64 = dtypes.default_int_dtype() == np.dtype("int64")
        return {n: np.dtype(n) for n in dict.fromkeys(names) if x64 or n not in _X64_ONLY}
