"""The fast path of a ``jit`` call under a set mesh (:mod:`plax.transforms.jit_mesh_calls`) on
a mesh of one GPU: after the general path's first call of a signature, calls with host values
and uncommitted arrays replay it, with results equal to the general path's (type, sharding,
committedness, device, value). Runs in one child interpreter on the simulated CuPy
(``tests/cupy/fake_cupy.py``), which has one GPU device; an uncommitted array on the CPU
under that mesh is moved each call, as the general path moves it.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from subprocess_util import last_json, run_python

_CUPY_TESTS = Path(__file__).resolve().parent / "cupy"

_SCRIPT = r'''
import json
import fake_cupy
fake_cupy.install()
import numpy as np
import plax
from plax import plugins
import plax_cupy.plugin
if "cupy" not in plugins.registry().backends:
    plugins.register_plugin(plax_cupy.plugin, name="plax_cupy_simulated")
from plax.transforms.jit import JitFunction

general = [0]
_general = JitFunction._call_general


def counting(self, *args, **kwargs):
    general[0] += 1
    return _general(self, *args, **kwargs)


JitFunction._call_general = counting
gpu, cpu = plax.devices("gpu")[0], plax.devices("cpu")[0]
mesh = plax.make_mesh((1,), ("x",), devices=[gpu])


def described(x):
    return [type(x).__name__, str(x.sharding), x.committed, sorted(str(d) for d in x.devices()),
            str(x.aval), np.asarray(x).tolist()]


f = plax.jit(lambda a, b: (a * b, plax.numpy.sin(a)))
out = {}
on_gpu = plax.numpy.arange(3.0)  # uncommitted, on the default device: the GPU
with plax.default_device(cpu):
    on_cpu = plax.numpy.arange(3.0)  # uncommitted, on the CPU
assert (on_gpu.device, on_cpu.device, on_gpu.committed) == (gpu, cpu, False)
cases = {"numpy and scalar": lambda: (np.arange(3, dtype=np.float32), 2.0),
         "gpu array and numpy scalar": lambda: (on_gpu, np.float32(2.0)),
         "cpu array and scalar": lambda: (on_cpu, 2.0)}
with plax.set_mesh(mesh):
    for name, make in cases.items():
        before = general[0]
        runs = [[described(v) for v in f(*make())] for _ in range(3)]
        out[name] = {"general calls": general[0] - before, "same": runs[0] == runs[1] == runs[2],
                     "first": runs[0]}
print(json.dumps(out))
'''


@pytest.mark.skipif(shutil.which("g++") is None, reason="the simulated GPU needs g++")
def test_mesh_fast_path_on_a_one_gpu_mesh():
    got = last_json(run_python(_SCRIPT, _CUPY_TESTS, env={"PLAX_PLATFORMS": None}))
    for name, case in got.items():
        assert case["same"], name  # the replays give what the general path gave
        kind, sharding, committed, devices, aval, value = case["first"][0]
        assert (kind, committed, devices) == ("_ShardedArray", True, ["cuda:0"])
        assert "NamedSharding" in sharding and value == [0.0, 2.0, 4.0]
    assert got["numpy and scalar"]["general calls"] == 1
    assert got["gpu array and numpy scalar"]["general calls"] == 1
    assert got["cpu array and scalar"]["general calls"] == 3  # moved: not replayed
