"""``jit`` of explicitly sharded programs partitioned over the devices (issue 25, item 2).

One script runs sharded programs under ``jit`` on 8 CPU devices (a 2x4 mesh): products with
split batch, free and contracting dimensions, reductions over split dimensions, reshapes,
``reshard``, loops and branches, a data-parallel gradient. For each it records the result's
type (as ``jax.typeof`` prints it), whether the values equal NumPy's float64 ones, whether
an argument or the result was ever gathered onto one device, and the partitioned program's
steps (which exchanges move data). JAX 0.10.2's types are recorded in ``JAX_TYPES`` (the
plax side runs without JAX); a second test checks the record against JAX itself.
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
rng = np.random.default_rng(0)
a = rng.standard_normal((8, 8)).astype(np.float32)
w = rng.standard_normal((8, 4)).astype(np.float32)
b3 = rng.standard_normal((4, 8, 8)).astype(np.float32)
x = jax.device_put(a, P("X", "Y"))      # f32[8@X,8@Y]
xr = jax.device_put(a, P("X", None))    # f32[8@X,8]: a data-parallel batch
wy = jax.device_put(w, P("Y", None))    # f32[8@Y,4]
bb = jax.device_put(b3, P("Y", None, None))
a64, w64, b64 = a.astype(np.float64), w.astype(np.float64), b3.astype(np.float64)


def loss(w, u):
    return jnp.sum(jnp.tanh(u @ w) ** 2)


def loss_grad64(w, u):
    t = np.tanh(u @ w)
    return u.T @ (2 * t * (1 - t * t))


CASES = {
    # name: (function, arguments, NumPy float64 reference)
    "dot_out_X": (lambda u, v: jnp.dot(u, v, out_sharding=P("X", None)), (x, wy),
                  lambda: a64 @ w64),
    "dot_out_XY": (lambda u, v: jnp.dot(u, u, out_sharding=P("X", "Y")), (x, wy),
                   lambda: a64 @ a64),
    "dot_one_side": (lambda u, v: u @ v, (x, w), lambda: a64 @ w64),
    "dot_free": (lambda u, v: u @ v, (xr, w), lambda: a64 @ w64),
    "einsum_batch": (lambda u: jnp.einsum("bij,bjk->bik", u, u), (bb,),
                     lambda: np.einsum("bij,bjk->bik", b64, b64)),
    "sum_split": (lambda u: jnp.sum(u, axis=0), (x,), lambda: a64.sum(0)),
    "sum_all": (lambda u: jnp.sum(u), (x,), lambda: a64.sum()),
    "max_split": (lambda u: jnp.max(u, axis=1), (x,), lambda: a64.max(1)),
    "min_prod": (lambda u: jnp.min(u, axis=0) + jnp.prod(u[:, :2] + 2, axis=0).sum(),
                 (xr,), lambda: a64.min(0) + np.prod(a64[:, :2] + 2, axis=0).sum()),
    "argmax_split": (lambda u: jnp.argmax(u, axis=0), (x,), lambda: a64.argmax(0)),
    "mean_var": (lambda u: jnp.mean(u, axis=0) + jnp.var(u), (x,),
                 lambda: a64.mean(0) + a64.var()),
    "reshape_merge": (lambda u: u.reshape(64), (x,), lambda: a64.reshape(64)),
    "reshape_lead": (lambda u: u.reshape(4, 2, 8) * 2, (xr,), lambda: a64.reshape(4, 2, 8) * 2),
    "reshard": (lambda u: reshard(u, P(None, "X")) + 1, (x,), lambda: a64 + 1),
    "scan_body": (lambda u: lax.scan(lambda c, r: (jnp.sin(c) * 2 + r, c * 3), u,
                                     jnp.ones((3, 8, 8)))[0], (x,), None),
    "fori_body": (lambda u: lax.fori_loop(0, 3, lambda i, c: jnp.cos(c) + 1, u), (x,),
                  lambda: np.cos(np.cos(np.cos(a64) + 1) + 1) + 1),
    "while_body": (lambda u: lax.while_loop(lambda c: c[1] < 3,
                                            lambda c: (c[0] * 2 + 1, c[1] + 1), (u, 0))[0],
                   (x,), lambda: ((a64 * 2 + 1) * 2 + 1) * 2 + 1),
    "cond_body": (lambda u: lax.cond(True, lambda v: v * 2, lambda v: v - 1, u), (x,),
                  lambda: a64 * 2),
    "grad_data_parallel": (lambda v, u: jax.grad(loss)(v, u), (w, xr),
                           lambda: loss_grad64(w64, a64)),
    # loops whose bodies hold exchanges: iterations driven from the host
    "fori_training": (lambda v, u: lax.fori_loop(
        0, 3, lambda i, v: v - 0.1 * jax.grad(loss)(v, u), v), (w, xr), lambda: train64()),
    "while_sum_cond": (lambda u: lax.while_loop(lambda c: jnp.sum(jnp.abs(c)) < 1e3,
                                                lambda c: c * 2, u), (x,), lambda: while64()),
    "switch_exchange": (lambda u, k: lax.switch(k, [lambda v: v / jnp.sum(v), lambda v: v * 2],
                                                u), (x, 0), lambda: a64 / a64.sum()),
}


def train64():
    v = w64
    for _ in range(3):
        v = v - 0.1 * loss_grad64(v, a64)
    return v


def while64():
    c = a64
    while np.abs(c).sum() < 1e3:
        c = c * 2
    return c


def scan_ref():
    c = a64
    for _ in range(3):
        c = np.sin(c) * 2 + 1
    return c


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

    threads = set()
    run_all = sharding_threads.on_each_device

    def recording(devices, work, **kw):
        def traced(i):
            threads.add(threading.get_ident())
            return work(i)
        return run_all(devices, traced, **kw)
    sharding_threads.on_each_device = recording

for name, (f, args, ref) in CASES.items():
    r = jax.jit(f)(*args)
    s = str(jax.typeof(r))
    out["types"][name] = s[s.index("["):]
    if sys.argv[1] == "jax":
        continue
    want = scan_ref() if ref is None else ref()
    out["values"][name] = bool(np.allclose(np.asarray(r), want, rtol=2e-5, atol=2e-5))
    sharded = [v for v in args if isinstance(v, jax.Array) and len(v.devices()) > 1]
    out["gathered"][name] = any(gathered(v) for v in sharded + [r])
    closed = jax.make_jaxpr(f)(*args)
    out["steps"][name] = describe(plan(ClosedJaxpr(closed.jaxpr, closed.consts)))
if sys.argv[1] != "jax":
    out["threads"] = len(threads)
print(json.dumps(out))
'''

#: JAX 0.10.2's result types of CASES under jit (checked by test_record_matches_jax)
JAX_TYPES = {
    "dot_out_X": "[8@X,4]", "dot_out_XY": "[8@X,8@Y]", "dot_one_side": "[8@X,4]",
    "dot_free": "[8@X,4]", "einsum_batch": "[4@Y,8,8]", "sum_split": "[8@Y]",
    "sum_all": "[]", "max_split": "[8@X]", "min_prod": "[8]", "argmax_split": "[8@Y]",
    "mean_var": "[8@Y]", "reshape_merge": "[64@(X,Y)]", "reshape_lead": "[4@X,2,8]",
    "reshard": "[8,8@X]", "scan_body": "[8@X,8@Y]", "fori_body": "[8@X,8@Y]",
    "while_body": "[8@X,8@Y]", "cond_body": "[8@X,8@Y]", "grad_data_parallel": "[8,4]",
    "fori_training": "[8,4]", "while_sum_cond": "[8@X,8@Y]", "switch_exchange": "[8@X,8@Y]",
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


def test_devices_run_on_threads_of_their_own(plax_run):
    assert plax_run["threads"] > 1


def test_exchanges_are_where_the_types_call_for_them(plax_run):
    steps = plax_run["steps"]
    # split contracting dimension: partial products summed over Y (all-reduce) ...
    assert steps["dot_out_X"] == [
        "segment: dot_general", "exchange: (('X',), ()) -> (('X',), ()) partial ('Y',) by add"]
    # ... or each device keeping its part of the sum (reduce-scatter)
    assert steps["dot_out_XY"][-1] == \
        "exchange: (('X',), ()) -> (('X',), ('Y',)) partial ('Y',) by add"
    # the unsplit operand is cut where it is, never moved
    assert steps["dot_one_side"][0] == "cut: ((), ()) -> (('Y',), ())"
    # batch and free dimensions split: each device's product is its block
    assert steps["einsum_batch"] == ["segment: dot_general"]
    assert steps["dot_free"] == ["segment: dot_general"]
    assert steps["sum_split"] == [
        "segment: reduce_sum", "exchange: (('Y',),) -> (('Y',),) partial ('X',) by add"]
    assert steps["max_split"][-1] == "exchange: (('X',),) -> (('X',),) partial ('Y',) by max"
    # argmax cannot combine partial results: the reduced dimension is made whole first
    assert steps["argmax_split"] == [
        "exchange: (('X',), ('Y',)) -> ((), ('Y',))", "segment: argmax"]
    # split dimension leading its group: the blocks reshape; (X,Y) regrouped: all-to-all
    assert steps["reshape_lead"] == ["segment: reshape, mul"]
    assert steps["reshape_merge"] == [
        "exchange: (('X',), ('Y',)) -> (('X', 'Y'), ())", "segment: reshape"]
    assert steps["reshard"][0] == "exchange: (('X',), ('Y',)) -> ((), ('X',))"
    # loops and branches with blockwise bodies run per device, no exchange
    assert steps["fori_body"] == ["segment: scan"]
    assert steps["while_body"] == ["segment: while"]
    assert steps["cond_body"] == ["segment: cond"]  # (the predicate is a literal, as in JAX)
    assert not any(s.startswith("exchange") for s in steps["scan_body"])
    # a loop whose body needs exchanges: the host runs its iterations, each partitioned
    [loop] = steps["fori_training"]
    assert loop.startswith("scan on every device: [")
    assert [s for s in loop.split("; ") if s.startswith("exchange")] == [
        "exchange: ((), ()) -> ((), ()) partial ('X',) by add"]
    assert steps["while_sum_cond"][0].startswith("while on every device: [segment: abs, reduce_sum; "
                                                 "exchange: () -> () partial ('X', 'Y') by add")
    assert steps["switch_exchange"][-1] == (
        "cond on every device: [segment: reduce_sum; exchange: () -> () partial ('X', 'Y') by add;"
        " segment: div | segment: mul]")
    # data-parallel gradient: one all-reduce, of the weights' gradient
    assert [s for s in steps["grad_data_parallel"] if s.startswith("exchange")] == [
        "exchange: ((), ()) -> ((), ()) partial ('X',) by add"]


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
def test_record_matches_jax():
    out = last_json(run_python(args=["-c", CASES, "jax"], env={"JAX_PLATFORMS": "cpu"}))
    assert out["types"] == JAX_TYPES


_PRINTS = r'''
import json, sys
import numpy as np
if sys.argv[1] == "jax":
    import jax
    jax.config.update("jax_num_cpu_devices", 8)
else:
    import plax as jax
jnp, P = jax.numpy, jax.P
mesh = jax.make_mesh((2, 4), ("X", "Y"))
out = {}
with jax.set_mesh(mesh):
    x = jax.device_put(np.ones((8, 8), np.float32), P("X", "Y"))
    out["ctx_mesh"] = str(jax.make_jaxpr(jax.jit(lambda u: jnp.sin(u) + 1))(x))
    out["no_mesh_arg"] = str(jax.make_jaxpr(jax.jit(lambda u: u * 2))(np.ones(3, np.float32)))
    _, f_vjp = jax.vjp(jnp.sin, x)
    try:
        f_vjp(jnp.ones((8, 8)))
        out["vjp"] = None
    except Exception as e:  # noqa: BLE001 -- the error is the answer
        out["vjp"] = [type(e).__name__, str(e)]
    out["vjp_typed"] = str(jax.typeof(f_vjp(jnp.cos(x))[0]))
out["outside"] = str(jax.make_jaxpr(jax.jit(lambda u: u * 2))(np.ones(3, np.float32)))
print(json.dumps(out))
'''

#: what JAX 0.10.2 prints and raises (checked by test_printing_record_matches_jax)
JAX_PRINTS = {
    "ctx_mesh": """{ lambda ; a:f32[8@X,8@Y]. let
    b:f32[8@X,8@Y] = jit[
      name=<lambda>
      ctx_mesh=Mesh('X': 2, 'Y': 4, axis_types=(Explicit, Explicit))
      jaxpr={ lambda ; a:f32[8@X,8@Y]. let
          c:f32[8@X,8@Y] = sin a
          b:f32[8@X,8@Y] = add c 1.0:f32[]
        in (b,) }
    ] a
  in (b,) }""",
    "no_mesh_arg": """{ lambda ; a:f32[3]. let
    b:f32[3] = jit[
      name=<lambda>
      ctx_mesh=Mesh('X': 2, 'Y': 4, axis_types=(Explicit, Explicit))
      jaxpr={ lambda ; a:f32[3]. let b:f32[3] = mul a 2.0:f32[] in (b,) }
    ] a
  in (b,) }""",
    "vjp": ["ValueError", "unexpected JAX type (e.g. shape/dtype) for argument to VJP "
            "function: got float32[8,8], but expected float32[8@X,8@Y] because the "
            "corresponding output of the differentiated function had JAX type "
            "float32[8@X,8@Y]"],
    "vjp_typed": "float32[8@X,8@Y]",
    "outside": """{ lambda ; a:f32[3]. let
    b:f32[3] = jit[
      name=<lambda>
      jaxpr={ lambda ; a:f32[3]. let b:f32[3] = mul a 2.0:f32[] in (b,) }
    ] a
  in (b,) }""",
}


def test_ctx_mesh_printed_and_vjp_cotangent_checked_as_in_jax():
    out = last_json(run_python(args=["-c", _PRINTS, "plax"], env=_ENV))
    assert out == JAX_PRINTS


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
def test_printing_record_matches_jax():
    out = last_json(run_python(args=["-c", _PRINTS, "jax"], env={"JAX_PLATFORMS": "cpu"}))
    assert out == JAX_PRINTS


def test_benchmark_script_runs():
    from subprocess_util import REPO
    proc = run_python(args=[str(REPO / "benchmarks" / "sharded_jit.py"), "--size", "64",
                            "--repeat", "1"], timeout=300)
    rows = [line for line in proc.stdout.splitlines() if line.startswith("jit 64x64")]
    assert len(rows) == 3
    assert all(float(r.split()[-3]) > 0 for r in rows)  # plax's column (JAX's may be "-")
