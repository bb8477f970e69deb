"""What a probe thread's pauses wait on while kernels compile (issue 26: the main thread's
longest pause): a benchmark-only instrument, nothing of it runs in plax itself.

:class:`AttributingTicker` is a thread waking every ``tick`` seconds (the probe of
``benchmarks/numba_tiering.py`` and ``benchmarks/worker_scheduling.py``); at each wake it
reads the scheduler's counters of every thread of this process and of the compile workers
(Linux's ``/proc/<pid>/task/<tid>/schedstat``: nanoseconds run on a CPU, nanoseconds waited
runnable on a run queue) and the page faults of this process's threads
(``/proc/<pid>/task/<tid>/stat``), and for each pause longer than ``threshold`` keeps what
changed between the wake before it and the wake that ended it:

* ``ticker queued``: the probe was runnable but no core ran it (the OS scheduled something
  else: cause (b) of the issue when the worker ran meanwhile);
* per thread of this process, its CPU time (a thread holding the GIL, or running C code that
  released it) and its time queued, and ``main queued`` (the program's thread, which may hold
  the GIL, runnable but not running);
* the compile workers' CPU time;
* plax's own loading and linking steps running meanwhile (``steps``: the intervals recorded
  by ``numba_tiering.GilClock``, the first tier's ``plan`` on the program's thread among them);
* the page faults (minor, major) of this process's threads;
* each plax background thread's Python stack at the end of the pause (innermost plax,
  numba or llvmlite function: what it ran when it gave the GIL up).

:func:`attributable` bounds from above how much of a pause the compilation caused: the CPU
time of plax's background threads in it, plus the time plax's steps on the program's thread
overlapped it, plus the part of the probe's and the program's queueing that the worker's
CPU time could have caused. The rest is the program's own calls holding the GIL and the
host's other processes, which the same probe sees with nothing compiling.

Reading the counters costs ~50 us per wake (a dozen small reads): the probe is for
diagnosis and for the benchmark's "attributable" column, which compares runs made with it.
"""
from __future__ import annotations

import os
import sys
import threading
import time

#: plax's thread names (``plax_numba.tiered`` lanes, the workers' reader/writer/start threads)
PLAX_THREAD_PREFIX = "plax-numba"


def _counters(fd: int) -> tuple[int, int]:
    """(ns run, ns queued) from an open ``schedstat`` file."""
    run, queued, _ = os.pread(fd, 96, 0).split()
    return int(run), int(queued)


def _faults(fd: int) -> tuple[int, int]:
    """(minor, major) page faults from an open ``stat`` file of a thread."""
    fields = os.pread(fd, 1024, 0).rsplit(b")", 1)[1].split()
    return int(fields[7]), int(fields[9])


class AttributingTicker:
    """A thread ticking every ``tick`` seconds that records its pauses (``gaps``) and, for each
    longer than ``threshold``, what ran meanwhile (``records``; see the module's docstring).

    Args:
      tick: the sleep between wakes, seconds.
      threshold: the shortest pause explained, seconds.
      worker_pids: a function returning the compile workers' process ids.
      steps: a list that plax's loading steps append ``(thread id, label, start, end)`` to
        (``perf_counter`` times), or None.
      explain: False records the pauses only (no counters read: a plain ticking thread).
    """

    def __init__(self, tick: float, threshold: float = 0.001, worker_pids=lambda: [],
                 steps: list | None = None, explain: bool = True):
        self.tick, self.threshold, self.explain = tick, threshold, explain
        self.worker_pids, self.steps = worker_pids, steps if steps is not None else []
        self.gaps: list = []
        self.records: list = []
        self.tag = None  # records and gaps are kept while a tag is set
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="pause-probe")
        self._fds: dict = {}  # (pid, tid) -> (schedstat fd, stat fd or None)
        self._main_tid = threading.main_thread().native_id

    # -- the counters
    def _watch(self) -> None:
        """Opens the counters of threads not watched yet (new plax threads, new workers)."""
        me = os.getpid()
        pids = [me] + list(self.worker_pids())
        for pid in pids:
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for tid in map(int, tids):
                if (pid, tid) in self._fds:
                    continue
                try:
                    sched = os.open(f"/proc/{pid}/task/{tid}/schedstat", os.O_RDONLY)
                    stat = (os.open(f"/proc/{pid}/task/{tid}/stat", os.O_RDONLY)
                            if pid == me else None)
                except OSError:
                    continue
                self._fds[(pid, tid)] = (sched, stat)

    def _snapshot(self) -> dict:
        out = {}
        for key, (sched, stat) in list(self._fds.items()):
            try:
                out[key] = _counters(sched) + (_faults(stat) if stat is not None else (0, 0))
            except (OSError, ValueError):
                pass  # (a thread or worker that ended)
        return out

    # -- the thread
    def _run(self) -> None:
        me = threading.get_native_id()
        pid = os.getpid()
        if self.explain:
            self._watch()
        read_at = time.perf_counter()  # when the counters in `before` were being read
        before = self._snapshot()
        last = time.perf_counter()
        wakes = 0
        while not self._stop.is_set():
            time.sleep(self.tick)
            now = time.perf_counter()
            wakes += 1
            if wakes % 64 == 0 and self.explain:
                self._watch()
            after = self._snapshot()
            gap = now - last - self.tick
            if self.tag is not None:
                self.gaps.append((self.tag, gap))
                if gap > self.threshold and self.explain:
                    # (the counters' window: from the reading before to the end of this one;
                    # the probe may be descheduled mid-reading, so it can exceed the pause)
                    window = time.perf_counter() - read_at
                    self.records.append(self._explain(self.tag, last, now, gap, window,
                                                      before, after, pid, me))
            read_at = now
            before, last = after, time.perf_counter()

    def _explain(self, tag, start, end, gap, window, before, after, pid, me) -> dict:
        names = {t.native_id: t.name for t in threading.enumerate()}
        threads = {}
        worker_cpu = 0.0
        faults = [0, 0]
        for key, now in after.items():
            old = before.get(key, (now[0], now[1], now[2], now[3]))
            ran, queued = (now[0] - old[0]) / 1e9, (now[1] - old[1]) / 1e9
            if key[0] != pid:
                worker_cpu += ran
                continue
            faults[0] += now[2] - old[2]
            faults[1] += now[3] - old[3]
            name = ("probe" if key[1] == me else "main" if key[1] == self._main_tid
                    else names.get(key[1], f"tid {key[1]}"))
            if ran or queued:
                threads[name] = (threads.get(name, (0.0, 0.0))[0] + ran,
                                 threads.get(name, (0.0, 0.0))[1] + queued)
        steps = [(tid == self._main_tid, label, min(s_end, end) - max(s_start, start))
                 for tid, label, s_start, s_end in list(self.steps)
                 if s_start < end and s_end > start]
        return {"tag": tag, "at": start, "gap": gap, "window": window, "threads": threads,
                "worker": worker_cpu, "faults": tuple(faults), "steps": steps,
                "stacks": _plax_stacks(names, me)}

    def __enter__(self):
        self.thread.start()
        time.sleep(0.01)
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self.thread.join()
        for sched, stat in self._fds.values():
            os.close(sched)
            if stat is not None:
                os.close(stat)


def _plax_stacks(names: dict, me: int) -> dict:
    """The innermost plax, numba or llvmlite function each plax thread runs now."""
    idents = {t.ident: t.name for t in threading.enumerate()
              if t.name.startswith(PLAX_THREAD_PREFIX)}
    out = {}
    for ident, frame in sys._current_frames().items():
        if ident not in idents:
            continue
        where = None
        while frame is not None:
            path = frame.f_code.co_filename
            if any(part in path for part in ("plax_numba", "numba", "llvmlite")):
                where = f"{os.path.basename(path)}:{frame.f_code.co_name}"
                break
            frame = frame.f_back
        out[idents[ident]] = where
    return out


def background_cpu(record: dict) -> float:
    """CPU seconds plax's background threads ran during the pause of ``record``."""
    return sum(ran for name, (ran, _) in record["threads"].items()
               if name.startswith(PLAX_THREAD_PREFIX))


def attributable(record: dict) -> float:
    """An upper bound on the part of the pause of ``record`` that compiling caused (seconds):
    plax's background threads' CPU time, plax's steps on the program's thread overlapping the
    pause, and the probe's and the program's queueing up to the worker's CPU time."""
    main_steps = sum(overlap for on_main, _, overlap in record["steps"] if on_main)
    queued = record["threads"].get("probe", (0.0, 0.0))[1] + \
        record["threads"].get("main", (0.0, 0.0))[1]
    return min(record["gap"], background_cpu(record) + main_steps
               + min(queued, record["worker"]))


def cause(record: dict) -> str:
    """The largest part of the pause of ``record``, in words."""
    main_ran = record["threads"].get("main", (0.0, 0.0))[0]
    probe_queued = record["threads"].get("probe", (0.0, 0.0))[1]
    main_steps = sum(overlap for on_main, _, overlap in record["steps"] if on_main)
    parts = {"the program's thread ran (GIL)": main_ran - main_steps,
             "plax's steps on the program's thread": main_steps,
             "plax background threads ran": background_cpu(record),
             "probe queued, worker ran": min(probe_queued, record["worker"]),
             "probe queued, other processes": max(0.0, probe_queued - record["worker"])}
    return max(parts, key=parts.get)


def describe(record: dict) -> str:
    """One line: the pause of ``record`` and what ran during it (milliseconds)."""
    ms = lambda s: f"{s * 1e3:.2f}"  # noqa: E731
    threads = ", ".join(f"{name} ran {ms(r)} queued {ms(q)}"
                        for name, (r, q) in sorted(record["threads"].items(),
                                                   key=lambda kv: -kv[1][0] - kv[1][1])
                        if r + q > 1e-4)
    steps = ", ".join(f"{label}{' (main)' if on_main else ''} {ms(o)}"
                      for on_main, label, o in record["steps"])
    stacks = ", ".join(f"{n}: {w}" for n, w in record["stacks"].items() if w)
    return (f"{ms(record['gap'])} ms [{cause(record)}; attributable <= "
            f"{ms(attributable(record))}] in {ms(record['window'])}: {threads}; "
            f"worker ran {ms(record['worker'])}; "
            f"faults {record['faults'][0]}/{record['faults'][1]}"
            + (f"; steps {steps}" if steps else "") + (f"; stacks {stacks}" if stacks else ""))
