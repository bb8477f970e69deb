"""The creation functions with typed keys (``jnp.zeros/ones/full/empty`` with a key dtype,
``zeros_like/ones_like/empty_like/full_like`` of a key array, ``lax.full``/``full_like``), as
JAX 0.10.2 makes them: a number fills every word of every key, a key is broadcast, and keys
are not cast to numbers nor arrays of numbers to keys. Before, plax refused them all."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as pnp
from plax import lax as plax_lax
from plax import random as prandom

# (label, f(jnp, lax, key, keys) -> result); the words recorded from JAX 0.10.2 beside each
# (key = random.key(5), whose words are [0, 5]; keys = random.split(key, 3))
CASES = [
    ("zeros", lambda N, L, k, ks: N.zeros((2,), dtype=k.dtype), [[0, 0], [0, 0]]),
    ("ones", lambda N, L, k, ks: N.ones((2,), k.dtype), [[1, 1], [1, 1]]),
    ("empty", lambda N, L, k, ks: N.empty((1, 2), dtype=k.dtype), [[[0, 0], [0, 0]]]),
    ("full of a number", lambda N, L, k, ks: N.full((2,), 7, dtype=k.dtype), [[7, 7], [7, 7]]),
    ("full of -1", lambda N, L, k, ks: N.full((1,), -1, dtype=k.dtype),
     [[4294967295, 4294967295]]),
    ("full of 1.5", lambda N, L, k, ks: N.full((1,), 1.5, dtype=k.dtype), [[1, 1]]),
    ("full of a key", lambda N, L, k, ks: N.full((2,), k), [[0, 5], [0, 5]]),
    ("full of a key, key dtype", lambda N, L, k, ks: N.full((2,), k, k.dtype), [[0, 5], [0, 5]]),
    ("zeros_like", lambda N, L, k, ks: N.zeros_like(ks), [[0, 0]] * 3),
    ("ones_like", lambda N, L, k, ks: N.ones_like(ks), [[1, 1]] * 3),
    ("empty_like", lambda N, L, k, ks: N.empty_like(ks), [[0, 0]] * 3),
    ("empty_like of one key", lambda N, L, k, ks: N.empty_like(k), [0, 0]),
    ("zeros_like shape", lambda N, L, k, ks: N.zeros_like(ks, shape=(1, 2)), [[[0, 0]] * 2]),
    ("full_like of a key", lambda N, L, k, ks: N.full_like(ks, k), [[0, 5]] * 3),
    ("full_like 2**32 + 1", lambda N, L, k, ks: N.full_like(ks[:1], 2**32 + 1), [[1, 1]]),
    ("lax.full", lambda N, L, k, ks: L.full((2,), k), [[0, 5], [0, 5]]),
    ("lax.full_like", lambda N, L, k, ks: L.full_like(ks[:1], 3), [[3, 3]]),
]
IDS = [c[0] for c in CASES]

# numbers from key arrays given a number dtype (plain arrays)
NUMBER_CASES = [
    ("zeros_like int32", lambda N, k, ks: N.zeros_like(ks, dtype=np.int32), np.zeros(3, np.int32)),
    ("ones_like float32", lambda N, k, ks: N.ones_like(ks, dtype=np.float32),
     np.ones(3, np.float32)),
]

# (label, f(jnp, lax, key, keys), exception type, JAX's message)
REFUSED = [
    ("keys as float32", lambda N, L, k, ks: N.full((2,), k, dtype=np.float32), ValueError,
     "Cannot convert_element_type from key<fry> to float32"),
    ("lax.full keys as int32", lambda N, L, k, ks: L.full((2,), k, np.int32), ValueError,
     "Cannot convert_element_type from key<fry> to int32"),
    ("full_like of numbers with a key", lambda N, L, k, ks: N.full_like(N.ones(2), k),
     ValueError, "Cannot convert_element_type from key<fry> to float32"),
    ("an array of numbers as keys",
     lambda N, L, k, ks: N.full((2,), N.array([1, 2], np.uint32), dtype=k.dtype), ValueError,
     "Cannot convert_element_type from uint32 to key<fry>"),
]


def _keys(random):
    k = random.key(5)
    return k, random.split(k, 3)


def _check_keys(got, words, key_dtype):
    assert got.dtype == key_dtype
    want = np.asarray(words, np.uint32)
    assert got.shape == want.shape[:-1]
    data = np.asarray(prandom.key_data(got))
    assert data.dtype == np.uint32
    np.testing.assert_array_equal(data, want)


@pytest.mark.parametrize("label,make,words", CASES, ids=IDS)
def test_key_arrays_made_as_jax_makes_them(label, make, words):
    k, ks = _keys(prandom)
    _check_keys(make(pnp, plax_lax, k, ks), words, k.dtype)
    # jitted (the keys an argument) and vmapped over the keys, against the eager result
    jitted = plax.jit(lambda k, ks: make(pnp, plax_lax, k, ks))(k, ks)
    _check_keys(jitted, words, k.dtype)


def test_key_arrays_made_under_vmap_match_a_loop():
    _, ks = _keys(prandom)
    for fn in (pnp.zeros_like, pnp.empty_like, lambda k: pnp.full_like(k, 9),
               lambda k: pnp.full((2,), k)):
        got = plax.vmap(fn)(ks)
        want = np.stack([np.asarray(prandom.key_data(fn(ks[i]))) for i in range(3)])
        np.testing.assert_array_equal(np.asarray(prandom.key_data(got)), want)


@pytest.mark.parametrize("label,make,want", NUMBER_CASES, ids=[c[0] for c in NUMBER_CASES])
def test_like_a_key_array_with_a_number_dtype(label, make, want):
    got = make(pnp, *_keys(prandom))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got), want)


@pytest.mark.parametrize("label,make,exc,message", REFUSED, ids=[c[0] for c in REFUSED])
def test_keys_and_numbers_do_not_convert(label, make, exc, message):
    k, ks = _keys(prandom)
    with pytest.raises(exc, match=message):
        make(pnp, plax_lax, k, ks)


def test_as_jax():
    # the recorded words checked against JAX itself (a sample: JAX compiles each operation)
    jax = pytest.importorskip("jax")
    k, ks = _keys(jax.random)
    sample = {"zeros", "full of -1", "full of 1.5", "full_like 2**32 + 1", "lax.full"}
    picked = [c for c in CASES if c[0] in sample]
    assert len(picked) == len(sample)
    for label, make, words in picked:
        want = make(jax.numpy, jax.lax, k, ks)
        assert str(want.dtype) == "key<fry>", label
        np.testing.assert_array_equal(np.asarray(jax.random.key_data(want)),
                                      np.asarray(words, np.uint32), err_msg=label)
    for label, make, exc, message in REFUSED:
        with pytest.raises(exc, match=message):
            make(jax.numpy, jax.lax, k, ks)
    for label, make, want in NUMBER_CASES:
        np.testing.assert_array_equal(np.asarray(make(jax.numpy, k, ks)), want)
