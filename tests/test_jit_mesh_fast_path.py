"""A ``jit`` call under a set mesh of CPU devices with host values and
Arrays as arguments (:mod:`plax.transforms.jit_mesh_calls`): the first call of a
signature takes the general path, which places every argument ``P()`` on a mesh of Explicit
axes and the results on the mesh; later calls replay what it made. Whichever path a call takes, its results
are the same -- type, ``.sharding``, committedness, pieces, values -- and a NumPy argument
written by its owner after the call, or a donated one, behaves as on the general path."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.array import _BUF
from plax.sharding import NamedSharding, PartitionSpec as P
from plax.transforms import jit_mesh_calls
from plax.transforms.jit_shardings import placed_on_context_mesh

MESH = plax.make_mesh((1,), ("x",))
AUTO = plax.make_mesh((1,), ("x",), axis_types=(plax.sharding.AxisType.Auto,))


def _described(x) -> tuple:
    """Everything a caller can tell of an Array's placement, and its value."""
    pieces = tuple((p.device, p.index, p.backend) for p in getattr(x, "_pieces", ()))
    return (type(x), x.sharding, x.aval, getattr(x.aval, "sharding", None), x.aval.weak_type,
            x._committed, pieces, np.asarray(x).tolist())


@pytest.fixture
def replays(monkeypatch):
    """Counts the calls that replay a recorded signature (the mesh fast path)."""
    count = [0]
    replayed = jit_mesh_calls.replayed

    def counting(parts, bufs):
        count[0] += 1
        return replayed(parts, bufs)

    monkeypatch.setattr(jit_mesh_calls, "replayed", counting)
    return count


# Arguments made off the mesh (uncommitted) and host values, paired with f32[3] operands
# (one program for the arrays, one for the scalars: little to compile)
_KINDS = {
    "float64 NumPy array": lambda: np.arange(3.0),
    "float32 NumPy array": lambda: np.arange(3, dtype=np.float32),
    "uncommitted Array": lambda: jnp.arange(3.0),
    "Python float": lambda: 2.5,
    "Python int": lambda: 3,
    "NumPy scalar": lambda: np.float32(1.5),
    "weak uncommitted Array": lambda: plax.device_put(2.0),
    "committed Array": lambda: plax.device_put(jnp.arange(3.0), plax.devices()[0]),
    "Array placed P()": lambda: plax.device_put(jnp.arange(3.0), NamedSharding(MESH, P())),
}
_COMMITTED = ("committed Array", "Array placed P()")


@pytest.mark.parametrize("mesh", [MESH, AUTO], ids=["Explicit", "Auto"])
@pytest.mark.parametrize("kind", list(_KINDS))
def test_every_call_gives_what_the_general_path_gives(kind, mesh, replays):
    f = plax.jit(lambda a, b: (a * 2 + b, b, a))
    a = _KINDS[kind]()
    b = jnp.ones(3)
    with plax.set_mesh(mesh):
        first = f(a, b)          # the general path: recorded
        assert replays[0] == 0
        again = [f(a, b) for _ in range(2)]
    # (under Auto axes the results of an argument committed to the mesh's one device stay
    # there, plain one-device Arrays; under Explicit ones the result `a` does, as in JAX
    # 0.10.2 -- plax.sharding_device_typed: replayed alike, committed to that device)
    assert replays[0] == 2
    if kind == "committed Array":
        assert first[2].sharding == plax.sharding.SingleDeviceSharding(plax.devices()[0])
    want = np.asarray(a, np.float32) * 2 + 1
    np.testing.assert_array_equal(np.asarray(first[0]), want)
    for out in again:
        assert [_described(o) for o in out] == [_described(o) for o in first]
    if kind not in _COMMITTED:
        # on the mesh, committed (Explicit: a host or uncommitted argument is placed P(),
        # and its own output keeps it; Auto: every result P())
        assert first[1].sharding == NamedSharding(mesh, P()) and first[1]._committed


def test_a_numpy_argument_written_after_the_call_leaves_results_as_they_were(replays):
    f = plax.jit(lambda a: (a, a + 1))
    host = np.arange(3, dtype=np.float32)
    with plax.set_mesh(MESH):
        outs = [f(host) for _ in range(3)]
        host[:] = 7   # the owner writes to it after the calls
        later = f(host)
    assert replays[0] == 3
    for same, plus in outs:
        np.testing.assert_array_equal(np.asarray(same), [0, 1, 2])
        np.testing.assert_array_equal(np.asarray(plus), [1, 2, 3])
    np.testing.assert_array_equal(np.asarray(later[1]), [8, 8, 8])


def test_a_bfloat16_numpy_argument_is_copied_as_a_float32_one_is(replays, monkeypatch):
    """bfloat16 (a NumPy dtype of kind "V") is a numeric host dtype: a replayed call copies
    such an argument into its buffer directly, making no Array of it."""
    from plax.dtypes import bfloat16
    made = []
    real = jit_mesh_calls.from_host
    monkeypatch.setattr(jit_mesh_calls, "from_host",
                        lambda *a, **k: made.append(a) or real(*a, **k))
    f = plax.jit(lambda a: (a, a + 1))
    host = np.arange(3).astype(bfloat16)
    with plax.set_mesh(MESH):
        first = f(host)
        again = [f(host) for _ in range(2)]
    assert replays[0] == 2
    assert made == []
    for out in again:
        assert [_described(o) for o in out] == [_described(o) for o in first]
    assert first[1].dtype == bfloat16
    np.testing.assert_array_equal(np.asarray(again[1][1], np.float32), [1, 2, 3])


def test_results_share_the_program_s_buffer_across_pieces():
    """A host value is copied once; an uncommitted Array's buffer is used as it is (an
    Array's buffer is never written), on every call."""
    f = plax.jit(lambda a, b: a + b)
    x = jnp.arange(3.0)
    with plax.set_mesh(MESH):
        for _ in range(2):
            placed = placed_on_context_mesh([x, np.ones(3)], MESH)
            out = f(x, np.ones(3))
            assert placed[0]._pieces[0].buffer is x._buf
            assert all(p.buffer is _BUF.__get__(out, type(out)) for p in out._pieces)


def test_a_donated_argument_is_deleted_on_every_call(replays):
    g = plax.jit(lambda a: a * 2, donate_argnums=0)
    with plax.set_mesh(MESH):
        for _ in range(2):
            x = jnp.arange(3.0)
            out = g(x)
            assert x.is_deleted()
            np.testing.assert_array_equal(np.asarray(out), [0, 2, 4])
            assert out.sharding == NamedSharding(MESH, P(None))
    assert replays[0] == 0   # (a donating jit takes its own path)


def test_refs_take_the_general_path(replays):
    g = plax.jit(lambda ref, b: ref[...] + b)
    with plax.set_mesh(MESH):
        r = plax.new_ref(jnp.ones(3))
        first, again = g(r, 1.0), g(r, 1.0)
    assert replays[0] == 0
    assert _described(again) == _described(first)


def test_an_argument_over_another_mesh_is_told_apart(replays):
    """The signature holds an argument's sharding: one over another mesh of the same device
    is not taken for one over the current mesh."""
    f = plax.jit(lambda a: a * 3)
    other = plax.make_mesh((1,), ("y",))
    with plax.set_mesh(MESH):
        here = plax.device_put(np.ones(2, np.float32), P())
        there = plax.device_put(np.ones(2, np.float32), NamedSharding(other, P()))
        outs = [f(v) for v in (here, there, here, there)]
    assert replays[0] == 2
    assert _described(outs[2]) == _described(outs[0])
    assert _described(outs[3]) == _described(outs[1])


def test_a_signature_is_replayed_under_its_own_mesh_only(replays):
    f = plax.jit(lambda a: a + 1)
    other = plax.make_mesh((1,), ("y",))
    with plax.set_mesh(MESH):
        f(np.ones(2))
    with plax.set_mesh(other):
        out = f(np.ones(2))
    assert replays[0] == 0
    assert out.sharding.mesh is other
    with plax.set_mesh(other):
        assert _described(f(np.ones(2))) == _described(out)
    assert replays[0] == 1


def test_static_arguments_are_part_of_the_signature(replays):
    f = plax.jit(lambda a, n: a * n, static_argnums=1)
    with plax.set_mesh(MESH):
        two, three = f(np.ones(2), 2), f(np.ones(2), 3)
        again = f(np.ones(2), 2), f(np.ones(2), 3)
    assert replays[0] == 2
    assert [_described(o) for o in again] == [_described(two), _described(three)]
    np.testing.assert_array_equal(np.asarray(again[1]), [3, 3])


def test_a_mesh_of_several_cpu_devices_shares_one_buffer():
    """Over four CPU devices, a host argument, an uncommitted Array and the results hold
    one buffer each on every device, placed and typed as device_put places them."""
    from subprocess_util import last_json, run_python
    out = last_json(run_python(r'''
import json
import numpy as np
import plax
from plax.array import _BUF
from plax.transforms.jit_shardings import placed_on_context_mesh
jnp, P = plax.numpy, plax.P
mesh = plax.make_mesh((4,), ("x",))
x = jnp.arange(3.0)
f = plax.jit(lambda a, b: (a + b, b))
def shared(v):
    return all(p.buffer is _BUF.__get__(v, type(v)) for p in v._pieces)
with plax.set_mesh(mesh):
    placed = placed_on_context_mesh([x, np.ones(3)], mesh)
    put = [plax.device_put(v, plax.NamedSharding(mesh, P())) for v in (x, np.ones(3))]
    calls = [f(np.ones(3), x) for _ in range(3)]
print(json.dumps({
    "placed_shared": [shared(v) for v in placed],
    "as_device_put": [(str(a.sharding), str(a.aval), repr(a.aval.sharding),
                       [(p.device.id, str(p.index)) for p in a._pieces]) ==
                      (str(b.sharding), str(b.aval), repr(b.aval.sharding),
                       [(p.device.id, str(p.index)) for p in b._pieces])
                      for a, b in zip(placed, put)],
    "results_shared": [shared(v) for c in calls for v in c],
    "same": [[(str(v.sharding), str(v.aval), v.committed, len(v._pieces)) for v in c]
             for c in calls],
    "values": [np.asarray(v).tolist() for v in calls[-1]],
}))
''', env={"PLAX_NUM_CPU_DEVICES": "4"}))
    assert out["placed_shared"] == [True, True]
    assert out["as_device_put"] == [True, True]
    assert all(out["results_shared"])
    assert out["same"][0] == out["same"][1] == out["same"][2]
    assert out["values"] == [[1.0, 2.0, 3.0], [0.0, 1.0, 2.0]]
