"""``lax.convert_element_type`` of key arrays: to the key's own dtype the array itself, to
any other dtype (or a value to a key dtype) JAX's ValueError, eagerly and under jit."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax
from plax import numpy as jnp

_TARGETS = [jnp.float32, jnp.uint32, jnp.int32, bool]


@pytest.mark.parametrize("jitted", [False, True])
def test_key_to_its_own_dtype_is_the_key(jitted):
    keys = plax.random.split(plax.random.key(3), 4)

    def same(k):
        return lax.convert_element_type(k, k.dtype)
    if not jitted:
        one = keys[0]
        assert same(keys) is keys and same(one) is one
    out = plax.jit(same)(keys) if jitted else same(keys)
    assert out.dtype == keys.dtype and out.shape == (4,)
    np.testing.assert_array_equal(plax.random.key_data(out), plax.random.key_data(keys))


@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("target", _TARGETS)
def test_key_to_another_dtype_raises_value_error(target, jitted):
    key = plax.random.key(0)

    def cast(k):
        return lax.convert_element_type(k, target)
    with pytest.raises(ValueError, match=r"Cannot convert_element_type from key<fry> to"):
        (plax.jit(cast) if jitted else cast)(key)


def test_value_to_a_key_dtype_raises_value_error():
    key = plax.random.key(0)
    with pytest.raises(ValueError, match=r"from float32 to key<fry>"):
        lax.convert_element_type(jnp.float32(1), key.dtype)


def test_matches_jax():
    jax = pytest.importorskip("jax")
    for lib, lib_lax, lib_jnp in ((jax, jax.lax, jax.numpy), (plax, lax, jnp)):
        keys = lib.random.split(lib.random.key(7), 3)
        same = lib_lax.convert_element_type(keys, keys.dtype)
        assert same.dtype == keys.dtype
        np.testing.assert_array_equal(lib.random.key_data(same), lib.random.key_data(keys))
        for target in (lib_jnp.float32, lib_jnp.uint32):
            with pytest.raises(ValueError, match="Cannot convert_element_type from key<fry>"):
                lib_lax.convert_element_type(keys, target)
    np.testing.assert_array_equal(
        plax.random.key_data(lax.convert_element_type(plax.random.split(plax.random.key(7), 3),
                                                      plax.random.key(0).dtype)),
        np.asarray(jax.random.key_data(jax.random.split(jax.random.key(7), 3))))
