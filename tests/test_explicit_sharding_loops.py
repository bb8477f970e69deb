"""Partitioned ``jit`` of loops whose bodies need exchanges, and of the operations that work
along some dimensions only (issue 25, item 2).

One script runs each program under ``jit`` on 8 CPU devices (a 2x4 mesh) and records the
result's type (as ``jax.typeof`` prints it), whether its values equal NumPy's float64 ones,
whether an argument or the result was gathered onto one device, the partitioned program's
steps, and the device threads that ran. Loops: every device runs the loop over its blocks,
the threads meeting at the exchanges inside the body (a product over a split dimension, a
reduction over a split axis, a reshape across the split). Slices, pads, reverses, dynamic
slices, gathers and FFTs compute on blocks where the dimensions they touch are whole, and
factorizations and solves of a split batch of matrices on each device's matrices.
JAX 0.10.2's types are recorded in ``JAX_TYPES``; a second test checks them against JAX.
"""
import importlib.util

import pytest

from subprocess_util import last_json, run_python

CASES = r'''
import json, sys, threading
import numpy as np

if sys.argv[1] == "jax":
    import jax
    jax.config.update("jax_num_cpu_devices", 8)
    from jax.sharding import reshard
else:
    import plax as jax
    from plax.sharding import reshard
jnp, lax, P = jax.numpy, jax.lax, jax.P
jax.set_mesh(jax.make_mesh((2, 4), ("X", "Y")))
rng = np.random.default_rng(1)
a = (rng.standard_normal((8, 8)) / 3).astype(np.float32)
s3 = (rng.standard_normal((3, 8, 8)) / 3).astype(np.float32)
x = jax.device_put(a, P("X", "Y"))      # f32[8@X,8@Y]
xr = jax.device_put(a, P("X", None))    # f32[8@X,8]
wy = jax.device_put(a, P("Y", None))    # f32[8@Y,8]
xs = jax.device_put(s3, P(None, "Y", None))
A, S = a.astype(np.float64), s3.astype(np.float64)
m4 = rng.standard_normal((4, 8, 8)).astype(np.float32)
m4 = m4 @ m4.transpose(0, 2, 1) + 8 * np.eye(8, dtype=np.float32)  # well conditioned
mb = jax.device_put(m4, P("Y", None, None))  # a batch of matrices split over Y
M = m4.astype(np.float64)


def loop(n, body, c):
    for i in range(n):
        c = body(i, c)
    return c


def scan64(body, c, xs):
    ys = []
    for r in xs:
        c, y = body(c, r)
        ys.append(y)
    return c, np.stack(ys)


def while64(cond, body, c):
    while cond(c):
        c = body(c)
    return c


CASES = {
    # loops whose bodies need exchanges: each device loops over its blocks
    "fori_dot": (lambda u, w: lax.fori_loop(
        0, 3, lambda i, c: jnp.tanh(jnp.dot(c, w, out_sharding=P("X", "Y"))), u), (x, wy),
        lambda: loop(3, lambda i, c: np.tanh(c @ A), A)),
    "scan_sum": (lambda u: lax.scan(lambda c, r: (c / (1 + jnp.abs(jnp.sum(c, axis=0))),
                                                  jnp.max(c)), u, None, length=3), (x,),
                 lambda: scan64(lambda c, r: (c / (1 + np.abs(c.sum(0))), c.max()), A,
                                [None] * 3)),
    "scan_xs": (lambda u, s: lax.scan(lambda c, r: (jnp.dot(c, r, out_sharding=P("X", "Y")),
                                                    jnp.sum(r)), u, s), (x, xs),
                lambda: scan64(lambda c, r: (c @ r, r.sum()), A, S)),
    "fori_reshape": (lambda u: lax.fori_loop(0, 2, lambda i, c: reshard(
        (c.reshape(64) * 2)[::-1].reshape(8, 8), P("X", "Y")), u), (x,),
        lambda: loop(2, lambda i, c: (c.reshape(64) * 2)[::-1].reshape(8, 8), A)),
    "while_dot": (lambda u: lax.while_loop(lambda c: jnp.sum(c * c) < 1e4,
                                           lambda c: c @ u + c, u), (xr,),
                  lambda: while64(lambda c: (c * c).sum() < 1e4, lambda c: c @ A + c, A)),
    # loops and a branch nested, each with exchanges inside
    "nested": (lambda u, w: lax.fori_loop(0, 3, lambda i, c: lax.fori_loop(
        0, 2, lambda j, d: jnp.tanh(jnp.dot(d, w, out_sharding=P("X", "Y"))),
        lax.cond(jnp.sum(c) > 0, lambda v: v / jnp.sum(jnp.abs(v)), lambda v: v * 2, c)), u),
        (x, wy), lambda: loop(3, lambda i, c: loop(2, lambda j, d: np.tanh(d @ A),
                                                   c / np.abs(c).sum() if c.sum() > 0
                                                   else c * 2), A)),
    # along a whole dimension, the split ones untouched: computed on blocks
    "fft_free": (lambda u: jnp.fft.fft(u, axis=1), (xr,), lambda: np.fft.fft(A, axis=1)),
    "fft_split": (lambda u: jnp.fft.fft(u, axis=1), (x,), lambda: np.fft.fft(A, axis=1)),
    "take_cols": (lambda u: u[:, jnp.array([1, 3, 6])], (xr,), lambda: A[:, [1, 3, 6]]),
    "dyn_slice": (lambda u: lax.dynamic_slice_in_dim(u, 2, 4, axis=1), (xr,),
                  lambda: A[:, 2:6]),
    "dyn_update": (lambda u: lax.dynamic_update_slice_in_dim(
        u, jnp.zeros((8, 2), out_sharding=P("X", None)), 3, axis=1), (xr,),
        lambda: np.concatenate([A[:, :3], np.zeros((8, 2)), A[:, 5:]], 1)),
    "slice_free": (lambda u: u[:, 1:5] * 2, (xr,), lambda: A[:, 1:5] * 2),
    "pad_free": (lambda u: jnp.pad(u, ((0, 0), (1, 2))), (xr,),
                 lambda: np.pad(A, ((0, 0), (1, 2)))),
    "pad_split": (lambda u: jnp.pad(u, ((1, 1), (0, 0))), (xr,),
                  lambda: np.pad(A, ((1, 1), (0, 0)))),
    "rev_free": (lambda u: u[:, ::-1], (xr,), lambda: A[:, ::-1]),
    # factorizations and solves of a split batch: each device its own matrices
    "det_batch": (lambda m: jnp.linalg.det(m), (mb,), lambda: np.linalg.det(M)),
    "eigh_batch": (lambda m: jnp.linalg.eigh(m)[0], (mb,), lambda: np.linalg.eigvalsh(M)),
    "solve_batch": (lambda m: jnp.linalg.solve(m, m[:, :, :2]), (mb,),
                    lambda: np.linalg.solve(M, M[:, :, :2])),
    "trisolve_batch": (lambda m: lax.linalg.triangular_solve(m, m, left_side=True, lower=True),
                       (mb,), lambda: np.linalg.solve(np.tril(M), M)),
}

out = {"types": {}, "values": {}, "gathered": {}, "steps": {}}
if sys.argv[1] != "jax":
    from plax import array as array_mod
    from plax import sharding_spmd, sharding_threads
    sharding_spmd.LOCKSTEP_ELEMENTS = -1  # every program on its device threads, as tested here
    from plax.core.jaxpr import ClosedJaxpr
    from plax.sharding_partition import describe
    from plax.sharding_spmd import plan

    def gathered(v):
        return array_mod._BUF.__get__(v) is not array_mod._NOT_GATHERED

    threads = {}
    run_all = sharding_threads.on_each_device

    def recording(devices, work, **kw):
        def traced(i):
            threads.setdefault(current, set()).add(threading.get_ident())
            return work(i)
        return run_all(devices, traced, **kw)
    sharding_threads.on_each_device = recording

for name, (f, args, ref) in CASES.items():
    current = name
    r = jax.jit(f)(*args)
    first = r[0] if isinstance(r, tuple) else r
    s = str(jax.typeof(first))
    out["types"][name] = s[s.index("["):]
    if sys.argv[1] == "jax":
        continue
    want = ref()
    got = [np.asarray(v) for v in (r if isinstance(r, tuple) else (r,))]
    want = list(want) if isinstance(want, tuple) else [want]
    tol = 2e-4 if name.endswith("_batch") else 2e-5  # float32 factorizations
    out["values"][name] = all(np.allclose(g, w, rtol=tol, atol=tol)
                              for g, w in zip(got, want))
    sharded = [v for v in args if isinstance(v, jax.Array) and len(v.devices()) > 1]
    out["gathered"][name] = any(gathered(v) for v in sharded + [first])
    closed = jax.make_jaxpr(f)(*args)
    out["steps"][name] = describe(plan(ClosedJaxpr(closed.jaxpr, closed.consts)))
if sys.argv[1] != "jax":
    out["threads"] = {k: len(v) for k, v in threads.items()}
print(json.dumps(out))
'''

#: JAX 0.10.2's result types of CASES under jit (checked by test_record_matches_jax)
JAX_TYPES = {
    "fori_dot": "[8@X,8@Y]", "scan_sum": "[8@X,8@Y]", "scan_xs": "[8@X,8@Y]",
    "fori_reshape": "[8@X,8@Y]", "while_dot": "[8@X,8]", "nested": "[8@X,8@Y]", "fft_free": "[8@X,8]",
    "fft_split": "[8@X,8@Y]", "take_cols": "[8@X,3]", "dyn_slice": "[8@X,4]",
    "dyn_update": "[8@X,8]", "slice_free": "[8@X,4]", "pad_free": "[8@X,11]",
    "pad_split": "[10@X,8]", "rev_free": "[8@X,8]", "det_batch": "[4@Y]",
    "eigh_batch": "[4@Y,8]", "solve_batch": "[4@Y,8,2]", "trisolve_batch": "[4@Y,8,8]",
}

_ENV = {"PLAX_NUM_CPU_DEVICES": "8", "PLAX_PLATFORMS": "cpu"}


@pytest.fixture(scope="module")
def plax_run():
    return last_json(run_python(args=["-c", CASES, "plax"], env=_ENV))


def test_types_are_jaxs(plax_run):
    assert plax_run["types"] == JAX_TYPES


def test_values_are_the_unsharded_programs(plax_run):
    assert plax_run["values"] == {k: True for k in JAX_TYPES}


def test_nothing_is_gathered_onto_one_device(plax_run):
    assert plax_run["gathered"] == {k: False for k in JAX_TYPES}


def test_every_program_ran_on_several_device_threads(plax_run):
    assert all(n > 1 for n in plax_run["threads"].values()), plax_run["threads"]
    assert set(plax_run["threads"]) == set(JAX_TYPES)


def test_loops_run_on_every_device_with_exchanges_inside(plax_run):
    steps = plax_run["steps"]
    for name in ("fori_dot", "scan_sum", "scan_xs", "fori_reshape", "while_dot"):
        [loop] = steps[name]  # the whole program is the loop
        assert loop.split(" on every device: [")[0] in ("scan", "while"), loop
        assert "exchange:" in loop, loop
    # a product over a split dimension: partial products summed inside the body
    assert "exchange: (('X',), ()) -> (('X',), ('Y',)) partial ('Y',) by add" in \
        steps["fori_dot"][0]
    # a reduction over a split axis: partial sums combined inside the body
    assert "exchange: (('Y',),) -> (('Y',),) partial ('X',) by add" in steps["scan_sum"][0]
    # a reshape across the split: an all-to-all there and back inside the body
    assert "exchange: (('X',), ('Y',)) -> (('X', 'Y'), ())" in steps["fori_reshape"][0]
    # nested: the inner loop and the branch run on every device inside the outer loop
    [outer] = steps["nested"]
    assert outer.startswith("scan on every device: [") and \
        "; cond on every device: [" in outer and "; scan on every device: [" in outer


def test_dimensionwise_operations_compute_on_blocks(plax_run):
    steps = plax_run["steps"]
    # the dimension they touch is unsplit: no exchange at all
    for name in ("fft_free", "take_cols", "dyn_slice", "dyn_update", "slice_free",
                 "pad_free", "rev_free", "det_batch", "eigh_batch", "solve_batch",
                 "trisolve_batch"):
        assert not any(s.startswith("exchange") for s in steps[name]), (name, steps[name])
    # the transformed dimension split over Y: gathered along Y alone, X stays split
    assert steps["fft_split"][1:] == ["exchange: (('X',), ('Y',)) -> (('X',), ())",
                                      "segment: fft", "cut: (('X',), ()) -> (('X',), ('Y',))"]


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
def test_record_matches_jax():
    out = last_json(run_python(args=["-c", CASES, "jax"], env={"JAX_PLATFORMS": "cpu"}))
    assert out["types"] == JAX_TYPES


def test_a_failing_device_releases_the_others_and_its_error_is_raised():
    from plax.sharding_spmd import _Meeting
    from plax.sharding_threads import on_each_device
    devices = [object() for _ in range(4)]
    meeting = _Meeting(devices)

    def work(i):
        def body():
            if i == 2:
                raise KeyError("device 2 failed")
            meeting.wait()  # would wait for device 2 forever without the break
            return i
        return meeting.guarded(body)
    with pytest.raises(KeyError, match="device 2 failed"):
        on_each_device(devices, work, together=True)


def test_devices_follow_the_first_devices_decision():
    from plax.sharding_spmd import _Meeting
    from plax.sharding_threads import on_each_device
    devices = [object() for _ in range(4)]
    meeting = _Meeting(devices)
    # each device proposes its own position twice: every one gets device 0's, each time
    got = on_each_device(devices, lambda i: [meeting.agree(devices[i], i * 10 + k)
                                             for k in range(2)], together=True)
    assert got == [[0, 1]] * 4
