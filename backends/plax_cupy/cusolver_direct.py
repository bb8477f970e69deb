"""cuSOLVER calls that a CUDA stream capture can record: the few dense routines plax captures,
called through ``ctypes`` on the very ``libcusolver`` CuPy loaded, with CuPy's handle.

CuPy's binding (``cupy_backends/cuda/libs/cusolver.pyx``) refuses a capturing stream as its
cuBLAS binding does (its ``setStream`` raises ``NotImplementedError`` while the current stream
captures). The routines bound here launch device work only, on the handle's stream, and read
nothing back to the host: ``potrf`` and ``getrf`` (their workspace given by the caller, sized
by ``potrf_bufferSize``/``getrf_bufferSize``, host-only queries) and ``potrfBatched`` (no
workspace); ``devInfo`` is written on the device and left there, as CuPy leaves it under its
default ``cupyx.seterr(linalg="ignore")``. So a compiled program holding ``cholesky`` or
``lu`` is captured (:mod:`plax_cupy.kernels_linalg` calls them, with the arguments
``cupy.linalg.cholesky`` and ``cupyx.scipy.linalg.lu_factor`` pass, while the stream captures;
CuPy's path otherwise); so are ``qr`` (``geqrf``, ``orgqr``/``ungqr``), ``eigh`` and ``svd``.

**Which routines for ``eigh`` and ``svd``.** CuPy 14 runs ``eigh`` of one matrix with the
64-bit generic ``cusolverDnXsyevd``, whose workspace is split between the device and the
*host* (``xsyevd_bufferSize`` returns both sizes; the host part is a NumPy buffer cuSOLVER
works in while the call runs), and a batch with ``syevjBatched`` on a ``syevjInfo_t`` params
object; ``svd`` of one matrix with ``<t>gesvd`` (device workspace only; ``m >= n``, so CuPy
transposes a wide matrix), and a batch with ``gesvdjBatched`` (matrices up to 32 x 32, on a
``gesvdjInfo_t``) or ``gesvd`` matrix by matrix. A capture records device work only: a host
workspace that cuSOLVER fills while the call runs would be read at capture time, not at each
replay. So plax binds the legacy 32-bit ``<t>syevd``/``<t>heevd`` (divide and conquer, as
``Xsyevd``; its workspace, sized by ``<t>syevd_bufferSize``, is a device array) and
``<t>gesvd`` (with ``<t>gesvd_bufferSize``) for one matrix and for batches of larger ones
(matrix by matrix), and ``<t>syevjBatched``/``<t>heevjBatched`` and ``<t>gesvdjBatched``
(with their size queries, which take the params object and the batch size after the size
they write) for a batch of matrices up to 32 x 32: one call, one launch group in a graph.
Their params objects are :class:`JacobiParams` (``cusolverDnCreateSyevjInfo``/``Destroy``,
``cusolverDnCreateGesvdjInfo``/``Destroy``, and the ``cusolverDnX<kind>SetTolerance``/
``SetMaxSweeps`` setters, unused by default: CuPy keeps cuSOLVER's defaults), owned by the
compiled program's solver (:class:`plax_cupy.kernels_linalg.ProgramEigh`, ``ProgramSvd``)
and destroyed with it, so the one its captures use outlives every graph that recorded a call
with it; its plain calls use one per calling thread (a call writes the object: never shared by
two calls in flight, ``_ProgramSolver._params``).

A routine that returns an error status raises :class:`CUSOLVERError` naming the C function;
the program kernels turn one on a plain call into CuPy's path for that program (never the
user's exception), and a capture into its reason in ``as_text()``.

The library is found as :mod:`plax_cupy.cublas_direct` finds ``libcublas``: the copy already
mapped into the process (CuPy's handle is made first, which loads it), never a second one.
"""
from __future__ import annotations

import ctypes
import threading
import weakref

from plax_cupy.cublas_direct import TypedRoutines, bind_function, load_direct, made_once

#: cusolverStatus_t names (cusolver_common.h)
STATUS_NAMES = {0: "CUSOLVER_STATUS_SUCCESS", 1: "CUSOLVER_STATUS_NOT_INITIALIZED",
                2: "CUSOLVER_STATUS_ALLOC_FAILED", 3: "CUSOLVER_STATUS_INVALID_VALUE",
                4: "CUSOLVER_STATUS_ARCH_MISMATCH", 5: "CUSOLVER_STATUS_MAPPING_ERROR",
                6: "CUSOLVER_STATUS_EXECUTION_FAILED", 7: "CUSOLVER_STATUS_INTERNAL_ERROR",
                8: "CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED", 9: "CUSOLVER_STATUS_NOT_SUPPORTED"}
#: the sonames tried with RTLD_NOLOAD where /proc/self/maps cannot be read (CUDA 13, 12, 11)
SONAMES = ("libcusolver.so.12", "libcusolver.so.11", "libcusolver.so")

_c_int, _c_void_p = ctypes.c_int, ctypes.c_void_p
_P_INT = ctypes.POINTER(_c_int)
_LDA = [_c_int, _c_void_p, _c_int]   # (n, A, lda)
#: routine -> (C names, ``{t}`` the dtype's letter; argtypes); each size query
#: (``<routine>_bufferSize``) is added from :data:`_SIZE_QUERIES`
_ROUTINES = {
    # (handle, uplo, n, A, lda, Workspace, Lwork, devInfo)
    "potrf": (("cusolverDn{t}potrf",), [_c_void_p, _c_int] + _LDA + [_c_void_p, _c_int, _c_void_p]),
    # (handle, uplo, n, Aarray, lda, infoArray, batchSize)
    "potrfBatched": (("cusolverDn{t}potrfBatched",),
                     [_c_void_p, _c_int] + _LDA + [_c_void_p, _c_int]),
    # (handle, m, n, A, lda, Workspace, devIpiv, devInfo)
    "getrf": (("cusolverDn{t}getrf",), [_c_void_p, _c_int] + _LDA + [_c_void_p] * 3),
    # (handle, m, n, A, lda, TAU, Workspace, Lwork, devInfo)
    "geqrf": (("cusolverDn{t}geqrf",),
              [_c_void_p, _c_int] + _LDA + [_c_void_p, _c_void_p, _c_int, _c_void_p]),
    # (handle, m, n, k, A, lda, tau, work, lwork, devInfo): orgqr for real types, ungqr for
    # complex
    "orgqr": (("cusolverDn{t}orgqr", "cusolverDn{t}ungqr"),
              [_c_void_p, _c_int, _c_int] + _LDA + [_c_void_p, _c_void_p, _c_int, _c_void_p]),
    # (handle, jobz, uplo, n, A, lda, W, work, lwork, devInfo): syevd for real types, heevd
    # for complex
    "syevd": (("cusolverDn{t}syevd", "cusolverDn{t}heevd"),
              [_c_void_p, _c_int, _c_int] + _LDA + [_c_void_p, _c_void_p, _c_int, _c_void_p]),
    # (handle, signed char jobu, signed char jobvt, m, n, A, lda, S, U, ldu, VT, ldvt, work,
    #  lwork, rwork, devInfo)
    "gesvd": (("cusolverDn{t}gesvd",),
              [_c_void_p, ctypes.c_byte, ctypes.c_byte, _c_int] + _LDA
              + [_c_void_p, _c_void_p, _c_int, _c_void_p, _c_int, _c_void_p, _c_int, _c_void_p,
                 _c_void_p]),
    # (handle, jobz, uplo, n, A, lda, W, work, lwork, info, params, batchSize): heevj for
    # complex
    "syevjBatched": (("cusolverDn{t}syevjBatched", "cusolverDn{t}heevjBatched"),
                     [_c_void_p, _c_int, _c_int] + _LDA
                     + [_c_void_p, _c_void_p, _c_int, _c_void_p, _c_void_p, _c_int]),
    # (handle, jobz, m, n, A, lda, S, U, ldu, V, ldv, work, lwork, info, params, batchSize)
    "gesvdjBatched": (("cusolverDn{t}gesvdjBatched",),
                      [_c_void_p, _c_int, _c_int] + _LDA
                      + [_c_void_p, _c_void_p, _c_int, _c_void_p, _c_int, _c_void_p, _c_int,
                         _c_void_p, _c_void_p, _c_int]),
    # the Jacobi routines' params objects (one C function for every dtype: no ``{t}``)
    "createSyevjInfo": (("cusolverDnCreateSyevjInfo",), [ctypes.POINTER(_c_void_p)]),
    "destroySyevjInfo": (("cusolverDnDestroySyevjInfo",), [_c_void_p]),
    "xsyevjSetTolerance": (("cusolverDnXsyevjSetTolerance",), [_c_void_p, ctypes.c_double]),
    "xsyevjSetMaxSweeps": (("cusolverDnXsyevjSetMaxSweeps",), [_c_void_p, _c_int]),
    "createGesvdjInfo": (("cusolverDnCreateGesvdjInfo",), [ctypes.POINTER(_c_void_p)]),
    "destroyGesvdjInfo": (("cusolverDnDestroyGesvdjInfo",), [_c_void_p]),
    "xgesvdjSetTolerance": (("cusolverDnXgesvdjSetTolerance",), [_c_void_p, ctypes.c_double]),
    "xgesvdjSetMaxSweeps": (("cusolverDnXgesvdjSetMaxSweeps",), [_c_void_p, _c_int]),
}
#: routine -> (the arguments of its size query before the ``int* Lwork`` it writes, those
#: after it); the query's C names are the routine's with ``_bufferSize``
_SIZE_QUERIES = {
    "potrf": ([_c_void_p, _c_int] + _LDA, []),                   # (handle, uplo, n, A, lda)
    "getrf": ([_c_void_p, _c_int] + _LDA, []),                   # (handle, m, n, A, lda)
    "geqrf": ([_c_void_p, _c_int] + _LDA, []),                   # (handle, m, n, A, lda)
    "orgqr": ([_c_void_p, _c_int, _c_int] + _LDA + [_c_void_p], []),  # (h, m, n, k, A, lda, tau)
    # (handle, jobz, uplo, n, A, lda, W)
    "syevd": ([_c_void_p, _c_int, _c_int] + _LDA + [_c_void_p], []),
    "gesvd": ([_c_void_p, _c_int, _c_int], []),                  # (handle, m, n)
    # (handle, jobz, uplo, n, A, lda, W; params, batchSize)
    "syevjBatched": ([_c_void_p, _c_int, _c_int] + _LDA + [_c_void_p], [_c_void_p, _c_int]),
    # (handle, jobz, m, n, A, lda, S, U, ldu, V, ldv; params, batchSize)
    "gesvdjBatched": ([_c_void_p, _c_int, _c_int] + _LDA + [_c_void_p, _c_void_p, _c_int,
                                                            _c_void_p, _c_int],
                      [_c_void_p, _c_int]),
}
_ROUTINES.update({
    f"{routine}_bufferSize": (tuple(f"{name}_bufferSize" for name in _ROUTINES[routine][0]),
                              before + [_P_INT] + after)
    for routine, (before, after) in _SIZE_QUERIES.items()})
#: the Jacobi kinds: kind -> (its batched routine, creator, destroyer, tolerance and sweeps
#: setters)
JACOBI = {"syevj": ("syevjBatched", "createSyevjInfo", "destroySyevjInfo",
                    "xsyevjSetTolerance", "xsyevjSetMaxSweeps"),
          "gesvdj": ("gesvdjBatched", "createGesvdjInfo", "destroyGesvdjInfo",
                     "xgesvdjSetTolerance", "xgesvdjSetMaxSweeps")}
#: cusolverEigMode_t (cusolver_common.h)
CUSOLVER_EIG_MODE_NOVECTOR, CUSOLVER_EIG_MODE_VECTOR = 0, 1


class CUSOLVERError(RuntimeError):
    """A cuSOLVER status other than success (named as CuPy's ``CUSOLVERError``)."""

    def __init__(self, status: int, call: str):
        self.status = status
        super().__init__(f"{call}: {STATUS_NAMES.get(status, f'cuSOLVER status {status}')}")


class DirectCusolver(TypedRoutines):
    """The cuSOLVER routines plax captures, with the arguments of CuPy's binding
    (``cupy_backends.cuda.libs.cusolver``) after the dtype, on ``library``.

    Args:
      library: the loaded ``libcusolver`` (or an object with the same C functions).

    Example:
      >>> lib = binding()                                              # doctest: +SKIP
      >>> lib.setStream(handle, stream.ptr)
      >>> lwork = lib.potrf_bufferSize(np.float32, handle, 1, n, a.data.ptr, n)
    """

    ROUTINES = _ROUTINES

    def __init__(self, library):
        self.library = library
        self._set_stream = bind_function(library, ("cusolverDnSetStream",),
                                         [_c_void_p, _c_void_p])

    def _call(self, routine: str, dtype, *arguments) -> None:
        fn = self._routine(routine, dtype)
        status = fn(*arguments)
        if status != 0:
            raise CUSOLVERError(status, fn.plax_name)

    def _size(self, routine: str, dtype, *arguments, after: tuple = ()) -> int:
        lwork = _c_int(0)   # (a size query: the int it writes comes after ``arguments``)
        self._call(routine, dtype, *arguments, ctypes.byref(lwork), *after)
        return lwork.value

    def setStream(self, handle: int, stream: int) -> None:  # noqa: N802 - CuPy's names
        """``cusolverDnSetStream`` (not refused while ``stream`` captures)."""
        status = self._set_stream(handle, stream)
        if status != 0:
            raise CUSOLVERError(status, "cusolverDnSetStream")

    def potrf_bufferSize(self, dtype, handle: int, uplo: int, n: int, a: int,  # noqa: N802
                         lda: int) -> int:
        """``cusolverDn<t>potrf_bufferSize``: the workspace ``potrf`` needs, in elements."""
        return self._size("potrf_bufferSize", dtype, handle, uplo, n, a, lda)

    def potrf(self, dtype, handle: int, uplo: int, n: int, a: int, lda: int, workspace: int,
              lwork: int, dev_info: int) -> None:
        """``cusolverDn<t>potrf``: the Cholesky factor of column-major ``a`` in place (the
        ``uplo`` triangle), ``devInfo`` written on the device."""
        self._call("potrf", dtype, handle, uplo, n, a, lda, workspace, lwork, dev_info)

    def potrfBatched(self, dtype, handle: int, uplo: int, n: int, a_array: int,  # noqa: N802
                     lda: int, info_array: int, batch: int) -> None:
        """``cusolverDn<t>potrfBatched``: :meth:`potrf` of ``batch`` matrices, ``a_array`` a
        device array of their pointers (no workspace)."""
        self._call("potrfBatched", dtype, handle, uplo, n, a_array, lda, info_array, batch)

    def getrf_bufferSize(self, dtype, handle: int, m: int, n: int, a: int,  # noqa: N802
                         lda: int) -> int:
        """``cusolverDn<t>getrf_bufferSize``: the workspace ``getrf`` needs, in elements."""
        return self._size("getrf_bufferSize", dtype, handle, m, n, a, lda)

    def getrf(self, dtype, handle: int, m: int, n: int, a: int, lda: int, workspace: int,
              pivots: int, dev_info: int) -> None:
        """``cusolverDn<t>getrf``: LU with partial pivoting of column-major ``a`` in place,
        1-based pivots and ``devInfo`` written on the device."""
        self._call("getrf", dtype, handle, m, n, a, lda, workspace, pivots, dev_info)

    def geqrf_bufferSize(self, dtype, handle: int, m: int, n: int, a: int,  # noqa: N802
                         lda: int) -> int:
        """``cusolverDn<t>geqrf_bufferSize``: the workspace ``geqrf`` needs, in elements."""
        return self._size("geqrf_bufferSize", dtype, handle, m, n, a, lda)

    def geqrf(self, dtype, handle: int, m: int, n: int, a: int, lda: int, tau: int,
              workspace: int, lwork: int, dev_info: int) -> None:
        """``cusolverDn<t>geqrf``: Householder QR of column-major ``a`` in place (``R`` and
        the reflectors), their scalars to ``tau``."""
        self._call("geqrf", dtype, handle, m, n, a, lda, tau, workspace, lwork, dev_info)

    def orgqr_bufferSize(self, dtype, handle: int, m: int, n: int, k: int, a: int,  # noqa: N802
                         lda: int, tau: int) -> int:
        """``cusolverDn<t>orgqr_bufferSize`` (``ungqr`` for complex dtypes)."""
        return self._size("orgqr_bufferSize", dtype, handle, m, n, k, a, lda, tau)

    def orgqr(self, dtype, handle: int, m: int, n: int, k: int, a: int, lda: int, tau: int,
              workspace: int, lwork: int, dev_info: int) -> None:
        """``cusolverDn<t>orgqr`` (``ungqr`` for complex dtypes): the first ``n`` columns of
        ``Q`` from ``k`` reflectors, in place in column-major ``a``."""
        self._call("orgqr", dtype, handle, m, n, k, a, lda, tau, workspace, lwork, dev_info)

    def syevd_bufferSize(self, dtype, handle: int, jobz: int, uplo: int, n: int,  # noqa: N802
                         a: int, lda: int, w: int) -> int:
        """``cusolverDn<t>syevd_bufferSize`` (``heevd`` for complex dtypes): the device
        workspace ``syevd`` needs, in elements of ``dtype``."""
        return self._size("syevd_bufferSize", dtype, handle, jobz, uplo, n, a, lda, w)

    def syevd(self, dtype, handle: int, jobz: int, uplo: int, n: int, a: int, lda: int,
              w: int, workspace: int, lwork: int, dev_info: int) -> None:
        """``cusolverDn<t>syevd`` (``heevd`` for complex dtypes): the ascending eigenvalues of
        the Hermitian column-major ``a`` (read from its ``uplo`` triangle) to ``w`` (real),
        and with ``jobz`` vector mode the orthonormal eigenvectors over ``a``, in place;
        ``devInfo`` (``> 0``: no convergence) written on the device."""
        self._call("syevd", dtype, handle, jobz, uplo, n, a, lda, w, workspace, lwork, dev_info)

    def gesvd_bufferSize(self, dtype, handle: int, m: int, n: int) -> int:  # noqa: N802
        """``cusolverDn<t>gesvd_bufferSize``: the device workspace ``gesvd`` needs, in
        elements of ``dtype``."""
        return self._size("gesvd_bufferSize", dtype, handle, m, n)

    def gesvd(self, dtype, handle: int, jobu: int, jobvt: int, m: int, n: int, a: int,
              lda: int, s: int, u: int, ldu: int, vt: int, ldvt: int, workspace: int,
              lwork: int, rwork: int, dev_info: int) -> None:
        """``cusolverDn<t>gesvd``: the SVD ``a = U S VT`` of column-major ``a`` (``m >= n``),
        ``jobu``/``jobvt`` LAPACK's (``ord('A')``, ``'S'``, ``'O'``: over ``a``, ``'N'``);
        ``a`` destroyed; ``devInfo`` (``> 0``: superdiagonals that did not converge) written
        on the device; ``rwork`` may be 0."""
        self._call("gesvd", dtype, handle, jobu, jobvt, m, n, a, lda, s, u, ldu, vt, ldvt,
                   workspace, lwork, rwork, dev_info)

    def syevjBatched_bufferSize(self, dtype, handle: int, jobz: int, uplo: int,  # noqa: N802
                                n: int, a: int, lda: int, w: int, params: int,
                                batch: int) -> int:
        """``cusolverDn<t>syevjBatched_bufferSize`` (``heevj`` for complex dtypes): the
        device workspace ``syevjBatched`` needs for ``batch`` matrices, in elements."""
        return self._size("syevjBatched_bufferSize", dtype, handle, jobz, uplo, n, a, lda, w,
                          after=(params, batch))

    def syevjBatched(self, dtype, handle: int, jobz: int, uplo: int, n: int, a: int,  # noqa: N802
                     lda: int, w: int, workspace: int, lwork: int, info: int, params: int,
                     batch: int) -> None:
        """``cusolverDn<t>syevjBatched`` (``heevjBatched`` for complex dtypes): Jacobi
        eigendecompositions of ``batch`` contiguous column-major Hermitian ``(n, n)`` matrices
        (``n <= 32``) in one call: ascending eigenvalues to ``w`` (``n`` a matrix), vectors over
        ``a``; ``info`` one flag a matrix, on the device; ``params`` a ``syevjInfo_t``."""
        self._call("syevjBatched", dtype, handle, jobz, uplo, n, a, lda, w, workspace, lwork,
                   info, params, batch)

    def gesvdjBatched_bufferSize(self, dtype, handle: int, jobz: int, m: int,  # noqa: N802
                                 n: int, a: int, lda: int, s: int, u: int, ldu: int, v: int,
                                 ldv: int, params: int, batch: int) -> int:
        """``cusolverDn<t>gesvdjBatched_bufferSize``: the device workspace ``gesvdjBatched``
        needs for ``batch`` matrices, in elements."""
        return self._size("gesvdjBatched_bufferSize", dtype, handle, jobz, m, n, a, lda, s, u,
                          ldu, v, ldv, after=(params, batch))

    def gesvdjBatched(self, dtype, handle: int, jobz: int, m: int, n: int, a: int,  # noqa: N802
                      lda: int, s: int, u: int, ldu: int, v: int, ldv: int, workspace: int,
                      lwork: int, info: int, params: int, batch: int) -> None:
        """``cusolverDn<t>gesvdjBatched``: Jacobi SVDs ``a = U S V^H`` of ``batch`` contiguous
        column-major ``(m, n)`` matrices (both at most 32) in one call: descending ``s``
        (``min(m, n)`` a matrix), full ``U`` (``m x m``) and ``V`` (``n x n``, not
        transposed) with vector mode; ``info`` one flag a matrix; ``params`` a
        ``gesvdjInfo_t``."""
        self._call("gesvdjBatched", dtype, handle, jobz, m, n, a, lda, s, u, ldu, v, ldv,
                   workspace, lwork, info, params, batch)


class JacobiParams:
    """A ``syevjInfo_t`` or ``gesvdjInfo_t`` (cuSOLVER's params object of its Jacobi
    routines), owned by whoever holds this object: destroyed when it is collected, so a
    compiled program that holds it (:class:`plax_cupy.kernels_linalg.ProgramEigh`) keeps it
    as long as the CUDA graphs that recorded a call with it. A call writes it (the last
    ``syevj``'s residual and sweeps): one object serves one call at a time. Made with cuSOLVER's defaults,
    as CuPy makes its own (tolerance: the dtype's machine precision; 100 sweeps; sorted
    results) unless ``tolerance``/``max_sweeps`` are given. A host-only call: allowed while
    a stream captures.

    Args:
      direct: the binding (:func:`binding`).
      kind: ``"syevj"`` or ``"gesvdj"`` (a key of :data:`JACOBI`).
      tolerance, max_sweeps: optional settings (``cusolverDnX<kind>SetTolerance``...).

    Raises:
      AttributeError: the library lacks the creator (named).
      CUSOLVERError: the library refuses to make it.

    Example:
      >>> params = JacobiParams(binding(), "syevj")                       # doctest: +SKIP
      >>> binding().syevjBatched(np.float32, h, 1, 0, 4, a, 4, w, work, lwork, info,
      ...                        params.ptr, 64)                          # doctest: +SKIP
    """

    def __init__(self, direct: DirectCusolver, kind: str, tolerance: float | None = None,
                 max_sweeps: int | None = None):
        _, create, destroy, set_tolerance, set_sweeps = JACOBI[kind]
        creator = direct._routine(create, "float32")   # (one function for every dtype)
        destroyer = direct._routine(destroy, "float32")
        pointer = _c_void_p(0)
        status = creator(ctypes.byref(pointer))
        if status != 0:
            raise CUSOLVERError(status, creator.plax_name)
        self.kind, self.ptr = kind, int(pointer.value or 0)
        self._finalizer = weakref.finalize(self, destroyer, self.ptr)
        if tolerance is not None:
            direct._call(set_tolerance, "float32", self.ptr, tolerance)
        if max_sweeps is not None:
            direct._call(set_sweeps, "float32", self.ptr, max_sweeps)

    def destroy(self) -> None:
        """Destroys the params object now (once; also done when this object is collected)."""
        self._finalizer()


_binding: list = []
_binding_lock = threading.Lock()


def binding() -> DirectCusolver | None:
    """The capturable cuSOLVER binding, or ``None`` where there is none (no
    ``cupy.cuda.device.get_cusolver_handle``, no library loaded, no ``cusolverDnSetStream``).
    Made once: CuPy's handle of the current device is created first, which loads the library.

    Example:
      >>> binding() is None or binding().has("potrf", np.float32)          # doctest: +SKIP
      True
    """
    return made_once(_binding, _binding_lock,
                     lambda: load_direct("get_cusolver_handle", "libcusolver.so", SONAMES,
                                         DirectCusolver))


def handle() -> int:
    """CuPy's cuSOLVER handle of the current device (``cupy.cuda.device.get_cusolver_handle``).

    Example:
      >>> binding().setStream(handle(), stream.ptr)                       # doctest: +SKIP
    """
    import cupy
    return cupy.cuda.device.get_cusolver_handle()


def handle_on_current_stream(direct: DirectCusolver) -> int:
    """:func:`handle`, set (through ``direct``) to run on CuPy's current stream: what each
    captured routine is called with.

    Example:
      >>> h = handle_on_current_stream(binding())                          # doctest: +SKIP
      >>> binding().potrf(np.float32, h, 1, n, a.data.ptr, n, work.data.ptr, lwork, info.data.ptr)
    """
    import cupy
    h = handle()
    direct.setStream(h, cupy.cuda.get_current_stream().ptr)
    return h


__all__ = ["CUSOLVER_EIG_MODE_NOVECTOR", "CUSOLVER_EIG_MODE_VECTOR", "CUSOLVERError",
           "DirectCusolver", "JACOBI", "JacobiParams", "binding", "handle",
           "handle_on_current_stream"]
