"""Helpers of :mod:`plax.sharding_eager` that place values on the set mesh:
``placed_results`` tells "no mesh" (``mesh=None``) from "look the mesh up" (``mesh`` not
given), and ``laid_out_as`` types a value written into a ref over the mesh as the value it
replaces, the very type object, made once."""
from __future__ import annotations

import numpy as np

import plax
import plax.numpy as jnp
from plax import sharding_eager
from plax.array import _ShardedArray
from plax.sharding import NamedSharding, PartitionSpec as P


def _mesh():
    return plax.make_mesh((1,), ("x",))


def test_placed_results_mesh_none_places_nothing_and_not_given_looks_it_up():
    mesh = _mesh()
    x = jnp.arange(3.0)
    with plax.set_mesh(mesh):
        [unplaced] = sharding_eager.placed_results([x], mesh=None)
        [looked_up] = sharding_eager.placed_results([x])
        [given] = sharding_eager.placed_results([x], mesh=sharding_eager.current_mesh())
    assert unplaced is x
    for placed in (looked_up, given):
        assert type(placed) is _ShardedArray and placed.committed
        assert placed.sharding == NamedSharding(mesh, P(None,))
        np.testing.assert_array_equal(np.asarray(placed), np.arange(3.0))
    assert sharding_eager.placed_results([x]) == [x]  # no mesh set: nothing to place


def test_laid_out_as_keeps_the_replaced_value_type():
    mesh = _mesh()
    old = plax.device_put(jnp.ones(2), NamedSharding(mesh, P()))
    for value in (plax.device_put(jnp.zeros(2), NamedSharding(mesh, P(None,))),  # same layout
                  jnp.zeros(2)):  # placed afresh
        out = sharding_eager.laid_out_as(value, old)
        assert out.aval is old.aval
        assert out.sharding == old.sharding
        np.testing.assert_array_equal(np.asarray(out), np.zeros(2))
    assert sharding_eager.laid_out_as(old, old) is old
