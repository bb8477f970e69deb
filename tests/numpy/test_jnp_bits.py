"""packbits / unpackbits against NumPy over shapes, axes, bit orders and counts."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp


@pytest.mark.parametrize("shape", [(11,), (3, 9), (2, 3, 17)])
@pytest.mark.parametrize("axis", [None, 0, -1])
@pytest.mark.parametrize("bitorder", ["big", "little"])
@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.uint8])
def test_packbits_roundtrip(shape, axis, bitorder, dtype):
    x = np.random.default_rng(0).integers(0, 2, shape).astype(dtype)
    packed = jnp.packbits(x, axis=axis, bitorder=bitorder)
    ref = np.packbits(x, axis=axis, bitorder=bitorder)
    np.testing.assert_array_equal(packed, ref)
    assert packed.dtype == np.uint8
    for count in [None, 3, -2, 200]:
        np.testing.assert_array_equal(
            jnp.unpackbits(ref, axis=axis, count=count, bitorder=bitorder),
            np.unpackbits(ref, axis=axis, count=count, bitorder=bitorder))


def test_bits_jit_vmap_and_errors():
    x = np.random.default_rng(1).integers(0, 2, (4, 10)).astype(np.uint8)
    np.testing.assert_array_equal(plax.jit(jnp.packbits)(x), np.packbits(x))
    np.testing.assert_array_equal(plax.vmap(jnp.packbits)(x), np.packbits(x, axis=1))
    with pytest.raises(TypeError):
        jnp.packbits(np.ones(3, np.float32))
    with pytest.raises(TypeError):
        jnp.unpackbits(np.ones(3, np.int32))
    with pytest.raises(ValueError):
        jnp.packbits(x, bitorder="middle")
