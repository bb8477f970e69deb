"""Per-call cost of a cached jitted call: plax beside JAX, same process, same machine.

Each case is a tiny function whose work is negligible, so the time is the dispatch
path: argument flattening, cache lookup, the executable call and wrapping the
outputs. Run it with plax installed (``pip install -e .``; ``pip install -e ".[bench]"``
adds JAX):

    python benchmarks/jit_overhead.py [--backend NAME] [--timer {wall,cpu}]

``--backend`` takes a backend name such as ``numpy`` (default: the default device's
backend). ``--timer cpu`` counts this process's CPU time instead of wall time (steadier on
a loaded machine). The "NumPy" rows pass NumPy arrays (no mesh set): each call copies
them onto the device, with float64 leaves canonicalised to float32 (x64 off). Set
``JAX_PLATFORMS=cpu`` to time JAX on the CPU. Prints which backend and device each library ran on, then the best of several
timeit repeats in microseconds per call, and the ratio plax / JAX (below 1: plax is
faster). JAX is optional: without it only plax is timed.
"""
from __future__ import annotations

import os

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # steady state: the Numba backend compiles before timing

import argparse
import time
import timeit
from typing import Callable

_TIMERS = {"wall": time.perf_counter, "cpu": time.process_time}


def _cases(jax, jnp) -> dict[str, tuple[Callable, tuple, dict]]:
    """name -> (jitted function, args, kwargs), built with the given library."""
    import functools

    import numpy as np
    x = jnp.arange(3.0)
    y = jnp.ones(3)
    add = jax.jit(lambda a, b: a + b)
    tree = jax.jit(lambda p, q: {"s": p["w"] * q[0] + p["b"], "t": q[1]})
    params = {"w": x, "b": y}

    @functools.partial(jax.jit, static_argnums=1)
    def scaled(a, n):
        return a * n

    return {
        "add(x, y) on f32[3]": (add, (x, y), {}),
        "pytree: dict + tuple in, dict out": (tree, (params, (y, x)), {}),
        "static arg: f(x, n=2), n static": (scaled, (x, 2), {}),
        "add(x, y), NumPy f32[3]": (add, (np.arange(3, dtype=np.float32),
                                          np.ones(3, np.float32)), {}),
        "add(x, y), NumPy f32[1000]": (add, (np.arange(1000, dtype=np.float32),
                                             np.ones(1000, np.float32)), {}),
        "pytree of NumPy f64[3] leaves": (tree, ({"w": np.arange(3.0), "b": np.ones(3)},
                                                 (np.ones(3), np.arange(3.0))), {}),
    }


def _time_call(fn: Callable, args: tuple, kwargs: dict, number: int, repeat: int,
               timer: Callable[[], float] = time.perf_counter) -> float:
    """Best (minimum) seconds per call over the repeats: the least disturbed by other load."""
    for _ in range(100):  # compile, and warm every cache
        fn(*args, **kwargs)
    runs = timeit.repeat(lambda: fn(*args, **kwargs), number=number, repeat=repeat,
                         timer=timer)
    return min(runs) / number


def placement(backend: str | None) -> list[str]:
    """Which backend and device the plax cases (and JAX's) run on: read off a jitted call."""
    import plax
    from plax import numpy as pnp
    from plax import plugins
    f = plax.jit(lambda a: a + 1) if backend is None else plax.jit(lambda a: a + 1, backend=backend)
    device = f(pnp.arange(3.0)).device
    name = device.backend.name if backend is None else plugins.registry().get_backend(backend).name
    lines = [f"plax: backend {name!r} on {device!r} (platform {device.platform})"]
    try:
        import jax
        import jax.numpy as jjnp
    except ImportError:
        return lines
    jdevice = jax.jit(lambda a: a + 1)(jjnp.arange(3.0)).device
    lines.append(f"jax {jax.__version__}: backend {jax.default_backend()!r} on {jdevice!r}")
    return lines


def run(backend: str | None, number: int, repeat: int,
        timer: str = "wall") -> list[tuple[str, float, float | None]]:
    """Times every case; returns (name, plax seconds, JAX seconds or None)."""
    import plax
    from plax import numpy as pnp
    plax_jit = plax.jit if backend is None else (
        lambda f=None, **kw: plax.jit(f, backend=backend, **kw) if f is not None
        else (lambda g: plax.jit(g, backend=backend, **kw)))

    class _PlaxShim:
        jit = staticmethod(plax_jit)

    plax_cases = _cases(_PlaxShim, pnp)
    try:
        import jax
        import jax.numpy as jjnp
        jax_cases = _cases(jax, jjnp)
    except ImportError:
        jax_cases = None
    results = []
    for name, (fn, args, kwargs) in plax_cases.items():
        t_plax = _time_call(fn, args, kwargs, number, repeat, _TIMERS[timer])
        t_jax = None
        if jax_cases is not None:
            jfn, jargs, jkwargs = jax_cases[name]
            t_jax = _time_call(jfn, jargs, jkwargs, number, repeat, _TIMERS[timer])
        results.append((name, t_plax, t_jax))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None,
                        help="plax backend name for jit, e.g. numpy (default: the default device's)")
    parser.add_argument("--number", type=int, default=20000, help="calls per timing run")
    parser.add_argument("--repeat", type=int, default=7, help="timing runs (best reported)")
    parser.add_argument("--timer", choices=sorted(_TIMERS), default="wall",
                        help="wall: elapsed time; cpu: this process's CPU time")
    args = parser.parse_args()
    for line in placement(args.backend):
        print(line)
    rows = run(args.backend, args.number, args.repeat, args.timer)
    print(f"{'case':38s} {'plax µs':>9s} {'JAX µs':>9s} {'plax/JAX':>9s}")
    for name, tp, tj in rows:
        jax_col = f"{tj * 1e6:9.2f}" if tj is not None else f"{'-':>9s}"
        ratio = f"{tp / tj:9.2f}" if tj else f"{'-':>9s}"
        print(f"{name:38s} {tp * 1e6:9.2f} {jax_col} {ratio}")


if __name__ == "__main__":
    main()
