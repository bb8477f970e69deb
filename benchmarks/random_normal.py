"""Benchmark: jitted ``random.normal(key, (10_000_000,))``, plax on each installed backend vs JAX.

Run it with plax installed (``pip install -e .``; ``pip install -e ".[bench]"`` adds JAX):

    python benchmarks/random_normal.py [--size N] [--repeat R]

Each function is compiled and run once to warm up, then timed ``--repeat``
times (``block_until_ready`` included); the table shows the best time and the device
each backend ran on. JAX (if installed) is measured in the same process, on its default
device, in the same threefry layout (``--original`` selects the older, non-partitionable
one).
"""
from __future__ import annotations

import os

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # steady state: the Numba backend compiles before timing

import argparse
import time


def best_time(fn, key, repeat: int, clock=time.perf_counter) -> float:
    """The best of ``repeat`` calls of ``fn(key)`` after a warm-up, by ``clock`` (wall time,
    or ``time.process_time``: the process's CPU time, all threads)."""
    fn(key).block_until_ready()  # warm up (and compile)
    best = float("inf")
    for _ in range(repeat):
        start = clock()
        fn(key).block_until_ready()
        best = min(best, clock() - start)
    return best


def time_plax(size: int, repeat: int, partitionable: bool) -> dict[str, tuple[float, str]]:
    """backend name -> (best seconds, the device it ran on)."""
    import plax
    from plax import plugins, random
    plax.config.update("jax_threefry_partitionable", partitionable)
    times = {}
    for name in sorted(plugins.registry().backends):
        fn = plax.jit(lambda k: random.normal(k, (size,)), backend=name)
        key = random.PRNGKey(0)
        times[name] = (best_time(fn, key, repeat), repr(fn(key).device))
    return times


def time_jax(size: int, repeat: int, partitionable: bool) -> tuple[float, str] | None:
    """(best seconds, the device it ran on), or None without JAX."""
    try:
        import jax
    except ImportError:
        return None
    jax.config.update("jax_threefry_partitionable", partitionable)
    fn = jax.jit(lambda k: jax.random.normal(k, (size,)))
    key = jax.random.PRNGKey(0)
    return best_time(fn, key, repeat), repr(fn(key).device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--original", action="store_true",
                        help="use jax_threefry_partitionable=False (older JAX's layout)")
    args = parser.parse_args()
    partitionable = not args.original
    jax_result = time_jax(args.size, args.repeat, partitionable)
    plax_times = time_plax(args.size, args.repeat, partitionable)
    layout = "partitionable" if partitionable else "original"
    print(f"jit(random.normal(key, ({args.size:,},))), best of {args.repeat}, {layout} layout")
    if jax_result:
        import jax
        print(f"JAX {jax.__version__}: backend {jax.default_backend()!r} on {jax_result[1]}")
    jax_time = jax_result[0] if jax_result else None
    print(f"{'backend':<10} {'device':<18} {'plax (ms)':>10} {'JAX (ms)':>10} {'plax/JAX':>9}")
    for name, (t, device) in plax_times.items():
        jax_ms = f"{jax_time * 1e3:10.1f}" if jax_time else f"{'n/a':>10}"
        ratio = f"{t / jax_time:9.2f}" if jax_time else f"{'n/a':>9}"
        print(f"{name:<10} {device:<18} {t * 1e3:10.1f} {jax_ms} {ratio}")


if __name__ == "__main__":
    main()
