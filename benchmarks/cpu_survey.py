"""Typical programs of JAX's tutorials, jitted, plax on Numba beside JAX on the CPU, in one run.

    python benchmarks/cpu_survey.py [--repeat R] [--match PREFIX,...] [--quick] [--blas-threads]

Rows: the CPU table's MLP step (784-512-512-10, batch 128, ``compare.mlp_update``), then a
survey of small float32 programs the tutorials write: the gradient of a cross-entropy over
``log_softmax`` + ``take_along_axis``, layer norm, scaled dot-product attention, a 3x3
convolution, ``cumsum`` along rows, ``argsort`` of rows, ``top_k``, an embedding lookup and its
gradient (gather + scatter-add), ``one_hot``, a batched ``einsum`` and ``logsumexp``. Each cell
is the fastest, over ``--repeat`` alternating batches of calls, of the wall time per call and
of the process CPU time per call (every thread), after a warm-up call that compiles
(``compare.fastest_per_call``; ``PLAX_NUMBA_SYNC=1`` so no timed call waits on numba). The
ratio columns are plax-numba / JAX (below 1: plax is faster). ``--blas-threads`` adds the MLP
step run with OpenBLAS on one thread beside its compiled form and JAX, best and median (on a
loaded host OpenBLAS's threaded products wait for cores other processes hold;
``PLAX_NUMBA_SPLIT_PRODUCTS=1`` compiles the large products as column blocks instead). See
docs/performance.md.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import sys

os.environ.setdefault("PLAX_NUMBA_SYNC", "1")  # compile before timing (read at compile time)
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

import compare  # noqa: E402


# ---------------------------------------------------------------- the programs

def mlp_step(L, rng):
    """The CPU table's MLP step (compare.py's row), 784-512-512-10, batch 128."""
    params = [(L.put(w), L.put(b)) for w, b in compare._mlp_params(rng)]
    images = rng.standard_normal((128, 784)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
    return compare.mlp_update(L), (params, L.put(images), L.put(labels))


def xent_grad(L, rng):
    """Gradient of the mean cross-entropy over log_softmax + take_along_axis, logits 128x1000."""
    jnp = L.jnp
    logits = rng.standard_normal((128, 1000)).astype(np.float32)
    labels = rng.integers(0, 1000, 128).astype(np.int32)

    def loss(z, y):
        logp = L.nn.log_softmax(z, axis=-1)
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))
    return L.grad(loss), (L.put(logits), L.put(labels))


def layer_norm(L, rng):
    """Layer norm over the last axis of 1024x512, with scale and offset."""
    jnp = L.jnp
    x = rng.standard_normal((1024, 512)).astype(np.float32)
    scale = rng.standard_normal(512).astype(np.float32)
    offset = rng.standard_normal(512).astype(np.float32)

    def norm(x, g, b):
        mean = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
        return (x - mean) * L.lax.rsqrt(var + 1e-5) * g + b
    return norm, (L.put(x), L.put(scale), L.put(offset))


def attention(L, rng):
    """Scaled dot-product attention, batch 8, 128 tokens, 64 wide."""
    jnp = L.jnp
    q, k, v = (rng.standard_normal((8, 128, 64)).astype(np.float32) for _ in range(3))

    def attend(q, k, v):
        scores = jnp.einsum("bqd,bkd->bqk", q, k) / np.float32(8.0)
        return jnp.einsum("bqk,bkd->bqd", L.nn.softmax(scores, axis=-1), v)
    return attend, (L.put(q), L.put(k), L.put(v))


def conv3x3(L, rng):
    """3x3 'SAME' convolution, NHWC 8x32x32x16 -> 16 features (HWIO kernel)."""
    x = rng.standard_normal((8, 32, 32, 16)).astype(np.float32)
    w = (rng.standard_normal((3, 3, 16, 16)) / 12).astype(np.float32)

    def conv(x, w):
        return L.lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                          dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return conv, (L.put(x), L.put(w))


def cumsum_rows(L, rng):
    """cumsum along the rows of 512x1024."""
    x = rng.standard_normal((512, 1024)).astype(np.float32)
    return (lambda x: L.jnp.cumsum(x, axis=1)), (L.put(x),)


def argsort_rows(L, rng):
    """argsort of each row of 512x1024."""
    x = rng.standard_normal((512, 1024)).astype(np.float32)
    return (lambda x: L.jnp.argsort(x, axis=-1)), (L.put(x),)


def top_k(L, rng):
    """lax.top_k, k=8, of each row of 512x1024."""
    x = rng.standard_normal((512, 1024)).astype(np.float32)
    return (lambda x: L.lax.top_k(x, 8)), (L.put(x),)


def embedding(L, rng):
    """Embedding lookup (a 10000x128 table, 8x128 ids) and the table's gradient."""
    jnp = L.jnp
    table = rng.standard_normal((10000, 128)).astype(np.float32)
    ids = rng.integers(0, 10000, (8, 128)).astype(np.int32)

    def lookup_and_grad(table, ids):
        def loss(t):
            return jnp.sum(jnp.tanh(t[ids]))
        return L.value_and_grad(loss)(table)
    return lookup_and_grad, (L.put(table), L.put(ids))


def one_hot(L, rng):
    """nn.one_hot of 4096 labels over 1000 classes (float32)."""
    labels = rng.integers(0, 1000, 4096).astype(np.int32)
    return (lambda y: L.nn.one_hot(y, 1000)), (L.put(labels),)


def einsum_batched(L, rng):
    """einsum 'bij,bjk->bik', 32 batches of 128x64 @ 64x128."""
    a = rng.standard_normal((32, 128, 64)).astype(np.float32)
    b = rng.standard_normal((32, 64, 128)).astype(np.float32)
    return (lambda a, b: L.jnp.einsum("bij,bjk->bik", a, b)), (L.put(a), L.put(b))


def logsumexp_rows(L, rng):
    """logsumexp along the rows of 1024x1024."""
    x = rng.standard_normal((1024, 1024)).astype(np.float32)
    return (lambda x: L.scipy.special.logsumexp(x, axis=1)), (L.put(x),)


PROGRAMS = [
    ("MLP step 784-512-512-10 b128", mlp_step),
    ("grad xent log_softmax+take_along_axis 128x1000", xent_grad),
    ("layer norm 1024x512", layer_norm),
    ("attention b8 t128 d64", attention),
    ("conv 3x3 NHWC 8x32x32x16->16", conv3x3),
    ("cumsum rows 512x1024", cumsum_rows),
    ("argsort rows 512x1024", argsort_rows),
    ("top_k 8 of 512x1024", top_k),
    ("embedding 10000x128 lookup+grad", embedding),
    ("one_hot 4096x1000", one_hot),
    ("einsum bij,bjk->bik 32x128x64", einsum_batched),
    ("logsumexp rows 1024x1024", logsumexp_rows),
]


# ---------------------------------------------------------------- the libraries and the table

class _Namespace:
    """compare._Lib plus the names the survey needs (nn, scipy, value_and_grad)."""

    def __init__(self, lib, module):
        self.__dict__.update(vars(lib))
        self.nn, self.scipy = module.nn, module.scipy
        self.value_and_grad = module.value_and_grad
        import importlib
        importlib.import_module(module.__name__ + ".scipy.special")


def survey_libraries() -> tuple[dict, list[str]]:
    """``{"plax-numba": ns, "jax": ns}`` (JAX where installed) and notes for the header."""
    libs, notes = compare.libraries()
    import plax
    out = {}
    if "plax-numba" in libs:
        out["plax-numba"] = _Namespace(libs["plax-numba"], plax)
    if "jax" in libs:
        import jax
        out["jax"] = _Namespace(libs["jax"], jax)
    return out, [n for n in notes if not n.startswith("plax-numpy")]


def measure(repeat: int, target: float, match: list[str] | None = None) -> list[list[str]]:
    """One table row per program: plax-numba and JAX wall time, their ratio, the CPU-time
    ratio."""
    libs, _ = survey_libraries()
    rows = []
    for label, make in PROGRAMS:
        if match and not any(label.startswith(m) for m in match):
            continue
        calls = {}
        for column, L in libs.items():
            fn, args = make(L, np.random.default_rng(0))
            jitted = L.jit(fn)
            calls[column] = (lambda j=jitted, a=args, L=L: L.block(j(*a)))
        best = compare.fastest_per_call(calls, repeat, target)
        plax_t, jax_t = best.get("plax-numba"), best.get("jax")
        ratio = f"{plax_t[0] / jax_t[0]:.2f}" if plax_t and jax_t else "-"
        cpu_ratio = f"{plax_t[1] / jax_t[1]:.2f}" if plax_t and jax_t else "-"
        rows.append([label, compare.fmt(plax_t and plax_t[0]), compare.fmt(jax_t and jax_t[0]),
                     ratio, cpu_ratio])
        print("  ".join(rows[-1]), file=sys.stderr, flush=True)
    return rows


def mlp_blas_threads(rounds: int) -> list[str]:
    """The MLP step as compiled and on one BLAS thread, beside JAX, 10-call
    batches alternating in this process for ``rounds`` rounds: lines giving best and median
    wall and CPU milliseconds per call (what a host's load does to threaded products)."""
    import statistics
    import time
    from plax import blas_threads
    libs, _ = survey_libraries()
    calls = {}
    for column, L in libs.items():
        fn, args = mlp_step(L, np.random.default_rng(0))
        jitted = L.jit(fn)
        call = (lambda j=jitted, a=args, L=L: L.block(j(*a)))
        calls[column + (" (as compiled)" if column == "plax-numba" else "")] = call
        if column == "plax-numba":
            calls["plax-numba (one BLAS thread)"] = blas_threads.on_one_thread(call)
    times = {name: [] for name in calls}
    for name, call in calls.items():
        call()
    for _ in range(rounds):
        for name, call in calls.items():
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(10):
                call()
            times[name].append(((time.perf_counter() - w0) / 10, (time.process_time() - c0) / 10))
    lines = []
    for name, runs in times.items():
        wall, cpu = [w for w, _ in runs], [c for _, c in runs]
        lines.append(f"{name}: wall best {compare.fmt(min(wall))}, median "
                     f"{compare.fmt(statistics.median(wall))}; CPU best {compare.fmt(min(cpu))}, "
                     f"median {compare.fmt(statistics.median(cpu))}")
    return lines


def table(rows: list[list[str]]) -> str:
    header = ["program", "plax-numba", "JAX", "numba / JAX", "CPU numba / JAX"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * 4) + "|"]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=None,
                        help="alternating batches per cell (default 9, 2 with --quick)")
    parser.add_argument("--quick", action="store_true", help="few, short batches (smoke test)")
    parser.add_argument("--match", default=None,
                        help="comma-separated label prefixes (e.g. 'MLP,argsort')")
    parser.add_argument("--blas-threads", action="store_true",
                        help="also time the MLP step on one BLAS thread beside its compiled "
                             "form and JAX (best and median of alternating batches; "
                             "PLAX_NUMBA_SPLIT_PRODUCTS=1 compiles its large products as column blocks)")
    args = parser.parse_args(argv)
    repeat = args.repeat or (2 if args.quick else 9)
    rows = measure(repeat, 0.005 if args.quick else 0.04,
                   args.match and args.match.split(","))
    _, notes = survey_libraries()
    print(f"{os.cpu_count()} CPU cores; " + "; ".join(notes))
    print(f"fastest of {repeat} alternating batches per cell, wall-clock; the last column "
          f"compares process CPU time (every thread); load average {os.getloadavg()[0]:.1f}")
    print(table(rows))
    if args.blas_threads:
        print(f"\nMLP step as compiled against one BLAS thread ({repeat} alternating "
              f"rounds of 10 calls; load average {os.getloadavg()[0]:.1f}):")
        print("\n".join(mlp_blas_threads(repeat)))


if __name__ == "__main__":
    main()
