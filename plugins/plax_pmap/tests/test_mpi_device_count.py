"""The MPI transport counts each process's devices as ``plax.devices()`` lists them: one parse
of the device-count settings (``plax.device.cpu_device_count``), checked in one process with a
stand-in for mpi4py's world communicator (no MPI library needed)."""
from __future__ import annotations

import sys
import types

import pytest

import plax
from plax.device import cpu_device_count
from plax_pmap.mpi import MpiTransport

_XLA = "--xla_force_host_platform_device_count="


class _World:
    """One process's view of a world of ``size`` processes that all report the same count."""

    def __init__(self, size: int = 2):
        self.size = size

    def Dup(self):
        return self

    def Get_rank(self) -> int:
        return 0

    def Get_size(self) -> int:
        return self.size

    def allgather(self, value):
        return [value] * self.size


@pytest.fixture
def transport_with(monkeypatch):
    """Sets the count settings given, then builds an MpiTransport over the stand-in world."""
    fake = types.ModuleType("mpi4py")
    fake.MPI = types.SimpleNamespace(COMM_WORLD=_World())
    monkeypatch.setitem(sys.modules, "mpi4py", fake)
    # update() is refused once this process has devices: the option table directly
    monkeypatch.setitem(plax.config._values, "num_cpu_devices", -1)

    def build(**env):
        for name in ("PLAX_NUM_CPU_DEVICES", "JAX_NUM_CPU_DEVICES", "XLA_FLAGS"):
            monkeypatch.delenv(name, raising=False)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        return MpiTransport()
    return build


@pytest.mark.parametrize("env,expected", [
    ({}, 1),
    ({"PLAX_NUM_CPU_DEVICES": "3"}, 3),
    ({"JAX_NUM_CPU_DEVICES": "2"}, 2),                          # read only by the devices once
    ({"XLA_FLAGS": _XLA + "4"}, 4),                             # likewise
    ({"PLAX_NUM_CPU_DEVICES": "-1", "XLA_FLAGS": _XLA + "2"}, 2),
])
def test_transport_counts_devices_as_the_device_list_does(transport_with, env, expected):
    transport = transport_with(**env)
    assert transport.local_counts == [cpu_device_count()] * 2 == [expected] * 2


@pytest.mark.parametrize("value", ["0", "four"])
def test_transport_refuses_a_bad_count_as_the_device_list_does(transport_with, value):
    with pytest.raises(ValueError, match="PLAX_NUM_CPU_DEVICES") as transport_error:
        transport_with(PLAX_NUM_CPU_DEVICES=value)
    with pytest.raises(ValueError) as device_error:
        cpu_device_count()
    assert str(transport_error.value) == str(device_error.value)
