"""Times the CuPy backend's kernel choices on both sides of their thresholds, on a real GPU:
the tables that docs/gpu.md ("Thresholds and how to tune them") tunes them from.

    python benchmarks/gpu_tune.py [--only conv|reductions] [--repeat R] [--simulated]

* ``conv``: ``conv_general_dilated`` (NHWC/HWIO, 3x3, stride 1, SAME; float32 and bfloat16)
  over input channels (products per output: channels x 9) and output features: the direct
  kernel against the implicit GEMM of ``plax_cupy.kernels_convolution`` (its thresholds set to
  force each), milliseconds per call and direct / GEMM. ``GEMM_MIN_TERMS`` and
  ``GEMM_MIN_FEATURES`` belong where that ratio crosses 1 (the last column says which path the
  current thresholds pick).
* ``reductions``: a jitted row sum of float32 over (outputs, row length): one launch with one
  block per output (``codegen.ITEMS_PER_THREAD`` so large that no output splits) against the
  outputs split over blocks and combined by a second kernel (``ITEMS_PER_THREAD`` 1), and how
  many blocks per output the current ``ITEMS_PER_THREAD`` gives. Its value belongs where
  splitting stops paying.

Programs run with CUDA graphs off (``PLAX_CUDA_GRAPHS=0``: a replayed graph would keep the
launch configuration it captured). Each cell is the median of ``--repeat`` runs of enough
calls to last about 100 ms. Without a GPU the script says why and exits 0; ``--simulated``
runs two small shapes of each table on tests/cupy's simulated GPU (the times mean nothing
there: it checks that the script runs).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

os.environ["PLAX_CUDA_GRAPHS"] = "0"  # (read when a program compiles)

import simulated_gpu  # noqa: E402  (this folder is on sys.path when run as a script)
from gpu import _blocking, _gpu_or_none, _time  # noqa: E402


def conv_table(repeat: int, small: bool) -> None:
    """Direct kernel against implicit GEMM over channels in and features out."""
    import ml_dtypes
    import plax
    from plax import lax
    from plax_cupy import kernels_convolution as kc
    gpu = plax.devices("gpu")[0]
    batch, hw = (1, 6) if small else (32, 28)
    channels = (4, 16) if small else (4, 8, 16, 32, 64, 128, 256)
    features = (16,) if small else (1, 8, 16, 32, 64, 128)
    forced = {"direct": dict(GEMM_MIN_TERMS=1 << 62, DIRECT_MAX_TERMS=1 << 62),
              "gemm": dict(GEMM_MIN_TERMS=0, GEMM_MIN_FEATURES=0)}
    saved = {k: getattr(kc, k) for k in ("GEMM_MIN_TERMS", "GEMM_MIN_FEATURES", "DIRECT_MAX_TERMS")}
    print(f"conv 3x3 NHWC/HWIO, batch {batch}, {hw}x{hw}: ms per call (thresholds now: "
          f"GEMM_MIN_TERMS {saved['GEMM_MIN_TERMS']}, GEMM_MIN_FEATURES "
          f"{saved['GEMM_MIN_FEATURES']}, DIRECT_MAX_TERMS {saved['DIRECT_MAX_TERMS']})")
    print(f"{'dtype':9s} {'C':>5s} {'O':>5s} {'terms':>6s} {'direct':>10s} {'gemm':>10s} "
          f"{'direct/gemm':>11s}  now")
    rng = np.random.default_rng(0)
    for dtype in (np.float32, ml_dtypes.bfloat16):
        for c in channels:
            for o in features:
                x = plax.device_put(rng.standard_normal((batch, hw, hw, c)).astype(dtype), gpu)
                w = plax.device_put((rng.standard_normal((3, 3, c, o)) / np.sqrt(9 * c))
                                    .astype(dtype), gpu)
                f = plax.jit(lambda x, w: lax.conv_general_dilated(
                    x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
                times = {}
                for path, values in forced.items():
                    for k, v in values.items():
                        setattr(kc, k, v)
                    try:
                        times[path] = _time(_blocking(f, (x, w)), repeat)
                    finally:
                        for k, v in saved.items():
                            setattr(kc, k, v)
                plan = kc.gemm_plan((batch, hw, hw, c), (3, 3, c, o), (batch, hw, hw, o),
                                    ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2)), 1, 1)
                now = "gemm" if kc._gemm_applies(np.dtype(dtype), np.dtype(dtype), plan, 9 * c) \
                    else "direct"
                print(f"{np.dtype(dtype).name:9s} {c:5d} {o:5d} {9 * c:6d} "
                      f"{times['direct'] * 1e3:10.3f} {times['gemm'] * 1e3:10.3f} "
                      f"{times['direct'] / times['gemm']:11.2f}  {now}")


def reductions_table(repeat: int, small: bool) -> None:
    """One block per output against outputs split over blocks, over (outputs, row length)."""
    import plax
    import plax.numpy as jnp
    from plax_cupy import codegen
    gpu = plax.devices("gpu")[0]
    sm = plax.devices("gpu")[0].backend.sm_count(0)
    outs = (1, 64) if small else (1, 16, 128, 1024, 8192)
    rows = (512, 4096) if small else (256, 2048, 16384, 131072, 1 << 20)
    saved = codegen.ITEMS_PER_THREAD
    print(f"\nrow sums (float32, {sm} multiprocessors): ms per call; ITEMS_PER_THREAD now {saved}")
    print(f"{'outputs':>8s} {'row':>8s} {'1 block':>10s} {'split':>10s} {'1 block/split':>13s} "
          f"{'blocks now':>10s}")
    rng = np.random.default_rng(0)
    for n_out in outs:
        for n_red in rows:
            if n_out * n_red > (1 << 26):
                continue
            x = plax.device_put(rng.standard_normal((n_out, n_red)).astype(np.float32), gpu)
            f = plax.jit(lambda v: (v * 2.0).sum(axis=1))
            times = {}
            for label, items in (("one", 1 << 40), ("split", 1)):
                codegen.ITEMS_PER_THREAD = items
                try:
                    times[label] = _time(_blocking(f, (x,)), repeat)
                finally:
                    codegen.ITEMS_PER_THREAD = saved
            bpo = codegen.reduction_launch(n_out, n_red, sm)[2]
            print(f"{n_out:8d} {n_red:8d} {times['one'] * 1e3:10.3f} {times['split'] * 1e3:10.3f} "
                  f"{times['one'] / times['split']:13.2f} {bpo:10d}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("conv", "reductions"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--simulated", action="store_true",
                    help="two small shapes per table on tests/cupy's simulated GPU (CI: it runs)")
    opts = ap.parse_args(argv)
    if opts.simulated:
        simulated_gpu.install()
        opts.repeat = 1
    gpu, reason = _gpu_or_none()
    if gpu is None:
        print(f"benchmarks/gpu_tune.py: no GPU to measure on ({reason}); nothing to do.")
        return 0
    from plax import plugins
    if "cupy" not in plugins.registry().backends:  # a checkout without the entry point
        import plax_cupy.plugin
        plugins.register_plugin(plax_cupy.plugin, name="plax_cupy_tune")
    print(f"GPU: {gpu.name} (cuda:{gpu.id})")
    if opts.only in (None, "conv"):
        conv_table(opts.repeat, opts.simulated)
    if opts.only in (None, "reductions"):
        reductions_table(opts.repeat, opts.simulated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
