"""Control flow, linalg and convolution workloads, jitted: plax beside JAX, measured in one run.

    python benchmarks/control_flow.py [--backend NAME] [--number N] [--repeat R] [--only TEXT]

Run it with plax installed (``pip install -e .``; ``pip install -e ".[bench]"`` adds JAX).
The workloads, each written once against a jax-like module and fed the same float32 inputs:

- ``lax.scan`` of a 1000-step tanh RNN cell, hidden 64 wide: h = tanh(W h + U x + b);
- ``lax.fori_loop`` of 10,000 scalar steps: x = x * 0.999 + 0.001;
- batched ``jnp.linalg.cholesky`` of 1000 SPD 64x64 matrices;
- a 3x3 ``lax.conv_general_dilated`` (NHWC/HWIO, SAME) on 32 images of 32x32x64, 64 outputs;
- ``lax.fori_loop`` filling a 500x64 array row by row, ``x.at[i].set(v * i + x[i - 1])``
  (a carry updated in place: no copy of the array per step).

``--backend`` takes a plax backend name such as ``numpy`` (default: the default device's
backend). Prints which backend and device each library ran on (as jit_overhead.py does),
then, after compiling and a warm-up call, the median over ``--repeat`` timing runs of the
milliseconds per call (each run makes ``--number`` calls; by default enough for ~0.2 s),
and the ratio plax / JAX (below 1: plax is faster). JAX is optional: without it only plax
is timed, and a note says so.
"""
from __future__ import annotations

import os

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # steady state: the Numba backend compiles before timing

import argparse
import pathlib
import statistics
import sys
import time
from typing import Callable

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from jit_overhead import placement  # noqa: E402  (the shared first lines: backend and device)

RNN_STEPS, RNN_HIDDEN, RNN_INPUT = 1000, 64, 16
FORI_STEPS = 10_000
CHOL_BATCH, CHOL_N = 1000, 64
CONV_BATCH, CONV_HW, CONV_CIN, CONV_COUT = 32, 32, 64, 64
FILL_ROWS, FILL_WIDTH = 500, 64

WORKLOADS = ["scan tanh RNN 1000x64", "fori_loop 10k scalar", "cholesky 1000x64x64",
             "conv 3x3 32x32x64 b32", "fori x.at[i].set 500x64"]


def _inputs() -> dict[str, tuple[np.ndarray, ...]]:
    """The same NumPy float32 inputs for both libraries."""
    rng = np.random.default_rng(0)
    f32 = np.float32
    w = (rng.standard_normal((RNN_HIDDEN, RNN_HIDDEN)) / np.sqrt(RNN_HIDDEN)).astype(f32)
    u = (rng.standard_normal((RNN_HIDDEN, RNN_INPUT)) / np.sqrt(RNN_INPUT)).astype(f32)
    b = (rng.standard_normal(RNN_HIDDEN) * 0.1).astype(f32)
    xs = rng.standard_normal((RNN_STEPS, RNN_INPUT)).astype(f32)
    h0 = np.zeros(RNN_HIDDEN, f32)
    m = rng.standard_normal((CHOL_BATCH, CHOL_N, CHOL_N)).astype(f32)
    spd = (m @ m.transpose(0, 2, 1) / CHOL_N + np.eye(CHOL_N, dtype=f32)).astype(f32)
    images = rng.standard_normal((CONV_BATCH, CONV_HW, CONV_HW, CONV_CIN)).astype(f32)
    kernel = (rng.standard_normal((3, 3, CONV_CIN, CONV_COUT)) / np.sqrt(9 * CONV_CIN)).astype(f32)
    return {WORKLOADS[0]: (w, u, b, h0, xs),
            WORKLOADS[1]: (np.float32(0.5),),
            WORKLOADS[2]: (spd,),
            WORKLOADS[3]: (images, kernel),
            WORKLOADS[4]: (np.zeros((FILL_ROWS, FILL_WIDTH), f32),
                           rng.standard_normal(FILL_WIDTH).astype(f32))}


def _cases(jit: Callable, jnp, lax) -> dict[str, Callable]:
    """name -> jitted function, written once against a jax-like library."""
    def rnn(w, u, b, h0, xs):
        def cell(h, x):
            h = jnp.tanh(w @ h + u @ x + b)
            return h, h
        return lax.scan(cell, h0, xs)

    def fori(x):
        return lax.fori_loop(0, FORI_STEPS, lambda i, x: x * 0.999 + 0.001, x)

    def conv(images, kernel):
        return lax.conv_general_dilated(images, kernel, (1, 1), "SAME",
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def fill(x, v):
        return lax.fori_loop(1, FILL_ROWS, lambda i, x: x.at[i].set(v * i + x[i - 1]), x)

    return {WORKLOADS[0]: jit(rnn), WORKLOADS[1]: jit(fori),
            WORKLOADS[2]: jit(jnp.linalg.cholesky), WORKLOADS[3]: jit(conv),
            WORKLOADS[4]: jit(fill)}


def _block(out) -> None:
    for leaf in (out if isinstance(out, tuple) else (out,)):
        leaf.block_until_ready()


def median_seconds(fn: Callable, args: tuple, number: int | None, repeat: int) -> float:
    """Median seconds per call over ``repeat`` runs of ``number`` calls, after warm-up."""
    _block(fn(*args))  # compile
    _block(fn(*args))  # warm every cache
    if number is None:  # enough calls for a run of about 0.2 s
        t0 = time.perf_counter()
        _block(fn(*args))
        number = max(1, int(0.2 / max(time.perf_counter() - t0, 1e-9)))
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            out = fn(*args)
        _block(out)
        runs.append((time.perf_counter() - t0) / number)
    return statistics.median(runs)


def run(backend: str | None, number: int | None, repeat: int, only: str = ""
        ) -> tuple[list[tuple[str, float, float | None]], str | None]:
    """Times every workload (those whose name holds ``only``); returns rows (name, plax s,
    JAX s or None) and a note or None."""
    import plax
    from plax import lax as plax_lax
    from plax import numpy as pnp
    plax_jit = plax.jit if backend is None else (lambda f: plax.jit(f, backend=backend))
    inputs = _inputs()
    plax_cases = _cases(plax_jit, pnp, plax_lax)
    try:
        import jax
        import jax.numpy as jjnp
        from jax import lax as jax_lax
        jax_cases, note = _cases(jax.jit, jjnp, jax_lax), None
    except ImportError as err:
        jax_cases, note = None, f"JAX not measured: {err}"
    rows = []
    for name in (w for w in WORKLOADS if only in w):
        t_plax = median_seconds(plax_cases[name], tuple(pnp.asarray(a) for a in inputs[name]),
                                number, repeat)
        t_jax = None
        if jax_cases is not None:
            t_jax = median_seconds(jax_cases[name], tuple(jjnp.asarray(a) for a in inputs[name]),
                                   number, repeat)
        rows.append((name, t_plax, t_jax))
    return rows, note


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default=None,
                        help="plax backend name for jit, e.g. numpy (default: the default device's)")
    parser.add_argument("--number", type=int, default=None,
                        help="calls per timing run (default: enough for about 0.2 s)")
    parser.add_argument("--repeat", type=int, default=5, help="timing runs (the median is reported)")
    parser.add_argument("--only", default="",
                        help="time only the workloads whose name holds this text")
    args = parser.parse_args()
    for line in placement(args.backend):
        print(line)
    rows, note = run(args.backend, args.number, args.repeat, args.only)
    if note:
        print(note)
    print(f"{'workload':24s} {'plax ms':>10s} {'JAX ms':>10s} {'plax/JAX':>9s}")
    for name, tp, tj in rows:
        jax_col = f"{tj * 1e3:10.3f}" if tj is not None else f"{'-':>10s}"
        ratio = f"{tp / tj:9.2f}" if tj else f"{'-':>9s}"
        print(f"{name:24s} {tp * 1e3:10.3f} {jax_col} {ratio}")


if __name__ == "__main__":
    main()
