"""Which operands JAX types ``P()`` under a set mesh (:func:`plax.array.host_or_uncommitted`),
asked alike by a ``jit`` call's arguments and by ``computed_as_one``; and ``computed_as_one``
leaving other threads' placement alone.

* A host value and an uncommitted Array are typed ``P()``; a ref is typed by what it holds:
  JAX 0.10 gives the reads of a one-device ref (``jax.new_ref`` made outside the mesh) a
  one-device type, not ``P()``, so a ``jit`` call no longer marks a ref argument as a host one
  (it did, where ``computed_as_one`` did not).
* ``computed_as_one`` (``jnp.matmul`` of host operands under a mesh) computes its steps
  unplaced in its own thread only: an eager operation another thread runs meanwhile under the
  mesh is placed as ever.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import sharding_eager
from plax.array import host_or_uncommitted
from plax.sharding import NamedSharding, PartitionSpec


def _mesh():
    return plax.make_mesh((1,), ("x",))


def test_host_or_uncommitted():
    committed = plax.device_put(np.ones(2, np.float32), plax.devices()[0])
    with plax.set_mesh(_mesh()):
        placed = jnp.ones(2) + 1   # on the mesh, P(None,)
    assert [host_or_uncommitted(v) for v in
            (np.ones(2), 1.5, jnp.ones(2), committed, placed, plax.new_ref(jnp.ones(2)))] == \
        [True, True, True, False, False, False]


def test_a_jit_call_types_a_one_device_ref_argument_with_no_mesh(monkeypatch):
    seen = []
    placed_results = sharding_eager.placed_results

    def recording(outs, jaxpr=None, short_inputs=(), *rest):
        seen.append(list(short_inputs))
        return placed_results(outs, jaxpr, short_inputs, *rest)

    monkeypatch.setattr(sharding_eager, "placed_results", recording)
    ref = plax.new_ref(np.arange(2.0, dtype=np.float32))
    with plax.set_mesh(_mesh()):
        f = plax.jit(lambda r, h: (jnp.sin(r[...]), jnp.sin(h)))
        a, b = f(ref, np.ones(2, np.float32))
    # under an Explicit axis JAX types a ref committed to one device with no mesh, as it does
    # the host argument: both results stay on the ref's device, as JAX keeps them
    assert seen == [[True, True]]
    assert [type(v.sharding).__name__ for v in (a, b)] == ["SingleDeviceSharding"] * 2
    np.testing.assert_allclose(np.asarray(a), np.sin(np.arange(2.0)), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(b), np.sin(np.ones(2)), rtol=1e-6)


def test_jax_types_a_one_device_ref_argument_by_its_device():
    """The decision above, checked on JAX: a ref's reads are not typed ``P()``."""
    jax = pytest.importorskip("jax")
    ref = jax.new_ref(np.arange(2.0, dtype=np.float32))
    with jax.set_mesh(jax.make_mesh((1,), ("x",))):
        a = jax.jit(lambda r: jax.numpy.sin(r[...]))(ref)
    assert not (isinstance(a.sharding, jax.sharding.NamedSharding) and
                a.sharding.spec == jax.sharding.PartitionSpec())


def test_computed_as_one_leaves_other_threads_placement_alone():
    other = []

    def steps(a, b):
        # another thread's eager operation while this one computes its steps unplaced
        t = threading.Thread(target=lambda: other.append(jnp.asarray(np.ones(2)) + 1))
        t.start()
        t.join()
        return jnp.matmul(a, b)

    with plax.set_mesh(_mesh()):
        out = sharding_eager.computed_as_one(steps, (np.ones((2, 3)), np.ones(3)))
    assert out.sharding.spec == PartitionSpec()   # JAX's one jit keeps the host operands' P()
    np.testing.assert_array_equal(np.asarray(out), np.full(2, 3.0))
    assert isinstance(other[0].sharding, NamedSharding)   # placed on the mesh, as ever
    assert other[0].sharding.spec == PartitionSpec(None)
