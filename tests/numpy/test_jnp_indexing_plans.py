"""Eager indexing takes the cheap path: basic indexing is a slice (no gather), static ``.at[]``
updates are a dynamic_update_slice of the box (no iota over the whole array, no scatter), and
an array index is one gather. These are the structural reasons the costs measured by
benchmarks/eager_overhead.py stay small; speed itself is not asserted in tests."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp

X = jnp.arange(12.0).reshape(3, 4)
BIG = jnp.zeros((500, 500))
IDX = jnp.array([0, 2])


def primitives_of(fn, *args) -> list[str]:
    return [e.primitive.name for e in plax.make_jaxpr(fn)(*args).eqns]


@pytest.mark.parametrize("fn", [lambda x: x[0], lambda x: x[1:3], lambda x: x[0, 1],
                                lambda x: x[:, ::-1], lambda x: x[..., 2]],
                         ids=["x[0]", "x[1:3]", "x[0,1]", "x[:,::-1]", "x[...,2]"])
def test_basic_indexing_is_slicing(fn):
    prims = primitives_of(fn, X)
    assert "gather" not in prims and "scatter" not in prims, prims
    np.testing.assert_array_equal(np.asarray(fn(X)), fn(np.asarray(X)))


def test_array_index_is_one_gather():
    prims = primitives_of(lambda x, i: x[i], X, IDX)
    assert prims.count("gather") == 1, prims


@pytest.mark.parametrize("update", [lambda x: x.at[3, 5:9].set(1.0),
                                    lambda x: x.at[0].add(2.0),
                                    lambda x: x.at[1:3, 7].multiply(3.0)],
                         ids=["set box", "add row", "multiply column"])
def test_static_update_is_a_box_update(update):
    prims = primitives_of(update, BIG)
    assert "dynamic_update_slice" in prims, prims
    assert not any(p.startswith("scatter") or p == "iota" for p in prims), prims
    assert np.asarray(update(BIG)).shape == (500, 500)


def test_static_update_values():
    np.testing.assert_array_equal(np.asarray(BIG.at[3, 5:9].set(1.0))[3, 4:10], [0, 1, 1, 1, 1, 0])
    got = np.asarray(X.at[1:3, 2].multiply(3.0))
    want = np.asarray(X).copy()
    want[1:3, 2] *= 3.0
    np.testing.assert_array_equal(got, want)
