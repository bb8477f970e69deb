"""Benchmark: a jitted sampler in a warm second process, its kernels loaded natively (no
numba in the process) or through numba.

    python benchmarks/random_native_load.py [--workloads normal,gamma] [--runs 3] [--calls 2000]

A first child process compiles the workloads into a fresh cache (the compile worker, as a
program would); then, for each loader (``native``: ``plax_numba.native_loader``; ``numba``:
``PLAX_NUMBA_NATIVE=0``), ``--runs`` fresh children each load the cached kernels and report
the process's CPU time and wall time from its start through the first result, whether numba
was imported, and the time per warm call (best of 7 rounds of ``--calls`` calls, CPU and
wall). CPU time is the figure to read on a loaded host. Nothing is compared with JAX here:
JAX has no on-disk kernel loading of this kind (``benchmarks/random_samplers.py`` and
``random_normal.py`` give the samplers' throughput beside JAX).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap

#: workload name -> the sampler's expression of the key ``k`` (small: whole-program kernels)
WORKLOADS = {
    "normal": "random.normal(k, (10,))",
    "uniform": "random.uniform(k, (33,), minval=-2.0, maxval=3.0)",
    "truncated_normal": "random.truncated_normal(k, -1.5, 2.0, (40,))",
    "gamma": "random.gamma(k, np.float32(2.5), (64,))",
}

_CHILD = """
    import time
    start_cpu, start_wall = time.process_time(), time.perf_counter()
    import json, sys
    import numpy as np
    import plax
    from plax import random
    from plax_numba import native_loader, tiered

    f = plax.jit(lambda k: {expr}, backend="numba")
    key = random.PRNGKey(0)
    f(key).block_until_ready()
    first_cpu, first_wall = time.process_time() - start_cpu, time.perf_counter() - start_wall
    numba_imported = "numba" in sys.modules
    while not tiered.wait_idle(0):   # (a cold run: until the worker has compiled everything)
        # (blocked while the worker compiles: calls spinning on the reference path took as
        # much CPU as the compile, and its GIL; then a call loads what it made)
        tiered.wait_idle()
        f(key).block_until_ready()
    for _ in range(200):
        f(key)
    rounds = []
    for _ in range(7):
        c, w = time.process_time(), time.perf_counter()
        for _ in range({calls}):
            f(key)
        rounds.append(((time.process_time() - c) / {calls}, (time.perf_counter() - w) / {calls}))
    print(json.dumps({{"first_cpu": first_cpu, "first_wall": first_wall,
                      "numba": numba_imported, "native": native_loader.stats["loaded"],
                      "call_cpu": min(r[0] for r in rounds),
                      "call_wall": min(r[1] for r in rounds)}}))
"""


def _child(expr: str, calls: int, env: dict) -> dict:
    code = textwrap.dedent(_CHILD.format(expr=expr, calls=calls))
    full = dict(os.environ, **env)
    full.pop("PLAX_NUMBA_SYNC", None)
    proc = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default="normal,uniform,truncated_normal",
                        help=f"comma-separated, from {', '.join(WORKLOADS)}")
    parser.add_argument("--runs", type=int, default=3, help="warm processes per loader")
    parser.add_argument("--calls", type=int, default=2000, help="calls per timing round")
    args = parser.parse_args()
    loaders = {"native": {}, "numba": {"PLAX_NUMBA_NATIVE": "0"}}
    print("warm second process: jit(sampler) from a warm disk cache; best/median of runs")
    print("| workload | loader | CPU to 1st result | wall to 1st result | numba imported "
          "| per call CPU | per call wall |")
    print("|---|---|---:|---:|---|---:|---:|")
    for name in args.workloads.split(","):
        expr = WORKLOADS[name]
        with tempfile.TemporaryDirectory() as cache:
            env = {"PLAX_NUMBA_CACHE_DIR": cache, "PLAX_NUMBA_COMPILE_AFTER": "1"}
            _child(expr, 1, env)   # cold: the worker compiles into the cache
            for loader, extra in loaders.items():
                runs = [_child(expr, args.calls, dict(env, **extra)) for _ in range(args.runs)]

                def cell(key, scale, unit, digits):
                    values = sorted(r[key] * scale for r in runs)
                    return (f"{values[0]:.{digits}f} / {values[len(values) // 2]:.{digits}f}"
                            f" {unit}")
                numba_cell = "/".join("yes" if r["numba"] else "no" for r in runs)
                print(f"| {name} | {loader} | {cell('first_cpu', 1, 's', 2)} | "
                      f"{cell('first_wall', 1, 's', 2)} | {numba_cell} | "
                      f"{cell('call_cpu', 1e6, 'µs', 2)} | {cell('call_wall', 1e6, 'µs', 2)} |",
                      flush=True)


if __name__ == "__main__":
    main()
