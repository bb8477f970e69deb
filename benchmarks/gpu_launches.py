"""Every kernel launch of one MLP training step (784-2048-2048-10, SGD), with its launch
configuration, on the simulated GPU: how much parallelism each kernel has.

    PYTHONPATH=$PYTHONPATH:tests/cupy python benchmarks/gpu_launches.py [--sms 132] [--tiny]

For each plax-compiled kernel of one call (CUDA graphs off, so each launch is seen) it prints
the kernel, the grid and block, the threads in all, and the longest serial loop of a thread:
for a reduction (``plax_reduce``) the elements a thread accumulates (``ceil(n_red / (bpo *
block / opb))`` where a block reduces ``opb`` outputs and ``bpo`` blocks share them), with the
outputs and their length; for an elementwise kernel the elements of its grid-stride loop. A
kernel with too little parallelism (fewer threads than ``sms * 2048``, the resident threads of
the card, each looping over more than 64 elements) is marked. The products (cuBLAS) are
counted, not listed. ``--sms`` sets the multiprocessor count the launch configuration assumes (an H200 has
132: the simulated GPU is installed reporting it). ``--tiny`` takes a batch of 64 (gpu.py's
``--tiny`` sizes, 784-512-512-10; a smoke test): the same kernels, launched over fewer
elements.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import simulated_gpu  # (this folder is on sys.path when run as a script)

HERE = os.path.dirname(os.path.abspath(__file__))


def _recorded_launches(fake_cupy) -> list:
    """Wraps the simulated kernels' launch so that each records its scalar arguments too."""
    calls: list = []
    original = fake_cupy._Function.__call__

    def call(self, grid, block, args, *rest, **kw):
        scalars = [a.item() if isinstance(a, np.generic) else a for a in args
                   if isinstance(a, (int, np.integer))]
        calls.append((self.name, tuple(grid), tuple(block), scalars))
        return original(self, grid, block, args, *rest, **kw)

    fake_cupy._Function.__call__ = call
    return calls


def _serial(name: str, grid: int, block: int, scalars: list, opb: int) -> tuple[str, int]:
    """The longest loop of one thread (text, elements), from the kernel's scalar arguments and
    its outputs per block."""
    if name == "plax_reduce":   # (..., n_out, n_red, bpo, tag): done is a pointer
        n_out, n_red, bpo = scalars[-4], scalars[-3], scalars[-2]
        per_thread = -(-n_red // (bpo * (block // opb)))
        groups = -(-n_out // opb)
        rounds = -(-groups // max(grid // bpo, 1))
        return (f"{per_thread} elements ({n_out} outputs of {n_red}: {opb} a block, "
                f"{bpo} block(s) a group, {rounds} group(s) a block)"), per_thread * rounds
    if name == "plax_elementwise":
        n = scalars[-1]
        return f"{-(-n // (grid * block))} elements ({n} in all)", -(-n // (grid * block))
    return "-", 0


def _recorded_layouts() -> list:
    """The outputs per block of each reduction launch from now on (``reduction_launch``
    wrapped), in launch order."""
    from plax_cupy import codegen
    layouts: list = []
    original = codegen.reduction_launch

    def launch(*args, outputs_per_block=1, **kw):
        layouts.append(outputs_per_block)
        return original(*args, outputs_per_block=outputs_per_block, **kw)

    codegen.reduction_launch = launch
    return layouts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sms", type=int, default=132)
    parser.add_argument("--tiny", action="store_true", help="batch 64 (a smoke test)")
    opts = parser.parse_args(argv)
    os.environ["PLAX_CUDA_GRAPHS"] = "0"
    fake_cupy = simulated_gpu.install(sm_count=opts.sms)
    import plax
    import plax_cupy
    sys.path.insert(0, HERE)
    import gpu   # (benchmarks/gpu.py's workloads: the same MLP step)
    # (quick: batch 4096 still, the other rows smaller; tiny: batch 64)
    factories = gpu.workloads(quick=True, tiny=opts.tiny)[1]
    step, args = factories["mlp step"](gpu.plax_lib(plax.devices("gpu")[0]))
    batch = args[1].shape[0]
    sizes = [w.shape[0] for w, _ in args[0]] + [args[0][-1][0].shape[1]]   # (the layers)
    plax.block_until_ready(step(*args))   # compiled; then one call, recorded
    calls = _recorded_launches(fake_cupy)
    layouts = _recorded_layouts()
    with plax_cupy.count() as counted:
        plax.block_until_ready(step(*args))
    resident = opts.sms * 2048
    print(f"MLP {'-'.join(map(str, sizes))} step, batch {batch}, launch configuration for "
          f"{opts.sms} SMs ({resident} resident threads): {counted.launches} launches, "
          f"{len(calls)} plax-compiled kernels, {counted.launches - len(calls)} other (cuBLAS)")
    print(f"{'kernel':28s} {'grid x block':>14s} {'threads':>9s}  longest serial loop a thread")
    for name, grid, block, scalars in calls:
        threads = grid[0] * block[0]
        opb = layouts.pop(0) if name == "plax_reduce" else 1
        text, loop = _serial(name, grid[0], block[0], scalars, opb)
        # (a kernel short of the resident threads whose threads loop long: too little parallelism)
        flag = "  <- few threads, long loops" if threads < resident and loop > 64 else ""
        print(f"{name[:28]:28s} {grid[0]:>7d} x {block[0]:<4d} {threads:>9d}  {text}{flag}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
