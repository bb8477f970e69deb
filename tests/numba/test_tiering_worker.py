"""Tiered compilation in a worker process (issue 26, item 2): kernels compile in
:mod:`plax_numba.compile_worker` and load here from numba's disk cache. No timing is
asserted: the tests poll (with generous timeouts) for the fast path, and check values, the
warnings, which process compiled, and that workers are restarted and stopped."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import numpy as np
import pytest

import plax
from plax import numpy as jnp
from plax.lowering import PlaxFallbackWarning


@pytest.fixture
def tiered_fresh(monkeypatch, tmp_path):
    """Tiered compilation after one run, with an empty kernel cache (so the worker really
    compiles) and no kernel remembered by this process."""
    from plax_numba import cache
    monkeypatch.delenv("PLAX_NUMBA_SYNC", raising=False)
    monkeypatch.delenv("PLAX_NUMBA_WORKERS", raising=False)
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "1")
    monkeypatch.setattr(cache, "_dir", str(tmp_path))
    monkeypatch.setattr(cache, "_compiled", {})
    monkeypatch.setattr(cache, "_kernels", {})
    return tmp_path


def _ready(f) -> list:
    """Whether each cluster step of jitted ``f``'s one program switched to its kernel."""
    (entry,) = f._cache.values()
    glob = entry.executable.__globals__
    steps = [v for k, v in glob.items() if k.startswith("_f") and hasattr(v, "__globals__")
             and "_ready" in v.__globals__]
    return [s.__globals__["_ready"] for s in steps]


def _poll_ready(f, x, timeout=300.0) -> None:
    """Calls ``f(x)`` until its kernel is in use (at most ``timeout`` seconds: no timing is
    asserted, a stuck compilation fails)."""
    from plax_numba import tiered
    deadline = time.monotonic() + timeout
    while not all(_ready(f)):
        assert time.monotonic() < deadline, "the kernel never became ready"
        f(x)
        tiered.wait_idle(timeout=1.0)


def _cluster(x):
    return jnp.sqrt(x * x + 1.625) * 0.75 - jnp.cos(x) ** 2



def _calls_and_fallback_warnings(f, x):
    """Four calls of ``f(x)`` with the background work drained after the first and the last:
    their results, and the messages of the fallback warnings they raised."""
    from plax_numba import tiered
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outs = [np.asarray(f(x))]
        assert tiered.wait_idle(timeout=300)
        outs += [np.asarray(f(x)) for _ in range(3)]
        assert tiered.wait_idle(timeout=300)
    return outs, [str(w.message) for w in caught if issubclass(w.category, PlaxFallbackWarning)]

def test_worker_compiles_and_values_match_sync(tiered_fresh, monkeypatch):
    from plax_numba import cache, compile_worker
    x = np.linspace(-3, 3, 1001, dtype=np.float32)
    loaded = cache.load_stats["loaded"]
    f = plax.jit(_cluster, backend="numba")
    first = np.asarray(f(x))  # the reference kernels; the worker starts compiling
    _poll_ready(f, x)
    fast = np.asarray(f(x))
    assert compile_worker.worker_pids(), "no compile worker ran"
    assert cache.load_stats["loaded"] == loaded + 1  # loaded from the disk cache, here
    assert cache.load_stats["compiled here"] == 0
    # the worker wrote a native artifact with the kernel's code, not numba's cache entry: it
    # compiled the kernel without numba's Python wrappers (cache._compile_native)
    from plax_numba import native_emit
    artifacts = [p for p in tiered_fresh.iterdir() if p.suffix == ".native"]
    assert len(artifacts) == 1 and native_emit.has_code(str(artifacts[0]))
    assert not (tiered_fresh / "__pycache__").exists() or not any(
        n.endswith(".nbi") for n in os.listdir(tiered_fresh / "__pycache__"))
    # compiled again, in this process, into another cache: the same bits
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")
    monkeypatch.setattr(cache, "_dir", str(tiered_fresh / "sync"))
    os.makedirs(cache._dir)
    monkeypatch.setattr(cache, "_compiled", {})
    monkeypatch.setattr(cache, "_kernels", {})
    sync = np.asarray(plax.jit(_cluster, backend="numba")(x))
    np.testing.assert_array_equal(fast, sync)
    want = np.sqrt(x.astype(np.float64) ** 2 + 1.625) * 0.75 - np.cos(x.astype(np.float64)) ** 2
    np.testing.assert_allclose(fast, want, rtol=2e-6, atol=2e-6)
    np.testing.assert_allclose(first, want, rtol=2e-6, atol=2e-6)


def test_worker_failure_falls_back_with_one_warning(tiered_fresh, monkeypatch):
    from plax_numba import cache
    real = cache.module_source

    def failing(kernel_source, primitives):  # the module raises when the worker imports it
        return real(kernel_source, primitives) + "\nraise RuntimeError('simulated failure')\n"
    monkeypatch.setattr(cache, "module_source", failing)
    x = np.linspace(0, 1, 7, dtype=np.float32)
    f = plax.jit(lambda x: jnp.sin(x) * 2.5 + x * x, backend="numba")
    outs, msgs = _calls_and_fallback_warnings(f, x)
    assert len(msgs) == 1, msgs
    assert "simulated failure" in msgs[0] and "compile worker" in msgs[0], msgs[0]
    assert _ready(f) == [False]  # the reference path keeps running
    for out in outs:
        np.testing.assert_allclose(out, np.sin(x) * 2.5 + x * x, rtol=1e-6)


def test_killed_worker_is_restarted_and_the_job_retried(tiered_fresh):
    from plax_numba import compile_worker
    job = compile_worker.submit(time.sleep, 1.0)
    (pid,) = compile_worker.worker_pids()
    started = compile_worker.started()  # (after the first start: the test runs alone too)
    os.kill(pid, signal.SIGKILL)  # mid-run (or while it starts): its job runs again
    assert job.result(timeout=300) is None
    assert compile_worker.started() == started + 1
    assert pid not in compile_worker.worker_pids()
    assert compile_worker.submit(os.getpid).result(timeout=300) in compile_worker.worker_pids()

    # a kernel whose compilation is under way when the worker dies still becomes ready
    x = np.linspace(-1, 1, 513, dtype=np.float32)
    f = plax.jit(lambda x: jnp.exp(x * 0.5) - x * 0.375, backend="numba")
    f(x)
    for pid in compile_worker.worker_pids():
        os.kill(pid, signal.SIGKILL)
    _poll_ready(f, x)
    np.testing.assert_allclose(np.asarray(f(x)), np.exp(x * 0.5) - x * 0.375, rtol=2e-6)


def test_a_job_that_kills_its_worker_twice_fails_its_future(tiered_fresh):
    from plax_numba import compile_worker
    job = compile_worker.submit(os._exit, 3)  # dies on the first worker and on the retry
    with pytest.raises(compile_worker.WorkerDiedError, match="exit status 3"):
        job.result(timeout=300)
    assert compile_worker.submit(os.getpid).result(timeout=300) > 0  # a fresh worker serves


def test_no_worker_under_sync(tiered_fresh, monkeypatch):
    from plax_numba import compile_worker
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")
    started = compile_worker.started()
    x = np.linspace(0, 2, 9, dtype=np.float32)
    out = plax.jit(lambda x: jnp.tanh(x) * 1.25 + x, backend="numba")(x)
    np.testing.assert_allclose(np.asarray(out), np.tanh(x) * 1.25 + x, rtol=2e-6)
    assert compile_worker.started() == started


_EXIT_WITH_WORKER = textwrap.dedent("""
    import numpy as np
    import plax
    from plax import numpy as jnp
    from plax_numba import compile_worker
    f = plax.jit(lambda x: jnp.log(x * x + 3.0) * 0.5 + x, backend="numba")
    f(np.linspace(0, 1, 4097, dtype=np.float32))  # hot: a compilation starts in the worker
    print("worker", *compile_worker.worker_pids(), flush=True)
""")


def test_interpreter_exit_does_not_hang_with_a_worker_alive(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PLAX_NUMBA_SYNC", "PLAX_BACKEND")}
    env.update(PLAX_NUMBA_CACHE_DIR=str(tmp_path), PLAX_NUMBA_COMPILE_AFTER="1")
    proc = subprocess.run([sys.executable, "-c", _EXIT_WITH_WORKER], capture_output=True,
                          text=True, env=env, timeout=240)
    if proc.returncode and "Unknown backend" in proc.stderr:
        pytest.skip("no numba entry point in this install")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Warning" not in proc.stderr, proc.stderr[-3000:]
    pids = [int(p) for p in proc.stdout.split("worker", 1)[1].split()]
    assert pids, proc.stdout
    deadline = time.monotonic() + 60
    for pid in pids:  # stopped with its parent (not left compiling on its own)
        while _alive(pid):
            assert time.monotonic() < deadline, f"compile worker {pid} outlived its parent"
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"  # a zombie has exited
    except OSError:
        return False


def test_compile_runs_in_the_worker_while_the_program_keeps_running(tiered_fresh, tmp_path):
    # The worker is held busy on a job that waits for a file, so the kernel's compilation
    # queues behind it: the program's calls must keep returning (on the reference path)
    # meanwhile, and once the gate opens the kernel is compiled by the worker's process.
    from plax_numba import cache, compile_worker
    gate = tmp_path / "gate"
    blocker = compile_worker.submit(
        subprocess.call, ["sh", "-c", f'while [ ! -e "{gate}" ]; do sleep 0.05; done'])
    x = np.linspace(-2, 2, 257, dtype=np.float32)
    want = np.exp(x * 0.25) * 1.5 - x
    f = plax.jit(lambda x: jnp.exp(x * 0.25) * 1.5 - x, backend="numba")
    done = len(cache.load_times)
    for _ in range(5):  # hot after the first: its job waits behind the blocker
        np.testing.assert_allclose(np.asarray(f(x)), want, rtol=2e-6)
    assert not blocker.done() and _ready(f) == [False]
    gate.touch()
    assert blocker.result(timeout=300) == 0
    _poll_ready(f, x)
    np.testing.assert_allclose(np.asarray(f(x)), want, rtol=2e-6)
    (record,) = cache.load_times[done:]
    assert record["compiled by"] not in (None, os.getpid())
    assert record["compiled by"] in compile_worker.worker_pids()


def test_warm_cache_runs_the_kernel_from_the_first_call(tiered_fresh, monkeypatch):
    # A first process (here: a synchronous compilation) leaves the kernel in the disk cache;
    # a program built afterwards, with nothing compiled in memory, loads it when it is built
    # and runs it from its first call, without the worker.
    from plax_numba import cache, compile_worker
    x = np.linspace(-3, 3, 999, dtype=np.float32)
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")
    plax.jit(_cluster, backend="numba")(x)
    monkeypatch.delenv("PLAX_NUMBA_SYNC")
    monkeypatch.setattr(cache, "_compiled", {})
    monkeypatch.setattr(cache, "_kernels", {})
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "1000")  # never hot: only a load helps
    stats, started = dict(cache.load_stats), compile_worker.started()
    f = plax.jit(lambda x: _cluster(x), backend="numba")  # (not the first one's program)
    out = np.asarray(f(x))
    assert _ready(f) == [True]
    assert cache.load_stats["loaded"] == stats["loaded"] + 1
    assert cache.load_stats["compiled here"] == stats["compiled here"]
    assert cache.load_times[-1]["compiled by"] is None  # (on disk: no compilation at all)
    assert compile_worker.started() == started
    want = np.sqrt(x.astype(np.float64) ** 2 + 1.625) * 0.75 - np.cos(x.astype(np.float64)) ** 2
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=2e-6)


_THREEFRY_IN_WORKER = textwrap.dedent("""
    import numpy as np
    import plax
    from plax import random
    from plax_numba import compile_worker, threefry, tiered
    from plax_numpy import impls_random
    assert not threefry.on_disk()
    tiered.submit(threefry.precompile)   # as a hot program's step does
    assert tiered.wait_idle(timeout=600)
    from plax_numba import threefry_kernels as k
    sig = threefry.signature()
    misses = sum(k.hash_serial.stats.cache_misses.values()) + sum(
        k.hash_parallel.stats.cache_misses.values())
    print("on disk", threefry.on_disk(), "loaded", tuple(sig) in k.hash_serial.overloads,
          tuple(sig) in k.hash_parallel.overloads, "compiled here", misses,
          "workers", compile_worker.started())
    x = np.arange(70000, dtype=np.uint32)
    for n in (7, 70000):  # the serial and the parallel kernel
        args = (np.uint32(3), np.uint32(9), x[:n], x[:n][::-1].copy())
        for got, want in zip(threefry.threefry2x32(*args), impls_random.threefry2x32(*args)):
            np.testing.assert_array_equal(got, want)
    print("values ok")
""")


def test_threefry_compiles_in_the_worker(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PLAX_NUMBA_SYNC", "PLAX_NUMBA_WORKERS", "PLAX_BACKEND")}
    env.update(PLAX_NUMBA_CACHE_DIR=str(tmp_path / "plax"), NUMBA_CACHE_DIR=str(tmp_path / "nb"))
    # numba's loading of the fixed kernels (with the native loader on, their generated forms
    # link without numba instead: tests/numba/test_native_loader.py)
    env["PLAX_NUMBA_NATIVE"] = "0"
    proc = subprocess.run([sys.executable, "-c", _THREEFRY_IN_WORKER], capture_output=True,
                          text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "on disk True loaded True True compiled here 0 workers 1" in proc.stdout, proc.stdout
    assert "values ok" in proc.stdout


def _kernels_in_use(f) -> list:
    (entry,) = f._cache.values()
    glob = entry.executable.__globals__
    return [v.__globals__["_kernel"] for k, v in glob.items()
            if k.startswith("_f") and hasattr(v, "__globals__") and "_ready" in v.__globals__]


def test_parallel_kernel_runs_its_serial_form_until_it_is_compiled(tiered_fresh, monkeypatch):
    # The worker's parallel compilation is held until the serial form is in use: the step
    # switches to the serial kernel first, then to the parallel one, with the same values.
    import threading
    from concurrent.futures import Future
    from plax_numba import cache, codegen, compile_worker, tiered
    released = threading.Event()
    real = compile_worker.submit

    def submit(fn, *args):
        future = real(fn, *args)
        if fn is not cache.compile_for_cache or cache.serial_variant(args[0]) is None:
            return future
        held = Future()  # the parallel kernel's job: finished once the test says so

        def finish():
            released.wait(600)
            try:
                held.set_result(future.result())
            except BaseException as err:  # noqa: BLE001
                held.set_exception(err)
        threading.Thread(target=finish, daemon=True).start()
        return held
    monkeypatch.setattr(compile_worker, "submit", submit)
    x = np.linspace(-3, 3, max(codegen.PARALLEL_MIN, 1 << 16), dtype=np.float32)
    want = np.sqrt(x.astype(np.float64) ** 2 + 1.625) * 0.75 - np.cos(x.astype(np.float64)) ** 2
    f = plax.jit(lambda x: _cluster(x), backend="numba")
    serial_loads = len(cache.serial_loaded_at)
    try:
        f(x)  # hot at once: the worker gets the serial form, then the parallel kernel
        deadline = time.monotonic() + 300
        while not all(_ready(f)):
            assert time.monotonic() < deadline, "the serial form never became ready"
            f(x)
            time.sleep(0.01)
        # (the worker's thread records the load just after the step switches: wait for it)
        while len(cache.serial_loaded_at) == serial_loads and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(cache.serial_loaded_at) == serial_loads + 1
        (serial,) = _kernels_in_use(f)
        np.testing.assert_allclose(np.asarray(f(x)), want, rtol=2e-6, atol=2e-6)
    finally:
        released.set()   # (a failure above must not leave the held job to later tests)
    assert tiered.wait_idle(timeout=600)
    (parallel,) = _kernels_in_use(f)
    assert parallel is not serial
    np.testing.assert_allclose(np.asarray(f(x)), want, rtol=2e-6, atol=2e-6)


def test_submitting_never_waits_for_a_busy_worker(tiered_fresh, tmp_path):
    # More job data than a pipe holds (64 KiB on Linux), queued while the worker is held
    # busy: submit returns at once (a step that gets hot hands its job over from the
    # program's thread), and every job runs once the worker is free.
    import threading
    from plax_numba import compile_worker
    gate = tmp_path / "gate"
    blocker = compile_worker.submit(
        subprocess.call, ["sh", "-c", f'while [ ! -e "{gate}" ]; do sleep 0.05; done'])
    futures = []
    submitter = threading.Thread(target=lambda: futures.extend(
        compile_worker.submit(len, "x" * 100_000) for _ in range(20)))
    submitter.start()
    submitter.join(timeout=120)  # (generous: a blocking submit would never return here)
    assert not submitter.is_alive(), "submit waited for the busy worker"
    assert not blocker.done() and len(futures) == 20
    gate.touch()
    assert [f.result(timeout=300) for f in futures] == [100_000] * 20


@pytest.mark.parametrize("program_froze", [False, True])
def test_compile_window_freezes_the_heap_and_unfreezes_it(tiered_fresh, tmp_path,
                                                          program_froze):
    # While compile jobs are pending the heap sits in the collector's permanent generation
    # (no full collection walks it); afterwards it is unfrozen, so garbage among it is
    # collected as usual. A freeze the program made itself is left alone.
    import gc
    from plax_numba import compile_worker, tiered
    assert tiered.wait_idle(timeout=300) and gc.get_freeze_count() == 0
    gate = tmp_path / "gate"
    blocker = compile_worker.submit(
        subprocess.call, ["sh", "-c", f'while [ ! -e "{gate}" ]; do sleep 0.05; done'])
    if program_froze:
        gc.freeze()
    try:
        frozen_before = gc.get_freeze_count()
        x = np.linspace(-1, 1, 129, dtype=np.float32)
        f = plax.jit(lambda x: jnp.sin(x * 0.75) * 1.25 + x, backend="numba")
        f(x)  # hot: the job waits behind the blocker
        assert tiered.compile_window_open()
        if program_froze:
            assert gc.get_freeze_count() <= frozen_before  # not frozen again by plax
        else:
            assert gc.get_freeze_count() > 0
        gate.touch()
        assert blocker.result(timeout=300) == 0
        _poll_ready(f, x)
        assert tiered.wait_idle(timeout=300) and not tiered.compile_window_open()
        if program_froze:
            assert gc.get_freeze_count() > 0  # still the program's
        else:
            assert gc.get_freeze_count() == 0
    finally:
        gate.touch()
        if program_froze:
            gc.unfreeze()


def test_jobs_failing_because_the_workers_stopped_do_not_warn():
    # At interpreter exit compile_worker's atexit hook can stop the workers before tiered's
    # own hook marks the exit: a job failing for that reason is not a fallback to report.
    import warnings
    from plax_numba import compile_worker, tiered
    err = compile_worker.WorkerDiedError("stopped")
    compile_worker.shutdown()
    try:
        assert compile_worker.stopped()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            tiered.compile_failed(["exp"], "kernel.py", err)
    finally:
        compile_worker.restart_allowed()
    assert not compile_worker.stopped()
    with pytest.warns(tiered.PlaxFallbackWarning, match="exp"):
        tiered.compile_failed(["exp"], "kernel.py", err)


# ---------------------------------------------------------------- cache misses (issue 26)

def _lose_index_entries(cache_dir) -> int:
    """Deletes numba's cache indexes under ``cache_dir``: what another process's index
    write does to an entry it did not know about (numba rewrites a source's whole index).
    Returns how many were deleted."""
    pycache = cache_dir / "__pycache__"
    gone = [p for p in pycache.iterdir() if p.suffix == ".nbi"]
    for p in gone:
        p.unlink()
    return len(gone)


@pytest.fixture
def numba_compiles(monkeypatch):
    """The threads on which this process calls a numba dispatcher's ``compile`` (numba's
    own compile-or-load path; the lean load and the worker do not use it here)."""
    import threading
    from numba.core.dispatcher import Dispatcher
    real, threads = Dispatcher.compile, []

    def compile(self, sig):
        threads.append(threading.current_thread().name)
        return real(self, sig)
    monkeypatch.setattr(Dispatcher, "compile", compile)
    return threads


def _fresh_process_state(monkeypatch):
    """This process as a new one would be: no kernel compiled or imported."""
    from plax_numba import cache
    monkeypatch.setattr(cache, "_compiled", {})
    monkeypatch.setattr(cache, "_kernels", {})


@pytest.mark.parametrize("compiled_by", ["this process", "the worker"])
def test_an_index_miss_is_recached_by_the_worker_not_compiled_here(
        tiered_fresh, monkeypatch, numba_compiles, compiled_by):
    # The marker says the kernel is on disk, but numba's index lost its entry: the program's
    # thread does not compile it (its first call runs the reference path), and the
    # background thread sends it back to the worker, which writes it into the cache again
    # (saving its own compiled copy, or compiling anew what it never compiled), then loads it.
    # (numba's own loading path: a kernel with a native artifact never reads numba's index)
    monkeypatch.setenv("PLAX_NUMBA_NATIVE", "0")
    from plax_numba import cache
    x = np.linspace(-3, 3, 1001, dtype=np.float32)
    want = np.sqrt(x.astype(np.float64) ** 2 + 1.625) * 0.75 - np.cos(x.astype(np.float64)) ** 2
    if compiled_by == "the worker":
        first = plax.jit(lambda x: _cluster(x), backend="numba")  # (a program of its own)
        first(x)
        _poll_ready(first, x)
    else:
        monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")
        plax.jit(lambda x: _cluster(x), backend="numba")(x)
        monkeypatch.delenv("PLAX_NUMBA_SYNC")
    assert _lose_index_entries(tiered_fresh) >= 1
    _fresh_process_state(monkeypatch)
    compiled_before = len(numba_compiles)
    stats = dict(cache.load_stats)
    f = plax.jit(lambda x: _cluster(x), backend="numba")
    out = np.asarray(f(x))
    assert cache.load_stats["missed here"] == stats["missed here"] + 1
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=2e-6)
    _poll_ready(f, x)
    np.testing.assert_allclose(np.asarray(f(x)), want, rtol=2e-6, atol=2e-6)
    assert cache.load_stats["recached"] == stats["recached"] + 1
    assert cache.load_stats["loaded"] == stats["loaded"] + 1
    assert cache.load_stats["compiled here"] == stats["compiled here"]
    assert numba_compiles[compiled_before:] == []  # numba compiled nothing here, any thread
    assert any(p.suffix == ".nbi" for p in (tiered_fresh / "__pycache__").iterdir())


def test_the_program_thread_never_waits_for_numbas_compiler_lock(tiered_fresh, monkeypatch):
    # A compilation in this process (PLAX_NUMBA_WORKERS=0, a program's own numba code) holds
    # numba's compiler lock for seconds: a program whose kernel is on disk does not wait for
    # it to load the kernel; its calls run the reference path, and the background thread
    # loads the kernel once the lock is free.
    import threading
    from numba.core.compiler_lock import global_compiler_lock
    from plax_numba import cache
    x = np.linspace(-2, 2, 257, dtype=np.float32)
    want = np.exp(x * 0.25) * 1.5 - x
    monkeypatch.setenv("PLAX_NUMBA_NATIVE", "0")  # (numba's own loading path)
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")
    plax.jit(lambda x: jnp.exp(x * 0.25) * 1.5 - x, backend="numba")(x)
    monkeypatch.delenv("PLAX_NUMBA_SYNC")
    _fresh_process_state(monkeypatch)
    held, release = threading.Event(), threading.Event()

    def compiling():  # as numba's compiler does, for the length of a compilation
        with global_compiler_lock:
            held.set()
            release.wait(600)
    holder = threading.Thread(target=compiling, daemon=True)
    holder.start()
    try:
        assert held.wait(60)
        stats = dict(cache.load_stats)
        f = plax.jit(lambda x: jnp.exp(x * 0.25) * 1.5 - x, backend="numba")
        results = []
        caller = threading.Thread(target=lambda: results.extend(
            np.asarray(f(x)) for _ in range(3)), daemon=True)
        caller.start()
        caller.join(timeout=120)  # (generous: a call waiting for the lock never returns)
        assert not caller.is_alive(), "the program's thread waited for the compiler lock"
        assert cache.load_stats["missed here"] == stats["missed here"] + 1
        assert _ready(f) == [False]  # the background thread waits for the lock instead
        for out in results:
            np.testing.assert_allclose(out, want, rtol=2e-6)
    finally:
        release.set()
    holder.join(60)
    _poll_ready(f, x)
    np.testing.assert_allclose(np.asarray(f(x)), want, rtol=2e-6)
    assert cache.load_stats["loaded"] == stats["loaded"] + 1
    assert cache.load_stats["compiled here"] == stats["compiled here"]


def test_a_failed_parallel_kernel_says_its_serial_form_keeps_running(tiered_fresh, monkeypatch):
    # The worker compiles the serial form, then fails on the parallel kernel: one warning,
    # saying that the serial form (in use) keeps running, not the reference kernels.
    from concurrent.futures import Future
    from plax_numba import cache, codegen, compile_worker, tiered
    import threading
    real, serial_loads = compile_worker.submit, len(cache.serial_loaded_at)

    def submit(fn, *args):
        if fn is not cache.compile_for_cache or cache.serial_variant(args[0]) is None:
            return real(fn, *args)
        failed = Future()  # the parallel kernel's job: fails once the serial form is in use

        def fail():
            deadline = time.monotonic() + 600
            while len(cache.serial_loaded_at) == serial_loads and time.monotonic() < deadline:
                time.sleep(0.01)
            failed.set_exception(compile_worker.WorkerCompileError(
                "LoweringError: simulated parallel failure (in the compile worker)"))
        threading.Thread(target=fail, daemon=True).start()
        return failed
    monkeypatch.setattr(compile_worker, "submit", submit)
    x = np.linspace(-3, 3, max(codegen.PARALLEL_MIN, 1 << 16), dtype=np.float32)
    want = np.sqrt(x.astype(np.float64) ** 2 + 1.625) * 0.75 - np.cos(x.astype(np.float64)) ** 2
    f = plax.jit(lambda x: _cluster(x), backend="numba")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f(x)
        assert tiered.wait_idle(timeout=600)
        out = np.asarray(f(x))
    msgs = [str(w.message) for w in caught if issubclass(w.category, PlaxFallbackWarning)]
    assert len(msgs) == 1, msgs
    assert "serial form" in msgs[0] and "simulated parallel failure" in msgs[0], msgs[0]
    assert "reference" not in msgs[0], msgs[0]
    assert _ready(f) == [True]  # (the serial form)
    assert len(cache.serial_loaded_at) == serial_loads + 1
    np.testing.assert_allclose(out, want, rtol=2e-6, atol=2e-6)


def test_index_writes_are_exclusive_between_processes(tmp_path):
    # numba's index save (read, add an entry, write back) runs under an exclusive file lock,
    # so two processes saving entries of one kernel source do not lose one of them.
    import fcntl
    import threading
    from types import SimpleNamespace
    from plax_numba import cache
    saved = []
    index = SimpleNamespace(save=lambda key, data: saved.append(key),
                            _index_path=str(tmp_path / "kernel.nbi"))
    kernel = SimpleNamespace(_cache=SimpleNamespace(_cache_file=index))
    cache.serialize_index_writes(kernel)
    cache.serialize_index_writes(kernel)  # (once: not locked twice)
    with open(tmp_path / "kernel.nbi.lock", "a") as other:  # another process's save
        fcntl.flock(other, fcntl.LOCK_EX)
        writer = threading.Thread(target=index.save, args=("sig", b""), daemon=True)
        writer.start()
        writer.join(0.5)
        assert saved == []  # waits for the other writer
        fcntl.flock(other, fcntl.LOCK_UN)
    writer.join(60)
    assert saved == ["sig"]


def test_a_backlog_starts_another_worker_which_takes_the_waiting_jobs(tiered_fresh, tmp_path,
                                                                      monkeypatch):
    # Jobs wait in the pool, not in a worker's pipe: with PLAX_NUMBA_WORKERS=2 and the first
    # worker held busy, a backlog starts a second one, which takes the waiting jobs.
    from plax_numba import compile_worker, tiered
    monkeypatch.setenv("PLAX_NUMBA_WORKERS", "2")
    gate = tmp_path / "gate"
    try:
        blocker = compile_worker.submit(
            subprocess.call, ["sh", "-c", f'while [ ! -e "{gate}" ]; do sleep 0.05; done'])
        # (the first worker holds IN_FLIGHT jobs: the blocker and the next ones)
        queued = [compile_worker.submit(os.getpid) for _ in range(compile_worker.IN_FLIGHT - 1)]
        jobs = [compile_worker.submit(os.getpid)
                for _ in range(compile_worker.BACKLOG_FOR_ANOTHER)]
        pids = {job.result(timeout=300) for job in jobs}
        assert not blocker.done() and not any(job.done() for job in queued)
        assert len(pids) == 1 and len(compile_worker.worker_pids()) == 2
        gate.touch()
        assert blocker.result(timeout=300) == 0
    finally:
        gate.touch()
        assert tiered.wait_idle(timeout=300)
        compile_worker.shutdown()  # (later tests expect one worker)
        compile_worker.restart_allowed()


def test_a_kernel_the_cache_keeps_missing_falls_back_with_one_warning(tiered_fresh, monkeypatch):
    # The worker's trips do not bring the entry back (another process keeps dropping it):
    # after RECACHE_ATTEMPTS trips, one warning naming the cache, the reference path runs,
    # and nothing was compiled in this process.
    from plax_numba import cache
    x = np.linspace(-2, 2, 129, dtype=np.float32)
    want = np.exp(x * 0.625) - x * 0.5
    monkeypatch.setenv("PLAX_NUMBA_NATIVE", "0")  # (numba's own loading path)
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")
    plax.jit(lambda x: jnp.exp(x * 0.625) - x * 0.5, backend="numba")(x)
    monkeypatch.delenv("PLAX_NUMBA_SYNC")
    assert _lose_index_entries(tiered_fresh) >= 1
    _fresh_process_state(monkeypatch)
    trips = []
    monkeypatch.setattr(cache, "_recache_in_worker", lambda kernel, sig: trips.append(sig))
    stats = dict(cache.load_stats)
    f = plax.jit(lambda x: jnp.exp(x * 0.625) - x * 0.5, backend="numba")
    outs, msgs = _calls_and_fallback_warnings(f, x)
    assert len(msgs) == 1, msgs
    assert "missing from numba's disk cache" in msgs[0] and "PLAX_NUMBA_CACHE_DIR" in msgs[0]
    assert len(trips) == cache.RECACHE_ATTEMPTS
    assert _ready(f) == [False]
    assert cache.load_stats["compiled here"] == stats["compiled here"]
    for out in outs:
        np.testing.assert_allclose(out, want, rtol=2e-6)


def test_prestart_makes_no_thread_while_a_worker_runs(tiered_fresh, monkeypatch):
    """Every tiered program's lowering calls ``compile_worker.prestart``: with a worker
    running it returns at once rather than starting a thread that finds nothing to do."""
    from plax_numba import compile_worker
    assert compile_worker.submit(os.getpid).result(timeout=300) in compile_worker.worker_pids()
    made = []
    monkeypatch.setattr(compile_worker, "_prestart_quietly", lambda: made.append(1))
    for _ in range(3):
        compile_worker.prestart()
    for thread in threading.enumerate():   # (a start thread, had one been made, has run)
        if thread.name == "plax-numba-worker-start":
            thread.join(timeout=60)
    assert made == []
