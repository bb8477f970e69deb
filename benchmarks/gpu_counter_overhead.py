"""Host CPU per eager op and per jitted call on the simulated GPU: what counting launches and
host copies (``plax_cupy.runtime``) costs, with and without another thread routing its counts.

Each round runs one child process per source tree (alternating, so that the machine's load
falls on both alike), each timing ``x + y``, ``jnp.sin(x)``, ``x.sum()`` and a jitted add by
process CPU time (best of ``--repeats`` x ``--number`` calls), first alone, then while another
thread holds a route of counts open (``runtime.counted_as``: as a capture, a graph check or a
program's first call does, for seconds while it compiles). Prints microseconds per call; the
simulated GPU's times are host work only (its kernels run on the host, but the small operands
make that a fraction of the dispatch)::

    python benchmarks/gpu_counter_overhead.py --trees /work/wt/before .
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CASES = ("x + y", "jnp.sin(x)", "x.sum()", "jit add")


def _child(number: int, repeats: int) -> dict:
    """``{case (routed): best microseconds per call}`` in this process (its tree on sys.path)."""
    import threading
    import time
    sys.path.insert(0, HERE)
    import simulated_gpu
    from eager_overhead import time_per_call
    simulated_gpu.install()
    import numpy as np
    import plax
    import plax.numpy as jnp
    from plax_cupy import runtime
    gpu = plax.devices("gpu")[0]
    x = plax.device_put(np.linspace(0, 1, 64, dtype=np.float32), gpu)
    y = plax.device_put(np.linspace(1, 2, 64, dtype=np.float32), gpu)
    add = plax.jit(lambda a, b: a + b)
    calls = {"x + y": lambda: x + y, "jnp.sin(x)": lambda: jnp.sin(x),
             "x.sum()": lambda: x.sum(), "jit add": lambda: add(x, y)}
    best: dict = {}

    def measure(suffix: str) -> None:   # (time_per_call's warm-up compiles, caches, captures)
        for name, call in calls.items():
            best[name + suffix] = time_per_call(call, number, repeats, time.process_time) * 1e6

    measure("")
    entered, leave = threading.Event(), threading.Event()

    def route():   # (another thread inside a route of counts the whole time)
        with runtime.counted_as(runtime.CAPTURING):
            entered.set()
            leave.wait()
    other = threading.Thread(target=route)
    other.start()
    entered.wait()
    try:
        measure(" (another thread routes)")
    finally:
        leave.set()
        other.join()
    return best


def _run_child(tree: str, number: int, repeats: int) -> dict:
    tree = os.path.abspath(tree)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(tree, "core"), os.path.join(tree, "backends"),
         os.path.join(tree, "tests", "cupy")]))
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                          "--number", str(number), "--repeats", str(repeats)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", default=["."], help="source trees to compare")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.number, args.repeats)))
        return
    args.trees = list(dict.fromkeys(args.trees))
    best: dict = {tree: {} for tree in args.trees}
    for _ in range(args.rounds):
        for tree in args.trees:
            for case, us in _run_child(tree, args.number, args.repeats).items():
                best[tree][case] = min(us, best[tree].get(case, us))
    cases = list(best[args.trees[0]])
    width = max(len(c) for c in cases)
    print(f"{'us per call (best)':<{width}}  " + "  ".join(f"{t[-24:]:>24}" for t in args.trees))
    for case in cases:
        print(f"{case:<{width}}  " + "  ".join(f"{best[t][case]:24.2f}" for t in args.trees))


if __name__ == "__main__":
    main()
