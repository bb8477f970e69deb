"""Per-call cost of a cached jitted call with and without a mesh set, by process time.

The cases are tiny functions (a jitted ``x + y`` on f32[3], a pytree function of a dict
and a tuple), so the time is the call path: argument flattening, the mesh look-ups, the
cache lookup, the executable call and wrapping the outputs. Each runs with no mesh, under
``plax.set_mesh`` of a one-device mesh of an Auto axis (results placed ``P()``) and of an
Explicit axis (the arguments, uncommitted, placed on it at every call as JAX types them),
and under the latter inside plax's own eager work (``plax.sharding.internal_eager_work``:
a partitioned program's steps, an eager ``shard_map`` body), which takes the fast path as
with no mesh.

The "x + y numpy" case passes NumPy arrays (copied onto the mesh at every call). With
``--devices N`` the meshes have N CPU devices (``PLAX_NUM_CPU_DEVICES``); with ``--jax`` a
column gives JAX's time for the same call (``JAX_PLATFORMS=cpu``, ``jax_num_cpu_devices``,
``jax.set_mesh``), measured in a child process.

    python benchmarks/jit_mesh_calls.py [--number 5000] [--repeat 5] [--devices 1] [--jax]

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


def run(number: int, repeat: int, devices: int = 1,
        lib: str = "plax") -> list[tuple[str, str, float]]:
    """Times every case in every setting with ``lib`` (``"plax"`` or ``"jax"``, whose
    ``jax.set_mesh`` stands for ``plax.set_mesh``; the internal-work setting is plax's
    only); returns (case, setting, microseconds)."""
    import numpy as np
    if lib == "jax":
        import jax as api
        from jax import numpy as jnp
        from jax.sharding import AxisType
        api.config.update("jax_num_cpu_devices", devices)
        internal = None
    else:
        import plax as api
        from plax import numpy as jnp
        from plax.sharding import AxisType, internal_eager_work as internal

    x, y = jnp.arange(3.0), jnp.ones(3)
    add = api.jit(lambda a, b: a + b)
    tree = api.jit(lambda p, q: {"s": p["w"] * q[0] + p["b"], "t": q[1]})
    cases = {"x + y": (add, (x, y)),
             "x + y numpy": (add, (np.arange(3, dtype=np.float32), np.ones(3, np.float32))),
             "pytree": (tree, ({"w": x, "b": y}, (y, x)))}
    devs = api.devices()[:devices]
    explicit = api.make_mesh((devices,), ("x",), axis_types=(AxisType.Explicit,),
                             devices=devs)
    auto = api.make_mesh((devices,), ("x",), axis_types=(AxisType.Auto,), devices=devs)
    settings = {"no mesh": contextlib.nullcontext,
                "Auto mesh": lambda: api.set_mesh(auto),
                "Explicit mesh": lambda: api.set_mesh(explicit)}
    if internal is not None:
        settings["Explicit, internal"] = lambda: _both(api.set_mesh(explicit), internal())
    rows = []
    for case, (fn, args) in cases.items():
        for setting, context in settings.items():
            with context():
                rows.append((case, setting, _best_us(fn, args, number, repeat)))
    return rows


def _jax_rows(number: int, repeat: int, devices: int) -> dict:
    """JAX's rows, from a child process (its own devices): {(case, setting): us}."""
    import json
    import os
    import subprocess
    import sys
    code = (f"import json, sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
            f"import jit_mesh_calls as b; "
            f"print(json.dumps(b.run({number}, {repeat}, {devices}, 'jax')))")
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout
    return {(case, setting): us for case, setting, us in json.loads(out.splitlines()[-1])}


@contextlib.contextmanager
def _both(first, second):
    with first, second:
        yield


def main() -> None:
    import os
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=5000, help="calls per round")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (the best is kept)")
    parser.add_argument("--devices", type=int, default=1, help="CPU devices of the meshes")
    parser.add_argument("--jax", action="store_true", help="JAX's time beside plax's")
    opts = parser.parse_args()
    os.environ["PLAX_NUM_CPU_DEVICES"] = str(opts.devices)
    jax_us = _jax_rows(opts.number, opts.repeat, opts.devices) if opts.jax else {}
    print(f"{'case':12} {'setting':20} {'us/call':>8}" + (f" {'JAX':>8}" if opts.jax else ""))
    for case, setting, us in run(opts.number, opts.repeat, opts.devices):
        theirs = jax_us.get((case, setting))
        extra = "" if not opts.jax else (f" {theirs:8.2f}" if theirs is not None else
                                         f" {'-':>8}")
        print(f"{case:12} {setting:20} {us:8.2f}{extra}")


if __name__ == "__main__":
    main()
