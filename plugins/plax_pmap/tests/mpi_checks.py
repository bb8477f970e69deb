"""Run under ``mpiexec -n 2`` with ``PLAX_NUM_CPU_DEVICES=2`` by test_mpi.py: each process
checks the global view and the collectives across processes, then prints ``OK <rank>``.
With ``--multihost``, the checks of ``plax.experimental.multihost_utils`` instead (values
exchanged between the processes, global Arrays from each process's local part and back, the
transport's bcast), checked against NumPy references.
With ``--fail`` the last device of the last process raises before a psum: every process must
end (MPI_Abort), none may hang."""
from __future__ import annotations

import sys

import numpy as np

import plax
import plax.numpy as jnp
from plax import lax


def _auto_mesh(shape, names):
    """A mesh of Auto axes: these checks pass unsharded arguments to shard_map, which on an
    Explicit mesh (make_mesh's default) must already be sharded as in_specs say."""
    return plax.make_mesh(shape, names, axis_types=(plax.sharding.AxisType.Auto,) * len(names))


plax.distributed.initialize()
pi, pc = plax.process_index(), plax.process_count()
nl = plax.local_device_count()
n = plax.device_count()

if "--die" in sys.argv:  # the last process dies before a collective the others wait in
    if pi == pc - 1:
        import os
        os._exit(3)
    plax.pmap(lambda x: lax.psum(x, "i"), axis_name="i")(jnp.ones(nl))
    print(f"NOT REACHED {pi}", flush=True)
    sys.exit(0)

if "--fail" in sys.argv:
    def f(x):
        def boom(i):
            if int(i) == n - 1:
                raise ZeroDivisionError("the last device fails")
            return np.float32(0)
        z = plax.pure_callback(boom, plax.ShapeDtypeStruct((), np.float32), lax.axis_index("i"))
        return lax.psum(x + z, "i")
    plax.pmap(f, axis_name="i")(jnp.ones(nl))
    print(f"NOT REACHED {pi}", flush=True)
    sys.exit(0)

assert pc == 2 and n == 2 * nl, (pc, n, nl)
assert [d.id for d in plax.devices()] == list(range(n))
assert [d.id for d in plax.local_devices()] == [pi * nl + i for i in range(nl)]
assert all(d.process_index == pi for d in plax.local_devices())
mine = np.arange(pi * nl, (pi + 1) * nl, dtype=np.float32)  # global slot values 0..n-1


def check_multihost_utils():
    """plax.experimental.multihost_utils: host values exchanged between the processes, and
    global Arrays assembled from each process's local part."""
    mu = plax.experimental.multihost_utils
    P = plax.sharding.PartitionSpec
    local_mesh = plax.sharding.Mesh(np.array(plax.local_devices()), ("d",))
    g = np.arange(n, dtype=np.float32)
    mesh = _auto_mesh((n,), ("d",))
    mesh2 = _auto_mesh((pc, nl), ("p", "l"))
    mine2 = np.float32([pi, pi + 1])
    assert mu.process_allgather(mine2).tolist() == [[p, p + 1] for p in range(pc)]
    assert mu.process_allgather({"a": mine2}, tiled=True)["a"].tolist() == \
        [v for p in range(pc) for v in (p, p + 1)]
    assert mu.process_allgather(np.zeros((0, 2))).shape == (pc, 0, 2)  # empty arrays too
    assert mu.broadcast_one_to_all(mine2).tolist() == [0, 1]               # process 0's
    assert mu.broadcast_one_to_all(mine2, is_source=pi == pc - 1).tolist() == [pc - 1, pc]
    mu.sync_global_devices("checkpoint")
    mu.assert_equal({"g": g}, "global values")
    try:
        mu.assert_equal(mine2, "per-process values")
        raise SystemExit("assert_equal accepted different values")
    except AssertionError as err:
        assert "per-process values" in str(err) and "differs between processes" in str(err)
    try:
        mu.process_allgather(np.zeros(pi + 1))  # a different shape on each process
        raise SystemExit("process_allgather accepted different shapes")
    except ValueError as err:
        assert "different shapes" in str(err) and "[(1,), (2,)]" in str(err), err
    try:
        mu.broadcast_one_to_all(mine2, is_source=True)  # every process claims to be the source
        raise SystemExit("broadcast_one_to_all accepted two sources")
    except ValueError as err:
        assert "exactly one process" in str(err)

    # host_local_array_to_global_array / global_array_to_host_local_array: each process passes
    # its own local part; the global Array is the parts assembled (the same on every process)
    Mesh, NamedSharding = plax.sharding.Mesh, plax.sharding.NamedSharding
    local_ids = [d.id for d in plax.local_devices()]
    rows = np.arange(2 * nl * 3, dtype=np.float32).reshape(2 * nl, 3) + 100 * pi  # this process's

    def round_trip(local, mesh_, spec, expected):
        out = mu.host_local_array_to_global_array(local, mesh_, spec)
        np.testing.assert_array_equal(np.asarray(out), expected)
        assert out.sharding == NamedSharding(mesh_, spec), out.sharding
        back = mu.global_array_to_host_local_array(out, mesh_, spec)
        np.testing.assert_array_equal(np.asarray(back), local)
        assert back.sharding.spec == spec, back.sharding  # over this process's devices
        assert sorted(d.id for d in back.sharding.mesh.devices.flat) == local_ids
        return out

    every_rows = [np.arange(2 * nl * 3, dtype=np.float32).reshape(2 * nl, 3) + 100 * p
                  for p in range(pc)]
    cat0 = np.concatenate(every_rows, 0)
    # a 1-d mesh over every device: the global array is the local ones concatenated
    round_trip(rows, mesh, P("d"), cat0)
    round_trip(rows, mesh, P("d", None), cat0)
    # (process, local device) mesh: split over the process axis only, over both, within a process
    round_trip(rows, mesh2, P("p"), cat0)
    round_trip(rows, mesh2, P(("p", "l")), cat0)
    round_trip(rows, mesh2, P("p", None), cat0)
    cat1 = np.concatenate(every_rows, 1)
    round_trip(rows, mesh2, P(None, "p"), cat1)
    # the local-device axis major, the process axis minor: the processes' blocks interleave
    blocks = np.stack([r.reshape(nl, 2, 3) for r in every_rows], 1)  # (l, p, block, col)
    round_trip(rows, mesh2, P(("l", "p")), blocks.reshape(-1, 3))
    # 2-d: rows over the processes, columns over the local devices
    base = np.arange(2 * 2 * nl, dtype=np.int32).reshape(2, 2 * nl)
    wide = base * (pi + 1)
    round_trip(wide, mesh2, P("p", "l"), np.concatenate([base * (p + 1) for p in range(pc)]))
    # a mesh with the process axis second (each process's devices a column of it)
    mesh_t = Mesh(mesh2.devices.T, ("l", "p"))
    round_trip(rows, mesh_t, P("p"), cat0)
    round_trip(rows, mesh_t, P(("l", "p")), blocks.reshape(-1, 3))
    # replicated over the processes (P(None), P(), or an axis within the process): every
    # process holds the whole array; equal values make the same global array
    same = np.arange(4 * nl, dtype=np.float32)
    round_trip(same, mesh2, P(), same)
    round_trip(same, mesh2, P(None), same)
    round_trip(same, mesh2, P("l"), same)
    # a pytree, with a spec prefix; scalars and None leaves
    tree = {"w": rows, "s": np.float32(pi), "n": None, "b": [wide > 2]}
    gg = mu.host_local_array_to_global_array(tree, mesh2, {"w": P("p"), "s": P(), "n": None,
                                                          "b": P(None, "l")})
    np.testing.assert_array_equal(np.asarray(gg["w"]), cat0)
    assert float(gg["s"]) == 0.0 and gg["n"] is None                  # process 0's (replicated)
    assert gg["b"][0].dtype == np.bool_ and gg["b"][0].shape == wide.shape
    back = mu.global_array_to_host_local_array(gg, mesh2, {"w": P("p"), "s": P(), "n": None,
                                                          "b": P(None, "l")})
    np.testing.assert_array_equal(np.asarray(back["w"]), rows)
    # the global array feeds a shard_map over the mesh, which sees each process's rows
    gg = round_trip(rows, mesh2, P(("p", "l")), cat0)
    out = plax.shard_map(lambda b: lax.psum(b.sum(), ("p", "l")), mesh=mesh2,
                         in_specs=P(("p", "l")), out_specs=P())(gg)
    np.testing.assert_allclose(float(np.asarray(out)), cat0.sum(), rtol=1e-6)
    # a mesh of this process's devices: no exchange, global == local
    gg = mu.host_local_array_to_global_array(rows, local_mesh, P("d"))
    np.testing.assert_array_equal(np.asarray(gg), rows)
    # errors: a local shape that does not fit (raised on every process; the one at fault names
    # the leaf and the dimension), different global shapes, different structures
    try:
        mu.host_local_array_to_global_array({"w": np.zeros(3 if pi == 1 else 4)}, mesh2,
                                            P(("p", "l")))
        raise SystemExit("host_local_array_to_global_array accepted a shape that does not fit")
    except ValueError as err:
        if pi == 1:
            assert "['w']" in str(err) and "dimension 0" in str(err) and "3" in str(err), err
        else:
            assert "process(es) [1]" in str(err), err
    try:
        mu.host_local_array_to_global_array(np.zeros(2 * (pi + 1)), mesh2, P("p"))
        raise SystemExit("host_local_array_to_global_array accepted different global shapes")
    except ValueError as err:
        assert "global shapes by process: [(4,), (8,)]" in str(err), err
    try:
        mu.host_local_array_to_global_array([np.zeros(2)] * (pi + 1), mesh2, P("p"))
        raise SystemExit("host_local_array_to_global_array accepted different structures")
    except ValueError as err:
        assert "different structures" in str(err), err

    # broadcast_one_to_all goes by the transport's bcast (MPI_Ibcast); from a non-zero root
    transport = plax.distributed.transport()
    assert hasattr(transport, "bcast")
    mine3 = np.arange(3, dtype=np.int16) + pi
    got = transport.bcast(mine3, pc - 1, 60.0)
    assert got.tolist() == [pc - 1, pc, pc + 1] and mine3.tolist() == [pi, pi + 1, pi + 2]
    tree = {"f": np.float32([pi, 2 * pi]), "i": np.int64(pi), "b": np.array([pi == 1, True]),
            "e": np.zeros((0, 2))}
    got = mu.broadcast_one_to_all(tree, is_source=pi == pc - 1)
    assert got["f"].tolist() == [pc - 1, 2 * (pc - 1)] and got["f"].dtype == np.float32
    assert got["i"] == pc - 1 and got["b"].tolist() == [True, True] and got["e"].shape == (0, 2)

    class NoBcast:  # a third-party transport with allgather only: the fallback
        def __init__(self, inner):
            self.rank, self.size, self.local_counts = inner.rank, inner.size, inner.local_counts
            self.allgather, self.abort = inner.allgather, inner.abort

    plax.distributed._state["transport"] = NoBcast(transport)
    try:
        got = mu.broadcast_one_to_all(tree, is_source=pi == pc - 1)
        assert got["f"].tolist() == [pc - 1, 2 * (pc - 1)] and got["b"].tolist() == [True, True]
    finally:
        plax.distributed._state["transport"] = transport
    try:
        mu.broadcast_one_to_all({"a": np.zeros(pi + 1)}, is_source=pi == 0)
        raise SystemExit("broadcast_one_to_all accepted different shapes")
    except ValueError as err:
        assert "['a']" in str(err) and "[(1,), (2,)]" in str(err), err


if "--multihost" in sys.argv:
    check_multihost_utils()
    print(f"OK {pi}", flush=True)
    sys.exit(0)

out = plax.pmap(lambda x: lax.psum(x, "i"), axis_name="i")(mine)
assert np.asarray(out).tolist() == [n * (n - 1) / 2] * nl, out
out = plax.pmap(lambda x: lax.all_gather(x, "i"), axis_name="i")(mine)
assert np.asarray(out).tolist() == [list(range(n))] * nl, out
out = plax.pmap(lambda x: lax.axis_index("i"), axis_name="i")(mine)
assert np.asarray(out).tolist() == mine.astype(int).tolist()
out = plax.pmap(lambda x: lax.ppermute(x, "i", [(i, (i + 1) % n) for i in range(n)]),
                axis_name="i")(mine)
assert np.asarray(out).tolist() == [(v - 1) % n for v in mine.tolist()], out
out = plax.pmap(plax.grad(lambda x: lax.pmean(x * x, "i")), axis_name="i")(mine)
np.testing.assert_allclose(out, 2 * mine, rtol=1e-6)
# independent collectives of several dtypes and shapes cross the processes in one message
tree = {"f": np.stack([np.full((2, 3), v, np.float32) for v in mine]),
        "i": np.stack([np.arange(5, dtype=np.int32) * int(v) for v in mine]),
        "b": np.stack([np.full(3, v % 2 == 0) for v in mine])}
out = plax.pmap(lambda t: (lax.psum(t["f"], "i"), lax.pmax(t["i"], "i"),
                           lax.all_gather(t["b"], "i"), lax.axis_index("i")),
                axis_name="i")(tree)
np.testing.assert_array_equal(np.asarray(out[0]), np.full((nl, 2, 3), n * (n - 1) / 2))
np.testing.assert_array_equal(np.asarray(out[1]), np.tile(np.arange(5) * (n - 1), (nl, 1)))
np.testing.assert_array_equal(np.asarray(out[2]),
                              np.tile((np.arange(n) % 2 == 0)[:, None], (nl, 1, 3)))
assert np.asarray(out[3]).tolist() == mine.astype(int).tolist(), out[3]

# pmap under grad, jit and vmap across processes: one vmap over every process's slices
# (gathered), each process keeping its own devices' results. The gradient is that of the sum
# of every process's function (JAX's pmap semantics): with S = sum(g**2) over all devices,
# d/dg_j of sum_j S * g_j is 2 g_j sum(g) + S
g_all = np.arange(n, dtype=np.float32)
coupled = plax.pmap(lambda x: lax.psum(x * x, "i") * x, axis_name="i")
want_val = (g_all ** 2).sum() * mine
want_grad = 2 * mine * g_all.sum() + (g_all ** 2).sum()
import warnings  # noqa: E402
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    np.testing.assert_allclose(np.asarray(plax.jit(coupled)(mine)), want_val, rtol=1e-6)
assert any("does not spread the work" in str(w.message) for w in caught), caught
for g in (plax.grad(lambda x: coupled(x).sum()), plax.jit(plax.grad(lambda x: coupled(x).sum()))):
    np.testing.assert_allclose(np.asarray(g(mine)), want_grad, rtol=1e-6)
_, tangent = plax.jvp(coupled, (mine,), (np.ones_like(mine),))
np.testing.assert_allclose(np.asarray(tangent), 2 * g_all.sum() * mine + (g_all ** 2).sum(),
                           rtol=1e-6)
batch = np.stack([mine, 2 * mine])  # vmap over a leading axis of two problems
np.testing.assert_allclose(np.asarray(plax.vmap(coupled)(batch)),
                           np.stack([want_val, 8 * want_val]), rtol=1e-6)
# unmapped operands and outputs (out_axes=None: the replicated psum)
tot = plax.jit(plax.pmap(lambda x, w: lax.psum(x * w, "i"), axis_name="i", in_axes=(0, None),
                         out_axes=None))(mine, np.float32(3))
assert float(np.asarray(tot)) == 3 * float(g_all.sum()), tot

# shard_map over this process's devices runs locally
P = plax.sharding.PartitionSpec
local_mesh = plax.sharding.Mesh(np.array(plax.local_devices()), ("d",))
out = plax.shard_map(lambda b: lax.psum(b, "d"), mesh=local_mesh, in_specs=P("d"),
                     out_specs=P())(mine)
assert np.asarray(out).tolist() == [float(mine.sum())], out

# over every process's devices: inputs are global values (the same in each process), the
# collectives cross processes, and each process receives the whole result
g = np.arange(n, dtype=np.float32)
mesh = _auto_mesh((n,), ("d",))
out = plax.shard_map(lambda b: lax.psum(b, "d"), mesh=mesh, in_specs=P("d"), out_specs=P())(g)
assert np.asarray(out).tolist() == [float(g.sum())], out
out = plax.shard_map(lambda b: b * 2 + lax.axis_index("d"), mesh=mesh, in_specs=P("d"),
                     out_specs=P("d"))(g)
assert np.asarray(out).tolist() == (3 * g).tolist(), out
again = plax.shard_map(lambda b: lax.all_gather(b, "d", tiled=True), mesh=mesh,
                       in_specs=P("d"), out_specs=P(), check_vma=False)(out)  # sharded input
assert np.asarray(again).tolist() == (3 * g).tolist(), again
mesh2 = _auto_mesh((pc, nl), ("p", "l"))
x = np.arange(4 * pc * nl, dtype=np.float32).reshape(2 * pc, 2 * nl)
out = plax.shard_map(lambda b: lax.psum(b, "p"), mesh=mesh2, in_specs=P("p", "l"),
                     out_specs=P(None, "l"))(x)
np.testing.assert_array_equal(np.asarray(out), x.reshape(pc, 2, 2 * nl).sum(0))
# psum's transpose sums the cotangents over the devices (JAX's check_vma=False semantics)
grads = plax.shard_map(lambda b: plax.grad(lambda v: lax.psum((v * v).sum(), ("p", "l")))(b),
                       mesh=mesh2, in_specs=P("p", "l"), out_specs=P("p", "l"),
                       check_vma=False)(x)
np.testing.assert_allclose(np.asarray(grads), 2 * n * x, rtol=1e-6)
# typed (check_vma=True, the default): psum of a varying value transposes to the identity,
# and the implicit sums of a replicated value's cotangent cross the processes
grads = plax.shard_map(lambda b: plax.grad(lambda v: lax.psum((v * v).sum(), ("p", "l")))(b),
                       mesh=mesh2, in_specs=P("p", "l"), out_specs=P("p", "l"))(x)
np.testing.assert_allclose(np.asarray(grads), 2 * x, rtol=1e-6)
w = np.float32([1.0, 2.0])
gw = plax.shard_map(lambda v, b: plax.grad(lambda v: lax.pmean(jnp.sum(b[:, :2] * v), ("p", "l")))(v),
                    mesh=mesh2, in_specs=(P(), P("p", "l")), out_specs=P())(w, x)
blocks = x.reshape(pc, 2, nl, 2).transpose(0, 2, 1, 3).reshape(n, 2, 2)
np.testing.assert_allclose(np.asarray(gw), blocks.sum(1).mean(0), rtol=1e-6)

# collectives inside control flow cross the processes too (each device thread runs the loop)
out = plax.pmap(lambda x: lax.fori_loop(0, 3, lambda i, c: c + lax.psum(x, "i"), x),
                axis_name="i")(mine)
np.testing.assert_allclose(np.asarray(out), mine + 3 * n * (n - 1) / 2)
out = plax.shard_map(lambda b: lax.scan(lambda c, r: (c + lax.psum(r, "d"), None), 0.0, b)[0],
                     mesh=mesh, in_specs=P("d"), out_specs=P())(g)
assert float(np.asarray(out)) == float(g.sum()), out

# under jit and grad (the vmap formulation) each process computes every block, with a warning
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    sm = plax.shard_map(lambda b: lax.psum(jnp.sin(b), "d"), mesh=mesh, in_specs=P("d"),
                        out_specs=P())
    out = plax.jit(sm)(g)
    np.testing.assert_allclose(np.asarray(out), np.sin(g).sum(), rtol=1e-6)
    dg = plax.grad(lambda a: sm(a).sum())(g)
    np.testing.assert_allclose(np.asarray(dg), np.cos(g), rtol=1e-6)
assert any("does not spread the work" in str(w.message) for w in caught), caught
print(f"OK {pi}", flush=True)
