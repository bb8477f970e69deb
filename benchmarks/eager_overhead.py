"""Per-call eager cost of small operations in plax and in real JAX, measured in one run.

Each operation works on tiny operands (3 elements, or 3x3 for ``dot``), so the time
is the framework's dispatch overhead, not arithmetic. Both libraries run the same
lambdas in the same process; the ratio column is plax / JAX (below 1: plax faster).

Run it with plax installed (``pip install -e .``; ``pip install -e ".[bench]"`` adds JAX)::

    python benchmarks/eager_overhead.py [--number N] [--repeat R] [--timer {wall,cpu}]

It first prints the backend and device each library ran on: plax's default device and
the backend that drives it (``PLAX_BACKEND=name`` or ``PLAX_PLATFORMS=cpu`` choose
another), JAX's default device.

``--timer cpu`` counts this process's CPU time instead of wall time: on a shared machine
it is much less disturbed by other processes (the ratio column is what to compare).

JAX is optional: without it only plax's column is printed.
"""
from __future__ import annotations

import argparse
import time
import timeit
from typing import Callable


def _cases(np_mod) -> dict[str, Callable[[], object]]:
    """The benchmarked operations, written once against a jax.numpy-like module."""
    x = np_mod.array([1.0, 2.0, 3.0], dtype=np_mod.float32)
    y = np_mod.array([4.0, 5.0, 6.0], dtype=np_mod.float32)
    a = np_mod.ones((3, 3), dtype=np_mod.float32)
    b = np_mod.ones((3, 3), dtype=np_mod.float32)
    return {
        "x + y": lambda: x + y,
        "jnp.sin(x)": lambda: np_mod.sin(x),
        "x * 2.0": lambda: x * 2.0,
        "jnp.dot(a, b) 3x3": lambda: np_mod.dot(a, b),
        "x[0]": lambda: x[0],
        "x.at[0].set(1.0)": lambda: x.at[0].set(1.0),
    }


_TIMERS = {"wall": time.perf_counter, "cpu": time.process_time}


def placement(name: str, np_mod) -> str:
    """Which backend and device the cases of a library run on (read off an operand)."""
    device = _cases_device(np_mod)
    if name == "plax":
        backend = device.backend.name  # the backend that runs eager work on that device
    else:
        import jax
        backend = jax.default_backend()
    return f"{name}: backend {backend!r} on {device!r} (platform {device.platform})"


def _cases_device(np_mod):
    x = np_mod.array([1.0, 2.0, 3.0], dtype=np_mod.float32)  # as the cases make their operands
    return x.device


def time_per_call(fn: Callable[[], object], number: int, repeat: int,
                  timer: Callable[[], float] = time.perf_counter) -> float:
    """Best-of-``repeat`` seconds per call of ``fn`` (each repeat runs it ``number`` times)."""
    for _ in range(20):  # warm caches (abstract eval, promotion, compiled kernels)
        fn()
    return min(timeit.repeat(fn, number=number, repeat=repeat, timer=timer)) / number


def measure(np_mod, number: int, repeat: int, timer: str = "wall") -> dict[str, float]:
    """Microseconds per call of each case for one library."""
    return {name: time_per_call(fn, number, repeat, _TIMERS[timer]) * 1e6
            for name, fn in _cases(np_mod).items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=2000, help="calls per repeat")
    parser.add_argument("--repeat", type=int, default=7, help="repeats (the best is kept)")
    parser.add_argument("--timer", choices=sorted(_TIMERS), default="wall",
                        help="wall-clock time, or this process's CPU time")
    args = parser.parse_args(argv)

    import plax.numpy as pnp
    results = {"plax": measure(pnp, args.number, args.repeat, args.timer)}
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        jax = None
    if jax is not None:
        results["jax"] = measure(jnp, args.number, args.repeat, args.timer)

    print(placement("plax", pnp))
    if jax is not None:
        print(placement(f"jax {jax.__version__}", jnp))
    header = f"{'operation':<20} {'plax (us)':>10}"
    if jax is not None:
        header += f" {'jax ' + jax.__version__ + ' (us)':>17} {'plax/jax':>9}"
    print(header)
    print("-" * len(header))
    for name, t in results["plax"].items():
        row = f"{name:<20} {t:>10.2f}"
        if jax is not None:
            tj = results["jax"][name]
            row += f" {tj:>17.2f} {t / tj:>9.2f}"
        print(row)


if __name__ == "__main__":
    main()
