"""Benchmark: jitted ``random.gamma`` / ``beta`` / ``dirichlet`` / ``normal``, plax on Numba
beside JAX, with the Numba backend's two paths for the samplers' rejection loops.

    python benchmarks/random_samplers.py [--size N] [--repeat R] [--match TEXT]
                                         [--paths numba,native,per-eq] [--clock wall|cpu]

Columns: ``numba`` (the default path), ``native`` (the rejection ``while_loop`` forced to
one native loop whatever its size, ``PLAX_NUMBA_NATIVE_LOOP_MAX`` raised), ``per-eq`` (the
loop forced to the per-equation path: the Python loop around compiled clusters), and JAX
in the same process (if installed) with the ratio default / JAX. Each cell is the best of
``--repeat`` calls after a warm-up (``block_until_ready`` included), compiled before timing
(``PLAX_NUMBA_SYNC=1``), in wall time or (``--clock cpu``) the process's CPU time, all
threads (on a loaded host the steadier figure). ``--paths`` picks the plax columns. Float32 samples, ``jax_threefry_partitionable`` on both sides.
"""
from __future__ import annotations

import os

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # steady state: compile before timing

import argparse
import time

import numpy as np

from random_normal import best_time  # (this folder is on sys.path when run as a script)

#: the Numba backend's native-loop limit for each column (None: its default)
_PATHS = {"numba": None, "native": str(1 << 62), "per-eq": "0"}


def _workloads(random, size: int) -> dict:
    """label -> ``f(key)`` written with ``random`` (plax's or JAX's)."""
    alphas = np.array([0.3, 1.0, 4.0], np.float32)
    return {
        f"gamma(2.0, ({size:,},))": lambda k: random.gamma(k, np.float32(2.0), (size,)),
        f"gamma(0.5, ({size:,},))": lambda k: random.gamma(k, np.float32(0.5), (size,)),
        f"beta(0.7, 2.0, ({size:,},))":
            lambda k: random.beta(k, np.float32(0.7), np.float32(2.0), (size,)),
        f"dirichlet([.3, 1, 4], ({size // 3:,},))":
            lambda k: random.dirichlet(k, alphas, (size // 3,)),
        f"normal(({10 * size:,},))": lambda k: random.normal(k, (10 * size,)),
    }


def time_plax(label: str, size: int, repeat: int, path_limit: str | None,
              clock=time.perf_counter) -> float:
    import plax
    from plax import random
    plax.config.update("jax_threefry_partitionable", True)
    saved = os.environ.get("PLAX_NUMBA_NATIVE_LOOP_MAX")
    if path_limit is not None:  # (read when the program is compiled)
        os.environ["PLAX_NUMBA_NATIVE_LOOP_MAX"] = path_limit
    try:
        fn = plax.jit(_workloads(random, size)[label], backend="numba")
        return best_time(fn, random.PRNGKey(0), repeat, clock)
    finally:
        if saved is None:
            os.environ.pop("PLAX_NUMBA_NATIVE_LOOP_MAX", None)
        else:
            os.environ["PLAX_NUMBA_NATIVE_LOOP_MAX"] = saved


def time_jax(label: str, size: int, repeat: int, clock=time.perf_counter) -> float | None:
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_threefry_partitionable", True)
    fn = jax.jit(_workloads(jax.random, size)[label])
    return best_time(fn, jax.random.PRNGKey(0), repeat, clock)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--match", default="", help="rows whose label contains this")
    parser.add_argument("--paths", default=",".join(_PATHS),
                        help="the plax columns, comma-separated: " + ", ".join(_PATHS))
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args()
    paths = {p: _PATHS[p] for p in args.paths.split(",")}
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    from plax import random
    labels = [k for k in _workloads(random, args.size) if args.match in k]
    print(f"jit(random.*), float32, best of {args.repeat}, ms of {args.clock} time"
          " (numba: default path; native / per-eq: the rejection loop forced to each path)")
    print("| workload | " + " | ".join(paths) + " | JAX | " + next(iter(paths)) + " / JAX |")
    print("|---|" + "---:|" * (len(paths) + 2))
    for label in labels:
        cells = [time_plax(label, args.size, args.repeat, limit, clock)
                 for limit in paths.values()]
        jax_t = time_jax(label, args.size, args.repeat, clock)
        jax_cell = f"{jax_t * 1e3:.1f}" if jax_t else "n/a"
        ratio = f"{cells[0] / jax_t:.2f}" if jax_t else "n/a"
        print(f"| {label} | " + " | ".join(f"{t * 1e3:.1f}" for t in cells)
              + f" | {jax_cell} | {ratio} |", flush=True)
    try:
        import jax
        print(f"note: JAX {jax.__version__} on {jax.devices()[0]}")
    except ImportError:
        print("note: JAX not installed: plax columns only")


if __name__ == "__main__":
    main()
