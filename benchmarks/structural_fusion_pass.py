"""CPU time of the structural fusion pass (``plax.lowering.find_clusters`` with the CuPy
emitter's options) on long chains: it must stay near-linear in the number of equations.

    python benchmarks/structural_fusion_pass.py [N ...]    (default: 1000 4000)

Prints one row per chain and length: the ms of process CPU time of one ``find_clusters`` (best
of 3) and the units it made. The chains: elementwise steps between reshapes (views only),
between transposes, between revs, between pads (each grows the array), a chain whose
every step's value is also read by an output (nothing may be absorbed) and one of gathers.
"""
from __future__ import annotations

import sys
import time

import numpy as np

import plax
from plax import lax
from plax import numpy as jnp
from plax.lowering import FusionOptions, find_clusters, spliced_calls

#: the CuPy emitter's fusion options (without importing the backend)
OPTIONS = FusionOptions(multiple_results=False, index=True, scalars=True, structural=True,
                        horizontal=0, recompute_max_elements=1 << 16)


def _chain(step, n: int, x):
    def f(x):
        for _ in range(n // 2):
            x = step(jnp.sin(x))
        return x
    return spliced_calls(plax.make_jaxpr(f)(x).jaxpr)   # (jnp.flip is a jitted call)


def _shared(n: int, x):
    def f(x):
        outs = []
        for _ in range(n // 2):
            x = jnp.flip(jnp.sin(x))
            outs.append(x)
        return outs
    return spliced_calls(plax.make_jaxpr(f)(x).jaxpr)   # (jnp.flip is a jitted call)


_PERM = np.arange(24, dtype=np.int32)[::-1].copy()   # (a gather of a constant permutation)

CHAINS = {
    "reshape": lambda n: _chain(lambda v: jnp.reshape(v, v.shape[::-1]), n, np.ones((4, 6), np.float32)),
    "transpose": lambda n: _chain(lambda v: v.T, n, np.ones((4, 6), np.float32)),
    "rev": lambda n: _chain(lambda v: jnp.flip(v, 0), n, np.ones((4, 6), np.float32)),
    "pad/slice": lambda n: _chain(lambda v: lax.pad(v, 0.0, ((1, -1, 0),)), n, np.ones(24, np.float32)),
    "rev, all read": lambda n: _shared(n, np.ones(24, np.float32)),
    "gather": lambda n: _chain(lambda v: jnp.take(v, _PERM, axis=0, mode="clip"), n,
                               np.ones(24, np.float32)),
}


def main(lengths: list[int]) -> None:
    print(f"{'chain':16s} {'eqns':>6s} {'ms (cpu)':>9s} {'units':>6s}")
    for name, make in CHAINS.items():
        for n in lengths:
            jaxpr = make(n)
            best = float("inf")
            for _ in range(3):
                t0 = time.process_time()
                units = list(find_clusters(jaxpr, OPTIONS))
                best = min(best, time.process_time() - t0)
            print(f"{name:16s} {len(jaxpr.eqns):6d} {best * 1e3:9.1f} {len(units):6d}")


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1000, 4000])
