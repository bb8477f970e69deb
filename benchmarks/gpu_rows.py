"""The launches of the cumulative ops' row kernels (``plax_cupy.kernels_rows``) for the shapes
of ``benchmarks/gpu.py``'s cumsum rows, on the simulated GPU: which kernel, its grid and block,
and the scratch words its look-back reads.

    PYTHONPATH=$PYTHONPATH:tests/cupy python benchmarks/gpu_rows.py [--sms 132]
    python benchmarks/gpu_rows.py --registers     # ptxas's registers and spills, sm_90

For each ``cumsum`` (float32; a row of 1e7, and axis 0 of (1e6, 4), (4096, 4096), (8, 1e6),
(64, 1e5) and (1e5, 64)) and ``argmax`` (axis 0 of (4096, 4096) and (1e6, 4)) it prints every
plax-compiled launch of one call with its grid and block, the look-backs the simulated module
counted (one per tile that has a predecessor) and their memory round trips, and the look-back
scratch it was given (``uint64`` words per tile where a tile's status and total are one word,
else a ``uint32`` flag and two values per tile). The simulated GPU runs the kernels (one thread
a block), so the values are checked against NumPy too. docs/gpu.md ("Cumulative ops along a
non-last axis", "Long rows in one launch") models what these launches cost on an H200.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

import simulated_gpu  # (this folder is on sys.path when run as a script)

#: (label, shape, axis, op) of the rows
SHAPES = (("1 row 1e7", (10_000_000,), 0, "cumsum"),
          ("axis 0 of (1e6, 4)", (1_000_000, 4), 0, "cumsum"),
          ("axis 0 of (4096, 4096)", (4096, 4096), 0, "cumsum"),
          ("axis 0 of (8, 1e6)", (8, 1_000_000), 0, "cumsum"),
          ("axis 0 of (64, 1e5)", (64, 100_000), 0, "cumsum"),
          ("axis 0 of (1e5, 64)", (100_000, 64), 0, "cumsum"),
          ("axis 0 of (4096, 4096)", (4096, 4096), 0, "argmax"),
          ("axis 0 of (1e6, 4)", (1_000_000, 4), 0, "argmax"))


def _look_back_counters(fake_cupy):
    """The simulated float32 cumsum module's look-back counters (``plax_sim_look_back_*``:
    look-backs, and their memory round trips), as ctypes values to reset and read."""
    from plax_cupy import codegen, kernel_modules, kernels_rows
    source, _ = kernels_rows.cumulative_source("sum", "float")
    module = kernel_modules.module(kernels_rows._module_text(codegen.PREAMBLE, source),
                                   kernels_rows._kernel_names(source), device_id=0)
    counters = fake_cupy.look_back_counters(module)
    return [counters["tiles"], counters["steps"]]


def registers(ctypes=("float", "double", "plax_c128")) -> int:
    """Prints, for the cumulative sum's kernels on float32, float64 and complex128 (the most
    shared memory a block: ``ptxas`` refuses more than 48 KiB), the registers a thread, the
    spill bytes and the shared memory ``ptxas -arch=sm_90`` reports for NVRTC's PTX (real
    NVRTC, no GPU), and the shared memory :func:`plax_cupy.kernels_rows.shared_bytes` counts
    in the source (what source generation checks against 48 KiB); returns 1
    where a kernel spills (and fails where either tool is missing or refuses a kernel)."""
    import re
    import shutil
    import subprocess
    import tempfile
    from plax_cupy import codegen, kernels_rows, nvrtc
    if shutil.which("ptxas") is None:
        raise SystemExit("no ptxas on the PATH")
    spills = 0
    print(f"{'sm_90':9} {'kernel':24} {'registers':>9} {'spill bytes':>11} {'shared':>7} "
          f"{'plax counts':>11}")
    for ctype in ctypes:
        source, name = kernels_rows.cumulative_source("sum", ctype)
        ptx = nvrtc.compile_ptx(codegen.PREAMBLE + source,
                                options=nvrtc.DEVICE_OPTIONS + ("-arch=compute_90",))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "rows.ptx")
            with open(path, "w") as f:
                f.write(ptx)
            log = subprocess.run(["ptxas", "-arch=sm_90", "-v", path, "-o",
                                  os.path.join(tmp, "rows.cubin")],
                                 capture_output=True, text=True, check=True).stderr
        # (each entry's "Function properties" line, its frame and spills, then its registers
        # and shared memory, beside kernels_rows.shared_bytes's count from the source)
        counted = kernels_rows.shared_bytes(source, ctype)
        for kernel, stores, loads, regs, smem in re.findall(
                r"Function properties for (\w+)\n\s*\d+ bytes stack frame, (\d+) bytes spill "
                r"stores, (\d+) bytes spill loads\n[^\n]*Used (\d+) registers,[^\n]*? (\d+) "
                r"bytes smem", log):
            spilled = int(stores) + int(loads)
            spills += spilled
            print(f"{ctype:9} {kernel[len(name):] or '(a block a row)':24} {regs:>9} {spilled:>11} "
                  f"{smem:>7} {counted[kernel]:>11}")
    return 1 if spills else 0


def main(argv=None) -> int:
    """Prints the table; returns 1 if a result differs from NumPy's (float64) beyond float32
    rounding. ``--registers``: the kernels' registers instead (:func:`registers`)."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--registers", action="store_true",
                    help="print each cumulative kernel's registers and spills (ptxas, sm_90)")
    opts = ap.parse_args(argv)
    if opts.registers:
        return registers()
    fake_cupy = simulated_gpu.install(sm_count=opts.sms)
    import plax
    import plax.numpy as jnp

    calls: list = []
    original = fake_cupy._Function.__call__

    def record(self, grid, block, args, *rest, **kw):
        scratch = [f"{a.dtype}[{a.size}]" for a in args if hasattr(a, "dtype") and a.ndim == 1
                   and a.dtype in (np.uint64, np.uint32)]
        calls.append((self.name, tuple(grid), tuple(block), scratch))
        return original(self, grid, block, args, *rest, **kw)

    fake_cupy._Function.__call__ = record
    gpu = plax.devices("gpu")[0]
    rng = np.random.default_rng(0)
    failed = 0
    counters = _look_back_counters(fake_cupy)
    print(f"{'float32':31} {'kernel':44} {'grid':>6} {'block':>5}  {'look-backs':>10} "
          f"{'round trips':>11}  scratch")
    for label, shape, axis, op in SHAPES:
        x = rng.standard_normal(shape).astype(np.float32)
        del calls[:]
        for counter in counters:
            counter.value = 0
        if op == "cumsum":
            got = np.asarray(jnp.cumsum(plax.device_put(x, gpu), axis=axis))
            want = np.cumsum(x, axis=axis, dtype=np.float64)
            right = np.allclose(got, want, rtol=1e-4, atol=1e-3 * np.sqrt(shape[axis]))
        else:
            got = np.asarray(jnp.argmax(plax.device_put(x, gpu), axis=axis))
            right = np.array_equal(got, np.argmax(x, axis=axis))
        label = f"{op} {label}"
        if not right:
            failed += 1
            label += " (WRONG)"
        looks, trips = (str(counter.value) for counter in counters)
        for name, grid, block, scratch in calls:
            print(f"{label:31} {name:44} {grid[0]:>6} {block[0]:>5}  {looks:>10} {trips:>11}  "
                  f"{' '.join(scratch)}")
            label, looks, trips = "", "", ""
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
