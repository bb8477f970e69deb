"""plax.experimental.multihost_utils in one process (the run's only process): each helper
behaves as over a run of one process. The exchanges of a run of several processes are also
checked here through a stand-in transport (every other process passes what this one does,
possibly altered), and the local <-> global layout over meshes of several processes against
NamedSharding's blocks, with placeholder devices of other processes. Across two real
processes: plugins/plax_pmap/tests/mpi_checks.py --multihost (under mpiexec)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.experimental import multihost_utils as mu
from subprocess_util import last_json, run_python


def test_process_allgather_stacks_or_concatenates():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = mu.process_allgather({"a": jnp.asarray(x), "b": 2.0})
    assert isinstance(out["a"], np.ndarray) and out["a"].shape == (1, 2, 3)
    np.testing.assert_array_equal(out["a"][0], x)
    assert out["b"].tolist() == [2.0]
    np.testing.assert_array_equal(mu.process_allgather(x, tiled=True), x)
    with pytest.raises(ValueError, match="rank >= 1"):
        mu.process_allgather(1.0, tiled=True)


def test_broadcast_sync_and_assert_equal():
    np.testing.assert_array_equal(mu.broadcast_one_to_all([jnp.arange(3)])[0], np.arange(3))
    with pytest.raises(ValueError, match="exactly one process"):
        mu.broadcast_one_to_all(1.0, is_source=False)
    mu.sync_global_devices("start")
    mu.assert_equal({"w": jnp.ones(2), "n": np.nan}, "params")


def test_reachable_as_an_attribute():
    assert plax.experimental.multihost_utils is mu
    assert "multihost_utils" in dir(plax.experimental)


# ------------------------------------------------------------------ bcast or allgather

class _Transport:
    """A transport of ``size`` processes in one: every other process passes what this one
    does (``peer`` may change it), and the calls are recorded."""

    def __init__(self, size=2, peer=None, with_bcast=True):
        self.rank, self.size, self.local_counts = 0, size, [1] * size
        self.peer = peer or (lambda x: x)
        self.calls = []
        if with_bcast:
            self.bcast = self._bcast

    def allgather(self, local, timeout):
        self.calls.append(("allgather", local.shape))
        return np.concatenate([local] + [self.peer(local.copy()) for _ in range(self.size - 1)])

    def _bcast(self, x, root, timeout):
        self.calls.append(("bcast", root))
        return np.array(x)


def _not_source(x):
    """The other process is not the source (broadcast_one_to_all's first exchange)."""
    if x.shape == (1, 2):
        x[0, 0] = 0
    return x


@pytest.fixture
def transport(monkeypatch):
    def install(**kw):
        t = _Transport(**kw)
        monkeypatch.setitem(plax.distributed._state, "transport", t)
        return t
    return install


def test_broadcast_uses_the_transports_bcast_when_it_has_one(transport):
    t = transport(peer=_not_source)
    tree = {"a": np.arange(3, dtype=np.int16), "b": np.float32(2), "e": np.zeros((0, 2))}
    out = mu.broadcast_one_to_all(tree)
    assert out["a"].tolist() == [0, 1, 2] and out["a"].dtype == np.int16
    assert out["b"] == 2.0 and out["e"].shape == (0, 2)
    assert [c for c in t.calls if c[0] == "bcast"] == [("bcast", 0), ("bcast", 0)]  # not "e"
    # without bcast (a third-party transport): the values travel by allgather
    t = transport(peer=_not_source, with_bcast=False)
    out = mu.broadcast_one_to_all(tree)
    np.testing.assert_array_equal(out["a"], np.arange(3))
    assert ("allgather", (1, 3)) in t.calls


def test_broadcast_checks_the_processes_agree(transport):
    transport()
    with pytest.raises(ValueError, match=r"exactly one process.*\[0, 1\]"):
        mu.broadcast_one_to_all(1.0, is_source=True)  # both "processes" claim to be the source

    def other_shape(x):  # the other process's leaf signatures give shape (4,)
        if x.ndim == 3:
            x[0, 0, 4], x[0, 0, 3] = 4, 0
        return _not_source(x)
    transport(peer=other_shape)
    with pytest.raises(ValueError, match=r"\['w'\].*\[\(3,\), \(4,\)\]"):
        mu.broadcast_one_to_all({"w": np.zeros(3)}, is_source=True)


# ------------------------------------------------------------------ local <-> global, one device

P = plax.sharding.PartitionSpec
NamedSharding = plax.sharding.NamedSharding


def _mesh():
    return plax.sharding.Mesh(np.array(plax.devices()[:1]), ("x",))


def test_one_process_global_is_local():
    mesh = _mesh()
    x = np.arange(12.0).reshape(4, 3)  # float64: canonicalized, as plax arrays are
    tree = {"w": x, "b": [jnp.ones(2), 3.0], "none": None}
    specs = {"w": P("x", None), "b": P(), "none": None}   # a prefix: one spec for "b"'s leaves
    g = mu.host_local_array_to_global_array(tree, mesh, specs)
    assert isinstance(g["w"], plax.Array) and g["w"].dtype == np.float32
    np.testing.assert_array_equal(np.asarray(g["w"]), x)
    assert g["w"].sharding == NamedSharding(mesh, P("x", None))
    assert g["b"][0].sharding == NamedSharding(mesh, P()) and g["none"] is None
    assert g["b"][1].shape == () and float(g["b"][1]) == 3.0
    back = mu.global_array_to_host_local_array(g, mesh, specs)
    assert back["w"] is g["w"]  # already the local array: returned as it is
    np.testing.assert_array_equal(np.asarray(back["b"][0]), np.ones(2))
    again = mu.host_local_array_to_global_array(g, mesh, specs)
    assert again["w"] is g["w"]
    # NumPy values become Arrays (also when their dtype needs no conversion)
    for f in (mu.host_local_array_to_global_array, mu.global_array_to_host_local_array):
        assert isinstance(f(np.ones(2, np.float32), mesh, P()), plax.Array)
    # a NumPy global value becomes a local Array with the local sharding
    local = mu.global_array_to_host_local_array(x, mesh, P(None, "x"))
    assert local.sharding == NamedSharding(mesh, P(None, "x")) and local.shape == (4, 3)


def test_one_process_under_jit():
    mesh = _mesh()
    f = plax.jit(lambda v: mu.global_array_to_host_local_array(
        mu.host_local_array_to_global_array(v, mesh, P("x")) * 2, mesh, P("x")))
    np.testing.assert_array_equal(np.asarray(f(np.arange(3.0))), [0.0, 2.0, 4.0])


def test_local_global_errors():
    mesh = _mesh()
    ltg, gtl = mu.host_local_array_to_global_array, mu.global_array_to_host_local_array
    with pytest.raises(ValueError, match=r"None is not a valid input to the pspecs"):
        ltg({"a": np.ones(2)}, mesh, {"a": None})
    with pytest.raises(ValueError, match=r"(?s)pytree prefix of the inputs.*Dict key mismatch"):
        ltg({"a": np.ones(2)}, mesh, {"b": P()})
    with pytest.raises(ValueError, match=r"pytree prefix"):
        ltg([np.ones(2), np.ones(2)], mesh, [P()])
    with pytest.raises(TypeError, match=r"must hold PartitionSpecs, got 'x'"):
        ltg(np.ones(2), mesh, "x")
    with pytest.raises(ValueError, match=r"\['a'\]: .*names axis 'z'"):
        ltg({"a": np.ones(2)}, mesh, P("z"))
    with pytest.raises(ValueError, match=r"has 2 entries but the leaf at \['a'\]\[1\] has rank 1"):
        gtl({"a": [np.ones((2, 2)), np.ones(2)]}, mesh, P("x", None))
    with pytest.raises(TypeError, match=r"the input is not an array"):
        ltg("text", mesh, P())
    # the mesh holds other processes' devices, or none of this one's, or not in blocks
    other = plax.sharding.Mesh(np.array([_fake(101, 1), _fake(102, 2)]), ("x",))
    with pytest.raises(ValueError, match="none of this process's devices"):
        ltg(np.ones(2), other, P("x"))
    with pytest.raises(ValueError, match="none of this process's devices"):
        gtl(np.ones(2), other, P("x"))
    both = plax.sharding.Mesh(np.array([plax.devices()[0], _fake(101, 1)]), ("x",))
    with pytest.raises(ValueError, match=r"processes \[0, 1\], but this run has one process"):
        ltg(np.ones(2), both, P("x"))
    tangled = plax.sharding.Mesh(np.array([_fake(101, 1), _fake(102, 2), _fake(103, 1)]),
                                 ("x",))
    with pytest.raises(ValueError, match=r"the devices of process 1 do not form one contiguous "
                                         r"block of the mesh \(they sit at mesh positions "
                                         r"\[\[0\], \[2\]\]\)"):
        ltg(np.ones(2), tangled, P("x"))


def _fake(id_, process):
    """A device of another process (a placeholder, as plax.distributed makes them)."""
    from plax.device import CpuDevice
    d = CpuDevice(id_, device_kind="cpu")
    d.process_index = d.host_id = process
    return d


_FOUR_DEVICES = """
import json
import numpy as np
import plax
from plax.experimental import multihost_utils as mu
from plax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(plax.devices()).reshape(2, 2), ("x", "y"))
x = np.arange(24, dtype=np.float32).reshape(4, 6)
out = {}
for spec in [P("x", "y"), P(("x", "y")), P(None, ("y", "x")), P("y"), P()]:
    try:
        g = mu.host_local_array_to_global_array(x, mesh, spec)
    except ValueError as err:
        out[repr(spec)] = str(err)
        continue
    back = mu.global_array_to_host_local_array(g, mesh, spec)
    shards = {s.device.id: np.asarray(s.data).tolist() for s in g.addressable_shards}
    expected = {d.id: x[i].tolist()
                for d, i in NamedSharding(mesh, spec).devices_indices_map(x.shape).items()}
    out[repr(spec)] = [np.array_equal(np.asarray(g), x), g.sharding == NamedSharding(mesh, spec),
                       shards == expected, np.array_equal(np.asarray(back), x)]
print(json.dumps(out))
"""


def test_one_process_four_devices():
    # one process holds every device of the mesh: local == global, split over the devices
    out = last_json(run_python(_FOUR_DEVICES, env={"PLAX_NUM_CPU_DEVICES": "4",
                                                   "PLAX_PLATFORMS": "cpu"}))
    for spec in ["P('x', 'y')", "P(('x', 'y'),)", "P('y',)",
                 "P()"]:
        assert out[spec] == [True, True, True, True], (spec, out[spec])
    assert "dimension 1" in out["P(None, ('y', 'x'))"]  # 6 is not divisible by 4
    assert "not divisible by 4" in out["P(None, ('y', 'x'))"]


# ------------------------------------------------------------------ several processes, simulated

def test_two_processes_through_a_transport(transport):
    # this process's device and one of process 1, which passes the same local values
    mesh = plax.sharding.Mesh(np.array([plax.devices()[0], _fake(1, 1)]), ("x",))
    t = transport()
    x = np.arange(6.0).reshape(3, 2)
    g = mu.host_local_array_to_global_array({"r": x, "c": x, "s": 5}, mesh,
                                            {"r": P("x"), "c": P(None, "x"), "s": P()})
    np.testing.assert_array_equal(np.asarray(g["r"]), np.concatenate([x, x]))
    np.testing.assert_array_equal(np.asarray(g["c"]), np.concatenate([x, x], 1))
    assert g["r"].sharding == NamedSharding(mesh, P("x")) and int(g["s"]) == 5
    assert sum(c[0] == "allgather" for c in t.calls) == 3  # header, shapes, one for the data
    back = mu.global_array_to_host_local_array(g, mesh, {"r": P("x"), "c": P(None, "x"),
                                                         "s": P()})
    np.testing.assert_array_equal(np.asarray(back["r"]), x)
    np.testing.assert_array_equal(np.asarray(back["c"]), x)
    assert back["r"].sharding.mesh.devices.tolist() == [plax.devices()[0]]


def test_two_processes_errors_reach_every_process(transport):
    mesh = plax.sharding.Mesh(np.array([plax.devices()[0], _fake(1, 1)]), ("x",))

    def failed(x):  # process 1 reports that its local inputs did not fit
        if x.shape == (1, 2):
            x[0, 0] = 0
        return x
    transport(peer=failed)
    with pytest.raises(ValueError, match=r"process\(es\) \[1\] could not use their local inputs"):
        mu.host_local_array_to_global_array(np.ones(2), mesh, P("x"))

    def longer(x):  # process 1's local rows give another global shape
        if x.ndim == 3:
            x[0, 0, 4], x[0, 0, 3] = 8, 0
        return x
    transport(peer=longer)
    with pytest.raises(ValueError, match=r"\['w'\] \(global shapes by process: \[\(4,\), \(8,\)\]"):
        mu.host_local_array_to_global_array({"w": np.ones(2)}, mesh, P("x"))

    def more_leaves(x):
        if x.shape == (1, 2):
            x[0, 1] += 1
        return x
    transport(peer=more_leaves)
    with pytest.raises(ValueError, match=r"different structures .*\[1, 2\]"):
        mu.host_local_array_to_global_array(np.ones(2), mesh, P("x"))
    # this process's own error is its own (the others learn of it through the transport)
    t = transport()
    with pytest.raises(ValueError, match=r"dimension 0 .* size 3 is not divisible by 2"):
        mu.host_local_array_to_global_array(np.ones(3), plax.sharding.Mesh(
            np.array([[plax.devices()[0], _fake(1, 0)], [_fake(2, 1), _fake(3, 1)]]),
            ("p", "l")), P("l"))
    assert t.calls[0] == ("allgather", (1, 2))
    with pytest.raises(TypeError, match="traced"):
        plax.jit(lambda v: mu.host_local_array_to_global_array(v, mesh, P("x")))(np.ones(2))


# ------------------------------------------------------------------ the layout, many processes

def _layout_cases():
    # mesh {'a': 2, 'b': 2, 'c': 2}, 4 processes of 2 devices (JAX's local_to_global_shape
    # examples): process 2a+b holds the positions (a, b, :)
    owners3 = np.arange(8).reshape(2, 2, 2) // 2
    yield owners3, ("a", "b", "c"), P(("a", "b", "c"), None), (2, 3), (8, 3)
    yield owners3, ("a", "b", "c"), P(("a", "b"), None), (2, 3), (8, 3)
    yield owners3, ("a", "b", "c"), P(None, ("a", "c")), (3, 2), (3, 4)
    yield owners3, ("a", "b", "c"), P(("a", "c"), "b"), (2, 3), (4, 6)
    yield owners3, ("a", "b", "c"), P(), (2, 3), (2, 3)
    # (process, device) mesh of 2 x 2, and its transpose (the process axis second)
    owners2 = np.array([[0, 0], [1, 1]])
    yield owners2, ("p", "l"), P(("l", "p")), (4,), (8,)
    yield owners2, ("p", "l"), P("p", "l"), (2, 4), (4, 4)
    yield owners2.T, ("l", "p"), P(("p", "l"), None), (2, 1), (4, 1)
    yield owners2.T, ("l", "p"), P(None, "l"), (1, 4), (1, 4)


@pytest.mark.parametrize("owners,names,spec,local_shape,global_shape", list(_layout_cases()))
def test_layout_against_the_shardings(owners, names, spec, local_shape, global_shape):
    layout = mu._Layout(owners, names)
    devices = np.empty(owners.shape, object)
    for i, coords in enumerate(np.ndindex(*owners.shape)):
        devices[coords] = _fake(i, int(owners[coords]))
    mesh = plax.sharding.Mesh(devices, names)
    whole = NamedSharding(mesh, spec).devices_indices_map(global_shape)
    # processes holding the same blocks (an axis the spec leaves out spans processes) must
    # pass the same values: a global array whose blocks depend only on their position
    rng = np.random.default_rng(0)
    g = rng.standard_normal(global_shape).astype(np.float32)
    parts = {}
    for p, box in layout.boxes.items():
        assert layout.global_shape(p, spec, local_shape) == global_shape
        assert layout.local_shape(p, spec, global_shape) == local_shape
        local = layout.extract(p, spec, g)
        assert local.shape == local_shape
        # the definition: over the local mesh, each device holds the block it holds globally
        local_mesh = plax.sharding.Mesh(devices[box], names)
        for d, index in NamedSharding(local_mesh, spec).devices_indices_map(local_shape).items():
            np.testing.assert_array_equal(local[index], g[whole[d]])
        parts[p] = local
    np.testing.assert_array_equal(layout.assemble(spec, global_shape, np.float32, parts), g)
