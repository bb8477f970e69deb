"""The native ``threefry2x32`` kernel of the Numba backend: bit-identical to the NumPy
reference kernel (and so to JAX) for any keys and counters, every operand layout the
primitive allows, and through ``plax.random`` in both ``jax_threefry_partitionable`` modes."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import plax
from plax import lax, random
from plax.lowering import PlaxFallbackWarning

from plax_numba import threefry
from numba_vs_numpy import jit_both
from plax_numpy import impls_random

U32 = np.uint32
words = hnp.arrays(U32, st.integers(0, 40), elements=st.integers(0, 2**32 - 1))


def assert_same(got, want):
    assert len(got) == len(want) == 2
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype == U32
        assert g.shape == w.shape
        np.testing.assert_array_equal(g, w)


@settings(max_examples=60, deadline=None)
@given(k=st.tuples(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1)), x=words,
       seed=st.integers(0, 2**32 - 1))
def test_kernel_matches_reference_scalar_key(k, x, seed):
    x2 = np.random.default_rng(seed).integers(0, 2**32, x.shape, dtype=np.uint64).astype(U32)
    args = (U32(k[0]), U32(k[1]), x, x2)
    assert_same(threefry.threefry2x32(*args), impls_random.threefry2x32(*args))


@settings(max_examples=40, deadline=None)
@given(data=hnp.arrays(U32, st.tuples(st.just(4), st.integers(0, 30)),
                       elements=st.integers(0, 2**32 - 1)),
       scalar=st.lists(st.booleans(), min_size=4, max_size=4))
def test_kernel_matches_reference_any_operand_scalar(data, scalar):
    # every operand an array of the output's shape or rank 0 (the primitive's broadcasting)
    args = [U32(row[0]) if s and row.size else row for row, s in zip(data, scalar)]
    assert_same(threefry.threefry2x32(*args), impls_random.threefry2x32(*args))


@pytest.mark.parametrize("mix", range(16))
def test_kernel_every_operand_mix_over_blocks_and_work_items(mix):
    # two work items (threefry.CHUNK), the second ending in a partial block (threefry.FILL):
    # a scalar operand's fill is reread for every block, an array operand read through
    n = threefry.CHUNK + 2 * threefry.FILL + 5
    rng = np.random.default_rng(mix)
    args = [U32(rng.integers(0, 2**32)) if mix >> i & 1
            else rng.integers(0, 2**32, n, dtype=np.uint64).astype(U32) for i in range(4)]
    assert_same(threefry.threefry2x32(*args), impls_random.threefry2x32(*args))


def test_one_kernel_for_every_operand_mix():
    from plax_numba import threefry_kernels
    # counted against what this process compiled before: four mixes, writable and read-only
    # operands (numba types them apart), add at most one kernel
    before = {k: set(k.overloads) for k in (threefry_kernels.hash_serial,
                                            threefry_kernels.hash_parallel)}
    read_only = np.arange(threefry.FILL + 1, dtype=U32)
    read_only.flags.writeable = False
    for scalar in ([True] * 4, [False] * 4, [True, True, False, True], [False, True] * 2):
        args = [U32(9) if s else np.arange(threefry.FILL + 1, dtype=U32) for s in scalar]
        threefry.threefry2x32(*args)
        threefry.threefry2x32(*(read_only if np.ndim(a) else a for a in args))
    for kernel, known in before.items():
        assert len(set(kernel.overloads) - known) <= 1, kernel


@pytest.mark.parametrize("shape", [(), (0,), (1,), (3, 0, 2), (7,), (16,), (17,), (5, 9),
                                   (2, 3, 4), (threefry.PARALLEL_MIN + 123,)])
@pytest.mark.parametrize("layout", ["scalar key", "array key", "scalar x1", "all scalar"])
def test_kernel_shapes(shape, layout):
    rng = np.random.default_rng(sum(shape) + len(layout))

    def words(s):
        return rng.integers(0, 2**32, s, dtype=np.uint64).astype(U32)
    k1, k2, x1, x2 = (words(shape) for _ in range(4))
    if layout == "scalar key":
        k1, k2 = words(()), words(())
    elif layout == "scalar x1":
        x1 = words(())
    elif layout == "all scalar":
        k1, k2, x1, x2 = (words(()) for _ in range(4))
    got = threefry.threefry2x32(k1, k2, x1, x2)
    want = impls_random.threefry2x32(k1, k2, x1, x2)
    assert_same(got, want)
    if layout != "all scalar":
        assert got[0].shape == shape


def test_known_answer():
    # the primitive's docstring example (JAX's values)
    k = U32(0)
    y1, y2 = threefry.threefry2x32(k, k, np.zeros(2, U32), np.arange(2, dtype=U32))
    assert y1.tolist() == [1797259609, 928981903]
    assert y2.tolist() == [2579123966, 3453687069]


@pytest.mark.parametrize("shape", [(0,), (1,), (5,), (3, 4), (1000,), (70_001,)])
def test_jitted_primitive(shape):
    x1 = np.arange(int(np.prod(shape)), dtype=U32).reshape(shape)
    x2 = (x1 * U32(2654435761)).astype(U32)
    k1, k2 = U32(123456789), U32(987654321)
    got, want = jit_both(lax.threefry2x32, k1, k2, x1, x2)
    assert_same(got, want)
    got, want = jit_both(lambda k1, k2, a: lax.threefry2x32(k1, k2, U32(7), a), k1, k2, x2)
    assert_same(got, want)


def test_jitted_program_uses_the_native_kernel():
    from plax import plugins
    from plax.transforms.call import compile_closed
    x = np.arange(10, dtype=U32)
    closed = plax.jit(lambda a, b: lax.threefry2x32(U32(1), U32(2), a, b)).lower(x, x).jaxpr
    backend = plugins.registry().get_backend("numba")
    fn = compile_closed(closed, backend, plax.devices("cpu")[0]).executable  # numba: the CPU
    assert threefry.threefry2x32 in fn.__globals__.values()


# A small program is one whole-program kernel (plax_numba.wholegen), compiled again for
# every shape (~8 CPU s): one shape whose loop is unrolled (odd, 1-d), one looped over (2-d),
# an empty one (no kernel at all: plax.empty_programs) and a large one (per-cluster kernels,
# the parallel threefry kernel).
@pytest.mark.parametrize("partitionable", [True, False])
@pytest.mark.parametrize("shape", [(0,), (3,), (4, 5), (100_003,)])
def test_random_matches_numpy_backend(partitionable, shape):
    def sample(key):
        k1, k2 = random.split(key)
        return (random.bits(k1, shape), random.uniform(k2, shape),
                random.normal(key, shape), random.randint(k2, shape, -5, 1000))

    with plax.config.override("jax_threefry_partitionable", partitionable):
        key = random.PRNGKey(20240601)
        with warnings.catch_warnings():
            warnings.simplefilter("error", PlaxFallbackWarning)
            got, want = jit_both(sample, key)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)  # bit-identical, floats included


def test_vmapped_keys_match_numpy_backend():
    # a batch of keys: the key words are arrays (the array-key layout of the kernel)
    keys = random.split(random.PRNGKey(3), 6)
    f = plax.vmap(lambda k: random.bits(k, (33,)))
    got, want = jit_both(f, keys)
    np.testing.assert_array_equal(got[0], want[0])


def test_tiered_step_switches_to_native(monkeypatch):
    monkeypatch.delenv("PLAX_NUMBA_SYNC", raising=False)
    monkeypatch.setenv("PLAX_NUMBA_COMPILE_AFTER", "1")
    from plax_numba import tiered

    x = np.arange(40, dtype=U32)
    f = plax.jit(lambda a, b: lax.threefry2x32(U32(5), U32(6), a[::-1], b), backend="numba")
    want = impls_random.threefry2x32(U32(5), U32(6), x[::-1], x)
    for _ in range(3):
        assert_same(f(x, x), want)
        assert tiered.wait_idle(timeout=120)


def test_broadcast_view_operands():
    # broadcast_in_dim of a scalar gives a stride-0 view: read as a scalar, not copied
    x1 = np.broadcast_to(U32(4000000000), (3, 50))
    x2 = np.arange(150, dtype=U32).reshape(3, 50)
    k = np.broadcast_to(U32(77), (3, 50))
    assert_same(threefry.threefry2x32(k, U32(5), x1, x2),
                impls_random.threefry2x32(k, U32(5), x1, x2))
    assert_same(threefry.threefry2x32(U32(1), U32(2), x2.T, x1.T),
                impls_random.threefry2x32(U32(1), U32(2), x2.T, x1.T))
