"""A simulated CUDA device for the CPU: just enough of CuPy's API, over NumPy, for
``plax_cupy.backend`` to run unchanged -- with the *generated CUDA kernels themselves* built for
the host (``-DPLAX_SIM``: g++, one thread per block, blocks run in sequence).

It is test scaffolding, not a backend: it lets CI without a GPU execute the CuPy backend's
Python side (transfers, eager dispatch, the emitter and the lowered programs, the launchers'
argument marshalling and launch configurations, the partial/final reduction kernels,
threefry, host-loop control flow) and compare everything with the NumPy backend. What it
cannot show is anything about the real device: CuPy's own kernels, cuBLAS, streams,
concurrency between threads of a block, memory.

Install it with :func:`install` *before* ``plax_cupy.backend`` is imported (in a fresh
process: it takes the name ``cupy`` in ``sys.modules``).
"""
from __future__ import annotations

import ctypes
import sys
import types

import numpy as np

float32, float64, int32, uint32, bool_ = np.float32, np.float64, np.int32, np.uint32, np.bool_

__version__ = "0.0-simulated"


class _DeviceRef:
    id = 0

    def __repr__(self):
        return "<simulated CUDA device 0>"


_DEVICE = _DeviceRef()


class ndarray(np.ndarray):
    """A 'device' array: a NumPy array that refuses implicit conversion to NumPy, as CuPy's
    arrays do (so host fallbacks are exercised the way they are on a GPU)."""

    @property
    def device(self):
        return _DEVICE

    @property
    def data(self):  # noqa: D401 - CuPy's MemoryPointer has .ptr
        return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])

    def get(self, stream=None):
        return np.array(self.view(np.ndarray), copy=True)

    def __array__(self, dtype=None, copy=None):
        # CuPy refuses implicit conversion; NumPy's own functions still work on the subclass
        raise TypeError("Implicit conversion to a NumPy array is not allowed (simulated CuPy). "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def __dlpack__(self, **kwargs):
        return self.view(np.ndarray).__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return (1, 0)

    @property
    def __cuda_array_interface__(self):
        return dict(self.__array_interface__, version=3)


def _dev(x) -> ndarray:
    return np.asarray(x).view(ndarray)


def _host(x):
    if isinstance(x, ndarray):
        return x.view(np.ndarray)
    if isinstance(x, (list, tuple)):
        return type(x)(_host(v) for v in x)
    return x


def asarray(x, dtype=None):
    return _dev(np.array(_host(x), dtype=dtype, copy=True))


def array(x, dtype=None, copy=True):
    return _dev(np.array(_host(x), dtype=dtype, copy=True))


#: the simulated device's memory: larger allocations raise OutOfMemoryError, as CuPy's pool
MEMORY = 1 << 30


def empty(shape, dtype=np.float32):
    nbytes = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
    if nbytes > MEMORY:
        raise OutOfMemoryError(nbytes, 0, 0)
    return _dev(np.empty(shape, dtype))


def zeros(shape, dtype=np.float32):
    return _dev(np.zeros(shape, dtype))


def where(c, a, b):
    return _dev(np.where(_host(c), _host(a), _host(b)))


def arange(*args, dtype=None):
    return _dev(np.arange(*args, dtype=dtype))


def ascontiguousarray(x):
    return _dev(np.ascontiguousarray(_host(x)))


def transpose(x, axes=None):
    return _dev(np.transpose(_host(x), axes))


def matmul(a, b):
    return _dev(np.matmul(_host(a), _host(b)))


def stack(xs, axis=0):
    return _dev(np.stack([_host(x) for x in xs], axis))


class _Capsule:
    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def from_dlpack(x):
    if not hasattr(x, "__dlpack__"):  # a legacy capsule, which CuPy accepts too
        x = _Capsule(x)
    return _dev(np.from_dlpack(x))  # zero copy, as CuPy's


class _Pool:
    def set_limit(self, size=None, fraction=None):
        self.limit = (size, fraction)

    def free_all_blocks(self):
        pass


_POOL = _Pool()


def get_default_memory_pool():
    return _POOL


# ---------------------------------------------------------------- cupy.cuda

class _Device:
    def __init__(self, id=0):
        self.id = id

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class _Stream:
    def __init__(self, non_blocking=False):
        self.synchronized = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def synchronize(self):
        self.synchronized += 1


class OutOfMemoryError(MemoryError):
    """CuPy's: ``(size, total, limit)``."""

    def __str__(self):
        return f"Out of memory allocating {self.args[0]:,} bytes (allocated so far: 0 bytes)."


_CT = {np.dtype(np.bool_): ctypes.c_bool, np.dtype(np.int8): ctypes.c_int8,
       np.dtype(np.int16): ctypes.c_int16, np.dtype(np.int32): ctypes.c_int32,
       np.dtype(np.int64): ctypes.c_int64, np.dtype(np.uint8): ctypes.c_uint8,
       np.dtype(np.uint16): ctypes.c_uint16, np.dtype(np.uint32): ctypes.c_uint32,
       np.dtype(np.uint64): ctypes.c_uint64, np.dtype(np.float32): ctypes.c_float,
       np.dtype(np.float64): ctypes.c_double}

#: launches run so far: (kernel name, grid, block)
LAUNCHES: list = []


class _Function:
    def __init__(self, lib, name):
        self.lib, self.name = lib, name
        self.fn = getattr(lib, name)

    def __call__(self, grid, block, args):
        cargs, types_, keep = [], [], []
        for a in args:
            if isinstance(a, np.ndarray):
                assert a.flags.c_contiguous, f"{self.name}: a non-contiguous operand"
                keep.append(a)
                cargs.append(a.__array_interface__["data"][0] if a.size else 0)
                types_.append(ctypes.c_void_p)
            else:
                a = np.asarray(a)
                ct = _CT[a.dtype]
                cargs.append(ct(a.item()))
                types_.append(ct)
        self.fn.argtypes = types_
        self.fn.restype = None
        LAUNCHES.append((self.name, tuple(grid), tuple(block)))
        for b in range(int(grid[0])):  # one thread per block, blocks in sequence
            self.lib.plax_sim_block(b, int(grid[0]))
            self.fn(*cargs)


class RawModule:
    def __init__(self, code, options=(), name_expressions=None):
        from plax_cupy import nvrtc
        self.lib = nvrtc.compile_host(code, define="PLAX_SIM")
        self.lib.plax_sim_block.argtypes = [ctypes.c_uint, ctypes.c_uint]

    def get_function(self, name):
        return _Function(self.lib, name)


def install(sm_count: int = 2):
    """Makes ``import cupy`` give this module (and ``cupy.cuda...`` its pieces)."""
    me = sys.modules[__name__]
    cuda = types.ModuleType("cupy.cuda")
    cuda.Device = _Device
    cuda.Stream = _Stream
    memory = types.ModuleType("cupy.cuda.memory")
    memory.OutOfMemoryError = OutOfMemoryError
    cuda.memory = memory
    runtime = types.ModuleType("cupy.cuda.runtime")
    runtime.getDeviceCount = lambda: 1
    runtime.getDeviceProperties = lambda i: {"name": b"Simulated GPU (host threads)", "major": 8,
                                             "minor": 0, "multiProcessorCount": sm_count,
                                             "totalGlobalMem": 1 << 30}
    cuda.runtime = runtime
    me.cuda = cuda
    sys.modules["cupy"] = me
    sys.modules["cupy.cuda"] = cuda
    sys.modules["cupy.cuda.memory"] = memory
    sys.modules["cupy.cuda.runtime"] = runtime
