"""GPU kernels of :mod:`plax.lax.linalg`: cuSOLVER and cuBLAS through CuPy.

Every kernel is batched over the leading axes, as the reference kernels
(``plax_numpy.impls_linalg``) are, and takes float32, float64, complex64 and complex128.
Failures follow JAX, decided on the device without a synchronisation: CuPy leaves cuSOLVER's
error flags unread (its default ``linalg`` error state is ``ignore``), so each kernel checks
its results itself and writes NaNs where JAX has them (a matrix that is not positive definite,
non-finite input to an iterative solver).

**In a CUDA graph.** CuPy's cuBLAS and cuSOLVER bindings refuse a capturing stream, so while
the stream captures (:mod:`plax_cupy.graphs`) ``triangular_solve``, ``cholesky``, ``lu`` and
``qr`` make the very library calls CuPy's functions make (the same routines, arguments,
layouts and copies: the same bits) through :mod:`plax_cupy.cublas_direct` and
:mod:`plax_cupy.cusolver_direct`. ``eigh`` and ``svd`` run ``syevd``/``heevd`` and ``gesvd``
there matrix by matrix (CuPy's ``eigh`` runs ``Xsyevd``, whose workspace is partly on the
host: see :mod:`plax_cupy.cusolver_direct`), and a batch of matrices up to
:data:`JACOBI_LIMIT` in one ``syevjBatched``/``heevjBatched`` or ``gesvdjBatched`` call, as
CuPy runs such a batch, on a params object the program owns; a compiled program runs them
on its plain calls too (:class:`ProgramEigh`, :class:`ProgramSvd`), so that every call of a
program gives the same bits, and a direct call failing there turns the program to CuPy's
path (:class:`_ProgramSolver`). The workspace sizes are asked for on the program's plain first call
(:class:`ProgramCholesky`, :class:`ProgramLu`, :class:`ProgramQr`, :class:`ProgramEigh`,
:class:`ProgramSvd`: program kernels), by the same functions (``_potrf_lwork``...) a capture
of a body not run plainly asks; the workspaces, ``devInfo`` and the batched routines' pointer
arrays are allocations of the capture, which the plan holds as long as its graph (no two
graphs share one); nothing is read back to the host (``eigh``'s and ``svd``'s ``devInfo``
turns a matrix that did not converge to NaNs on the device). Where a binding is missing,
CuPy's path runs, its refusal fails the capture, and the program runs plainly with that
reason in ``as_text()``; where the binding lacks the routine, the capture fails naming its
C function.

=====================  ================================================================
primitive              GPU path
=====================  ================================================================
``cholesky``           ``cupy.linalg.cholesky`` (``potrf``; a batch: ``potrfBatched``)
``triangular_solve``   ``cupyx.scipy.linalg.solve_triangular`` (``trsm``; a batch:
                       ``trsmBatched``)
``lu``                 matrices up to 32 x 32: a generated kernel, one thread per
                       matrix (LAPACK's ``getf2``), the whole batch in one launch;
                       larger: ``cupyx.scipy.linalg.lu_factor`` (``getrf``) per
                       matrix, which reads ``getrf``'s flag on the host (one
                       synchronisation per matrix; none in a CUDA graph, below); the
                       permutation built from the pivots by a generated kernel
``qr``                 ``cupy.linalg.qr`` (``geqrf``/``orgqr``, a batch matrix by matrix)
``svd``                in a compiled program (direct binding): a batch of matrices up
                       to 32 x 32 one ``gesvdjBatched`` call, else ``gesvd`` per
                       matrix; eagerly: ``cupy.linalg.svd`` (``gesvd``/batched
                       ``gesvdj``)
``eigh``               in a compiled program (direct binding): a batch of matrices up
                       to 32 x 32 one ``syevjBatched``/``heevjBatched`` call, else
                       ``syevd``/``heevd`` per matrix; eagerly: ``cupy.linalg.eigh``
                       (``Xsyevd``/batched ``syevj``)
``eig``                ``cupy.linalg.eig`` (``geev``, CuPy >= 14 with CUDA >= 12.6); left
                       eigenvectors from the right ones (``inv``); both normalised by a
                       plax-compiled kernel (``-ftz=false``, :data:`UNIT_COLUMNS_SOURCE`)
=====================  ================================================================
"""
from __future__ import annotations

import threading
import warnings

import numpy as np

import cupy

from plax.lax.linalg import (cholesky_p, eig_p, eigh_p, lu_p, qr_of_empty, qr_p, svd_of_empty,
                             svd_p, triangular_solve_p)
from plax_cupy import cublas_direct, cusolver_direct
from plax_cupy.cublas_direct import (CUBLAS_DIAG_NON_UNIT, CUBLAS_DIAG_UNIT,
                                     CUBLAS_FILL_MODE_LOWER, CUBLAS_FILL_MODE_UPPER,
                                     CUBLAS_OP_C, CUBLAS_OP_N, CUBLAS_OP_T, CUBLAS_SIDE_LEFT)
from plax_cupy.kernels import kernel, program_kernel


def _real_dtype(dtype) -> np.dtype:
    return np.dtype(dtype.char.lower()) if np.dtype(dtype).kind == "c" else np.dtype(dtype)


def _finite_matrices(a):
    """Per matrix of ``a`` (``(..., m, n)``): whether all its entries are finite."""
    return cupy.isfinite(a).all(axis=(-2, -1))


def _guarded(fn, operands: list, out_specs: list) -> list:
    """``fn(*operands)`` (a batched CuPy routine returning a list of arrays); if CuPy raises
    ``LinAlgError`` -- only when the user asked it to, with ``cupyx.seterr(linalg="raise")`` --
    matrix by matrix instead, with NaN results for the failing ones only (JAX's values).

    The operands are ``(..., r, c)`` with the same leading axes; ``out_specs`` lists each
    output's per-matrix shape and dtype."""
    try:
        return list(fn(*operands))
    except np.linalg.LinAlgError:
        pass
    lead = operands[0].shape[:-2]
    mats = [x.reshape((-1,) + x.shape[-2:]) for x in operands]
    count = mats[0].shape[0]
    outs = [cupy.empty((count,) + tuple(shape), dtype) for shape, dtype in out_specs]
    for i in range(count):
        try:
            results = list(fn(*[m[i] for m in mats]))
        except np.linalg.LinAlgError:
            results = [cupy.full(o.shape[1:], np.nan, o.dtype) for o in outs]
        for o, r in zip(outs, results):
            o[i] = r
    return [o.reshape(lead + o.shape[1:]) for o in outs]


def _nan_where(bad, x, extra_axes: int):
    """``x`` with NaN in the batch entries where ``bad`` (shape ``x.shape[:-extra_axes]``)."""
    bad = bad.reshape(bad.shape + (1,) * extra_axes)
    return cupy.where(bad, cupy.full((), np.nan, x.dtype), x)


@kernel(cholesky_p)
def cholesky(a: "cupy.ndarray") -> "cupy.ndarray":
    """Lower Cholesky factors of a batch of Hermitian positive-definite matrices.

    Args:
      a: device array ``(..., n, n)``.

    Returns:
      ``L`` with ``a = L L^H``; JAX's NaNs on and below the diagonal (zeros above) for a
      matrix that is not positive definite.

    Example:
      >>> cholesky(cupy.asarray([[4., 2.], [2., 2.]]))  # [[2, 0], [1, 1]]
    """
    return _cholesky(a)


def _cholesky(a, lwork: int | None = None):
    """:func:`cholesky`; ``lwork``: ``potrf``'s workspace size for ``a``, if known."""
    if a.size == 0:
        return cupy.zeros(a.shape, a.dtype)
    n = a.shape[-1]
    direct = _capturing_with(cusolver_direct, "potrf" if a.ndim == 2 else "potrfBatched",
                             a.dtype)
    if direct is not None:
        factor = _potrf_captured(direct, a, lwork)
    else:
        (factor,) = _guarded(lambda m: [cupy.linalg.cholesky(m).astype(a.dtype, copy=False)],
                             [a], [((n, n), a.dtype)])
    # potrf stops at the first non-positive pivot and leaves it on the diagonal: a factor is
    # good exactly when its diagonal is positive and finite
    diag = cupy.diagonal(factor, axis1=-2, axis2=-1)
    good = ((diag.real > 0) & cupy.isfinite(diag)).all(axis=-1) & _finite_matrices(a)
    nan_tril = cupy.tril(cupy.full(a.shape[-2:], np.nan, a.dtype))
    return cupy.where(good[..., None, None], factor, nan_tril)


class _ProgramSolver:
    """A program kernel (:func:`plax_cupy.kernels.program_kernel`) running a cuSOLVER routine
    with a workspace: it asks the routine's workspace size (``<routine>_bufferSize``, a host
    call) on the program's plain calls and hands it to ``solve``, so that a capture asks nothing
    of the library but the routine itself (see the module).

    Subclasses set ``routines`` (those whose sizes are asked: ``("potrf",)``, ``("getrf",)``,
    ``("geqrf", "orgqr")``...), ``sizes(direct, handle, a, **params)`` (the very size
    function the captured path falls back on, :func:`_potrf_lwork`..., so the two cannot
    disagree) and ``solve(a, lwork=..., **params)``; ``params`` are the equation's. A
    subclass whose batches of small matrices run a Jacobi routine (:class:`ProgramEigh`,
    :class:`ProgramSvd`) sets ``jacobi`` (a kind of :data:`plax_cupy.cusolver_direct.JACOBI`):
    for such a batch it hands ``sizes`` and ``solve`` a params object as ``params``: in a
    capture its own (made once, destroyed with the program, so it outlives every graph that
    recorded a call with it), on a plain call the calling thread's (:meth:`_params`).

    A direct call that fails on a plain call (a library returning an error status) is not the
    user's error: that call and every later one of the operand's signature run CuPy's path
    (``solve`` without a workspace size), and a capture re-raises the failure, so the program
    runs plainly with it as the reason in ``as_text()``.
    """

    routines: tuple = ()
    sizes = solve = None
    jacobi: str | None = None

    def __init__(self, **params):
        self.params = params
        self.lwork: dict = {}    # (operand shape, dtype) -> the workspace size, in elements
        self.failed: dict = {}   # (operand shape, dtype) -> the error of a failed direct call
        self.jacobi_params = None   # (the program's own params object: its captures')
        self.jacobi_failure: Exception | None = None   # (why none could be made: not retried)
        self._thread_params = threading.local()   # (.params: the calling thread's)
        self._lock = threading.Lock()

    def plan(self, a, capturing: bool) -> tuple:
        """``(routines, extra)`` for ``a``: the routines whose sizes are asked, and the
        keyword arguments (a Jacobi params object) ``sizes`` and ``solve`` take beyond the
        equation's."""
        if self.jacobi is None or not _jacobi_batch(a):
            return self.routines, {}
        return (cusolver_direct.JACOBI[self.jacobi][0],), {"params": self._params(capturing)}

    def _params(self, capturing: bool):
        """The Jacobi params object this call runs with (``None``: there is none, and the call
        takes another path): inside a capture the program's own, which its graphs replay with
        and which lives as long as the program; on a plain call the calling thread's.

        Why one per thread (cuSOLVER's API reference, cuSolverDN helper functions): a
        ``syevjInfo_t``/``gesvdjInfo_t`` holds the settings of the Jacobi routines
        (``cusolverDnCreateSyevjInfo`` makes one with the defaults of ``syevj``,
        ``syevjBatched`` and ``sygvj``; the ``SetTolerance``/``SetMaxSweeps``/``SetSortEig``
        setters change it) and is where a call leaves its results
        (``cusolverDnXsyevjGetResidual``/``GetSweeps`` read the residual and sweeps of the last
        ``syevj`` run with it, and answer ``CUSOLVER_STATUS_NOT_SUPPORTED`` after the batched
        routine, which reports none): a structure a call writes. The documentation lets the
        library be called from several host threads but nowhere lets two calls in flight
        (other threads, other streams) share one such object (its sibling cuSPARSE says
        outright that simultaneous writes of one object or handle are not safe). CuPy makes
        one per call. A program's plain calls may overlap from several threads
        (:class:`plax_cupy.graphs.GraphedProgram` serialises only captures and replays), so
        each thread keeps its own for its plain calls, and captures (under the device's lock)
        use the program's. All are made with cuSOLVER's defaults, so every call computes the
        same bits. A library that cannot make one (a missing creator,
        an allocation refused) is asked once: the failure is kept (:meth:`describe`), plain
        calls take CuPy's path and a capture fails with it as the reason."""
        if self.jacobi_failure is not None:
            return self._no_params(capturing)
        if capturing:
            held = self.jacobi_params
        else:
            held = getattr(self._thread_params, "params", None)
        if held is not None:
            return held
        direct = cusolver_direct.binding()
        if direct is None:
            return None
        made = None
        with self._lock:   # (only the attempt: nothing is called back while it is held)
            if self.jacobi_failure is None:   # (else another thread's attempt failed meanwhile)
                try:
                    made = cusolver_direct.JacobiParams(direct, self.jacobi)
                except (AttributeError, cusolver_direct.CUSOLVERError) as err:
                    self.jacobi_failure = err
                else:
                    if capturing:
                        self.jacobi_params = made
                    else:
                        self._thread_params.params = made
        return made if made is not None else self._no_params(capturing)

    def _no_params(self, capturing: bool):
        """What :meth:`_params` answers once no params object can be made: a capture fails
        with the reason, a plain call gets None (CuPy's path)."""
        if capturing:
            raise self.jacobi_failure
        return None

    def describe(self) -> str:
        """What ``as_text()`` says of this kernel's state (``""``: nothing to say): a Jacobi
        params object that could not be made, a direct call that failed on a plain call."""
        notes = []
        if self.jacobi_failure is not None:
            err = self.jacobi_failure
            notes.append(f"no {self.jacobi} params object ({type(err).__name__}: {err}): its "
                         "batches of small matrices run CuPy's path")
        for (shape, dtype), err in list(self.failed.items()):
            notes.append(f"{dtype}{list(shape)}: a direct call failed ({type(err).__name__}: "
                         f"{err}): CuPy's path")
        return "; ".join(notes)

    def __call__(self, a: "cupy.ndarray"):
        key = (a.shape, a.dtype.str)
        capturing = cupy.cuda.get_current_stream().is_capturing()
        failed = self.failed.get(key)
        if failed is not None:
            if capturing:
                raise failed
            return type(self).solve(a, **self.params)
        routines, extra = self.plan(a, capturing)
        if a.size and key not in self.lwork and self.needs_workspace(a) and not capturing \
                and None not in extra.values():
            direct = cusolver_direct.binding()
            if direct is not None and all(direct.has(r + "_bufferSize", a.dtype)
                                          for r in routines):
                try:
                    self.lwork[key] = type(self).sizes(direct, cusolver_direct.handle(), a,
                                                       **extra, **self.params)
                except cusolver_direct.CUSOLVERError:
                    # (the plain call needs no size: a capture asks again, and if the library
                    # refuses there too, the program runs plainly with that reason)
                    self.lwork[key] = None
        if extra.get("params", 0) is None:
            extra = {}   # (no params object: the per-matrix routine, or CuPy's path)
        try:
            return type(self).solve(a, lwork=self.lwork.get(key), **extra, **self.params)
        except cusolver_direct.CUSOLVERError as err:
            if capturing:
                raise
            self.failed[key] = err
            return type(self).solve(a, **self.params)

    def needs_workspace(self, a) -> bool:
        """Whether ``a``'s factorisation runs the routine with a workspace."""
        return True


#: matrices at most this large (both sides) in a batch run cuSOLVER's batched Jacobi routines
#: in a compiled program (``syevjBatched``, ``gesvdjBatched``: one call for the batch);
#: ``gesvdjBatched``'s limit, and where CuPy 14 runs them too (its ``eigh`` runs
#: ``syevjBatched`` for every batch, its ``svd`` ``gesvdjBatched`` up to 32 x 32)
JACOBI_LIMIT = 32


def _jacobi_batch(a) -> bool:
    """Whether ``a`` is a batch of matrices small enough for a batched Jacobi routine."""
    return a.ndim > 2 and max(a.shape[-2:]) <= JACOBI_LIMIT


def _potrf_lwork(direct, handle, a) -> int:
    """``potrf``'s workspace size for ``a``'s matrices (a host-only query)."""
    n = a.shape[-1]
    return direct.potrf_bufferSize(a.dtype, handle, CUBLAS_FILL_MODE_UPPER, n, a.data.ptr, n)


@program_kernel(cholesky_p)
class ProgramCholesky(_ProgramSolver):
    """The ``cholesky`` of one equation of a compiled program: :func:`cholesky`, with
    ``potrf``'s workspace size asked on the program's plain calls (a batch runs
    ``potrfBatched``, which takes none).

    Returns (when called on a device array): what :func:`cholesky` returns.

    Example:
      >>> run = ProgramCholesky()                                   # doctest: +SKIP
      >>> run(cupy.asarray([[4., 2.], [2., 2.]]))                   # [[2, 0], [1, 1]]
    """

    routines = ("potrf",)
    sizes = staticmethod(_potrf_lwork)
    solve = staticmethod(_cholesky)

    def needs_workspace(self, a) -> bool:
        return a.ndim == 2


def _capturing_with(module, routine: str, dtype):
    """The capturable binding of ``module`` (:mod:`plax_cupy.cublas_direct` or
    :mod:`plax_cupy.cusolver_direct`) when the current stream captures and the binding has
    ``routine`` for ``dtype``; else ``None`` (CuPy's own path: plain calls, or, with no
    binding at all, a capture that CuPy refuses).

    Raises:
      AttributeError: while capturing, the binding lacks ``routine`` (naming its C function:
        the capture's reason in ``as_text()``).
    """
    if not cupy.cuda.get_current_stream().is_capturing():
        return None
    direct = module.binding()
    if direct is None:
        return None
    try:
        direct._routine(routine, dtype)
    except (KeyError, TypeError):   # (a dtype the library has no routine for)
        return None
    # (a binding without the routine raised AttributeError naming its C function above:
    # the capture fails with that reason rather than CuPy's generic refusal)
    return direct


def _matrix_pointers(x):
    """A device array of the pointers of the matrices of C-contiguous ``x`` (``(batch, r,
    c)``), as CuPy makes them for its batched routines (``cupy.arange`` of the addresses)."""
    step = x.shape[-2] * x.shape[-1] * x.itemsize
    start = x.data.ptr
    return cupy.arange(start, start + step * x.shape[0], step, dtype=np.uintp)


def _potrf_captured(direct, a, lwork: int | None):
    """``cupy.linalg.cholesky(a)`` while the stream captures: the same copy of ``a``, the same
    ``potrf`` (one matrix) or ``potrfBatched`` (a batch) on its upper column-major triangle
    (the lower row-major one), then ``tril``; ``devInfo`` left unread on the device."""
    n = a.shape[-1]
    x = a.astype(a.dtype, order="C", copy=True)
    handle = cusolver_direct.handle_on_current_stream(direct)
    if a.ndim == 2:
        if lwork is None:   # (a body not run plainly first: a host-only query)
            lwork = _potrf_lwork(direct, handle, x)
        workspace = cupy.empty(lwork, a.dtype)
        info = cupy.empty(1, np.int32)
        direct.potrf(a.dtype, handle, CUBLAS_FILL_MODE_UPPER, n, x.data.ptr, n,
                     workspace.data.ptr, lwork, info.data.ptr)
        return cupy.tril(x)
    mats = x.reshape((-1, n, n))
    pointers = _matrix_pointers(mats)
    info = cupy.empty(mats.shape[0], np.int32)
    direct.potrfBatched(a.dtype, handle, CUBLAS_FILL_MODE_UPPER, n, pointers.data.ptr, n,
                        info.data.ptr, mats.shape[0])
    return cupy.tril(x)


@kernel(triangular_solve_p)
def triangular_solve(a: "cupy.ndarray", b: "cupy.ndarray", *, left_side: bool, lower: bool,
                     transpose_a: bool, conjugate_a: bool, unit_diagonal: bool) -> "cupy.ndarray":
    """Solves ``op(a) x = b`` (``left_side``) or ``x op(a) = b`` for a batch of triangular
    ``a``, where ``op`` transposes and/or conjugates as asked.

    Args:
      a: device array ``(..., k, k)``, read from its ``lower`` (else upper) triangle.
      b: device array ``(..., k, n)`` (``left_side``) or ``(..., n, k)``.

    Returns:
      ``x`` shaped as ``b``; a singular ``a`` gives infs/NaNs, as in JAX.

    Example:
      >>> triangular_solve(L, b, left_side=True, lower=True, transpose_a=False,
      ...                  conjugate_a=False, unit_diagonal=False)
    """
    if b.size == 0:
        return cupy.zeros(b.shape, b.dtype)
    if left_side:
        # op(a) x = b: trsm's own transpose modes; "conjugate only" conjugates a first
        trans = ("C" if conjugate_a else "T") if transpose_a else "N"
        if conjugate_a and not transpose_a:
            a = _conj(a)
        return _solve_triangular(a, b, trans, lower, unit_diagonal)
    # x op(a) = b  <=>  op(a)^T x^T = b^T
    if transpose_a:
        trans = "N"
        if conjugate_a:
            a = _conj(a)
    else:
        trans = "C" if conjugate_a else "T"
    bt = cupy.ascontiguousarray(cupy.swapaxes(b, -1, -2))
    x = _solve_triangular(a, bt, trans, lower, unit_diagonal)
    return cupy.ascontiguousarray(cupy.swapaxes(x, -1, -2))


def _conj(a):
    """The complex conjugate through the kernel table's ``conj`` (a plax-compiled kernel:
    CuPy's negates the imaginary parts with flushing float32 arithmetic); real ``a`` as it
    is."""
    if a.dtype.kind != "c":
        return a
    from plax import lax
    from plax_cupy import kernels
    return kernels.impls()[lax.conj_p](a)


def _solve_triangular(a, b, trans, lower, unit_diagonal):
    direct = _capturing_with(cublas_direct, "trsm" if a.ndim == 2 else "trsmBatched", a.dtype)
    if direct is not None and a.dtype == b.dtype:
        return _trsm_captured(direct, a, b, trans, lower, unit_diagonal)
    from cupyx.scipy.linalg import solve_triangular

    def solve(a_, b_):
        return [solve_triangular(a_, b_, trans=trans, lower=lower,
                                 unit_diagonal=unit_diagonal).astype(b.dtype, copy=False)]
    (x,) = _guarded(solve, [a, b], [(b.shape[-2:], b.dtype)])
    return x


def _trsm_captured(direct, a, b, trans: str, lower: bool, unit_diagonal: bool):
    """``cupyx.scipy.linalg.solve_triangular(a, b, trans, lower, unit_diagonal)`` (CuPy 14)
    while the stream captures: the same copies and layouts, the same ``trsm`` (one matrix) or
    ``trsmBatched`` (a batch: C-order matrices read as Fortran ones, so ``N``/``T`` swap and
    ``lower`` flips, complex ``C`` transposing ``a`` instead), ``alpha = 1`` from the host."""
    dtype = a.dtype
    if a.ndim == 2:
        op = {"N": CUBLAS_OP_N, "T": CUBLAS_OP_T, "C": CUBLAS_OP_C}[trans]
        # (Fortran order as transposes of C-order arrays: CuPy's ``cupy.array(a, order="F",
        # copy=None)`` and ``cupy.array(b, order="F", copy=True)``, the same memory layout)
        a_f = cupy.ascontiguousarray(a.T).T
        x = b.T.copy().T
        m, n = x.shape
        pointers = None
    else:
        count = int(np.prod(a.shape[:-2], dtype=np.int64))
        m, n = b.shape[-2:]
        mats = a.reshape(count, m, m)
        if trans == "C" and dtype.kind == "c":
            op, a_f = CUBLAS_OP_C, cupy.ascontiguousarray(mats.transpose(0, 2, 1))
        else:   # Fortran "upper" of a C-order matrix is its "lower" transposed
            op, lower = (CUBLAS_OP_T if trans == "N" else CUBLAS_OP_N), not lower
            a_f = cupy.ascontiguousarray(mats)
        x = cupy.ascontiguousarray(b.reshape(count, m, n).transpose(0, 2, 1))
        if x.data.ptr == b.data.ptr:   # (b itself: the solve must not write the input)
            x = x.copy()
        pointers = (_matrix_pointers(a_f), _matrix_pointers(x))
    one = np.ones((), dtype)
    uplo = CUBLAS_FILL_MODE_LOWER if lower else CUBLAS_FILL_MODE_UPPER
    diag = CUBLAS_DIAG_UNIT if unit_diagonal else CUBLAS_DIAG_NON_UNIT
    handle = cupy.cuda.device.get_cublas_handle()
    stream = cupy.cuda.get_current_stream().ptr
    if pointers is None:
        cublas_direct.call_with_host_scalars(
            direct, handle, stream, direct.trsm, dtype, handle, CUBLAS_SIDE_LEFT, uplo, op, diag,
            m, n, one.ctypes.data, a_f.data.ptr, m, x.data.ptr, m)
    else:
        cublas_direct.call_with_host_scalars(
            direct, handle, stream, direct.trsmBatched, dtype, handle, CUBLAS_SIDE_LEFT, uplo,
            op, diag, m, n, one.ctypes.data, pointers[0].data.ptr, m, pointers[1].data.ptr, m,
            len(pointers[0]))
    return x if pointers is None else x.transpose(0, 2, 1).reshape(b.shape)


#: CUDA source: the row permutations of a batch of LAPACK pivot vectors (one thread each)
LU_PERMUTATION_SOURCE = r"""
extern "C" __global__ void plax_lu_permutation(const int* __restrict__ pivots,
                                               int* __restrict__ perm,
                                               long long batch, int k, int m) {
  // one thread per matrix: apply the row swaps of LAPACK's pivots, in order, to 0..m-1
  for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < batch;
       b += (long long)blockDim.x * gridDim.x) {
    int* p = perm + b * m;
    const int* piv = pivots + b * k;
    for (int i = 0; i < m; ++i) p[i] = i;
    for (int i = 0; i < k; ++i) {
      int j = piv[i], t = p[i];
      p[i] = p[j];
      p[j] = t;
    }
  }
}
"""


def _permutation_from_pivots(pivots, m: int):
    """``(batch..., m)`` int32 row permutations from 0-based ``(batch..., k)`` pivots."""
    from plax_cupy.kernels_special import launch_raw
    batch = pivots.shape[:-1]
    k = pivots.shape[-1]
    n = int(np.prod(batch, dtype=np.int64))
    perm = cupy.empty(batch + (m,), np.int32)
    if n and m:
        launch_raw(LU_PERMUTATION_SOURCE, "plax_lu_permutation", n,
                   cupy.ascontiguousarray(pivots.astype(np.int32, copy=False)), perm,
                   np.int64(n), np.int32(k), np.int32(m))
    return perm


#: matrices at most this large (both sides) are factored by the generated batched kernel
SMALL_LU = 32

#: CUDA source: LU with partial pivoting of a batch of small matrices (one thread each)
SMALL_LU_SOURCE = r"""
struct plax_lu_c64 { float re, im; };
struct plax_lu_c128 { double re, im; };
// LAPACK's pivot measure: |x| for reals, |re| + |im| for complex values (i?amax's cabs1)
__device__ __forceinline__ float plax_lu_abs1(float x) { return fabsf(x); }
__device__ __forceinline__ double plax_lu_abs1(double x) { return fabs(x); }
__device__ __forceinline__ float plax_lu_abs1(plax_lu_c64 x) {
  return fabsf(x.re) + fabsf(x.im);
}
__device__ __forceinline__ double plax_lu_abs1(plax_lu_c128 x) {
  return fabs(x.re) + fabs(x.im);
}
template <typename T> __device__ __forceinline__ bool plax_lu_nonzero(T x) { return x != 0; }
template <typename C> __device__ __forceinline__ bool plax_lu_nonzero_c(C x) {
  return x.re != 0 || x.im != 0;
}
__device__ __forceinline__ bool plax_lu_nonzero(plax_lu_c64 x) { return plax_lu_nonzero_c(x); }
__device__ __forceinline__ bool plax_lu_nonzero(plax_lu_c128 x) { return plax_lu_nonzero_c(x); }
template <typename T> __device__ __forceinline__ T plax_lu_div(T a, T b) { return a / b; }
template <typename C> __device__ __forceinline__ C plax_lu_div_c(C a, C b) {
  // Smith's division (no overflow for large |b|)
  C q;
  if (fabs((double)b.re) >= fabs((double)b.im)) {
    auto r = b.im / b.re, d = b.re + b.im * r;
    q.re = (a.re + a.im * r) / d; q.im = (a.im - a.re * r) / d;
  } else {
    auto r = b.re / b.im, d = b.re * r + b.im;
    q.re = (a.re * r + a.im) / d; q.im = (a.im * r - a.re) / d;
  }
  return q;
}
__device__ __forceinline__ plax_lu_c64 plax_lu_div(plax_lu_c64 a, plax_lu_c64 b) {
  return plax_lu_div_c(a, b);
}
__device__ __forceinline__ plax_lu_c128 plax_lu_div(plax_lu_c128 a, plax_lu_c128 b) {
  return plax_lu_div_c(a, b);
}
// c - a * b
template <typename T> __device__ __forceinline__ T plax_lu_fms(T c, T a, T b) { return c - a * b; }
template <typename C> __device__ __forceinline__ C plax_lu_fms_c(C c, C a, C b) {
  C r;
  r.re = c.re - (a.re * b.re - a.im * b.im);
  r.im = c.im - (a.re * b.im + a.im * b.re);
  return r;
}
__device__ __forceinline__ plax_lu_c64 plax_lu_fms(plax_lu_c64 c, plax_lu_c64 a, plax_lu_c64 b) {
  return plax_lu_fms_c(c, a, b);
}
__device__ __forceinline__ plax_lu_c128 plax_lu_fms(plax_lu_c128 c, plax_lu_c128 a,
                                                     plax_lu_c128 b) {
  return plax_lu_fms_c(c, a, b);
}

// One thread per matrix: right-looking LU with partial pivoting (LAPACK's getf2), in place on
// a row-major (m, n) matrix; 0-based pivots and the row permutation they make.
template <typename T>
__device__ void plax_lu_small(T* __restrict__ a, int* __restrict__ pivots,
                              int* __restrict__ perm, long long batch, int m, int n) {
  int k = m < n ? m : n;
  for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < batch;
       b += (long long)blockDim.x * gridDim.x) {
    T* x = a + b * m * n;
    int* piv = pivots + b * k;
    int* p = perm + b * m;
    for (int i = 0; i < m; ++i) p[i] = i;
    for (int j = 0; j < k; ++j) {
      int best_row = j;
      auto best = plax_lu_abs1(x[j * n + j]);
      for (int i = j + 1; i < m; ++i) {
        auto v = plax_lu_abs1(x[i * n + j]);
        if (v > best) { best = v; best_row = i; }
      }
      piv[j] = best_row;
      if (plax_lu_nonzero(x[best_row * n + j])) {
        if (best_row != j) {
          for (int c = 0; c < n; ++c) {
            T t = x[j * n + c]; x[j * n + c] = x[best_row * n + c]; x[best_row * n + c] = t;
          }
          int t = p[j]; p[j] = p[best_row]; p[best_row] = t;
        }
        for (int i = j + 1; i < m; ++i) x[i * n + j] = plax_lu_div(x[i * n + j], x[j * n + j]);
      }
      for (int i = j + 1; i < m; ++i)
        for (int c = j + 1; c < n; ++c)
          x[i * n + c] = plax_lu_fms(x[i * n + c], x[i * n + j], x[j * n + c]);
    }
  }
}

extern "C" __global__ void plax_lu_small_f32(float* a, int* piv, int* perm,
                                         long long batch, int m, int n) {
  plax_lu_small<float>(a, piv, perm, batch, m, n);
}
extern "C" __global__ void plax_lu_small_f64(double* a, int* piv, int* perm,
                                         long long batch, int m, int n) {
  plax_lu_small<double>(a, piv, perm, batch, m, n);
}
extern "C" __global__ void plax_lu_small_c64(plax_lu_c64* a, int* piv, int* perm,
                                         long long batch, int m, int n) {
  plax_lu_small<plax_lu_c64>(a, piv, perm, batch, m, n);
}
extern "C" __global__ void plax_lu_small_c128(plax_lu_c128* a, int* piv, int* perm,
                                         long long batch, int m, int n) {
  plax_lu_small<plax_lu_c128>(a, piv, perm, batch, m, n);
}
"""

#: dtype name -> the kernel of :data:`SMALL_LU_SOURCE` for it
SMALL_LU_ENTRY = {"float32": "plax_lu_small_f32", "float64": "plax_lu_small_f64",
                   "complex64": "plax_lu_small_c64", "complex128": "plax_lu_small_c128"}


def _small_lu(mats):
    """Every ``(m, n)`` matrix of ``mats`` (``(batch, m, n)``) factored by one launch of the
    generated kernel (one thread per matrix): ``(lu, pivots, permutation)``."""
    from plax_cupy.kernels_special import launch_raw
    count, m, n = mats.shape
    lu_ = mats.astype(mats.dtype, order="C", copy=True)  # factored in place
    pivots = cupy.empty((count, min(m, n)), np.int32)
    perm = cupy.empty((count, m), np.int32)
    launch_raw(SMALL_LU_SOURCE, SMALL_LU_ENTRY[mats.dtype.name], count, lu_, pivots, perm,
               np.int64(count), np.int32(m), np.int32(n))
    return lu_, pivots, perm


def _getrf_lwork(direct, handle, a) -> int:
    """``getrf``'s workspace size for ``a``'s matrices (a host-only query)."""
    m, n = a.shape[-2:]
    return direct.getrf_bufferSize(a.dtype, handle, m, n, a.data.ptr, m)


def _getrf_captured(direct, x, lwork: int | None):
    """``cupyx.scipy.linalg.lu_factor(x, check_finite=False)`` while the stream captures: the
    same Fortran-order copy, ``getrf`` with its workspace, the pivots made 0-based on the
    device; ``devInfo`` left unread (CuPy reads it to warn of an exactly singular ``U``)."""
    m, n = x.shape
    f = x.T.copy().T   # (CuPy's ``x.astype(dtype, order="F", copy=True)``: the same layout)
    handle = cusolver_direct.handle_on_current_stream(direct)
    if lwork is None:   # (a body not run plainly first: a host-only query)
        lwork = _getrf_lwork(direct, handle, f)
    workspace = cupy.empty(lwork, x.dtype)
    pivots = cupy.empty((min(m, n),), np.intc)
    info = cupy.empty(1, np.int32)
    direct.getrf(x.dtype, handle, m, n, f.data.ptr, m, workspace.data.ptr, pivots.data.ptr,
                 info.data.ptr)
    pivots -= 1
    return f, pivots


@kernel(lu_p)
def lu(a: "cupy.ndarray") -> list:
    """LU factorisation with partial pivoting of a batch of ``(m, n)`` matrices.

    Args:
      a: device array ``(..., m, n)``.

    Returns:
      ``[lu, pivots, permutation]``: ``L`` (unit diagonal, not stored) and ``U`` packed in
      one array, the 0-based int32 row swaps (``min(m, n)``) and the resulting permutation of
      the ``m`` rows. A singular matrix still gets its factors, as in JAX.

    Example:
      >>> lu_, piv, perm = lu(cupy.asarray([[1., 2.], [3., 4.]]))  # piv [1, 1], perm [1, 0]
    """
    return _lu(a)


def _lu(a, lwork: int | None = None) -> list:
    """:func:`lu`; ``lwork``: ``getrf``'s workspace size for ``a``'s matrices, if known."""
    from cupyx.scipy.linalg import lu_factor
    m, n = a.shape[-2:]
    k = min(m, n)
    batch = a.shape[:-2]
    if a.size == 0:
        pivots = cupy.broadcast_to(cupy.arange(k, dtype=np.int32), batch + (k,)).copy()
        perm = cupy.broadcast_to(cupy.arange(m, dtype=np.int32), batch + (m,)).copy()
        return [cupy.zeros(a.shape, a.dtype), pivots, perm]
    mats = a.reshape((-1, m, n))
    if max(m, n) <= SMALL_LU:
        lu_, piv, perm = _small_lu(mats)
        return [lu_.reshape(a.shape), piv.reshape(batch + (k,)), perm.reshape(batch + (m,))]
    factors, pivots = [], []
    with warnings.catch_warnings():
        # CuPy warns on an exactly singular U (reading getrf's flag); JAX returns it as is
        warnings.simplefilter("ignore", RuntimeWarning)
        direct = _capturing_with(cusolver_direct, "getrf", a.dtype)
        for x in mats:  # cuSOLVER's getrf takes one matrix per call
            f, p = (lu_factor(x, check_finite=False) if direct is None
                    else _getrf_captured(direct, x, lwork))
            factors.append(f)
            pivots.append(p)
    lu_ = cupy.ascontiguousarray(cupy.stack(factors)).astype(a.dtype, copy=False)
    piv = cupy.stack(pivots).astype(np.int32, copy=False)
    perm = _permutation_from_pivots(piv, m)
    return [lu_.reshape(a.shape), piv.reshape(batch + (k,)), perm.reshape(batch + (m,))]


@program_kernel(lu_p)
class ProgramLu(_ProgramSolver):
    """The ``lu`` of one equation of a compiled program: :func:`lu`, with ``getrf``'s
    workspace size asked on the program's plain calls (matrices larger than :data:`SMALL_LU`;
    smaller ones are the generated kernel's).

    Returns (when called on a device array): what :func:`lu` returns.

    Example:
      >>> lu_, piv, perm = ProgramLu()(cupy.eye(40))                 # doctest: +SKIP
    """

    routines = ("getrf",)
    sizes = staticmethod(_getrf_lwork)
    solve = staticmethod(_lu)

    def needs_workspace(self, a) -> bool:
        return max(a.shape[-2:]) > SMALL_LU


def _qr_lwork(direct, handle, a, full_matrices: bool) -> tuple:
    """``geqrf``'s and ``orgqr``'s workspace sizes for ``a``'s matrices (host-only queries,
    with CuPy's leading dimensions)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    mc = m if full_matrices and m > n else k
    return (direct.geqrf_bufferSize(a.dtype, handle, m, n, a.data.ptr, n),   # (CuPy's lda)
            direct.orgqr_bufferSize(a.dtype, handle, m, mc, k, a.data.ptr, m, a.data.ptr))


def _geqrf_orgqr_captured(direct, a, full_matrices: bool, lwork: tuple | None):
    """``cupy.linalg.qr(a, mode)`` (CuPy 14: one matrix, or a batch through
    ``cupyx.cusolver._geqrf_orgqr_batched``) while the stream captures: the same transposed
    copy, ``geqrf`` per matrix on one workspace, ``R`` from its upper triangle, ``Q`` made by
    ``orgqr``/``ungqr`` per matrix on a second; ``devInfo`` left unread."""
    m, n = a.shape[-2:]
    k = min(m, n)
    x = cupy.swapaxes(a, -2, -1).astype(a.dtype, order="C", copy=True).reshape(-1, n, m)
    count, size = x.shape[0], a.dtype.itemsize
    handle = cusolver_direct.handle_on_current_stream(direct)
    lw_qr, lw_q = lwork or _qr_lwork(direct, handle, a, full_matrices)
    workspace = cupy.empty(lw_qr, a.dtype)
    tau = cupy.empty((count, k), a.dtype)
    info = cupy.empty(count, np.int32)
    for i in range(count):   # (CuPy's geqrf loop: one matrix per call)
        direct.geqrf(a.dtype, handle, m, n, x.data.ptr + i * m * n * size, m,
                     tau.data.ptr + i * k * size, workspace.data.ptr, lw_qr,
                     info.data.ptr + 4 * i)
    mc = m if full_matrices and m > n else k
    q = cupy.empty((count, max(mc, n), m), a.dtype)
    q[:, :n, :] = x
    workspace_q = cupy.empty(lw_q, a.dtype)
    for i in range(count):   # (and its orgqr loop)
        direct.orgqr(a.dtype, handle, m, mc, k, q.data.ptr + i * m * q.shape[1] * size, m,
                     tau.data.ptr + i * k * size, workspace_q.data.ptr, lw_q,
                     info.data.ptr + 4 * i)
    lead = a.shape[:-2]
    q = cupy.swapaxes(q[:, :mc, :], -2, -1).reshape(lead + (m, mc))
    r = cupy.triu(cupy.swapaxes(x[:, :, :mc], -2, -1)).reshape(lead + (mc, n))
    return q, r


@kernel(qr_p)
def qr(a: "cupy.ndarray", *, full_matrices: bool) -> list:
    """QR factorisation of a batch of matrices.

    Args:
      a: device array ``(..., m, n)``.
      full_matrices: ``q`` is ``(m, m)`` if True, else ``(m, min(m, n))``.

    Returns:
      ``[q, r]``.

    Example:
      >>> q, r = qr(cupy.eye(3), full_matrices=True)
    """
    return _qr(a, full_matrices)


def _qr(a, full_matrices: bool, lwork: tuple | None = None) -> list:
    """:func:`qr`; ``lwork``: ``geqrf``'s and ``orgqr``'s workspace sizes, if known."""
    if a.size == 0:
        return qr_of_empty(a, full_matrices, xp=cupy)
    direct = _capturing_with(cusolver_direct, "geqrf", a.dtype)
    if direct is not None and direct.has("orgqr", a.dtype):
        q, r = _geqrf_orgqr_captured(direct, a, full_matrices, lwork)
    else:
        q, r = cupy.linalg.qr(a, mode="complete" if full_matrices else "reduced")
    return [q.astype(a.dtype, copy=False), r.astype(a.dtype, copy=False)]


@program_kernel(qr_p)
class ProgramQr(_ProgramSolver):
    """The ``qr`` of one equation of a compiled program: :func:`qr`, with ``geqrf``'s and
    ``orgqr``'s (``ungqr``'s) workspace sizes asked on the program's plain calls.

    Args:
      full_matrices: as :func:`qr`.

    Returns (when called on a device array): what :func:`qr` returns.

    Example:
      >>> q, r = ProgramQr(full_matrices=False)(cupy.eye(3))          # doctest: +SKIP
    """

    routines = ("geqrf", "orgqr")
    sizes = staticmethod(_qr_lwork)
    solve = staticmethod(_qr)


@kernel(eigh_p)
def eigh(a: "cupy.ndarray", *, lower: bool) -> list:
    """Eigendecomposition of a batch of Hermitian matrices.

    Args:
      a: device array ``(..., n, n)``, read from its ``lower`` (else upper) triangle.

    Returns:
      ``[v, w]``: eigenvectors (columns) and ascending real eigenvalues; NaNs for a matrix
      with non-finite entries or that cuSOLVER did not converge on, as in JAX (the latter
      where ``syevd`` runs directly, :class:`ProgramEigh`; through CuPy's ``eigh`` only
      under ``cupyx.seterr(linalg="raise")``, :func:`_guarded`).

    Example:
      >>> v, w = eigh(cupy.asarray([[2., 1.], [1., 2.]]), lower=True)  # w [1, 3]
    """
    return _eigh(a, lower)


def _direct_solver(routine: str, dtype, lwork):
    """The cuSOLVER binding ``eigh``/``svd`` run on: while the stream captures, or on a
    program's plain calls once its workspace size is known (``lwork``), so that a program's
    plain and replayed calls run the same routine; else ``None`` (CuPy's path)."""
    direct = _capturing_with(cusolver_direct, routine, dtype)
    if direct is not None or lwork is None:
        return direct
    direct = cusolver_direct.binding()
    return direct if direct is not None and direct.has(routine, dtype) else None


def _eigh(a, lower: bool, lwork: int | None = None, params=None) -> list:
    """:func:`eigh`; ``lwork``: ``syevd``'s workspace size for ``a``'s matrices, if known;
    ``params``: a ``syevjInfo_t`` (:class:`plax_cupy.cusolver_direct.JacobiParams`), given
    by :class:`ProgramEigh` for a batch of small matrices: ``syevjBatched`` runs instead (and
    ``lwork`` is its size for the batch)."""
    rdt = _real_dtype(a.dtype)
    if a.size == 0:
        return [cupy.zeros(a.shape, a.dtype), cupy.zeros(a.shape[:-1], rdt)]
    finite = _finite_matrices(a)
    safe = cupy.where(finite[..., None, None], a, cupy.zeros((), a.dtype))
    n = a.shape[-1]
    bad = ~finite
    direct = _direct_solver("syevd" if params is None else "syevjBatched", a.dtype, lwork)
    if direct is not None:
        v, w, info = _syevd_direct(direct, safe, lower, lwork, params)
        bad |= info != 0
    else:
        w, v = _guarded(lambda m: cupy.linalg.eigh(m, UPLO="L" if lower else "U"), [safe],
                        [((n,), rdt), ((n, n), a.dtype)])
    return [_nan_where(bad, v.astype(a.dtype, copy=False), 2),
            _nan_where(bad, w.astype(rdt, copy=False), 1)]


def _syevd_lwork(direct, handle, a, lower: bool, params=None) -> int:
    """``syevd``'s (``heevd``'s) workspace size for ``a``'s matrices, eigenvectors asked (a
    host-only query); with ``params``, ``syevjBatched``'s for the whole batch."""
    n = a.shape[-1]
    uplo = CUBLAS_FILL_MODE_LOWER if lower else CUBLAS_FILL_MODE_UPPER
    vector = cusolver_direct.CUSOLVER_EIG_MODE_VECTOR
    if params is not None:
        return direct.syevjBatched_bufferSize(a.dtype, handle, vector, uplo, n, a.data.ptr, n,
                                              a.data.ptr, params.ptr, _batch_count(a))
    return direct.syevd_bufferSize(a.dtype, handle, vector, uplo, n, a.data.ptr, n, a.data.ptr)


def _batch_count(a) -> int:
    return int(np.prod(a.shape[:-2], dtype=np.int64))


@program_kernel(eigh_p)
class ProgramEigh(_ProgramSolver):
    """The ``eigh`` of one equation of a compiled program: :func:`eigh` through the direct
    binding (:mod:`plax_cupy.cusolver_direct`) on every call, plain or captured, with the
    workspace size asked on the plain calls: a batch of matrices up to :data:`JACOBI_LIMIT`
    in one ``syevjBatched``/``heevjBatched`` call on a params object the program owns
    (cuSOLVER's defaults, as CuPy's), other operands ``syevd``/``heevd`` matrix by matrix;
    CuPy's ``eigh`` only where the binding, a routine or its size query is missing, or a
    direct call failed on a plain call.

    Args:
      lower: as :func:`eigh`.

    Returns (when called on a device array): what :func:`eigh` returns.

    Example:
      >>> v, w = ProgramEigh(lower=True)(cupy.eye(3))                # doctest: +SKIP
    """

    routines = ("syevd",)
    jacobi = "syevj"
    sizes = staticmethod(_syevd_lwork)
    solve = staticmethod(_eigh)


def _syevd_direct(direct, a, lower: bool, lwork: int | None, params=None):
    """``syevd``/``heevd`` of each matrix of ``a`` (finite), as CuPy's ``_syevd`` calls it on
    one: a column-major copy (``lda = n``), the ``lower`` (else upper) triangle, eigenvectors
    over the copy; one device workspace for the batch; ``devInfo`` per matrix, left on the
    device. With ``params`` (a ``syevjInfo_t``), one ``syevjBatched`` call for the batch
    instead, with the layout of CuPy's ``_syevj_batched`` (the same copy, the eigenvalues
    contiguous). Returns ``(v, w, info)`` shaped as ``a``'s batch."""
    n = a.shape[-1]
    lead = a.shape[:-2]
    x = cupy.swapaxes(a, -2, -1).astype(a.dtype, order="C", copy=True).reshape(-1, n, n)
    count, size = x.shape[0], a.dtype.itemsize
    w = cupy.empty((count, n), _real_dtype(a.dtype))
    info = cupy.empty(count, np.int32)
    handle = cusolver_direct.handle_on_current_stream(direct)
    if lwork is None:   # (a body not run plainly first: a host-only query)
        lwork = _syevd_lwork(direct, handle, a, lower, params)
    workspace = cupy.empty(lwork, a.dtype)
    uplo = CUBLAS_FILL_MODE_LOWER if lower else CUBLAS_FILL_MODE_UPPER
    vector = cusolver_direct.CUSOLVER_EIG_MODE_VECTOR
    if params is not None:
        direct.syevjBatched(a.dtype, handle, vector, uplo, n, x.data.ptr, n, w.data.ptr,
                            workspace.data.ptr, lwork, info.data.ptr, params.ptr, count)
    else:
        for i in range(count):   # (syevd takes one matrix per call)
            direct.syevd(a.dtype, handle, vector, uplo, n, x.data.ptr + i * n * n * size, n,
                         w.data.ptr + i * n * w.itemsize, workspace.data.ptr, lwork,
                         info.data.ptr + 4 * i)
    v = cupy.swapaxes(x, -2, -1).reshape(a.shape)
    return v, w.reshape(lead + (n,)), info.reshape(lead)


@kernel(svd_p)
def svd(a: "cupy.ndarray", *, full_matrices: bool, compute_uv: bool) -> list:
    """Singular value decomposition of a batch of matrices.

    Args:
      a: device array ``(..., m, n)``.
      full_matrices: ``u``/``vh`` square (True) or reduced to ``min(m, n)``.
      compute_uv: whether to return ``u`` and ``vh``.

    Returns:
      ``[s]`` or ``[s, u, vh]`` (descending real ``s``); NaNs for a matrix with non-finite
      entries or that cuSOLVER did not converge on, as in JAX (the latter where ``gesvd``
      runs directly, :class:`ProgramSvd`; through CuPy's ``svd`` only under
      ``cupyx.seterr(linalg="raise")``, :func:`_guarded`).

    Example:
      >>> (s,) = svd(cupy.eye(2), full_matrices=False, compute_uv=False)  # [1, 1]
    """
    return _svd(a, full_matrices, compute_uv)


def _svd(a, full_matrices: bool, compute_uv: bool, lwork: int | None = None,
         params=None) -> list:
    """:func:`svd`; ``lwork``: ``gesvd``'s workspace size for ``a``'s matrices, if known;
    ``params``: a ``gesvdjInfo_t`` (:class:`plax_cupy.cusolver_direct.JacobiParams`), given
    by :class:`ProgramSvd` for a batch of small matrices: ``gesvdjBatched`` runs instead (and
    ``lwork`` is its size for the batch)."""
    m, n = a.shape[-2:]
    k = min(m, n)
    rdt = _real_dtype(a.dtype)
    mu, nv = (m, n) if full_matrices else (k, k)
    if a.size == 0:
        return svd_of_empty(a, full_matrices, compute_uv, xp=cupy)
    finite = _finite_matrices(a)
    safe = cupy.where(finite[..., None, None], a, cupy.zeros((), a.dtype))
    bad = ~finite
    direct = _direct_solver("gesvd" if params is None else "gesvdjBatched", a.dtype, lwork)
    if direct is not None:
        s, u, vh, info = (_gesvd_direct(direct, safe, full_matrices, compute_uv, lwork)
                          if params is None else
                          _gesvdj_batched(direct, safe, full_matrices, compute_uv, lwork, params))
        bad |= info != 0
    elif not compute_uv:
        (s,) = _guarded(lambda x: [cupy.linalg.svd(x, compute_uv=False)], [safe], [((k,), rdt)])
    else:
        u, s, vh = _guarded(lambda x: cupy.linalg.svd(x, full_matrices=full_matrices), [safe],
                            [((m, mu), a.dtype), ((k,), rdt), ((nv, n), a.dtype)])
    s = _nan_where(bad, s.astype(rdt, copy=False), 1)
    if not compute_uv:
        return [s]
    return [s, _nan_where(bad, u.astype(a.dtype, copy=False), 2),
            _nan_where(bad, vh.astype(a.dtype, copy=False), 2)]


def _gesvd_shape(a) -> tuple:
    """``(m, n, wide)``: the column-major matrix ``gesvd`` factors for each ``(r, c)`` matrix
    of ``a`` as CuPy's ``svd`` lays it out (``m >= n``, which ``gesvd`` needs): a wide or
    square matrix's C-order copy read as its ``(c, r)`` transpose (``wide``), a tall one's
    transpose copied, read as itself."""
    r, c = a.shape[-2:]
    return (c, r, True) if c >= r else (r, c, False)


def _gesvd_lwork(direct, handle, a, params=None, compute_uv: bool = True, **_jobs) -> int:
    """``gesvd``'s workspace size for ``a``'s matrices (a host-only query; the same for
    every job, ``_jobs`` being ``svd``'s ``full_matrices``); with ``params``,
    ``gesvdjBatched``'s for the whole batch, with :func:`_gesvdj_batched`'s arguments."""
    if params is not None:
        m, n = a.shape[-2:]
        jobz = cusolver_direct.CUSOLVER_EIG_MODE_VECTOR if compute_uv else \
            cusolver_direct.CUSOLVER_EIG_MODE_NOVECTOR
        return direct.gesvdjBatched_bufferSize(a.dtype, handle, jobz, m, n, a.data.ptr, m,
                                               a.data.ptr, a.data.ptr, m, a.data.ptr, n,
                                               params.ptr, _batch_count(a))
    m, n, _ = _gesvd_shape(a)
    return direct.gesvd_bufferSize(a.dtype, handle, m, n)


@program_kernel(svd_p)
class ProgramSvd(_ProgramSolver):
    """The ``svd`` of one equation of a compiled program: :func:`svd` through the direct
    binding (:mod:`plax_cupy.cusolver_direct`) on every call, plain or captured, with the
    workspace size asked on the plain calls: a batch of matrices up to :data:`JACOBI_LIMIT`
    x :data:`JACOBI_LIMIT` in one ``gesvdjBatched`` call on a params object the program owns
    (as CuPy runs such a batch), other operands ``gesvd`` matrix by matrix (as CuPy runs one
    matrix); CuPy's ``svd`` only where the binding, a routine or its size query is missing,
    or a direct call failed on a plain call.

    Args:
      full_matrices, compute_uv: as :func:`svd`.

    Returns (when called on a device array): what :func:`svd` returns.

    Example:
      >>> s, u, vh = ProgramSvd(full_matrices=False, compute_uv=True)(cupy.eye(3))  # doctest: +SKIP
    """

    routines = ("gesvd",)
    jacobi = "gesvdj"
    sizes = staticmethod(_gesvd_lwork)
    solve = staticmethod(_svd)


def _gesvd_direct(direct, a, full_matrices: bool, compute_uv: bool, lwork: int | None):
    """``gesvd`` of each matrix of ``a`` (finite) with the layouts and jobs of CuPy's ``svd``
    of one matrix (CuPy 14, ``cupy/linalg/_decomposition.py``): the ``m >= n`` copy of
    :func:`_gesvd_shape`; full matrices: ``U`` (``jobu 'A'``) to its own array, ``VT`` over
    the copy (``jobvt 'O'``); reduced: ``U`` over the copy (``'O'``), ``VT`` to its own array
    (``'S'``); values only: ``'N'``, ``'N'``. One device workspace for the batch, no
    ``rwork``, ``devInfo`` per matrix left on the device. Returns ``(s, u, vh, info)``
    shaped as ``a``'s batch (``u``, ``vh`` ``None`` without ``compute_uv``)."""
    lead = a.shape[:-2]
    m, n, wide = _gesvd_shape(a)
    mats = a.reshape((-1,) + a.shape[-2:])
    x = (mats if wide else cupy.swapaxes(mats, -2, -1)).astype(a.dtype, order="C", copy=True)
    count, size, dtype = x.shape[0], a.dtype.itemsize, a.dtype
    s = cupy.empty((count, n), _real_dtype(dtype))
    info = cupy.empty(count, np.int32)
    if not compute_uv:
        jobs, u, vt, u_step, vt_step = (ord("N"), ord("N")), None, None, 0, 0
    elif full_matrices:
        u, vt = cupy.empty((count, m, m), dtype), x[:, :, :n]
        jobs, u_step, vt_step = (ord("A"), ord("O")), m * m, m * n
    else:
        u, vt = x, cupy.empty((count, n, n), dtype)
        jobs, u_step, vt_step = (ord("O"), ord("S")), m * n, n * n
    handle = cusolver_direct.handle_on_current_stream(direct)
    if lwork is None:   # (a body not run plainly first: a host-only query)
        lwork = _gesvd_lwork(direct, handle, a)
    workspace = cupy.empty(lwork, dtype)
    for i in range(count):   # (gesvd takes one matrix per call)
        direct.gesvd(dtype, handle, *jobs, m, n, x.data.ptr + i * m * n * size, m,
                     s.data.ptr + i * n * s.itemsize,
                     0 if u is None else u.data.ptr + i * u_step * size, m,
                     0 if vt is None else vt.data.ptr + i * vt_step * size, n,
                     workspace.data.ptr, lwork, 0, info.data.ptr + 4 * i)
    s, info = s.reshape(lead + (n,)), info.reshape(lead)
    if not compute_uv:
        return s, None, None, info
    # (C-order views of column-major U and VT are their transposes: a^T = U S VT for a wide
    # matrix, so a = VT^T S U^T; a tall one's a = U S VT)
    u_out, vh_out = (vt, u) if wide else (cupy.swapaxes(u, -2, -1), cupy.swapaxes(vt, -2, -1))
    return (s, u_out.reshape(lead + u_out.shape[-2:]), vh_out.reshape(lead + vh_out.shape[-2:]),
            info)


def _gesvdj_batched(direct, a, full_matrices: bool, compute_uv: bool, lwork: int | None,
                    params):
    """One ``gesvdjBatched`` call for the matrices of ``a`` (finite, each at most
    :data:`JACOBI_LIMIT` x :data:`JACOBI_LIMIT`) with the layout of CuPy 14's
    ``_gesvdj_batched``: column-major copies (``lda = m``), full column-major ``U``
    (``m x m``) and ``V`` (``n x n``) in their own arrays, cut to ``min(m, n)`` columns for
    reduced matrices; ``info`` per matrix left on the device. Returns ``(s, u, vh, info)``
    shaped as ``a``'s batch (``u``, ``vh`` ``None`` without ``compute_uv``)."""
    lead = a.shape[:-2]
    m, n = a.shape[-2:]
    k, dtype = min(m, n), a.dtype
    x = cupy.swapaxes(a.reshape((-1, m, n)), -2, -1).astype(dtype, order="C", copy=True)
    count = x.shape[0]
    s = cupy.empty((count, k), _real_dtype(dtype))
    u, v = cupy.empty((count, m, m), dtype), cupy.empty((count, n, n), dtype)
    info = cupy.empty(count, np.int32)
    jobz = cusolver_direct.CUSOLVER_EIG_MODE_VECTOR if compute_uv else \
        cusolver_direct.CUSOLVER_EIG_MODE_NOVECTOR
    handle = cusolver_direct.handle_on_current_stream(direct)
    if lwork is None:   # (a body not run plainly first: a host-only query)
        lwork = _gesvd_lwork(direct, handle, a, params, compute_uv)
    workspace = cupy.empty(lwork, dtype)
    direct.gesvdjBatched(dtype, handle, jobz, m, n, x.data.ptr, m, s.data.ptr, u.data.ptr, m,
                         v.data.ptr, n, workspace.data.ptr, lwork, info.data.ptr, params.ptr,
                         count)
    s, info = s.reshape(lead + (k,)), info.reshape(lead)
    if not compute_uv:
        return s, None, None, info
    # (a C-order view of column-major U is U^T; of V, V^T, whose conjugate is V^H)
    u_out, vh_out = cupy.swapaxes(u, -2, -1), _conj(v)
    if not full_matrices:
        u_out, vh_out = u_out[..., :k], vh_out[..., :k, :]
    return (s, u_out.reshape(lead + u_out.shape[-2:]), vh_out.reshape(lead + vh_out.shape[-2:]),
            info)


#: CUDA source: LAPACK's normalisation of a batch of eigenvector matrices, one thread per
#: column (compiled by plax with ``-ftz=false``: CuPy's own ``sqrt``/``sum``/``abs``/``argmax``
#: kernels flush float32 subnormals, so a vector of subnormal norm came out zero or NaN).
#: Scaled two-pass 2-norm (the largest part first, as LAPACK's ``nrm2``, so neither tiny nor
#: huge components under- or overflow), in double for complex64; the largest-magnitude
#: component (first of equals, on ``re^2 + im^2`` as LAPACK's ``geev``) is turned real and
#: positive unless it already is real, its imaginary part set to exactly zero (as ``geev``
#: does); a zero column stays zero. ``conjugate`` conjugates the input first (left vectors).
UNIT_COLUMNS_SOURCE = r"""
template <typename T, typename A>
__device__ void plax_unit_columns(const plax_complex<T>* __restrict__ v,
                                  plax_complex<T>* __restrict__ out, long long columns, int n,
                                  int conjugate) {
  for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < columns;
       c += (long long)blockDim.x * gridDim.x) {
    const long long base = (c / n) * (long long)n * n + c % n;
    const A sign = conjugate ? (A)-1 : (A)1;
    A scale = 0;
    for (int i = 0; i < n; ++i) {
      const plax_complex<T> z = v[base + (long long)i * n];
      const A re = fabs((A)z.re), im = fabs((A)z.im);
      if (re > scale || re != re) scale = re;
      if (im > scale || im != im) scale = im;
    }
    A ssq = 0;
    if (scale > 0 && scale == scale) {
      for (int i = 0; i < n; ++i) {
        const plax_complex<T> z = v[base + (long long)i * n];
        const A re = (A)z.re / scale, im = (A)z.im / scale;
        ssq += re * re + im * im;
      }
    }
    const A norm = scale * sqrt(ssq);
    const A divisor = norm == 0 ? (A)1 : norm;
    int big = 0;
    A best = -1;
    for (int i = 0; i < n; ++i) {
      const plax_complex<T> z = v[base + (long long)i * n];
      const A re = (A)z.re / divisor, im = sign * (A)z.im / divisor;
      const A size = re * re + im * im;
      if (size > best) { best = size; big = i; }
    }
    const plax_complex<T> zp = v[base + (long long)big * n];
    const A pre = (A)zp.re / divisor, pim = sign * (A)zp.im / divisor;
    const A psize = sqrt(pre * pre + pim * pim);
    const bool turn = pim != 0 && psize != 0;
    for (int i = 0; i < n; ++i) {
      const plax_complex<T> z = v[base + (long long)i * n];
      A re = (A)z.re / divisor, im = sign * (A)z.im / divisor;
      if (turn) {  // times conj(pivot) / |pivot|
        const A r = (re * pre + im * pim) / psize, m = (im * pre - re * pim) / psize;
        re = r;
        im = i == big ? (A)0 : m;
      }
      out[base + (long long)i * n] = plax_cplx<T>((T)re, (T)im);
    }
  }
}
extern "C" __global__ void plax_unit_columns_c64(const plax_c64* v, plax_c64* out,
                                                 long long columns, int n, int conjugate) {
  plax_unit_columns<float, double>(v, out, columns, n, conjugate);
}
extern "C" __global__ void plax_unit_columns_c128(const plax_c128* v, plax_c128* out,
                                                  long long columns, int n, int conjugate) {
  plax_unit_columns<double, double>(v, out, columns, n, conjugate);
}
"""


def _unit_columns(v, conjugate: bool = False):
    """Each column of ``v`` (``(..., n, n)`` complex64/complex128; conjugated first where
    ``conjugate``) scaled to unit 2-norm and, where its largest-magnitude entry is not real,
    turned so that entry is real and positive: LAPACK's normalisation of ``geev``'s
    eigenvectors (a real eigenvector of a real matrix keeps its sign). One plax-compiled
    kernel (:data:`UNIT_COLUMNS_SOURCE`), so float32 subnormals are kept."""
    from plax_cupy.kernels_special import launch_raw
    n = v.shape[-1]
    v = cupy.ascontiguousarray(v)
    out = cupy.empty(v.shape, v.dtype)
    columns = v.size // n if n else 0
    if columns:
        entry = "plax_unit_columns_c64" if v.dtype == np.complex64 else "plax_unit_columns_c128"
        launch_raw(UNIT_COLUMNS_SOURCE, entry, columns, v, out, np.int64(columns), np.int32(n),
                   np.int32(bool(conjugate)))
    return out


def _geev(a):
    """CuPy's general eigensolver, or :class:`plax.backend.UnsupportedPrimitiveError` naming
    the primitive, ``a``'s dtype and device where this CuPy/CUDA has none."""
    from plax.backend import UnsupportedPrimitiveError

    def unsupported(why):
        return UnsupportedPrimitiveError(
            "cupy", "eig",
            f"dtype {a.dtype} on cuda:{a.device.id}: this CuPy/CUDA has no general eigensolver "
            f"(cupy.linalg.eig needs CuPy >= 14 and CUDA >= 12.6: {why}); compute eig on the "
            "CPU (plax.device_put(x, plax.devices('cpu')[0]))")

    geev = getattr(cupy.linalg, "eig", None)
    if geev is None:
        raise unsupported("cupy.linalg has no eig")

    def run(x):
        try:
            return geev(x)
        except NotImplementedError as err:  # (ROCm)
            raise unsupported(err) from None
        except RuntimeError as err:
            if "not available" not in str(err):  # a cuSOLVER failure, not a missing routine
                raise
            raise unsupported(err) from None
    return run


@kernel(eig_p)
def eig(a: "cupy.ndarray", *, compute_left_eigenvectors: bool,
        compute_right_eigenvectors: bool) -> list:
    """Eigendecomposition of a batch of general square matrices (complex results).

    cuSOLVER's general eigensolver (``geev``) arrived in CUDA 12.6 and CuPy 14
    (``cupy.linalg.eig``); it computes right eigenvectors only, so the left ones are the
    columns of ``vr^-H`` (``vr^-1 a = diag(w) vr^-1``), normalised as LAPACK normalises them
    (unit norm, largest component real). Where ``geev`` is missing (older CuPy or CUDA) the
    kernel raises :class:`plax.backend.UnsupportedPrimitiveError` naming the primitive, the
    dtype and the device, rather than computing on the host.

    Args:
      a: device array ``(..., n, n)``.
      compute_left_eigenvectors: also return ``vl`` (``vl^H a = diag(w) vl^H``).
      compute_right_eigenvectors: also return ``vr`` (``a vr = vr diag(w)``).

    Returns:
      ``[w]`` then ``vl`` and/or ``vr`` as asked; NaNs for a matrix with non-finite entries.

    Example:
      >>> w, vr = eig(cupy.asarray([[2., 0.], [0., 1.]]), compute_left_eigenvectors=False,
      ...             compute_right_eigenvectors=True)
    """
    ct = np.result_type(a.dtype, np.complex64)
    if a.size == 0:
        w, v = cupy.zeros(a.shape[:-1], ct), cupy.zeros(a.shape, ct)
    else:
        finite = _finite_matrices(a)
        safe = cupy.where(finite[..., None, None], a, cupy.zeros((), a.dtype))
        n = a.shape[-1]
        w, v = _guarded(_geev(a), [safe], [((n,), ct), ((n, n), ct)])
        bad = ~finite
        w = _nan_where(bad, w.astype(ct, copy=False), 1)
        v = _nan_where(bad, _unit_columns(v.astype(ct, copy=False)), 2)
    out = [w]
    if compute_left_eigenvectors:
        if a.size == 0:
            out.append(cupy.zeros(a.shape, ct))
        else:
            # vl = (vr^-1)^H: the conjugation happens inside the normalising kernel
            vl = cupy.swapaxes(cupy.linalg.inv(v), -1, -2)
            out.append(_unit_columns(vl, conjugate=True).astype(ct, copy=False))
    if compute_right_eigenvectors:
        out.append(v)
    return out
