"""The seed tutorials' timed kernels (selu, norm, vmap'd matvec, a linear-regression step),
jitted, on each plax backend beside JAX, measured in one run.

    python benchmarks/tutorial_kernels.py

Run it with plax installed (``pip install -e .``; ``pip install -e ".[bench]"`` adds JAX).
Reuses the asv suite's set-ups (asv_benchmarks/bench_tutorials.py); prints the device each
framework (``plax:<backend>``, ``jax``) ran on, then the best time per call over several
repeats and the ratio to JAX.
"""
from __future__ import annotations

import os

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # steady state: the Numba backend compiles before timing

import pathlib
import sys
import timeit

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from asv_benchmarks import bench_tutorials  # noqa: E402
from asv_benchmarks.common import frameworks  # noqa: E402

CASES = [("selu f32[1e6]", bench_tutorials.SeluJit, "time_selu"),
         ("norm f32[1e4,100]", bench_tutorials.NormJit, "time_norm"),
         ("vmap matvec", bench_tutorials.VmapMatVec, "time_vmap"),
         ("linreg grad step", bench_tutorials.LinearRegressionStep, "time_step")]


def best_seconds(fn, repeat: int = 5) -> float:
    number, elapsed = 1, 0.0
    while elapsed < 0.2:
        elapsed = timeit.timeit(fn, number=number)
        number *= 2
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def placement(name: str) -> str:
    """Where a framework's jitted work runs: the device of a jitted call's output."""
    from asv_benchmarks.common import load
    try:
        module, jnp, jit = load(name)
    except NotImplementedError as err:
        return f"{name}: not measured ({err})"
    device = jit(lambda x: x + 1)(jnp.ones(3)).device
    backend = name.split(":", 1)[1] if name.startswith("plax:") else module.default_backend()
    return f"{name}: backend {backend!r} on {device!r}"


def main() -> None:
    names = frameworks()
    for name in names:
        print(placement(name))
    print(f"{'kernel':<20}" + "".join(f"{n:>14}" for n in names) + "   (ms; ratio to jax)")
    for label, cls, method in CASES:
        times = {}
        for name in names:
            bench = cls()
            try:
                bench.setup(name)
            except NotImplementedError:
                continue
            times[name] = best_seconds(lambda: getattr(bench, method)(name))
        jax_t = times.get("jax")
        cells = []
        for name in names:
            t = times.get(name)
            if t is None:
                cells.append(f"{'-':>14}")
            elif jax_t and name != "jax":
                cells.append(f"{t * 1e3:>7.3f} ({t / jax_t:4.1f}x)")
            else:
                cells.append(f"{t * 1e3:>14.3f}")
        print(f"{label:<20}" + "".join(cells))


if __name__ == "__main__":
    main()
