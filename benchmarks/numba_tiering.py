"""Tiered compilation on the Numba backend: how long the program's threads wait while kernels
compile, and how soon a jitted function runs its compiled kernels (issue 26, item 2).

For each workload (selu on 1M float32, the MLP step, the scan RNN: the rows of
``benchmarks/compare.py``) and each way of compiling, a fresh process with an empty kernel
cache calls the jitted function in a loop until every compile job has finished:

* ``worker``: the default, kernels compile in a worker process (``plax_numba.compile_worker``)
  and load here from the native objects it writes, without importing numba
  (``plax_numba.native_loader``);
* ``worker, no first tier``: the same with ``PLAX_NUMBA_FIRST_TIER=0``: no kernel built from
  LLVM IR in this process (``plax_numba.llvm_tier``) while the worker compiles;
* ``worker, numba loader``: the same with ``PLAX_NUMBA_NATIVE=0``: kernels load here through
  numba, from its disk cache (before the native loader);
* ``thread``: ``PLAX_NUMBA_WORKERS=0``, numba compiles in this process's background thread
  (before issue 26);
* ``worker, numba set up``: the same, in a process that set numba up before (what every
  compilation after a process's first one sees);
* ``sync``: ``PLAX_NUMBA_SYNC=1``, the first call compiles everything;
* ``worker, normal priority``, ``worker, guarded idle``, ``worker, idle priority``
  (only when named in ``--modes``): ``PLAX_NUMBA_WORKER_PRIORITY=normal``, the worker at the
  normal policy in a session of its own; ``=idle``, at ``SCHED_IDLE`` in the program's
  session, raised by its starvation guard while starved (``plax_numba.starvation_guard``;
  the mode column says how often); the same with the guard off
  (``PLAX_NUMBA_GUARD_INTERVAL=0``) (``plax_numba.cpu_priority``);
* ``first tier only``: ``PLAX_NUMBA_FIRST_TIER=only``, the first tier alone (numba compiles
  only what it declines): its warm row is a process whose first-tier machine code is on disk
  but whose numba kernels are not (as after a script that ended before numba's compilation);
* ``... warm``: a second process on the cache the first one filled (its kernels load when
  the program is built, during the first call).

Columns: the first call's time; the time from the first call until a first kernel is in use
(a first-tier kernel built from LLVM IR in this process, a parallel kernel's serial form,
which the worker compiles first where the first tier does not take the kernel, or a final
kernel; with this process's CPU time until the call after it, all its threads: the
program's calls, tracing and lowering, the loader's set-up, the first tier's build) and
until every final kernel is (and the calls made meanwhile); the longest pause (and the 99th
percentile) of a thread that wakes every 0.5 ms, while compilation runs (how long the
program's other threads can wait for the GIL; with ``sync`` the first call, tracing included, on the main thread), beside the
longest collection of Python's cyclic garbage collector meanwhile (it holds the GIL
throughout; numba's import in this process allocates ~50k objects, which
``plax_numba.cache.prepare_numba`` imports with the collector paused and then freezes), the
pauses measured afterwards for 1 s of fast calls, nothing compiling (the host's own
scheduling noise); and, for the worker, the seconds this process spent preparing numba
(import, runtime: once per process, overlapped with the worker's compilation) and loading
the machine code.

The pauses are measured by ``pause_probe.AttributingTicker``, which also explains each one
over 1 ms from the scheduler's counters (what ran, what queued, the worker's CPU, plax's
steps, page faults): "of which compiling caused at most" is the longest pause's part that
compiling can have caused (``pause_probe.attributable``: plax's background threads' CPU,
plax's steps on the program's thread, the queueing up to the worker's CPU time), and the
lines below the table explain each run's longest and most attributable pauses. On this
host the pauses with nothing compiling already exceed 2 ms; this column is the part of the
raw figure that the compilation can be blamed for.

The CPU column is the time spent from the first call until every final kernel was in
use, by this process (the program's calls included) and by the compile worker (its start
and warm-up included): on a loaded host the wall-clock times measure mostly the scheduler's
share, which the CPU times do not.

The last column is how long plax's own loading and linking steps in this process held the
GIL (:class:`GilClock`): per step (the first tier's ``plan`` on the program's thread, the
loader's ``set-up``, each numba artifact's ``link``, each ``first tier`` build), the
thread CPU time outside llvmlite's GIL-releasing C calls, in total and its longest stretch
(in brackets, the longest wait that stretch can cause another thread: the switch interval
where the step hands the GIL over every ``tiered.LOAD_SWITCH_INTERVAL``).
The host pauses a ticking thread by tens of milliseconds with nothing compiling, so the
pause columns cannot show a few milliseconds; this measures the steps themselves.

After the table, one line per cold run states issue 26's pause goal (at most 2 ms caused by
compiling): the raw longest pause and p99 while compiling, the part compiling caused at
most, and the same process's pauses with nothing compiling.

Run ``python benchmarks/numba_tiering.py`` (``--workloads selu`` for one); it prints the table.
Times depend on the host's load: compare rows of one run. ``--rounds N`` runs only the cold
rows, the modes alternating N times, one line per run with the load average when it
started (and the CPU plax's threads ran inside one pause), then the medians: for comparing
the priority modes on a shared host.

``--profile`` prints, per workload, where a cold compilation's CPU time goes: the jobs the
compile worker gets are captured, then replayed in a fresh process as a fresh worker runs
them, each phase's thread CPU time charged to the innermost numba or llvmlite function
running (numba's import and registries, the kernel module's import, the front end, type
inference, parfor passes, lowering to LLVM IR, LLVM's function and module passes, machine
code generation, the cache write; numba's own overloads compiled inside a kernel's
compilation are counted apart); and where a load from the disk cache goes in a fresh
program process (numba's set-up, the index, unpickling, bitcode, linking).

``--calls NUMBER`` prints the cost of one call of a compiled kernel's entry point on four
elements (the call, not the work): the native loader's against numba's compiled entry point,
for a kernel writing into its outputs and one returning an array and a scalar.

``--pauses ROUNDS`` prints a histogram of the pauses of a thread ticking every 0.5 ms while
the program's thread calls selu's compiled step: nothing compiling, the first kernel compiling
(the loader set up in this process meanwhile), later kernels compiling (a new constant each
round), the three interleaved in one run so that the host's own noise is the same in each;
once with the native loader (the default) and once with ``PLAX_NUMBA_NATIVE=0`` (numba
imported and set up in this process to load the kernels), each in a fresh process.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pause_probe  # noqa: E402
WORKLOADS = {"selu": "selu f32", "mlp": "MLP step 784", "scan": "scan tanh RNN"}
MODES = {"thread": {"PLAX_NUMBA_WORKERS": "0"}, "worker": {},
         "worker, no first tier": {"PLAX_NUMBA_FIRST_TIER": "0"},
         "worker, numba loader": {"PLAX_NUMBA_NATIVE": "0"},
         "worker, numba set up": {}, "sync": {"PLAX_NUMBA_SYNC": "1"},
         "first tier only": {"PLAX_NUMBA_FIRST_TIER": "only"},
         "worker, normal priority": {"PLAX_NUMBA_WORKER_PRIORITY": "normal"},
         "worker, guarded idle": {"PLAX_NUMBA_WORKER_PRIORITY": "idle"},
         "worker, idle priority": {"PLAX_NUMBA_WORKER_PRIORITY": "idle",
                                   "PLAX_NUMBA_GUARD_INTERVAL": "0"}}
#: the modes run only when named in --modes (the unguarded idle worker's MLP row can take
#: minutes on a busy host; the others repeat the default's row under another name)
EXTRA_MODES = ("worker, normal priority", "worker, guarded idle", "worker, idle priority")
TICK = 0.0005
COMPILING, QUIET_TAG = "compiling", "nothing compiling"  # the probe's tags in child()


def _summary(gaps: list, tag: str) -> tuple[float, float]:
    """The longest pause and the 99th percentile of the pauses tagged ``tag``."""
    values = sorted(g for t, g in gaps if t == tag) or [0.0]
    return values[-1], values[int(0.99 * (len(values) - 1))]


class GcClock:
    """The longest collection of Python's cyclic garbage collector (it holds the GIL
    throughout) while ``tag`` is set."""

    def __init__(self):
        self.tag, self.longest, self._start = None, 0.0, 0.0

    def _gc(self, phase, info):
        if phase == "start":
            self._start = time.perf_counter()
        elif self.tag is not None:
            self.longest = max(self.longest, time.perf_counter() - self._start)

    def __enter__(self):
        gc.callbacks.append(self._gc)
        return self

    def __exit__(self, *exc):
        gc.callbacks.remove(self._gc)


def _cpu_seconds(pid: int) -> float:
    """The CPU time (user + system) process ``pid`` has used so far (Linux; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


class GilClock:
    """The time plax's own loading and linking steps hold the GIL, measured directly in the
    thread that runs them (on a loaded host a probe thread's wall-clock pauses mostly show
    the scheduler). Each step's thread CPU time (:func:`time.thread_time`) is split into the
    part inside llvmlite's C calls, which release the GIL (LLVM's parsing, passes, code
    generation and linking), and the rest, which holds it (Python, and C called holding it:
    ctypes.pythonapi, unpickling an artifact). ``longest`` is the longest stretch of one
    step's thread CPU time between two llvmlite calls: with other threads waiting for the
    GIL, a stretch of Python gives it up every switch interval, so this bounds from above the
    longest single wait the step can cause; ``wait`` is that bound, the stretch capped by
    the switch interval where the step ran under :func:`plax_numba.tiered.yielding_gil`
    (``LOAD_SWITCH_INTERVAL``: the first tier's ``plan`` while a compile window is open, the
    loader's steps always).

    Steps: ``plan`` (:func:`plax_numba.llvm_tier.plan`, or for a native loop
    :func:`plax_numba.llvm_tier_loops.plan`, on the program's thread while it lowers), ``set-up`` (:func:`plax_numba.native_loader.prepare`: llvmlite, numba's C
    helpers, once per process), ``link`` (a numba artifact's, :func:`native_loader.load`)
    and ``first tier`` (:func:`plax_numba.llvm_tier.build`: IR to machine code)."""

    def __init__(self):
        import threading
        self.steps: dict = {}
        #: (thread id, step, start, end) of each step, perf_counter times (pause_probe)
        self.intervals: list = []
        self._local = threading.local()

    def install(self) -> None:
        from llvmlite.binding import ffi
        from plax_numba import llvm_tier, llvm_tier_loops, native_loader
        local = self._local
        original = ffi._lib_fn_wrapper.__call__

        def timed(fn_self, *args, **kwargs):
            step = getattr(local, "step", None)
            if step is None:
                return original(fn_self, *args, **kwargs)
            now = time.thread_time()
            step["longest"] = max(step["longest"], now - local.held_since)
            try:
                return original(fn_self, *args, **kwargs)
            finally:
                local.held_since = time.thread_time()
                step["released"] += local.held_since - now
        ffi._lib_fn_wrapper.__call__ = timed
        from plax_numba import tiered
        yielding = tiered.yielding_gil

        def marked(*args, **kwargs):  # the step hands the GIL over every switch interval
            step = getattr(local, "step", None)
            if step is not None:
                step["yields"] = True
            return yielding(*args, **kwargs)
        tiered.yielding_gil = marked
        self._wrap(llvm_tier, "plan", "plan")
        self._wrap(llvm_tier_loops, "plan", "plan")  # (a native loop's: scan, while)
        self._wrap(native_loader, "prepare", "set-up")
        self._wrap(native_loader, "load", "link")
        self._wrap(llvm_tier, "build", "first tier")

    def _wrap(self, module, name: str, label: str) -> None:
        original = getattr(module, name)
        local, steps = self._local, self.steps

        def wrapped(*args, **kwargs):
            if getattr(local, "step", None) is not None:  # nested: the outer step counts it
                return original(*args, **kwargs)
            from plax_numba import tiered
            # (yielding already: a caller entered tiered.yielding_gil around the step)
            step = {"cpu": 0.0, "released": 0.0, "longest": 0.0,
                    "yields": sys.getswitchinterval() <= tiered.LOAD_SWITCH_INTERVAL + 1e-6}
            local.step, start = step, time.thread_time()
            local.held_since = start
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.intervals.append((threading.get_native_id(), label, began,
                                       time.perf_counter()))
                end = time.thread_time()
                step["longest"] = max(step["longest"], end - local.held_since)
                step["cpu"] = end - start
                local.step = None
                wait = (min(step["longest"], tiered.LOAD_SWITCH_INTERVAL) if step["yields"]
                        else step["longest"])
                total = steps.setdefault(label, {"n": 0, "cpu": 0.0, "held": 0.0,
                                                 "longest": 0.0, "wait": 0.0})
                total["wait"] = max(total["wait"], wait)
                total["n"] += 1
                total["cpu"] += step["cpu"]
                total["held"] += step["cpu"] - step["released"]
                total["longest"] = max(total["longest"], step["longest"])
        setattr(module, name, wrapped)


def _gil_text(steps: dict) -> str:
    """``GilClock.steps`` as table text: per step, GIL-held CPU in total and longest."""
    order = ("plan", "set-up", "link", "first tier")
    parts = [f"{label} {steps[label]['held'] * 1e3:.1f} / {steps[label]['longest'] * 1e3:.2f}"
             f" ({steps[label].get('wait', steps[label]['longest']) * 1e3:.2f})"
             for label in order if label in steps]
    return "; ".join(parts) + " ms" if parts else "-"


def child(workload: str, mode: str) -> dict:
    import compare  # sets PLAX_NUMBA_SYNC=1 by default: undone below unless measuring sync
    from plax_numba import cache, llvm_tier, native_loader, tiered
    gil = GilClock()
    gil.install()
    if mode == "worker, numba set up":  # a later compilation: numba was set up earlier
        cache.prepare_numba()
    import plax
    # plax alone (compare.libraries() would import JAX too: its objects would make every
    # garbage collection in this process longer than a plax program's)
    lib = compare._Lib(plax, lambda f: plax.jit(f, backend="numba"), plax.numpy.asarray,
                       plax.block_until_ready)
    factory = next(impls["plax"] for label, impls in compare.make_workloads(False)
                   if label.startswith(WORKLOADS[workload]))
    fn, args = factory(lib)
    # (after the workloads are made: compare imports its helpers' modules lazily, and they set
    # PLAX_NUMBA_SYNC=1 too; the variable is read when a program is compiled, at its first call)
    if mode != "sync":
        os.environ.pop("PLAX_NUMBA_SYNC", None)

    def call():
        lib.block(fn(*args))

    # The pauses are recorded while compilation runs: from the call that makes the steps hot
    # (the second by default) until the fast path is in use; with PLAX_NUMBA_SYNC, during the
    # first call (which also traces and lowers the program on this thread). The probe
    # (pause_probe.AttributingTicker) explains each pause over 1 ms: what ran meanwhile.
    from plax_numba import compile_worker
    probe = pause_probe.AttributingTicker(TICK, worker_pids=compile_worker.worker_pids,
                                          steps=gil.intervals)
    collections = GcClock()
    with probe, collections:
        if mode == "sync":
            probe.tag = collections.tag = COMPILING
        cpu_start = time.process_time()
        start = time.perf_counter()
        call()
        first = time.perf_counter() - start
        calls = 1
        probe.tag = collections.tag = COMPILING
        # this process's CPU time (all its threads) until a first kernel is in use: on a
        # loaded host the wall-clock time to it is mostly the scheduler's share
        cpu_to_kernel = None if mode != "sync" else time.process_time() - cpu_start
        while mode != "sync" and (calls < tiered.compile_after() or not tiered.wait_idle(0)):
            call()
            calls += 1
            if cpu_to_kernel is None and _a_kernel_in_use(cache, llvm_tier):
                cpu_to_kernel = time.process_time() - cpu_start
            if time.perf_counter() - start > 600:
                break
        to_fast = time.perf_counter() - start
        cpu_here = time.process_time() - cpu_start
        probe.tag = collections.tag = None
        cpu_worker = sum(_cpu_seconds(pid) for pid in compile_worker.worker_pids())
        # the starvation guard's doings (plax_numba.starvation_guard): times an idle worker
        # was raised to the normal policy while it had jobs
        guards = compile_worker.guard_counts()
        times = []
        for _ in range(5):
            t = time.perf_counter()
            call()
            times.append(time.perf_counter() - t)
        probe.tag = QUIET_TAG
        end = time.perf_counter() + 1.0
        while time.perf_counter() < end:
            call()
        probe.tag = None
    pause, pause99 = _summary(probe.gaps, COMPILING)
    quiet_pause, quiet99 = _summary(probe.gaps, QUIET_TAG)
    compiling = [r for r in probe.records if r["tag"] == COMPILING]
    quiet_records = [r for r in probe.records if r["tag"] == QUIET_TAG]
    gc_pause = collections.longest
    loads = cache.load_times
    # the first kernel in use: a parallel kernel's serial form, or a final kernel
    ready = [t["at"] for t in loads] + list(cache.serial_loaded_at) + list(llvm_tier.built_at)
    to_kernel = min(ready) - start if ready else to_fast
    return {"first": first, "to_fast": to_fast, "to_kernel": to_kernel, "calls": calls,
            "cpu_to_kernel": cpu_to_kernel if cpu_to_kernel is not None else cpu_here,
            "cpu_here": cpu_here, "cpu_worker": cpu_worker,
            "serial_forms": len(cache.serial_loaded_at),
            "first_tier": llvm_tier.stats["built"],
            "first_tier_all": (max(llvm_tier.built_at) - start) if llvm_tier.built_at else None,
            "gil": gil.steps, "pause": pause,
            "pause99": pause99, "gc": gc_pause,
            "attributable": max((pause_probe.attributable(r) for r in compiling), default=0.0),
            "quiet_attributable": max((pause_probe.attributable(r) for r in quiet_records),
                                      default=0.0),
            # plax's threads running while the probe waited (the longest such CPU time in one
            # pause, and the pauses it explains most)
            "background_in_pause": max((pause_probe.background_cpu(r) for r in compiling),
                                       default=0.0),
            "background_caused": sum(pause_probe.cause(r) == "plax background threads ran"
                                     for r in compiling),
            "pauses_over_1ms": len(compiling),
            "longest": [pause_probe.describe(r) for r in
                        sorted(compiling, key=lambda r: -r["gap"])[:3]],
            "most_attributable": [pause_probe.describe(r) for r in sorted(
                compiling, key=lambda r: -pause_probe.attributable(r))[:2]],
            "quiet_longest": [pause_probe.describe(r) for r in
                              sorted(quiet_records, key=lambda r: -r["gap"])[:1]],
            "quiet_pause": quiet_pause,
            "quiet99": quiet99, "fast_call": sorted(times)[2],
            "prepare": sum(t["import numba"] for t in loads),
            "load": sum(t["load"] for t in loads), "loaded": cache.load_stats["loaded"],
            "compiled_here": cache.load_stats["compiled here"],
            "recached": cache.load_stats["recached"],
            "numba_imported": "numba" in sys.modules,
            "promotions": guards["promotions"], "guarded": guards["guarded"],
            "native": native_loader.stats["loaded"]}


def _a_kernel_in_use(cache, llvm_tier) -> bool:
    """Whether a first kernel has been put in place (the same events as ``to_kernel``)."""
    return bool(cache.load_times or cache.serial_loaded_at or llvm_tier.built_at)


def run_child(workload: str, mode: str, cache_dir: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PLAX_NUMBA_SYNC", "PLAX_NUMBA_WORKERS", "PLAX_NUMBA_COMPILE_AFTER",
                        "PLAX_NUMBA_WORKER_PRIORITY", "PLAX_NUMBA_GUARD_INTERVAL")}
    env.update(MODES[mode], PLAX_NUMBA_CACHE_DIR=cache_dir)
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", workload, mode],
                          capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"{workload}/{mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fmt_s(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="*", default=list(WORKLOADS), choices=WORKLOADS)
    parser.add_argument("--modes", nargs="*", choices=MODES,
                        default=[m for m in MODES if m not in EXTRA_MODES],
                        help="(default: all but the priority modes, "
                        f"{', '.join(EXTRA_MODES)}: the default worker is one of them, and "
                        "the unguarded idle worker's MLP row can take minutes on a busy "
                        "host)")
    parser.add_argument("--profile", action="store_true",
                        help="print where a cold compilation's CPU time goes, and a load's")
    parser.add_argument("--pauses", type=int, metavar="ROUNDS", default=0,
                        help="print a histogram of the pauses with and without a compilation "
                        "running, in one run (ROUNDS of each, interleaved)")
    parser.add_argument("--calls", type=int, metavar="NUMBER", default=0,
                        help="print the per-call cost of a kernel's entry point, native loader "
                        "against numba's (NUMBER calls per timing, best of 5)")
    parser.add_argument("--rounds", type=int, default=0, metavar="N",
                        help="run only the cold rows, the modes alternating N rounds (the "
                        "load average beside each run), and print each run and the medians: "
                        "for comparing the priority modes on a shared host")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--pauses-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--profile-child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.profile_child:
        kind, *rest = args.profile_child
        if kind == "capture":
            profile_capture(*rest)
        else:
            print(json.dumps((profile_compile if kind == "compile" else profile_load)(*rest)))
        return
    if args.pauses_child:
        print(json.dumps(pauses_child(args.pauses_child)))
        return
    if args.profile:
        profile(args.workloads)
        return
    if args.pauses:
        pauses(args.pauses)
        return
    if args.calls:
        calls(args.calls, 5)
        return
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    if args.rounds:
        alternate(args.workloads, args.modes, args.rounds)
        return
    rows = []
    for workload in args.workloads:
        for mode in args.modes:
            with tempfile.TemporaryDirectory(prefix="plax_tiering_") as cache_dir:
                cold = run_child(workload, mode, cache_dir)
                warm = run_child(workload, mode, cache_dir) if mode != "sync" else None
            rows.append((workload, mode, cold))
            if warm is not None:
                rows.append((workload, f"{mode} warm", warm))
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPU cores, load average {load:.1f}; a tick every {TICK * 1e3} ms")
    head = ["workload", "compiling in", "first call", "first call -> first kernel",
            "first call -> all final kernels (calls)",
            "pause while compiling: longest / p99",
            "of which compiling caused at most (longest)", "longest GC collection then",
            "same pauses, nothing compiling", "fast call",
            "numba set-up + load here", "numba imported here (native loads)",
            "CPU until then: here + worker",
            "GIL held here by plax's loading, total / longest stretch (longest wait it "
            "can cause)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for workload, mode, r in rows:
        here = (f"{fmt_s(r['prepare'])} + {fmt_s(r['load'])}" if r["loaded"] else "-")
        if r["compiled_here"]:
            here += f" ({r['compiled_here']} compiled here)"
        if r.get("recached"):
            here += f" ({r['recached']} recached by the worker)"
        serial = f" ({r['serial_forms']} serial)" if r["serial_forms"] else ""
        if r.get("first_tier"):
            serial += (f" ({r['first_tier']} first tier, the last at "
                       f"{fmt_s(r['first_tier_all'])})")
        serial += f" ({r['cpu_to_kernel']:.2f} CPU s here)"
        if r.get("guarded"):
            mode += f" (guard raised it {r['promotions']}x)"
        print(f"| {workload} | {mode} | {fmt_s(r['first'])} | {fmt_s(r['to_kernel'])}{serial} | "
              f"{fmt_s(r['to_fast'])} "
              f"({r['calls']}) | {r['pause'] * 1e3:.2f} / {r['pause99'] * 1e3:.2f} ms | "
              f"{r['attributable'] * 1e3:.2f} ms | "
              f"{r['gc'] * 1e3:.1f} ms | "
              f"{r['quiet_pause'] * 1e3:.2f} / {r['quiet99'] * 1e3:.2f} ms | "
              f"{fmt_s(r['fast_call'])} | {here} | "
              f"{'yes' if r['numba_imported'] else 'no'} ({r['native']}) | "
              f"{r['cpu_here']:.2f} + {r['cpu_worker']:.2f} s | {_gil_text(r['gil'])} |")
    _goal_lines(rows)
    print("\nThe pauses over 1 ms explained (benchmarks/pause_probe.py: what ran meanwhile, ms; "
          "'attributable' bounds the compilation's part). While compiling, the longest and "
          "the most attributable; with nothing compiling, the longest:")
    for workload, mode, r in rows:
        for kind, key in (("compiling", "longest"), ("compiling", "most_attributable"),
                          ("nothing compiling", "quiet_longest")):
            for line in r[key]:
                print(f"- {workload} / {mode} / {kind}: {line}")


def alternate(workloads: list, modes: list, rounds: int) -> None:
    """``--rounds``: each workload's cold run in each mode, the modes in turn, ``rounds``
    times (so that the host's load changes every mode alike), one line per run with the load
    average when it started, then the medians per workload and mode."""
    import statistics
    runs: dict = {}
    print(f"{os.cpu_count()} CPU cores; a tick every {TICK * 1e3} ms; cold runs, the modes "
          "alternating")
    print("| round | workload | mode | load (1 min) | attributable pause | raw longest / p99 | "
          "first call -> first kernel | -> all final kernels | worker raised | "
          "plax threads' CPU in one pause, most | pauses > 1 ms (by plax's threads) | "
          "nothing compiling: longest |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n in range(rounds):
        for workload in workloads:
            for mode in modes:
                load = os.getloadavg()[0]
                with tempfile.TemporaryDirectory(prefix="plax_tiering_") as cache_dir:
                    r = run_child(workload, mode, cache_dir)
                runs.setdefault((workload, mode), []).append(r)
                print(f"| {n + 1} | {workload} | {mode} | {load:.1f} | "
                      f"{r['attributable'] * 1e3:.2f} ms | {r['pause'] * 1e3:.2f} / "
                      f"{r['pause99'] * 1e3:.2f} ms | {fmt_s(r['to_kernel'])} | "
                      f"{fmt_s(r['to_fast'])} | {r.get('promotions', 0)}x | "
                      f"{r['background_in_pause'] * 1e3:.2f} ms | "
                      f"{r['pauses_over_1ms']} ({r['background_caused']}) | "
                      f"{r['quiet_pause'] * 1e3:.2f} ms |", flush=True)
    print("\nMedians over the rounds (min-max):")
    print("| workload | mode | attributable pause | raw longest | p99 | first kernel | "
          "all final kernels | plax threads' CPU in one pause |")
    print("|---|---|---|---|---|---|---|---|")
    for (workload, mode), rs in runs.items():
        def cell(key, ms=True):
            values = [r[key] for r in rs]
            f = (lambda v: f"{v * 1e3:.2f}") if ms else fmt_s
            return f"{f(statistics.median(values))} ({f(min(values))}-{f(max(values))})"
        print(f"| {workload} | {mode} | {cell('attributable')} ms | {cell('pause')} ms | "
              f"{cell('pause99')} ms | {cell('to_kernel', False)} | "
              f"{cell('to_fast', False)} | {cell('background_in_pause')} ms |")


#: issue 26's goal for the main thread's longest pause while a compile runs
PAUSE_GOAL = 0.002


def _goal_lines(rows: list) -> None:
    """Per cold row, the pause goal's status: the raw longest pause and p99 while compiling,
    the part of the longest that compiling can have caused at most, and the same run's
    pauses with nothing compiling (the host's own noise, which no compiler setting
    removes)."""
    print(f"\nThe pause goal (at most {PAUSE_GOAL * 1e3:.0f} ms of the main thread's longest "
          "pause caused by compiling), per cold run: raw longest / p99 while compiling; the "
          "part compiling caused at most; the same process's pauses with nothing compiling:")
    for workload, mode, r in rows:
        if mode.endswith(" warm") or mode == "sync":
            continue
        met = "met" if r["attributable"] <= PAUSE_GOAL else "not met"
        print(f"- {workload} / {mode}: {r['pause'] * 1e3:.2f} / {r['pause99'] * 1e3:.2f} ms "
              f"raw; {r['attributable'] * 1e3:.2f} ms attributable ({met}); nothing "
              f"compiling {r['quiet_pause'] * 1e3:.2f} / {r['quiet99'] * 1e3:.2f} ms")


# ---------------------------------------------------------------- --profile: where it goes

class PhaseClock:
    """Exclusive CPU time of this thread per phase: numba's and llvmlite's functions are
    wrapped, and the innermost wrapped call running is charged (a helper's type inference,
    run while the kernel's is typed, counts as type inference, not twice)."""

    def __init__(self):
        self.totals: dict = {}
        self.stack: list = []
        self.last = time.thread_time()
        self.nested_compiles = [0, 0.0]  # helpers compiled inside a kernel's: count, CPU s
        self._depth = 0

    def _switch(self, phase=None) -> None:
        now = time.thread_time()
        if self.stack:
            top = self.stack[-1]
            self.totals[top] = self.totals.get(top, 0.0) + now - self.last
        self.last = now
        if phase is None:
            self.stack.pop()
        else:
            self.stack.append(phase)

    def wrap(self, owner, name: str, phase: str, compile_level: bool = False) -> None:
        """Charges ``owner.name`` (a function, method or classmethod) to ``phase``."""
        raw = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        is_classmethod = isinstance(raw, classmethod)
        func = raw.__func__ if is_classmethod else raw
        clock = self

        def wrapped(*args, **kwargs):
            start = time.thread_time()
            clock._depth += compile_level
            clock._switch(phase)
            try:
                return func(*args, **kwargs)
            finally:
                clock._switch()
                clock._depth -= compile_level
                if compile_level and clock._depth > 0:
                    clock.nested_compiles[0] += 1
                    clock.nested_compiles[1] += time.thread_time() - start
        setattr(owner, name, classmethod(wrapped) if is_classmethod else wrapped)

    def phase(self, name: str):
        clock = self

        class _Phase:
            def __enter__(self):
                clock._switch(name)

            def __exit__(self, *exc):
                clock._switch()
        return _Phase()


def _defining_class(cls, name: str):
    return next(k for k in cls.__mro__ if name in k.__dict__)


def _wrap_compiler(clock: PhaseClock) -> None:
    from numba.core import base, caching, codegen, compiler, typed_passes
    clock.wrap(compiler, "compile_extra", "numba front end, rewrites, other passes",
               compile_level=True)
    clock.wrap(_defining_class(typed_passes.NopythonTypeInference, "run_pass"), "run_pass",
               "type inference")
    for name in ("PreParforPass", "ParforPass", "ParforFusionPass", "ParforPreLoweringPass"):
        clock.wrap(getattr(typed_passes, name), "run_pass", "parfor passes")
    clock.wrap(typed_passes.BaseNativeLowering, "run_pass", "lowering (numba IR -> LLVM IR)")
    clock.wrap(codegen.CPUCodeLibrary, "add_ir_module", "LLVM IR parse + link")
    clock.wrap(codegen.CPUCodeLibrary, "_optimize_functions", "LLVM function passes")
    clock.wrap(codegen.CPUCodeLibrary, "_optimize_final_module", "LLVM module optimisation")
    clock.wrap(codegen.JITCodeLibrary, "_finalize_specific", "LLVM machine code (MCJIT)")
    clock.wrap(caching.Cache, "_save_overload", "cache write")
    clock.wrap(base.BaseContext, "refresh", "numba registries (refresh)")


def _wrap_loader(clock: PhaseClock) -> None:
    from numba.core import base, caching, codegen, compiler
    clock.wrap(caching.IndexDataCacheFile, "_load_index", "index lookup")
    clock.wrap(caching.IndexDataCacheFile, "_load_data", "read + unpickle entry")
    clock.wrap(compiler.CompileResult, "_rebuild", "rebuild (other)")
    clock.wrap(codegen.ll, "parse_bitcode", "parse bitcode of the linkable module")
    clock.wrap(codegen.JITCodeLibrary, "_finalize_specific", "link machine code (MCJIT)")
    clock.wrap(codegen.JitEngine, "_load_defined_symbols", "symbol table")
    clock.wrap(base.BaseContext, "insert_user_function", "install overload")


def profile_capture(workload: str, out: str) -> None:
    """Runs ``workload`` tiered (compiled after one call) with the worker's jobs run in
    this process, and pickles the jobs (function name, arguments) in the order the worker
    would get them."""
    import pickle
    from concurrent.futures import Future
    from plax_numba import compile_worker, tiered
    os.environ["PLAX_NUMBA_COMPILE_AFTER"] = "1"
    jobs = []

    def run_here(fn, *args):
        jobs.append((fn.__name__, args))
        future = Future()
        try:
            future.set_result(fn(*args))
        except Exception as err:  # noqa: BLE001
            future.set_exception(err)
        return future
    compile_worker.submit = run_here
    compile_worker.prestart = lambda: None
    fn, args, lib = _workload(workload)
    os.environ.pop("PLAX_NUMBA_SYNC", None)
    for _ in range(3):
        lib.block(fn(*args))
        tiered.wait_idle(600)
    with open(out, "wb") as f:
        pickle.dump(jobs, f)


def profile_compile(jobs_path: str) -> dict:
    """Runs the captured jobs as a fresh compile worker would (numba's import first), each
    phase's CPU time charged (:class:`PhaseClock`)."""
    import pickle
    clock = PhaseClock()
    with open(jobs_path, "rb") as f:  # (the capture's cache directory left out)
        jobs = [(name, args[:2]) for name, args in pickle.load(f)
                if name == "compile_for_cache"]
    with clock.phase("import numba"):
        import numba  # noqa: F401
    _wrap_compiler(clock)
    with clock.phase("import plax_numba's helpers"):
        import plax_numba.arrays, plax_numba.libm_free, plax_numba.scalar  # noqa: F401,E401
    from plax_numba import cache
    per_job = []
    for name, args in jobs:
        start = time.thread_time()
        with clock.phase("import the kernel module (helpers' dispatchers)"):
            cache.load_kernel(args[0])
        with clock.phase("numba front end, rewrites, other passes"):
            getattr(cache, name)(*args)
        per_job.append((name, "prange(" in args[0], time.thread_time() - start))
    clock._switch(None) if clock.stack else None
    return {"phases": clock.totals, "jobs": per_job, "nested": clock.nested_compiles}


def profile_load(jobs_path: str) -> dict:
    """Loads the kernels the captured jobs compiled, from the disk cache, as the program's
    process does (:func:`plax_numba.cache.prepare_numba`, then each kernel's load)."""
    import pickle
    clock = PhaseClock()
    with open(jobs_path, "rb") as f:
        jobs = pickle.load(f)
    from plax_numba import cache
    with clock.phase("prepare numba (import, runtime)"):
        cache.prepare_numba()
    _wrap_loader(clock)
    for name, args in jobs:
        if name != "compile_for_cache":
            continue
        text, arg_types = args[0], args[1]
        with clock.phase("import the kernel module (helpers' dispatchers)"):
            kernel = cache.load_kernel(text)
        with clock.phase("load (other)"):
            assert cache.load_dispatcher(kernel, cache.numba_signature(arg_types),
                                         "prange(" in text)
    return {"phases": clock.totals, "jobs": [], "nested": [0, 0.0]}


def _workload(workload: str):
    sys.path.insert(0, HERE)
    import compare
    import plax
    lib = compare._Lib(plax, lambda f: plax.jit(f, backend="numba"), plax.numpy.asarray,
                       plax.block_until_ready)
    factory = next(impls["plax"] for label, impls in compare.make_workloads(False)
                   if label.startswith(WORKLOADS[workload]))
    fn, args = factory(lib)
    return fn, args, lib


def _profile_child(kind: str, jobs_path: str, cache_dir: str) -> dict:
    env = dict(os.environ, PLAX_NUMBA_CACHE_DIR=cache_dir)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--profile-child", kind,
                           jobs_path], capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode:
        raise RuntimeError(f"profile {kind} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["wall"] = time.perf_counter() - start
    return result


def profile(workloads: list) -> None:
    """Prints where a cold compilation's CPU time goes, per workload: in a fresh process as
    the compile worker runs it (phases of numba and LLVM), and in a fresh process loading
    the result from the disk cache, as the program does (and as a warm start does)."""
    for workload in workloads:
        with tempfile.TemporaryDirectory(prefix="plax_profile_") as work:
            jobs_path = os.path.join(work, "jobs.pkl")
            capture_dir = os.path.join(work, "capture")
            env = dict(os.environ, PLAX_NUMBA_CACHE_DIR=capture_dir)
            subprocess.run([sys.executable, os.path.abspath(__file__), "--profile-child",
                            "capture", workload, jobs_path], check=True, env=env, timeout=900,
                           capture_output=True)
            fresh = os.path.join(work, "fresh")
            compiled = _profile_child("compile", jobs_path, fresh)
            loaded = _profile_child("load", jobs_path, fresh)
        print(f"\n### {workload}: {len(compiled['jobs'])} worker jobs "
              f"({sum(1 for j in compiled['jobs'] if j[1])} parallel), CPU seconds")
        total = sum(compiled["phases"].values())
        print(f"compile worker (fresh process, wall {compiled['wall']:.2f} s with the "
              f"interpreter's start; nested helper compilations: {compiled['nested'][0]}, "
              f"{compiled['nested'][1]:.2f} s of it)")
        for phase, t in sorted(compiled["phases"].items(), key=lambda kv: -kv[1]):
            print(f"  {phase:55s} {t:7.3f}  {100 * t / total:5.1f}%")
        print(f"  {'total':55s} {total:7.3f}")
        for name, parallel, t in compiled["jobs"]:
            print(f"    job {name}{' (parallel)' if parallel else ''}: {t:.3f}")
        total = sum(loaded["phases"].values())
        print(f"load in the program's process (fresh process, wall {loaded['wall']:.2f} s)")
        for phase, t in sorted(loaded["phases"].items(), key=lambda kv: -kv[1]):
            print(f"  {phase:55s} {t:7.3f}  {100 * t / total:5.1f}%")
        print(f"  {'total':55s} {total:7.3f}")


# ---------------------------------------------------------------- --pauses: a histogram

PAUSE_BUCKETS_MS = (0.5, 1.0, 2.0, 5.0, 10.0, 50.0)
QUIET, FIRST, LATER = ("nothing compiling", "first kernel compiling (the loader set up here)",
                       "later kernels compiling")


def pauses_child(rounds: int) -> dict:
    """selu's compiled step called in a loop while a thread ticks every :data:`TICK`; the
    first kernel's compilation (numba set up in this process meanwhile) is tagged apart,
    then ``rounds`` times: a second of calls with nothing compiling, and the calls while a
    new variant of the function (another constant: another kernel) compiles in the worker."""
    from plax_numba import tiered
    fn, args, lib = _workload("selu")
    os.environ.pop("PLAX_NUMBA_SYNC", None)

    def until_idle(call):
        while True:
            call()
            if tiered.wait_idle(0):
                return
    # (the pauses kept by tag; no counters read: the histogram as before the probe)
    with pause_probe.AttributingTicker(TICK, explain=False) as ticker:
        lib.block(fn(*args))  # (the first call traces and lowers: not a compilation's pause)
        ticker.tag = FIRST
        until_idle(lambda: lib.block(fn(*args)))
        for r in range(rounds):
            ticker.tag = QUIET
            end = time.perf_counter() + 1.0
            while time.perf_counter() < end:
                lib.block(fn(*args))
            ticker.tag = LATER
            scale = 1.0 + (r + 1) / 64  # a new constant: a new kernel, a cold compilation
            variant = lib.jit(lambda x, scale=scale: fn(x) * scale)
            for _ in range(tiered.compile_after()):
                lib.block(variant(*args))
            until_idle(lambda: lib.block(fn(*args)))
        ticker.tag = None
    tagged: dict = {}
    for tag, gap in ticker.gaps:
        tagged.setdefault(tag, []).append(gap)
    return tagged


# ---------------------------------------------------------------- --calls: per-call cost

#: kernels whose entry-point call --calls times: one writing into outputs its step allocated
#: (an elementwise cluster), one allocating and returning its results (a reduction's kind)
CALL_KERNELS = {
    "writes into its outputs (a, s, out, n)": ('''
@njit(**_OPTIONS)
def kernel(a, s, o, n):
    for i in range(n):
        o[i] = np.float32(a[i] * s + np.float32(1.0))
    return 0
''', lambda np, a: (a, np.float32(1.5), np.empty_like(a), a.size),
        [("array", "float32", 1), ("scalar", "float32"), ("array", "float32", 1), ("int",)]),
    "returns (array, scalar)": ('''
@njit(**_OPTIONS)
def kernel(a, s, n):
    o = np.empty(n, np.float32)
    acc = 0.0
    for i in range(n):
        o[i] = np.float32(a[i] * s)
        acc += o[i]
    return o, np.float32(acc)
''', lambda np, a: (a, np.float32(1.5), a.size),
        [("array", "float32", 1), ("scalar", "float32"), ("int",)]),
}


def calls(number: int, repeat: int) -> None:
    """Prints the cost of one call of a compiled kernel's entry point on 4 float32 elements
    (the call, not the work): the native loader's builtin function against numba's compiled
    entry point (what steps called before), both loaded in this process from one
    compilation, best of ``repeat`` runs of ``number`` calls."""
    import timeit
    import numpy as np
    from plax_numba import cache, native_emit, native_loader
    with tempfile.TemporaryDirectory(prefix="plax_calls_") as cache_dir:
        cache.use_cache_dir(cache_dir)
        print("| kernel | native loader, us/call | numba entry point, us/call | ratio |")
        print("|---|---:|---:|---:|")
        for label, (source, make_args, types_) in CALL_KERNELS.items():
            arg_types = [(t[0], np.dtype(t[1]), *t[2:]) if len(t) > 1 else t for t in types_]
            text = cache.module_source(source, ["mul", "add"])
            cache.compile_for_cache(text, arg_types, native=True)
            native = native_loader.load(native_emit.artifact_path(cache._marker(text, arg_types)))
            numba_entry = cache.entry_point(cache.load_kernel(text), arg_types)
            args = make_args(np, np.linspace(-1, 1, 4, dtype=np.float32))
            best = {}
            for name, fn in (("native", native.function), ("numba", numba_entry)):
                fn(*args)
                best[name] = min(timeit.repeat(lambda: fn(*args), number=number,
                                               repeat=repeat)) / number * 1e6
            print(f"| {label} | {best['native']:.3f} | {best['numba']:.3f} | "
                  f"{best['native'] / best['numba']:.2f} |")


#: the loaders --pauses compares, one fresh process (and empty cache) each, in one run
PAUSE_LOADERS = {"native loader (numba not imported here)": {},
                 "numba loader (PLAX_NUMBA_NATIVE=0)": {"PLAX_NUMBA_NATIVE": "0"}}


def pauses(rounds: int) -> None:
    """Prints the histogram of the pauses of a thread ticking every :data:`TICK` while the
    program's thread calls selu's compiled step, with and without a compilation running,
    for each loader (:data:`PAUSE_LOADERS`)."""
    results = {}
    for loader, extra in PAUSE_LOADERS.items():
        with tempfile.TemporaryDirectory(prefix="plax_pauses_") as cache_dir:
            env = {k: v for k, v in os.environ.items()
                   if k not in ("PLAX_NUMBA_SYNC", "PLAX_NUMBA_WORKERS", "PLAX_NUMBA_NATIVE")}
            env.update(extra, PLAX_NUMBA_CACHE_DIR=cache_dir)
            proc = subprocess.run([sys.executable, os.path.abspath(__file__),
                                   "--pauses-child", str(rounds)], capture_output=True,
                                  text=True, env=env, timeout=900)
        if proc.returncode:
            raise RuntimeError(f"pauses failed:\n{proc.stderr[-3000:]}")
        results[loader] = json.loads(proc.stdout.strip().splitlines()[-1])
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPU cores, load average {load:.1f}; a tick every "
          f"{TICK * 1e3} ms; {rounds} rounds, interleaved")
    head = (["loader", "while", "ticks", "p50", "p99", "p99.9", "longest"]
            + [f"> {b:g} ms" for b in PAUSE_BUCKETS_MS])
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for loader, tagged in results.items():
        _pause_rows(loader, tagged)


def _pause_rows(loader: str, tagged: dict) -> None:
    for tag in (QUIET, FIRST, LATER):
        gaps = sorted(g * 1e3 for g in tagged.get(tag, [])) or [0.0]
        at = lambda q: gaps[min(len(gaps) - 1, int(q * (len(gaps) - 1)))]  # noqa: E731
        over = [sum(g > b for g in gaps) for b in PAUSE_BUCKETS_MS]
        print(f"| {loader} | {tag} | {len(gaps)} | {at(0.5):.2f} | {at(0.99):.2f} | "
              f"{at(0.999):.2f} | "
              f"{gaps[-1]:.2f} | " + " | ".join(str(n) for n in over) + " |")


if __name__ == "__main__":
    main()
