"""How a compile worker's scheduling settings change the program's pauses and the worker's
own progress (issue 26, the main thread's longest pause; ``plax_numba.cpu_priority``).

A stand-in program (its main thread busy on NumPy calls that release the GIL, and a thread
waking every 0.5 ms that records its pauses: ``pause_probe.AttributingTicker`` without its
counters, as ``numba_tiering.py``'s histogram) runs beside a
stand-in worker (a CPU-bound process, as numba compiling), for each setting in turn, the
settings alternating over ``--rounds`` rounds so that all see the same host:

* ``none``: no worker (the host's own pauses);
* ``normal, own session``: plax's default worker;
* ``idle, program's session``: ``PLAX_NUMBA_WORKER_PRIORITY=idle``;
* ``idle, own session``: SCHED_IDLE where autogroup weighs it only against its session;
* ``long slice, own session``: EEVDF's per-task slice at 100 ms (``sched_setattr``, Linux
  6.12+);
* ``nice autogroup, own session``: its session's autogroup at nice 19.

Columns: the probe's longest pause, 99.9th and 99th percentiles (median over rounds), and the
worker's CPU seconds (its progress). With ``--perf`` (Linux ``perf`` and the right to trace
the scheduler: root) each run is recorded (``sched:sched_switch``, ``sched:sched_waking``)
and the time the program's threads spent runnable but not running is split by what ran on
the core they then ran on (the worker, other processes, the program): the pause the worker
itself caused, whatever the host's load.

Run ``python benchmarks/worker_scheduling.py --rounds 3 --seconds 1.5 [--perf]``.
"""
from __future__ import annotations

import argparse
import bisect
import collections
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import pause_probe  # (benchmarks/: the directory of this script)

TICK = 0.0005
#: setting -> (the worker in a session of its own, what it sets on itself)
SETTINGS = {"none": (True, None), "normal, own session": (True, ""),
            "idle, program's session": (False, "idle"), "idle, own session": (True, "idle"),
            "long slice, own session": (True, "slice"),
            "nice autogroup, own session": (True, "autogroup")}

WORKER = r'''
import ctypes, os, struct, sys, time
how, seconds = sys.argv[1], float(sys.argv[2])
if how == "idle":
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
elif how == "slice":  # sched_setattr (x86_64: 314), sched_runtime = 100 ms
    ctypes.CDLL(None).syscall(314, 0, ctypes.create_string_buffer(
        struct.pack("IIQiIQQQ", 48, 0, 0, 0, 0, 100_000_000, 0, 0), 48), 0)
elif how == "autogroup":  # (its own session's group: the caller's is left alone)
    with open("/proc/self/autogroup", "w") as f:
        f.write("19")
end = time.perf_counter() + seconds
while time.perf_counter() < end:
    sum(range(1000))
print(time.process_time())
'''


def run(setting: str, seconds: float, ids_out=None) -> dict:
    """One run of the stand-in program beside the stand-in worker set up as ``setting``."""
    import numpy as np
    own, how = SETTINGS[setting]
    if how == "autogroup" and not own:
        raise ValueError("a nice autogroup only for a worker in a session of its own")
    worker = None if how is None else subprocess.Popen(
        [sys.executable, "-c", WORKER, how, str(seconds)], stdout=subprocess.PIPE, text=True,
        start_new_session=own)
    # (the probe records its pauses only: no counters read)
    with pause_probe.AttributingTicker(TICK, explain=False) as ticker:
        if ids_out is not None:
            ids_out.update(probe=ticker.thread.native_id, main=threading.get_native_id(),
                           worker=worker.pid if worker else None)
        a = np.linspace(0, 1, 100_000)
        b = np.empty_like(a)
        ticker.tag = "program"
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:  # the program's calls, releasing the GIL
            np.exp(a, out=b)
        ticker.tag = None
    worker_cpu = float(worker.communicate()[0]) if worker else 0.0
    gaps = sorted(gap for _, gap in ticker.gaps)
    at = lambda q: gaps[int(q * (len(gaps) - 1))] * 1e3  # noqa: E731
    return {"longest": gaps[-1] * 1e3, "p999": at(0.999), "p99": at(0.99),
            "worker_cpu": worker_cpu}


_SWITCH = re.compile(r"\[(\d+)\]\s+([\d.]+):\s+sched:sched_switch: .* prev_pid=(\d+) "
                     r"prev_prio=\d+ prev_state=(\S+) ==> .* next_pid=(\d+)")
_WAKING = re.compile(r"\[(\d+)\]\s+([\d.]+):\s+sched:sched_waking: .* pid=(\d+) ")


def queued_behind(data: str, ids: dict) -> dict:
    """From ``perf record`` data: {(program thread, occupant): (total s, longest s)} of the
    time the program's threads were runnable, by what ran on the core they then ran on."""
    text = subprocess.run(["perf", "script", "-i", data, "-F", "cpu,time,event,trace"],
                          capture_output=True, text=True).stdout
    ours = {ids["probe"]: "probe", ids["main"]: "main"}
    since, ran, waits = {}, collections.defaultdict(list), []
    for line in text.splitlines():
        m = _SWITCH.search(line)
        if m:
            cpu, t, prev, state, nxt = int(m[1]), float(m[2]), int(m[3]), m[4], int(m[5])
            ran[cpu].append((t, nxt))
            if prev in ours and state.startswith("R"):
                since[prev] = t  # preempted: runnable from now on
            if nxt in ours and nxt in since:
                waits.append((ours[nxt], since.pop(nxt), t, cpu))
            continue
        m = _WAKING.search(line)
        if m and int(m[3]) in ours:
            since.setdefault(int(m[3]), float(m[2]))
    out = collections.defaultdict(lambda: [0.0, 0.0])
    for who, start, end, cpu in waits:
        seq = ran[cpu]
        times = [s for s, _ in seq]
        i = max(0, bisect.bisect_right(times, start) - 1)
        spans = collections.Counter()
        while i < len(seq) and seq[i][0] < end:
            stop = min(seq[i + 1][0] if i + 1 < len(seq) else end, end)
            pid = seq[i][1]
            kind = ("worker" if pid == ids["worker"] else "program" if pid in ours
                    else "other" if pid else "idle")
            spans[kind] += max(0.0, stop - max(seq[i][0], start))
            i += 1
        for kind, span in spans.items():
            out[(who, kind)][0] += span
            out[(who, kind)][1] = max(out[(who, kind)][1], span)
    return dict(out)


def child(setting: str, seconds: float) -> None:
    ids: dict = {}
    result = run(setting, seconds, ids)
    print(json.dumps({"result": result, "ids": ids}))


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--settings", nargs="*", default=list(SETTINGS), choices=SETTINGS)
    parser.add_argument("--perf", action="store_true",
                        help="record the scheduler's events (perf, root): who the program's "
                        "threads queued behind")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if platform.machine() != "x86_64":  # (the stand-in calls sched_setattr by its number)
        args.settings = [s for s in args.settings if SETTINGS[s][1] != "slice"]
    if args.child:
        child(args.child[0], float(args.child[1]))
        return
    results = {s: [] for s in args.settings}
    with tempfile.TemporaryDirectory(prefix="plax_sched_") as work:
        for _ in range(args.rounds):
            for setting in args.settings:
                command = [sys.executable, os.path.abspath(__file__), "--child", setting,
                           str(args.seconds)]
                data = os.path.join(work, "perf.data")
                if args.perf:
                    command = ["perf", "record", "-q", "-a", "-e", "sched:sched_switch", "-e",
                               "sched:sched_waking", "-o", data, "--"] + command
                proc = subprocess.run(command, capture_output=True, text=True, timeout=300)
                if proc.returncode:
                    raise RuntimeError(f"{setting} failed:\n{proc.stderr[-2000:]}")
                record = json.loads(proc.stdout.strip().splitlines()[-1])
                if args.perf:
                    record["queued"] = queued_behind(data, record["ids"])
                results[setting].append(record)
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPU cores, load average {load:.1f}; {args.rounds} rounds of "
          f"{args.seconds} s; medians over rounds (ms; worker CPU in s)")
    head = ["setting", "longest", "p99.9", "p99", "worker CPU"]
    if args.perf:
        head += ["main queued behind the worker: total / longest",
                 "probe queued behind the worker: total / longest",
                 "main queued behind other processes: total / longest"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for setting, records in results.items():
        med = lambda f: statistics.median(f(r) for r in records)  # noqa: E731
        cells = [f"{med(lambda r: r['result'][k]):.2f}" for k in ("longest", "p999", "p99",
                                                                   "worker_cpu")]
        if args.perf:
            for who, kind in (("main", "worker"), ("probe", "worker"), ("main", "other")):
                get = lambda r, i: r["queued"].get((who, kind), (0.0, 0.0))[i] * 1e3  # noqa
                cells.append(f"{med(lambda r: get(r, 0)):.1f} / {med(lambda r: get(r, 1)):.2f}")
        print(f"| {setting} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
