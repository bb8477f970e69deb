"""Host I/O: frombuffer/fromstring/fromfunction, load/save/savez, and fromiter/fromfile
raising as in JAX."""
from __future__ import annotations

import io

import numpy as np
import pytest

import plax
import plax.numpy as jnp


def test_from_buffer_string_function():
    data = np.arange(5, dtype=np.int16)
    np.testing.assert_array_equal(jnp.frombuffer(data.tobytes(), dtype=jnp.int16), data)
    np.testing.assert_array_equal(jnp.frombuffer(data.tobytes(), np.int16, count=2, offset=2),
                                  data[1:3])
    np.testing.assert_array_equal(jnp.fromstring("1, 2, 3", dtype=int, sep=","), [1, 2, 3])
    f = lambda i, j: i * 10 + j
    np.testing.assert_array_equal(jnp.fromfunction(f, (2, 3), dtype=int),
                                  np.fromfunction(f, (2, 3), dtype=int))
    assert jnp.fromfunction(lambda i: i, (3,)).dtype == np.float32
    with pytest.raises(NotImplementedError):
        jnp.fromiter(iter([1, 2]), float)
    with pytest.raises(NotImplementedError):
        jnp.fromfile("x.bin")


def test_save_load_roundtrip(tmp_path):
    x = jnp.arange(6.).reshape(2, 3)
    buf = io.BytesIO()
    jnp.save(buf, x)
    buf.seek(0)
    y = jnp.load(buf)
    assert isinstance(y, plax.Array)
    np.testing.assert_array_equal(y, x)
    path = tmp_path / "a.npz"
    jnp.savez(path, a=x, b=jnp.ones(2, jnp.bfloat16))
    with jnp.load(path) as z:
        np.testing.assert_array_equal(z["a"], x)
