"""cuBLAS calls that a CUDA stream capture can record: the few entry points plax uses, called
through ``ctypes`` on the very ``libcublas`` CuPy loaded, with CuPy's handle.

CuPy's own binding (``cupy.cuda.cublas``, ``cupy_backends/cuda/libs/cublas.pyx``) refuses a
capturing stream: every routine first calls its ``setStream``, which raises
``NotImplementedError("calling cuBLAS API during stream capture is currently unsupported")``
when ``cudaStreamIsCapturing`` says so -- whatever cuBLAS itself allows. cuBLAS does allow it
(its "CUDA Graphs support": a routine is captured like a kernel; with
``CUBLAS_POINTER_MODE_HOST`` the scalars ``alpha``/``beta`` are captured by value; from CUDA
12.2 its workspace comes from ``cudaMallocAsync`` during a capture). So every matrix product
of a program captured as a CUDA graph (:mod:`plax_cupy.graphs`) goes through this binding
while the stream captures, with the arguments CuPy's binding would have passed (the same
call, the same bits), and through CuPy's otherwise; so is every triangular solve
(``trsm``/``trsmBatched``, :mod:`plax_cupy.kernels_linalg`), with the arguments
``cupyx.scipy.linalg.solve_triangular`` passes.

The library is the one already mapped into the process (``/proc/self/maps``, else ``dlopen``
with ``RTLD_NOLOAD`` of its sonames): never a second copy, whose handles would not be CuPy's.
"""
from __future__ import annotations

import ctypes
import os
import threading

import numpy as np

#: cublasStatus_t names (cublas_api.h)
STATUS_NAMES = {0: "CUBLAS_STATUS_SUCCESS", 1: "CUBLAS_STATUS_NOT_INITIALIZED",
                3: "CUBLAS_STATUS_ALLOC_FAILED", 7: "CUBLAS_STATUS_INVALID_VALUE",
                8: "CUBLAS_STATUS_ARCH_MISMATCH", 11: "CUBLAS_STATUS_MAPPING_ERROR",
                13: "CUBLAS_STATUS_EXECUTION_FAILED", 14: "CUBLAS_STATUS_INTERNAL_ERROR",
                15: "CUBLAS_STATUS_NOT_SUPPORTED", 16: "CUBLAS_STATUS_LICENSE_ERROR"}
#: the sonames tried with RTLD_NOLOAD where /proc/self/maps cannot be read
SONAMES = ("libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so")

_c_int, _c_ll, _c_void_p = ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p

# the cuBLAS enumerations the solves pass (cublas_api.h; CuPy's ``cupy.cuda.cublas`` names)
CUBLAS_SIDE_LEFT = 0
CUBLAS_FILL_MODE_LOWER, CUBLAS_FILL_MODE_UPPER = 0, 1
CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_OP_C = 0, 1, 2
CUBLAS_DIAG_NON_UNIT, CUBLAS_DIAG_UNIT = 0, 1
CUBLAS_POINTER_MODE_HOST = 0
#: dtype name -> the BLAS letter of its routines (``cublasStrsm_v2``, ``cusolverDnDpotrf``)
LETTERS = {"float32": "S", "float64": "D", "complex64": "C", "complex128": "Z"}
#: cublas<t>trsm_v2(handle, side, uplo, trans, diag, m, n, alpha, A, lda, B, ldb); the
#: batched form takes device arrays of matrix pointers for A and B, then batchCount
_TRSM_ARGTYPES = [_c_void_p, _c_int, _c_int, _c_int, _c_int, _c_int, _c_int, _c_void_p,
                  _c_void_p, _c_int, _c_void_p, _c_int]
_TRSM_BATCHED_ARGTYPES = _TRSM_ARGTYPES + [_c_int]
#: cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA,
#: B, Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount, computeType, algo)
_GEMM_ARGTYPES = [_c_void_p, _c_int, _c_int, _c_int, _c_int, _c_int, _c_void_p,
                  _c_void_p, _c_int, _c_int, _c_ll, _c_void_p, _c_int, _c_int, _c_ll,
                  _c_void_p, _c_void_p, _c_int, _c_int, _c_ll, _c_int, _c_int, _c_int]


class CUBLASError(RuntimeError):
    """A cuBLAS status other than success (named as CuPy's ``CUBLASError``, which
    :mod:`plax_cupy.kernels_dot` catches by name)."""

    def __init__(self, status: int, call: str):
        self.status = status
        super().__init__(f"{call}: {STATUS_NAMES.get(status, f'cuBLAS status {status}')}")


def letter(dtype) -> str:
    """The BLAS letter of ``dtype``'s routines (``S``, ``D``, ``C``, ``Z``).

    Raises:
      KeyError: a dtype the libraries have no routines for.

    Example:
      >>> letter(np.complex64)
      'C'
    """
    return LETTERS[np.dtype(dtype).name]


def bind_function(library, names, argtypes):
    """The first of ``names`` that ``library`` (a ``ctypes.CDLL``) has, with ``argtypes`` and
    an ``int`` (status) result, its name in ``plax_name``.

    Raises:
      AttributeError: the library has none of them.

    Example:
      >>> bind_function(lib, ("cublasSetStream_v2",), [ctypes.c_void_p] * 2)   # doctest: +SKIP
    """
    for name in names:
        fn = getattr(library, name, None)
        if fn is not None:
            fn.argtypes, fn.restype = argtypes, _c_int
            fn.plax_name = name
            return fn
    raise AttributeError(f"{getattr(library, '_name', 'the library')} has none of "
                         f"{', '.join(names)}")


class TypedRoutines:
    """A library's routines that come in one C function per dtype (``cublas<t>trsm_v2``,
    ``cusolverDn<t>potrf``), bound on first use: a subclass sets ``library`` and
    ``ROUTINES``, ``routine -> (C names with {t} for the dtype's letter, argtypes)``."""

    ROUTINES: dict = {}

    def has(self, routine: str, dtype) -> bool:
        """Whether the library has ``routine`` (a key of ``ROUTINES``) for ``dtype``
        (float32/float64/complex64/complex128).

        Example:
          >>> binding().has("trsmBatched", np.float32)                   # doctest: +SKIP
          True
        """
        try:
            self._routine(routine, dtype)
        except (AttributeError, KeyError, TypeError):
            return False
        return True

    def _routine(self, routine: str, dtype):
        bound = self.__dict__.setdefault("_bound", {})   # (routine, letter) -> C function
        t = letter(dtype)
        fn = bound.get((routine, t))
        if fn is None:
            names, argtypes = self.ROUTINES[routine]
            fn = bound[(routine, t)] = bind_function(
                self.library, tuple(name.format(t=t) for name in names), argtypes)
        return fn


class DirectCublas(TypedRoutines):
    """The cuBLAS routines plax calls, with the signatures of CuPy's binding
    (``cupy.cuda.cublas``), on the library ``library`` (a ``ctypes.CDLL``).

    Args:
      library: the loaded ``libcublas`` (or an object with the same C functions).

    Example:
      >>> lib = binding()                                    # doctest: +SKIP
      >>> lib.setStream(handle, stream.ptr); lib.gemmStridedBatchedEx(*arguments)
    """

    ROUTINES = {"trsm": (("cublas{t}trsm_v2", "cublas{t}trsm"), _TRSM_ARGTYPES),
                "trsmBatched": (("cublas{t}trsmBatched",), _TRSM_BATCHED_ARGTYPES)}

    def __init__(self, library):
        self.library = library
        self._set_stream = self._function(("cublasSetStream_v2", "cublasSetStream"),
                                          [_c_void_p, _c_void_p])
        self._get_mode = self._function(("cublasGetPointerMode_v2", "cublasGetPointerMode"),
                                        [_c_void_p, ctypes.POINTER(_c_int)])
        self._set_mode = self._function(("cublasSetPointerMode_v2", "cublasSetPointerMode"),
                                        [_c_void_p, _c_int])
        self._gemm = self._function(("cublasGemmStridedBatchedEx",), _GEMM_ARGTYPES)
        try:
            self._set_workspace = self._function(("cublasSetWorkspace_v2", "cublasSetWorkspace"),
                                                 [_c_void_p, _c_void_p, ctypes.c_size_t])
        except AttributeError:   # (before cuBLAS 11.4: its own workspace only)
            self._set_workspace = None

    def _function(self, names, argtypes):
        return bind_function(self.library, names, argtypes)

    @staticmethod
    def _check(fn, status: int) -> None:
        if status != 0:
            raise CUBLASError(status, getattr(fn, "plax_name", "cuBLAS"))

    def setStream(self, handle: int, stream: int) -> None:  # noqa: N802 - CuPy's names
        """``cublasSetStream`` (not refused while ``stream`` captures)."""
        self._check(self._set_stream, self._set_stream(handle, stream))

    def getPointerMode(self, handle: int) -> int:  # noqa: N802
        """``cublasGetPointerMode``."""
        mode = _c_int(0)
        self._check(self._get_mode, self._get_mode(handle, ctypes.byref(mode)))
        return mode.value

    def setPointerMode(self, handle: int, mode: int) -> None:  # noqa: N802
        """``cublasSetPointerMode``."""
        self._check(self._set_mode, self._set_mode(handle, mode))

    def setWorkspace(self, handle: int, pointer: int, nbytes: int) -> None:  # noqa: N802
        """``cublasSetWorkspace`` (a no-op where the library lacks it). ``setStream`` resets
        the workspace to cuBLAS's own, so this comes after it."""
        if self._set_workspace is not None:
            self._check(self._set_workspace, self._set_workspace(handle, pointer, nbytes))

    def gemmStridedBatchedEx(self, *arguments) -> None:  # noqa: N802
        """``cublasGemmStridedBatchedEx`` with CuPy's argument order (see
        :func:`plax_cupy.kernels_dot.gemm_arguments`), on the handle's stream."""
        self._check(self._gemm, self._gemm(*arguments))

    def trsm(self, dtype, handle: int, side: int, uplo: int, trans: int, diag: int, m: int,
             n: int, alpha: int, a: int, lda: int, b: int, ldb: int) -> None:
        """``cublas<t>trsm_v2`` for ``dtype`` (the letter from it; CuPy's ``strsm``... take
        the same arguments): ``B := alpha op(A)^-1 B`` in place, column-major, on the handle's
        stream; ``alpha`` a host pointer (``CUBLAS_POINTER_MODE_HOST``)."""
        fn = self._routine("trsm", dtype)
        self._check(fn, fn(handle, side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb))

    def trsmBatched(self, dtype, handle: int, side: int, uplo: int, trans: int,  # noqa: N802
                    diag: int, m: int, n: int, alpha: int, a_array: int, lda: int,
                    b_array: int, ldb: int, batch: int) -> None:
        """``cublas<t>trsmBatched``: :meth:`trsm` on ``batch`` matrices, ``a_array`` and
        ``b_array`` device arrays of their pointers."""
        fn = self._routine("trsmBatched", dtype)
        self._check(fn, fn(handle, side, uplo, trans, diag, m, n, alpha, a_array, lda, b_array,
                           ldb, batch))


def loaded_library(maps: str = "/proc/self/maps", prefix: str = "libcublas.so",
                   sonames: tuple = SONAMES):
    """The library named ``prefix...`` (``libcublas`` by default) already loaded in this
    process as a ``ctypes.CDLL``, or ``None``.

    Args:
      maps: the process's memory map (Linux).
      prefix: the start of the library's file name.
      sonames: the names tried with ``RTLD_NOLOAD`` where ``maps`` cannot be read.

    Returns:
      The library (``dlopen`` of the mapped file hands back the loaded copy), or ``None``.

    Example:
      >>> loaded_library()          # doctest: +SKIP
      <CDLL '/.../nvidia/cu13/lib/libcublas.so.13', handle ... at ...>
    """
    try:
        with open(maps) as f:
            for line in f:
                fields = line.split(None, 5)
                path = fields[5].strip() if len(fields) == 6 else ""
                if os.path.basename(path).startswith(prefix):
                    return ctypes.CDLL(path)
    except OSError:
        pass
    noload = getattr(os, "RTLD_NOLOAD", None)
    if noload is None:
        return None
    for soname in sonames:
        try:
            return ctypes.CDLL(soname, mode=noload)
        except OSError:
            continue
    return None


_binding: list = []
_binding_lock = threading.Lock()
_workspaces: dict = {}   # device id -> the memory of its workspace (kept for good)


def workspace(device_id: int) -> tuple[int, int]:
    """A workspace for cuBLAS calls that a capture records, owned by plax for the life of the
    process: ``(device pointer, bytes)``. Handed to cuBLAS (:meth:`DirectCublas.setWorkspace`)
    so that a captured routine allocates nothing of its own (the graphs' pointers must stay
    valid for as long as they replay); the size is cuBLAS's default workspace's (32 MiB from
    Hopper, 4 MiB before), so the heuristics choose as in a plain call.

    Example:
      >>> pointer, nbytes = workspace(0)      # doctest: +SKIP
    """
    with _binding_lock:
        memory = _workspaces.get(device_id)
        if memory is None:
            import cupy
            major = int(str(cupy.cuda.Device(device_id).compute_capability)[:-1] or 0)
            nbytes = (32 if major >= 9 else 4) << 20
            # (from the pool directly: not an allocation of the capture under way)
            memory = _workspaces[device_id] = (cupy.get_default_memory_pool().malloc(nbytes),
                                               nbytes)
        return memory[0].ptr, memory[1]


def call_with_host_scalars(lib, handle: int, stream: int, routine, *arguments) -> None:
    """``routine(*arguments)``, a cuBLAS routine taking its scalars from the host, on CuPy's
    ``handle`` set up for it: the ``stream`` (a pointer), plax's :func:`workspace` where
    ``lib`` is a :class:`DirectCublas` (the binding a capture calls), ``CUBLAS_POINTER_MODE_HOST``
    (the handle's mode restored after, whatever ``routine`` raises).

    Args:
      lib: CuPy's ``cupy.cuda.cublas`` or a :class:`DirectCublas`.
      routine: a routine of ``lib`` (``lib.gemmStridedBatchedEx``, ``lib.trsm``...).

    Example:
      >>> call_with_host_scalars(lib, handle, stream.ptr, lib.gemmStridedBatchedEx, *arguments)
      ... # doctest: +SKIP
    """
    lib.setStream(handle, stream)
    if isinstance(lib, DirectCublas):
        import cupy
        lib.setWorkspace(handle, *workspace(cupy.cuda.Device().id))
    mode = lib.getPointerMode(handle)
    lib.setPointerMode(handle, CUBLAS_POINTER_MODE_HOST)
    try:
        routine(*arguments)
    finally:
        lib.setPointerMode(handle, mode)


def binding() -> DirectCublas | None:
    """The capturable cuBLAS binding, or ``None`` where there is no cuBLAS (no
    ``cupy.cuda.device.get_cublas_handle``, no library loaded, a missing entry point). Made
    once: CuPy's handle of the current device is created first, which loads the library.

    Example:
      >>> binding() is None or hasattr(binding(), "gemmStridedBatchedEx")   # doctest: +SKIP
      True
    """
    return made_once(_binding, _binding_lock,
                     lambda: load_direct("get_cublas_handle", "libcublas.so", SONAMES,
                                         DirectCublas))


def made_once(cache: list, lock, make):
    """``cache[0]``, made by ``make()`` on the first call (under ``lock``).

    Example:
      >>> made_once([], threading.Lock(), lambda: 42)
      42
    """
    if not cache:
        with lock:
            if not cache:
                cache.append(make())
    return cache[0]


def load_direct(handle_getter: str, prefix: str, sonames: tuple, make):
    """``make(library)`` on the library CuPy loaded for its handle, or ``None`` where there is
    none (no ``cupy.cuda.device.<handle_getter>``, a failing one, no such library mapped, a
    missing entry point).

    Args:
      handle_getter: CuPy's handle function (``"get_cublas_handle"``), called first: CuPy
        loads the library for it.
      prefix, sonames: how the library is found (:func:`loaded_library`).
      make: the binding's class.

    Example:
      >>> load_direct("get_cublas_handle", "libcublas.so", SONAMES, DirectCublas) # doctest: +SKIP
    """
    import cupy
    device = getattr(getattr(cupy, "cuda", None), "device", None)
    if device is None or not hasattr(device, handle_getter):
        return None
    try:
        getattr(device, handle_getter)()
    except Exception:  # noqa: BLE001 - no such library here: its calls are not captured
        return None
    library = loaded_library(prefix=prefix, sonames=sonames)
    if library is None:
        return None
    try:
        return make(library)
    except AttributeError:
        return None


__all__ = ["CUBLASError", "DirectCublas", "TypedRoutines", "bind_function", "binding",
           "call_with_host_scalars", "letter", "load_direct", "loaded_library", "made_once",
           "workspace"]
