"""The large-array paths of the Numba backend's fused kernels stay bit-identical to the NumPy
backend: kernels writing into outputs their wrapper allocates (``KernelPlan.out_params``) and
split clusters run chunk by chunk on worker threads (``NumbaEmitter._emit_split``, e.g.
``random.normal``'s ``erf_inv`` around NumPy's ``log1p``). Correctness only, no timing."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
from plax import lax, random
from plax.lowering import PlaxFallbackWarning

from plax_numba import codegen, emitter
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


def test_chunked_split_cluster_with_several_outputs():
    n = emitter.CHUNK_MIN + emitter.CHUNK // 2 + 3   # a partial last chunk
    rng = np.random.default_rng(1)
    x = rng.uniform(-0.999, 3.0, n).astype(np.float32)
    x[:6] = [0.0, -0.0, np.inf, np.nan, -1.0, -0.5]

    def f(x, s):
        y = x * s - 0.25
        z = lax.log1p(y)
        w = z * x + s
        return y, w, lax.log1p(w * w)

    got, want = jit_both(f, x, np.float32(1.5), fallback_is_error=True)
    for g, w in zip(got, want):
        assert_bits_equal(g, w)


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
    background compilations after each call; returns each call's outputs and how many chunked
    runs (:func:`emitter._run_on_workers`) it made. No kernel counts as compiled in this
    process, nor on disk (a fresh cache directory: a kernel found there loads at once), so the
    split cluster's step is tiered whatever ran before."""
    import tempfile
    from plax_numba import cache, tiered
    monkeypatch.delenv("PLAX_NUMBA_SYNC", raising=False)
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "2")
    monkeypatch.setattr(cache, "_compiled", {})
    monkeypatch.setattr(cache, "_dir", tempfile.mkdtemp(prefix="plax_numba_test_"))
    chunked = []
    real = emitter._run_on_workers

    def spy(work, chunks):
        chunked.append(chunks)
        return real(work, chunks)
    monkeypatch.setattr(emitter, "_run_on_workers", spy)
    jf = plax.jit(f, backend="numba")
    outs, runs = [], []
    for _ in range(calls):
        before = len(chunked)
        outs.append([np.asarray(x) for x in plax.tree_util.tree_leaves(jf(*args))])
        assert tiered.wait_idle(timeout=300)
        runs.append(len(chunked) - before)
    want = [np.asarray(x) for x in plax.tree_util.tree_leaves(plax.jit(f, backend="numpy")(*args))]
    return outs, runs, want


def _several_outputs(x, s):
    y = x * s - 0.25
    z = lax.log1p(y)
    w = z * x + s
    return y, w, lax.log1p(w * w)


@pytest.mark.parametrize("case", ["normal", "several_outputs"])
def test_tiered_split_cluster_switches_to_chunks(monkeypatch, case):
    if case == "normal":
        shape = (emitter.CHUNK_MIN + 12_345,)
        f, args = (lambda key: random.normal(key, shape)), (random.PRNGKey(11),)
    else:
        n = emitter.CHUNK_MIN + emitter.CHUNK // 2 + 3
        x = np.random.default_rng(2).uniform(-0.999, 3.0, n).astype(np.float32)
        f, args = _several_outputs, (x, np.float32(1.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaxFallbackWarning)
        outs, runs, want = _tiered_calls(monkeypatch, f, *args)
    # calls 1 and 2 (hot: the kernels compile in the background) unchunked, then chunked
    assert runs == [0, 0, 1], runs
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
    assert runs == [0, 0, 0], runs
    for got in outs:
        for g, w in zip(got, want):
            assert_bits_equal(g, w)


def test_as_text_shows_the_chunk_kernels():
    # random.normal's large erf_inv cluster runs in chunks around NumPy's log1p: the chunk
    # kernels (serial, out= parameters) are listed beside the whole-array ones
    text = plax.jit(lambda k: random.normal(k, (emitter.CHUNK_MIN,)), backend="numba").lower(
        random.PRNGKey(0)).compile().as_text()
    kernels = text.split("# ---- fused kernel")[1:]
    serial = [k for k in kernels if "prange(" not in k]
    parallel = [k for k in kernels if "prange(" in k]
    assert parallel and len(serial) >= 2, text
