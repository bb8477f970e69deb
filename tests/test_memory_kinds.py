"""``device_put(x, jax.memory.Space.Host)`` and memory kinds on shardings as JAX 0.10.2 has
them on CPU (``device``, ``pinned_host``, ``unpinned_host``), alone and beside JAX."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import memory, numpy as jnp
from plax.sharding import NamedSharding, SingleDeviceSharding


def test_device_put_to_a_memory_space():
    x = jnp.arange(4.0)
    y = plax.device_put(x, memory.Space.Host)
    assert y.sharding.memory_kind == "pinned_host"
    assert y.sharding == SingleDeviceSharding(x.devices().pop(), memory_kind="pinned_host")
    np.testing.assert_array_equal(y, np.arange(4.0))
    np.testing.assert_array_equal(y + 1, np.arange(4.0) + 1)  # usable as any array
    back = plax.device_put(y, memory.Space.Device)
    assert back.sharding.memory_kind == "device"
    np.testing.assert_array_equal(back, x)
    a, b = plax.device_put([x, 1.0], memory.Space.Host)
    assert a.sharding.memory_kind == b.sharding.memory_kind == "pinned_host"
    with pytest.raises(ValueError, match="Space.Any names no memory"):
        plax.device_put(x, memory.Space.Any)


def test_shardings_carry_a_checked_memory_kind():
    d = plax.devices()[0]
    assert SingleDeviceSharding(d).memory_kind == "device"
    assert SingleDeviceSharding(d) == SingleDeviceSharding(d, memory_kind="device")
    host = SingleDeviceSharding(d).with_memory_kind("pinned_host")
    assert host != SingleDeviceSharding(d) and host.memory_kind == "pinned_host"
    assert repr(host) == f"SingleDeviceSharding(device={d!r}, memory_kind=pinned_host)"
    y = plax.device_put(jnp.ones(2), SingleDeviceSharding(d, memory_kind="unpinned_host"))
    assert y.sharding.memory_kind == "unpinned_host"
    with pytest.raises(ValueError, match="can address the following memory kinds: device, "
                                         "pinned_host, unpinned_host. Got memory kind: hbm"):
        SingleDeviceSharding(d, memory_kind="hbm")
    mesh = plax.make_mesh((1,), ("x",))
    assert NamedSharding(mesh, plax.P("x"), memory_kind="pinned_host").memory_kind == "pinned_host"
    assert NamedSharding(mesh, plax.P("x")).memory_kind == "device"


def test_beside_jax():
    jax = pytest.importorskip("jax", reason="JAX is not installed: nothing to compare with")

    def run(mod):
        x = mod.numpy.arange(4.0)
        d = mod.devices()[0]
        out = []
        for target in (mod.memory.Space.Host, mod.memory.Space.Device,
                       mod.sharding.SingleDeviceSharding(d, memory_kind="unpinned_host")):
            y = mod.device_put(x, target)
            out.append((repr(y.sharding), y.sharding.memory_kind, repr(y)))
        try:
            mod.sharding.SingleDeviceSharding(d, memory_kind="hbm")
        except ValueError as err:
            out.append(str(err))
        return out

    assert run(plax) == run(jax)
