"""Per-call cost of a cached jitted call with and without a mesh set, by process time.

The cases are tiny functions (a jitted ``x + y`` on f32[3], a pytree function of a dict
and a tuple), so the time is the call path: argument flattening, the mesh look-ups, the
cache lookup, the executable call and wrapping the outputs. Each runs with no mesh, under
``plax.set_mesh`` of a one-device mesh of an Auto axis (results placed ``P()``) and of an
Explicit axis (the arguments, uncommitted, placed on it at every call as JAX types them),
and under the latter inside plax's own eager work (``plax.sharding.internal_eager_work``:
a partitioned program's steps, an eager ``shard_map`` body), which takes the fast path as
with no mesh.

    python benchmarks/jit_mesh_calls.py [--number 5000] [--repeat 5]

Prints the best of ``--repeat`` rounds of ``--number`` calls, in microseconds of process
CPU time per call (``time.process_time``: steadier than the wall clock on a loaded
machine). Run it in two trees, alternating, to compare them.
"""
from __future__ import annotations

import argparse
import contextlib
import time
from typing import Callable


def _best_us(fn: Callable, args: tuple, number: int, repeat: int) -> float:
    """Best (minimum) microseconds of process time per call over the rounds."""
    for _ in range(50):  # compile, and fill every cache
        fn(*args)
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(number):
            fn(*args)
        best = min(best, time.process_time() - start)
    return best / number * 1e6


def run(number: int, repeat: int) -> list[tuple[str, str, float]]:
    """Times every case in every setting; returns (case, setting, microseconds)."""
    import plax
    from plax import numpy as jnp
    from plax.sharding import internal_eager_work

    x, y = jnp.arange(3.0), jnp.ones(3)
    add = plax.jit(lambda a, b: a + b)
    tree = plax.jit(lambda p, q: {"s": p["w"] * q[0] + p["b"], "t": q[1]})
    cases = {"x + y": (add, (x, y)),
             "pytree": (tree, ({"w": x, "b": y}, (y, x)))}
    explicit = plax.make_mesh((1,), ("x",))
    auto = plax.make_mesh((1,), ("x",), axis_types=(plax.sharding.AxisType.Auto,))
    settings = {"no mesh": contextlib.nullcontext,
                "Auto mesh": lambda: plax.set_mesh(auto),
                "Explicit mesh": lambda: plax.set_mesh(explicit),
                "Explicit, internal": lambda: _both(plax.set_mesh(explicit),
                                                    internal_eager_work())}
    rows = []
    for case, (fn, args) in cases.items():
        for setting, context in settings.items():
            with context():
                rows.append((case, setting, _best_us(fn, args, number, repeat)))
    return rows


@contextlib.contextmanager
def _both(first, second):
    with first, second:
        yield


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=5000, help="calls per round")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (the best is kept)")
    opts = parser.parse_args()
    print(f"{'case':8} {'setting':22} {'us/call':>8}")
    for case, setting, us in run(opts.number, opts.repeat):
        print(f"{case:8} {setting:22} {us:8.2f}")


if __name__ == "__main__":
    main()
