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


def _one_device(x) -> bool:
    return not isinstance(x.sharding, NamedSharding) and len(x.sharding.device_set) == 1


def test_a_jit_call_in_internal_work_sees_no_mesh():
    """Inside plax's own eager work under a set Explicit mesh, a jit call's arguments and
    results are left on their device (neither placed nor checked), on its first call (the
    general path) as on the next ones (the fast path), host arguments too."""
    f = plax.jit(lambda a, b: a * b + 1)
    x = jnp.arange(3.0)
    with plax.set_mesh(plax.make_mesh((1,), ("x",))), internal_eager_work():
        outs = [f(x, x), f(x, x), f(np.arange(3.0, dtype=np.float32), 2.0)]
    for out, want in zip(outs, [np.arange(3.0) ** 2 + 1] * 2 + [np.arange(3.0) * 2 + 1]):
        assert _one_device(out) and not out.committed
        np.testing.assert_allclose(np.asarray(out), want)


def test_a_jit_call_in_internal_work_takes_the_fast_path(monkeypatch):
    from plax.transforms.jit import JitFunction
    f = plax.jit(lambda a, b: a + b)
    x = jnp.ones(3)
    f(x, x)   # compiled, its fast entry made
    general = []
    call_general = JitFunction._call_general

    def recording(self, args, kwargs, *mesh):
        general.append(args)
        return call_general(self, args, kwargs, *mesh)

    monkeypatch.setattr(JitFunction, "_call_general", recording)
    mesh = plax.make_mesh((1,), ("x",))
    with plax.set_mesh(mesh):
        with internal_eager_work():
            inside = [f(x, x) for _ in range(3)]
        assert general == []
        placed = f(x, x)   # the user's call under the mesh: the general path, placed
    assert len(general) == 1
    assert isinstance(placed.sharding, NamedSharding)
    for out in inside:
        assert _one_device(out)
        np.testing.assert_array_equal(np.asarray(out), np.full(3, 2.0))


def test_a_jit_call_under_a_mesh_works_out_the_mesh_once(monkeypatch):
    from plax import sharding_eager
    f = plax.jit(lambda a, b: (a + b, a * b))
    x = jnp.ones(3)
    calls = []
    current_mesh = sharding_eager.current_mesh

    def counting():
        calls.append(1)
        return current_mesh()

    monkeypatch.setattr(sharding_eager, "current_mesh", counting)
    mesh = plax.make_mesh((1,), ("x",), axis_types=(plax.sharding.AxisType.Auto,))
    with plax.set_mesh(mesh):
        f(x, x)   # (compiled)
        del calls[:]
        outs = f(x, np.ones(3, np.float32))
    assert len(calls) == 1
    assert all(o.sharding.mesh is mesh for o in outs)
    np.testing.assert_array_equal(np.asarray(outs[0]), np.full(3, 2.0))
