"""Benchmark: jitted ``lax.ragged_dot`` (the mixture-of-experts grouped product
``lhs[m, k] x rhs[g, k, n]``), forward and ``grad``, plax on each installed CPU backend vs
JAX.

Run it with plax installed (``pip install -e .``; ``pip install -e ".[bench]"`` adds JAX):

    python benchmarks/ragged_dot.py [--m M] [--k K] [--n N] [--groups G] [--repeat R]

plax computes a ragged dot as a composition (each group's rows masked, one ``dot_general``
over the group axis: ``g`` times a plain product's work, plax.lax.ragged explains why); the
"dense" row times one plain ``[m, k] x [k, n]`` product on the same backend, the floor a
grouped-GEMM kernel would approach. Each function is compiled and run once to warm up, then
timed ``--repeat`` times (``block_until_ready`` included); the table shows the best times.
"""
from __future__ import annotations

import os

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # steady state: compile before timing

import argparse
import time

import numpy as np


def best_time(fn, args, repeat: int) -> float:
    import plax
    plax.block_until_ready(fn(*args))  # warm up (and compile)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn(*args)
        for leaf in (out if isinstance(out, tuple) else (out,)):
            leaf.block_until_ready()
        best = min(best, time.perf_counter() - start)
    return best


def operands(m: int, k: int, n: int, groups: int):
    rng = np.random.default_rng(0)
    sizes = np.full(groups, m // groups, np.int32)
    sizes[: m - sizes.sum()] += 1
    return (rng.standard_normal((m, k)).astype(np.float32),
            rng.standard_normal((groups, k, n)).astype(np.float32), sizes)


def timings(module, args, repeat: int, **jit_kwargs) -> tuple[float, float, float]:
    """(forward, grad w.r.t. lhs and rhs, dense product) best seconds."""
    lax = module.lax
    fwd = module.jit(lax.ragged_dot, **jit_kwargs)
    loss = lambda a, b, g: (lax.ragged_dot(a, b, g) ** 2).sum()
    grad = module.jit(module.grad(loss, argnums=(0, 1)), **jit_kwargs)
    dense = module.jit(lambda a, b: a @ b[0], **jit_kwargs)
    return (best_time(fwd, args, repeat), best_time(grad, args, repeat),
            best_time(dense, args[:2], repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--m", type=int, default=2048)
    parser.add_argument("--k", type=int, default=256)
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--groups", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    data = operands(args.m, args.k, args.n, args.groups)
    rows = {}
    import plax
    from plax import plugins
    for name in sorted(plugins.registry().backends):
        backend = plugins.registry().get_backend(name)
        if backend.platform != "cpu":
            continue
        rows[f"plax {name}"] = timings(plax, data, args.repeat, backend=name)
    try:
        import jax
        rows[f"JAX {jax.__version__}"] = timings(jax, data, args.repeat)
    except ImportError:
        pass
    print(f"ragged_dot lhs[{args.m},{args.k}] rhs[{args.groups},{args.k},{args.n}], "
          f"best of {args.repeat} (ms)")
    print(f"{'':<16} {'forward':>9} {'grad':>9} {'dense':>9}")
    for label, (f, g, d) in rows.items():
        print(f"{label:<16} {f * 1e3:9.2f} {g * 1e3:9.2f} {d * 1e3:9.2f}")


if __name__ == "__main__":
    main()
