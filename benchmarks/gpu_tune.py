"""Times the CuPy backend's kernel choices on both sides of their thresholds, on a real GPU:
the tables that docs/gpu.md ("Thresholds and how to tune them") tunes them from.

    python benchmarks/gpu_tune.py [--only rows|conv|reductions] [--repeat R] [--budget S]
                                  [--simulated]

* ``rows`` (first: the bounds least known): ``softmax`` and a layer norm (``mean``, ``mean`` of
  the squared deviations, divided by ``sqrt(var + 1e-5)``) of float32 over rows of
  :data:`ROW_LENGTHS` elements (both sides of each bound: lane groups up to 32, registers up to
  2048 = 256 threads x ``ROW_REGISTER_ELEMENTS`` 8, the cap ``ROW_LOCAL_MAX_ELEMENTS`` 8192),
  and softmax of bfloat16 over rows of 1000; as many rows as make a case move
  :data:`ROWS_BYTES` (input read and output written once; at most :data:`ROWS_MAX` rows).
  Microseconds per call of three plax plans (:data:`ROW_VARIANTS`, each compiled after its
  switch): ``held``, the row-local kernel holding what fits ``ROW_REGISTER_WORDS`` in
  registers at any elements a thread (``ROW_REGISTER_ELEMENTS`` unbounded: past 2048 it says
  whether a higher bound pays); ``re-read``, the same with ``ROW_REGISTER_ELEMENTS = 0`` (each
  phase re-reads its row); ``split``, the row-local fusion off (``ROW_LOCAL_MAX_ELEMENTS = 0``:
  the separate reductions, epilogues and elementwise kernel); beside JAX's ``jax.nn.softmax``
  and the same layer norm on the same GPU where JAX has one. Then the launches per call of each
  plan, the values the ``held`` kernel keeps in registers, the largest difference of the
  row-local results from the split plan's, the GB/s (bytes moved per second) of the plan the
  current bounds pick and its share of the device-to-device copy rate (measured here as
  ``gpu.py`` does), and that plan with whether it was the fastest (else which was, by how
  much). ``ROW_LOCAL_MAX_ELEMENTS`` belongs where ``split`` starts to win,
  ``ROW_REGISTER_ELEMENTS`` (and ``ROW_REGISTER_WORDS``) where ``held`` stops beating
  ``re-read``; the lane groups (rows up to 32) are right if rows of 10-32 reach the copy rate's
  share of rows of 128-1000. Calls are issued back to back, waiting for the last one only: a
  call costs the larger of its host work (plax: ~30 us a launch issued from Python, graphs
  off) and its GPU time, hence cases of ``ROWS_BYTES`` (~75 us at an H200's copy rate).
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
calls to last ``--budget`` seconds (default 0.1). Without a GPU the script says why and exits
0; ``--simulated`` runs two small shapes of each table on tests/cupy's simulated GPU (the times
mean nothing there: it checks that the script runs, and that the ``rows`` switches change the
plans: softmax one launch held and re-read, values held only in the first, 3+ launches split,
the same results; ``tests/cupy/test_simulated_tune.py``).

Cost on an H200 (an estimate: no GPU has run it yet), cold kernel cache (~50 ms an NVRTC
compile), with ``--repeat 3 --budget 0.03`` as ``gpu_check.sh``'s 08-tune step runs it (its cap:
60 s): ``rows`` ~40 s (25 cases of ~1.4 s: ~6 compiles, four timed columns of ~0.1 s, 128
MiB made on the host, uploaded twice and three results read back; plus JAX's start, ~5 s);
``conv`` ~30 s (168 cells of a few compiles each); ``reductions`` ~10 s (19 cases, inputs of
up to 2^26 float32 drawn on the host). So the step finishes ``rows`` and part of ``conv``;
each row prints when done (a cut-off run keeps its rows). With the default ``--budget 0.1``
all three take ~2.5 minutes.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time

import numpy as np

os.environ["PLAX_CUDA_GRAPHS"] = "0"  # (read when a program compiles)
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # (JAX beside plax's pool)

import simulated_gpu  # noqa: E402  (this folder is on sys.path when run as a script)
from gpu import _blocking, _gpu_or_none, _time  # noqa: E402

#: row lengths of the ``rows`` table: both sides of every bound of the row-local kernels (lane
#: groups up to 32, registers up to 8 elements a thread of 256: 2048, the cap 8192)
ROW_LENGTHS = (10, 16, 32, 33, 128, 1000, 2048, 2049, 4096, 8192, 8193, 16384)
#: bytes a case of the ``rows`` table moves (its input read and its output written once): big
#: enough that a call's GPU time (~75 us at an H200's ~3.4 TB/s) exceeds plax's ~30 us of
#: host work a call, so the pipelined calls time the kernels rather than the host
ROWS_BYTES = 1 << 28
#: most rows of a case (rows of 10: 3.3M rows at ROWS_BYTES)
ROWS_MAX = 1 << 22
#: the variants of the ``rows`` table and the settings that make them (``codegen`` and
#: ``codegen_rows_local`` constants, read when a program is lowered)
ROW_VARIANTS = {"held": dict(ROW_LOCAL_MAX_ELEMENTS=1 << 40, ROW_REGISTER_ELEMENTS=1 << 40),
                "re-read": dict(ROW_LOCAL_MAX_ELEMENTS=1 << 40, ROW_REGISTER_ELEMENTS=0),
                "split": dict(ROW_LOCAL_MAX_ELEMENTS=0)}


def row_programs(module) -> dict:
    """``{name: make}``: softmax and layer norm written against ``module`` (plax or jax), each
    ``make()`` a new function object (so that ``jit`` compiles it anew: a program keeps the
    fusion it was lowered with)."""
    jnp = module.numpy

    def layer_norm(x):
        mean = jnp.mean(x, -1, keepdims=True)
        return (x - mean) / jnp.sqrt(jnp.mean((x - mean) ** 2, -1, keepdims=True) + 1e-5)

    return {"softmax": lambda: lambda x: module.nn.softmax(x, axis=-1),
            "layer_norm": lambda: lambda x: layer_norm(x)}


def _pipelined(fn, block, repeat: int, budget: float) -> float:
    """Median seconds per call of ``fn`` called back to back, waiting (``block``) only for the
    last result of each sample: a call's cost is the larger of its host work and its GPU time
    (the GPU's when the host keeps ahead, as ``ROWS_BYTES`` is sized for)."""
    block(fn())
    t0 = time.perf_counter()
    block(fn())
    calls = max(1, int(budget / max(time.perf_counter() - t0, 1e-7)))
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = fn()
        block(out)
        del out
        samples.append((time.perf_counter() - t0) / calls)
    return sorted(samples)[len(samples) // 2]


def _with_settings(settings: dict, build):
    """``build()`` with the ``ROW_VARIANTS`` ``settings`` in force, restored after."""
    from plax_cupy import codegen, codegen_rows_local
    homes = {"ROW_LOCAL_MAX_ELEMENTS": codegen, "ROW_REGISTER_ELEMENTS": codegen_rows_local}
    saved = {k: getattr(homes[k], k) for k in homes}
    for k, v in settings.items():
        setattr(homes[k], k, v)
    try:
        return build()
    finally:
        for k, v in saved.items():
            setattr(homes[k], k, v)


def rows_table(repeat: int, small: bool, budget: float) -> None:
    """Row-local kernels (registers held, rows re-read) against split reductions, and JAX."""
    import ml_dtypes
    import plax
    import plax_cupy
    from gpu import _TopPrograms, _cupy_backend, copy_rate, jax_lib
    from plax_cupy import codegen, codegen_rows_local
    backend = _cupy_backend()
    gpu = backend.devices()[0]
    jax_l, jax_note = (None, "simulated GPU") if small else jax_lib()
    plax_fns = row_programs(plax)
    jax_fns = row_programs(__import__("jax")) if jax_l else {}
    moved = (1 << 16) if small else ROWS_BYTES
    copy_gbs = copy_rate(moved, repeat, budget)
    cap, regs = codegen.ROW_LOCAL_MAX_ELEMENTS, codegen_rows_local.ROW_REGISTER_ELEMENTS
    print(f"\nrows: softmax and layer norm over (rows, row), ~{moved / 2 ** 20:g} MiB moved a "
          f"case; us per call (pipelined); now ROW_LOCAL_MAX_ELEMENTS {cap}, "
          f"ROW_REGISTER_ELEMENTS {regs}, ROW_REGISTER_WORDS "
          f"{codegen_rows_local.ROW_REGISTER_WORDS}; device-to-device copy {copy_gbs:.0f} GB/s"
          f"{'' if jax_l else f'; no JAX ({jax_note})'}")
    print(f"{'program':10s} {'dtype':8s} {'rows':>8s} {'row':>6s} {'held':>9s} {'re-read':>9s} "
          f"{'split':>9s} {'jax':>9s} {'launches':>8s} {'kept':>4s} {'diff':>8s} "
          f"{'GB/s now':>14s}  now")
    cases = [("softmax", np.float32, 10), ("softmax", np.float32, 100)] if small else \
        [(name, np.float32, n) for name in plax_fns for n in ROW_LENGTHS] + \
        [("softmax", ml_dtypes.bfloat16, 1000)]
    tile = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)
    for name, dtype, row in cases:
        itemsize = np.dtype(dtype).itemsize
        n_rows = max(1, min(ROWS_MAX, moved // (2 * itemsize * row)))
        host = np.resize(tile, (n_rows, row)).astype(dtype)
        x = plax.device_put(host, gpu)
        times, launches, kept, results = {}, {}, {}, {}
        for variant, settings in ROW_VARIANTS.items():
            def build():
                with _TopPrograms(backend) as programs:
                    f = plax.jit(plax_fns[name](), backend="cupy")
                    f(x).block_until_ready()
                with plax_cupy.count() as c:
                    out = np.asarray(f(x)).astype(np.float32)
                held = re.findall(r"(\d+) value\(s\) held", programs.made[0].as_text())
                return f, c.launches, sum(map(int, held)), out
            f, launches[variant], kept[variant], results[variant] = \
                _with_settings(settings, build)
            times[variant] = _pipelined(lambda: f(x), plax.block_until_ready, repeat, budget)
        # (the row-local kernels' results against the split plan's: a fast wrong kernel
        # must not pass for a fast one)
        diff = max(float(np.max(np.abs(results[v] - results["split"]), initial=0.0))
                   for v in ("held", "re-read"))
        del results
        t_jax = None
        if jax_l:
            try:
                xj, fj = jax_l.put(host), jax_l.jit(jax_fns[name]())
                t_jax = _pipelined(lambda: fj(xj), jax_l.block, repeat, budget)
            except Exception as err:  # noqa: BLE001 - the plax columns still report
                print(f"  (jax failed: {type(err).__name__}: {str(err)[:100]})")
        per_thread = 1 if row <= 32 else -(-row // codegen_rows_local.row_threads(row))
        now = "split" if row > cap else "held" if per_thread <= regs else "re-read"
        fastest = min(times, key=times.get)
        verdict = "fastest" if fastest == now else \
            f"{fastest} {times[now] / times[fastest]:.2f}x faster"
        gbs = 2 * host.nbytes / times[now] / 1e9
        jt = f"{t_jax * 1e6:9.1f}" if t_jax else f"{'-':>9s}"
        print(f"{name:10s} {np.dtype(dtype).name:8s} {n_rows:8d} {row:6d} "
              + " ".join(f"{times[v] * 1e6:9.1f}" for v in ROW_VARIANTS) + f" {jt} "
              f"{'/'.join(str(launches[v]) for v in ROW_VARIANTS):>8s} "
              f"{kept['held']:4d} {diff:8.1e} {gbs:6.0f} ({100 * gbs / copy_gbs:3.0f}%)  "
              f"{now}: {verdict}")
        if small:   # (the switches change the plans: one kernel each, or the split plan's)
            assert launches["held"] == launches["re-read"] == 1, launches
            assert launches["split"] >= 3, launches
            assert kept["held"] > 0 and kept["re-read"] == 0, kept
            assert diff < 1e-5, diff
        del x, host


def conv_table(repeat: int, small: bool, budget: float) -> None:
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
                        times[path] = _time(_blocking(f, (x, w)), repeat, budget)
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


def reductions_table(repeat: int, small: bool, budget: float) -> None:
    """One block per output against outputs split over blocks, over (outputs, row length)."""
    import plax
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
                    times[label] = _time(_blocking(f, (x,)), repeat, budget)
                finally:
                    codegen.ITEMS_PER_THREAD = saved
            bpo = codegen.reduction_launch(n_out, n_red, sm)[2]
            print(f"{n_out:8d} {n_red:8d} {times['one'] * 1e3:10.3f} {times['split'] * 1e3:10.3f} "
                  f"{times['one'] / times['split']:13.2f} {bpo:10d}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("rows", "conv", "reductions"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--budget", type=float, default=0.1,
                    help="seconds of calls a timed sample lasts (gpu_check.sh: 0.03)")
    ap.add_argument("--simulated", action="store_true",
                    help="two small shapes per table on tests/cupy's simulated GPU (CI: it runs)")
    opts = ap.parse_args(argv)
    if opts.simulated:
        simulated_gpu.install()
        opts.repeat, opts.budget = 1, 0.0
    gpu, reason = _gpu_or_none()
    if gpu is None:
        print(f"benchmarks/gpu_tune.py: no GPU to measure on ({reason}); nothing to do.")
        return 0
    from plax import plugins
    if "cupy" not in plugins.registry().backends:  # a checkout without the entry point
        import plax_cupy.plugin
        plugins.register_plugin(plax_cupy.plugin, name="plax_cupy_tune")
    print(f"GPU: {gpu.name} (cuda:{gpu.id})")
    if opts.only in (None, "rows"):
        rows_table(opts.repeat, opts.simulated, opts.budget)
    if opts.only in (None, "conv"):
        conv_table(opts.repeat, opts.simulated, opts.budget)
    if opts.only in (None, "reductions"):
        reductions_table(opts.repeat, opts.simulated, opts.budget)
    return 0


if __name__ == "__main__":
    sys.exit(main())
