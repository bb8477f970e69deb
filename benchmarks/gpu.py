"""plax on CuPy beside JAX on the same GPU, in one run: the GPU table of issue 14.

    python benchmarks/gpu.py [--quick | --tiny | --simulated] [--repeat R] [--peak-gbs GBS]

Rows (plax jitted with ``backend="cupy"`` against ``jax.jit`` on JAX's GPU, both synchronised
with ``block_until_ready`` after each timed batch of calls):

* selu on 1e8 float32 -- bandwidth-bound: time and GB/s (8 bytes moved per element), and the
  share of the card's peak bandwidth (``--peak-gbs``; default: computed from the memory clock
  and bus width the driver reports); and the same compiled without the elementwise kernels'
  vector path (``selu ... f32, scalar``: ``codegen.VECTOR_MIN_ELEMENTS`` out of reach while
  it compiles, the kernel as it was before; docs/gpu.md "Elementwise kernels: the vector
  path"; ``random.normal ..., scalar`` likewise);
* matmul 8192 x 8192, float32 (TF32 off in both: ``jax_default_matmul_precision="highest"``)
  and bfloat16;
* one SGD step of an MLP 784-2048-2048-10, batch 4096 (``--tiny``/``--simulated``:
  784-512-512-10, batch 64; value and grad, parameters updated),
  called on the same parameters (``MLP step``) and in a training loop, each call stepping the
  parameters the last one returned (``MLP train loop``; ``MLP loop, batch uploaded``: with the
  batch uploaded from the host each call);
* ``random.normal`` of 1e8 float32 (threefry2x32 and the inverse-erf transform); ``...,
  both cases``: compiled with its inverse erf's ``select_n`` computing both polynomials
  (``codegen.LAZY_SELECT_MIN_EQUATIONS`` out of reach: the kernel as it was before the
  branch; docs/gpu.md "Arithmetic per element"); ``..., original``: in the original threefry
  layout (``jax_threefry_partitionable=False``, JAX's too; one kernel in plax: docs/gpu.md
  "The PRNG in one kernel");
* ``cumsum`` of one row of 1e7 float32: a long row split over every SM
  (``plax_cupy.kernels_rows``: one launch, the tiles chained by a deterministic look-back;
  ``--tiny``/``--simulated``: 1e5, still split), GB/s of its 8 bytes per element;
* ``cumsum`` along axis 0 of (1e6, 4), (4096, 4096), (8, 1e6), (64, 1e5) and (1e5, 64)
  float32 (``kernels_rows``: the few-columns single pass (one look-back a tile), the column
  kernel with its axis in 8 parts (a look-back a part), with 1 and 2 segments, and in 196
  parts; ``--tiny``/``--simulated``: (1e5, 4), (2048, 256), (8, 1e4), (64, 1e3), (1e4, 64)),
  GB/s of 8 bytes per element; ``argmax`` along axis 0 of (4096, 4096) float32 (the coalesced
  column kernel, its axis in 8 parts, then each column's best of its parts: two launches;
  ``--tiny``/``--simulated``: (2048, 256)), GB/s of 4 bytes per element;
* ``random.categorical`` over (4096, 1000) float32 logits (``--tiny``/``--simulated``: (64,
  100)): the Gumbel noise and the argmax along the last axis in one kernel, GB/s of the 4
  bytes per logit it reads;
* the SGD update of the MLP 784-2048-2048-10's 6 parameters alone (``p - 0.01 * g`` each: one
  multi-tensor kernel, ``codegen.plan_group``), GB/s of its 12 bytes per element, beside the
  selu row's (docs/gpu.md "Multi-tensor kernels and the vector path");
* a tiny jitted call (3 elements): the per-call latency;
* a 3x3 convolution, NHWC/HWIO, 64 to 64 channels on 56 x 56 images, batch 32, float32
  (``--tiny``/``--simulated``: 8 to 16 channels on 12 x 12, batch 2), against JAX's (cuDNN):
  the implicit GEMM of ``plax_cupy.kernels_convolution`` (a gather kernel and one cuBLAS
  product: two launches) at full size, one direct generated kernel at the tiny size (72
  products per output, below ``GEMM_MIN_TERMS``).
* an FFT filter of a 2^20-element complex64 batch (1024 rows of 1024; ``--tiny``/``--simulated``:
  16 rows of 64): ``ifft(fft(x) * w)`` over the last axis, three launches, replayed as one
  CUDA graph on the cuFFT plans the program owns (``plax_cupy.fft_plans``), against JAX's;
* a Gaussian-process solve, ``K^-1 y`` for a 512 x 512 float32 ``K`` (``--tiny``/``--simulated``:
  64 x 64) by its Cholesky factor and two triangular solves, replayed as one CUDA graph
  through plax's direct cuSOLVER ``potrf`` and cuBLAS ``trsm`` bindings, against JAX's;
* a PCA of 4096 samples of 256 float32 features (``--tiny``/``--simulated``: 64 of 16): the
  centred data's reduced SVD and its rank-8 reconstruction, and an ``eigh`` of their 256 x 256
  covariance with ``v diag(w) v^T``, replayed as one CUDA graph each through plax's direct
  cuSOLVER ``gesvd`` and ``syevd`` bindings, against JAX's;
* the CPU table's workloads (benchmarks/compare.py: ``linreg step (grad, vmap)``, ``MLP step
  784-512-512-10 b128``, ``random.normal 10M jit``, ``jit(vmap(apply_matrix))``, ``scan tanh
  RNN 1000x64``; their ``--quick`` sizes with ``--quick``/``--tiny``), with both libraries on
  the GPU, three repetitions each.

One definition of each workload: selu, the MLP step (``compare.mlp_update``; the big MLP rows
are it at 784-2048-2048-10) and the CPU table's rows are compare.py's, written against a
jax-like library ``L`` (``compare._Lib``: plax jitted on the CuPy backend with arrays put on
the GPU, or JAX on its first GPU); the rows built one at a time.

The header gives the card's **device-to-device copy rate**, measured in the same run (a
``cupy.copyto`` of 400 MB between two device buffers, bytes read plus written per second), and
the bandwidth column gives each bandwidth row's GB/s as a share of it (issue 24's goal for
selu: 80% or more) beside the share of the nominal peak.

A second table times the MLP step's **first call** (trace, lowering, kernel compilation and
the run), each in a fresh process: with an empty kernel cache compiling one kernel at a time
(``PLAX_CUPY_COMPILE_THREADS=1``: before ``plax_cupy.kernel_modules``), with an empty cache
compiling concurrently, and with the cache the last run left (a second process: nothing to
compile), beside JAX's first call (its own fresh process), with the modules each plax run built
(``built``) and how many of them NVRTC compiled (``compiles``: plax's own NVRTC calls,
``kernel_modules.stats()["compiled"]``; the rest came from the disk cache).
The cache is plax's kernel cache (``PLAX_CUPY_CACHE_DIR``: plax compiles its kernels with
its own NVRTC call, ``plax_cupy.kernel_cache``), plus CuPy's (``CUPY_CACHE_DIR``, CuPy's own
kernels) and, on the simulated GPU, the host builds' directory (under ``TMPDIR``); all point at
a temporary directory. ``--first-call``
prints only this table (``--simulated --first-call``: on the simulated GPU).

Each row also says what one plax call costs beside the time (``plax_cupy.count()`` around one
call after the timing): kernel launches, host-to-device and device-to-host copies, host
fallbacks (primitives without a GPU path) and device-to-device copies (``d2d``); a jitted
program should show no host copies and no fallbacks. ``no-graph`` is the launches of the same
call with CUDA graphs off (``PLAX_CUDA_GRAPHS=0``): a program replayed as a graph
(``plax_cupy.graphs``) makes one launch for the graph, reading inputs whose device pointer
recurs in place (the same Arrays, the last call's results in a training loop, a batch uploaded
each call into the block the pool hands back) and copying in only those that do not, and hands
its own output buffers out uncopied. ``MLP loop, batch uploaded`` is the training loop with the
batch uploaded from the host each call (its two host-to-device copies are the upload).
The last column, ``graph``, is the ``# CUDA graph:`` line of the row's program
(``as_text()``, the outermost program its first call compiled), shortened: ``replayed,
verified`` (its plans' first two launches gave the bits, or within rounding the results, of a
plain run of the same call: ``plax_cupy.graph_check``), ``WRONG REPLAY caught (runs plainly):
<output, largest difference>`` (a binding that does not work in a graph on this GPU: the row
then times plain launches), or ``no: <reason>`` (one launch, nothing to replay; a ``while``;
graphs off...).

The ratio column is plax-cupy / JAX (the issue's goal: <= 1.1 on the bandwidth- and BLAS-bound
rows, <= 1.5 on latency). Each cell is the median over ``--repeat`` runs of enough calls to
last about 100 ms (``--tiny``: one run of one call), after warm-up calls (compilation
excluded). Without a GPU (no CuPy, no driver, no device) the script prints why and exits 0;
without JAX's GPU build the JAX column says so. ``--quick`` shrinks the sizes tenfold (a
smoke test); ``--simulated`` runs the ``--tiny`` sizes on tests/cupy's simulated GPU (CI
without a GPU: the counters are the point, the times mean nothing; launches are counted as on
a real GPU).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "backends"))  # a checkout without the entry point
sys.path.insert(0, HERE)  # compare.py's workloads, simulated_gpu

import simulated_gpu  # noqa: E402


def _gpu_or_none():
    from plax_cupy.runtime import probe
    gpus, reason = probe()
    return (gpus[0] if gpus else None), reason


def _time(fn, repeat: int, budget: float = 0.1) -> float:
    """Median seconds per call of ``fn`` (which blocks until its result is ready)."""
    fn()
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    calls = max(1, int(budget / one))
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter() - t0) / calls)
    return statistics.median(samples)


def _per_call(call) -> str:
    """Launches, host copies each way and host fallbacks of one call of ``call``."""
    import plax_cupy
    with plax_cupy.count() as c:
        call()
    text = (f"{c.launches:8d} {c.host_to_device:4d} {c.device_to_host:4d} {c.host_fallbacks:6d}"
            f" {c.device_copies:4d}")
    if c.fallbacks:
        text += f" ({', '.join(sorted(c.fallbacks))} on the host)"
    return text


def _launches_without_graphs(build) -> int:
    """Launches of one call of the row ``build()`` makes (``(fn, args)``), compiled with CUDA
    graphs off (PLAX_CUDA_GRAPHS=0 is read when a program compiles, so the first call runs with
    it set)."""
    import plax_cupy
    saved = os.environ.get("PLAX_CUDA_GRAPHS")
    os.environ["PLAX_CUDA_GRAPHS"] = "0"
    try:
        call = _blocking(*build())
        call()
    finally:
        if saved is None:
            del os.environ["PLAX_CUDA_GRAPHS"]
        else:
            os.environ["PLAX_CUDA_GRAPHS"] = saved
    call()
    with plax_cupy.count() as c:
        call()
    return c.launches


def _peak_gbs() -> float | None:
    try:
        import cupy
        p = cupy.cuda.runtime.getDeviceProperties(0)
        # DDR: two transfers per clock; memoryClockRate in kHz, bus width in bits
        return 2 * p["memoryClockRate"] * 1e3 * (p["memoryBusWidth"] / 8) / 1e9
    except Exception:  # noqa: BLE001 - informational only
        return None


#: the CPU table's rows (benchmarks/compare.py's workloads, by label prefix) timed here too,
#: with plax and JAX both on the GPU (issue 24's "Speed, beside JAX on the same GPU")
CPU_TABLE_ROWS = ("linreg step", "MLP step 784-512-512-10", "random.normal",
                  "jit(vmap(apply_matrix))", "scan tanh RNN")


def workloads(quick: bool, tiny: bool = False):
    """``(rows, factories)``: the table's rows ``(label, bytes moved or None, key)`` and
    ``{key: factory}``, a factory taking a jax-like library ``L`` (compare.py's ``_Lib``: plax
    on the CuPy backend, or JAX on its GPU) and returning ``(fn, args)``. The selu function,
    the MLP step and the CPU table's rows are compare.py's (one definition of each workload);
    the rows of this table alone are defined here."""
    import compare
    scale = 10_000 if tiny else (10 if quick else 1)
    n_big = 100_000_000 // scale
    # (tiny: 1e5, still above kernels_rows.LONG_ROW, so the simulation counts the split path)
    n_scan = 10_000_000 // (100 if tiny else (10 if quick else 1))
    m = 256 if tiny else 8192 // (2 if quick else 1)
    batch = 64 if tiny else 4096
    rng = np.random.default_rng(0)
    x_selu = rng.standard_normal(n_big).astype(np.float32)
    x_scan = rng.standard_normal(n_scan).astype(np.float32)
    a32 = rng.standard_normal((m, m)).astype(np.float32)
    b32 = rng.standard_normal((m, m)).astype(np.float32)
    # (--tiny/--simulated: 512 wide, a ninth of the work on the simulation, same kernels and
    # paths: the launch, copy and graph columns are those of 784-2048-2048-10)
    sizes = (784, 512, 512, 10) if tiny else (784, 2048, 2048, 10)
    params = [((rng.standard_normal((i, o)) / np.sqrt(i)).astype(np.float32), np.zeros(o, np.float32))
              for i, o in zip(sizes[:-1], sizes[1:])]
    images = rng.standard_normal((batch, 784)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, batch)]
    conv_n, conv_hw, conv_c = (2, 12, 8) if tiny else (32 // (4 if quick else 1), 56, 64)
    x_conv = rng.standard_normal((conv_n, conv_hw, conv_hw, conv_c)).astype(np.float32)
    w_conv = (rng.standard_normal((3, 3, conv_c, 2 * conv_c if tiny else conv_c))
              / np.sqrt(9 * conv_c)).astype(np.float32)
    x_tiny = np.arange(3, dtype=np.float32)
    fft_rows, fft_n = (16, 64) if tiny else (1024, 1024)   # (a 2^20 batch at full size)
    x_fft = (rng.standard_normal((fft_rows, fft_n))
             + 1j * rng.standard_normal((fft_rows, fft_n))).astype(np.complex64)
    w_fft = np.exp(-np.linspace(0.0, 4.0, fft_n)).astype(np.complex64)   # a low-pass filter

    gp_n = 64 if tiny else 512
    k_gp = rng.standard_normal((gp_n, gp_n)).astype(np.float32)
    s_gp = (k_gp @ k_gp.T / gp_n + np.eye(gp_n)).astype(np.float32)   # positive definite
    y_gp = rng.standard_normal((gp_n, 1)).astype(np.float32)

    def gp_solve(L):
        linalg = L.lax.linalg

        def solve(s, y):   # s^-1 y = L^-T (L^-1 y)
            low = linalg.cholesky(s)
            z = linalg.triangular_solve(low, y, left_side=True, lower=True)
            return linalg.triangular_solve(low, z, left_side=True, lower=True, transpose_a=True)
        return L.jit(solve)

    pca_n, pca_d = (64, 16) if tiny else (4096, 256)
    x_pca = (rng.standard_normal((pca_n, pca_d))
             * np.linspace(3.0, 0.1, pca_d)).astype(np.float32)   # (distinct variances)

    def pca(L, rank=8):
        """The centred data's reduced SVD and its rank-``rank`` reconstruction (neither
        depends on the singular vectors' signs, which differ between libraries)."""
        def fit(x):
            c = x - L.jnp.mean(x, axis=0)
            u, s, vh = L.jnp.linalg.svd(c, full_matrices=False)
            return s, (u[:, :rank] * s[:rank]) @ vh[:rank]
        return L.jit(fit)

    def covariance_eigh(L):
        def fit(x):
            c = x - L.jnp.mean(x, axis=0)
            w, v = L.jnp.linalg.eigh(c.T @ c / x.shape[0])
            return w, (v * w) @ v.T
        return L.jit(fit)

    # cumsum along axis 0: a long axis of 4 columns (the few-columns single pass), a square
    # (the column kernel: a thread a column, 8 segments of the axis a block) and a short axis
    # of many columns (the column kernel, one segment); --tiny/--simulated: smaller, same paths
    # (the square cut in parts along the axis: a look-back a part; (1e5, 64): few rows of
    # many columns, the strided rows' single pass before)
    column_shapes = (((100_000, 4), (2048, 256), (8, 10_000), (64, 1000), (10_000, 64)) if tiny
                     else ((1_000_000, 4), (4096, 4096), (8, 1_000_000), (64, 100_000),
                           (100_000, 64)))
    x_columns = {shape: rng.standard_normal(shape).astype(np.float32) for shape in column_shapes}
    x_argmax = x_columns[column_shapes[1]]
    # random.categorical over a classifier's logits: Gumbel noise and argmax in one kernel
    logits = rng.standard_normal((64, 100) if tiny else (4096, 1000)).astype(np.float32)
    flat_params = [a for layer in params for a in layer]   # (the MLP's 6 parameters)

    def fed_back(L, upload=False):
        """A training loop: each call steps the parameters the last call returned (with
        ``upload``, on a batch uploaded from the host for the call, as a data loader does)."""
        step = L.jit(compare.mlp_update(L))
        state = [[(L.put(w), L.put(b)) for w, b in params]]

        def run(x, y):
            if upload:
                x, y = L.put(images), L.put(labels)
            state[0] = step(state[0], x, y)
            return state[0]
        return run

    def conv(L):
        return L.jit(lambda x, w: L.lax.conv_general_dilated(
            x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))

    def compiled_without(key, constant="VECTOR_MIN_ELEMENTS"):
        """Row ``key`` compiled with ``codegen.<constant>`` out of reach: without the
        elementwise kernels' vector path (``VECTOR_MIN_ELEMENTS``) or with every ``select_n``
        computing all its cases (``LAZY_SELECT_MIN_EQUATIONS``), plax's kernel as it was
        before that: the same card's before/after in one run; JAX's is the row's own."""
        def factory(L):
            fn, args = factories[key](L)
            if L.jnp.__name__.startswith("jax"):
                return fn, args
            from plax_cupy import codegen

            def call(*a):
                saved = getattr(codegen, constant)
                setattr(codegen, constant, 1 << 62)
                try:   # (read when the kernel is generated: the first call)
                    return fn(*a)
                finally:
                    setattr(codegen, constant, saved)
            return call, args
        return factory

    def original_threefry(key):
        """Row ``key`` in the original threefry layout (``jax_threefry_partitionable=False``),
        plax's and JAX's alike: the flag set around every call (each library reads it when it
        traces, and JAX keys its compiled programs by it)."""
        def factory(L):
            fn, args = factories[key](L)
            config = sys.modules[L.jnp.__name__.split(".")[0]].config

            def call(*a):
                saved = config.jax_threefry_partitionable
                config.update("jax_threefry_partitionable", False)
                try:
                    return fn(*a)
                finally:
                    config.update("jax_threefry_partitionable", saved)
            return call, args
        return factory

    factories = {
        "selu": lambda L: (L.jit(compare.selu_fn(L.jnp)), [L.put(x_selu)]),
        "matmul f32": lambda L: (L.jit(lambda a, b: a @ b), [L.put(a32), L.put(b32)]),
        "matmul bf16": lambda L: (L.jit(lambda a, b: a @ b),
                                  [L.put(a32).astype(L.jnp.bfloat16),
                                   L.put(b32).astype(L.jnp.bfloat16)]),
        # (a program per row: one jitted function's programs would share their buffer plans)
        "mlp step": lambda L: (L.jit(compare.mlp_update(L)),
                               [[(L.put(w), L.put(b)) for w, b in params], L.put(images),
                                L.put(labels)]),
        "mlp loop": lambda L: (fed_back(L), [L.put(images), L.put(labels)]),
        "mlp loop upload": lambda L: (fed_back(L, True), [None, None]),
        "random.normal": lambda L: (L.jit(lambda k: L.random.normal(k, (n_big,))),
                                    [L.put(L.random.PRNGKey(0))]),
        "tiny call": lambda L: (L.jit(lambda x: x * 2.0 + 1.0), [L.put(x_tiny)]),
        "cumsum": lambda L: (L.jit(lambda x: L.jnp.cumsum(x)), [L.put(x_scan)]),
        **{f"cumsum axis 0 {shape}": (lambda x: lambda L: (
            L.jit(lambda v: L.jnp.cumsum(v, axis=0)), [L.put(x)]))(x)
           for shape, x in x_columns.items()},
        "argmax axis 0": lambda L: (L.jit(lambda v: L.jnp.argmax(v, axis=0)), [L.put(x_argmax)]),
        "categorical": lambda L: (L.jit(lambda k, l: L.random.categorical(k, l)),
                                  [L.put(L.random.PRNGKey(0)), L.put(logits)]),
        "sgd update": lambda L: (L.jit(lambda ps, gs: [p - 0.01 * g for p, g in zip(ps, gs)]),
                                 [[L.put(a) for a in flat_params],
                                  [L.put(a) for a in flat_params]]),
        "conv 3x3": lambda L: (conv(L), [L.put(x_conv), L.put(w_conv)]),
        "fft filter": lambda L: (L.jit(lambda x, w: L.jnp.fft.ifft(L.jnp.fft.fft(x) * w)),
                                 [L.put(x_fft), L.put(w_fft)]),
        "gp solve": lambda L: (gp_solve(L), [L.put(s_gp), L.put(y_gp)]),
        "pca svd": lambda L: (pca(L), [L.put(x_pca)]),
        "covariance eigh": lambda L: (covariance_eigh(L), [L.put(x_pca)]),
    }
    factories.update({"selu scalar": compiled_without("selu"),
                      "random.normal scalar": compiled_without("random.normal"),
                      "random.normal both cases": compiled_without("random.normal",
                                                                   "LAZY_SELECT_MIN_EQUATIONS"),
                      "random.normal original": original_threefry("random.normal")})
    rows = [(f"selu {n_big:.0e} f32", 8 * n_big, "selu"),
            (f"selu {n_big:.0e} f32, scalar", 8 * n_big, "selu scalar"),
            (f"matmul {m}^2 f32", None, "matmul f32"),
            (f"matmul {m}^2 bf16", None, "matmul bf16"),
            (f"MLP step batch {batch}", None, "mlp step"),
            (f"MLP train loop batch {batch}", None, "mlp loop"),
            ("MLP loop, batch uploaded", None, "mlp loop upload"),
            (f"random.normal {n_big:.0e}", 4 * n_big, "random.normal"),
            (f"random.normal {n_big:.0e}, scalar", 4 * n_big, "random.normal scalar"),
            (f"random.normal {n_big:.0e}, both cases", 4 * n_big, "random.normal both cases"),
            (f"random.normal {n_big:.0e}, original", 4 * n_big, "random.normal original"),
            ("tiny jit call", None, "tiny call"),
            (f"cumsum 1 row {n_scan:.0e} f32", 8 * n_scan, "cumsum"),
            *[(f"cumsum axis 0 {shape[0]}x{shape[1]} f32", 8 * x.size, f"cumsum axis 0 {shape}")
              for shape, x in x_columns.items()],
            (f"argmax axis 0 {x_argmax.shape[0]}x{x_argmax.shape[1]} f32", 4 * x_argmax.size,
             "argmax axis 0"),
            (f"random.categorical {logits.shape[0]}x{logits.shape[1]}", 4 * logits.size,
             "categorical"),
            (f"SGD update {'-'.join(map(str, sizes))} params",
             12 * sum(a.size for a in flat_params), "sgd update"),
            (f"conv 3x3 {conv_n}x{conv_hw}^2x{conv_c} f32", None, "conv 3x3"),
            (f"FFT filter {fft_rows}x{fft_n} c64", None, "fft filter"),
            (f"GP solve {gp_n}^2 f32", None, "gp solve"),
            (f"PCA svd {pca_n}x{pca_d} f32", None, "pca svd"),
            (f"covariance eigh {pca_d}^2 f32", None, "covariance eigh")]
    # the CPU table's rows (its --quick sizes with --quick and --tiny)
    for label, impls in compare.make_workloads(quick or tiny, specials=False):
        if label.startswith(CPU_TABLE_ROWS):
            rows.append((label, None, label))
            factories[label] = impls["plax"]
    return rows, factories


def plax_lib(device):
    """plax as compare.py's jax-like ``L``: jitted on the CuPy backend, arrays put on
    ``device``."""
    import compare
    import plax
    return compare._Lib(plax, lambda f: plax.jit(f, backend="cupy"),
                        lambda x: plax.device_put(x, device), plax.block_until_ready)


def jax_lib():
    """``(L, note)``: JAX on its first GPU as compare.py's ``L`` (TF32 off, as plax), or
    ``(None, why)`` where JAX has no GPU."""
    try:
        import jax
        gpus = jax.devices("gpu")
    except Exception as err:  # noqa: BLE001 - reported in the table
        return None, f"JAX GPU unavailable ({type(err).__name__}: {str(err).splitlines()[0][:80]})"
    import compare
    jax.config.update("jax_default_matmul_precision", "highest")  # no TF32, as plax
    return compare._Lib(jax, jax.jit, lambda x: jax.device_put(x, gpus[0]),
                        jax.block_until_ready), ""


class _TopPrograms:
    """Records the programs the CuPy backend compiles while active, outermost only (a
    control-flow body compiled inside its program's compilation is not one of them)."""

    def __init__(self, backend):
        self.backend, self.made, self._depth = backend, [], 0

    def __enter__(self):
        self._own = self.backend.__dict__.get("compile")   # (an instance's own, if any)
        compile_ = self.backend.compile

        def recording(jaxpr, device):
            self._depth += 1
            try:
                made = compile_(jaxpr, device)
            finally:
                self._depth -= 1
            if not self._depth:
                self.made.append(made)
            return made
        self.backend.compile = recording
        return self

    def __exit__(self, *exc):
        if self._own is None:
            del self.backend.compile
        else:
            self.backend.compile = self._own


def graph_state(executable) -> str:
    """The state the ``# CUDA graph:`` line of a compiled program's ``as_text()`` gives
    (``graphs.GraphedProgram.describe``), shortened: ``replayed, verified`` (each plan's first
    two launches equal to a plain run of the same call, ``plax_cupy.graph_check``: a plan that
    fails it is dropped, so a plan kept with the check on is verified), ``replayed, not
    verified`` (``PLAX_CUDA_GRAPHS_VERIFY=0``), ``WRONG REPLAY caught (runs plainly): <the first
    difference>``, ``no: <reason>``, or ``to be captured on the second call``; read from the
    program's ``GraphedProgram`` itself (``executable.graphed``, set on every program the CuPy
    backend compiles)."""
    program = executable.graphed
    if program.mismatch:
        return f"WRONG REPLAY caught (runs plainly): {program.mismatch}"
    if program.reason:
        return f"no: {program.reason}"
    if not program.plans:
        return "to be captured on the second call"
    if program.check is None:
        return "replayed, not verified (PLAX_CUDA_GRAPHS_VERIFY=0)"
    return "replayed, verified"


def copy_rate(nbytes: int, repeat: int, budget: float = 0.1) -> float:
    """The card's device-to-device copy rate in GB/s: bytes read plus written per second by a
    ``cupy.copyto`` of ``nbytes`` between two device buffers (synchronised after each copy)."""
    import cupy
    src = cupy.ones(nbytes // 4, np.float32)
    dst = cupy.empty_like(src)

    def copy():
        cupy.copyto(dst, src)
        cupy.cuda.runtime.deviceSynchronize()
    return 2 * src.nbytes / _time(copy, repeat, budget) / 1e9


def _cupy_backend():
    """The CuPy backend (registered here in a checkout without the entry point)."""
    from plax import plugins
    if "cupy" not in plugins.registry().backends:
        import plax_cupy.plugin
        plugins.register_plugin(plax_cupy.plugin, name="plax_cupy_bench")
    return plugins.registry().get_backend("cupy")


def _blocking(fn, args):
    def call():
        out = fn(*args)
        leaves = out if isinstance(out, (list, tuple)) else [out]
        for leaf in leaves:
            for x in (leaf if isinstance(leaf, (list, tuple)) else [leaf]):
                if hasattr(x, "block_until_ready"):
                    x.block_until_ready()
        return out
    return call


def _first_call_child(opts) -> int:
    """In a fresh process: the MLP step's first call (trace + compile + run), one JSON line."""
    import json
    gpu, reason = _gpu_or_none()
    _, factories = workloads(opts.quick, opts.tiny)
    if opts.first_call_child == "jax":
        lib, note = jax_lib()
        if lib is None:
            print(json.dumps({"error": note}))
            return 0
    else:
        if gpu is None:
            print(json.dumps({"error": reason}))
            return 0
        lib = plax_lib(_cupy_backend().devices()[0])
    call = _blocking(*factories["mlp step"](lib))
    t0 = time.perf_counter()
    call()
    seconds = time.perf_counter() - t0
    result = {"seconds": seconds}
    if opts.first_call_child == "plax":
        from plax_cupy import kernel_modules
        stats = kernel_modules.stats()
        result.update(built=stats["built"], compiles=stats["compiled"])
    print(json.dumps(result))
    return 0


def first_call_table(opts) -> None:
    """Prints the first-call table (see the module): each run a child process."""
    import json
    import subprocess
    import tempfile
    flags = [f for f, on in (("--simulated", opts.simulated), ("--tiny", opts.tiny),
                             ("--quick", opts.quick)) if on]

    def child(kind, cache, threads=None):
        # (JAX in this process already holds most of the card: a child's JAX must not
        # preallocate its default 75% on top)
        env = dict(os.environ, CUPY_CACHE_DIR=os.path.join(cache, "cupy"), TMPDIR=cache,
                   PLAX_CUPY_CACHE_DIR=os.path.join(cache, "plax_cupy"),
                   XLA_PYTHON_CLIENT_PREALLOCATE="false")
        env.pop("PLAX_CUPY_COMPILE_THREADS", None)
        if threads:
            env["PLAX_CUPY_COMPILE_THREADS"] = str(threads)
        done = subprocess.run([sys.executable, os.path.abspath(__file__), *flags,
                               "--first-call-child", kind], capture_output=True, text=True,
                              env=env, timeout=1800)
        lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
        if done.returncode != 0 or not lines:
            return {"error": (done.stderr.strip().splitlines() or ["no output"])[-1][:100]}
        return json.loads(lines[-1])

    with tempfile.TemporaryDirectory() as serial_dir, tempfile.TemporaryDirectory() as cache:
        runs = [("cold cache, 1 thread", child("plax", serial_dir, threads=1)),
                ("cold cache, concurrent", child("plax", cache)),
                ("warm cache (2nd process)", child("plax", cache))]
        jax = child("jax", cache)
    t_jax = jax.get("seconds")
    print(f"\nMLP step first call (trace + compile + run), each in a fresh process"
          f"{'' if t_jax else ' (jax: ' + jax.get('error', '?') + ')'}")
    print(f"{'plax run':28s} {'plax-cupy':>12s} {'jax':>12s} {'plax/jax':>9s} {'built':>6s} {'compiles':>8s}")
    for label, r in runs:
        if "error" in r:
            print(f"{label:28s} failed: {r['error']}")
            continue
        ratio = f"{r['seconds'] / t_jax:9.2f}" if t_jax else f"{'-':>9s}"
        jt = f"{t_jax:11.3f}s" if t_jax else f"{'-':>12s}"
        print(f"{label:28s} {r['seconds']:11.3f}s {jt} {ratio} {r['built']:6d} {r['compiles']:8d}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--peak-gbs", type=float, default=None)
    ap.add_argument("--tiny", action="store_true",
                    help="minute sizes, one timed call a cell (checks the script runs, e.g. on "
                         "tests/cupy's simulated GPU)")
    ap.add_argument("--simulated", action="store_true",
                    help="--tiny on tests/cupy's simulated GPU (fake_cupy), for CI without a GPU")
    ap.add_argument("--first-call", action="store_true",
                    help="only the first-call table (trace + compile), cold and warm kernel cache")
    ap.add_argument("--first-call-child", choices=("plax", "jax"), help=argparse.SUPPRESS)
    opts = ap.parse_args(argv)
    if opts.simulated:
        simulated_gpu.install()
        opts.tiny = True
    if opts.tiny:
        opts.repeat = 1
    if opts.first_call_child:
        return _first_call_child(opts)
    gpu, reason = _gpu_or_none()
    if gpu is None:
        print(f"benchmarks/gpu.py: no GPU to measure on ({reason}); nothing to do.")
        return 0
    if opts.first_call:
        first_call_table(opts)
        return 0
    import plax
    backend = _cupy_backend()
    rows, factories = workloads(opts.quick, opts.tiny)
    plax_l = plax_lib(backend.devices()[0])
    jax_l, jax_note = jax_lib()
    peak = opts.peak_gbs or _peak_gbs()
    # (--tiny: one timed call a cell, no batch of calls filling 0.1 s: the times mean nothing
    # at those sizes, and on the simulated GPU the counters are the point)
    budget = 0.0 if opts.tiny else 0.1
    copy_gbs = copy_rate((400_000_000 // (10_000 if opts.tiny else 1)), opts.repeat, budget)
    print(f"GPU: {gpu.name} (cuda:{gpu.id}, sm_{gpu.compute_capability[0]}{gpu.compute_capability[1]}, "
          f"{gpu.total_memory >> 30} GiB){f', peak {peak:.0f} GB/s' if peak else ''}, "
          f"device-to-device copy {copy_gbs:.0f} GB/s (read + written); plax {plax.__version__}")
    if jax_note:
        print(f"note: {jax_note}")
    print(f"{'workload':28s} {'plax-cupy':>12s} {'jax':>12s} {'plax/jax':>9s} "
          f"{'launches':>8s} {'h2d':>4s} {'d2h':>4s} {'fallbk':>6s} {'d2d':>4s} {'no-graph':>8s}"
          f"  {'bandwidth':34s} graph")
    for label, nbytes, key in rows:
        # (the CPU table's rows, keyed by their label: three repetitions, so that the run
        # fits a device slot)
        repeat = min(opts.repeat, 3) if key == label else opts.repeat
        try:
            with _TopPrograms(backend) as programs:
                call = _blocking(*factories[key](plax_l))
                t_plax = _time(call, repeat, budget)
        except Exception as err:  # noqa: BLE001 - one failing row must not hide the others
            print(f"{label:28s} plax-cupy failed: {type(err).__name__}: {str(err)[:120]}")
            continue
        cost = _per_call(call)
        graph = graph_state(programs.made[0]) if programs.made else "-"
        del call
        cost += f" {_launches_without_graphs(lambda: factories[key](plax_l)):8d}"
        try:
            t_jax = (_time(_blocking(*factories[key](jax_l)), repeat, budget) if jax_l
                     else None)
        except Exception as err:  # noqa: BLE001
            print(f"{'':28s} (jax failed: {type(err).__name__}: {str(err)[:100]})")
            t_jax = None
        ratio = f"{t_plax / t_jax:9.2f}" if t_jax else f"{'-':>9s}"
        bw = ""
        if nbytes:
            gbs = nbytes / t_plax / 1e9
            bw = f"{gbs:7.0f} GB/s ({100 * gbs / copy_gbs:.0f}% of copy" + \
                (f", {100 * gbs / peak:.0f}% of peak)" if peak else ")")
        jt = f"{t_jax * 1e3:10.3f}ms" if t_jax else f"{'-':>12s}"
        print(f"{label:28s} {t_plax * 1e3:10.3f}ms {jt} {ratio} {cost}  {bw:34s} {graph}")
    simulated = getattr(sys.modules.get("cupy"), "__version__", "").endswith("simulated")
    if not simulated:  # (child processes of minutes on the simulation: --simulated --first-call)
        first_call_table(opts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
