"""What checking a new CUDA graph plan costs for the earlier results the caller holds
(``plax_cupy.graph_check.held_changes``): the call that captures a second plan of a two-kernel
program while the first plan's result (``n`` float32s) is held.

    PYTHONPATH=$PYTHONPATH:tests/cupy python benchmarks/gpu_held_check.py          # simulated
    python benchmarks/gpu_held_check.py --real                                     # a GPU

Per size it prints the bytes that call read to the host (simulated GPU only: ``fake_cupy``
counts them), the part the held-result check read (the rest is the check's three reads of the
call's own output), the check's reads (``verify_reads``) and launches (``verify_launches``),
and, on a GPU, the capturing call's wall time against a replay's. The held results are
compared on the device, so the held check's bytes stay at two integers whatever ``n``.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--real", action="store_true", help="run on the GPU, not the simulated one")
    parser.add_argument("--sizes", type=int, nargs="*", default=[1 << 10, 1 << 16, 1 << 20])
    args = parser.parse_args(argv)
    fake = None
    if not args.real:
        import simulated_gpu   # (this folder is on sys.path when run as a script)
        fake = simulated_gpu.install()
    import plax
    import plax.numpy as jnp
    from plax_cupy import runtime
    print(f"{'n float32':>10} {'held MB':>8} {'D2H bytes':>11} {'held check':>10} "
          f"{'verify_reads':>12} {'verify_launches':>15} {'capture ms':>10} {'replay ms':>9}")
    for n in args.sizes:
        f = plax.jit(lambda x: jnp.sort(x) * 2.0, backend="cupy")
        x = jnp.asarray(np.arange(n, dtype=np.float32)[::-1].copy())
        f(x)
        held = f(x)   # (the first plan's result, held while the second is captured)
        before = fake.COUNTS["device_to_host_bytes"] if fake else 0
        start = time.perf_counter()
        with runtime.count() as c:
            out = f(x).block_until_ready()
        captured = time.perf_counter() - start
        read = fake.COUNTS["device_to_host_bytes"] - before if fake else None
        start = time.perf_counter()
        f(x).block_until_ready()
        replay = time.perf_counter() - start
        assert np.array_equal(np.asarray(out), np.asarray(held))
        shown = (f"{read:>11} {read - 3 * 4 * n:>10}" if read is not None else f"{'-':>11} {'-':>10}")
        print(f"{n:>10} {n * 4 / 1e6:>8.2f} {shown} {c.verify_reads:>12} {c.verify_launches:>15} "
              f"{captured * 1e3:>10.2f} {replay * 1e3:>9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
