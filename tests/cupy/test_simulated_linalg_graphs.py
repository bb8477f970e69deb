"""Compiled programs holding ``cholesky``, ``triangular_solve``, ``lu``, ``qr``, ``eigh`` and
``svd`` replay as one CUDA graph (issue 24): CuPy's cuBLAS and cuSOLVER bindings refuse a
capturing stream, so while capturing plax calls the loaded libraries directly
(``plax_cupy.cublas_direct``: ``trsm``/``trsmBatched``; ``plax_cupy.cusolver_direct``:
``potrf``/``potrfBatched``, ``getrf``, ``geqrf``/``orgqr``, ``syevd``/``heevd``, ``gesvd``,
and for batches of small matrices ``syevjBatched``/``heevjBatched`` and ``gesvdjBatched``).

On the simulated GPU (:mod:`fake_cupy`, whose stand-in ``libcublas``/``libcusolver``
(:mod:`fake_cupy_linalg`) record their routines into a capture and compute with NumPy/SciPy,
while CuPy's own ``cupy.linalg``/``cupyx.scipy.linalg`` calls are still refused in a capture):

* a Gaussian-process solve (``cholesky`` then two triangular solves), programs of every
  ``triangular_solve`` option, an ``lu`` of large matrices (``getrf``) and a ``qr``
  (``geqrf``, ``orgqr``/``ungqr``), an ``eigh`` (``syevd``/``heevd``) and a PCA-like ``svd``
  program (``gesvd``) replay as one launch from the second call, with the values of the NumPy
  backend (single matrices and batches, the four dtypes, a batch holding a matrix that is not
  positive definite or not finite, or that the solver did not converge on: JAX's NaNs);
* ``potrf``'s workspace size is asked only on a plain call, never while capturing; a library
  refusing the query costs the capture, not the program;
* a batch of small matrices is one ``syevjBatched``/``gesvdjBatched`` call per run, on a
  params object the program owns and destroys when freed;
* with a binding hidden the program runs plainly, with CuPy's refusal as the reason; with
  one symbol hidden (a routine, its size query or a params object's creator) ``eigh`` and
  ``svd`` run CuPy's path on every call, the eager bits, the capture's reason naming the
  symbol; a direct routine returning an error status on a plain call turns the program to
  CuPy's path (never the user's exception), the reason naming the routine;
* the ctypes bindings set the C functions' types and raise on a failing status;
* on a real GPU (skipped elsewhere), the same programs are captured and every replay gives the
  plain first call's bits.

:func:`test_on_the_simulated_gpu` runs this file again in a child process with
``-p fake_cupy_plugin``; the other GPU tests skip here.
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from test_simulated_streams import SIMULATED, on_simulated_gpu, run_file_on_simulated_gpu

DTYPES = ["float32", "float64", "complex64", "complex128"]


@pytest.mark.skipif(SIMULATED or shutil.which("g++") is None,
                    reason="already on the simulated GPU, or no C++ compiler (g++) for it")
def test_on_the_simulated_gpu():
    run_file_on_simulated_gpu(__file__, skipped=8)   # (this one, the real-GPU tests)


@pytest.fixture
def executables(compiled_programs):
    """The executables compiled in the test (``conftest.compiled_programs``)."""
    return compiled_programs


def _graph_line(executables) -> str:
    return next(line for line in executables[0].as_text().splitlines()
                if line.startswith("# CUDA graph"))


def _calls(f, args, n):
    """``n`` calls of ``f`` on ``args``, each call's results read and dropped before the next:
    ``[(host results, launches)]``."""
    import plax
    import plax_cupy
    runs = []
    for _ in range(n):
        with plax_cupy.count() as c:
            out = plax.tree_util.tree_leaves(f(*args))
        runs.append(([np.asarray(o) for o in out], c.launches))
        del out
    return runs


def _on(device_kind, args):
    import plax
    return plax.device_put(args, plax.devices(device_kind)[0])


def _hermitian_pd(shape, dtype, seed):
    r = np.random.default_rng(seed)
    n = shape[-1]
    a = r.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * r.normal(size=shape)
    h = a @ np.conj(np.swapaxes(a, -1, -2)) + n * np.eye(n)
    return h.astype(dtype)


def _tolerance(dtype):
    return 2e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-11


def _gp_solve(s, b):
    """``s^-1 b`` through the Cholesky factor: ``L^-H (L^-1 b)``; returns ``L`` too."""
    from plax.lax import linalg
    low = linalg.cholesky(s)
    y = linalg.triangular_solve(low, b, left_side=True, lower=True)
    x = linalg.triangular_solve(low, y, left_side=True, lower=True, transpose_a=True,
                                conjugate_a=True)
    return low, x


def _check_replays(f, args, executables, compare: bool = True):
    """``f`` jitted on the GPU: one launch a call from the second, captured once, the values of
    the NumPy backend on every call (unless not ``compare``); returns :func:`_calls`'s runs."""
    import plax
    with plax.config.override("enable_x64", True):
        runs = _calls(plax.jit(lambda *a: f(*a)), _on("gpu", args), 4)   # (a program of its own)
        want = [np.asarray(w)
                for w in plax.tree_util.tree_leaves(plax.jit(f)(*_on("cpu", args)))]
    assert all(h.dtype == w.dtype for h, w in zip(runs[0][0], want))
    launches = [n for _, n in runs]
    assert launches[0] > 1 and launches[1:] == [1, 1, 1], launches
    line = _graph_line(executables)
    assert "captured, " in line and "replayed as one launch" in line, line
    assert line.endswith("calls: 1 captured, 3 replayed, 1 plain (last: the first call, which "
                         "compiles)"), line
    for host, _ in runs if compare else ():
        for got, w in zip(host, want):
            tol = _tolerance(w.dtype)
            np.testing.assert_allclose(got, w, rtol=tol, atol=tol, equal_nan=True)
    return runs


@on_simulated_gpu
@pytest.mark.parametrize("batch", [(), (3,)], ids=["one-matrix", "batch"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_cholesky_solve_replays_as_one_graph(dtype, batch, executables):
    """``potrf`` + ``trsm`` (one matrix) or ``potrfBatched`` + ``trsmBatched`` (a batch, whose
    second matrix is not positive definite: NaNs, as JAX), captured through the direct
    bindings."""
    import fake_cupy_linalg
    s = _hermitian_pd(batch + (6, 6), dtype, seed=1)
    if batch:
        s[1] = -s[1]
    b = np.random.default_rng(2).normal(size=batch + (6, 3)).astype(dtype)
    before = dict(fake_cupy_linalg.CALLS)
    _check_replays(_gp_solve, (s, b), executables)
    suffix = "Batched" if batch else ""
    # run at the capture, on the capture check's replay (plax_cupy.graph_check) and on each
    # of the 3 replays: 5 runs (2 solves each)
    assert fake_cupy_linalg.CALLS.get("potrf" + suffix, 0) - before.get("potrf" + suffix, 0) == 5
    assert fake_cupy_linalg.CALLS.get("trsm" + suffix, 0) - before.get("trsm" + suffix, 0) == 10


def _every_solve(a, b_left, b_right):
    """``triangular_solve`` with every combination of its options, in one program."""
    from plax.lax import linalg
    out = []
    conjugates = (False, True) if np.dtype(a.dtype).kind == "c" else (False,)
    for left_side in (True, False):
        for lower in (True, False):
            for transpose_a in (False, True):
                for conjugate_a in conjugates:
                    for unit_diagonal in (False, True):
                        out.append(linalg.triangular_solve(
                            a, b_left if left_side else b_right, left_side=left_side,
                            lower=lower, transpose_a=transpose_a, conjugate_a=conjugate_a,
                            unit_diagonal=unit_diagonal))
    return out


@on_simulated_gpu
@pytest.mark.parametrize("batch", [(), (2,)], ids=["one-matrix", "batch"])
@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_every_triangular_solve_option_replays(dtype, batch, executables):
    """Left and right side, lower and upper, transposed (and conjugated), unit diagonal: the
    direct ``trsm``/``trsmBatched`` with the layouts and operations CuPy's
    ``solve_triangular`` chooses give the NumPy backend's values."""
    r = np.random.default_rng(3)
    a = (r.normal(size=batch + (4, 4)) + 4 * np.eye(4)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = (a + 1j * r.normal(size=a.shape)).astype(dtype)
    b_left = r.normal(size=batch + (4, 3)).astype(dtype)
    b_right = r.normal(size=batch + (3, 4)).astype(dtype)
    _check_replays(_every_solve, (a, b_left, b_right), executables)


@on_simulated_gpu
@pytest.mark.parametrize("shape", [(40, 40), (2, 36, 34)], ids=["one-matrix", "batch"])
@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_an_lu_of_large_matrices_replays_as_one_graph(dtype, shape, executables):
    """Matrices larger than the generated kernel takes: ``getrf`` per matrix (CuPy's
    ``lu_factor``, which reads ``devInfo`` on the host, outside a capture), the pivots and the
    permutation of the NumPy backend, the factors to rounding."""
    import fake_cupy_linalg
    from plax.lax import linalg
    r = np.random.default_rng(6)
    a = r.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * r.normal(size=shape)
    before = fake_cupy_linalg.CALLS.get("getrf", 0)

    def factors(x):   # (more than the one launch a replay is: a program worth capturing)
        lu, pivots, permutation = linalg.lu(x)
        return lu * 2, pivots, permutation
    _check_replays(factors, (a.astype(dtype),), executables)
    count = int(np.prod(shape[:-2], dtype=np.int64))
    assert fake_cupy_linalg.CALLS.get("getrf", 0) - before == 5 * count   # (and the check's)


@on_simulated_gpu
@pytest.mark.parametrize("shape,full_matrices", [((5, 3), True), ((5, 3), False),
                                                 ((2, 3, 5), True), ((2, 6, 4), False)])
@pytest.mark.parametrize("dtype", ["float32", "complex128"])
def test_a_qr_replays_as_one_graph(dtype, shape, full_matrices, executables):
    """``geqrf`` then ``orgqr``/``ungqr``, matrix by matrix as CuPy's batched loop, complete
    and reduced, tall and wide: the NumPy backend's ``q`` and ``r`` (both LAPACK's Householder
    convention)."""
    import fake_cupy_linalg
    from plax.lax import linalg
    r = np.random.default_rng(7)
    a = r.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * r.normal(size=shape)
    before = fake_cupy_linalg.CALLS.get("orgqr", 0)

    def factors(x):   # (two launches at least: a program worth capturing)
        q, r = linalg.qr(x, full_matrices=full_matrices)
        return q, r * 2
    _check_replays(factors, (a.astype(dtype),), executables)
    count = int(np.prod(shape[:-2], dtype=np.int64))
    assert fake_cupy_linalg.CALLS.get("orgqr", 0) - before == 5 * count   # (and the check's)


def _spectrum(a, lower):
    """``eigh`` read through what does not depend on each eigenvector's phase: the eigenvalues,
    ``v diag(w) v^H`` (the Hermitian matrix of ``a``'s ``lower`` triangle) and the projector
    onto the first eigenvector."""
    from plax import numpy as pnp
    from plax.lax import linalg
    v, w = linalg.eigh(a, lower=lower, symmetrize_input=False)   # (one triangle read)
    vh = pnp.conj(pnp.swapaxes(v, -1, -2))
    return w, (v * w[..., None, :].astype(v.dtype)) @ vh, v[..., :1] @ vh[..., :1, :]


@on_simulated_gpu
@pytest.mark.parametrize("batch,lower", [((), True), ((3,), False)], ids=["one-matrix", "batch"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_an_eigh_replays_as_one_graph(dtype, batch, lower, executables):
    """``syevd``/``heevd`` (one matrix) or one ``syevjBatched``/``heevjBatched`` call (a
    batch of small matrices) on a column-major copy, from the ``lower`` or the upper triangle
    (the other one garbage), on the program's plain calls and in its graph: the NumPy
    backend's eigenvalues and eigenspaces; a batch's non-finite matrix gives NaNs, the
    others their values."""
    import fake_cupy_linalg
    r = np.random.default_rng(11)
    a = _hermitian_pd(batch + (5, 5), dtype, seed=12) - 5 * np.eye(5, dtype=dtype)
    junk = r.normal(size=a.shape).astype(dtype)   # (the triangle not read)
    unread = ~np.tri(5, dtype=bool) if lower else np.tri(5, k=-1, dtype=bool)
    a = np.where(unread, junk, a)
    if batch:
        a[1, 2, 1 if lower else 3] = np.nan
    routine = "syevjBatched" if batch else "syevd"
    before = dict(fake_cupy_linalg.CALLS)
    runs = _check_replays(lambda x: _spectrum(x, lower), (a,), executables)
    # (the plain first call; the capture, its launch, the check's plain run and second launch;
    # the 2 replays after: one program, one routine on plain calls and in the graph, one call
    # for the whole batch)
    assert _calls_since(before) == {routine: 7}
    if batch:
        w = runs[1][0][0]
        assert np.isnan(w[1]).all() and np.isfinite(w[[0, 2]]).all()


def _calls_since(before: dict) -> dict:
    """The stand-in cuSOLVER routines run since ``before`` (a copy of ``CALLS``), by name."""
    import fake_cupy_linalg
    solvers = ("potrf", "getrf", "geqrf", "orgqr", "syev", "gesvd")
    return {name: n - before.get(name, 0) for name, n in fake_cupy_linalg.CALLS.items()
            if name.startswith(solvers) and n != before.get(name, 0)}


def _pca(x, full_matrices, compute_uv, rank=2):
    """A small PCA: ``x`` centred, its SVD; the explained variances, and (with ``compute_uv``)
    the rank-``rank`` reconstruction and the whole one (neither depends on the singular
    vectors' phases)."""
    from plax import numpy as pnp
    from plax.lax import linalg
    c = x - pnp.mean(x, axis=-2, keepdims=True)
    if not compute_uv:
        s = linalg.svd(c, full_matrices=full_matrices, compute_uv=False)
        return s * s / pnp.sum(s * s, axis=-1, keepdims=True)
    u, s, vh = linalg.svd(c, full_matrices=full_matrices, compute_uv=True)
    k = s.shape[-1]
    us = u[..., :, :k] * s[..., None, :].astype(u.dtype)
    return s * s, us[..., :, :rank] @ vh[..., :rank, :], us @ vh[..., :k, :]


@on_simulated_gpu
@pytest.mark.parametrize("shape,full_matrices,compute_uv", [
    ((6, 3), True, True), ((3, 6), False, True), ((2, 4, 6), True, True),
    ((3, 6, 4), False, True), ((2, 3, 5), False, False)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_pca_svd_replays_as_one_graph(dtype, shape, full_matrices, compute_uv, executables):
    """``gesvd`` (one matrix) with the layouts and jobs of CuPy's ``svd`` (a wide matrix's
    transpose, ``U``/``VT`` over the copy or in their own arrays, values only), or one
    ``gesvdjBatched`` call (a batch of small matrices), then products: the NumPy backend's
    values; a batch's non-finite matrix gives NaNs."""
    import fake_cupy_linalg
    r = np.random.default_rng(13)
    x = r.normal(size=shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * r.normal(size=shape)
    x = x.astype(dtype)
    if len(shape) == 3 and shape[0] == 3:
        x[1, 0, 0] = np.inf
    before = dict(fake_cupy_linalg.CALLS)
    runs = _check_replays(lambda a: _pca(a, full_matrices, compute_uv), (x,), executables)
    # (the plain first call; the capture, its launch, the check's plain run and second launch;
    # the 2 replays after: one program, one routine on plain calls and in the graph)
    assert _calls_since(before) == ({"gesvdjBatched": 7} if len(shape) == 3 else {"gesvd": 7})
    if len(shape) == 3 and shape[0] == 3:
        variances = runs[1][0][0]
        assert np.isnan(variances[1]).all() and np.isfinite(variances[[0, 2]]).all()


@on_simulated_gpu
@pytest.mark.parametrize("routine", ["syevd", "gesvd", "syevjBatched", "gesvdjBatched"])
def test_a_matrix_the_solver_does_not_converge_on_gives_nans(routine, executables,
                                                             monkeypatch):
    """``devInfo > 0`` (no convergence), written on the device, turns that matrix's results to
    NaNs without a host read, in the plain calls and the replays alike (the stand-in made to
    report it for the second matrix of each batch: matrices over :data:`JACOBI_LIMIT` run the
    per-matrix routines, smaller ones the batched Jacobi routines)."""
    import plax
    import fake_cupy_linalg
    from plax.lax import linalg
    original, calls = fake_cupy_linalg._RUN[routine], []
    info_at = {"syevd": 8, "gesvd": 14, "syevjBatched": 8, "gesvdjBatched": 12}[routine]
    batched = routine.endswith("Batched")

    def not_converging(stream, dtype, v):
        status = original(stream, dtype, v)
        calls.append(v[info_at])
        if batched or len(calls) % 2 == 0:   # (the second matrix of the pair)
            block, flag = fake_cupy_linalg._view(v[info_at] + 4 * batched, (1,), (1,),
                                                 np.dtype(np.int32))

            def flag_it():
                flag[0] = 3
            fake_cupy_linalg.launch(routine + "-no-convergence", stream, [block], flag_it)
        return status
    monkeypatch.setitem(fake_cupy_linalg._RUN, routine, not_converging)
    a = _hermitian_pd((2, 4, 4) if batched else (2, 34, 34), "float32", seed=14)
    f = (lambda x: [t * 2 for t in linalg.eigh(x)]) if routine.startswith("syev") else \
        (lambda x: linalg.svd(x, compute_uv=False) * 2)
    runs = _calls(plax.jit(f), _on("gpu", (a,)), 3)
    assert [n for _, n in runs][1:] == [1, 1], runs
    assert calls
    for host, _ in runs:
        for out in host:
            assert np.isnan(out[1]).all() and np.isfinite(out[0]).all()


@on_simulated_gpu
def test_the_stand_in_solvers_refuse_what_cusolver_refuses():
    """The simulated ``syevd``/``gesvd`` refuse an undersized workspace, ``gesvd`` a wide
    matrix (cuSOLVER's takes ``m >= n`` only) and both jobs ``'O'``, and both a host pointer
    where device memory is due: plax's calls (which pass every test above) are held to the
    real library's rules."""
    import cupy
    from plax_cupy import cusolver_direct
    direct = cusolver_direct.binding()
    h = cusolver_direct.handle_on_current_stream(direct)
    a, w = cupy.eye(4, dtype=np.float32), cupy.empty(4, np.float32)
    info = cupy.empty(1, np.int32)
    lwork = direct.syevd_bufferSize(np.float32, h, 1, 0, 4, a.data.ptr, 4, w.data.ptr)
    work = cupy.empty(lwork, np.float32)
    direct.syevd(np.float32, h, 1, 0, 4, a.data.ptr, 4, w.data.ptr, work.data.ptr, lwork,
                 info.data.ptr)
    np.testing.assert_allclose(cupy.asnumpy(w), np.ones(4))
    with pytest.raises(cusolver_direct.CUSOLVERError, match="INVALID_VALUE"):
        direct.syevd(np.float32, h, 1, 0, 4, a.data.ptr, 4, w.data.ptr, work.data.ptr,
                     lwork - 1, info.data.ptr)
    host = np.empty(lwork, np.float32)
    with pytest.raises(cusolver_direct.CUSOLVERError, match="INTERNAL_ERROR"):
        direct.syevd(np.float32, h, 1, 0, 4, a.data.ptr, 4, w.data.ptr, host.ctypes.data,
                     lwork, info.data.ptr)
    wide = cupy.ones((3, 5), np.float32)   # (column-major 5 x 3 read as m = 3, n = 5)
    lwork = direct.gesvd_bufferSize(np.float32, h, 5, 3)
    work, u = cupy.empty(lwork, np.float32), cupy.empty((5, 5), np.float32)
    for jobs, m, n in (((ord("N"), ord("N")), 3, 5), ((ord("O"), ord("O")), 5, 3)):
        with pytest.raises(cusolver_direct.CUSOLVERError, match="INVALID_VALUE"):
            direct.gesvd(np.float32, h, *jobs, m, n, wide.data.ptr, m, w.data.ptr, u.data.ptr,
                         m, u.data.ptr, n, work.data.ptr, lwork, 0, info.data.ptr)


@on_simulated_gpu
def test_the_workspace_size_is_asked_on_a_plain_call_only(executables, monkeypatch):
    """``potrf_bufferSize`` is a host call: asked on the program's first (plain) call and held
    by the program (``ProgramCholesky``), never while the stream captures."""
    import cupy
    from plax_cupy import cusolver_direct
    direct = cusolver_direct.binding()
    asked = []
    query = direct.potrf_bufferSize

    def recording(*args):
        asked.append(cupy.cuda.get_current_stream().is_capturing())
        return query(*args)
    monkeypatch.setattr(direct, "potrf_bufferSize", recording)
    s = _hermitian_pd((5, 5), "float64", seed=4)
    b = np.ones((5, 2))
    _check_replays(_gp_solve, (s, b), executables)
    assert asked == [False], asked


@on_simulated_gpu
def test_a_failing_size_query_leaves_the_program_running_plainly(executables, monkeypatch):
    """A library that refuses ``potrf_bufferSize`` costs the capture, not the program: the
    plain calls give the factor, the capture fails naming the refusal."""
    import plax
    from plax.lax import linalg
    from plax_cupy import cusolver_direct
    direct = cusolver_direct.binding()

    def refusing(*args):
        raise cusolver_direct.CUSOLVERError(7, "cusolverDnSpotrf_bufferSize")
    monkeypatch.setattr(direct, "potrf_bufferSize", refusing)
    s = _hermitian_pd((5, 5), "float32", seed=10)
    runs = _calls(plax.jit(lambda s: linalg.cholesky(s) * 2), _on("gpu", (s,)), 3)
    for host, _ in runs:
        np.testing.assert_allclose(host[0], 2 * np.linalg.cholesky(s), rtol=1e-5, atol=1e-5)
    line = _graph_line(executables)
    assert ("capture failed (CUSOLVERError: cusolverDnSpotrf_bufferSize: "
            "CUSOLVER_STATUS_INTERNAL_ERROR)") in line, line


@on_simulated_gpu
@pytest.mark.parametrize("library", ["cuSOLVER", "cuBLAS"])
def test_without_a_binding_the_program_runs_plainly_with_cupys_refusal(library, executables,
                                                                       monkeypatch):
    """With the direct binding missing, CuPy's own call runs in the capture and is refused as
    CuPy refuses it: the program runs plainly for good, one launch per kernel, saying why."""
    import plax
    from plax.lax import linalg
    from plax_cupy import cublas_direct, cusolver_direct
    monkeypatch.setattr(cusolver_direct if library == "cuSOLVER" else cublas_direct,
                        "_binding", [None])
    s = _hermitian_pd((5, 5), "float32", seed=5)
    b = np.ones((5, 2), np.float32)
    f = (lambda s, b: linalg.cholesky(s) * 2) if library == "cuSOLVER" else \
        (lambda s, b: linalg.triangular_solve(s, b, left_side=True, lower=True) * 2)
    runs = _calls(plax.jit(f), _on("gpu", (s, b)), 3)
    launches = [n for _, n in runs]
    assert launches == launches[:1] * 3 and launches[0] > 1, launches
    line = _graph_line(executables)
    assert (f"no, runs plainly (capture failed (NotImplementedError: calling {library} API "
            "during stream capture is currently unsupported))") in line, line
    assert "calls: 0 captured, 0 replayed, 3 plain" in line, line



class _Hiding:
    """A loaded library without some of its C functions (as a ``libcusolver`` that no longer
    exports the legacy 32-bit ``<t>syevd``/``<t>heevd``/``<t>gesvd`` would be)."""

    def __init__(self, library, hidden):
        self._library, self._hidden = library, set(hidden)

    def __getattr__(self, name):
        if name in self._hidden:
            raise AttributeError(name)
        return getattr(self._library, name)


@on_simulated_gpu
@pytest.mark.parametrize("routine,missing,dtype,shape", [
    ("eigh", "cusolverDnSsyevd", "float32", (5, 5)),
    ("eigh", "cusolverDnSsyevjBatched", "float32", (2, 5, 5)),
    ("eigh", "cusolverDnCheevjBatched_bufferSize", "complex64", (2, 5, 5)),
    ("eigh", "libcusolver", "float64", (2, 5, 5)),
    ("svd", "cusolverDnDgesvd", "float64", (5, 5)),
    ("svd", "cusolverDnZgesvdjBatched_bufferSize", "complex128", (2, 5, 5)),
    ("svd", "cusolverDnCreateGesvdjInfo", "complex64", (2, 5, 5)),
    ("svd", "libcusolver", "complex64", (2, 5, 5))])
def test_a_missing_symbol_leaves_eigh_and_svd_on_cupys_path(routine, missing, dtype, shape,
                                                            executables, monkeypatch):
    """A routine, its size query or its params object's creator the library does not export
    (or no library at all): every call of the program runs CuPy's ``eigh``/``svd`` and gives
    the eager call's bits; the capture fails, not the program, saying why: the missing C
    function by its name (no library at all: CuPy's refusal of the capture)."""
    import plax
    from plax.lax import linalg
    from plax_cupy import cusolver_direct
    hiding = None if missing == "libcusolver" else \
        cusolver_direct.DirectCusolver(_Hiding(cusolver_direct.binding().library, [missing]))
    monkeypatch.setattr(cusolver_direct, "_binding", [hiding])
    a = _hermitian_pd(shape, dtype, seed=16)
    solve = linalg.eigh if routine == "eigh" else \
        (lambda x: linalg.svd(x, full_matrices=False, compute_uv=True))

    def f(x):
        return [t * 2 for t in solve(x)]
    with plax.config.override("enable_x64", True):   # (the dtype whose symbol is hidden)
        args = _on("gpu", (a,))
        eager = [np.asarray(o) for o in plax.tree_util.tree_leaves(f(*args))]
        runs = _calls(plax.jit(f), args, 3)
    assert eager[0].dtype == dtype   # (v or u: the operand's dtype)
    for host, _ in runs:
        for got, want in zip(host, eager):
            np.testing.assert_array_equal(got, want)
    launches = [n for _, n in runs]
    assert launches == launches[:1] * 3 and launches[0] > 1, launches
    line = _graph_line(executables)
    if missing == "libcusolver":
        assert ("no, runs plainly (capture failed (NotImplementedError: calling cuSOLVER API "
                "during stream capture is currently unsupported))") in line, line
    else:
        assert "no, runs plainly (capture failed (AttributeError: " in line, line
        assert "has none of " in line and missing in line, line
    assert "calls: 0 captured, 0 replayed, 3 plain" in line, line


@on_simulated_gpu
def test_a_batch_of_small_matrices_is_one_jacobi_call(executables):
    """64 4 x 4 ``eigh`` and 16 8 x 6 ``svd`` in one program: one ``syevjBatched`` and one
    ``gesvdjBatched`` call per run (plain or replayed), no per-matrix routine, the program one
    launch from its second call, the NumPy backend's values; a NaN matrix gives NaNs for that
    matrix only."""
    import fake_cupy_linalg
    r = np.random.default_rng(17)
    h = _hermitian_pd((64, 4, 4), "float32", seed=18)
    h[5, 0, 0] = np.nan
    x = r.normal(size=(16, 8, 6)).astype(np.float32)

    def f(h, x):
        return _spectrum(h, lower=True) + _pca(x, full_matrices=False, compute_uv=True)
    before = dict(fake_cupy_linalg.CALLS)
    runs = _check_replays(f, (h, x), executables)
    assert _calls_since(before) == {"syevjBatched": 7, "gesvdjBatched": 7}
    w = runs[-1][0][0]
    assert np.isnan(w[5]).all() and np.isfinite(np.delete(w, 5, axis=0)).all()


@on_simulated_gpu
def test_the_program_owns_the_jacobi_params_object():
    """``ProgramEigh``/``ProgramSvd`` make one params object (``syevjInfo_t``/
    ``gesvdjInfo_t``) for a thread's plain calls on its first batch, reuse it on every plain
    call of that thread, and destroy it when they are freed (a capture's, the program's own,
    likewise with the program that holds them, after its graphs)."""
    import gc
    import weakref
    import cupy
    import fake_cupy_linalg
    from plax_cupy import kernels_linalg
    # (earlier tests' params objects may still be freed at any moment here, which made a count
    # taken at the start flaky in CI: so the test follows its own objects)
    eigh = kernels_linalg.ProgramEigh(lower=True)
    svd = kernels_linalg.ProgramSvd(full_matrices=True, compute_uv=False)
    h = cupy.asarray(_hermitian_pd((3, 4, 4), "float64", seed=19))
    made = []
    for _ in range(2):
        v, w = eigh(h)
        (s,) = svd(h)
        made.append((eigh._thread_params.params, svd._thread_params.params))
    np.testing.assert_allclose(cupy.asnumpy(w), np.linalg.eigvalsh(cupy.asnumpy(h)), rtol=1e-12)
    np.testing.assert_allclose(cupy.asnumpy(s), np.linalg.svd(cupy.asnumpy(h), compute_uv=False),
                               rtol=1e-12)
    (e_params, s_params), again = made
    assert [p.kind for p in made[0]] == ["syevj", "gesvdj"] and e_params.ptr and s_params.ptr
    assert again[0] is e_params and again[1] is s_params   # (one object each, reused)
    eigh(cupy.asarray(_hermitian_pd((40, 40), "float64", seed=20)))   # (syevd: none more)
    assert eigh._thread_params.params is e_params
    refs = [weakref.ref(e_params), weakref.ref(s_params)]
    del made, again, e_params, s_params
    gc.collect()
    assert all(r() is not None for r in refs)   # (the programs hold them)
    alive = fake_cupy_linalg.params_alive()
    assert alive >= 2
    del eigh, svd
    gc.collect()
    assert all(r() is None for r in refs)
    assert fake_cupy_linalg.params_alive() <= alive - 2   # (both destroyed in the library)


@on_simulated_gpu
@pytest.mark.parametrize("routine,stand_in,shape", [("eigh", "syevjBatched", (3, 4, 4)),
                                                    ("svd", "gesvd", (6, 4))])
def test_a_failing_direct_routine_falls_back_to_cupys_path(routine, stand_in, shape,
                                                           executables, monkeypatch):
    """A routine that exists but returns an error status (``NOT_SUPPORTED``) on the program's
    plain call: that call and every later one run CuPy's path (the eager call's bits), never
    an exception; the capture fails naming the routine and the status."""
    import plax
    import fake_cupy_linalg
    from plax.lax import linalg
    monkeypatch.setitem(fake_cupy_linalg._RUN, stand_in, lambda stream, dtype, v: 9)
    a = _hermitian_pd(shape, "float32", seed=21) if routine == "eigh" else \
        np.random.default_rng(22).normal(size=shape).astype(np.float32)
    solve = linalg.eigh if routine == "eigh" else \
        (lambda x: linalg.svd(x, full_matrices=False, compute_uv=True))

    def f(x):
        return [t * 2 for t in solve(x)]
    args = _on("gpu", (a,))
    eager = [np.asarray(o) for o in plax.tree_util.tree_leaves(f(*args))]
    runs = _calls(plax.jit(f), args, 3)
    for host, _ in runs:
        for got, want in zip(host, eager):
            np.testing.assert_array_equal(got, want)
    line = _graph_line(executables)
    name = "cusolverDnSsyevjBatched" if routine == "eigh" else "cusolverDnSgesvd"
    assert (f"no, runs plainly (capture failed (CUSOLVERError: {name}: "
            "CUSOLVER_STATUS_NOT_SUPPORTED))") in line, line
    assert "calls: 0 captured, 0 replayed, 3 plain" in line, line


@on_simulated_gpu
def test_the_stand_in_jacobi_solvers_refuse_what_cusolver_refuses():
    """The simulated ``syevjBatched``/``gesvdjBatched`` refuse an undersized workspace, a null
    or destroyed params object, and ``gesvdjBatched`` a matrix over 32 (its size query too)."""
    import cupy
    from plax_cupy import cusolver_direct
    direct = cusolver_direct.binding()
    h = cusolver_direct.handle_on_current_stream(direct)
    params = cusolver_direct.JacobiParams(direct, "syevj", tolerance=1e-6, max_sweeps=20)
    a = cupy.asarray(np.tile(np.eye(4, dtype=np.float32), (2, 1, 1)) * 3)
    w, info = cupy.empty((2, 4), np.float32), cupy.empty(2, np.int32)
    lwork = direct.syevjBatched_bufferSize(np.float32, h, 1, 0, 4, a.data.ptr, 4, w.data.ptr,
                                           params.ptr, 2)
    work = cupy.empty(lwork, np.float32)
    direct.syevjBatched(np.float32, h, 1, 0, 4, a.data.ptr, 4, w.data.ptr, work.data.ptr,
                        lwork, info.data.ptr, params.ptr, 2)
    np.testing.assert_allclose(cupy.asnumpy(w), np.full((2, 4), 3.0))
    for size, pointer in ((lwork - 1, params.ptr), (lwork, 0)):
        with pytest.raises(cusolver_direct.CUSOLVERError, match="INVALID_VALUE"):
            direct.syevjBatched(np.float32, h, 1, 0, 4, a.data.ptr, 4, w.data.ptr,
                                work.data.ptr, size, info.data.ptr, pointer, 2)
    stale = params.ptr
    params.destroy()
    with pytest.raises(cusolver_direct.CUSOLVERError, match="INVALID_VALUE"):
        direct.syevjBatched(np.float32, h, 1, 0, 4, a.data.ptr, 4, w.data.ptr, work.data.ptr,
                            lwork, info.data.ptr, stale, 2)
    gesvdj = cusolver_direct.JacobiParams(direct, "gesvdj")
    big = cupy.zeros((2, 33, 4), np.float32)
    with pytest.raises(cusolver_direct.CUSOLVERError, match="INVALID_VALUE"):
        direct.gesvdjBatched_bufferSize(np.float32, h, 0, 33, 4, big.data.ptr, 33, w.data.ptr,
                                        0, 33, 0, 4, gesvdj.ptr, 2)
    with pytest.raises(cusolver_direct.CUSOLVERError, match="INVALID_VALUE"):
        direct.gesvdjBatched(np.float32, h, 0, 33, 4, big.data.ptr, 33, w.data.ptr, 0, 33, 0,
                             4, work.data.ptr, 10 ** 6, info.data.ptr, gesvdj.ptr, 2)


def _real_gpu_problem() -> str:
    if SIMULATED:
        return "the simulated GPU: the tests above"
    from gpu_env import GPU_PROBLEM
    return GPU_PROBLEM


@pytest.mark.skipif(bool(_real_gpu_problem()), reason=_real_gpu_problem() or "gpu")
@pytest.mark.parametrize("program", ["gp-solve", "gp-solve-batch", "lu", "qr-batch",
                                     "eigh-batch", "svd-pca", "svd-batch"])
def test_on_a_real_gpu_the_captured_calls_give_the_plain_calls_bits(program, executables):
    """On a GPU (the check the simulation cannot make): the program is captured through the
    direct bindings, and every replay's results equal the plain first call's bit for bit (the
    same routines with the same arguments as CuPy's), and the NumPy backend's to rounding."""
    from plax.lax import linalg
    r = np.random.default_rng(8)
    if program.startswith("gp-solve"):
        batch = (3,) if program.endswith("batch") else ()
        f, args = _gp_solve, (_hermitian_pd(batch + (48, 48), "float32", 9),
                              r.normal(size=batch + (48, 2)).astype(np.float32))
    elif program == "lu":
        def f(x):
            lu, pivots, permutation = linalg.lu(x)
            return lu * 2, pivots, permutation
        args = (r.normal(size=(40, 40)),)
    elif program == "eigh-batch":
        def f(x):
            return _spectrum(x, lower=True)
        args = (_hermitian_pd((3, 16, 16), "complex64", 15),)
    elif program == "svd-batch":   # (gesvdjBatched: one call for the batch)
        def f(x):
            return _pca(x, full_matrices=True, compute_uv=True, rank=3)
        args = (r.normal(size=(16, 8, 6)).astype(np.float32),)
    elif program == "svd-pca":
        def f(x):
            return _pca(x, full_matrices=False, compute_uv=True, rank=4)
        args = (r.normal(size=(64, 24)).astype(np.float32),)
    else:
        def f(x):
            q, r_ = linalg.qr(x, full_matrices=False)
            return q, r_ * 2
        args = ((r.normal(size=(2, 48, 40))
                 + 1j * r.normal(size=(2, 48, 40))).astype(np.complex64),)
    # (cuSOLVER's Householder vectors may differ in phase from LAPACK's: q r checked instead)
    runs = _check_replays(f, args, executables, compare=program != "qr-batch")
    if program == "qr-batch":
        q, r2 = runs[0][0]
        np.testing.assert_allclose(q @ (r2 / 2), args[0], rtol=1e-4, atol=1e-4)
    for host, _ in runs[1:]:
        for got, plain in zip(host, runs[0][0]):
            np.testing.assert_array_equal(got, plain)


class _Library:
    """C functions as ctypes hands them out: each records its call and returns ``status``."""

    def __init__(self, names, status=0):
        self.names, self.status, self.calls = set(names), status, []

    def __getattr__(self, name):
        if name.startswith("__") or name not in self.__dict__.get("names", ()):
            raise AttributeError(name)
        calls, status = self.calls, self.status

        def fn(*args):
            calls.append((name, args))
            return 0 if name.endswith("SetStream") else status
        self.__dict__[name] = fn
        return fn


def test_direct_cusolver_binds_the_c_functions_and_checks_their_status():
    """``plax_cupy.cusolver_direct`` (no CuPy needed): the dtype picks the routine's letter,
    the C types are set, a failing status raises ``CUSOLVERError`` naming the routine, and a
    routine the library lacks is reported missing rather than called."""
    pytest.importorskip("plax_cupy")
    from plax_cupy import cusolver_direct
    lib = _Library(["cusolverDnSetStream", "cusolverDnDpotrf", "cusolverDnCpotrfBatched"], 3)
    direct = cusolver_direct.DirectCusolver(lib)
    direct.setStream(1, 2)
    assert direct.has("potrf", np.float64) and not direct.has("potrf", np.float32)
    assert not direct.has("potrfBatched", np.float16)
    with pytest.raises(cusolver_direct.CUSOLVERError,
                       match="cusolverDnDpotrf: CUSOLVER_STATUS_INVALID_VALUE"):
        direct.potrf(np.float64, 1, 1, 4, 100, 4, 200, 8, 300)
    with pytest.raises(cusolver_direct.CUSOLVERError, match="cusolverDnCpotrfBatched"):
        direct.potrfBatched(np.complex64, 1, 1, 4, 100, 4, 300, 2)
    assert [c[0] for c in lib.calls] == ["cusolverDnSetStream", "cusolverDnDpotrf",
                                         "cusolverDnCpotrfBatched"]
    assert len(lib.cusolverDnDpotrf.argtypes) == 8
    assert len(lib.cusolverDnCpotrfBatched.argtypes) == 7


def test_direct_cusolver_binds_the_eigensolver_and_the_svd():
    """``syevd`` is ``heevd`` for complex dtypes (as ``orgqr`` is ``ungqr``), ``gesvd`` takes
    its jobs as ``signed char``; a failing status names the C function."""
    import ctypes
    pytest.importorskip("plax_cupy")
    from plax_cupy import cusolver_direct
    lib = _Library(["cusolverDnSetStream", "cusolverDnSsyevd", "cusolverDnZheevd",
                    "cusolverDnCgesvd"], 6)
    direct = cusolver_direct.DirectCusolver(lib)
    assert direct.has("syevd", np.float32) and direct.has("syevd", np.complex128)
    assert not direct.has("syevd", np.complex64) and not direct.has("gesvd", np.float32)
    with pytest.raises(cusolver_direct.CUSOLVERError,
                       match="cusolverDnZheevd: CUSOLVER_STATUS_EXECUTION_FAILED"):
        direct.syevd(np.complex128, 1, 1, 0, 4, 100, 4, 200, 300, 8, 400)
    with pytest.raises(cusolver_direct.CUSOLVERError, match="cusolverDnCgesvd"):
        direct.gesvd(np.complex64, 1, ord("A"), ord("O"), 5, 3, 100, 5, 200, 300, 5, 100, 3,
                     400, 8, 0, 500)
    assert len(lib.cusolverDnZheevd.argtypes) == 10
    assert len(lib.cusolverDnCgesvd.argtypes) == 16
    assert lib.cusolverDnCgesvd.argtypes[1:3] == [ctypes.c_byte, ctypes.c_byte]


def test_direct_cusolver_binds_the_batched_jacobi_routines():
    """``syevjBatched`` is ``heevjBatched`` for complex dtypes, the size queries write the
    int before the params object and the batch size, and a params object is made by its
    creator and destroyed once (explicitly or when collected)."""
    import gc
    pytest.importorskip("plax_cupy")
    from plax_cupy import cusolver_direct
    lib = _Library(["cusolverDnSetStream", "cusolverDnZheevjBatched", "cusolverDnSgesvdjBatched",
                    "cusolverDnDsyevjBatched_bufferSize", "cusolverDnCreateSyevjInfo",
                    "cusolverDnDestroySyevjInfo", "cusolverDnXsyevjSetMaxSweeps"], 0)
    direct = cusolver_direct.DirectCusolver(lib)
    assert direct.has("syevjBatched", np.complex128) and direct.has("gesvdjBatched", np.float32)
    assert not direct.has("gesvdjBatched", np.float64)
    assert direct.syevjBatched_bufferSize(np.float64, 1, 1, 0, 4, 100, 4, 200, 300, 8) == 0
    name, args = lib.calls[-1]
    assert name == "cusolverDnDsyevjBatched_bufferSize" and args[-2:] == (300, 8)
    params = cusolver_direct.JacobiParams(direct, "syevj", max_sweeps=7)
    params.destroy()
    params.destroy()
    assert [c[0] for c in lib.calls[-3:]] == ["cusolverDnCreateSyevjInfo",
                                              "cusolverDnXsyevjSetMaxSweeps",
                                              "cusolverDnDestroySyevjInfo"]
    cusolver_direct.JacobiParams(direct, "syevj")
    gc.collect()
    assert [c[0] for c in lib.calls[-2:]] == ["cusolverDnCreateSyevjInfo",
                                              "cusolverDnDestroySyevjInfo"]
    with pytest.raises(AttributeError, match="cusolverDnCreateGesvdjInfo"):
        cusolver_direct.JacobiParams(direct, "gesvdj")
    failing = cusolver_direct.DirectCusolver(_Library(["cusolverDnSetStream",
                                                           "cusolverDnZheevjBatched"], 9))
    with pytest.raises(cusolver_direct.CUSOLVERError,
                       match="cusolverDnZheevjBatched: CUSOLVER_STATUS_NOT_SUPPORTED"):
        failing.syevjBatched(np.complex128, 1, 1, 0, 4, 100, 4, 200, 300, 8, 400, 500, 2)
    assert len(lib.cusolverDnZheevjBatched.argtypes) == 12
    assert len(lib.cusolverDnSgesvdjBatched.argtypes) == 16


def test_direct_cublas_binds_the_triangular_solves():
    """``plax_cupy.cublas_direct``'s ``trsm``/``trsmBatched``: the ``_v2`` entry point for
    one matrix, the batched one for a batch, the dtype's letter, the status checked."""
    pytest.importorskip("plax_cupy")
    from plax_cupy import cublas_direct
    names = ["cublasSetStream_v2", "cublasGetPointerMode_v2", "cublasSetPointerMode_v2",
             "cublasGemmStridedBatchedEx", "cublasZtrsm_v2", "cublasStrsmBatched"]
    lib = _Library(names, 15)
    direct = cublas_direct.DirectCublas(lib)
    assert direct.has("trsm", np.complex128) and direct.has("trsmBatched", np.float32)
    assert not direct.has("trsm", np.float32)
    with pytest.raises(cublas_direct.CUBLASError, match="cublasZtrsm_v2: CUBLAS_STATUS_NOT_SUP"):
        direct.trsm(np.complex128, 1, 0, 0, 0, 0, 4, 2, 10, 20, 4, 30, 4)
    with pytest.raises(cublas_direct.CUBLASError, match="cublasStrsmBatched"):
        direct.trsmBatched(np.float32, 1, 0, 0, 0, 0, 4, 2, 10, 20, 4, 30, 4, 5)
    assert len(lib.cublasZtrsm_v2.argtypes) == 12
    assert len(lib.cublasStrsmBatched.argtypes) == 13
