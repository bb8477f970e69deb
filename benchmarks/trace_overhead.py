"""Tracing cost: plax beside JAX, same process, same machine.

What a change to the core's tracing machinery (staging, vmap's trace, reverse mode) must keep
fast, and what the first call of a jitted function pays before any compiling:

    python benchmarks/trace_overhead.py [--layers 20] [--number 20] [--repeat 7]

Cases (``f`` is ``layers`` steps of ``tanh(x * y + 1) - y`` and a sum):
``make_jaxpr(grad(f))`` and ``make_jaxpr(vmap(f))`` trace afresh on each call (a new
function object each time, so no cache is hit); ``vmap(f)`` and ``vmap(f, axis_name=...)``
run eagerly on an 8x4 batch (a trace of every operation through the batching interpreter).
Prints the best of ``repeat`` timings of ``number`` calls, in microseconds per call, and the
ratio plax / JAX (JAX is optional: without it only plax is timed).
"""
from __future__ import annotations

import argparse
import timeit

import numpy as np


def _cases(lib, layers: int) -> dict:
    jnp = lib.numpy

    def f(x, y):
        for _ in range(layers):
            x = jnp.tanh(x * y + 1.0) - y
        return x.sum()

    x = np.ones((8, 4), np.float32)
    y = np.ones(4, np.float32)
    vf = lib.vmap(f, in_axes=(0, None))
    named = lib.vmap(f, in_axes=(0, None), axis_name="i")
    return {
        "make_jaxpr(grad(f))": lambda: lib.make_jaxpr(lib.grad(lambda a, b: f(a, b)))(x[0], y),
        "make_jaxpr(vmap(f))": lambda: lib.make_jaxpr(lib.vmap(lambda a, b: f(a, b),
                                                               in_axes=(0, None)))(x, y),
        "eager vmap(f)": lambda: vf(x, y),
        "eager vmap(f, axis_name)": lambda: named(x, y),
    }


def _best(fn, number: int, repeat: int) -> float:
    fn()  # warm-up: imports, first dispatches
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=20)
    ap.add_argument("--number", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    import plax
    default = plax.devices()[0]
    print(f"plax: backend {default.backend.name!r} on {default!r} (platform {default.platform})")
    try:
        import jax
        print(f"jax {jax.__version__}: backend {jax.default_backend()!r}")
    except ImportError:
        jax = None
        print("(JAX not installed: plax only)")
    mine = _cases(plax, args.layers)
    theirs = _cases(jax, args.layers) if jax is not None else {}
    print(f"{'case':28s} {'plax µs':>10s} {'JAX µs':>10s} {'plax/JAX':>9s}")
    for name, fn in mine.items():
        t = _best(fn, args.number, args.repeat)
        if name in theirs:
            tj = _best(theirs[name], args.number, args.repeat)
            print(f"{name:28s} {t * 1e6:10.1f} {tj * 1e6:10.1f} {t / tj:9.2f}")
        else:
            print(f"{name:28s} {t * 1e6:10.1f} {'-':>10s} {'-':>9s}")


if __name__ == "__main__":
    main()
