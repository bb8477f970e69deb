"""``threefry2x32`` inside generated code (issue 26, item 3): a multi-result equation in a
fusion cluster (both words hashed in the loop, the cluster continuing from either), and in
native loops (``random.gamma``/``beta``/``dirichlet``'s rejection ``while_loop`` as one
kernel, NumPy's ``log1p`` called from it). The bits equal the NumPy backend's: the PRNG is
bit-identical across backends."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
from plax import lax, random
from plax.lowering import (Cluster, FusionOptions, PlaxFallbackWarning, find_clusters,
                           order_for_fusion)

from numba_vs_numpy import assert_bits_equal, compiled_source, jit_both


def _hash_then_mix(k, x):
    y0, y1 = lax.threefry2x32(k[0], k[1], x, x ^ np.uint32(7))
    return (y0 ^ y1) >> np.uint32(9), y1 * np.uint32(3), y0


def _units(f, *args, multiple_results):
    jaxpr = plax.make_jaxpr(f)(*args).jaxpr
    options = FusionOptions(multiple_results=multiple_results)
    return list(find_clusters(order_for_fusion(jaxpr, options), options))


def test_fusion_rule_takes_multi_result_equations_only_when_asked():
    k, x = np.array([1, 2], np.uint32), np.arange(8, dtype=np.uint32)
    plain = _units(_hash_then_mix, k, x, multiple_results=False)
    assert any(getattr(u, "primitive", None) is lax.threefry2x32_p for u in plain)
    multi = _units(_hash_then_mix, k, x, multiple_results=True)
    (cluster,) = [u for u in multi if isinstance(u, Cluster)]
    prims = [e.primitive for e in cluster.eqns]
    assert lax.threefry2x32_p in prims and lax.xor_p in prims and lax.mul_p in prims
    # both words read after the hash (y0 also returned): three outputs, both words' readers
    assert len(cluster.outputs) == 3


@pytest.mark.parametrize("n", [8, 40_000])
def test_hash_and_its_readers_are_one_kernel_and_bit_identical(n):
    k = np.array([0x12345678, 0x9ABCDEF0], np.uint32)
    x = np.arange(n, dtype=np.uint32) * np.uint32(2654435761)
    source = compiled_source(_hash_then_mix, k, x)
    program = source.split("# ---- fused kernel")[0]
    assert "hash_words(" in source, source
    if n > 16384:  # (smaller: one whole-program kernel, wholegen's cluster holds the hash)
        # the key words' slices and squeezes, then one kernel computing all three outputs
        assert program.count("= _f") == 5 and program.count(", = _f") == 1, program
    got, want = jit_both(_hash_then_mix, k, x, fallback_is_error=True)
    for g, w in zip(got, want):
        assert_bits_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_normal_from_counter_to_sample_bit_identical(dtype):
    # 2**18 + 3 elements: the split cluster runs chunk by chunk (emitter.CHUNK_MIN), the hash
    # in the first segment, NumPy's log1p between segments
    shape = ((1 << 18) + 3,) if dtype == np.float32 else (1001,)
    f = lambda key: random.normal(key, shape, dtype=dtype)  # noqa: E731
    with plax.config.override("jax_enable_x64", dtype == np.float64):
        source = compiled_source(f, random.PRNGKey(3))
        got, want = jit_both(f, random.PRNGKey(3), fallback_is_error=True)
    assert "hash_words(" in source
    assert_bits_equal(got[0], want[0])


def _no_loop_fallback(f, *args):
    """``f(*args)`` on both backends, failing on any fallback or Python-loop warning, and
    the Numba program's text."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaxFallbackWarning)  # PlaxNativeLoopWarning included
        text = plax.jit(f, backend="numba").lower(*args).compile().as_text()
        got, want = jit_both(f, *args, fallback_is_error=True)
    return got, want, text


def test_gamma_rejection_loop_is_native_and_bit_identical():
    # 20,000 samples: above wholegen's WHOLE_MAX, the while loop is a native loop of its own
    # (the small programs below are whole-program kernels)
    f = lambda key: random.gamma(key, np.float32(2.5), (20_000,))  # noqa: E731
    got, want, text = _no_loop_fallback(f, random.PRNGKey(11))
    assert "while True:" in text and "hash_words(" in text and "log1p_f32(" in text
    assert_bits_equal(got[0], want[0])


def test_loops_over_large_bodies_keep_the_per_equation_path(monkeypatch):
    # bodies holding a value above emitter.native_loop_max() elements run the Python loop
    # around compiled clusters (faster there: threefry's parallel kernel, chunked clusters),
    # without a fallback warning; the bits are the NumPy backend's either way. The limit is
    # lowered so that the test stays small: 20,000 carries (a (20000, 3, 2) key grid) exceed
    # 10,000 elements
    from plax_numba.emitter import NATIVE_LOOP_MAX, native_loop_max
    monkeypatch.delenv("PLAX_NUMBA_NATIVE_LOOP_MAX", raising=False)
    assert native_loop_max() == NATIVE_LOOP_MAX
    monkeypatch.setenv("PLAX_NUMBA_NATIVE_LOOP_MAX", "10000")
    assert native_loop_max() == 10_000
    f = lambda key: random.gamma(key, np.float32(2.5), (20_000,))  # noqa: E731
    got, want, text = _no_loop_fallback(f, random.PRNGKey(11))
    assert "while True:" not in text and "log1p_f32(" not in text, text
    assert "hash_words(" in text  # the bodies' clusters are still compiled kernels
    assert_bits_equal(got[0], want[0])


@pytest.mark.parametrize("sampler", ["beta", "dirichlet"])
def test_beta_and_dirichlet_are_native(sampler):
    def f(key):
        if sampler == "beta":
            return random.beta(key, np.float32(0.7), np.float32(2.0), (200,))
        return random.dirichlet(key, np.array([0.3, 1.0, 4.0], np.float32), (100,))
    got, want, text = _no_loop_fallback(f, random.PRNGKey(5))
    assert "while True:" in text and "hash_words(" in text
    # the gamma draws are bit-identical; beta's and dirichlet's arithmetic after them goes
    # through the fused float32 log/exp polynomials (documented ulps; as before this change,
    # on the per-cluster path), a few ulps from NumPy's
    np.testing.assert_allclose(got[0], want[0], rtol=2e-6, atol=0)


def test_native_loop_reference_tier_equals_compiled_tier(monkeypatch):
    # the Numba backend runs the program on NumPy's kernels until its kernel is loaded: the
    # first (reference) calls and the compiled calls give the same bits (alpha >= 1: below 1
    # the boost u**(1/alpha) goes through the fused float32 log/pow, a few ulps apart). This
    # program, and test_beta_and_dirichlet_are_native[dirichlet]'s, are also
    # test_special_iterative_forms.py's gamma-family check (kept equal: one compile each)
    def sample(key):
        return random.gamma(key, np.float32(1.5), (64,))
    monkeypatch.delenv("PLAX_NUMBA_SYNC", raising=False)
    monkeypatch.setenv("PLAX_NUMBA_WORKERS", "0")
    key = random.PRNGKey(2)
    first = np.asarray(plax.jit(sample, backend="numba")(key))
    monkeypatch.setenv("PLAX_NUMBA_SYNC", "1")
    compiled_fn = plax.jit(lambda key: sample(key), backend="numba")  # (a program of its own)
    assert "while True:" in compiled_fn.lower(key).compile().as_text()
    compiled = np.asarray(compiled_fn(key))
    assert_bits_equal(first, compiled)
