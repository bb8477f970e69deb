"""``jax.custom_gradient``: the value of the function, its gradient given by the rule it
returns (under grad, jit, vmap and for pytrees), checked against hand-derived values and
beside JAX 0.10.2 where installed."""
from __future__ import annotations

import numpy as np
import pytest

import plax


def _programs(jx):
    np_ = jx.numpy

    @jx.custom_gradient
    def square(x):
        return x ** 2, lambda g: (g * x,)  # deliberately half the true derivative

    @jx.custom_gradient
    def product(x, y):
        return x * y, lambda g: (g * y, g * x)

    @jx.custom_gradient
    def clip_gradient(x):
        return x, lambda g: (np_.clip(g, -1.0, 1.0),)

    @jx.custom_gradient
    def tree(d):
        return {"s": d["a"] * d["b"]}, lambda g: ({"a": g["s"] * d["b"], "b": g["s"]},)

    @jx.custom_gradient
    def bare(x):
        return x, lambda g: g * 3.0  # one argument: its cotangent alone

    return {
        "value": lambda: square(3.0),
        "grad": lambda: jx.grad(square)(3.0),
        "two_args": lambda: jx.grad(product, argnums=(0, 1))(3.0, 4.0),
        "clip": lambda: jx.grad(lambda x: 5 * clip_gradient(x))(2.0),
        "jit": lambda: jx.jit(jx.grad(lambda x: np_.sum(square(x))))(np_.arange(3.0)),
        "vmap": lambda: jx.vmap(jx.grad(square))(np_.arange(3.0)),
        "pytree": lambda: jx.grad(lambda d: tree(d)["s"])({"a": 2.0, "b": 5.0}),
        "bare": lambda: jx.grad(bare)(1.0),
    }


_EXPECTED = {"value": 9.0, "grad": 3.0, "two_args": (4.0, 3.0), "clip": 1.0,
             "jit": np.array([0.0, 1.0, 2.0]), "vmap": np.array([0.0, 1.0, 2.0]), "pytree": {"a": 5.0, "b": 1.0},
             "bare": 3.0}


@pytest.mark.parametrize("name", sorted(_EXPECTED))
def test_values(name):
    got = _programs(plax)[name]()
    want = _EXPECTED[name]
    for g, w in zip(plax.tree_util.tree_leaves(got), plax.tree_util.tree_leaves(want)):
        np.testing.assert_allclose(np.asarray(g), w)


@pytest.mark.parametrize("name", sorted(_EXPECTED))
def test_beside_jax(name):
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    ours = plax.tree_util.tree_leaves(_programs(plax)[name]())
    theirs = jax.tree_util.tree_leaves(_programs(jax)[name]())
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert np.asarray(a).dtype == np.asarray(b).dtype
