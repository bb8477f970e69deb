"""What the row-local kernels (``plax_cupy.codegen_rows_local``) cost, read off their code
without a GPU: per program and row length, the geometry (lanes a row, rows a block, threads,
elements a thread, row values held in registers), and in NVRTC's PTX the global loads,
``ex2`` (``expf``), barriers and shuffles, and ``ptxas -arch=sm_90``'s registers and spill
bytes a thread (softmax, layer norm, their gradients, and the gradients of cross-entropies with
2 and 8 labels a row and of a per-example one under ``vmap``).

    python benchmarks/gpu_rows_local.py

PTX counts are static (instructions in the code, after unrolling): a held row makes each
phase's element loop unrolled, so its loads appear ``E`` times once, where a re-read row's
loop appears once per phase. Needs NVRTC (and ``ptxas`` on the PATH for the register
columns); prints a table, asserts nothing. docs/gpu.md, "Row-local clusters".
"""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np


def programs(plax, jnp) -> dict:
    """``{name: fn}``: softmax, log-softmax, layer norm and two gradients; the gradients of a
    cross-entropy with 2 and 8 labels a row (``take_along_axis``: 2 and 8 picks, a chain of
    scatter-adds) and of a per-example cross-entropy's mean under ``vmap`` (``logp[y]``)."""
    def layer_norm(x):
        mean = jnp.mean(x, -1, keepdims=True)
        return (x - mean) / jnp.sqrt(jnp.mean((x - mean) ** 2, -1, keepdims=True) + 1e-5)

    def labels(x, k):   # (a constant: k labels a row, each row's own)
        n, c = x.shape
        return (np.arange(n * k, dtype=np.int32).reshape(n, k) * 7) % c

    def xent_labels(k):
        def grad(x):
            return plax.grad(lambda x: -jnp.mean(jnp.take_along_axis(
                plax.nn.log_softmax(x, axis=-1), labels(x, k), -1)))(x)
        return grad

    def per_example(x):
        y = labels(x, 1)[:, 0]
        return plax.grad(lambda x: jnp.mean(plax.vmap(
            lambda r, y: -plax.nn.log_softmax(r)[y])(x, y)))(x)

    return {"softmax": lambda x: plax.nn.softmax(x, axis=-1),
            "log_softmax": lambda x: plax.nn.log_softmax(x, axis=-1),
            "layer_norm": layer_norm,
            "grad softmax": plax.grad(lambda x: jnp.sum(plax.nn.softmax(x, axis=-1) ** 2)),
            "grad layer_norm": plax.grad(lambda x: jnp.sum(layer_norm(x) ** 2)),
            "grad xent 2 lbl": xent_labels(2), "grad xent 8 lbl": xent_labels(8),
            "grad vmap xent": per_example}


def ptxas(ptx: str) -> tuple:
    """``(registers, spill bytes)`` of the one kernel in ``ptx`` for sm_90, or ``("-", "-")``
    without ``ptxas``."""
    if shutil.which("ptxas") is None:
        return "-", "-"
    with tempfile.TemporaryDirectory() as tmp:
        path = f"{tmp}/k.ptx"
        with open(path, "w") as f:
            f.write(ptx)
        log = subprocess.run(["ptxas", "-arch=sm_90", "-v", path, "-o", f"{tmp}/k.cubin"],
                             capture_output=True, text=True).stderr
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    regs = re.search(r"Used (\d+) registers", log)
    return (int(regs.group(1)) if regs else "?",
            int(spill.group(1)) + int(spill.group(2)) if spill else "?")


def main() -> int:
    import plax
    from plax import numpy as jnp
    from plax.lowering.calls import spliced_calls
    from plax.lowering.program import fusion_units
    from plax_cupy import nvrtc
    from plax_cupy.codegen_rows_local import plan_rows
    from plax_cupy.emitter import CupyEmitter
    fns = programs(plax, jnp)
    print(f"{'program':16} {'dtype':8} {'row':>5} {'lanes':>5} {'rows/blk':>8} {'thr':>4} "
          f"{'E':>3} {'held':>4} {'ld.global':>9} {'ex2':>4} {'bar':>4} {'shfl':>4} "
          f"{'regs':>5} {'spill':>5}")
    for name in fns:
        for dtype, row in [(np.float32, 10), (np.float32, 32), (np.float32, 33),
                           (np.float32, 1000), (np.float32, 2048), (np.float64, 2048),
                           (np.float32, 2049)]:
            x = np.ones((64, row), dtype)
            with plax.config.override("jax_enable_x64", True):
                units = fusion_units(spliced_calls(plax.make_jaxpr(fns[name])(x).jaxpr),
                                     CupyEmitter)
            (cluster,) = units
            plan = plan_rows(cluster)
            ptx = nvrtc.compile_ptx(plan.source, "rows_local.cu")
            regs, spill = ptxas(ptx)
            geometry = [getattr(plan, a, "-") for a in   # (absent before the geometries)
                        ("lanes", "rows_per_block", "threads", "per_thread", "held")]
            print(f"{name:16} {np.dtype(dtype).name:8} {row:5} {geometry[0]:>5} "
                  f"{geometry[1]:>8} {geometry[2]:>4} {geometry[3]:>3} {geometry[4]:>4} "
                  f"{ptx.count('ld.global'):9} {ptx.count('ex2.approx'):4} "
                  f"{ptx.count('bar.sync'):4} {ptx.count('shfl.sync'):4} {regs:>5} {spill:>5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
