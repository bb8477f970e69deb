"""Per-equation fallback: an equation a backend declines runs on the reference kernels.

The reference backend (the one whose class sets ``reference = True``: the NumPy backend)
has a kernel for every core primitive. A backend of the CPU platform shares host buffers
with it and calls the kernel directly; a backend of another platform gets its buffers
copied to the host and the result put back on its device, through its own ``to_host`` and
``put``. Each (backend, primitive) pair warns once, with :class:`PlaxFallbackWarning`.
"""
from __future__ import annotations

import functools
import threading
import warnings
from typing import Callable

import numpy as np

from plax.backend import UnsupportedPrimitiveError


class PlaxFallbackWarning(UserWarning):
    """A compiled function runs one of its primitives on the reference kernels instead."""


_warned: set = set()
_lock = threading.Lock()


def reference_backend():
    """The backend that declares itself the reference (``reference = True``), or None."""
    from plax import plugins
    for backend in plugins.registry().backends.values():
        # ``is True``: the flag, not any truthy attribute of that name a backend may hold
        if getattr(backend, "reference", False) is True:
            return backend
    return None


def reference_kernel(primitive) -> Callable | None:
    """The reference backend's kernel ``fn(*host_buffers, **params)`` for ``primitive``, or
    None (the reference backend hands its kernels out through ``eager_impl``)."""
    ref = reference_backend()
    return None if ref is None else ref.eager_impl(primitive)


def fallback_step(eqn, backend, device) -> Callable:
    """A step running ``eqn`` on the reference kernel for ``backend`` on ``device``.

    Raises:
      UnsupportedPrimitiveError: neither ``backend`` nor the reference backend runs it.
    """
    prim = eqn.primitive
    kernel = None if getattr(backend, "reference", False) is True else reference_kernel(prim)
    if kernel is None:
        raise UnsupportedPrimitiveError(backend.name, prim.name,
                                        "and the reference backend has no kernel for it either")
    _warn_once(backend.name, prim.name)
    params = eqn.params
    if device.platform == "cpu":  # CPU backends share host buffers with the reference
        return functools.partial(kernel, **params) if params else kernel
    to_host, put = backend.to_host, backend.put

    def on_host(*buffers):
        out = kernel(*[np.asarray(to_host(b)) for b in buffers], **params)
        if prim.multiple_results:
            return [put(np.asarray(o), device) for o in out]
        return put(np.asarray(out), device)

    return on_host


def _warn_once(backend_name: str, primitive_name: str) -> None:
    with _lock:
        if (backend_name, primitive_name) in _warned:
            return
        _warned.add((backend_name, primitive_name))
    warnings.warn(f"Backend {backend_name!r} does not compile primitive {primitive_name!r}; "
                  "jit runs it on the reference (NumPy) kernels on the host instead, which may be "
                  "slower.", PlaxFallbackWarning, stacklevel=2)
