"""Kernel compilation in worker processes, so the compiler never holds the program's GIL.

numba's compiler is mostly Python: compiling in a thread of the user's process took the GIL
for milliseconds at a time, and the program's own threads (pmap's device threads among them)
waited. Tiered compilation (:mod:`plax_numba.tiered`) therefore sends each job to a worker
process, which compiles the kernel with ``cache=True`` into the shared kernel cache
directory (:func:`plax_numba.cache.cache_dir`); the user's process then loads the machine
code from that cache (no compilation) and switches to it.

Workers are separate interpreters started with :mod:`subprocess` (``python -m
plax_numba.compile_worker``): never ``fork`` from a threaded process, and not
``multiprocessing``'s ``spawn``/``forkserver`` either, which re-run the user's ``__main__``
script in the child (a script without an ``if __name__ == "__main__"`` guard would run its
training loop in the compiler), each in a session of its own (:func:`_own_session`: Linux
shares the CPU between sessions). They start lazily, warm up once (:func:`_warm_up`: numba's
import, the kernels' helpers, a serial and a parallel compilation, cut short when a job is
waiting) and stay warm. ``PLAX_NUMBA_WORKERS`` sets how many at most (default 1; 0 compiles
in the user's process, in the background thread, as before); a further one starts only when
:data:`BACKLOG_FOR_ANOTHER` jobs wait. ``PLAX_NUMBA_WORKER_PRIORITY=idle`` runs them at
``SCHED_IDLE`` in the program's session instead, using only what the program leaves of the
CPU (:mod:`plax_numba.cpu_priority`: what each setting costs, measured), each watched by a
starvation guard on its writer thread that raises it while its work (its warm-up, its jobs)
makes no progress (:mod:`plax_numba.starvation_guard`).

A job is a module-level function and its arguments (pickled by reference), run in the
worker; :func:`submit` returns a :class:`concurrent.futures.Future` of its result. Jobs wait
in the pool, in submission order, and each worker takes the next when it finishes one. A job
that raises fails its future with :class:`WorkerCompileError` (the error in its message,
the worker's traceback in ``worker_traceback``). A worker that dies (killed, crashed) is
replaced: its jobs run again on a fresh worker once, then fail with
:class:`WorkerDiedError`. It is started by the first tiered program lowered
(:func:`prestart`), so its warm-up overlaps the calls before a step is hot. At interpreter
exit the workers are stopped without waiting for their jobs (nothing a job leaves
half-written is read: numba writes its cache files to a temporary name and renames them).
"""
from __future__ import annotations

import atexit
import collections
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import time
import traceback
from concurrent.futures import Future

from plax_numba import cpu_priority, starvation_guard

_HEADER = struct.Struct("<Q")  # each message: its pickle's length, then the pickle
_WARM = 0  # the job id of a worker's first message: warmed up, ready for jobs
#: set by the program for its worker: "1", the program runs it at SCHED_IDLE
#: (plax_numba.cpu_priority), and it takes its guard's request to leave the session
_IDLE_VARIABLE = "PLAX_NUMBA_WORKER_IDLE"


class WorkerCompileError(RuntimeError):
    """A job raised in the compile worker: the message names the error, ``worker_traceback``
    holds the worker's traceback."""

    def __init__(self, message: str, worker_traceback: str = ""):
        super().__init__(message)
        self.worker_traceback = worker_traceback


class WorkerDiedError(WorkerCompileError):
    """The compile worker died while running a job (twice), or was stopped at exit."""


def workers_wanted() -> int:
    """How many worker processes may compile kernels (``PLAX_NUMBA_WORKERS``, default 1; 0
    or less: none, kernels compile in the user's process). Beyond the first, a worker starts
    only when :data:`BACKLOG_FOR_ANOTHER` jobs wait for one. A value that is not an integer
    is named in a warning and gives 1 (read on the background compile thread, where an
    exception would read as a failed compilation)."""
    from plax.config import env_number
    return max(0, env_number("PLAX_NUMBA_WORKERS", 1, warn=True))


def _own_session() -> bool:
    """Whether a worker starts in a session of its own (``PLAX_NUMBA_WORKER_SESSION``, default
    on). Linux's scheduler shares the CPU fairly between sessions (``autogroup``, on by
    default on most distributions): in the program's session the worker would share the
    program's one share with the program's own busy calls (measured on a loaded 2-core
    host: ~11% of a core, a compilation of 2.5 CPU seconds took 22 s), while the program
    compiling synchronously has that share alone. In a session of its own it gets a share
    like any other process. It still exits with the program (end of file on its pipe) and
    is killed at the program's exit; it no longer gets the terminal's Ctrl-C, which it
    needs not."""
    from plax.config import env_flag
    return env_flag("PLAX_NUMBA_WORKER_SESSION", True)


def _guard_for(pid: int) -> "starvation_guard.StarvationGuard | None":
    """The starvation guard of idle worker ``pid``, None where it would not watch (its
    interval is 0). Once it raises the worker it asks it to leave the program's session only
    where workers get sessions of their own (:func:`_own_session`); with
    ``PLAX_NUMBA_WORKER_SESSION=0`` the raised worker stays, only its policy changes."""
    leave = starvation_guard.ask_to_leave_session if _own_session() else None
    guard = starvation_guard.StarvationGuard(pid, leave_session=leave)
    return guard if guard.active else None


# ---------------------------------------------------------------- the user's side

def _environment_copy(environ=None) -> dict:
    """A copy of ``os.environ``, taken again if another thread changes it mid-copy.

    Workers start on a background thread while the program's thread may set or delete a
    variable (a pytest plugin does, around each test): ``dict(os.environ)`` then raises
    KeyError for a name deleted between listing the keys and reading its value.
    """
    environ = os.environ if environ is None else environ
    while True:
        try:
            return dict(environ)
        except (KeyError, RuntimeError):
            continue


class _Worker:
    """One worker process, the pipes to it and the thread reading its replies."""

    def __init__(self, pool: "_Pool", index: int):
        self.pool = pool
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = _environment_copy()
        # the child finds the same modules (a test or notebook may have extended sys.path)
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if isinstance(p, str) and p)
        from plax_numba import cache
        env["PLAX_NUMBA_CACHE_DIR"] = cache.cache_dir()  # one cache for both processes
        env["PLAX_NUMBA_SYNC"] = "1"  # inside the worker, compile in place
        # at idle priority the worker stays in the program's session: across sessions the
        # scheduler weighs the sessions first, and the policy would change nothing
        idle = cpu_priority.worker_runs_idle()
        env[_IDLE_VARIABLE] = "1" if idle else "0"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "plax_numba.compile_worker", str(to_child_r),
             str(from_child_w)],
            pass_fds=(to_child_r, from_child_w), env=env, stdin=subprocess.DEVNULL,
            close_fds=True, start_new_session=_own_session() and not idle)
        # its policy is set here, by the program alone (the starvation guard below raises
        # it): the first milliseconds of its interpreter's start run at the normal policy
        cpu_priority.enter_worker_priority(idle, self.proc.pid)
        os.close(to_child_r)
        os.close(from_child_w)
        #: an idle worker's starvation guard (None: a normal worker, or no guard here), run
        #: by the writer thread while the worker has work (its warm-up, jobs)
        self.guard = _guard_for(self.proc.pid) if idle else None
        self.writer = os.fdopen(to_child_w, "wb")
        self.reader = os.fdopen(from_child_r, "rb")
        self.write_lock = threading.Lock()
        self.pending: dict[int, tuple] = {}   # job id -> (future, fn, args, attempts)
        self.alive = True
        #: the worker has warmed up (its first message): the pool hands it jobs; before that
        #: only when no warm worker exists (the first one, whose warm-up a waiting job cuts)
        self.warm = False
        # Jobs reach the pipe through a writer thread: a caller (the program's thread, when a
        # step gets hot) never blocks on a full pipe while the worker is busy compiling.
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._read, name=f"plax-numba-worker-{index}",
                                       daemon=True)
        self.thread.start()
        threading.Thread(target=self._write, name=f"plax-numba-worker-{index}-writer",
                         daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, job_id: int, entry: tuple) -> bool:
        """Queues the job ``entry`` here; False if the worker is gone."""
        _, fn, args, _ = entry
        data = pickle.dumps((job_id, fn, args), protocol=pickle.HIGHEST_PROTOCOL)
        with self.write_lock:
            if not self.alive:
                return False
            self.pending[job_id] = entry
            self.outbox.put(_HEADER.pack(len(data)) + data)
        return True

    def _write(self) -> None:
        # A failed write means the worker is gone: its reader sees the end of the pipe and
        # hands the pending jobs to a fresh worker (Pool.worker_died).
        guard, due = self.guard, None
        while True:
            # the worker has work: jobs, or its start and warm-up (which its first job
            # waits for: a worker starved there is as late as one starved in a job)
            busy = bool(self.pending) or (not self.warm and self.alive)
            if guard is not None and guard.active and (busy or guard.promoted):
                # the starvation guard's checks (plax_numba.starvation_guard): every
                # guard.interval while the worker has work, once more when it has none
                # (none once the system refused to raise it: the writer just waits)
                now = time.monotonic()
                if due is None or now >= due:
                    guard.check(busy=busy)
                    due = now + guard.next_check()
                try:
                    message = self.outbox.get(timeout=max(0.0, due - now))
                except queue.Empty:
                    continue
            else:
                if due is not None:  # (the queue emptied: the next job's checks start anew)
                    guard.check(busy=False)
                    due = None
                message = self.outbox.get()
            if message is None:
                break
            try:
                self.writer.write(message)
                self.writer.flush()
            except (OSError, ValueError):  # ValueError: closed by stop()
                break

    def _read(self) -> None:
        # Blocking reads release the GIL: this thread costs the program nothing while the
        # worker compiles.
        try:
            while True:
                message = _read_message(self.reader)
                if message is None:
                    break
                job_id, ok, value = message
                if job_id == _WARM:
                    self.warm = True
                    self.pool.dispatch()
                    continue
                with self.write_lock:
                    entry = self.pending.pop(job_id, None)
                if entry is None:
                    continue
                self.pool.dispatch()  # its next job first: the worker is not left idle
                if ok:
                    entry[0].set_result(value)
                else:
                    entry[0].set_exception(WorkerCompileError(*value))
        except (OSError, EOFError, pickle.UnpicklingError):
            pass
        self._died()

    def _died(self) -> None:
        with self.write_lock:
            self.alive = False
            orphans, self.pending = list(self.pending.values()), {}
        self.outbox.put(None)  # the writer thread ends too
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.pool.worker_died(self, orphans)

    def stop(self) -> None:
        with self.write_lock:
            self.alive = False
        self.outbox.put(None)
        for f in (self.writer,):
            try:
                f.close()
            except OSError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()  # a compilation in progress is of no use any more
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


#: a pool starts another worker (up to ``PLAX_NUMBA_WORKERS``) when this many jobs wait
#: while every worker is busy: a program whose many kernels get hot at once (an MLP step's
#: dozen) is worth a second start-up (numba's import and set-up, 1-3 CPU seconds); one
#: kernel and its serial form are not
BACKLOG_FOR_ANOTHER = 3


#: jobs handed to a worker ahead of its replies: the one it runs and the next, already in
#: its pipe, so it never waits for this process (whose threads, busy with the program's
#: calls, may take a while to read a reply and send the next job); the rest wait in the pool
IN_FLIGHT = 2


class _Pool:
    """The workers and the jobs waiting for one. Jobs wait here, not in a worker's pipe: each
    worker holds at most :data:`IN_FLIGHT` and takes the next when it replies, so a worker
    that starts later, or is replaced, takes what is left."""

    def __init__(self):
        self.lock = threading.Lock()
        self.workers: list[_Worker] = []
        self.waiting: collections.deque = collections.deque()  # (future, fn, args, attempts)
        self.next_id = 0
        self.started = 0      # processes started (restarts included)
        self.closed = False

    def prestart(self) -> None:
        with self.lock:
            self.workers = [w for w in self.workers if w.alive]
            if not self.closed and not self.workers:
                self._start()

    def _start(self) -> "_Worker":
        worker = _Worker(self, self.started)
        self.started += 1
        self.workers.append(worker)
        if self.started == 1:
            atexit.register(shutdown)
        return worker

    def submit(self, fn, args: tuple, attempts: int = 0, future: Future | None = None,
               first: bool = False):
        future = future if future is not None else Future()
        with self.lock:
            if self.closed:
                future.set_exception(WorkerDiedError("plax_numba: the compile workers "
                                                     "were stopped (interpreter exit)"))
                return future
            entry = (future, fn, args, attempts)
            if first:
                self.waiting.appendleft(entry)  # (a retried job keeps its place)
            else:
                self.waiting.append(entry)
        self.dispatch()
        return future

    def dispatch(self) -> None:
        """Hands waiting jobs to idle workers (warm ones; a cold one only if no worker is
        warm), starting a worker if none runs, or another if the backlog calls for it."""
        while True:
            with self.lock:
                if self.closed or not self.waiting:
                    return
                self.workers = [w for w in self.workers if w.alive]
                if not self.workers:
                    self._start()
                any_warm = any(w.warm for w in self.workers)
                idle = sorted((w for w in self.workers if len(w.pending) < IN_FLIGHT
                               and (w.warm or not any_warm)), key=lambda w: len(w.pending))
                if not idle:
                    if (len(self.waiting) >= BACKLOG_FOR_ANOTHER
                            and len(self.workers) < workers_wanted()
                            and all(w.warm for w in self.workers)):
                        self._start()  # takes jobs once warm (its first message)
                    return
                entry = self.waiting.popleft()
                self.next_id += 1
                job_id = self.next_id
            if not idle[0].send(job_id, entry):  # died meanwhile: the job waits again
                with self.lock:
                    self.waiting.appendleft(entry)

    def worker_died(self, worker: _Worker, orphans: list) -> None:
        with self.lock:
            if worker in self.workers:
                self.workers.remove(worker)
            closed = self.closed
        for future, fn, args, attempts in reversed(orphans):  # (each put first: in order)
            if closed or attempts >= 1:
                code = worker.proc.returncode
                future.set_exception(WorkerDiedError(
                    f"plax_numba: the compile worker (pid {worker.pid}) died running this job "
                    f"(exit status {code})" + ("" if closed else ", on a restarted worker too")))
            else:
                self.submit(fn, args, attempts + 1, future, first=True)  # on a fresh worker
        if closed:
            with self.lock:
                waiting, self.waiting = list(self.waiting), collections.deque()
            for future, *_ in waiting:
                future.set_exception(WorkerDiedError("plax_numba: the compile workers were "
                                                     "stopped (interpreter exit)"))
        else:
            self.dispatch()  # the jobs left waiting go to a fresh worker

    def shutdown(self) -> None:
        with self.lock:
            self.closed = True
            workers, self.workers = self.workers, []
            waiting, self.waiting = list(self.waiting), collections.deque()
        for future, *_ in waiting:
            future.set_exception(WorkerDiedError("plax_numba: the compile workers were "
                                                 "stopped (interpreter exit)"))
        for w in workers:
            w.stop()


_pool = _Pool()


def submit(fn, *args) -> Future:
    """Runs ``fn(*args)`` in a compile worker (started if none is running).

    Args:
      fn: a module-level function (pickled by reference: the worker imports its module).
      *args: its arguments, picklable.

    Returns:
      A :class:`~concurrent.futures.Future` of ``fn``'s result; it fails with
      :class:`WorkerCompileError` if ``fn`` raised, :class:`WorkerDiedError` if the worker
      died running it twice (or was stopped at exit).

    Example::

      from plax_numba import cache, compile_worker
      compile_worker.submit(cache.compile_for_cache, text, arg_types).result()
    """
    return _pool.submit(fn, args)


def prestart() -> None:
    """Starts a worker now if none is running (it imports numba while the program's first
    calls run), so the first compilation does not wait for its start-up. The start runs on a
    thread of its own: starting a process waits for its fork and exec (~1 ms of CPU, but
    0.05-0.1 s of wall time on a loaded host), which the program's thread, lowering its
    first program, then does not wait for. A start that fails there is retried, and
    reported, by the first job submitted (:meth:`_Pool.dispatch`). Nothing to do (no thread
    made) while a worker is running: every tiered program's lowering calls this."""
    if any(w.alive for w in _pool.workers):   # (a racy read: at worst one thread too many)
        return
    threading.Thread(target=_prestart_quietly, daemon=True,
                     name="plax-numba-worker-start").start()


def _prestart_quietly() -> None:
    try:
        _pool.prestart()
    except OSError:  # (no process can start here: the first job's future says why)
        pass


def worker_pids() -> list[int]:
    """The process ids of the running compile workers (tests kill one to see it replaced)."""
    with _pool.lock:
        return [w.pid for w in _pool.workers if w.alive]


def guard_counts() -> dict:
    """What the running workers' starvation guards did (:mod:`plax_numba.starvation_guard`):
    ``{"guarded": workers watched, "promotions": times raised, "demotions": times
    lowered}`` (benchmarks report it)."""
    with _pool.lock:
        guards = [w.guard for w in _pool.workers if w.guard is not None]
    return {"guarded": len(guards), "promotions": sum(g.promotions for g in guards),
            "demotions": sum(g.demotions for g in guards)}


def started() -> int:
    """How many worker processes this process has started (restarts included)."""
    return _pool.started


def shutdown() -> None:
    """Stops the workers (at interpreter exit; jobs in progress fail with
    :class:`WorkerDiedError`). Later :func:`submit` calls fail at once."""
    _pool.shutdown()


def stopped() -> bool:
    """Whether :func:`shutdown` has stopped the workers (interpreter exit, or a test)."""
    return _pool.closed


def restart_allowed() -> None:
    """Undoes :func:`shutdown` (tests that stop the workers and go on)."""
    with _pool.lock:
        _pool.closed = False


# ---------------------------------------------------------------- the worker's side

def _read_message(stream):
    head = stream.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(head)
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)


def _warm_up(job_waiting=lambda: False) -> None:
    """Imports numba and the kernels' helpers, and compiles two small kernels (not cached), a
    serial and a ``parallel=True`` one: a process's first compilations pay for numba's
    typing and lowering registries, LLVM's set-up and the parallel passes' imports (about a
    second on a 2-core host), which the worker pays here, when it starts, instead of in its
    first job. Each compilation is skipped if ``job_waiting()`` says a job has arrived: the
    job pays that set-up itself, and the warm-up's own code generation would only delay it
    (the first job of a parallel kernel is its serial form)."""
    import numba
    import numpy as np
    import plax_numba.arrays, plax_numba.libm_free, plax_numba.scalar  # noqa: F401,E401
    if job_waiting():
        return

    def serial(a, o):
        for i in range(a.size):
            o[i] = np.float32(np.exp(a[i]) * np.float32(2.0))
        return 0

    def parallel(a, o):
        for i in numba.prange(a.size):
            o[i] = np.float32(np.exp(a[i]) * np.float32(2.0))
        return 0

    vec = numba.types.Array(numba.float32, 1, "C")
    numba.njit(serial, error_model="numpy").compile((vec, vec))
    if not job_waiting():
        numba.njit(parallel, parallel=True, error_model="numpy").compile((vec, vec))


def _serve(in_fd: int, out_fd: int) -> None:
    if os.environ.get(_IDLE_VARIABLE) == "1":  # (the program set its policy: Popen's caller)
        # first: a starved worker's guard asks it to leave the program's session
        starvation_guard.leave_session_on_request()
    reader, writer = os.fdopen(in_fd, "rb"), os.fdopen(out_fd, "wb")
    import warnings
    warnings.simplefilter("ignore")  # numba's performance hints: the user's process decides
    import select

    def job_waiting() -> bool:
        return bool(select.select([in_fd], [], [], 0)[0])
    try:  # warm up: what every job needs, while the first one is being prepared
        _warm_up(job_waiting)
    except Exception:  # noqa: BLE001 - a job will report the same error with its context
        pass
    data = pickle.dumps((_WARM, True, os.getpid()), protocol=pickle.HIGHEST_PROTOCOL)
    writer.write(_HEADER.pack(len(data)) + data)
    writer.flush()
    while True:
        message = _read_message(reader)
        if message is None:
            return  # the user's process closed the pipe (exit): stop
        job_id, fn, args = message
        try:
            reply = (job_id, True, fn(*args))
        except BaseException as err:  # noqa: BLE001 - reported to the user's process
            text = "".join(traceback.format_exception(type(err), err, err.__traceback__))
            reply = (job_id, False, (f"{type(err).__name__}: {err} (in the compile worker, "
                                     f"pid {os.getpid()})", text))
        data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        writer.write(_HEADER.pack(len(data)) + data)
        writer.flush()


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
