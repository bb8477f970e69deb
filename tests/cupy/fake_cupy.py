"""A simulated CUDA device for the CPU: CuPy's API over NumPy, honest about what CuPy refuses,
for ``plax_cupy.backend`` to run unchanged -- with the *generated CUDA kernels themselves* built
for the host (``-DPLAX_SIM``: g++, one thread per block, blocks run in sequence).

It is test scaffolding, not a backend. It behaves as CuPy does where a CPU-only CI would
otherwise hide a GPU bug:

* **Device arrays are not NumPy arrays.** :class:`ndarray` wraps a private host array;
  ``np.asarray`` of it raises ``TypeError`` (``__array__``), and NumPy functions and ufuncs
  dispatch to it (NEP 13/18) only where CuPy implements them (the table of
  :mod:`fake_cupy_api`), else fail with NumPy's ``TypeError``, as with CuPy. A NumPy array given
  to a CuPy function raises ``TypeError`` ("Unsupported type"), as CuPy does.
* **CuPy's namespaces** (``cupy.<name>``, ``cupy.linalg``, ``cupy.fft``,
  ``cupyx.scipy.special``, ``cupyx.scipy.ndimage``, ``cupyx.scipy.linalg``,
  ``cupyx.scipy.signal``) run the NumPy/SciPy function of a listed name on the wrapped host
  arrays and return device arrays (reductions return 0-d arrays, as CuPy's).
* **CuPy's libraries answer as on a GPU** where their valid answers differ from NumPy's
  (:mod:`fake_cupy_vendor`): a 1-d float32/float64 sort is CUB's radix sort on the bits (a
  NaN with the sign bit set first), eigen- and singular vectors come in other phases than
  LAPACK's (others again for a batch), and the solvers raise no ``LinAlgError`` (CuPy's
  default error state: ``cholesky``'s partial factor, ``solve_triangular``'s infs).
* **Host traffic is counted** (:data:`COUNTS`): device-to-host reads (``get``, ``item``,
  ``tolist``, ``float()``, ``repr``...) and their bytes, host-to-device copies, and simulated
  operations (each CuPy call; plax's own launch counter counts what plax dispatches, as on a
  real GPU).
* **Streams are checked.** Each allocation remembers the stream whose work last wrote it and
  that work's ticket. An operation on another stream that reads it while that work is still
  pending -- not synchronised (``Stream.synchronize``, a blocking ``get``, a device
  synchronisation) nor ordered by an event or by the legacy default stream's implicit
  ordering with blocking streams -- raises :class:`StreamOrderError`: on a GPU it would read
  the allocation's stale contents.
* **Memory is a pool.** Freed allocations return to the arena of the stream that allocated
  them and are reused by the next allocation of that size on that stream (CuPy's pool), with
  their stale contents; fresh memory is filled with ``0xFF`` bytes (NaN, -1), so reading
  ``empty`` memory shows. Reusing a block that an unsynchronised operation on another stream
  still reads raises :class:`UseAfterFreeError`.

* **Compiles are recorded.** ``cupy.cuda.nvrtc`` is :mod:`fake_nvrtc` (plax's own NVRTC
  calls: options checked and recorded, binaries that carry their source), ``RawModule`` takes
  exactly one of ``code=`` (CuPy's compile, ``-ftz=true`` appended and recorded) and ``path=``
  (a simulated cubin/PTX, checked against the device's architecture); a module compiled with
  ``-ftz=true`` runs with x86's flush-to-zero and denormals-are-zero modes, so float32
  subnormals flush in arithmetic as on the GPU (not in ``abs``/negation, which x86 does by
  bit operations). CuPy's own kernels that do float arithmetic or comparisons
  (``fake_cupy_api.FLUSHES_FLOAT32``: ``add``, ``multiply``, ``sqrt``, ``sum``, ``cumsum``,
  ``argmax``, ``maximum``, ...; as ``cupy.<name>``, operators, methods or NumPy's dispatch) and
  every ``cupyx.scipy.special`` function flush float32 and complex64 subnormals in their
  operands and results likewise.
* **A capture runs nothing.** Memory after ``end_capture`` is as it was at ``begin_capture``
  (what the captured steps wrote is put back, the capture's own allocations hold 0xFF); each
  ``Graph.launch`` runs the recorded steps in order on memory as it is then. While a stream
  captures, work on another stream or thread (a read to the host, a CuPy operation, a kernel)
  sees memory as the GPU holds it -- the bytes and the last producer from before the capture,
  or from that outside work -- not what the captured steps computed, and what it writes stays
  after ``end_capture`` (:func:`_outside_captures`).
* **A capture can be made to replay wrongly** (:class:`replay_fault`), silently, as one that
  succeeds could on a GPU: a host value baked in at capture, scratch a launch leaves dirty, a
  library workspace freed after the capture; plax's check of each new plan against a plain
  run (``plax_cupy.graph_check``) must catch each.
* **cuFFT plans are memory a graph reads.** ``cupy.fft`` takes plans from an LRU cache of 16
  (:class:`FftPlanCache`), ``cupy.cuda.cufft.PlanNd`` is a plan of one's own (:class:`PlanNd`:
  its work area from the current allocator); a plan made while the stream captures is refused
  and invalidates the capture, and a replay of a transform whose plan was destroyed since (an
  eviction, the last reference dropped) raises :class:`UseAfterFreeError`.

What it cannot show: CuPy's own kernels, cuBLAS, timing, concurrency between the threads of a
block, real memory. Install it with :func:`install` *before* ``plax_cupy.backend`` is imported
(in a fresh process: it takes the name ``cupy`` in ``sys.modules``).
"""
from __future__ import annotations

import builtins
import contextlib
import ctypes
import importlib
import operator
import os
import sys
import tempfile
import threading
import types
import weakref

import numpy as np

import fake_cupy_api as _api
import fake_cupy_linalg
import fake_cupy_vendor as _vendor
import fake_nvrtc

float16, float32, float64 = np.float16, np.float32, np.float64
int8, int16, int32, int64 = np.int8, np.int16, np.int32, np.int64
uint8, uint16, uint32, uint64 = np.uint8, np.uint16, np.uint32, np.uint64
complex64, complex128, bool_ = np.complex64, np.complex128, np.bool_
dtype, newaxis, inf, nan, pi, e = np.dtype, np.newaxis, np.inf, np.nan, np.pi, np.e
finfo, iinfo, result_type, promote_types = np.finfo, np.iinfo, np.result_type, np.promote_types

__version__ = "14.0-simulated"

#: host traffic and simulated operations so far (never reset by the simulation)
COUNTS = {"device_to_host": 0, "host_to_device": 0, "operations": 0, "kernel_launches": 0,
          "device_to_host_bytes": 0}


class StreamOrderError(RuntimeError):
    """An operation read an array whose producing work, on another stream, was still pending:
    on a GPU it would have read stale memory."""


class UseAfterFreeError(RuntimeError):
    """The pool reused a block that pending work on another stream still reads."""


# ---------------------------------------------------------------- streams

_tls = threading.local()
_STREAMS: "weakref.WeakSet" = weakref.WeakSet()  # every stream, for device synchronisation


class Stream:
    """A CUDA stream: a queue of work, here a ticket counter (``launched``) and the ticket known
    complete (``done``)."""

    null: "Stream"

    def __init__(self, null=False, non_blocking=False, ptr=None):
        self.is_null = bool(null)
        self.non_blocking = bool(non_blocking)
        self.launched = 0
        self.done = 0
        self.waited: dict = {}   # other stream -> its ticket this stream waits for (events)
        self.synchronized = 0    # how many times synchronize() was called
        self.ptr = 0 if null else id(self)
        _STREAMS.add(self)

    def __repr__(self):
        return "<simulated Stream null>" if self.is_null else f"<simulated Stream {self.ptr:#x}>"

    def __enter__(self):
        stack = _stream_stack()
        stack.append(self)
        return self

    def __exit__(self, *exc):
        _stream_stack().pop()
        return False

    def use(self):
        stack = _stream_stack()
        if stack:
            stack[-1] = self
        else:
            stack.append(self)
        return self

    def synchronize(self):
        _refuse_in_capture(self, "cudaStreamSynchronize", invalidates=True)
        self.done = self.launched
        self.synchronized += 1

    # ---- CUDA graphs (stream capture; see the "CUDA graphs" section)
    capture = None

    def begin_capture(self, mode=None):
        if self.is_null:
            raise StreamCaptureError("the legacy default stream cannot be captured")
        if self.capture is not None:
            raise StreamCaptureError(f"{self!r} is already capturing")
        self.capture = Graph(self)
        _CAPTURES.append(self.capture)

    def end_capture(self) -> "Graph":
        graph, self.capture = self.capture, None
        if graph is None:
            raise StreamCaptureError(f"{self!r} is not capturing")
        with _SHADOW_LOCK:
            _CAPTURES.remove(graph)
        graph.restore()   # nothing ran while capturing: memory is as the capture found it
        if graph.invalidated:  # (CUDA ends the capture and returns no graph)
            raise StreamCaptureError("cudaErrorStreamCaptureInvalidated: operation failed due "
                                     f"to a previous error during capture ({graph.invalidated})")
        _inject_faults(graph, self)
        return graph

    def is_capturing(self) -> bool:
        return self.capture is not None

    def record(self, event=None):
        event = event or Event()
        event.stream, event.ticket = self, self.launched
        return event

    def wait_event(self, event):
        if event.stream is not None:
            self.waited[event.stream] = max(self.waited.get(event.stream, 0), event.ticket)

    def _next(self) -> int:
        self.launched += 1
        return self.launched


Stream.null = Stream(null=True)


class Event:
    def __init__(self, block=False, disable_timing=False, interprocess=False):
        self.stream, self.ticket = None, 0

    def synchronize(self):
        if self.stream is not None:
            self.stream.done = max(self.stream.done, self.ticket)

    def record(self, stream=None):
        (stream or get_current_stream()).record(self)


def _stream_stack() -> list:
    stack = getattr(_tls, "streams", None)
    if stack is None:
        stack = _tls.streams = []
    return stack


def get_current_stream():
    stack = _stream_stack()
    return stack[-1] if stack else Stream.null


def _ordered(reader: Stream, writer: Stream) -> bool:
    """Whether work on ``reader`` runs after earlier work on ``writer`` without a sync: the same
    stream, or the legacy default stream and a blocking stream (implicit synchronisation)."""
    if reader is writer:
        return True
    return (reader.is_null and not writer.non_blocking) or (writer.is_null and not reader.non_blocking)


def _pending(stream: Stream, ticket: int, reader: Stream) -> bool:
    return ticket > stream.done and ticket > reader.waited.get(stream, 0) and not _ordered(reader, stream)


def _device_synchronize():
    for s in list(_STREAMS):
        _refuse_in_capture(s, "cudaDeviceSynchronize", invalidates=True)
    for s in list(_STREAMS):
        s.done = s.launched




# ---------------------------------------------------------------- memory

#: the simulated device's memory: larger allocations raise OutOfMemoryError, as CuPy's pool
MEMORY = 1 << 30

_ROUND = 512  # CuPy's pool rounds allocations to 512 bytes


class _Block:
    """What the pool tracks of an allocation: its host bytes, the arena (stream) it came from,
    who wrote it last and which streams read it (stream -> ticket)."""

    __slots__ = ("buf", "arena", "writer", "ticket", "readers", "pinned", "generation", "live",
                 "__weakref__")

    def __init__(self, buf, arena):
        self.buf, self.arena = buf, arena
        self.generation, self.live = 0, True  # (CUDA graphs: a captured pointer must stay live)
        self.writer, self.ticket = arena, 0
        self.readers: dict = {}
        self.pinned = False  # exported (DLPack) or foreign memory: never returned to the pool


class _Memory:
    """Held by every device array viewing a block; when the last one dies the block returns to
    the pool (a finalizer, as CuPy's MemoryPointer frees on deallocation)."""

    __slots__ = ("block", "__weakref__")

    def __init__(self, block):
        self.block = block
        weakref.finalize(self, _POOL._release, block)

    @property
    def ptr(self) -> int:
        """The block's device address (CuPy's ``Memory.ptr``)."""
        return self.block.buf.__array_interface__["data"][0]


class MemoryPool:
    """CuPy's default pool: per-stream arenas of freed blocks, reused by size."""

    def __init__(self):
        self.free: dict = {}   # (arena stream id, rounded size) -> [blocks]
        self.allocations = 0
        self.limit = (None, None)
        self.used = 0

    def set_limit(self, size=None, fraction=None):
        self.limit = (size, fraction)

    def free_all_blocks(self, stream=None):
        self.free.clear()

    def used_bytes(self):
        return self.used

    def free_bytes(self):
        return sum(block.buf.nbytes for blocks in self.free.values() for block in blocks)

    def get_limit(self):
        size, fraction = self.limit
        return int(size if size is not None else (fraction or 0) * MEMORY)

    def _release(self, block):
        if block.pinned:
            return
        block.live = False
        self.used -= block.buf.nbytes
        self.free.setdefault((id(block.arena), block.buf.nbytes), []).append(block)

    def malloc(self, nbytes: int, stream: Stream | None = None) -> _Memory:
        stream = stream or get_current_stream()
        size = max(_ROUND, -(-nbytes // _ROUND) * _ROUND)
        if nbytes > MEMORY:
            raise OutOfMemoryError(nbytes, self.used, MEMORY)
        free = self.free.get((id(stream), size))
        if free:
            block = free.pop()
            for reader, ticket in list(block.readers.items()) + [(block.writer, block.ticket)]:
                if _pending(reader, ticket, stream):
                    raise UseAfterFreeError(
                        f"the memory pool reused a {size}-byte block on {stream!r} while work "
                        f"on {reader!r} (ticket {ticket}, done {reader.done}) may still use it: "
                        "an array was freed before the stream that reads it synchronised")
            block.readers = {}
        else:
            block = _Block(np.full(size, 0xFF, np.uint8), stream)
            _BLOCKS[block.buf.__array_interface__["data"][0]] = block
        block.writer, block.ticket = stream, stream.launched
        block.generation += 1
        block.live = True
        if stream.capture is not None:
            stream.capture.allocated.append(block)
        self.used += size
        self.allocations += 1
        return _Memory(block)


_POOL = MemoryPool()
#: device address -> the pool's block there (for cuBLAS, which is handed bare pointers)
_BLOCKS: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()


def get_default_memory_pool():
    return _POOL


class _PinnedPool:
    def free_all_blocks(self):
        pass


def get_default_pinned_memory_pool():
    return _PinnedPool()


class _DeviceRef:
    id = 0

    def __repr__(self):
        return "<CUDA Device 0>"

    def synchronize(self):
        _device_synchronize()


_DEVICE = _DeviceRef()


class _MemoryPointer:
    __slots__ = ("ptr", "mem")

    def __init__(self, ptr, mem):
        self.ptr, self.mem = ptr, mem


def _owner(host: np.ndarray):
    return host if host.base is None else host.base


# ---------------------------------------------------------------- device arrays

class ndarray:
    """A device array: a host array kept private, with CuPy's ``ndarray`` interface.

    Args:
      shape, dtype: as ``cupy.ndarray(shape, dtype)`` (uninitialised memory from the pool).
    """

    __slots__ = ("_a", "_mem", "__weakref__")
    __array_priority__ = 100

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        other = _allocate(shape, dtype)
        self._a, self._mem = other._a, other._mem

    @classmethod
    def _of(cls, host: np.ndarray, mem: _Memory) -> "ndarray":
        out = object.__new__(cls)
        out._a, out._mem = host, mem
        return out

    # ---- attributes
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: self._a.flags)
    device = property(lambda self: _DEVICE)
    T = property(lambda self: self.transpose())
    mT = property(lambda self: self.swapaxes(-1, -2))
    real = property(lambda self: _call(operator.attrgetter("real"), (self,), {}))
    imag = property(lambda self: _call(operator.attrgetter("imag"), (self,), {}))

    @property
    def data(self):
        return _MemoryPointer(self._a.__array_interface__["data"][0], self._mem)

    @property
    def __cuda_array_interface__(self):
        iface = self._a.__array_interface__
        return {"shape": iface["shape"], "typestr": iface["typestr"], "descr": iface["descr"],
                "data": iface["data"], "strides": iface["strides"], "version": 3,
                "stream": get_current_stream().ptr or 1}

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    # ---- host reads (each counted: a device-to-host copy and a synchronisation)
    def get(self, stream=None, order="C", out=None, blocking=True):
        stream = stream or get_current_stream()
        _refuse_in_capture(stream, "a device-to-host copy")
        with _outside_captures([self], stream):
            _check_read(self, stream)
            host = np.array(self._a, copy=True, order=order)
        stream.done = max(stream.done, stream.launched)  # the copy waited for the stream
        COUNTS["device_to_host"] += 1
        COUNTS["device_to_host_bytes"] += self._a.nbytes
        if out is not None:
            out[...] = host
            return out
        return host

    def set(self, arr, stream=None):
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"Only numpy.ndarray can be set to cupy.ndarray, got {type(arr)}")
        COUNTS["host_to_device"] += 1
        stream = stream or get_current_stream()
        _refuse_in_capture(stream, "a host-to-device copy from pageable memory")
        with _outside_captures([self], stream):
            self._a[...] = arr
            self._mem.block.writer, self._mem.block.ticket = stream, stream._next()

    def item(self):
        return self.get().item()

    def tolist(self):
        return self.get().tolist()

    def __bool__(self):
        return bool(self.get())

    def __int__(self):
        return int(self.get())

    def __float__(self):
        return float(self.get())

    def __complex__(self):
        return complex(self.get())

    def __index__(self):
        return operator.index(self.get()[()])

    def __repr__(self):
        return repr(self.get())

    def __str__(self):
        return str(self.get())

    def __format__(self, spec):
        return format(self.get()[()] if self.ndim == 0 else self.get(), spec)

    # ---- NumPy interop: refused where CuPy refuses
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. "
                        "Please use `.get()` to construct a NumPy array explicitly.")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # CuPy looks the ufunc's name up in its own namespace only: scipy.special's ufuncs do
        # not dispatch (call cupyx.scipy.special explicitly)
        name = ufunc.__name__
        if (getattr(ufunc, "__module__", None) != "numpy" or name not in _api.NUMPY
                or method not in ("__call__", "reduce", "accumulate", "outer", "at")):
            return NotImplemented
        fn = ufunc if method == "__call__" else getattr(ufunc, method)
        if name in _api.FLUSHES_FLOAT32:
            fn = _flushing(fn)
        out = kwargs.get("out")
        writes = list(out) if isinstance(out, tuple) else [out] if out is not None else []
        if method == "at":
            writes.append(inputs[0])
        return _call(fn, inputs, kwargs, writes=writes)

    def __array_function__(self, func, types_, args, kwargs):
        module = getattr(func, "__module__", "") or ""
        table = {"numpy": _api.NUMPY, "numpy.linalg": _api.NUMPY_LINALG,
                 "numpy.fft": _api.NUMPY_FFT}.get(module)
        if table is None or func.__name__ not in table:
            return NotImplemented
        fn = _vendor.REPLACEMENTS.get((module, func.__name__), func)  # CuPy's own answers
        return _call(fn, args, kwargs, writes=_written(func.__name__, args, kwargs))

    # ---- DLPack
    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        self._mem.block.pinned = True  # the consumer may keep the memory beyond this array
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0

    # ---- indexing
    def __getitem__(self, key):
        return _call(operator.getitem, (self, key), {})

    def __setitem__(self, key, value):
        _call(operator.setitem, (self, key, value), {}, writes=[self], allow_host=True)

    def fill(self, value):
        _call(np.ndarray.fill, (self, value), {}, writes=[self])

    def sort(self, axis=-1, kind=None):
        _call(_vendor.sort_in_place, (self,), {"axis": axis, "kind": kind}, writes=[self])

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        if not copy and np.dtype(dtype) == self.dtype:
            return self
        if _flushing_conversion(self.dtype, np.dtype(dtype)):
            return _call(_flushing(np.ndarray.astype), (self, dtype), {"copy": True})
        return _call(np.ndarray.astype, (self, dtype), {"copy": True})

    def __hash__(self):
        raise TypeError("unhashable type: 'cupy.ndarray'")


def _method(name):
    fn = _vendor.REPLACEMENTS.get(("numpy", name), getattr(np.ndarray, name))
    flushes = name in _api.FLUSHES_FLOAT32

    def method(self, *args, **kwargs):
        return _call(_flushing(fn) if flushes else fn, (self,) + args, kwargs)
    method.__name__ = name
    return method


for _name in ("reshape view ravel flatten copy transpose swapaxes squeeze sum prod max min "
              "mean var std argmax argmin all any cumsum cumprod clip round conj conjugate dot "
              "nonzero repeat take diagonal trace argsort partition argpartition choose "
              "compress searchsorted").split():
    setattr(ndarray, _name, _method(_name))


_WIDE_FLOATS = tuple(np.dtype(t) for t in (np.float32, np.float64, np.complex64, np.complex128))


def _flushing_conversion(src, dst) -> bool:
    """Whether CuPy's ``astype`` from ``src`` to ``dst`` flushes float32 subnormals: a
    conversion between single (float32/complex64 parts) and double precision, either way,
    compiles to
    ``cvt.ftz.f64.f32`` / ``cvt.rn.ftz.f32.f64`` under CuPy's ``-ftz=true``."""
    if src not in _WIDE_FLOATS or dst not in _WIDE_FLOATS:
        return False
    single = {src.itemsize // (2 if src.kind == "c" else 1), dst.itemsize // (2 if dst.kind == "c" else 1)}
    return single == {4, 8}   # (float32 -> complex64 only moves the value: no cvt)


def _flushing_ufunc(ufunc):
    """``ufunc`` as CuPy's kernel of it runs (:func:`_flushing`), writing its flushed result
    into ``out=`` where given (the in-place operators)."""
    def run(*args, **kwargs):
        out = kwargs.pop("out", None)
        result = _flush_float32(ufunc(*_flush_float32(args), **kwargs))
        if out is None:
            return result
        np.copyto(out, result, casting="unsafe")
        return out
    run.__name__ = run.__qualname__ = ufunc.__name__
    return run


def _operator(ufunc, reflected=False, inplace=False):
    if ufunc.__name__ in _api.FLUSHES_FLOAT32:
        ufunc = _flushing_ufunc(ufunc)

    def op(self, other):
        if isinstance(other, np.ndarray) and not isinstance(other, ndarray):
            raise TypeError(f"Unsupported type {type(other)}")
        if inplace:
            _call(ufunc, (self, other), {"out": self}, writes=[self])
            return self
        return _call(ufunc, (other, self) if reflected else (self, other), {})
    return op


for _name, _uf in dict(add=np.add, sub=np.subtract, mul=np.multiply, truediv=np.true_divide,
                       floordiv=np.floor_divide, mod=np.remainder, pow=np.power,
                       matmul=np.matmul, and_=np.bitwise_and, or_=np.bitwise_or,
                       xor=np.bitwise_xor, lshift=np.left_shift, rshift=np.right_shift).items():
    _n = _name.rstrip("_")
    setattr(ndarray, f"__{_n}__", _operator(_uf))
    setattr(ndarray, f"__r{_n}__", _operator(_uf, reflected=True))
    setattr(ndarray, f"__i{_n}__", _operator(_uf, inplace=True))
for _name, _uf in dict(lt=np.less, le=np.less_equal, gt=np.greater, ge=np.greater_equal,
                       eq=np.equal, ne=np.not_equal).items():
    setattr(ndarray, f"__{_name}__", _operator(_uf))
for _name, _uf in dict(neg=np.negative, pos=np.positive, abs=np.absolute, invert=np.invert).items():
    _uf = _flushing_ufunc(_uf) if _uf.__name__ in _api.FLUSHES_FLOAT32 else _uf
    setattr(ndarray, f"__{_name}__", (lambda uf: lambda self: _call(uf, (self,), {}))(_uf))


# ---------------------------------------------------------------- operations

def _check_read(arr: ndarray, stream: Stream) -> None:
    block = arr._mem.block
    if _pending(block.writer, block.ticket, stream):
        raise StreamOrderError(
            f"an operation on {stream!r} reads an array of shape {arr.shape} and dtype "
            f"{arr.dtype} whose producing work on {block.writer!r} (ticket {block.ticket}, done "
            f"{block.writer.done}) was not synchronised: on a GPU it would read stale memory. "
            "Run it on the producer's stream, or synchronise / wait for an event first.")


def _written(name: str, args, kwargs) -> list:
    out = [kwargs["out"]] if kwargs.get("out") is not None else []
    if name in ("copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis") and args:
        out.append(args[0])
    return out


def _unwrap(x, arrays: list, allow_host: bool):
    if isinstance(x, ndarray):
        arrays.append(x)
        return x._a
    if isinstance(x, np.ndarray):
        if allow_host:
            COUNTS["host_to_device"] += 1
            return x
        raise TypeError(f"Unsupported type {type(x)}")
    if isinstance(x, (list, tuple)) and x:
        items = [_unwrap(v, arrays, allow_host) for v in x]
        return type(x)(items) if type(x) in (list, tuple) else x
    if isinstance(x, dict):
        return {k: _unwrap(v, arrays, allow_host) for k, v in x.items()}
    return x


def _wrap(r, by_owner: dict, stream: Stream):
    if isinstance(r, np.ndarray):
        base = r
        while base is not None:      # a view of an operand's memory (as_strided's go through
            mem = by_owner.get(id(base))  # a helper object's .base): no kernel, no copy
            if mem is not None:
                return ndarray._of(r, mem)
            base = getattr(base, "base", None)
        out = _allocate(r.shape, r.dtype, stream)
        np.copyto(out._a, r)
        return out
    if isinstance(r, np.generic):       # CuPy's reductions return 0-d arrays, not scalars
        return _wrap(np.asarray(r), by_owner, stream)
    if isinstance(r, tuple):
        items = [_wrap(v, by_owner, stream) for v in r]
        return type(r)(*items) if hasattr(r, "_fields") else tuple(items)
    if isinstance(r, list):
        return [_wrap(v, by_owner, stream) for v in r]
    return r


def _call(fn, args, kwargs, writes=(), allow_host=False):
    """One simulated CuPy operation on the current stream: runs ``fn`` on the host arrays and
    returns device arrays (views of operands stay views, and cost nothing). An operation that
    allocates or writes is a kernel: its operands' producers are checked, it takes a ticket on
    the stream and is counted."""
    stream = get_current_stream()
    arrays: list = []
    host_args = _unwrap(tuple(args), arrays, allow_host)
    host_kwargs = _unwrap(kwargs, arrays, allow_host) if kwargs else {}
    if stream.capture is not None:
        _refuse_library_in_capture(fn, arrays)
        _refuse_size_read_in_capture(fn, args, stream)
    with _outside_captures(arrays + [w for w in writes if isinstance(w, ndarray)], stream):
        return _run_call(fn, args, host_args, host_kwargs, arrays, writes, stream)


def _run_call(fn, args, host_args, host_kwargs, arrays, writes, stream):
    """:func:`_call`'s operation once its operands are known (and, for work outside a capture
    under way, swapped to their bytes outside it: :func:`_outside_captures`)."""
    by_owner = {id(_owner(a._a)): a._mem for a in arrays}
    allocated = _ALLOCATED[0]
    before = Graph.snapshot(arrays) if stream.capture is not None else None
    with np.errstate(all="ignore"):
        result = fn(*host_args, **host_kwargs)
    out = _wrap(result, by_owner, stream)
    # an operation writes memory (a kernel) when it allocates its result (from the pool or an
    # allocator handing out memory it holds) or writes an operand in place
    if _ALLOCATED[0] == allocated and not writes \
            and not (before is not None and Graph.changed(before)):
        return out
    if stream.capture is not None:
        stream.capture.save(snapshot=before)
    # (after the result's allocation, as CuPy allocates a library's scratch)
    library = _library_memory(fn, arrays, host_args, host_kwargs, stream)
    for a in arrays:
        _check_read(a, stream)
    ticket = stream._next()
    for a in arrays:
        a._mem.block.readers[stream] = ticket
    for a in _flat(out) + [w for w in writes if isinstance(w, ndarray)]:
        _mark_written(a._mem.block, stream, ticket)
    if stream.capture is not None:
        operands = {id(m) for m in by_owner.values()}
        stream.capture.record_operation(fn, host_args, host_kwargs, out, operands,
                                        arrays + _flat(out) + _flat(list(writes)))
        stream.capture.steps[-1][1].extend((m.block, m.block.generation) for m in library)
    del library   # (scratch goes back to the pool here, unless the allocator holds it)
    COUNTS["operations"] += 1
    return out


def _flat(r) -> list:
    if isinstance(r, ndarray):
        return [r]
    if isinstance(r, (list, tuple)):
        return [a for v in r for a in _flat(v)]
    return []


#: the captures under way (graphs of capturing streams), and the lock that keeps a captured
#: step and work outside it from swapping one block's bytes at once (:func:`_outside_captures`)
_CAPTURES: list = []
_SHADOW_LOCK = threading.RLock()


def _mark_written(block, stream: Stream, ticket: int) -> None:
    """``stream``'s work of ``ticket`` is ``block``'s last producer; a capture under way on
    ``stream`` keeps the producer from before (nothing is enqueued while capturing)."""
    capture = stream.capture
    if capture is not None and id(block) not in capture.producers:
        capture.producers[id(block)] = (block, (block.writer, block.ticket))
    block.writer, block.ticket = stream, ticket


@contextlib.contextmanager
def _outside_captures(arrays, stream: Stream):
    """Within the block, ``stream``'s work (a read, an operation, a kernel) on ``arrays`` sees
    their memory as a GPU holds it while other streams capture: a capture runs nothing, so a
    block a captured step wrote holds its bytes and its producer from before the capture (or
    from work outside it since). Each such block is swapped to those for the work, and what
    the work leaves becomes them (kept by ``end_capture``), the captured steps' bytes swapped
    back after. Work on a capturing stream itself holds the lock only (a captured step must
    not meet a swap half done)."""
    if not _CAPTURES:
        yield
        return
    with _SHADOW_LOCK:
        swaps = []
        blocks = {id(b): b for b in (getattr(getattr(a, "_mem", a), "block", a) for a in arrays)}
        for graph in list(_CAPTURES):
            if graph.stream is stream:
                continue
            for key, block in blocks.items():
                saved, producer = graph.saved.get(key), graph.producers.get(key)
                if saved is None and producer is None:
                    continue
                captured = (block.buf.copy() if saved is not None else None,
                            (block.writer, block.ticket))
                if saved is not None:
                    block.buf[...] = saved[1]
                if producer is not None:
                    block.writer, block.ticket = producer[1]
                swaps.append((graph, key, block, captured))
        try:
            yield
        finally:
            for graph, key, block, (data, producer) in reversed(swaps):
                if data is not None:
                    graph.saved[key] = (block, block.buf.copy())
                    block.buf[...] = data
                if key in graph.producers:
                    graph.producers[key] = (block, (block.writer, block.ticket))
                    block.writer, block.ticket = producer


#: how many device arrays were allocated so far (from the pool or a ``using_allocator``'s
#: allocator, which may hand out memory it already holds)
_ALLOCATED = [0]


def _allocate(shape, dtype, stream=None) -> ndarray:
    _ALLOCATED[0] += 1
    shape = (int(shape),) if np.ndim(shape) == 0 else tuple(int(s) for s in shape)
    dt = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=object)) * dt.itemsize
    allocator = getattr(_tls, "allocator", None)
    if allocator is not None:
        mem = allocator(nbytes)            # cupy.cuda.using_allocator's (a MemoryPointer or ours)
        mem = mem.mem if isinstance(mem, _MemoryPointer) else mem
        capture = (stream or get_current_stream()).capture
        if capture is not None and not any(b is mem.block for b in capture.allocated):
            capture.save([mem])   # (memory from before the capture: what is written is undone)
    else:
        mem = _POOL.malloc(nbytes, stream or get_current_stream())
    host = mem.block.buf[:nbytes].view(dt).reshape(shape)
    return ndarray._of(host, mem)


# ---------------------------------------------------------------- creation and transfers

def empty(shape, dtype=float, order="C"):
    return _allocate(shape, dtype)


def empty_like(a, dtype=None, shape=None):
    return _allocate(a.shape if shape is None else shape, a.dtype if dtype is None else dtype)


def _to_device(x, dtype=None, copy=True):
    """``cupy.asarray``/``cupy.array``: a device array of ``x`` (a host-to-device copy when
    ``x`` lives on the host)."""
    if isinstance(x, ndarray):
        if dtype is None or np.dtype(dtype) == x.dtype:
            return x.copy() if copy else x
        return x.astype(dtype)
    if not isinstance(x, np.ndarray) and hasattr(x, "__dlpack_device__") and x.__dlpack_device__()[0] == 2:
        return from_dlpack(x)
    if isinstance(x, (list, tuple)) and any(isinstance(v, ndarray) for v in x):
        return stack(list(x)) if dtype is None else stack(list(x)).astype(dtype)
    host = np.array(x, dtype=dtype)
    if host.dtype.kind in "OVSUMm":
        raise ValueError(f"Unsupported dtype {host.dtype} (of a {type(x).__name__})")
    stream = get_current_stream()
    _refuse_in_capture(stream, "a host-to-device copy from pageable memory")
    out = _allocate(host.shape, host.dtype, stream)
    np.copyto(out._a, host)
    out._mem.block.writer, out._mem.block.ticket = stream, stream._next()
    COUNTS["host_to_device"] += 1
    return out


def asarray(a, dtype=None, order=None, blocking=False):
    return _to_device(a, dtype, copy=False)


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, blocking=False):
    return _to_device(obj, dtype, copy=copy)


def asnumpy(a, stream=None, order="C", out=None, blocking=True):
    return a.get(stream=stream, order=order, out=out) if isinstance(a, ndarray) else np.asarray(a)


def ascontiguousarray(a, dtype=None):
    # (as CuPy's and NumPy's: at least one dimension, so a rank-0 array comes back as shape (1,))
    if isinstance(a, ndarray) and a._a.flags.c_contiguous and a.ndim \
            and (dtype is None or np.dtype(dtype) == a.dtype):
        return a
    if not isinstance(a, ndarray):
        return _to_device(np.ascontiguousarray(a, dtype=dtype), copy=False)
    return _call(np.ascontiguousarray, (a,), {"dtype": dtype})


class _Capsule:
    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


def from_dlpack(x, device=None):
    """A zero-copy view of a DLPack exporter on the device: a simulated device array, or a
    capsule of one (a host array's DLPack is refused: CuPy imports device memory only)."""
    if isinstance(x, ndarray):
        x._mem.block.pinned = True
        return ndarray._of(x._a, x._mem)
    if hasattr(x, "__dlpack__"):
        kind = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else 1
        if kind != 2:
            raise TypeError(f"from_dlpack: {type(x).__name__} lives on the host (DLPack device "
                            f"type {kind}); CuPy imports CUDA memory only (use cupy.asarray)")
        x = x.__dlpack__()
    host = np.from_dlpack(_Capsule(x))  # the capsule of a simulated array holds host memory
    block = _Block(_owner(host), Stream.null)
    block.pinned = True
    return ndarray._of(host, _Memory(block))


fromDlpack = from_dlpack


def _namespace_function(module_name: str, name: str):
    """``cupy.<module>.<name>``: the NumPy/SciPy function of that name as a device operation."""
    fn = _vendor.REPLACEMENTS.get((module_name, name)) or getattr(
        importlib.import_module(module_name), name)
    if (module_name == "numpy" and name in _api.FLUSHES_FLOAT32) or module_name == "scipy.special":
        fn = _flushing(fn)
    writes_first = name in ("copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis")

    def device_function(*args, **kwargs):
        writes = _written(name, args, kwargs) if writes_first or "out" in kwargs else ()
        return _call(fn, args, kwargs, writes=writes)

    device_function.__name__ = device_function.__qualname__ = name
    device_function.__doc__ = f"Simulated ``{name}``: {module_name}.{name} as a device operation."
    return device_function


def _flush_float32(value):
    """``value`` with float32 (and complex64 parts') subnormals flushed to a zero of their
    sign, as a kernel compiled with ``-ftz=true`` reads and writes them; other values as they
    are."""
    if isinstance(value, (list, tuple)):
        return type(value)(_flush_float32(v) for v in value)
    if not isinstance(value, (np.ndarray, np.generic)) or value.dtype not in (np.float32, np.complex64):
        return value
    if value.dtype == np.complex64:
        out = np.empty(value.shape, np.complex64)   # (parts written as they are: -0, inf kept)
        out.real, out.imag = _flush_float32(np.real(value)), _flush_float32(np.imag(value))
        return out if isinstance(value, np.ndarray) else out[()]
    tiny = np.finfo(np.float32).tiny
    return np.where(np.abs(value) < tiny, np.copysign(np.float32(0), value), value).astype(np.float32)


def _flushing(fn):
    """``fn`` as CuPy's kernel of it runs: float32 subnormals flushed in operands and results
    (:data:`fake_cupy_api.FLUSHES_FLOAT32`)."""
    def run(*args, **kwargs):
        return _flush_float32(fn(*_flush_float32(args), **kwargs))
    run.__name__ = run.__qualname__ = fn.__name__
    return run


_OWN = {"asarray", "array", "ascontiguousarray", "empty", "empty_like", "ndarray",
        "from_dlpack", "asnumpy"}


def _make_namespace(path: str, module: types.ModuleType | None = None):
    host_module, table = _api.NAMESPACES[path]
    module = module or types.ModuleType(path)

    def __getattr__(name):
        if name in table and name not in _OWN:
            fn = _namespace_function(host_module, name)
            setattr(module, name, fn)
            return fn
        raise AttributeError(f"simulated module {path!r} has no attribute {name!r} "
                             "(not in tests/cupy/fake_cupy_api.py)")

    module.__getattr__ = __getattr__
    return module


def __getattr__(name):  # cupy.<name>: the numpy namespace table
    if name in _api.NUMPY and name not in _OWN:
        fn = _namespace_function("numpy", name)
        if not hasattr(builtins, name):  # cupy.max cached as a global would shadow max() here
            globals()[name] = fn
        return fn
    raise AttributeError(f"simulated module 'cupy' has no attribute {name!r} "
                         "(not in tests/cupy/fake_cupy_api.py)")


def stack(arrays, axis=0, out=None, dtype=None, casting="same_kind"):
    return _call(np.stack, (list(arrays),), {"axis": axis})


def get_array_module(*args):
    return sys.modules[__name__] if any(isinstance(a, ndarray) for a in args) else np


# ---------------------------------------------------------------- cupy.cuda

class _Device:
    def __init__(self, id=None):
        self.id = 0 if id is None else int(id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def use(self):
        return self

    def synchronize(self):
        _device_synchronize()

    @property
    def compute_capability(self):
        return "80"


class OutOfMemoryError(MemoryError):
    """CuPy's: ``(size, total, limit)``."""

    def __str__(self):
        return f"Out of memory allocating {self.args[0]:,} bytes (allocated so far: {self.args[1]:,} bytes)."


_CT = {np.dtype(np.bool_): ctypes.c_bool, np.dtype(np.int8): ctypes.c_int8,
       np.dtype(np.int16): ctypes.c_int16, np.dtype(np.int32): ctypes.c_int32,
       np.dtype(np.int64): ctypes.c_int64, np.dtype(np.uint8): ctypes.c_uint8,
       np.dtype(np.uint16): ctypes.c_uint16, np.dtype(np.uint32): ctypes.c_uint32,
       np.dtype(np.uint64): ctypes.c_uint64, np.dtype(np.float32): ctypes.c_float,
       np.dtype(np.float64): ctypes.c_double}

#: launches run so far: (kernel name, grid, block)
LAUNCHES: list = []


class _Function:
    """A kernel of a :class:`RawModule`, run on the host (one thread per block, blocks in
    sequence) when launched; its array arguments are checked and marked as the stream's reads
    and writes. A kernel compiled with ``-ftz=true`` runs with the x86 flush-to-zero and
    denormals-are-zero modes on (float32 subnormals flushed, as on the GPU)."""

    def __init__(self, lib, name, ftz=False):
        self.lib, self.name = lib, name
        self.fn = getattr(lib, name)
        self.ftz = ftz and hasattr(lib, "plax_sim_fp_mode")

    def __call__(self, grid, block, args, shared_mem=0, stream=None):
        stream = stream or get_current_stream()
        cargs, types_, arrays = [], [], []
        for a in args:
            if isinstance(a, ndarray):
                assert a._a.flags.c_contiguous, f"{self.name}: a non-contiguous operand"
                arrays.append(a)
                cargs.append(a._a.__array_interface__["data"][0] if a.size else 0)
                types_.append(ctypes.c_void_p)
            elif isinstance(a, np.ndarray) and a.ndim:
                raise TypeError(f"{self.name}: a host (NumPy) array passed to a CUDA kernel")
            else:
                a = np.asarray(a)
                ct = _CT[a.dtype]
                cargs.append(ct(a.item()))
                types_.append(ct)
        self.fn.argtypes = types_
        self.fn.restype = None
        with _outside_captures(arrays, stream):
            self._launch(cargs, grid, block, arrays, stream)

    def _launch(self, cargs, grid, block, arrays, stream) -> None:
        for a in arrays:
            _check_read(a, stream)
        ticket = stream._next()
        for a in arrays:  # a kernel may write any pointer it gets: each is read and written
            block_ = a._mem.block
            block_.readers[stream] = ticket
            _mark_written(block_, stream, ticket)
        LAUNCHES.append((self.name, tuple(grid), tuple(block)))
        COUNTS["kernel_launches"] += 1
        run = self._runner(cargs, int(grid[0]))
        if stream.capture is None:
            run()
            return
        stream.capture.record(run, arrays)
        before = Graph.snapshot(arrays)
        run()
        stream.capture.save(snapshot=before)

    def _runner(self, cargs, blocks):
        def run():  # one thread per block, blocks in sequence (in BLOCK_ORDER)
            saved = self.lib.plax_sim_fp_mode(_FTZ_DAZ, 1) if self.ftz else None
            unfenced = _unfenced_counts(self.lib)
            before = unfenced.value if unfenced is not None else 0
            try:
                for b in _block_order(blocks):
                    self.lib.plax_sim_block(b, blocks)
                    self.fn(*cargs)
            finally:
                if saved is not None:
                    self.lib.plax_sim_fp_mode(saved, 0)
            if unfenced is not None and unfenced.value != before:
                raise UnfencedCountError(
                    f"{self.name}: {unfenced.value - before} block(s) counted themselves done "
                    "(plax_count_done) without a __threadfence after their stores: on a GPU the "
                    "block that combines the partials may not see them")
        return run


class UnfencedCountError(RuntimeError):
    """A kernel's block counted itself done on a counter without fencing its stores first."""


#: the order the simulated GPU runs a launch's blocks in: "forward" (0, 1, ...), "reverse",
#: or "shuffled" (a fixed permutation per grid size): a GPU promises no order, so a kernel's
#: results must not depend on it (the last block to finish is a different one in each)
BLOCK_ORDER = "forward"


def _block_order(blocks: int):
    if BLOCK_ORDER == "reverse":
        return range(blocks - 1, -1, -1)
    if BLOCK_ORDER == "shuffled":
        return np.random.default_rng(blocks).permutation(blocks).tolist()
    return range(blocks)


def look_back_counters(module) -> dict:
    """The look-back counters of a simulated module built from a ``kernels_rows`` source
    (``plax_sim_look_back_tiles``, ``_steps``, ``_most``: the tiles that looked back, their
    memory round trips, the most of one tile), as ctypes values to reset and read:
    ``{"tiles": ..., "steps": ..., "most": ...}``."""
    return {key: ctypes.c_ulonglong.in_dll(module.lib, f"plax_sim_look_back_{key}")
            for key in ("tiles", "steps", "most")}


def _unfenced_counts(lib):
    """The module's count of blocks that counted themselves done unfenced (None where its
    source has no such counter)."""
    try:
        return ctypes.c_uint.in_dll(lib, "plax_sim_unfenced_counts")
    except ValueError:
        return None


#: MXCSR's flush-to-zero (bit 15) and denormals-are-zero (bit 6) bits
_FTZ_DAZ = 0x8040
#: appended to each simulated module's host build: sets (``set=1``: ORs in) or restores the
#: thread's SSE floating-point mode, returning the previous one (x86 only; elsewhere kernels
#: compiled with -ftz=true do not flush)
_FP_MODE_SOURCE = r"""
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
extern "C" unsigned int plax_sim_fp_mode(unsigned int mode, int set) {
  unsigned int old = _mm_getcsr();
  _mm_setcsr(set ? (old | mode) : mode);
  return old;
}
#endif
"""


class CUDADriverError(RuntimeError):
    """The driver's error (``cupy_backends.cuda.api.driver.CUDADriverError``)."""


class RawModule:
    """``cupy.RawModule``: ``code=`` compiles with CuPy's options (``-ftz=true`` appended, as
    CuPy's ``_compile_with_cache_cuda`` does), ``path=`` loads a cubin or PTX file of the
    simulated NVRTC (:mod:`fake_nvrtc`); exactly one of them, as CuPy requires. Either way the
    module's source is built for the host (``-DPLAX_SIM``)."""

    def __init__(self, code=None, *, path=None, options=(), name_expressions=None, **kwargs):
        if (code is None) == (path is None):
            raise TypeError("Exactly one of `code` and `path` keyword arguments must be given.")
        from plax_cupy import nvrtc
        if code is not None:
            options = tuple(options)
            if not any(o.lstrip("-").startswith("std=") for o in options):
                options += ("-std=c++17",)
            options += ("-ftz=true",)
            fake_nvrtc.record(code, options, via="cupy")
        else:
            try:
                with open(path, "rb") as f:
                    kind, options, code = fake_nvrtc.parse_binary(f.read())
            except (OSError, ValueError) as err:
                raise CUDADriverError(f"cuModuleLoad({path!r}): {err}") from None
            _check_architecture(kind, fake_nvrtc.architecture(options), path)
        self.options = options
        self.ftz = fake_nvrtc.flushes_subnormals(options)
        self.lib = nvrtc.compile_host(code + _FP_MODE_SOURCE, define="PLAX_SIM")
        self.lib.plax_sim_block.argtypes = [ctypes.c_uint, ctypes.c_uint]
        if hasattr(self.lib, "plax_sim_fp_mode"):
            self.lib.plax_sim_fp_mode.argtypes = [ctypes.c_uint, ctypes.c_int]
            self.lib.plax_sim_fp_mode.restype = ctypes.c_uint

    def get_function(self, name):
        return _Function(self.lib, name, ftz=self.ftz)


def _check_architecture(kind: str, arch, path) -> None:
    """The driver loads a cubin of the device's major architecture and a minor one not above
    its own, and PTX of any virtual architecture not above the device's."""
    device = int(_Device().compute_capability)
    if arch is None:
        return
    target = int(arch[1])
    ok = (target // 10 == device // 10 and target <= device) if kind == "cubin" else target <= device
    if not ok:
        raise CUDADriverError(f"cuModuleLoad({path!r}): CUDA_ERROR_NO_BINARY_FOR_GPU "
                              f"({kind} for {arch[0]}_{arch[1]} on a compute capability {device} device)")


def install(sm_count: int = 2):
    """Makes ``import cupy`` give this module (and ``cupy.cuda...``, ``cupy.linalg``,
    ``cupy.fft``, ``cupyx.scipy.*`` its pieces)."""
    me = sys.modules[__name__]
    cuda = types.ModuleType("cupy.cuda")
    cuda.Device = _Device
    cuda.Stream = Stream
    cuda.Event = Event
    cuda.get_current_stream = get_current_stream
    cuda.MemoryPool = MemoryPool
    cuda.Graph = Graph
    cuda.using_allocator = using_allocator
    memory = types.ModuleType("cupy.cuda.memory")
    memory.OutOfMemoryError = OutOfMemoryError
    cuda.memory = memory
    runtime = types.ModuleType("cupy.cuda.runtime")
    runtime.getDeviceCount = lambda: 1
    runtime.getDeviceProperties = lambda i: {"name": b"Simulated GPU (host threads)", "major": 8,
                                             "minor": 0, "multiProcessorCount": sm_count,
                                             "totalGlobalMem": MEMORY}
    runtime.deviceSynchronize = _device_synchronize
    runtime.memGetInfo = lambda: (max(MEMORY - _POOL.used - _POOL.free_bytes(), 0), MEMORY)
    runtime.CUDARuntimeError = CUDARuntimeError
    runtime.streamCaptureModeRelaxed = 2
    cuda.runtime = runtime
    cuda.nvrtc = fake_nvrtc
    device = types.ModuleType("cupy.cuda.device")
    device.get_cublas_handle = get_cublas_handle
    device.get_cusolver_handle = fake_cupy_linalg.get_cusolver_handle
    cuda.device = device
    me.cuda = cuda
    sys.modules["cupy"] = me
    sys.modules["cupy.cuda"] = cuda
    sys.modules["cupy.cuda.memory"] = memory
    sys.modules["cupy.cuda.runtime"] = runtime
    sys.modules["cupy.cuda.nvrtc"] = fake_nvrtc
    sys.modules["cupy.cuda.device"] = device
    # plax's kernel cache of this simulation: apart from the user's (fake binaries)
    os.environ.setdefault("PLAX_CUPY_CACHE_DIR",
                          os.path.join(tempfile.gettempdir(), "plax_cupy_simulated"))
    for path in _api.NAMESPACES:
        if path == "cupy":
            continue
        module = _make_namespace(path)
        sys.modules[path] = module
        parent, _, leaf = path.rpartition(".")
        if parent not in sys.modules:
            sys.modules[parent] = types.ModuleType(parent)
            if "." in parent:
                grand, _, pleaf = parent.rpartition(".")
                if grand not in sys.modules:
                    sys.modules[grand] = types.ModuleType(grand)
                setattr(sys.modules[grand], pleaf, sys.modules[parent])
        setattr(sys.modules[parent], leaf, module)
    config = types.ModuleType("cupy.fft.config")   # (cupy/fft/config.py: the plan cache)
    config.get_plan_cache = lambda: _FFT_PLANS
    sys.modules["cupy.fft"].config = sys.modules["cupy.fft.config"] = config
    cuda.cufft = sys.modules["cupy.cuda.cufft"] = _cufft_module()


# ---------------------------------------------------------------- CUDA graphs (stream capture)

class CUDARuntimeError(RuntimeError):
    """CuPy's ``cupy.cuda.runtime.CUDARuntimeError``: ``"<CUDA error name>: <its text>"``."""


class StreamCaptureError(CUDARuntimeError):
    """What CUDA or CuPy refuses while a stream captures: a synchronisation
    (``cudaErrorStreamCaptureUnsupported``, which also invalidates the capture, so that
    ``end_capture`` raises ``cudaErrorStreamCaptureInvalidated``, as CUDA does), a copy between
    host and device (CuPy refuses it before calling CUDA: the capture goes on), or a misuse of
    begin/end_capture."""


def _refuse_in_capture(stream, what: str, invalidates: bool = False) -> None:
    if stream.capture is None:
        return
    if invalidates:
        stream.capture.invalidated = stream.capture.invalidated or what
        raise StreamCaptureError(f"cudaErrorStreamCaptureUnsupported: operation not permitted "
                                 f"when stream is capturing ({what} while {stream!r} captures)")
    raise StreamCaptureError(f"{what} while {stream!r} is capturing a CUDA graph: CuPy refuses "
                             "it (the current stream is capturing, so synchronous API calls are "
                             "disallowed)")


#: CuPy functions that run on cuBLAS for float and complex operands (CuPy's own kernels for
#: integers and booleans): ``tensordot_core``/``matmul`` call ``cublas.gemmEx``,
#: ``gemmStridedBatchedEx``, ``sgemmEx``...; ``vdot`` ``cublas.dotc``
_CUBLAS_FUNCTIONS = {np.matmul, np.dot, np.tensordot, np.inner, np.vdot, np.einsum,
                     np.ndarray.dot}
#: of ``cupyx.scipy.linalg``, the functions that call cuBLAS, not cuSOLVER
#: (``_solve_triangular.py``: ``cublas.<t>trsm``/``<t>trsmBatched``)
_CUBLAS_LINALG = {"solve_triangular"}
#: of ``cupy.linalg`` (cuSOLVER and cuBLAS), the functions that do not
_NOT_LIBRARY_LINALG = {"norm", "matrix_norm", "vector_norm", "matrix_transpose", "outer",
                       "cross", "diagonal", "trace", "vecdot", "LinAlgError"}


def _library_of(fn, arrays) -> str | None:
    """The CUDA library (``"cuBLAS"``, ``"cuSOLVER"``) CuPy calls for ``fn`` on ``arrays``."""
    fn = getattr(fn, "__wrapped__", fn)
    module = getattr(fn, "__module__", None) or ""
    # (a vendor replacement answers for the NumPy/SciPy function it stands for)
    module = next((m for (m, _), f in _vendor.REPLACEMENTS.items() if f is fn), module)
    if module.startswith("scipy.linalg") and getattr(fn, "__name__", "") in _CUBLAS_LINALG:
        return "cuBLAS"
    if module.startswith("scipy.linalg") or (
            module.startswith("numpy.linalg") and getattr(fn, "__name__", "") not in _NOT_LIBRARY_LINALG):
        return "cuSOLVER"
    if fn in _CUBLAS_FUNCTIONS and any(a.dtype.kind in "fc" for a in arrays):
        return "cuBLAS"
    return None


def _refuse_library_in_capture(fn, arrays) -> None:
    """As CuPy's cuBLAS/cuSOLVER/cuRAND/cuSPARSE bindings: their ``setStream``, called by every
    routine, raises while the current stream captures (``cupy_backends/cuda/libs/cublas.pyx``:
    "calling cuBLAS API during stream capture is currently unsupported"), whatever CUDA itself
    would allow."""
    library = _library_of(fn, arrays)
    if library is not None:
        raise NotImplementedError(f"calling {library} API during stream capture is currently "
                                  "unsupported")


#: CuPy functions whose result's size is data-dependent: CuPy reads it to the host with
#: ``int(scan[-1])`` (``cupy/_core/_routines_indexing.pyx``: ``_ndarray_nonzero``, "#
#: synchronize!", and ``_prepare_mask_indexing_single`` for a boolean mask; ``cupy.unique``
#: and ``extract``/``compress`` go through a boolean mask), a device-to-host copy that CuPy's
#: ``memory.pyx`` refuses on a capturing stream
_SIZE_READS = {np.nonzero, np.flatnonzero, np.argwhere, np.unique, np.extract, np.compress,
               np.ndarray.nonzero}


def _refuse_size_read_in_capture(fn, args, stream) -> None:
    """As CuPy: a call whose result's size depends on the data (``nonzero``, ``argwhere``,
    ``unique``, ``where(cond)``, ``x[mask]``) copies that size to the host, refused while the
    stream captures (the capture goes on)."""
    one_arg_where = fn is np.where and len(args) == 1
    mask_index = fn is operator.getitem and len(args) == 2 and (
        (isinstance(args[1], ndarray) and args[1].dtype == np.bool_)
        or (isinstance(args[1], tuple) and any(isinstance(k, ndarray) and k.dtype == np.bool_
                                                for k in args[1])))
    named = fn in _SIZE_READS or getattr(fn, "__wrapped__", None) in _SIZE_READS
    if named or one_arg_where or mask_index:
        name = "a boolean mask index" if mask_index else getattr(fn, "__name__", repr(fn))
        _refuse_in_capture(stream, f"a device-to-host copy ({name} reads its result's size)")


#: CuPy's calls that take temporary device storage from CuPy's allocator and give it back
#: before returning, by name (NumPy's function or ``ndarray`` method of that name): the sorts
#: (Thrust: ``cupy/cuda/thrust.pyx`` line 39, ``cupy_malloc`` -> ``memory.alloc``) and the
#: reductions and scans CUB runs (CuPy's default ``CUPY_ACCELERATORS=cub``,
#: ``cupy/_core/_accelerator.pyx`` line 52: ``cupy/_core/_cub_reduction.pyx`` line 451,
#: ``cupy/cuda/cub.pyx`` lines 190, 263 and 299)
_SCRATCH_CALLS = {"argsort", "sort", "sort_in_place", "lexsort", "sum", "prod", "max", "min",
                  "amax", "amin", "argmax", "argmin", "cumsum", "cumprod", "nansum", "nanprod"}
#: ``numpy.fft`` names of the transforms CuPy runs through a cached cuFFT plan
_FFT_TRANSFORMS = {"fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn",
                   "ifftn", "rfftn", "irfftn", "hfft", "ihfft"}


class FftPlanCache:
    """CuPy's per-device cache of cuFFT plans (``cupy/fft/_cache.pyx``: an LRU of 16 plans by
    default; ``cupy.fft.config.get_plan_cache()``). A plan owns memory cuFFT allocated itself
    (not through CuPy's pool), freed when the plan is evicted or the cache cleared
    (``cufftDestroy``): a CUDA graph that captured a transform reads it on every replay."""

    def __init__(self, size: int = 16):
        self.size = size
        self.plans: dict = {}   # key -> the plan's _Block, least recently used first

    def plan(self, key) -> "_Block":
        block = self.plans.pop(key, None)
        if block is None:   # (a miss makes a plan: refused while the stream captures)
            _refuse_plan_in_capture(get_current_stream())
            block = _Block(np.zeros(_ROUND, np.uint8), get_current_stream())
        self.plans[key] = block
        while len(self.plans) > max(self.size, 0):
            self._destroy(next(iter(self.plans)))
        return block

    def _destroy(self, key) -> None:
        self.plans.pop(key).live = False

    def set_size(self, size: int) -> None:
        self.size = size
        while len(self.plans) > max(size, 0):
            self._destroy(next(iter(self.plans)))

    def clear(self) -> None:
        for key in list(self.plans):
            self._destroy(key)

    def get_size(self) -> int:
        return self.size


_FFT_PLANS = FftPlanCache()


# ---------------------------------------------------------------- cuFFT plans (cupy.cuda.cufft)

class CuFFTError(RuntimeError):
    """CuPy's ``cupy.cuda.cufft.CuFFTError``: a cuFFT status other than success."""


#: cufftType values (cufft.h) -> (input dtype, output dtype)
_CUFFT_TYPES = {0x29: (np.complex64, np.complex64), 0x2a: (np.float32, np.complex64),
                0x2c: (np.complex64, np.float32), 0x69: (np.complex128, np.complex128),
                0x6a: (np.float64, np.complex128), 0x6c: (np.complex128, np.float64)}
_C2R_TYPES = (0x2c, 0x6c)


def _refuse_plan_in_capture(stream) -> None:
    """A cuFFT plan made while ``stream`` captures: ``cufftMakePlan*`` allocates and uploads
    the plan's tables with synchronous CUDA calls, which a capture does not record (treated
    as CUDA treats a synchronisation: refused, and the capture invalidated). A plan must be
    made before the capture, and live as long as the graph."""
    _refuse_in_capture(stream, "cufftMakePlanMany (a cuFFT plan made during the capture)",
                       invalidates=True)


class PlanNd:
    """``cupy.cuda.cufft.PlanNd`` (``cupy/cuda/cufft.pyx``): a cuFFT plan of a batch of 1-3
    dimensional transforms, made with ``cufftMakePlanMany`` outside any capture. As CuPy's, it
    turns cuFFT's auto-allocation off and takes its work area from CuPy's current allocator
    (``memory.alloc``: a capture's allocator, if one is set); cuFFT's own plan memory lives
    until the plan is destroyed (``cufftDestroy``, when the object dies). ``fft`` runs on the
    current stream (``cufftSetStream``, not refused while it captures: no capture check in
    CuPy's binding) and is recorded into a capture like a kernel, reading the work area and
    the plan's memory on every replay. A C2R transform overwrites its input, as cuFFT's may.
    Only C-ordered layouts with unit strides (what plax makes) are simulated."""

    def __init__(self, shape, inembed, istride, idist, onembed, ostride, odist, fft_type,
                 batch, order, last_axis, last_size, *, prealloc_plan=0):
        stream = get_current_stream()
        _refuse_plan_in_capture(stream)
        shape = tuple(int(n) for n in shape)
        if not 1 <= len(shape) <= 3 or min(shape) < 1 or fft_type not in _CUFFT_TYPES \
                or batch < 0 or order not in ("C", "F"):
            raise CuFFTError("CUFFT_INVALID_VALUE")
        if order != "C" or istride != 1 or ostride != 1:
            raise NotImplementedError("the simulated cuFFT takes C-ordered unit-stride layouts")
        self.shape, self.fft_type, self.batch, self.order = shape, fft_type, int(batch), order
        self.inembed = tuple(inembed) if inembed is not None else shape
        self.onembed = tuple(onembed) if onembed is not None else shape
        self.idist, self.odist = int(idist), int(odist)
        self.last_axis, self.last_size = last_axis, last_size
        self.gpus = None
        self._internal = _Block(np.zeros(_ROUND, np.uint8), stream)   # cuFFT's own memory
        in_item = np.dtype(_CUFFT_TYPES[fft_type][0]).itemsize
        self.work_area = _allocate((2 * self.batch * self.idist * in_item if batch else 0,),
                                   np.uint8, stream)   # (memory.alloc: the current allocator)

    def __del__(self):
        internal = getattr(self, "_internal", None)   # (cufftDestroy; the work area goes
        if internal is not None:                      # back to the pool with its array)
            internal.live = False

    def __enter__(self):
        raise NotImplementedError("the simulated cuFFT takes plans as fft(a, out, direction)")

    def __exit__(self, *exc):
        return False

    def fft(self, a, out, direction):
        """``cufftSetStream`` to the current stream, then ``cufftExec*`` of ``a`` into ``out``
        (unnormalised in both directions)."""
        stream = get_current_stream()
        in_dt, out_dt = (np.dtype(t) for t in _CUFFT_TYPES[self.fft_type])
        if not isinstance(a, ndarray) or not isinstance(out, ndarray):
            raise TypeError("cuFFT takes device arrays")
        if a.dtype != in_dt or out.dtype != out_dt or direction not in (-1, 1):
            raise CuFFTError(f"CUFFT_INVALID_TYPE: a {a.dtype}, out {out.dtype} for cufftType "
                             f"{self.fft_type:#x}")
        if a.size != self.batch * self.idist or out.size != self.batch * self.odist \
                or not a._a.flags.c_contiguous or not out._a.flags.c_contiguous:
            raise CuFFTError(f"the arrays (shapes {a.shape}, {out.shape}) do not have the "
                             f"plan's layout (batch {self.batch} of {self.inembed} -> "
                             f"{self.onembed}): cuFFT would read or write out of bounds")
        work, internal = self.work_area._mem.block, self._internal
        for block in (work, internal):
            if not block.live:
                raise UseAfterFreeError("cufftExec on a destroyed plan")
        _check_read(a, stream)
        _check_read(out, stream)
        ins = a._a.reshape((self.batch,) + self.inembed)
        outs = out._a.reshape((self.batch,) + self.onembed)
        axes = tuple(range(1, len(self.shape) + 1))
        fft_type, lengths = self.fft_type, self.shape   # (a graph holds no plan object)

        def run():
            with np.errstate(all="ignore"):
                if in_dt.kind == "c" and out_dt.kind == "c":
                    r = (np.fft.fftn(ins, axes=axes) if direction == -1
                         else np.fft.ifftn(ins, axes=axes, norm="forward"))
                elif out_dt.kind == "c":
                    r = np.fft.rfftn(ins, axes=axes)
                else:
                    r = np.fft.irfftn(ins, s=lengths, axes=axes, norm="forward")
                np.copyto(outs, r, casting="unsafe")
                if fft_type in _C2R_TYPES:   # (cuFFT's C2R may use its input as scratch)
                    ins[...] = np.nan

        written = [out._mem.block] + ([a._mem.block] if fft_type in _C2R_TYPES else [])
        fake_cupy_linalg.launch("cufftExec", stream, [a._mem.block, out._mem.block, work,
                                                      internal], run, writes=written)


def _cufft_module() -> types.ModuleType:
    """``cupy.cuda.cufft``: the plan class plax makes its own plans with, and the constants."""
    module = types.ModuleType("cupy.cuda.cufft")
    module.PlanNd, module.CuFFTError = PlanNd, CuFFTError
    module.get_current_plan = lambda: None
    for name, value in (("CUFFT_C2C", 0x29), ("CUFFT_R2C", 0x2a), ("CUFFT_C2R", 0x2c),
                        ("CUFFT_Z2Z", 0x69), ("CUFFT_D2Z", 0x6a), ("CUFFT_Z2D", 0x6c),
                        ("CUFFT_FORWARD", -1), ("CUFFT_INVERSE", 1)):
        setattr(module, name, value)
    return module


def _library_memory(fn, arrays, host_args, host_kwargs, stream) -> list:
    """The device memory a library call uses beyond its operands and result (objects with a
    ``block``), which a capture of it records, so that a replay checks it is still there:

    * a cuFFT transform: its cached plan's memory (:class:`FftPlanCache`), created on a miss;
    * a Thrust sort or a CUB reduction or scan (:data:`_SCRATCH_CALLS`), while capturing: its
      temporary storage, allocated through CuPy's current allocator and freed when the call
      returns (``thrust.pyx``: ``cupy_free``). Thrust runs with ``thrust::cuda::par_nosync``
      (``cupy_thrust.cu`` line 324) and CUB takes the stream, so nothing synchronises: the
      call is captured, but the graph writes that storage on every replay, so whoever captures
      must keep it (plax's capture allocator holds every allocation), or the pool hands it to
      another array.
    """
    base = getattr(fn, "__wrapped__", fn)
    if (getattr(base, "__module__", "") or "").startswith("numpy.fft") and \
            getattr(base, "__name__", "") in _FFT_TRANSFORMS:
        key = (base.__name__, tuple((a.shape, a.dtype.str) for a in arrays),
               repr(host_args[1:]), repr(sorted(host_kwargs.items())))
        return [types.SimpleNamespace(block=_FFT_PLANS.plan(key))]
    package = (getattr(base, "__module__", "") or "").partition(".")[0]
    if stream.capture is not None and arrays and getattr(base, "__name__", "") in _SCRATCH_CALLS \
            and package in ("numpy", "fake_cupy", "fake_cupy_vendor", ""):
        size = 3 * arrays[0].nbytes if "sort" in base.__name__ else 0   # (keys, values, spare)
        scratch = _allocate((max(_ROUND, size),), np.uint8, stream)
        return [scratch._mem]   # (the caller drops it once the call is recorded)
    return []


class Graph:
    """A captured CUDA graph: the kernel launches and CuPy operations issued on the stream
    between ``begin_capture`` and ``end_capture``, replayed in order on :meth:`launch` over the
    same device memory (the captured pointers). Nothing runs at capture on a GPU: here each
    step runs when issued (so that the shapes and the refusals are CuPy's), and
    ``end_capture`` puts back the bytes of every block from before the capture that a step
    wrote (:meth:`restore`) and poisons the capture's own allocations (0xFF), so that memory is
    as the capture found it; an operation is recorded when it writes memory (a result it
    allocates, from the pool or from memory an allocator already holds, or an operand written
    in place), a view is not. A replay that would touch a
    block freed since the capture, or one of the capture's own allocations freed and reused,
    raises :class:`UseAfterFreeError` (a block from outside the capture, freed and handed to
    another array at the same address, is read as a GPU reads it: in place)."""

    def __init__(self, stream: "Stream | None" = None):
        self.stream = stream       # the capturing stream
        self.steps: list = []      # (run, [(block, generation)])
        self.allocated: list = []  # blocks allocated while capturing
        self.saved: dict = {}      # id(block) -> (block, its bytes before the capture wrote it)
        self.producers: dict = {}  # id(block) -> (block, (writer, ticket) before the capture)
        self.invalidated = ""      # the call that invalidated the capture, if one did
        self.launches = 0

    @staticmethod
    def snapshot(arrays) -> list:
        """The blocks of ``arrays`` (device arrays, ``_Memory``s or pool blocks), each with a
        copy of its bytes now."""
        blocks = {}
        for a in arrays:
            block = getattr(getattr(a, "_mem", a), "block", a)
            blocks[id(block)] = block
        return [(block, block.buf.copy()) for block in blocks.values()]

    @staticmethod
    def changed(snapshot: list) -> bool:
        """Whether any block of a :meth:`snapshot` was written since."""
        return any(not np.array_equal(block.buf, before) for block, before in snapshot)

    def save(self, arrays=(), snapshot=None) -> None:
        """Keeps the bytes of the blocks a captured step writes (``arrays``, before it runs;
        or those of a :meth:`snapshot` taken before it ran that it changed) as they were
        before the capture's first step on them, for :meth:`restore`."""
        for block, before in snapshot if snapshot is not None else \
                ((getattr(getattr(a, "_mem", a), "block", a), None) for a in arrays):
            # (only what the step changed: a block it merely read may be written meanwhile
            # by work outside the capture, which restoring it would undo)
            written = before is None or not np.array_equal(block.buf, before)
            if written and id(block) not in self.saved:
                self.saved[id(block)] = (block, block.buf.copy() if before is None else before)

    def restore(self) -> None:
        """Undoes what the capture ran, as a GPU runs nothing while capturing: every block a
        captured step touched gets back its bytes from before the capture, and the capture's
        own allocations hold garbage (0xFF)."""
        mine = {id(b) for b in self.allocated}
        for key, (block, before) in self.saved.items():
            if key not in mine and block.live:
                block.buf[...] = before
        for key, (block, producer) in self.producers.items():
            if key not in mine:   # (nothing was enqueued: the last producer is as it was)
                block.writer, block.ticket = producer
        for block in self.allocated:
            block.buf.fill(0xFF)
        self.saved.clear()
        self.producers.clear()

    def record(self, run, arrays) -> None:
        blocks = {id(a._mem.block): a._mem.block for a in arrays}
        self.steps.append((run, [(b, b.generation) for b in blocks.values()]))

    def record_operation(self, fn, host_args, host_kwargs, out, operands: set, arrays) -> None:
        def run():
            with np.errstate(all="ignore"):
                _refill(fn(*host_args, **host_kwargs), out, operands)
        self.record(run, arrays)

    def launch(self, stream=None):
        stream = stream or get_current_stream()
        _refuse_in_capture(stream, "a graph launch")
        with _outside_captures([b for _, blocks in self.steps for b, _ in blocks], stream):
            self._run(stream)
        self.launches += 1
        COUNTS["graph_launches"] = COUNTS.get("graph_launches", 0) + 1

    def _run(self, stream) -> None:
        """:meth:`launch`'s checks and steps (on memory as ``stream`` sees it)."""
        mine = {id(b) for b in self.allocated}
        for _, blocks in self.steps:
            for block, generation in blocks:
                # a block the capture allocated must be the very allocation it recorded (freed
                # and handed to another array, a replay would write that array); memory from
                # outside the capture (the caller's inputs, read in place) only has to be
                # allocated now: a GPU reads whatever lives at the captured address
                if not block.live or (id(block) in mine and block.generation != generation):
                    raise UseAfterFreeError(
                        f"a CUDA graph replay uses a {block.buf.nbytes}-byte block that was "
                        "freed after the capture (the captured pointer is stale): the graph's "
                        "buffers must live as long as the graph")
                if _pending(block.writer, block.ticket, stream):
                    raise StreamOrderError(f"a CUDA graph launched on {stream!r} reads memory "
                                           f"whose producer on {block.writer!r} is pending")
        ticket = stream._next()
        for run, blocks in self.steps:
            run()
            for block, _ in blocks:
                block.readers[stream] = ticket
                block.writer, block.ticket = stream, ticket


# ---------------------------------------------------------------- replays made wrong on purpose

#: the faults armed by :class:`replay_fault`: ``(kind, part of a step's name)``
REPLAY_FAULTS: list = []
#: how many captured steps a fault was injected into so far (never reset)
FAULTS_INJECTED = [0]
#: what each kind of fault stands for (see :class:`replay_fault`)
FAULT_KINDS = {
    "baked": "a host value read at capture: the step's operands as the device held them then",
    "uncleared": "scratch a launch leaves dirty: launches after the first combine into it",
    "freed-workspace": "a library workspace freed after the capture, read back by each launch",
}


class replay_fault:
    """Context manager: every capture ended inside the block makes each step whose name
    (:func:`step_name`) contains ``step`` replay wrongly in one of the ways a capture that
    *succeeds* can still be wrong on a GPU, silently (no error, wrong numbers):

    * ``"baked"``: the step reads a value on the host while the stream captures (a host scalar
      passed by value, a library's host-side copy): nothing has run at capture on a GPU, so
      every replay computes with its operands as they were then -- the 0xFF garbage of the
      capture's own allocations, the capture-time contents of the others;
    * ``"uncleared"``: the step relies on scratch that its first launch leaves dirty (a flag,
      a counter, an accumulator cleared outside the graph): each later launch XORs its result
      with the previous launch's (equal inputs: zeros);
    * ``"freed-workspace"``: the library allocated a work area while capturing, outside the
      capturer's allocator, and freed it when the capture ended (it goes back to the pool and
      to the next allocation of its size); every replay reads its result back out of it.

    ``written``: the index, among the blocks the step touches (in the order of its arguments),
    of the one it writes: by default the last, as the library stand-ins pass them (``A``,
    ``B``, then ``C``); a generated kernel's output is where its launch passes it.

    Example:
      >>> with fake_cupy.replay_fault("baked", "gemm"):   # doctest: +SKIP
      ...     f(x)   # its capture's cuBLAS call replays with garbage operands
    """

    def __init__(self, kind: str, step: str, written: int = -1):
        if kind not in FAULT_KINDS:
            raise ValueError(f"replay_fault: kind must be one of {sorted(FAULT_KINDS)}, got {kind!r}")
        self.fault = (kind, step, written)

    def __enter__(self):
        REPLAY_FAULTS.append(self.fault)
        return self

    def __exit__(self, *exc):
        REPLAY_FAULTS.remove(self.fault)
        return False


def step_name(run) -> str:
    """What a captured step runs: a library routine's name (``gemmStridedBatchedEx``,
    ``potrf``, ``cufftExec``... :func:`fake_cupy_linalg.launch`), a generated kernel's name, or
    the function of a CuPy operation."""
    code = getattr(run, "__code__", None)
    cells = {}
    for name, cell in zip(code.co_freevars if code else (), run.__closure__ or ()):
        try:
            cells[name] = cell.cell_contents
        except ValueError:   # (an empty cell)
            pass
    if isinstance(cells.get("name"), str):
        return cells["name"]
    if isinstance(cells.get("self"), _Function):
        return cells["self"].name
    return getattr(cells.get("fn"), "__name__", "?")


def _inject_faults(graph: "Graph", stream: "Stream") -> None:
    """Makes the steps the armed faults name replay wrongly (see :class:`replay_fault`)."""
    for kind, part, written in REPLAY_FAULTS:
        for k, (run, blocks) in enumerate(graph.steps):
            if part in step_name(run):
                graph.steps[k] = (_faulty(kind, run, blocks, written, graph, stream), blocks)
                FAULTS_INJECTED[0] += 1


def _faulty(kind: str, run, blocks: list, written: int, graph: "Graph", stream: "Stream"):
    """``run`` made wrong in the way ``kind`` names; ``blocks[written]`` is the block the step
    writes, the others its operands."""
    blocks = [b for b, _ in blocks]   # (a step's blocks come with their generations)
    out = blocks[written]
    if kind == "baked":
        mine = {id(b) for b in graph.allocated}
        then = [(b, np.full_like(b.buf, 0xFF) if id(b) in mine else b.buf.copy())
                for b in blocks if b is not out]

        def baked():
            now = [b.buf.copy() for b, _ in then]
            for b, value in then:
                b.buf[...] = value
            try:
                run()
            finally:
                for (b, _), value in zip(then, now):
                    b.buf[...] = value
        return baked
    if kind == "uncleared":
        launches = [0]

        def uncleared():
            before = out.buf.copy()
            run()
            if launches[0]:
                out.buf[...] ^= before
            launches[0] += 1
        return uncleared
    workspace = _POOL.malloc(out.buf.nbytes, stream).block   # (its _Memory dies now: freed)

    def freed_workspace():
        run()
        out.buf[...] = workspace.buf[:out.buf.nbytes]
    return freed_workspace


def _refill(result, out, operands: set) -> None:
    """Writes a replayed operation's ``result`` into the arrays its capture allocated."""
    if isinstance(out, ndarray):
        if id(out._mem) not in operands:
            np.copyto(out._a, np.asarray(result), casting="unsafe")
    elif isinstance(out, (list, tuple)):
        for r, o in zip(result, out):
            _refill(r, o, operands)


class using_allocator:
    """``cupy.cuda.using_allocator(fn)``: this thread's allocations call ``fn(nbytes)`` (which
    returns memory of the pool) inside the block."""

    def __init__(self, allocator=None):
        self.allocator = allocator

    def __enter__(self):
        self.saved = getattr(_tls, "allocator", None)
        _tls.allocator = self.allocator
        return self

    def __exit__(self, *exc):
        _tls.allocator = self.saved
        return False


# ---------------------------------------------------------------- cuBLAS (the library itself)

#: a host library standing in for ``libcublas``: the entry points plax calls directly
#: (``plax_cupy.cublas_direct``), each handing its arguments to :func:`_gemm` here. CuPy's own
#: cuBLAS binding (``cupy.cuda.cublas``) is not simulated: where plax would use it, it falls back
#: to ``cupy.matmul``, which refuses a capturing stream as CuPy's binding does.
_CUBLAS_SOURCE = r"""
typedef int (*plax_sim_gemm_t)(void*, void*, int, int, int, int, int, const void*, const void*,
                               int, int, long long, const void*, int, int, long long,
                               const void*, void*, int, int, long long, int, int, int);
static plax_sim_gemm_t gemm = 0;
static void* current_stream = 0;
static int pointer_mode = 0;
extern "C" {
void plax_sim_set_gemm(plax_sim_gemm_t fn) { gemm = fn; }
int cublasSetStream_v2(void* handle, void* stream) { current_stream = stream; return 0; }
int cublasGetPointerMode_v2(void* handle, int* mode) { *mode = pointer_mode; return 0; }
int cublasSetPointerMode_v2(void* handle, int mode) { pointer_mode = mode; return 0; }
int cublasSetWorkspace_v2(void* handle, void* workspace, unsigned long nbytes) { return 0; }
int cublasGemmStridedBatchedEx(void* handle, int ta, int tb, int m, int n, int k,
    const void* alpha, const void* A, int at, int lda, long long sa, const void* B, int bt,
    int ldb, long long sb, const void* beta, void* C, int ct, int ldc, long long sc, int batch,
    int compute, int algo) {
  if (!gemm || pointer_mode != 0) return 7;  /* CUBLAS_STATUS_INVALID_VALUE */
  return gemm(handle, current_stream, ta, tb, m, n, k, alpha, A, at, lda, sa, B, bt, ldb, sb,
              beta, C, ct, ldc, sc, batch, compute, algo);
}
}
"""
_GEMM_T = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, *[ctypes.c_int] * 5, ctypes.c_void_p,
    ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p,
    ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_void_p,
    ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_int, ctypes.c_int, ctypes.c_int)
#: cudaDataType_t -> dtype, and the compute types each takes (its own, as CuPy's matmul
#: passes it, or CUBLAS_COMPUTE_32F / _64F)
_CUBLAS_TYPES = {0: (np.float32, (0, 68)), 1: (np.float64, (1, 70)),
                 4: (np.complex64, (4, 68)), 5: (np.complex128, (5, 70))}
#: errors raised inside the simulated library (it returns CUBLAS_STATUS_INTERNAL_ERROR)
CUBLAS_ERRORS: list = []
_cublas: list = []   # [the loaded library, the callback kept alive]


def get_cublas_handle() -> int:
    """``cupy.cuda.device.get_cublas_handle()``: loads the simulated ``libcublas`` (as CuPy
    loads the real one) and returns a handle."""
    if not _cublas:
        lib = fake_cupy_linalg.build(_CUBLAS_SOURCE + fake_cupy_linalg.CUBLAS_SOURCE,
                                     "libcublas.so.13")
        fake_cupy_linalg.attach(lib)   # (the triangular solves)
        callback = _GEMM_T(_gemm_entry)
        lib.plax_sim_set_gemm.argtypes = [_GEMM_T]
        lib.plax_sim_set_gemm(callback)
        _cublas[:] = [lib, callback]
    return 0x5EB1A5


def _block_at(address: int, nbytes: int):
    """The pool block holding ``nbytes`` from device address ``address``, and the offset."""
    for start, block in list(_BLOCKS.items()):
        if start <= address and address + nbytes <= start + block.buf.nbytes:
            return block, address - start
    raise ValueError(f"cuBLAS was given {address:#x}, which no live allocation holds")


def _gemm_entry(*args) -> int:
    try:
        return _gemm(*args)
    except Exception as err:  # noqa: BLE001 - a C caller: the error is kept, a status returned
        CUBLAS_ERRORS.append(err)
        return 14


def _gemm(handle, stream_ptr, ta, tb, m, n, k, alpha, a, at, lda, sa, b, bt, ldb, sb, beta, c,
          ct, ldc, sc, batch, compute, algo) -> int:
    """``cublasGemmStridedBatchedEx`` (no transposes, column-major) on the pool's blocks, on the
    stream last set: checked, ordered and recorded into a capture as a kernel is."""
    if ta or tb or not (at == bt == ct) or at not in _CUBLAS_TYPES \
            or compute not in _CUBLAS_TYPES[at][1]:
        return 15   # CUBLAS_STATUS_NOT_SUPPORTED
    dt = np.dtype(_CUBLAS_TYPES[at][0])
    it = dt.itemsize
    stream = next((s for s in list(_STREAMS) if s.ptr == (stream_ptr or 0)), Stream.null)
    scale = [np.frombuffer(ctypes.string_at(p, it), dt)[0] for p in (alpha, beta)]

    def view(pointer, shape, strides):
        span = (sum((d - 1) * s for d, s in zip(shape, strides)) + 1) * it
        block, offset = _block_at(pointer, span)
        return block, np.ndarray(shape, dt, buffer=block.buf, offset=offset,
                                 strides=tuple(s * it for s in strides))

    # column-major C' = A' B' is row-major C'^T = B'^T A'^T, each transpose a row-major view
    block_a, rows_a = view(a, (batch, k, m), (sa, lda, 1))
    block_b, rows_b = view(b, (batch, n, k), (sb, ldb, 1))
    block_c, rows_c = view(c, (batch, n, m), (sc, ldc, 1))

    def run():
        with np.errstate(all="ignore"):
            product = np.matmul(rows_b, rows_a)
            if scale[0] != 1:
                product = product * scale[0]
            rows_c[...] = product if scale[1] == 0 else product + scale[1] * rows_c

    fake_cupy_linalg.launch("gemmStridedBatchedEx", stream, [block_a, block_b, block_c], run)
    return 0
