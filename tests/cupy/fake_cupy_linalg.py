"""The simulated CuPy's linear-algebra libraries, as plax calls them directly
(``plax_cupy.cublas_direct``, ``plax_cupy.cusolver_direct``): cuBLAS's triangular solves and a
stand-in ``libcusolver``.

Host libraries built with g++ (as :mod:`fake_cupy`'s ``libcublas`` stand-in) hold the C entry
points; each hands its arguments to one Python callback here, which computes with NumPy/SciPy
on the pool's blocks (found by their addresses), on the stream last set, checked and ordered as
a kernel is, and recorded into a capture under way, so a graph replays it. What a GPU would
refuse is refused: a pointer no live allocation holds, a pointer mode other than host, a
workspace smaller than ``potrf_bufferSize`` said, an unsupported side; the pointer arrays of
the batched routines are read from device memory when the routine runs (a replay reads what
the graph's own kernels wrote there). CuPy's own cuSOLVER binding is not simulated: CuPy's
``cupy.linalg`` functions still refuse a capturing stream (:mod:`fake_cupy`).

* ``libcublas``: ``cublas<t>trsm_v2`` and ``cublas<t>trsmBatched`` (appended to
  :mod:`fake_cupy`'s stand-in by :data:`CUBLAS_SOURCE`);
* ``libcusolver.so.12``: ``cusolverDnSetStream``, ``cusolverDn<t>potrf_bufferSize`` (``2 n``
  elements), ``cusolverDn<t>potrf`` and ``cusolverDn<t>potrfBatched``, ``devInfo`` written
  on the device as cuSOLVER writes it (``j + 1`` for the first pivot that is not positive);
  ``cusolverDn<t>getrf_bufferSize`` (``m + n`` elements) and ``cusolverDn<t>getrf`` (LAPACK's
  ``getrf``: 1-based pivots, ``devInfo``); ``cusolverDn<t>geqrf`` and ``<t>orgqr``/``<t>ungqr``
  with their size queries (``m + n`` elements; LAPACK's routines); ``cusolverDn<t>syevd``
  (``<t>heevd``) with ``syevd_bufferSize`` (``n^2 + 2 n`` elements) and ``cusolverDn<t>gesvd``
  with ``gesvd_bufferSize`` (``m n + m + n``; ``m >= n`` only, as cuSOLVER's), LAPACK's
  ``syevd``/``heevd``/``gesvd``, ``devInfo`` on the device; ``cusolverDn<t>syevjBatched``
  (``<t>heevjBatched``) and ``cusolverDn<t>gesvdjBatched`` with their size queries (one
  recorded launch for the batch, LAPACK inside; ``gesvdj`` refuses a matrix over 32) and
  their params objects (``cusolverDnCreateSyevjInfo``/``Destroy``..., and the tolerance and
  sweeps setters): a null or destroyed one is refused, :func:`params_alive` counts the live
  ones, and :func:`params_shared` the calls that ran while another call was inside with the
  same one (which cuSOLVER's documentation does not allow: a call writes the object).

:data:`CALLS` counts the routines run (captured ones once per replay too).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile

import numpy as np

#: routine name -> times run (at capture and at each replay)
CALLS: dict = {}
#: errors raised inside the simulated libraries (they return an internal-error status)
ERRORS: list = []

_LETTERS = "SDCZ"
_DTYPES = (np.float32, np.float64, np.complex64, np.complex128)
_ROUTINES = ("trsm", "trsmBatched", "potrf", "potrfBatched", "getrf", "geqrf", "orgqr",
             "syevd", "gesvd", "syevjBatched", "gesvdjBatched")
#: the arguments each entry point hands over (after the handle)
_ARGS = 16

# (C: the entry points; each packs its arguments and calls plax_sim_call(routine, stream, ...))
_FORWARD = r"""
typedef int (*plax_sim_call_t)(int routine, void* stream, const long long* args);
static plax_sim_call_t plax_sim_call = 0;
"""

#: appended to fake_cupy's libcublas source (its ``current_stream`` and ``pointer_mode``)
CUBLAS_SOURCE = _FORWARD + r"""
extern "C" {
void plax_sim_set_call(plax_sim_call_t fn) { plax_sim_call = fn; }
""" + "".join(rf"""
int cublas{t}trsm_v2(void* h, int side, int uplo, int trans, int diag, int m, int n,
                     const void* alpha, const void* a, int lda, void* b, int ldb) {{
  if (!plax_sim_call || pointer_mode != 0) return 7;  /* CUBLAS_STATUS_INVALID_VALUE */
  long long v[16] = {{side, uplo, trans, diag, m, n, (long long)alpha, (long long)a, lda,
                   (long long)b, ldb, 1}};
  return plax_sim_call({4 * 0 + i}, current_stream, v);
}}
int cublas{t}trsmBatched(void* h, int side, int uplo, int trans, int diag, int m, int n,
                         const void* alpha, const void* a, int lda, void* b, int ldb,
                         int batch) {{
  if (!plax_sim_call || pointer_mode != 0) return 7;
  long long v[16] = {{side, uplo, trans, diag, m, n, (long long)alpha, (long long)a, lda,
                   (long long)b, ldb, batch}};
  return plax_sim_call({4 * 1 + i}, current_stream, v);
}}
""" for i, t in enumerate(_LETTERS)) + "}\n"

#: the stand-in libcusolver
CUSOLVER_SOURCE = _FORWARD + r"""
static void* current_stream = 0;
extern "C" {
void plax_sim_set_call(plax_sim_call_t fn) { plax_sim_call = fn; }
int cusolverDnSetStream(void* h, void* stream) { current_stream = stream; return 0; }
/* the Jacobi routines' params objects: {kind, tolerance, sweeps, calls inside now}; live
   ones counted, and the calls that found another call inside theirs */
struct plax_sim_jacobi { int kind; double tolerance; int sweeps; int inside; };
static int plax_sim_live_params = 0;
static int plax_sim_shared = 0;
int plax_sim_params_alive() { return plax_sim_live_params; }
int plax_sim_params_shared() { return __atomic_load_n(&plax_sim_shared, __ATOMIC_SEQ_CST); }
static void plax_sim_enter(void* info) {
  if (__atomic_fetch_add(&((plax_sim_jacobi*)info)->inside, 1, __ATOMIC_SEQ_CST))
    __atomic_fetch_add(&plax_sim_shared, 1, __ATOMIC_SEQ_CST);
}
static int plax_sim_leave(void* info, int status) {
  __atomic_fetch_sub(&((plax_sim_jacobi*)info)->inside, 1, __ATOMIC_SEQ_CST);
  return status;
}
static int plax_sim_create(void** info, int kind) {
  if (!info) return 3;
  plax_sim_jacobi* p = new plax_sim_jacobi{kind, 0.0, 100, 0};
  *info = p;
  ++plax_sim_live_params;
  return 0;
}
static int plax_sim_destroy(void* info, int kind) {
  plax_sim_jacobi* p = (plax_sim_jacobi*)info;
  if (!p || p->kind != kind) return 3;
  p->kind = -1;   /* (a destroyed object: its memory kept, so a later use is caught) */
  --plax_sim_live_params;
  return 0;
}
int cusolverDnCreateSyevjInfo(void** info) { return plax_sim_create(info, 1); }
int cusolverDnDestroySyevjInfo(void* info) { return plax_sim_destroy(info, 1); }
int cusolverDnCreateGesvdjInfo(void** info) { return plax_sim_create(info, 2); }
int cusolverDnDestroyGesvdjInfo(void* info) { return plax_sim_destroy(info, 2); }
int cusolverDnXsyevjSetTolerance(void* info, double t) {
  if (!info) return 3; ((plax_sim_jacobi*)info)->tolerance = t; return 0;
}
int cusolverDnXsyevjSetMaxSweeps(void* info, int s) {
  if (!info) return 3; ((plax_sim_jacobi*)info)->sweeps = s; return 0;
}
int cusolverDnXgesvdjSetTolerance(void* info, double t) {
  if (!info) return 3; ((plax_sim_jacobi*)info)->tolerance = t; return 0;
}
int cusolverDnXgesvdjSetMaxSweeps(void* info, int s) {
  if (!info) return 3; ((plax_sim_jacobi*)info)->sweeps = s; return 0;
}
/* a params object of the kind (1 syevj, 2 gesvdj) that is live */
static int plax_sim_params_ok(void* info, int kind) {
  return info && ((plax_sim_jacobi*)info)->kind == kind;
}
""" + "".join(rf"""
int cusolverDn{t}potrf_bufferSize(void* h, int uplo, int n, void* a, int lda, int* lwork) {{
  *lwork = n > 0 ? 2 * n : 1;
  return 0;
}}
int cusolverDn{t}potrf(void* h, int uplo, int n, void* a, int lda, void* work, int lwork,
                       int* info) {{
  if (!plax_sim_call) return 1;  /* CUSOLVER_STATUS_NOT_INITIALIZED */
  long long v[16] = {{uplo, n, (long long)a, lda, (long long)work, lwork, (long long)info, 1}};
  return plax_sim_call({4 * 2 + i}, current_stream, v);
}}
int cusolverDn{t}potrfBatched(void* h, int uplo, int n, void* a, int lda, int* info,
                              int batch) {{
  if (!plax_sim_call) return 1;
  long long v[16] = {{uplo, n, (long long)a, lda, 0, 0, (long long)info, batch}};
  return plax_sim_call({4 * 3 + i}, current_stream, v);
}}
int cusolverDn{t}getrf_bufferSize(void* h, int m, int n, void* a, int lda, int* lwork) {{
  *lwork = m + n > 0 ? m + n : 1;
  return 0;
}}
int cusolverDn{t}getrf(void* h, int m, int n, void* a, int lda, void* work, int* ipiv,
                       int* info) {{
  if (!plax_sim_call) return 1;
  long long v[16] = {{m, n, (long long)a, lda, (long long)work, (long long)ipiv,
                     (long long)info}};
  return plax_sim_call({4 * 4 + i}, current_stream, v);
}}
int cusolverDn{t}geqrf_bufferSize(void* h, int m, int n, void* a, int lda, int* lwork) {{
  *lwork = m + n > 0 ? m + n : 1;
  return 0;
}}
int cusolverDn{t}geqrf(void* h, int m, int n, void* a, int lda, void* tau, void* work,
                       int lwork, int* info) {{
  if (!plax_sim_call) return 1;
  long long v[16] = {{m, n, 0, (long long)a, lda, (long long)tau, (long long)work, lwork,
                     (long long)info}};
  return plax_sim_call({4 * 5 + i}, current_stream, v);
}}
int cusolverDn{t}{"ungqr" if t in "CZ" else "orgqr"}_bufferSize(void* h, int m, int n, int k,
    const void* a, int lda, const void* tau, int* lwork) {{
  *lwork = m + n > 0 ? m + n : 1;
  return 0;
}}
int cusolverDn{t}{"ungqr" if t in "CZ" else "orgqr"}(void* h, int m, int n, int k, void* a,
    int lda, const void* tau, void* work, int lwork, int* info) {{
  if (!plax_sim_call) return 1;
  long long v[16] = {{m, n, k, (long long)a, lda, (long long)tau, (long long)work, lwork,
                     (long long)info}};
  return plax_sim_call({4 * 6 + i}, current_stream, v);
}}
int cusolverDn{t}{"heevd" if t in "CZ" else "syevd"}_bufferSize(void* h, int jobz, int uplo, int n,
    const void* a, int lda, const void* w, int* lwork) {{
  *lwork = n > 0 ? n * n + 2 * n : 1;
  return 0;
}}
int cusolverDn{t}{"heevd" if t in "CZ" else "syevd"}(void* h, int jobz, int uplo, int n, void* a,
    int lda, void* w, void* work, int lwork, int* info) {{
  if (!plax_sim_call) return 1;
  long long v[16] = {{jobz, uplo, n, (long long)a, lda, (long long)w, (long long)work, lwork,
                     (long long)info}};
  return plax_sim_call({4 * 7 + i}, current_stream, v);
}}
int cusolverDn{t}gesvd_bufferSize(void* h, int m, int n, int* lwork) {{
  *lwork = m + n > 0 ? m * n + m + n : 1;
  return 0;
}}
int cusolverDn{t}gesvd(void* h, signed char jobu, signed char jobvt, int m, int n, void* a,
    int lda, void* s, void* u, int ldu, void* vt, int ldvt, void* work, int lwork, void* rwork,
    int* info) {{
  if (!plax_sim_call) return 1;
  long long v[16] = {{jobu, jobvt, m, n, (long long)a, lda, (long long)s, (long long)u, ldu,
                     (long long)vt, ldvt, (long long)work, lwork, (long long)rwork,
                     (long long)info}};
  return plax_sim_call({4 * 8 + i}, current_stream, v);
}}
int cusolverDn{t}{"heevj" if t in "CZ" else "syevj"}Batched_bufferSize(void* h, int jobz, int uplo,
    int n, const void* a, int lda, const void* w, int* lwork, void* params, int batch) {{
  if (!plax_sim_params_ok(params, 1) || n > 32) return 3;
  *lwork = n > 0 && batch > 0 ? batch * (n * n + 2 * n) : 1;
  return 0;
}}
int cusolverDn{t}{"heevj" if t in "CZ" else "syevj"}Batched(void* h, int jobz, int uplo, int n,
    void* a, int lda, void* w, void* work, int lwork, int* info, void* params, int batch) {{
  if (!plax_sim_call) return 1;
  if (!plax_sim_params_ok(params, 1)) return 3;  /* CUSOLVER_STATUS_INVALID_VALUE */
  long long v[16] = {{jobz, uplo, n, (long long)a, lda, (long long)w, (long long)work, lwork,
                     (long long)info, batch}};
  plax_sim_enter(params);
  return plax_sim_leave(params, plax_sim_call({4 * 9 + i}, current_stream, v));
}}
int cusolverDn{t}gesvdjBatched_bufferSize(void* h, int jobz, int m, int n, const void* a, int lda,
    const void* s, const void* u, int ldu, const void* v, int ldv, int* lwork, void* params,
    int batch) {{
  if (!plax_sim_params_ok(params, 2) || m > 32 || n > 32) return 3;
  *lwork = m > 0 && n > 0 && batch > 0 ? batch * (m * n + m + n) : 1;
  return 0;
}}
int cusolverDn{t}gesvdjBatched(void* h, int jobz, int m, int n, void* a, int lda, void* s,
    void* u, int ldu, void* v, int ldv, void* work, int lwork, int* info, void* params,
    int batch) {{
  if (!plax_sim_call) return 1;
  if (!plax_sim_params_ok(params, 2)) return 3;
  long long w[16] = {{jobz, m, n, (long long)a, lda, (long long)s, (long long)u, ldu,
                     (long long)v, ldv, (long long)work, lwork, (long long)info, batch}};
  plax_sim_enter(params);
  return plax_sim_leave(params, plax_sim_call({4 * 10 + i}, current_stream, w));
}}
""" for i, t in enumerate(_LETTERS)) + "}\n"

_CALL_T = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                           ctypes.POINTER(ctypes.c_longlong))
_callback = _CALL_T(lambda routine, stream, args: _entry(routine, stream, args))
_cusolver: list = []   # [the loaded stand-in libcusolver]


def build(source: str, soname: str):
    """The host library of ``source`` (C++), built once per source into the temporary
    folder under the file name ``soname``, loaded with ``ctypes``.

    Example:
      >>> lib = build(CUSOLVER_SOURCE, "libcusolver.so.12")       # doctest: +SKIP
    """
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    folder = os.path.join(tempfile.gettempdir(), f"plax_sim_{soname.split('.')[0]}_{digest}")
    path = os.path.join(folder, soname)
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        src, tmp = path + f".{os.getpid()}.cpp", path + f".{os.getpid()}.tmp"
        with open(src, "w") as f:
            f.write(source)
        subprocess.run([os.environ.get("CXX", "g++"), "-shared", "-fPIC", "-O1",
                        f"-Wl,-soname,{soname}", "-o", tmp, src], check=True)
        os.replace(tmp, path)
        os.remove(src)
    return ctypes.CDLL(path)


def attach(library) -> None:
    """Points ``library``'s entry points (a stand-in built with :data:`CUBLAS_SOURCE` or
    :data:`CUSOLVER_SOURCE`) at this module's routines."""
    library.plax_sim_set_call.argtypes = [_CALL_T]
    library.plax_sim_set_call(_callback)


def get_cusolver_handle() -> int:
    """``cupy.cuda.device.get_cusolver_handle()``: loads the stand-in ``libcusolver`` (as CuPy
    loads the real one) and returns a handle."""
    if not _cusolver:
        library = build(CUSOLVER_SOURCE, "libcusolver.so.12")
        attach(library)
        _cusolver.append(library)
    return 0x5017E5


def _entry(routine: int, stream_ptr, args) -> int:
    try:
        name, dtype = _ROUTINES[routine // 4], np.dtype(_DTYPES[routine % 4])
        return _RUN[name](_stream(stream_ptr), dtype, [args[k] for k in range(_ARGS)])
    except Exception as err:  # noqa: BLE001 - a C caller: the error is kept, a status returned
        ERRORS.append(err)
        return 14 if routine < 8 else 7   # CUBLAS_/CUSOLVER_STATUS_INTERNAL_ERROR


def _stream(pointer):
    import fake_cupy
    return next((s for s in list(fake_cupy._STREAMS) if s.ptr == (pointer or 0)),
                fake_cupy.Stream.null)


def _real(dtype: np.dtype) -> np.dtype:
    """The real dtype of ``dtype``'s values (a complex type's parts)."""
    return np.dtype(dtype.char.lower()) if dtype.kind == "c" else dtype


def _view(address: int, shape: tuple, strides: tuple, dtype):
    """The pool block holding the elements at ``address`` with element ``strides``, and a
    NumPy view of them (raises where no live allocation holds them all)."""
    import fake_cupy
    span = (sum((d - 1) * s for d, s in zip(shape, strides)) + 1) * dtype.itemsize
    block, offset = fake_cupy._block_at(address, span)
    return block, np.ndarray(shape, dtype, buffer=block.buf, offset=offset,
                             strides=tuple(s * dtype.itemsize for s in strides))


def _column_major(address: int, rows: int, cols: int, ld: int, dtype):
    return _view(address, (rows, cols), (1, ld), dtype)


def _pointers(address: int, count: int) -> list:
    """The ``count`` device pointers stored at device ``address`` (read now)."""
    return [int(p) for p in _view(address, (count,), (1,), np.dtype(np.uintp))[1]]


def launch(name: str, stream, blocks: list, compute, writes: list | None = None) -> None:
    """Runs ``compute`` as library routine ``name``'s kernel on ``stream`` touching ``blocks``
    (pool blocks) and writing ``writes`` (all of ``blocks`` by default): ordered after their
    pending producers (else ``StreamOrderError``), recorded into a capture under way, counted
    in :data:`CALLS`. The simulated cuBLAS's products and cuFFT's transforms are recorded
    through it too."""
    import fake_cupy

    def run():
        compute()
        CALLS[name] = CALLS.get(name, 0) + 1

    blocks = list({id(b): b for b in blocks}.values())
    with fake_cupy._outside_captures(blocks, stream):   # (another stream's capture: its memory)
        for block in blocks:
            if fake_cupy._pending(block.writer, block.ticket, stream):
                raise fake_cupy.StreamOrderError(f"{name} on {stream!r} reads memory whose "
                                                 f"producer on {block.writer!r} is pending")
        ticket = stream._next()
        for block in blocks:
            block.readers[stream] = ticket
        for block in blocks if writes is None else writes:
            fake_cupy._mark_written(block, stream, ticket)
        if stream.capture is not None:
            stream.capture.steps.append((run, [(b, b.generation) for b in blocks]))
            stream.capture.save(blocks if writes is None else writes)
        run()
    fake_cupy.COUNTS["operations"] += 1


def _trsm(stream, dtype, v, batched: bool) -> int:
    """``cublas<t>trsm[Batched]``: ``B := alpha op(A)^-1 B``, column-major, left side only
    (as CuPy calls it); ``alpha`` read from the host now (captured by value)."""
    from scipy.linalg import blas
    side, uplo, trans, diag, m, n, alpha, a, lda, b, ldb, count = v[:12]
    if side != 0 or uplo not in (0, 1) or trans not in (0, 1, 2) or diag not in (0, 1) \
            or lda < max(1, m) or ldb < max(1, m):
        return 7   # CUBLAS_STATUS_INVALID_VALUE
    scale = np.frombuffer(ctypes.string_at(alpha, dtype.itemsize), dtype)[0]
    pairs = list(zip(_pointers(a, count), _pointers(b, count))) if batched else [(a, b)]
    blocks = [_view(a, (count,), (1,), np.dtype(np.uintp))[0],
              _view(b, (count,), (1,), np.dtype(np.uintp))[0]] if batched else []
    for pa, pb in pairs:   # (checked now: every matrix is in live memory)
        blocks += [_column_major(pa, m, m, lda, dtype)[0], _column_major(pb, m, n, ldb, dtype)[0]]

    def run():
        for pa, pb in (zip(_pointers(a, count), _pointers(b, count)) if batched else pairs):
            _, mat = _column_major(pa, m, m, lda, dtype)
            _, rhs = _column_major(pb, m, n, ldb, dtype)
            with np.errstate(all="ignore"):
                solve = blas.get_blas_funcs("trsm", (mat, rhs))
                rhs[...] = solve(scale, np.array(mat), np.array(rhs), side=0, lower=int(uplo == 0),
                                 trans_a=trans, diag=diag)
    launch("trsmBatched" if batched else "trsm", stream, blocks, run)
    return 0


def _factor(h: np.ndarray) -> tuple:
    """LAPACK's Cholesky (``potf2``) of Hermitian ``h`` read from its lower triangle: the
    lower factor, stopped at the first pivot that is not positive (left on the diagonal), and
    ``info`` (0, or that pivot's 1-based index)."""
    low = np.tril(h).copy()
    for j in range(h.shape[-1]):
        ajj = np.real(h[j, j] - np.vdot(low[j, :j], low[j, :j]))
        if not ajj > 0:
            low[j, j] = ajj
            return low, j + 1
        low[j, j] = np.sqrt(ajj)
        low[j + 1:, j] = (h[j + 1:, j] - low[j + 1:, :j] @ np.conj(low[j, :j])) / low[j, j]
    return low, 0


def _potrf(stream, dtype, v, batched: bool) -> int:
    """``cusolverDn<t>potrf[Batched]``: the Cholesky factor of each column-major matrix in
    place, in its ``uplo`` triangle (the other untouched); ``devInfo`` per matrix."""
    uplo, n, a, lda, work, lwork, info, count = v[:8]
    if uplo not in (0, 1) or lda < max(1, n) or (not batched and lwork < 2 * n):
        return 3   # CUSOLVER_STATUS_INVALID_VALUE
    mats = _pointers(a, count) if batched else [a]
    blocks = [_view(info, (count,), (1,), np.dtype(np.int32))[0]]
    blocks += [_view(a, (count,), (1,), np.dtype(np.uintp))[0]] if batched else \
        [_view(work, (lwork,), (1,), dtype)[0]]   # (the workspace must be live memory)
    blocks += [_column_major(p, n, n, lda, dtype)[0] for p in mats]

    def run():
        _, flags = _view(info, (count,), (1,), np.dtype(np.int32))
        for k, p in enumerate(_pointers(a, count) if batched else mats):
            _, mat = _column_major(p, n, n, lda, dtype)
            h = mat if uplo == 0 else np.conj(mat.T)   # (upper: A = U^H U, U^H lower)
            with np.errstate(all="ignore"):
                low, flags[k] = _factor(np.tril(h) + np.conj(np.tril(h, -1).T))
            rows, cols = np.tril_indices(n)
            if uplo == 0:
                mat[rows, cols] = low[rows, cols]
            else:
                mat[cols, rows] = np.conj(low[rows, cols])
    launch("potrfBatched" if batched else "potrf", stream, blocks, run)
    return 0


def _getrf(stream, dtype, v) -> int:
    """``cusolverDn<t>getrf``: LU with partial pivoting of a column-major ``(m, n)`` matrix in
    place (LAPACK's ``getrf``), 1-based pivots to ``ipiv``, ``devInfo`` (``j`` for an exactly
    zero ``U[j-1, j-1]``); the workspace must be live and as large as the size query said
    (``m + n`` elements)."""
    from scipy.linalg import lapack
    m, n, a, lda, work, ipiv, info = v[:7]
    k = min(m, n)
    if m < 0 or n < 0 or lda < max(1, m):
        return 3   # CUSOLVER_STATUS_INVALID_VALUE
    blocks = [_view(work, (m + n,), (1,), dtype)[0], _view(ipiv, (k,), (1,), np.dtype(np.int32))[0],
              _view(info, (1,), (1,), np.dtype(np.int32))[0], _column_major(a, m, n, lda, dtype)[0]]

    def run():
        _, mat = _column_major(a, m, n, lda, dtype)
        getrf = lapack.get_lapack_funcs("getrf", (mat,))
        with np.errstate(all="ignore"):
            lu, piv, flag = getrf(np.array(mat))
        mat[...] = lu
        _view(ipiv, (k,), (1,), np.dtype(np.int32))[1][...] = piv[:k] + 1
        _view(info, (1,), (1,), np.dtype(np.int32))[1][0] = flag
    launch("getrf", stream, blocks, run)
    return 0


def _householder(stream, dtype, v, form_q: bool) -> int:
    """``cusolverDn<t>geqrf`` (``form_q`` false: Householder QR of a column-major ``(m, n)``
    matrix in place, the ``min(m, n)`` scalars to ``tau``) or ``<t>orgqr``/``<t>ungqr``
    (``form_q``: the first ``n`` columns of ``Q`` from ``k`` reflectors, in place): LAPACK's
    routines; the workspace must be live and as large as the size query said (``m + n``)."""
    from scipy.linalg import lapack
    m, n, k, a, lda, tau, work, lwork, info = v[:9]
    k = k if form_q else min(m, n)
    if m < 0 or n < 0 or lda < max(1, m) or lwork < m + n or (form_q and not k <= n <= m):
        return 3   # CUSOLVER_STATUS_INVALID_VALUE
    blocks = [_view(work, (lwork,), (1,), dtype)[0], _view(tau, (max(k, 1),), (1,), dtype)[0],
              _view(info, (1,), (1,), np.dtype(np.int32))[0], _column_major(a, m, n, lda, dtype)[0]]

    def run():
        _, mat = _column_major(a, m, n, lda, dtype)
        _, scalars = _view(tau, (max(k, 1),), (1,), dtype)
        with np.errstate(all="ignore"):
            if form_q:
                name = "ungqr" if dtype.kind == "c" else "orgqr"
                q, _, flag = lapack.get_lapack_funcs(name, (mat,))(np.array(mat), scalars[:k])
                mat[...] = q
            else:
                qr, t, _, flag = lapack.get_lapack_funcs("geqrf", (mat,))(np.array(mat))
                mat[...] = qr
                scalars[:k] = t[:k]
        _view(info, (1,), (1,), np.dtype(np.int32))[1][0] = flag
    launch("orgqr" if form_q else "geqrf", stream, blocks, run)
    return 0


def _eigenvalues(stream, dtype, v) -> int:
    """``cusolverDn<t>syevd``/``<t>heevd``: the ascending eigenvalues of the Hermitian
    column-major ``(n, n)`` matrix read from its ``uplo`` triangle to real ``w``, and (vector
    mode) its orthonormal eigenvectors over it (LAPACK's ``syevd``/``heevd``), ``devInfo``;
    the workspace must be live and as large as the size query said (``n^2 + 2 n``)."""
    from scipy.linalg import lapack
    jobz, uplo, n, a, lda, w, work, lwork, info = v[:9]
    real = _real(dtype)
    if jobz not in (0, 1) or uplo not in (0, 1) or n < 0 or lda < max(1, n) \
            or lwork < max(1, n * n + 2 * n):
        return 3   # CUSOLVER_STATUS_INVALID_VALUE
    blocks = [_view(work, (lwork,), (1,), dtype)[0], _view(w, (max(n, 1),), (1,), real)[0],
              _view(info, (1,), (1,), np.dtype(np.int32))[0], _column_major(a, n, n, lda, dtype)[0]]

    def run():
        _, mat = _column_major(a, n, n, lda, dtype)
        name = "heevd" if dtype.kind == "c" else "syevd"
        with np.errstate(all="ignore"):
            values, vectors, flag = lapack.get_lapack_funcs(name, (mat,))(
                np.array(mat), compute_v=jobz, lower=int(uplo == 0))
        _view(w, (max(n, 1),), (1,), real)[1][:n] = values
        if jobz:   # (in other phases than LAPACK's, as cuSOLVER's may be)
            mat[...] = vectors * np.where(np.arange(n) % 2, -1, 1).astype(dtype)
        _view(info, (1,), (1,), np.dtype(np.int32))[1][0] = flag
    launch("syevd", stream, blocks, run)
    return 0


def _singular_values(stream, dtype, v) -> int:
    """``cusolverDn<t>gesvd``: ``A = U S VT`` of a column-major ``(m, n)`` matrix, ``m >= n``
    (cuSOLVER's restriction), LAPACK's ``gesvd``; ``jobu``/``jobvt`` ``A`` (all), ``S`` (the
    first ``n``), ``O`` (over ``A``; not both), ``N`` (none), a pointer needed only where its
    job writes there; ``A`` destroyed; ``devInfo``; the workspace must be live and as large as
    the size query said (``m n + m + n``)."""
    from scipy.linalg import lapack
    jobu, jobvt, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, rwork, info = v[:15]
    jobu, jobvt = chr(jobu), chr(jobvt)
    real = _real(dtype)
    if not 0 <= n <= m or jobu not in "ASON" or jobvt not in "ASON" or jobu == jobvt == "O" \
            or lda < max(1, m) or lwork < max(1, m * n + m + n) \
            or (jobu in "AS" and ldu < max(1, m)) or (jobvt in "AS" and ldvt < max(1, n)):
        return 3   # CUSOLVER_STATUS_INVALID_VALUE
    u_cols = {"A": m, "S": n}.get(jobu, 0)
    blocks = [_view(work, (lwork,), (1,), dtype)[0], _view(s, (max(n, 1),), (1,), real)[0],
              _view(info, (1,), (1,), np.dtype(np.int32))[0], _column_major(a, m, n, lda, dtype)[0]]
    blocks += [_column_major(u, m, u_cols, ldu, dtype)[0]] if u_cols else []
    blocks += [_column_major(vt, n, n, ldvt, dtype)[0]] if jobvt in "AS" else []

    def run():
        _, mat = _column_major(a, m, n, lda, dtype)
        want_uv = jobu != "N" or jobvt != "N"
        with np.errstate(all="ignore"):
            uu, ss, vv, flag = lapack.get_lapack_funcs("gesvd", (mat,))(
                np.array(mat), compute_uv=int(want_uv), full_matrices=int(jobu == "A"))
        if want_uv:   # (pairs of singular vectors in other phases than LAPACK's)
            phases = np.where(np.arange(uu.shape[1]) % 2, -1, 1).astype(dtype)
            uu, vv = uu * phases, vv * np.conj(phases[:vv.shape[0], None])
        _view(s, (max(n, 1),), (1,), real)[1][:n] = ss[:n]
        if u_cols:
            _column_major(u, m, u_cols, ldu, dtype)[1][...] = uu[:, :u_cols]
        if jobvt in "AS":
            _column_major(vt, n, n, ldvt, dtype)[1][...] = vv[:n]
        mat[...] = np.nan   # (A is destroyed: what no job writes there is garbage)
        if jobu == "O":
            mat[...] = uu[:, :n]
        elif jobvt == "O":
            mat[:n, :] = vv[:n]
        _view(info, (1,), (1,), np.dtype(np.int32))[1][0] = flag
    launch("gesvd", stream, blocks, run)
    return 0


def _jacobi_eigenvalues(stream, dtype, v) -> int:
    """``cusolverDn<t>syevjBatched``/``<t>heevjBatched``: the eigendecompositions of
    ``batch`` contiguous column-major Hermitian ``(n, n)`` matrices (``n <= 32``, each read
    from its ``uplo`` triangle) in one launch: ascending eigenvalues to ``w`` (``n`` a matrix,
    contiguous), vectors over the matrices (vector mode), one ``info`` a matrix; the workspace
    must be live and as large as the size query said (``batch (n^2 + 2 n)``). LAPACK's
    ``heevr``/``syevr`` stands in for Jacobi (other routines than ``syevd``'s, other last bits),
    the eigenvectors in other phases."""
    from scipy.linalg import lapack
    jobz, uplo, n, a, lda, w, work, lwork, info, count = v[:10]
    real = _real(dtype)
    if jobz not in (0, 1) or uplo not in (0, 1) or not 0 <= n <= 32 or lda < max(1, n) \
            or count < 0 or lwork < max(1, count * (n * n + 2 * n)):
        return 3   # CUSOLVER_STATUS_INVALID_VALUE
    step = lda * n
    blocks = [_view(work, (lwork,), (1,), dtype)[0], _view(w, (count * n,), (1,), real)[0],
              _view(info, (count,), (1,), np.dtype(np.int32))[0],
              _view(a, (count, n, n), (step, 1, lda), dtype)[0]]

    def run():
        _, mats = _view(a, (count, n, n), (step, 1, lda), dtype)
        _, values = _view(w, (count, n), (n, 1), real)
        _, flags = _view(info, (count,), (1,), np.dtype(np.int32))
        name = "heevr" if dtype.kind == "c" else "syevr"
        for k in range(count):
            with np.errstate(all="ignore"):
                out = lapack.get_lapack_funcs(name, (mats[k],))(
                    np.array(mats[k]), compute_v=jobz, lower=int(uplo == 0))
            values[k] = out[0]
            if jobz:
                mats[k] = out[1] * np.where(np.arange(n) % 2, 1, -1).astype(dtype)
            flags[k] = out[-1]
    launch("syevjBatched", stream, blocks, run)
    return 0


def _jacobi_singular_values(stream, dtype, v) -> int:
    """``cusolverDn<t>gesvdjBatched``: ``A = U S V^H`` of ``batch`` contiguous column-major
    ``(m, n)`` matrices (both at most 32, else refused) in one launch: descending ``s``
    (``min(m, n)`` a matrix), with vector mode the full ``U`` (``m x m``) and ``V``
    (``n x n``); one ``info`` a matrix; the workspace live and as large as the size query
    said (``batch (m n + m + n)``); LAPACK's ``gesdd`` inside, pairs of vectors in other
    phases."""
    jobz, m, n, a, lda, s, u, ldu, vv, ldv, work, lwork, info, count = v[:14]
    real = _real(dtype)
    k = min(m, n)
    if jobz not in (0, 1) or not 0 <= m <= 32 or not 0 <= n <= 32 or lda < max(1, m) \
            or count < 0 or lwork < max(1, count * (m * n + m + n)) \
            or (jobz and (ldu < max(1, m) or ldv < max(1, n))):
        return 3   # CUSOLVER_STATUS_INVALID_VALUE
    blocks = [_view(work, (lwork,), (1,), dtype)[0], _view(s, (count * k,), (1,), real)[0],
              _view(info, (count,), (1,), np.dtype(np.int32))[0],
              _view(a, (count, m, n), (lda * n, 1, lda), dtype)[0]]
    if jobz:
        blocks += [_view(u, (count, m, m), (ldu * m, 1, ldu), dtype)[0],
                   _view(vv, (count, n, n), (ldv * n, 1, ldv), dtype)[0]]

    def run():
        _, mats = _view(a, (count, m, n), (lda * n, 1, lda), dtype)
        _, values = _view(s, (count, k), (k, 1), real)
        for j in range(count):
            with np.errstate(all="ignore"):
                uu, ss, vh = np.linalg.svd(np.array(mats[j]), full_matrices=True)
            values[j] = ss
            if jobz:
                phases = np.where(np.arange(m) % 2, 1, -1).astype(dtype)
                uu = uu * phases
                vh[:k] = vh[:k] * np.conj(phases[:k, None])
                _view(u, (count, m, m), (ldu * m, 1, ldu), dtype)[1][j] = uu
                _view(vv, (count, n, n), (ldv * n, 1, ldv), dtype)[1][j] = np.conj(vh.T)
        _view(info, (count,), (1,), np.dtype(np.int32))[1][...] = 0
        mats[...] = np.nan   # (A is destroyed)
    launch("gesvdjBatched", stream, blocks, run)
    return 0


def params_alive() -> int:
    """How many Jacobi params objects (``syevjInfo_t``, ``gesvdjInfo_t``) the stand-in
    ``libcusolver`` holds: made and not yet destroyed."""
    get_cusolver_handle()
    return int(_cusolver[0].plax_sim_params_alive())


def params_shared() -> int:
    """How many ``syevjBatched``/``gesvdjBatched`` calls so far began while another call with
    the same params object had not returned (host threads sharing one object)."""
    get_cusolver_handle()
    return int(_cusolver[0].plax_sim_params_shared())


_RUN = {"trsm": lambda s, d, v: _trsm(s, d, v, False),
        "trsmBatched": lambda s, d, v: _trsm(s, d, v, True),
        "potrf": lambda s, d, v: _potrf(s, d, v, False),
        "potrfBatched": lambda s, d, v: _potrf(s, d, v, True),
        "getrf": _getrf,
        "geqrf": lambda s, d, v: _householder(s, d, v, False),
        "orgqr": lambda s, d, v: _householder(s, d, v, True),
        "syevd": _eigenvalues,
        "gesvd": _singular_values,
        "syevjBatched": _jacobi_eigenvalues,
        "gesvdjBatched": _jacobi_singular_values}
