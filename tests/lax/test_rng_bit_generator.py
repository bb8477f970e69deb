"""lax.rng_bit_generator: XLA's Threefry and Philox bit generators as JAX-CPU runs them (values
recorded from JAX 0.10.2, and beside JAX where installed), its vmap rule, jit, printing and
errors. The conformance kit checks every backend against an independent Python-int reference
(plax.testing.conformance.spec_random)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
from plax import lax
from plax import numpy as jnp

KEY = np.array([1, 2, 3, 4], np.uint32)
# JAX 0.10.2 on CPU: lax.rng_bit_generator(KEY, (6,), algorithm=...)
PHILOX_6 = [512747620, 1298009047, 1267190206, 761827841, 1383286907, 1639995030]
THREE_FRY_6 = [1576285164, 2249660814, 740599976, 2425682526, 2436392515, 1497962777]


@pytest.mark.parametrize("algorithm, bits, new_key", [
    (lax.RandomAlgorithm.RNG_DEFAULT, PHILOX_6, [1, 2, 5, 4]),
    (lax.RandomAlgorithm.RNG_PHILOX, PHILOX_6, [1, 2, 5, 4]),
    (lax.RandomAlgorithm.RNG_THREE_FRY, THREE_FRY_6, [1, 2, 6, 4])])
def test_bits_recorded_from_jax(algorithm, bits, new_key):
    k, b = lax.rng_bit_generator(jnp.asarray(KEY), (6,), algorithm=algorithm)
    assert b.dtype == np.uint32 and k.dtype == np.uint32
    np.testing.assert_array_equal(b, bits)
    np.testing.assert_array_equal(k, new_key)
    k8, b8 = lax.rng_bit_generator(jnp.asarray(KEY), (6,), np.uint8, algorithm)
    np.testing.assert_array_equal(b8, np.array(bits, np.uint32).astype(np.uint8))  # low bits
    np.testing.assert_array_equal(k8, new_key)


def test_an_odd_length_uses_the_first_counters_and_advances_less():
    k, b = lax.rng_bit_generator(jnp.asarray(KEY), (3,), algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)
    np.testing.assert_array_equal(b, THREE_FRY_6[:3])
    np.testing.assert_array_equal(k, [1, 2, 5, 4])  # two counters (each gives two words)


def test_successive_calls_continue_the_stream():
    key = jnp.asarray(KEY)
    k1, first = lax.rng_bit_generator(key, (4,), algorithm=lax.RandomAlgorithm.RNG_PHILOX)
    _, second = lax.rng_bit_generator(k1, (2,), algorithm=lax.RandomAlgorithm.RNG_PHILOX)
    _, both = lax.rng_bit_generator(key, (6,), algorithm=lax.RandomAlgorithm.RNG_PHILOX)
    np.testing.assert_array_equal(np.concatenate([first, second]), both)


def test_jit_scan_and_both_cpu_backends_agree_with_eager():
    key = jnp.asarray(KEY)
    want = lax.rng_bit_generator(key, (4, 3))
    for backend in ("numpy", "numba"):
        got = plax.jit(lambda k: lax.rng_bit_generator(k, (4, 3)), backend=backend)(key)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba: the loop keeps its per-equation path
        final, ys = plax.jit(lambda k: lax.scan(
            lambda c, _: lax.rng_bit_generator(c, (2,)), k, None, length=3))(key)
    # each step takes one Philox counter (four words) and keeps its first two
    _, twelve = lax.rng_bit_generator(key, (12,))
    np.testing.assert_array_equal(ys.reshape(-1), np.asarray(twelve)[[0, 1, 4, 5, 8, 9]])
    np.testing.assert_array_equal(final, [1, 2, 6, 4])


def test_vmap_is_jaxs_rule():
    # JAX batches with the first member's key only: one call with a leading batch axis, and
    # only that member's key advances
    keys = jnp.stack([jnp.asarray(KEY), jnp.asarray(KEY) + 10])
    new_keys, bits = plax.vmap(lambda k: lax.rng_bit_generator(k, (3,)))(keys)
    k0, whole = lax.rng_bit_generator(jnp.asarray(KEY), (2, 3))
    np.testing.assert_array_equal(bits, whole)
    np.testing.assert_array_equal(new_keys, np.stack([np.asarray(k0), np.asarray(KEY) + 10]))
    unbatched = plax.vmap(lambda k, z: lax.rng_bit_generator(k, (2,)), in_axes=(None, 0))(
        jnp.asarray(KEY), jnp.arange(3))
    np.testing.assert_array_equal(unbatched[1], np.tile(PHILOX_6[:2], (3, 1)))


def test_make_jaxpr_prints_as_jax():
    text = str(plax.make_jaxpr(lambda k: lax.rng_bit_generator(k, (2, 3)))(jnp.asarray(KEY)))
    assert text == """{ lambda ; a:u32[4]. let
    b:u32[4] c:u32[2,3] = rng_bit_generator[
      algorithm=RNG_DEFAULT
      dtype=uint32
      out_sharding=None
      shape=(2, 3)
    ] a
  in (b, c) }"""


def test_uint64_bits_and_keys_with_x64():
    with plax.enable_x64(True):
        k, b = lax.rng_bit_generator(jnp.asarray(KEY), (3,), np.uint64,
                                     lax.RandomAlgorithm.RNG_THREE_FRY)
        assert b.dtype == np.uint64
        k64, b64 = lax.rng_bit_generator(jnp.asarray(KEY.view(np.uint64)), (3,), np.uint64,
                                         lax.RandomAlgorithm.RNG_THREE_FRY)
        np.testing.assert_array_equal(b64, b)  # a uint64[2] key is the same state
        np.testing.assert_array_equal(np.asarray(k64).view(np.uint32), k)
    with pytest.warns(UserWarning, match="truncated to dtype uint32"):
        _, b32 = lax.rng_bit_generator(jnp.asarray(KEY), (3,), np.uint64)
    assert b32.dtype == np.uint32


def test_errors():
    key = jnp.asarray(KEY)
    for dtype in (jnp.int32, jnp.float32, bool):
        with pytest.raises(TypeError, match="rng_bit_generator: unsupported dtype"):
            lax.rng_bit_generator(key, (2,), dtype=dtype)
    for bad in (key[:3], key.astype(jnp.int32)):
        with pytest.raises(TypeError, match=r"the key \(state\) must be a uint32\[4\]"):
            lax.rng_bit_generator(bad, (2,))
    with pytest.raises(ValueError, match="is not a valid RandomAlgorithm"):
        lax.rng_bit_generator(key, (2,), algorithm=5)


def test_beside_jax():
    jax = pytest.importorskip("jax", reason="JAX is not installed: nothing to compare with")
    rng = np.random.default_rng(1)
    # (each JAX call compiles: a few shapes and dtypes per algorithm; the kit covers the rest)
    for algorithm in range(3):
        for dtype, shape in (("uint8", (3, 5)), ("uint16", ()), ("uint32", (2, 1, 7))):
            key = rng.integers(0, 2**32, 4, dtype=np.uint64).astype(np.uint32)
            ours = lax.rng_bit_generator(jnp.asarray(key), shape, dtype, algorithm)
            theirs = jax.lax.rng_bit_generator(jax.numpy.asarray(key), shape, dtype,
                                               jax.lax.RandomAlgorithm(algorithm))
            for o, t in zip(ours, theirs):
                np.testing.assert_array_equal(np.asarray(o), np.asarray(t))
                assert np.asarray(o).dtype == np.asarray(t).dtype
    keys = np.stack([KEY, KEY + 7, KEY + 9])
    ours = plax.vmap(lambda k: lax.rng_bit_generator(k, (2,)))(keys)
    theirs = jax.vmap(lambda k: jax.lax.rng_bit_generator(k, (2,)))(keys)
    for o, t in zip(ours, theirs):
        np.testing.assert_array_equal(np.asarray(o), np.asarray(t))
    fun = lambda m: lambda k: m.lax.rng_bit_generator(k, (2, 3), algorithm=m.lax.RandomAlgorithm.RNG_PHILOX)  # noqa: E731
    assert str(plax.make_jaxpr(fun(plax))(KEY)) == str(jax.make_jaxpr(fun(jax))(KEY))
