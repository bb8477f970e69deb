"""``plax.sharding.internal_eager_work`` is the calling thread's state: while one thread does
plax's own eager work (unplaced, unchecked), another thread's eager operation under the set
mesh is placed as ever; the device threads of a partitioned program share their caller's
state."""
from __future__ import annotations

import threading

import numpy as np

import plax
import plax.numpy as jnp
from plax.sharding import NamedSharding, PartitionSpec, in_internal_eager_work, \
    internal_eager_work
from plax.sharding_threads import on_each_device


def test_another_thread_is_placed_while_one_does_internal_work():
    inside, done = threading.Event(), threading.Event()
    seen = {}

    def internal():
        with internal_eager_work():
            seen["internal"] = jnp.asarray(np.ones(2)) + 1   # plax's own: not placed
            inside.set()
            done.wait(timeout=60)

    with plax.set_mesh(plax.make_mesh((1,), ("x",))):
        worker = threading.Thread(target=internal)
        worker.start()
        try:
            assert inside.wait(timeout=60)
            assert not in_internal_eager_work()
            out = jnp.asarray(np.ones(2)) + 1   # this thread's: placed on the mesh
        finally:
            done.set()
            worker.join()
    assert isinstance(out.sharding, NamedSharding)
    assert out.sharding.spec == PartitionSpec(None)
    assert not isinstance(seen["internal"].sharding, NamedSharding)
    np.testing.assert_array_equal(np.asarray(out), np.full(2, 2.0))


def test_device_threads_share_the_caller_s_state():
    devices = [object()] * 3   # (only their count matters)
    assert on_each_device(devices, lambda i: in_internal_eager_work()) == [False] * 3
    with internal_eager_work():
        assert on_each_device(devices, lambda i: in_internal_eager_work()) == [True] * 3
    assert not in_internal_eager_work()
