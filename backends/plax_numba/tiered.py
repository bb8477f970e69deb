"""Tiered compilation: a cluster runs on the reference kernels until it is *hot*, then its
kernel compiles in a worker process while calls keep running the reference path, and a
background thread of this process loads it; ``PLAX_NUMBA_SYNC=1`` compiles every kernel
before the first call instead.

*Hot* means run ``PLAX_NUMBA_COMPILE_AFTER`` times (default 2): a cluster of a function
called once (interactive exploration, tests, a program's set-up) never pays for numba, and a
cluster of a training step or a loop body, run many times, compiles after its second run.
A kernel already compiled in this process for the same argument types (another program
with the same cluster) is used at once, without tiering; one in the disk cache (compiled by
any process: :func:`plax_numba.cache.on_disk`) is loaded when the program is built, and
runs from the first call.

A program small enough for a whole-program kernel is not even planned before it is hot
(:func:`planned_when_hot`): its first calls run on its reference tier, as they would while
the kernel compiled, and the call that makes it hot plans the kernel and requests it (from
the caches when it is there: such a program's kernel, even one compiled already, runs from
that call, not the first). Generating a kernel's source is milliseconds of Python, which
a program called once (a test's, a set-up's) never repays.

The compilation itself runs in a worker process (:mod:`plax_numba.compile_worker`,
``PLAX_NUMBA_WORKERS``, default 1), which writes numba's disk cache: the step that gets hot
hands it over at once (:func:`counting`'s ``request``), a parallel kernel's serial form
first, and the background thread waits for it with the GIL released and then loads the
machine code (:func:`compiles_in_worker`, :func:`plax_numba.cache.load_compiled`), so the
program's threads never wait on the compiler; it links the object code the worker emitted
with llvmlite, without importing numba in this process (:mod:`plax_numba.native_loader`). ``PLAX_NUMBA_WORKERS=0`` compiles in the
background thread instead (numba holds the GIL for milliseconds at a time there).

A cluster's step (the wrapper made by :mod:`plax_numba.codegen`) reads two globals of its
own namespace: ``_ready`` and ``_kernel``. The compile job sets them when numba is done, so
the next call switches to the kernel (one dictionary lookup per call is the whole cost). A
failed compilation warns once, with the primitives and the generated source's path, and the
step keeps running the reference path: never a wrong or missing result.

A parallel kernel whose serial form is at hand too (tiering loaded it first, or it is in the
disk cache) does not keep the parallel loop blindly: :func:`faster_of` times both on the
step's first calls and keeps the faster (a parallel loop loses when other processes hold
the cores). A serial form is never compiled only for that timing.
"""
from __future__ import annotations

import atexit
import contextlib
import gc
import sys
import queue
import threading
import time
import traceback
import warnings
from collections.abc import Callable

from plax.config import env_flag, env_number
from plax.lowering import PlaxFallbackWarning

#: the background threads, by lane: "compile" waits on the worker and loads numba's
#: kernels; "first tier" builds :mod:`plax_numba.llvm_tier`'s kernels (tens of ms each), so
#: that one kernel's first tier never waits behind another's seconds-long numba compilation
_lanes: dict = {}  # lane -> (queue of jobs, thread)
_here = threading.local()  # .background: this thread is a compile thread
_worker_lock = threading.Lock()
_closing = threading.Event()
_idle = threading.Condition()
_pending = 0


def sync_mode() -> bool:
    """Whether kernels compile before the first call (``PLAX_NUMBA_SYNC=1``)."""
    return env_flag("PLAX_NUMBA_SYNC", False)


def compile_after() -> int:
    """How many runs make a cluster hot (``PLAX_NUMBA_COMPILE_AFTER``, default 2; 1 or less
    starts compiling at the first call). A value that is not an integer is named in a
    warning and gives 2 (:func:`plax.config.env_number`; silently ignored, it would hide a
    typo meant to change tiering). 1 on a thread planning a hot program
    (:func:`planned_when_hot`): the steps it builds are hot at their first run."""
    if getattr(_hot, "now", False):
        return 1
    return max(1, env_number("PLAX_NUMBA_COMPILE_AFTER", 2, warn=True))


_hot = threading.local()  # .now: a hot program is being planned (planned_when_hot)


def compiles_in_worker() -> bool:
    """Whether a kernel compiled now goes to a worker process: on the background compile
    thread, when workers are enabled (``PLAX_NUMBA_WORKERS`` is not 0). Synchronous
    compilation (``PLAX_NUMBA_SYNC=1``) never starts a worker."""
    from plax_numba.compile_worker import workers_wanted
    return (getattr(_here, "background", False) and not sync_mode()
            and workers_wanted() > 0)


#: the GIL switch interval while the background thread loads a kernel: the longest the
#: program's threads wait for it (Python's default, 5 ms, is what they waited for numba)
LOAD_SWITCH_INTERVAL = 0.0002
_yielding = [0, None]  # nesting count, the interval to restore
_yielding_lock = threading.Lock()


@contextlib.contextmanager
def yielding_gil():
    """Lowers the interpreter's GIL switch interval (``sys.setswitchinterval``) to
    :data:`LOAD_SWITCH_INTERVAL` inside the context, so a thread waiting for the GIL gets it
    within that time while this one runs Python code (numba's import, a kernel's load)."""
    with _yielding_lock:
        if _yielding[0] == 0:
            _yielding[1] = sys.getswitchinterval()
            sys.setswitchinterval(min(LOAD_SWITCH_INTERVAL, _yielding[1]))
        _yielding[0] += 1
    try:
        yield
    finally:
        with _yielding_lock:
            _yielding[0] -= 1
            if _yielding[0] == 0:
                sys.setswitchinterval(_yielding[1])


def yielding_while_compiling():
    """:func:`yielding_gil` while a compile window is open (:func:`compile_window_open`),
    else nothing: for plax's pure-Python steps on the program's thread (planning a
    cluster's kernels, milliseconds per cluster) while another of its threads waits on a compilation
    to load: they then hand the GIL to a waiting thread (the program's own, pmap's device
    threads) every :data:`LOAD_SWITCH_INTERVAL` instead of every 5 ms.

    Example::

      with yielding_while_compiling():
          plan = codegen.plan_cluster(cluster, preallocate=True)
    """
    return yielding_gil() if compile_window_open() else contextlib.nullcontext()


def counting(interp, job, after: int, request=None, at_once: bool = False):
    """``interp`` that submits ``job`` (the compilation) once it has run ``after`` times.
    A compile worker starts now (:func:`plax_numba.compile_worker.prestart`): its start-up
    (numba's import, a warm-up compilation) overlaps the calls before the step is hot.

    ``request``, if given, runs on the calling thread when the step gets hot, before ``job``
    is queued: it hands the compilation to the worker at once
    (:func:`plax_numba.cache.request`), so the worker is not left waiting while the
    background thread loads the kernels before this one.

    ``at_once``: ``job`` is submitted now and ``interp`` returned as it is: the kernel is in
    the disk cache (:func:`plax_numba.cache.on_disk`) but the program's thread could not
    load it at once (the background thread loads it; no worker is started for that)."""
    if at_once:
        submit(job)
        return interp
    count = [0]
    _prestart_worker()

    def run(*args):
        n = count[0] = count[0] + 1
        if n == after:
            if request is not None:
                try:
                    request()
                except Exception:  # noqa: BLE001 - the job reports the same error
                    pass
            submit(job)
        return interp(*args)
    return run


def _prestart_worker() -> None:
    """Starts the compile worker now (unless compilation is synchronous or in the background
    thread): a step that will get hot overlaps its start-up with the calls before then."""
    from plax_numba import compile_worker
    if compile_worker.workers_wanted() > 0 and not sync_mode():
        try:
            compile_worker.prestart()
        except OSError:  # no worker can start here: the job reports it (one warning)
            pass


def planned_when_hot(interp: Callable, plan: Callable[[], Callable], params: int,
                     after: int | None = None) -> Callable:
    """A program's step that runs ``interp`` (its reference tier) until it has run ``after``
    times (default :func:`compile_after`), then what ``plan()`` returns.

    Planning a program's kernels (generating their source, looking them up in the caches,
    preparing the first tier: milliseconds of Python) is then never paid for a program called
    once or twice, a test's or a set-up's, while a hot one gets the same step it got when it
    was planned at once. ``plan`` runs once, on the thread of the call that makes the
    program hot, with :func:`compile_after` at 1 inside it: the steps it builds request
    their kernels at their first run, which is that call, as they would have at their
    ``after``-th run had they been planned at the first.

    Args:
      interp: the program on its reference tier (``fn(*buffers) -> list``).
      plan: builds the program's compiled step (same signature and results).
      params: the program's number of inputs.
      after: the runs that make the program hot.

    Returns:
      The step. ``step.__plax_planned__`` holds ``{"runs": calls until it was planned,
      "step": the planned step or None}``; ``step.plan_now()`` plans it at once
      (``as_text``) and returns it.

    Example::

      step = planned_when_hot(reference, lambda: native_step(...), len(jaxpr.invars))
    """
    after = compile_after() if after is None else after
    state: dict = {"runs": 0, "step": None}
    lock = threading.Lock()
    _prestart_worker()

    def planned(hot: bool = False) -> Callable:
        with lock:
            if state["step"] is None:
                before = getattr(_hot, "now", False)
                _hot.now = hot or before
                try:
                    state["step"] = plan()
                except Exception as err:  # noqa: BLE001 - the reference tier keeps running
                    warnings.warn(f"plax_numba: planning a hot program's kernels failed; it "
                                  f"keeps running on the reference kernels. {err!r}",
                                  PlaxFallbackWarning, stacklevel=3)
                    state["step"] = interp
                finally:
                    _hot.now = before
                ns["_run"] = state["step"]
        return state["step"]

    def cold(*args):
        state["runs"] += 1
        if state["runs"] >= after:
            return planned(hot=True)(*args)
        return interp(*args)

    ns = {"_run": cold}
    names = ", ".join(f"a{i}" for i in range(params))
    # (explicit parameters: once planned, a call costs one more frame, ~60 ns, not *args')
    exec(compile(f"def step({names}):\n    return _run({names})\n",
                 "<plax_numba planned when hot>", "exec"), ns)
    step = ns["step"]
    step.__plax_planned__ = state
    step.plan_now = planned
    return step


def switching(interp, build, after: int, at_once: bool = False):
    """A step that runs ``interp`` until it is hot (:func:`counting`, with ``at_once``),
    when ``build()`` runs in the background thread; once it has returned a function, later
    calls run that instead (None: ``build`` failed and reported it; ``interp`` keeps
    running). For steps that are a closure rather than a generated wrapper reading
    ``_ready``/``_kernel``."""
    ready = [None]

    def job():
        ready[0] = build()
    counted = counting(interp, job, after, at_once=at_once)

    def step(*args):
        fast = ready[0]
        return fast(*args) if fast is not None else counted(*args)
    step.__plax_tiered__ = ready  # tests: what the step switched to (None: not yet)
    return step


#: calls timed per form before :func:`faster_of` keeps one (``PLAX_NUMBA_CHOICE_TRIALS``)
CHOICE_TRIALS = 3
#: what :func:`faster_of` chose, by form name: ``{"serial": 2, "parallel": 5}``
choices: dict = {}


def choice_trials() -> int:
    """:data:`CHOICE_TRIALS`, or ``$PLAX_NUMBA_CHOICE_TRIALS`` where set (0: no timing, the
    last form is kept at once)."""
    # (read where a kernel is installed, maybe on the compile thread: a bad value is named in
    # a warning; 0 keeps the parallel form without timing)
    return max(0, env_number("PLAX_NUMBA_CHOICE_TRIALS", CHOICE_TRIALS, warn=True))


def faster_of(forms: dict[str, Callable], keep: Callable[[str, Callable], None],
              trials: int | None = None, clock: Callable[[], float] = time.perf_counter
              ) -> Callable:
    """A function running the interchangeable ``forms`` (name -> function giving the same
    results, e.g. a kernel's serial and parallel loops) in turn, timing each call, until each
    has run ``trials`` times; then it hands the form with the least median time to ``keep``
    (which installs it where the caller's step will call it directly) and records the choice
    in :data:`choices`. Which loop is faster depends on the moment's host (a parallel loop
    loses to the serial one when other processes hold the cores), so it is measured on the
    program's own calls, never guessed from the core count.

    Args:
      forms: name -> function; the last one is kept when ``trials`` is 0.
      keep: called once with ``(name, function)`` of the chosen form.
      trials: timed calls per form (default :func:`choice_trials`).
      clock: the timer (tests inject one).

    Returns:
      The function to call until the choice is made (it keeps working after).

    Example::

      ns["_kernel"] = faster_of({"serial": s, "parallel": p},
                                lambda name, fn: ns.update(_kernel=fn))
    """
    trials = choice_trials() if trials is None else trials
    names = list(forms)
    if trials == 0 or len(names) == 1:
        keep(names[-1], forms[names[-1]])
        return forms[names[-1]]
    times: dict = {name: [] for name in names}
    turn = [0]
    chosen: list = []

    def run(*args):
        if chosen:  # (a call that started before the choice)
            return chosen[0](*args)
        name = names[turn[0] % len(names)]
        turn[0] += 1
        start = clock()
        out = forms[name](*args)
        times[name].append(clock() - start)
        if not chosen and all(len(t) >= trials for t in times.values()):
            best = min(names, key=lambda n: sorted(times[n])[len(times[n]) // 2])
            chosen.append(forms[best])
            choices[best] = choices.get(best, 0) + 1
            keep(best, forms[best])
        return out
    run.__plax_times__ = times  # tests: the measurements
    return run


def compile_failed(primitives: list[str], path: str, err: BaseException,
                   serial_form_runs: bool = False) -> None:
    """Warns that a kernel failed to compile, saying what computes its equations instead:
    the reference kernels, or (``serial_form_runs``) the serial form of a parallel kernel,
    compiled first and in use (:func:`plax_numba.cache.serial_variant`). Silent at
    interpreter exit, where jobs fail because the workers were stopped."""
    worker = sys.modules.get("plax_numba.compile_worker")
    # compile_worker's own atexit hook may stop the workers before _shutdown below runs
    # (atexit runs hooks last-registered first), so a closed pool also means exit
    if _closing.is_set() or (worker is not None and worker.stopped()):
        return
    detail = "".join(traceback.format_exception_only(type(err), err)).strip()
    instead = ("its serial form (the same kernel without parallel loops, compiled first) "
               "keeps running instead, on one core" if serial_form_runs else
               "its equations run on the reference (NumPy) kernels instead")
    warnings.warn(f"plax_numba: compiling the fused kernel of [{' '.join(primitives)}] "
                  f"(generated source: {path}) failed; {instead}. {detail}",
                  PlaxFallbackWarning, stacklevel=2)


_not_native: set = set()


class PlaxNativeLoopWarning(PlaxFallbackWarning):
    """A loop or branch runs in Python around its compiled body instead of natively."""


def not_native(primitive: str, reason: str) -> None:
    """Warns once per (primitive, reason) that a control-flow equation keeps the Python loop
    (its body uses something :mod:`plax_numba.wholegen` does not compile)."""
    key = (primitive, reason)
    if key in _not_native:
        return
    _not_native.add(key)
    warnings.warn(f"plax_numba: {primitive} runs as a Python loop around its compiled body, "
                  f"not as one native kernel, because its body uses {reason} (see "
                  "plax_numba.wholegen.NOT_NATIVE).", PlaxNativeLoopWarning, stacklevel=3)


def freezing_gc() -> bool:
    """Whether compile windows freeze the garbage collector's heap (``PLAX_NUMBA_GC_FREEZE``,
    default on; :func:`compile_window_open`)."""
    return env_flag("PLAX_NUMBA_GC_FREEZE", True)


_frozen_by_us = [False]


def compile_window_open() -> bool:
    """Whether background compile jobs are pending (a *compile window*).

    While one is, the objects that were alive when it opened sit in the cyclic garbage
    collector's permanent generation (:func:`gc.freeze`; numba's set-up in this process
    adds its own, :func:`plax_numba.cache.prepare_numba`): a full collection holds the GIL
    from start to end, and one walking numba's ~50k objects stalled the program's threads
    for 50-270 ms. When the window closes they are unfrozen (:func:`gc.unfreeze`), so
    garbage among them is collected as usual afterwards, the next full collection walking
    them once, at its usual time. Not done when the program froze objects itself (its
    freeze is its own) or with ``PLAX_NUMBA_GC_FREEZE=0``."""
    return _pending > 0


def froze_for_window() -> bool:
    """Whether the open compile window froze the heap (:func:`compile_window_open`)."""
    return _frozen_by_us[0]


def _window_opens() -> None:
    if freezing_gc() and gc.get_freeze_count() == 0:
        gc.freeze()
        _frozen_by_us[0] = True


def _window_closes() -> None:
    if _frozen_by_us[0]:
        _frozen_by_us[0] = False
        gc.unfreeze()


def submit(job, lane: str = "compile") -> None:
    """Runs ``job()`` in the background thread of ``lane`` (jobs of a lane run in order; see
    :data:`_lanes`)."""
    global _pending
    with _idle:
        if _pending == 0:
            _window_opens()
        _pending += 1
    with _worker_lock:
        jobs, thread = _lanes.get(lane, (None, None))
        if thread is None or not thread.is_alive():
            jobs = jobs if jobs is not None else queue.Queue()
            thread = threading.Thread(target=_run, args=(jobs,), daemon=True,
                                      name=f"plax-numba-{lane.replace(' ', '-')}")
            _lanes[lane] = (jobs, thread)
            thread.start()
    jobs.put(job)


def wait_idle(timeout: float | None = None) -> bool:
    """Waits until every submitted compile job has finished; False on timeout."""
    with _idle:
        return _idle.wait_for(lambda: _pending == 0, timeout)


def _run(jobs: "queue.Queue") -> None:
    global _pending
    _here.background = True
    while True:
        job = jobs.get()
        try:
            if not _closing.is_set():
                job()
        except BaseException:  # a job reports its own errors; never kill the worker
            pass
        finally:
            with _idle:
                _pending -= 1
                if _pending == 0:
                    _window_closes()
                _idle.notify_all()


@atexit.register
def _shutdown() -> None:
    # Skip queued jobs and let the one in progress finish, so the interpreter does not exit
    # in the middle of an LLVM compilation.
    # A job waiting on a compile worker fails at once when the workers stop.
    _closing.set()
    worker = sys.modules.get("plax_numba.compile_worker")
    if worker is not None:
        worker.shutdown()
    wait_idle(timeout=30)
