"""Run under ``mpiexec -n 2`` with ``PLAX_NUM_CPU_DEVICES=2`` by test_mpi.py: each process
checks the global view and the collectives across processes, then prints ``OK <rank>``.
With ``--fail`` the last device of the last process raises before a psum: every process must
end (MPI_Abort), none may hang."""
from __future__ import annotations

import sys

import numpy as np

import plax
import plax.numpy as jnp
from plax import lax

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

# shard_map over this process's devices runs locally
P = plax.sharding.PartitionSpec
local_mesh = plax.sharding.Mesh(np.array(plax.local_devices()), ("d",))
out = plax.shard_map(lambda b: lax.psum(b, "d"), mesh=local_mesh, in_specs=P("d"),
                     out_specs=P())(mine)
assert np.asarray(out).tolist() == [float(mine.sum())], out

# over every process's devices: inputs are global values (the same in each process), the
# collectives cross processes, and each process receives the whole result
g = np.arange(n, dtype=np.float32)
mesh = plax.make_mesh((n,), ("d",))
out = plax.shard_map(lambda b: lax.psum(b, "d"), mesh=mesh, in_specs=P("d"), out_specs=P())(g)
assert np.asarray(out).tolist() == [float(g.sum())], out
out = plax.shard_map(lambda b: b * 2 + lax.axis_index("d"), mesh=mesh, in_specs=P("d"),
                     out_specs=P("d"))(g)
assert np.asarray(out).tolist() == (3 * g).tolist(), out
again = plax.shard_map(lambda b: lax.all_gather(b, "d", tiled=True), mesh=mesh,
                       in_specs=P("d"), out_specs=P(), check_vma=False)(out)  # sharded input
assert np.asarray(again).tolist() == (3 * g).tolist(), again
mesh2 = plax.make_mesh((pc, nl), ("p", "l"))
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
import warnings  # noqa: E402
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    sm = plax.shard_map(lambda b: lax.psum(jnp.sin(b), "d"), mesh=mesh, in_specs=P("d"),
                        out_specs=P())
    out = plax.jit(sm)(g)
    np.testing.assert_allclose(np.asarray(out), np.sin(g).sum(), rtol=1e-6)
    dg = plax.grad(lambda a: sm(a).sum())(g)
    np.testing.assert_allclose(np.asarray(dg), np.cos(g), rtol=1e-6)
assert any("does not spread the work" in str(w.message) for w in caught), caught

# multihost_utils: host values exchanged between the processes
mu = plax.experimental.multihost_utils
mine2 = np.float32([pi, pi + 1])
assert mu.process_allgather(mine2).tolist() == [[p, p + 1] for p in range(pc)]
assert mu.process_allgather({"a": mine2}, tiled=True)["a"].tolist() == \
    [v for p in range(pc) for v in (p, p + 1)]
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
print(f"OK {pi}", flush=True)
