"""plax on Numba beside JAX on the CPU: row reductions, softmax, relu and a 2x2 max-pool of one
float32 (1000, 1000) array (``--size``: a multiple of 8), each jitted, in one table measured in
one run.

    python benchmarks/cpu_row_reductions.py [--repeat R] [--size N]

Each cell is the fastest, over ``--repeat`` batches of calls lasting about 0.1 s, of the wall
time per call after a warm-up call (plax compiles its kernels first: ``PLAX_NUMBA_SYNC=1``);
the two columns' batches alternate, so both see the same moments of a shared host. Then
plax / JAX (below 1: plax is faster), and the same three for process CPU time (every
thread's: what a call costs however loaded the host is). JAX's columns are skipped where
JAX is not installed. Run it with ``PYTHONPATH`` pointing at another checkout to compare
revisions.
"""
from __future__ import annotations

import argparse
import os

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")

import numpy as np  # noqa: E402

from compare import fastest_per_call  # noqa: E402 (benchmarks/compare.py)


def programs(np_, lax, nn) -> dict:
    """The workloads, written once for either library's numpy, lax and nn modules."""
    return {
        "max(x)": lambda x: np_.max(x),
        "max(x, -1)": lambda x: np_.max(x, -1),
        "softmax(x, -1)": lambda x: nn.softmax(x, -1),
        # rows along two leading axes, 8 along the outermost (attention's scores' shape)
        "softmax 8 blocks": lambda x: nn.softmax(x.reshape(8, -1, x.shape[1]), -1),
        "maximum(x, 0.0)": lambda x: np_.maximum(x, 0.0),
        "x * 2.0": lambda x: x * 2.0,
        "x / sum(x, -1)": lambda x: x / np_.sum(x, -1, keepdims=True),
        "2x2 max-pool": lambda x: np_.max(x.reshape(x.shape[0] // 2, 2, x.shape[1] // 2, 2),
                                          (1, 3)),
        "cummax(x, 1)": lambda x: lax.cummax(x, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--size", type=int, default=1000)
    args = parser.parse_args()
    import plax
    from plax import numpy as pnp
    host = np.random.default_rng(0).standard_normal((args.size, args.size)).astype(np.float32)
    columns = {"plax-numba": (programs(pnp, plax.lax, plax.nn), plax.jit, pnp.asarray(host),
                              {"backend": "numba"})}
    try:
        import jax
        from jax import numpy as jnp
        columns["JAX"] = (programs(jnp, jax.lax, jax.nn), jax.jit, jnp.asarray(host), {})
    except ImportError:
        print("(JAX not installed: its column is skipped)")
    names = list(columns)
    ratio_head = "   plax/JAX" if len(names) == 2 else ""
    print(f"{'program':18s}" + "".join(f"{n + ' us':>14s}" for n in names) + ratio_head
          + "".join(f"{n + ' cpu us':>18s}" for n in names) + ratio_head)
    for row in programs(pnp, plax.lax, plax.nn):
        calls = {}
        for name, (progs, jit, x, options) in columns.items():
            fn = jit(progs[row], **options)
            calls[name] = lambda fn=fn, x=x: fn(x).block_until_ready()
        best = fastest_per_call(calls, args.repeat, 0.1)
        line = f"{row:18s}"
        for which, width in ((0, 14), (1, 18)):  # wall, then CPU
            line += "".join(f"{best[n][which] * 1e6:{width}.1f}" for n in names)
            if len(names) == 2:
                line += f"{best[names[0]][which] / best[names[1]][which]:11.2f}"
        print(line)


if __name__ == "__main__":
    main()
