"""``iota`` fused as an index expression (issue 26, item 1): the fusion rule takes ``INDEX``
equations only for a generator that asks (``index=True``), and the Numba backend's kernels
compute ``iota``/``broadcasted_iota`` from the loop's index (flat, nested, chunked with an
offset, inside native loops) instead of reading a counter array: ``random.normal``'s
``iota -> threefry2x32 -> shift/or`` is one kernel. Values and bits equal the NumPy
backend's."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax, random
from plax.lowering import (Cluster, FusionOptions, INDEX, find_clusters, fusion_kind,
                           order_for_fusion)

from numba_vs_numpy import assert_bits_equal, compiled_source, jit_both


def _kernels(source: str) -> list[str]:
    return source.split("# ---- fused kernel")[1:]


def _counted(x):
    return x * lax.broadcasted_iota(np.float32, x.shape, 0) + lax.broadcasted_iota(
        np.int32, x.shape, x.ndim - 1).astype(np.float32)


def test_fusion_rule_takes_iota_only_when_asked():
    jaxpr = plax.make_jaxpr(_counted)(np.ones((4, 3), np.float32)).jaxpr
    assert fusion_kind(lax.iota_p) is None  # (backends that do not ask run it alone)
    assert fusion_kind(lax.iota_p, index=True) == INDEX
    plain = list(find_clusters(order_for_fusion(jaxpr)))
    assert sum(getattr(u, "primitive", None) is lax.iota_p for u in plain) == 2
    index = FusionOptions(index=True)
    fused = list(find_clusters(order_for_fusion(jaxpr, index), index))
    (cluster,) = fused
    assert isinstance(cluster, Cluster)
    assert [e.primitive for e in cluster.eqns].count(lax.iota_p) == 2
    assert len(cluster.inputs) == 1  # x alone: the counters are not operands


@pytest.mark.parametrize("shape", [(5, 7), (3, 4, 5), (300, 200)])
def test_broadcasted_iota_in_flat_kernels_equals_numpy(shape):
    # (300, 200): a large kernel writing into preallocated outputs (the shape's extents in
    # its source); the others take their extents as arguments
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    source = compiled_source(_counted, x)
    (kernel,) = [k for k in _kernels(source) if "iota" in k.split("\n")[1]]
    assert "for i in" in kernel  # one flat loop
    got, want = jit_both(_counted, x, fallback_is_error=True)
    assert_bits_equal(got[0], want[0])


def test_iota_in_a_nested_loop_equals_numpy():
    # a column broadcast along the rows: a nested loop, iota is the loop variable
    f = lambda c: (c + lax.broadcasted_iota(np.float32, (6, 9), 1)) * 2  # noqa: E731
    c = np.arange(6, dtype=np.float32).reshape(6, 1)
    (kernel,) = [k for k in _kernels(compiled_source(f, c)) if "iota" in k.split("\n")[1]]
    assert "for i1 in" in kernel
    got, want = jit_both(f, c, fallback_is_error=True)
    assert_bits_equal(got[0], want[0])


@pytest.mark.parametrize("size", [1000, (1 << 18) + 5])
def test_normal_counter_is_an_index_expression(size):
    # 1000: one whole-program kernel; (1 << 18) + 5: the split cluster runs in chunks, each
    # passing its offset (base)
    f = lambda key: random.normal(key, (size,))  # noqa: E731
    source = compiled_source(f, random.PRNGKey(7))
    hashing = [k for k in _kernels(source) if "hash_words(" in k]
    assert hashing  # (the chunked split shows its chunk kernels too)
    for kernel in hashing:
        assert "iota broadcast_in_dim threefry2x32" in kernel.split("\n")[1]
        assert ("np.uint32((i + base))" if size > 1000 else "np.uint32(i)") in kernel, kernel
    assert f"np.empty(({size},), np.uint32)" not in source  # no counter array
    got, want = jit_both(f, random.PRNGKey(7), fallback_is_error=True)
    assert_bits_equal(got[0], want[0])


def test_iota_in_a_native_loop_body_equals_numpy():
    def f(x):
        return lax.fori_loop(0, 3, lambda i, c: c * 0.5 + _counted(c) * i.astype(np.float32), x)
    x = np.ones((4, 6), np.float32)
    text = plax.jit(f, backend="numba").lower(x).compile().as_text()
    assert "while True:" in text or "for it" in text  # the native loop
    got, want = jit_both(f, x, fallback_is_error=True)
    assert_bits_equal(got[0], want[0])
