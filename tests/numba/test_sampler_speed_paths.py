"""The large-array paths of the Numba backend's fused kernels stay bit-identical to the NumPy
backend: kernels writing into outputs their wrapper allocates (``KernelPlan.out_params``) and
split clusters run chunk by chunk in one kernel (``plax_numba.codegen_split``, e.g.
``random.normal``'s ``erf_inv`` around NumPy's ``log1p``). Correctness only, no timing."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
from plax import lax, random
from plax.lowering import PlaxFallbackWarning

from plax_numba import codegen, codegen_split, emitter
from numba_vs_numpy import assert_bits_equal, jit_both


@pytest.mark.parametrize("shape", [(emitter.CHUNK_MIN + 12_345,), (600, 500)])
def test_large_samplers_bit_identical(shape):
    def sample(key):
        k1, k2 = random.split(key)
        return (random.normal(k1, shape), random.uniform(k2, shape, minval=-3.0, maxval=2.5),
                random.bits(k2, shape))
    got, want = jit_both(sample, random.PRNGKey(7), fallback_is_error=True)
    for g, w in zip(got, want):
        assert_bits_equal(g, w)


def _several_outputs(x, s):
    y = x * s - 0.25
    z = lax.log1p(y)
    w = z * x + s
    return y, w, lax.log1p(w * w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_chunked_split_cluster_with_several_outputs(dtype):
    n = emitter.CHUNK_MIN + codegen_split.CHUNK // 2 + 3   # a partial last chunk
    rng = np.random.default_rng(1)
    x = rng.uniform(-0.999, 3.0, n).astype(dtype)
    x[:6] = [0.0, -0.0, np.inf, np.nan, -1.0, -0.5]
    with plax.config.override("jax_enable_x64", dtype == np.float64):
        text = plax.jit(_several_outputs, backend="numba").lower(x, dtype(1.5)).compile().as_text()
        got, want = jit_both(_several_outputs, x, dtype(1.5), fallback_is_error=True)
    assert text.count("log1p_into(") == 2 and "for c in prange(" in text, text
    for g, w in zip(got, want):
        assert_bits_equal(g, w)


def _split_cluster(f, *args):
    from plax.lowering import Cluster, find_clusters
    jaxpr = plax.make_jaxpr(f)(*args).jaxpr
    return next(u for u in find_clusters(jaxpr, codegen.FUSES) if isinstance(u, Cluster))


def test_split_plan_serial_when_asked_and_declines_broadcasts():
    # (plans only, nothing compiled) a program whose BLAS threads hold the cores asks for
    # serial loops: the chunks then run in order; an operand broadcast inside the cluster
    # is not a flat chunk of it: the segments then run one after the other on whole arrays
    x = np.ones(emitter.CHUNK_MIN, np.float32)
    cluster = _split_cluster(_several_outputs, x, np.float32(1.5))
    assert "for c in prange(" in codegen_split.plan_split(cluster).source
    serial = codegen_split.plan_split(cluster, parallel=False).source
    assert "prange(" not in serial and "for c in range(" in serial, serial
    rows = lambda x, r: lax.log1p(x * lax.broadcast_in_dim(r, x.shape, (1,))) + 1.0  # noqa: E731
    cluster = _split_cluster(rows, np.ones((256, 256), np.float32), np.ones(256, np.float32))
    with pytest.raises(codegen.Unsupported, match="broadcast"):
        codegen_split.plan_split(cluster)


def test_large_kernels_take_preallocated_outputs():
    from plax.lowering import find_clusters, Cluster
    n = codegen.PARALLEL_MIN
    jaxpr = plax.make_jaxpr(lambda x: (x * 2.0 + 1.0, x - 3.0))(np.ones(n, np.float32)).jaxpr
    cluster = next(u for u in find_clusters(jaxpr) if isinstance(u, Cluster))
    plan = codegen.plan_cluster(cluster, preallocate=True)
    assert plan.out_params and "def kernel(a0, a1, a2, a3, o0, o1, n)" in plan.source, plan.source
    assert not codegen.plan_cluster(cluster).out_params   # the default: wholegen's form
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    got, want = jit_both(lambda x: (x * 2.0 + 1.0, x - 3.0), x, fallback_is_error=True)
    for g, w in zip(got, want):
        assert_bits_equal(g, w)


# ---- tiered mode (the default): the unchunked path until the chunk kernels are compiled

def _tiered_calls(monkeypatch, f, *args, calls=3):
    """Jitted ``f`` run ``calls`` times in tiered mode (hot after 2 runs), waiting for the
    background compilations after each call; returns each call's outputs and how many times
    each call ran the reference ``log1p`` kernel (the unchunked path; the chunked kernel
    calls NumPy's loop natively). No kernel counts as compiled in this process, nor on disk
    (a fresh cache directory: a kernel found there loads at once), so the split cluster's
    step is tiered whatever ran before."""
    import tempfile
    from plax_numba import cache, tiered
    monkeypatch.delenv("PLAX_NUMBA_SYNC", raising=False)
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "2")
    monkeypatch.setattr(cache, "_compiled", {})
    monkeypatch.setattr(cache, "_dir", tempfile.mkdtemp(prefix="plax_numba_test_"))
    backend = plax.plugins.registry().backends["numba"]
    reference, counted = backend.eager_impl(lax.log1p_p), []

    def log1p(*a, **k):
        counted.append(1)
        return reference(*a, **k)
    monkeypatch.setitem(backend.kernels, lax.log1p_p, log1p)
    # (a fresh function: another test's program of ``f``, compiled, is not reused)
    jf = plax.jit(lambda *a: f(*a), backend="numba")
    outs, runs = [], []
    for _ in range(calls):
        before = len(counted)
        outs.append([np.asarray(x) for x in plax.tree_util.tree_leaves(jf(*args))])
        assert tiered.wait_idle(timeout=300)
        runs.append(len(counted) - before)
    want = [np.asarray(x) for x in plax.tree_util.tree_leaves(plax.jit(f, backend="numpy")(*args))]
    return outs, runs, want


@pytest.mark.parametrize("case", ["normal", "several_outputs"])
def test_tiered_split_cluster_switches_to_chunks(monkeypatch, case):
    if case == "normal":
        shape = (emitter.CHUNK_MIN + 12_345,)
        f, args = (lambda key: random.normal(key, shape)), (random.PRNGKey(11),)
    else:
        n = emitter.CHUNK_MIN + codegen_split.CHUNK // 2 + 3
        x = np.random.default_rng(2).uniform(-0.999, 3.0, n).astype(np.float32)
        f, args = _several_outputs, (x, np.float32(1.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaxFallbackWarning)
        outs, runs, want = _tiered_calls(monkeypatch, f, *args)
    # calls 1 and 2 (hot: the kernel compiles in the background) on the reference kernels,
    # then the chunked kernel (NumPy's log1p loop called from it, not from Python)
    assert runs[0] == runs[1] > 0 and runs[2] == 0, runs
    for got in outs:
        for g, w in zip(got, want):
            assert_bits_equal(g, w)


def test_tiered_chunk_compile_failure_keeps_unchunked_path(monkeypatch):
    from plax_numba import cache

    def broken(text, arg_types):
        raise RuntimeError("simulated numba failure")
    monkeypatch.setattr(cache, "compile_kernel", broken)
    n = emitter.CHUNK_MIN + 5
    x = np.random.default_rng(3).uniform(-0.5, 2.0, n).astype(np.float32)
    with pytest.warns(PlaxFallbackWarning, match="simulated numba failure"):
        outs, runs, want = _tiered_calls(monkeypatch, _several_outputs, x, np.float32(0.5))
    assert runs[0] == runs[1] == runs[2] > 0, runs
    for got in outs:
        for g, w in zip(got, want):
            assert_bits_equal(g, w)


def test_as_text_shows_the_chunk_kernel():
    # random.normal's large erf_inv cluster runs in chunks around NumPy's log1p: one threaded
    # kernel over the chunks, calling the segments' serial kernels and NumPy's loop natively
    text = plax.jit(lambda k: random.normal(k, (emitter.CHUNK_MIN,)), backend="numba").lower(
        random.PRNGKey(0)).compile().as_text()
    [chunked] = [k for k in text.split("# ---- fused kernel")[1:] if "log1p_into(" in k]
    assert "for c in prange(" in chunked and "def segment0(" in chunked, chunked
    assert "np.log1p" not in text, text
