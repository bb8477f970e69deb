"""GPU kernels of the host callbacks (``debug_callback``, ``pure_callback``, ``io_callback``):
the only primitives that run on the host.

Each copies its operands to the host explicitly (one device-to-host copy per operand, waiting
for the device's stream), calls the primitive's :class:`plax.lax.callbacks.HostCallback` on
NumPy arrays, and copies the results back to the operands' device (one host-to-device copy
per result). These are the allowed host copies of a program besides reading its results and
the decisions of ``cond``/``while``.

bfloat16 travels as itself: a :class:`plax_cupy.backend.Bf16Buffer` operand reaches the
callback as a NumPy ``bfloat16`` array (its bits copied, not widened), and a ``bfloat16``
result returns as a Bf16Buffer. The kernels are marked ``bf16 = "bits"``, so the backend hands
them Bf16Buffers as they are.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import cupy

from plax.lax.callbacks import debug_callback_p, io_callback_p, pure_callback_p
from plax_cupy import runtime
from plax_cupy.backend import BF16, Bf16Buffer
from plax_cupy.kernels import kernel


def to_host(buffer: Any) -> np.ndarray:
    """A device buffer's values as a NumPy array (bfloat16 as ``bfloat16``), waiting for the
    current stream; counted as a device-to-host copy (:func:`plax_cupy.counters`). Anything
    else (a host value) as ``np.asarray`` gives it.

    Example:
      >>> to_host(cupy.arange(3))  # array([0, 1, 2])
    """
    if isinstance(buffer, Bf16Buffer):
        return to_host(buffer.bits).view(BF16)
    if isinstance(buffer, cupy.ndarray):
        runtime.THIS_THREAD.counts[runtime.D2H] += 1
        return buffer.get()
    return np.asarray(buffer)


def to_device(value: Any) -> Any:
    """A host value as a device buffer on the current device (bfloat16 as a Bf16Buffer);
    counted as a host-to-device copy.

    Example:
      >>> to_device(np.arange(3, dtype=np.float32))
    """
    host = np.asarray(value)
    runtime.THIS_THREAD.counts[runtime.H2D] += 1
    if host.dtype == BF16:
        # np.array keeps a 0-d array 0-d (ascontiguousarray would make it 1-d)
        return Bf16Buffer(cupy.asarray(np.array(host, copy=True).view(np.uint16)))
    return cupy.asarray(host)


def _host_kernel(fn: Callable) -> Callable:
    fn.bf16 = "bits"
    return fn


@kernel(debug_callback_p)
@_host_kernel
def debug_callback(*buffers, callback, ordered):
    """Calls ``callback`` on host copies of ``buffers``; no results.

    Example:
      >>> debug_callback(cupy.arange(3), callback=cb, ordered=False)  # cb sees [0, 1, 2]
    """
    callback(*[to_host(b) for b in buffers])
    return []


@kernel(pure_callback_p)
@_host_kernel
def pure_callback(*buffers, callback, result_avals, vmap_method):
    """Calls ``callback`` on host copies of ``buffers``; its results copied to the device.

    Example:
      >>> pure_callback(x, callback=cb, result_avals=(aval,), vmap_method=None)
    """
    del vmap_method  # batching happens before the kernel
    outs = callback(*[to_host(b) for b in buffers], result_avals=result_avals)
    return [to_device(o) for o in outs]


@kernel(io_callback_p)
@_host_kernel
def io_callback(*buffers, callback, result_avals, ordered):
    """Calls the effectful ``callback`` on host copies of ``buffers``; its results copied to
    the device.

    Example:
      >>> io_callback(x, callback=cb, result_avals=(aval,), ordered=True)
    """
    outs = callback(*[to_host(b) for b in buffers], result_avals=result_avals)
    return [to_device(o) for o in outs]
