"""plax.flatten_util.ravel_pytree: the flat vector against NumPy's concatenation of the leaves,
the round trip, dtypes as JAX gives them, and grad, jit, vmap through ``unravel``."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.flatten_util import ravel_pytree

TREES = {
    "one dtype": {"w": np.arange(4, dtype=np.float32).reshape(2, 2), "b": np.ones(2, np.float32)},
    "mixed": [1.0, 2, (np.arange(3, dtype=np.int32), np.float16(1.5))],
    "complex and real": {"c": np.array([1 + 2j], np.complex64), "r": np.arange(2.0, dtype=np.float32)},
    "empty": (),
    "None leaf": {"a": None},
    "bool and int8": [np.bool_(True), np.int8(3)],
    "scalar": 1.0,
    "python ints": [3, 4],
}


@pytest.mark.parametrize("name", TREES)
def test_flat_vector_and_round_trip(name):
    tree = TREES[name]
    flat, unravel = ravel_pytree(tree)
    leaves = plax.tree.leaves(tree)
    assert flat.ndim == 1
    expected = (np.concatenate([np.ravel(np.asarray(x)) for x in leaves]).astype(flat.dtype)
                if leaves else np.zeros(0, np.float32))
    np.testing.assert_array_equal(np.asarray(flat), expected)
    back = unravel(flat)
    assert plax.tree.structure(back) == plax.tree.structure(tree)
    for got, leaf in zip(plax.tree.leaves(back), leaves):
        want = jnp.asarray(leaf)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("name", TREES)
def test_as_jax(name):
    jax = pytest.importorskip("jax")
    from jax.flatten_util import ravel_pytree as jax_ravel_pytree
    ours, theirs = ravel_pytree(TREES[name])[0], jax_ravel_pytree(TREES[name])[0]
    assert (ours.dtype, ours.shape, ours.weak_type) == (theirs.dtype, theirs.shape, theirs.weak_type)
    np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs))


def test_unravel_of_one_dtype_keeps_the_vectors_dtype_and_mixed_needs_the_flat_dtype():
    flat, unravel = ravel_pytree(TREES["one dtype"])
    assert unravel(flat.astype(jnp.float16))["w"].dtype == jnp.float16
    flat, unravel = ravel_pytree(TREES["mixed"])
    with pytest.raises(TypeError, match="expected dtype float32"):
        unravel(flat.astype(jnp.int32))
    with pytest.raises(ValueError, match=r"shape \(6,\)"):
        unravel(jnp.zeros(5))
    with pytest.raises(ValueError, match=r"shape \(6,\)"):
        unravel(jnp.zeros((2, 3)))
    flat, unravel = ravel_pytree(TREES["complex and real"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        back = unravel(flat + 1j)
    np.testing.assert_array_equal(back["r"], [0.0, 1.0])  # the imaginary part dropped quietly
    assert back["r"].dtype == jnp.float32


def test_grad_jit_vmap_through_unravel():
    params = {"w": np.array([[0.5, -1.0], [2.0, 0.25]], np.float32), "b": np.array([0.1, -0.3], np.float32)}
    x = np.array([1.0, 2.0], np.float32)

    def loss(p):
        return jnp.sum(jnp.tanh(p["w"] @ x + p["b"]) ** 2)

    flat, unravel = ravel_pytree(params)
    g_flat = plax.grad(lambda v: loss(unravel(v)))(flat)
    np.testing.assert_allclose(g_flat, ravel_pytree(plax.grad(loss)(params))[0], rtol=1e-6)
    eps = 1e-3
    fd = [(loss(unravel(flat + eps * e)) - loss(unravel(flat - eps * e))) / (2 * eps)
          for e in np.eye(flat.size, dtype=np.float32)]
    np.testing.assert_allclose(g_flat, fd, rtol=2e-2, atol=2e-3)
    rebuilt = plax.jit(lambda v, u: u(v)["w"], static_argnums=1)(flat, unravel)
    np.testing.assert_array_equal(rebuilt, params["w"])
    assert unravel == ravel_pytree({"b": np.zeros(2, np.float32), "w": np.ones((2, 2), np.float32)})[1]
    batch = np.stack([np.asarray(flat) * k for k in range(3)])
    ws = plax.vmap(lambda v: unravel(v)["w"])(batch)
    np.testing.assert_array_equal(ws, np.stack([params["w"] * k for k in range(3)]))
    traced = plax.jit(lambda p: ravel_pytree(p)[0])(params)
    np.testing.assert_array_equal(traced, flat)
