"""Keys: raw and typed keys, split / fold_in / bits, and keys under jit, vmap and grad."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import numpy as jnp
from plax import random


def np_(x):
    return np.asarray(x)


# ------------------------------------------------------------------ raw keys

def test_prngkey_is_two_uint32_words():
    key = random.PRNGKey(0)
    assert key.shape == (2,) and key.dtype == np.uint32
    assert repr(key) == "Array([0, 0], dtype=uint32)"
    np.testing.assert_array_equal(np_(random.PRNGKey(42)), [0, 42])


@pytest.mark.parametrize("seed,x32,x64_words", [
    (-1, [0, 0xFFFFFFFF], [0xFFFFFFFF, 0xFFFFFFFF]),
    (2 ** 32 + 5, [0, 5], [1, 5]),
    (np.int32(-1), [0, 0xFFFFFFFF], [0, 0xFFFFFFFF]),
    (np.uint32(4_000_000_000), [0, 4_000_000_000], [0, 4_000_000_000]),
    (np.int8(-1), [0, 0xFFFFFFFF], [0, 0xFFFFFFFF]),
    (True, [0, 1], [0, 1]),
])
def test_prngkey_seed_widths(seed, x32, x64_words):
    # 64-bit seeds fill both words only with x64 (as in JAX); narrower seeds wrap mod 2**32
    np.testing.assert_array_equal(np_(random.PRNGKey(seed)), x32)
    with plax.config.override("jax_enable_x64", True):
        np.testing.assert_array_equal(np_(random.PRNGKey(seed)), x64_words)


def test_prngkey_traced_seed_matches_eager():
    for seed in (0, 7, -3):
        np.testing.assert_array_equal(np_(plax.jit(random.PRNGKey)(jnp.int32(seed))),
                                      np_(random.PRNGKey(seed)))
    with plax.config.override("jax_enable_x64", True):
        seed = 2 ** 40 + 3
        np.testing.assert_array_equal(np_(plax.jit(random.PRNGKey)(jnp.int64(seed))),
                                      np_(random.PRNGKey(seed)))


def test_split_shapes_and_unpacking(threefry_mode):
    key = random.PRNGKey(1)
    assert random.split(key).shape == (2, 2)
    assert random.split(key, 5).shape == (5, 2)
    assert random.split(key, (2, 3)).shape == (2, 3, 2)
    assert random.split(key, 0).shape == (0, 2)
    key2, *subkeys = random.split(key, 4)
    assert key2.shape == (2,) and len(subkeys) == 3
    # the tuple form lays out the same keys as the flat form
    np.testing.assert_array_equal(np_(random.split(key, (2, 3))).reshape(6, 2),
                                  np_(random.split(key, 6)))


def test_split_keys_are_distinct_and_deterministic(threefry_mode):
    keys = np_(random.split(random.PRNGKey(3), 1000))
    assert len({tuple(k) for k in keys}) == 1000
    np.testing.assert_array_equal(keys, np_(random.split(random.PRNGKey(3), 1000)))


def test_reusing_a_key_repeats_numbers_and_splitting_changes_them():
    key = random.PRNGKey(0)
    a = np_(random.normal(key, (3,)))
    np.testing.assert_array_equal(a, np_(random.normal(key, (3,))))
    _, subkey = random.split(key)
    assert not np.array_equal(a, np_(random.normal(subkey, (3,))))


def test_fold_in_distinct_messages(threefry_mode):
    key = random.PRNGKey(0)
    folded = {tuple(np_(random.fold_in(key, i))) for i in range(100)}
    assert len(folded) == 100
    # data is taken modulo 2**32, and traced data gives the eager result
    np.testing.assert_array_equal(np_(random.fold_in(key, 2 ** 32 + 5)),
                                  np_(random.fold_in(key, 5)))
    np.testing.assert_array_equal(np_(plax.jit(random.fold_in)(key, jnp.uint32(9))),
                                  np_(random.fold_in(key, 9)))


def test_the_two_layouts_differ_but_agree_on_fold_in():
    key = random.PRNGKey(5)
    with plax.config.override("jax_threefry_partitionable", True):
        split_p, bits_p, fold_p = random.split(key), random.bits(key, (4,)), random.fold_in(key, 3)
    with plax.config.override("jax_threefry_partitionable", False):
        split_o, bits_o, fold_o = random.split(key), random.bits(key, (4,)), random.fold_in(key, 3)
    assert not np.array_equal(np_(split_p), np_(split_o))
    assert not np.array_equal(np_(bits_p), np_(bits_o))
    np.testing.assert_array_equal(np_(fold_p), np_(fold_o))


def test_partitionable_bits_do_not_depend_on_size():
    # each element hashes its own counter, so a prefix of a larger draw is the smaller draw
    with plax.config.override("jax_threefry_partitionable", True):
        key = random.PRNGKey(2)
        np.testing.assert_array_equal(np_(random.bits(key, (10,)))[:4], np_(random.bits(key, (4,))))


@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32"])
def test_bits_dtypes(dtype, threefry_mode):
    out = random.bits(random.PRNGKey(0), (3, 5), dtype)
    assert out.shape == (3, 5) and out.dtype == np.dtype(dtype)


def test_bits_uint64(x64, threefry_mode):
    out = np_(random.bits(random.PRNGKey(0), (1000,)))
    assert out.dtype == np.uint64
    assert (out >> 32).max() > 2 ** 31  # the high words are random too


# ------------------------------------------------------------------ typed keys

def test_typed_key_basics():
    k = random.key(0)
    assert k.shape == () and k.ndim == 0 and k.dtype == random.key_dtype()
    assert str(k.dtype) == "key<fry>"
    assert repr(k) == "Array((), dtype=key<fry>) overlaying:\n[0 0]"
    np.testing.assert_array_equal(np_(random.key_data(k)), np_(random.PRNGKey(0)))
    assert random.key_impl(k) == "threefry2x32"
    assert random.key_impl(random.PRNGKey(0)) == "threefry2x32"


def test_typed_keys_give_the_raw_keys_numbers(threefry_mode):
    raw, typed = random.PRNGKey(7), random.key(7)
    np.testing.assert_array_equal(np_(random.key_data(random.split(typed, 3))),
                                  np_(random.split(raw, 3)))
    np.testing.assert_array_equal(np_(random.key_data(random.fold_in(typed, 4))),
                                  np_(random.fold_in(raw, 4)))
    np.testing.assert_array_equal(np_(random.normal(typed, (5,))), np_(random.normal(raw, (5,))))
    np.testing.assert_array_equal(np_(random.randint(typed, (5,), 0, 9)),
                                  np_(random.randint(raw, (5,), 0, 9)))


def test_typed_key_arrays_index_iterate_and_reshape():
    keys = random.split(random.key(0), 6)
    assert keys.shape == (6,) and len(keys) == 6
    data = np_(random.key_data(keys))
    np.testing.assert_array_equal(np_(random.key_data(keys[2])), data[2])
    np.testing.assert_array_equal(np_(random.key_data(keys[1:3])), data[1:3])
    assert [k.shape for k in keys] == [()] * 6
    grid = keys.reshape(2, 3)
    assert grid.shape == (2, 3) and grid.T.shape == (3, 2)
    np.testing.assert_array_equal(np_(random.key_data(grid[1, 0])), data[3])
    assert grid.ravel().shape == (6,)
    k, *rest = random.split(random.key(1), 3)
    assert k.shape == () and len(rest) == 2


def test_wrap_key_data_round_trip_and_equality():
    keys = random.split(random.key(3), 4)
    data = random.key_data(keys)
    again = random.wrap_key_data(data)
    assert again.shape == (4,)
    np.testing.assert_array_equal(np_(keys == again), [True] * 4)
    np.testing.assert_array_equal(np_(keys != again), [False] * 4)
    assert bool(random.key(0) == random.wrap_key_data(random.PRNGKey(0)))
    assert not bool(random.key(0) == random.key(1))


def test_typed_keys_are_pytrees_with_their_data_as_leaf():
    k = random.key(2)
    leaves, tree = plax.tree_util.tree_flatten(k)
    assert len(leaves) == 1 and leaves[0].shape == (2,)
    assert plax.tree_util.tree_unflatten(tree, leaves).dtype == k.dtype


# ------------------------------------------------------------------ transforms

@pytest.mark.parametrize("typed", [False, True])
def test_jit_matches_eager(typed, threefry_mode):
    key = random.key(4) if typed else random.PRNGKey(4)

    def f(key):
        key, sub = random.split(key)
        return random.normal(sub, (3,)), random.uniform(key, (2, 2), minval=-1, maxval=1), key

    eager, jitted = f(key), plax.jit(f)(key)
    for e, j in zip(eager[:2], jitted[:2]):
        np.testing.assert_array_equal(np_(e), np_(j))
    data = random.key_data if typed else (lambda x: x)
    np.testing.assert_array_equal(np_(data(eager[2])), np_(data(jitted[2])))
    assert isinstance(jitted[2], random.PRNGKeyArray) == typed


@pytest.mark.parametrize("typed", [False, True])
def test_vmap_over_a_batch_of_keys_matches_a_loop(typed, threefry_mode):
    keys = random.split(random.key(5) if typed else random.PRNGKey(5), 4)

    def draw(k):
        return random.normal(k, (3,)), random.randint(k, (), 0, 100), random.gamma(k, 2.0)

    batched = plax.vmap(draw)(keys)
    for i in range(4):
        single = draw(keys[i])
        for b, s in zip(batched, single):
            np.testing.assert_array_equal(np_(b)[i], np_(s))


def test_vmap_returns_typed_keys_and_jit_of_vmap():
    keys = random.split(random.key(0), 3)
    new = plax.vmap(lambda k: random.split(k)[0])(keys)
    assert isinstance(new, random.PRNGKeyArray) and new.shape == (3,)
    for i in range(3):
        np.testing.assert_array_equal(np_(random.key_data(new[i])),
                                      np_(random.key_data(random.split(keys[i])[0])))
    draw = plax.vmap(lambda k: random.normal(k, (2,)))
    np.testing.assert_array_equal(np_(plax.jit(draw)(keys)), np_(draw(keys)))


def test_vmap_over_seeds_and_fold_in_data():
    keys = plax.vmap(random.PRNGKey)(jnp.arange(3))
    for i in range(3):
        np.testing.assert_array_equal(np_(keys[i]), np_(random.PRNGKey(i)))
    folded = plax.vmap(random.fold_in, in_axes=(None, 0))(random.PRNGKey(1), jnp.arange(3))
    for i in range(3):
        np.testing.assert_array_equal(np_(folded[i]), np_(random.fold_in(random.PRNGKey(1), i)))


def test_grad_through_reparameterised_normal_and_uniform():
    key = random.PRNGKey(0)
    z = random.normal(key, (5,))
    g = plax.grad(lambda mu, sigma: jnp.sum(mu + sigma * random.normal(key, (5,))),
                  argnums=(0, 1))(1.0, 2.0)
    np.testing.assert_allclose(float(g[0]), 5.0)
    np.testing.assert_allclose(float(g[1]), float(jnp.sum(z)), rtol=1e-6)
    u01 = np_(random.uniform(key, (5,)))
    glo, ghi = plax.grad(lambda lo, hi: jnp.sum(random.uniform(key, (5,), minval=lo, maxval=hi)),
                         argnums=(0, 1))(-1.0, 3.0)
    # u = lo + (hi - lo) * u01  =>  du/dlo = 1 - u01, du/dhi = u01
    np.testing.assert_allclose(float(glo), np.sum(1 - u01), rtol=1e-5)
    np.testing.assert_allclose(float(ghi), np.sum(u01), rtol=1e-5)


def test_grad_of_gamma_under_jit_matches_eager():
    a = jnp.array([0.5, 2.0, 30.0])
    f = lambda a: jnp.sum(random.gamma(random.PRNGKey(1), a))  # noqa: E731
    np.testing.assert_allclose(np_(plax.jit(plax.grad(f))(a)), np_(plax.grad(f)(a)), rtol=1e-6)


# ------------------------------------------------------------------ bad keys and arguments

@pytest.mark.parametrize("bad", [0, 1.5, np.zeros(2, np.float32), jnp.zeros(2, jnp.int32),
                                 np.zeros(3, np.uint32), jnp.zeros((), jnp.uint32), "key", None])
def test_not_a_key_is_a_type_error(bad):
    with pytest.raises(TypeError, match="PRNG key"):
        random.normal(bad, (2,))


def test_a_batch_of_keys_where_one_is_expected():
    for keys in (random.split(random.PRNGKey(0), 3), random.split(random.key(0), 3)):
        with pytest.raises(ValueError, match=r"single key.*shape \(3,\).*vmap"):
            random.normal(keys)
        with pytest.raises(ValueError, match="single key"):
            random.split(keys)


def test_bad_seeds_and_counts():
    with pytest.raises(TypeError, match="integer"):
        random.PRNGKey(1.5)
    with pytest.raises(TypeError, match="scalar seed"):
        random.PRNGKey(np.array([1, 2]))
    with pytest.raises(TypeError, match="integer"):
        plax.jit(random.PRNGKey)(jnp.float32(1))
    with pytest.raises(OverflowError):
        random.PRNGKey(2 ** 64)
    with pytest.raises(TypeError, match="PRNG key"):
        random.key(random.key(0))
    with pytest.raises(ValueError, match="non-negative"):
        random.split(random.PRNGKey(0), -1)
    with pytest.raises(TypeError, match="scalar"):
        random.fold_in(random.PRNGKey(0), np.array([1, 2]))
    with pytest.raises(TypeError, match="integer"):
        random.fold_in(random.PRNGKey(0), 1.5)
    with pytest.raises(ValueError, match="unsigned"):
        random.bits(random.PRNGKey(0), (2,), jnp.int32)
    with pytest.raises(ValueError, match="threefry2x32"):
        random.key(0, impl="rbg")
    with pytest.raises(TypeError, match="uint32"):
        random.wrap_key_data(jnp.zeros(2, jnp.float32))
    with pytest.raises(TypeError, match="already wrapped"):
        random.wrap_key_data(random.key(0))
    with pytest.raises(TypeError, match="NumPy equivalent"):
        np.asarray(random.key(0))


def test_jit_retraces_when_the_layout_flag_changes():
    f = plax.jit(lambda k: random.split(k))
    key = random.PRNGKey(0)
    for partitionable in (True, False, True):
        with plax.config.override("jax_threefry_partitionable", partitionable):
            np.testing.assert_array_equal(np_(f(key)), np_(random.split(key)))


def test_typed_key_sharding_and_committed_are_its_datas():
    k = random.split(random.key(0), 3)
    data = random.key_data(k)
    assert k.sharding == data.sharding and k.committed == data.committed is False
    put = plax.device_put(k, plax.devices()[0])
    assert put.committed and put.sharding.device_set == {plax.devices()[0]}
    assert plax.typeof(k).sharding.spec == plax.P(None)  # the data's (None, None), less the words
