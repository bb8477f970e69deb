"""The CuPy backend under threads: its counters, CUDA graphs and cuSOLVER's Jacobi params
objects (issue 24).

* a kernel-table (plugin) call counts as one launch even when another thread launches a
  generated kernel while it runs: ``CupyBackend._wrap`` asks the calling thread's own counts
  whether the call launched a generated kernel, not the process's totals;
* 8 threads x 50 calls of one jitted multi-kernel program (an MLP training step), and of one
  holding ``eigh`` and ``svd`` of batches of small matrices (the batched Jacobi routines),
  with graphs and the first-replay check on: every result is the NumPy backend's, and
  ``plax_cupy.count()``'s totals are the sum of the threads' ``count(this_thread=True)``;
* plain calls of an ``eigh`` program from two threads at once each run on a params object of
  their own (cuSOLVER documents the object as one a call writes: the stand-in ``libcusolver``
  counts calls that share one, :func:`fake_cupy_linalg.params_shared`), destroyed when the
  thread ends;
* a library that cannot make a params object is asked once, not on every call; the failure is
  in ``as_text()``.

The simulated CuPy has one GPU, so threads on two GPUs are not covered here. The tests run
on the simulated GPU in the child process of ``test_graph_verify.py``'s
``test_on_the_simulated_gpu`` (one child for both files); they skip elsewhere.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

from test_simulated_streams import on_simulated_gpu

THREADS, CALLS = 8, 50


@pytest.fixture
def executables(compiled_programs):
    """The executables compiled in the test (``conftest.compiled_programs``)."""
    return compiled_programs


def _in_threads(work, n: int) -> list:
    """``work(k)`` for ``k < n``, each in a thread of its own, started together; their results
    (an exception raised in one is raised here)."""
    results, errors = [None] * n, []
    start = threading.Barrier(n, timeout=60)

    def run(k):
        try:
            start.wait()
            results[k] = work(k)
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)
    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


@on_simulated_gpu
def test_a_kernel_call_counts_its_launch_while_another_thread_launches():
    """A plugin kernel's call (no generated kernel inside: one launch) is counted as one while
    another thread launches a generated kernel (``x + y``) in the middle of it: 2 launches in
    all, one in each thread's own count. (Judged by the process's totals, the other thread's
    launch made the call look as if it had launched a generated kernel itself, and it went
    uncounted.)"""
    import cupy
    import plax
    from plax import plugins
    from plax.core.primitive import Primitive
    import plax_cupy
    prim = Primitive("simulated_waiting_copy")
    prim.def_abstract_eval(lambda x: x)
    inside, launched = threading.Event(), threading.Event()

    def waiting_copy(x):   # (a CuPy operation, not a generated kernel: counted by _wrap)
        inside.set()
        assert launched.wait(60), "the other thread did not launch"
        return cupy.multiply(x, 1)
    plugins.registry().get_backend("cupy").register_kernel(prim, waiting_copy)
    gpu = plax.devices("gpu")[0]
    x = plax.device_put(np.arange(4, dtype=np.float32), gpu)

    def work(k):
        with plax_cupy.count(this_thread=True) as mine:
            if k == 0:
                out = prim.bind(x)
            else:
                assert inside.wait(60), "the kernel call did not begin"
                out = x + x
                launched.set()
        np.testing.assert_array_equal(np.asarray(out), np.arange(4) * (k + 1))
        return mine.launches
    with plax_cupy.count() as total:
        per_thread = _in_threads(work, 2)
    assert per_thread == [1, 1] and total.launches == 2, (per_thread, total)


def _mlp_step():
    """A fresh MLP training step (a program of its own): products, their gradients, fused
    updates."""
    import plax
    import plax.numpy as jnp

    def loss(p, x, y):
        h = jnp.tanh(x @ p[0] + p[1])
        return jnp.mean((h @ p[2] - y) ** 2)

    def step(p, x, y):
        return [w - 0.1 * g for w, g in zip(p, plax.grad(loss)(p, x, y))]
    return step


def _mlp_args(seed: int) -> tuple:
    r = np.random.default_rng(seed)
    p = [r.normal(size=s).astype(np.float32) for s in [(8, 16), (16,), (16, 4)]]
    return p, r.normal(size=(32, 8)).astype(np.float32), r.normal(size=(32, 4)).astype(np.float32)


def _spectra(h, x):
    """``eigh`` of a batch of Hermitian matrices and ``svd`` of a batch of small ones, read
    through what does not depend on the vectors' phases (the values and reconstructions)."""
    from plax import numpy as pnp
    from plax.lax import linalg
    v, w = linalg.eigh(h, lower=True, symmetrize_input=False)
    u, s, vh = linalg.svd(x, full_matrices=False, compute_uv=True)
    return [w, (v * w[..., None, :]) @ pnp.swapaxes(v, -1, -2),
            s, (u * s[..., None, :]) @ vh]


def _spectra_args(seed: int) -> tuple:
    r = np.random.default_rng(seed)
    a = r.normal(size=(6, 4, 4))
    h = (a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)).astype(np.float32)
    return h, r.normal(size=(3, 6, 5)).astype(np.float32)


@on_simulated_gpu
@pytest.mark.parametrize("program", ["mlp", "eigh-svd"])
def test_threads_calling_one_graphed_program(program, executables):
    """8 threads x 50 calls of one jitted program, each thread on inputs of its own, with CUDA
    graphs and the first-replay check on: every result is the NumPy backend's for that thread's
    inputs (a plan's outputs never reach another thread's call), the program replayed as a
    graph, and the process's counts are the sum of the threads' own, field by field."""
    import plax
    import plax_cupy
    make, args_of = {"mlp": (_mlp_step, _mlp_args), "eigh-svd": (lambda: _spectra, _spectra_args)}[program]
    fn = make()
    inputs = [args_of(k) for k in range(THREADS)]
    want = [[np.asarray(o) for o in plax.tree_util.tree_leaves(plax.jit(fn, backend="numpy")(*a))]
            for a in inputs]
    gpu = plax.devices("gpu")[0]
    on_gpu = [plax.device_put(a, gpu) for a in inputs]
    f = plax.jit(fn)
    outputs = len(want[0])

    def work(k):
        with plax_cupy.count(this_thread=True) as mine:
            for _ in range(CALLS):
                got = [np.asarray(o) for o in plax.tree_util.tree_leaves(f(*on_gpu[k]))]
                for g, w in zip(got, want[k]):
                    np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)
        return mine.snapshot()
    with plax_cupy.count() as total:
        per_thread = _in_threads(work, THREADS)
    summed = [sum(column) for column in zip(*per_thread)]
    assert list(total.snapshot()) == summed, (total, per_thread)
    assert total.device_to_host == THREADS * CALLS * outputs and total.host_fallbacks == 0, total
    graphed = executables[-1].graphed
    assert graphed.replays > 0 and graphed.verified > 0 and not graphed.mismatch, \
        executables[-1].as_text().splitlines()[-1]


@on_simulated_gpu
def test_plain_calls_in_two_threads_run_on_params_objects_of_their_own(monkeypatch):
    """Two threads inside ``syevjBatched`` at once, plain calls of one program (graphs off: its
    plain calls are not serialised): each runs on a params object of its own, never the same
    one (``params_shared`` unchanged), both give the first call's bits, and each thread's
    object is destroyed when its thread ends."""
    import gc
    import plax
    from plax.lax import linalg
    import fake_cupy_linalg
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    h, _ = _spectra_args(3)
    args = plax.device_put(h, plax.devices("gpu")[0])
    f = plax.jit(lambda a: linalg.eigh(a, lower=True, symmetrize_input=False)[1] * 2)
    first = np.asarray(f(args))   # (compiled, and the main thread's params object made)
    gc.collect()
    alive, shared = fake_cupy_linalg.params_alive(), fake_cupy_linalg.params_shared()
    errors = len(fake_cupy_linalg.ERRORS)
    meet, solve = threading.Barrier(2, timeout=30), fake_cupy_linalg._RUN["syevjBatched"]

    def meeting(stream, dtype, v):   # (both calls inside the routine before either computes)
        meet.wait()
        return solve(stream, dtype, v)
    monkeypatch.setitem(fake_cupy_linalg._RUN, "syevjBatched", meeting)
    results = _in_threads(lambda k: np.asarray(f(args)), 2)
    assert fake_cupy_linalg.ERRORS[errors:] == [], fake_cupy_linalg.ERRORS[errors:]
    assert fake_cupy_linalg.params_shared() == shared, "two calls shared one params object"
    for got in results:
        np.testing.assert_array_equal(got, first)
    gc.collect()
    assert fake_cupy_linalg.params_alive() == alive   # (the threads' own, destroyed with them)


@on_simulated_gpu
def test_a_params_object_that_cannot_be_made_is_asked_for_once(monkeypatch, executables):
    """A library refusing to make a params object (``CUSOLVER_STATUS_ALLOC_FAILED``) is asked
    once: every call runs CuPy's path (the eager call's bits), the capture fails with that
    reason, and ``as_text()`` says why the batches take CuPy's path."""
    import plax
    from plax.lax import linalg
    from plax_cupy import cusolver_direct
    attempts = []

    def refused(direct, kind, **settings):
        attempts.append(kind)
        raise cusolver_direct.CUSOLVERError(2, "cusolverDnCreateSyevjInfo")
    monkeypatch.setattr(cusolver_direct, "JacobiParams", refused)
    h, _ = _spectra_args(4)
    args = plax.device_put(h, plax.devices("gpu")[0])

    def f(a):
        return [t * 2 for t in linalg.eigh(a, lower=True, symmetrize_input=False)]
    eager = [np.asarray(o) for o in f(args)]
    jitted = plax.jit(f)
    for _ in range(3):
        for got, want in zip(jitted(args), eager):
            np.testing.assert_array_equal(np.asarray(got), want)
    assert attempts == ["syevj"], attempts
    text = executables[-1].as_text()
    why = "CUSOLVERError: cusolverDnCreateSyevjInfo: CUSOLVER_STATUS_ALLOC_FAILED"
    assert f"// ProgramEigh: no syevj params object ({why})" in text, text
    assert f"capture failed ({why})" in text.splitlines()[-1], text


def test_a_refused_params_object_is_answered_with_no_lock_held(monkeypatch):
    """``_params`` answers a refused params object (None on a plain call, the error in a
    capture) with its lock released: the lock is not reentrant, and answering by calling
    itself under it deadlocks as soon as that call takes the lock again. Runs on the host:
    no GPU call is made."""
    kernels_linalg = pytest.importorskip("plax_cupy.kernels_linalg")
    from plax_cupy import cusolver_direct
    kernel = kernels_linalg.ProgramEigh(lower=True)

    def refused(direct, kind, **settings):
        assert kernel._lock.locked()   # (the attempt itself is made under the lock)
        raise cusolver_direct.CUSOLVERError(2, "cusolverDnCreateSyevjInfo")
    monkeypatch.setattr(cusolver_direct, "binding", lambda: object())
    monkeypatch.setattr(cusolver_direct, "JacobiParams", refused)
    locked_on_entry, params = [], kernel._params

    def entering(capturing):
        locked_on_entry.append(kernel._lock.locked())
        return params(capturing)
    kernel._params = entering
    assert kernel._params(False) is None
    with pytest.raises(cusolver_direct.CUSOLVERError, match="CreateSyevjInfo"):
        kernel._params(True)
    assert locked_on_entry == [False, False] and not kernel._lock.locked()
