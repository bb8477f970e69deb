"""Sharded work stays on the devices (issue 25, item 2): over a mesh of ``Auto`` axes, eager
operations and ``jit`` programs run on every device on its own blocks (the partitioner's
exchanges where blocks must move), and ``jit`` of unreduced (partial-sum) arrays keeps each
device's partial sums where they are, summing them only where JAX does (a ``reshard`` to a
spec without the unreduced axes). Eager operations on explicitly sharded arrays that need
other devices' blocks (a reduction over a split dimension, a product contracting one, a
reshape across the split, loops and branches) run as a one-equation partitioned program the
same way.

One script runs in a child with 8 CPU devices: with plax it also counts the gathers of
sharded arrays onto one device (:func:`plax.array.gather_count`), which must stay at zero
where the work is partitioned; its layouts, types and per-device blocks are compared with
JAX 0.10.2's, recorded below (a second test checks the record against JAX where it is
installed). Values are checked against NumPy float64 in the child.
"""
import importlib.util

import pytest

from subprocess_util import last_json, run_python

CASES = r'''
import json, sys
import numpy as np
if sys.argv[1] == "jax":
    import jax
    jax.config.update("jax_num_cpu_devices", 8)
    gathers = lambda: 0
else:
    import plax as jax
    from plax.array import gather_count as gathers
jnp, P = jax.numpy, jax.P
Auto = jax.sharding.AxisType.Auto

def check(fn, want):
    """[spec or type, value matches float64 NumPy, gathers, devices holding blocks]"""
    before = gathers()
    r = fn()
    jax.block_until_ready(r)
    count = gathers() - before
    spec = r.sharding.spec
    whole = jax.reshard(r, P(*spec.partitions)) if spec.unreduced or spec.reduced else r
    ok = bool(np.allclose(np.asarray(whole, np.float64), want, rtol=1e-5, atol=1e-3))
    label = str(jax.typeof(r)) if spec.unreduced or spec.reduced else repr(spec)
    return [label, ok, count, len({s.device for s in r.addressable_shards})]

out = {}
a = np.arange(32.0, dtype=np.float32).reshape(8, 4) / 8
b = np.arange(64.0, dtype=np.float32).reshape(4, 16) / 16
A, B = a.astype(np.float64), b.astype(np.float64)
with jax.set_mesh(jax.make_mesh((4, 2), ("X", "Y"), (Auto, Auto))):
    x = jax.device_put(a, P("X", "Y"))
    x1 = jax.device_put(a, P(None, "X"))
    y1 = jax.device_put(b, P("X", None))
    def logged(u):
        jax.debug.callback(lambda v: None, u)  # called once, by the first device
        return u * 2
    auto = {
        "sin": (lambda: jnp.sin(x), np.sin(A)),
        "transpose": (lambda: x.T + 1, A.T + 1),
        "sum0": (lambda: x.sum(0), A.sum(0)),
        "sum_all": (lambda: x.sum(), A.sum()),
        "max1": (lambda: x.max(1), A.max(1)),
        "dot_contract_split": (lambda: jnp.dot(x1, y1), A @ B),
        "reshape_merge": (lambda: x.reshape(32), A.reshape(32)),
        "jit_sin": (lambda: jax.jit(jnp.sin)(x), np.sin(A)),
        "jit_dot": (lambda: jax.jit(jnp.dot)(x1, y1), A @ B),
        "jit_gram": (lambda: jax.jit(lambda u: u @ u.T)(x), A @ A.T),
        "jit_chain": (lambda: jax.jit(lambda u: jnp.sin(u).T.sum(1) * 2)(x),
                      np.sin(A).T.sum(1) * 2),
        "jit_nested": (lambda: jax.jit(lambda u: jax.jit(jnp.exp)(u) - 1)(x), np.exp(A) - 1),
        "jit_callback": (lambda: jax.jit(logged)(x), A * 2),
    }
    out["auto"] = {k: check(*v) for k, v in auto.items()}

host = np.arange(32.0, dtype=np.float32).reshape(8, 4) + 1
H = host.astype(np.float64)
with jax.set_mesh(jax.make_mesh((4, 2), ("X", "Y"))):
    spec = P("X", None, unreduced={"Y"})
    y = jax.device_put(jax.device_put(host, P("X", "Y")), spec)  # partial sums on both
    w = jax.device_put(host, P("X", "Y"))
    v = jax.device_put(host.T, P("Y", None))
    unreduced = {
        "sum": (lambda: jax.jit(jnp.sum)(y), H.sum()),
        "sum1": (lambda: jax.jit(lambda u: jnp.sum(u, axis=1))(y), H.sum(1)),
        "T": (lambda: jax.jit(lambda u: u.T)(y), H.T),
        "twice_then_sum0": (lambda: jax.jit(lambda u: jnp.sum(u + u, axis=0))(y), 2 * H.sum(0)),
        "reshard": (lambda: jax.jit(lambda u: jax.reshard(u, P("X", None)))(y), H),
        "reshard_replicated": (lambda: jax.jit(
            lambda u: jax.reshard(jnp.sum(u, axis=0), P()))(y), H.sum(0)),
        "dot_unreduced": (lambda: jax.jit(lambda p, q: jnp.dot(
            p, q, out_sharding=spec))(w, v), H @ H.T),
        "to_reduced": (lambda: jax.jit(lambda u: jax.reshard(
            u, P("X", None, reduced={"Y"})))(y), H),
        "sum_to_reduced": (lambda: jax.jit(lambda u: jax.reshard(
            jnp.sum(u, 1), P("X", reduced={"Y"})))(y), H.sum(1)),
        "times_reduced": (lambda: jax.jit(lambda u, m: u * m)(
            y, jax.device_put(host, P("X", None, reduced={"Y"}))), H * H),
        "dot_reduced": (lambda: jax.jit(lambda p, q: jax.reshard(jnp.dot(
            p, q, out_sharding=spec), P("X", None)))(w, v), H @ H.T),
    }
    out["unreduced"] = {k: check(*v) for k, v in unreduced.items()}
    x = jax.device_put(host, P("X", "Y"))
    row = jax.device_put(host[:1], P())
    eager = {  # explicit types, eagerly: work that needs the devices' blocks exchanged
        "sum_all": (lambda: jnp.sum(x), H.sum()),
        "sum0": (lambda: jnp.sum(x, 0), H.sum(0)),
        "dot_out": (lambda: jnp.dot(w, v, out_sharding=P("X", None)), H @ H.T),
        "reshape": (lambda: x.reshape(32), H.reshape(32)),
        "unreduced_sum": (lambda: jnp.sum(y), H.sum()),
        "unreduced_sum0": (lambda: jnp.sum(y, 0), H.sum(0)),
        "dot_unreduced": (lambda: jnp.dot(w, v, out_sharding=spec), H @ H.T),
        "fori_loop": (lambda: jax.lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) * 2, x / 10),
                      np.sin(np.sin(np.sin(H / 10) * 2) * 2) * 2),
        "cond": (lambda: jax.lax.cond(True, lambda u: u * 2, lambda u: u, x), H * 2),
        "while_sum": (lambda: jax.lax.while_loop(lambda c: c.sum() < 1e5, lambda c: c * 2, x),
                      H * 256),
        # lax's size-1 broadcasting: every device reads the size-1 row whole
        "size_one": (lambda: jax.lax.mul(x, row), H * H[:1]),
        "size_one_jit": (lambda: jax.jit(jax.lax.add)(row, x), H + H[:1]),
    }
    out["eager"] = {k: check(*v) for k, v in eager.items()}
    # each device's own partial sums (JAX's layout of them)
    blocks = lambda r: [np.asarray(s.data).ravel()[:4].tolist() for s in r.addressable_shards[:4]]
    out["blocks"] = {
        "sum": blocks(jax.jit(jnp.sum)(y)),
        "T": blocks(jax.jit(lambda u: u.T)(y)),
        "dot_unreduced": blocks(jax.jit(lambda p, q: jnp.dot(p, q, out_sharding=spec))(w, v)),
        "eager_dot_unreduced": blocks(jnp.dot(w, v, out_sharding=spec)),
        "eager_sum": blocks(jnp.sum(y)),
        "times_reduced": blocks(jax.jit(lambda u, m: u * m)(
            y, jax.device_put(host, P("X", None, reduced={"Y"})))),
    }
print(json.dumps(out))
'''

AUTO = {  # the partitioner's layouts (JAX 0.10.2), all 8 devices holding blocks
    "sin": "P('X', 'Y')", "transpose": "P('Y', 'X')", "sum0": "P('Y',)", "sum_all": "P()",
    "max1": "P('X',)", "dot_contract_split": "P()", "reshape_merge": "P('X',)",
    "jit_sin": "P('X', 'Y')", "jit_dot": "P()", "jit_gram": "P('X',)", "jit_chain": "P('Y',)",
    "jit_nested": "P('X', 'Y')", "jit_callback": "P('X', 'Y')",
}
UNREDUCED = {
    "sum": "float32[]{U:Y}", "sum1": "float32[8@X]{U:Y}", "T": "float32[4,8@X]{U:Y}",
    "twice_then_sum0": "float32[4]{U:Y}", "reshard": "float32[8@X,4]", "reshard_replicated":
    "float32[4]", "dot_unreduced": "float32[8@X,8]{U:Y}", "dot_reduced": "float32[8@X,8]",
    "to_reduced": "float32[8@X,4]{R:Y}", "sum_to_reduced": "float32[8@X]{R:Y}",
    "times_reduced": "float32[8@X,4]{U:Y}",
}
EAGER = {
    "sum_all": "P()", "sum0": "P('Y',)", "dot_out": "P('X', None)",
    "reshape": "P(('X', 'Y'),)", "unreduced_sum": "float32[]{U:Y}",
    "unreduced_sum0": "float32[4]{U:Y}", "dot_unreduced": "float32[8@X,8]{U:Y}",
    "fori_loop": "P('X', 'Y')", "cond": "P('X', 'Y')", "while_sum": "P('X', 'Y')",
    "size_one": "P('X', 'Y')", "size_one_jit": "P('X', 'Y')",
}
_RESHARDED = {"reshard", "reshard_replicated", "dot_reduced"}  # labelled by spec, not type
BLOCKS = {  # JAX 0.10.2's per-device partial sums (first four devices, first four values)
    "sum": [[248.0], [280.0], [248.0], [280.0]],
    "T": [[1.0, 5.0, 2.0, 6.0], [0.0, 0.0, 0.0, 0.0], [9.0, 13.0, 10.0, 14.0],
          [0.0, 0.0, 0.0, 0.0]],
    "dot_unreduced": [[5.0, 17.0, 29.0, 41.0], [25.0, 53.0, 81.0, 109.0],
                      [29.0, 105.0, 181.0, 257.0], [81.0, 173.0, 265.0, 357.0]],
}
BLOCKS["times_reduced"] = [[1.0, 4.0, 0.0, 0.0], [0.0, 0.0, 9.0, 16.0],
                           [81.0, 100.0, 0.0, 0.0], [0.0, 0.0, 121.0, 144.0]]
BLOCKS["eager_dot_unreduced"] = BLOCKS["dot_unreduced"]
BLOCKS["eager_sum"] = BLOCKS["sum"]


def _label(case: str) -> str:
    if case not in _RESHARDED:
        return UNREDUCED[case]
    spec = {"reshard": "P('X', None)", "reshard_replicated": "P(None,)",
            "dot_reduced": "P('X', None)"}
    return spec[case]


def _run(lib: str) -> dict:
    env = {"PLAX_NUM_CPU_DEVICES": "8", "PLAX_PLATFORMS": "cpu"} if lib == "plax" else \
        {"JAX_PLATFORMS": "cpu"}
    return last_json(run_python(args=["-c", CASES, lib], env=env))


@pytest.fixture(scope="module")
def plax_run():
    return _run("plax")


@pytest.mark.parametrize("case", sorted(AUTO))
def test_auto_mesh_runs_on_every_device(plax_run, case):
    spec, ok, gathered, devices = plax_run["auto"][case]
    assert ok, case
    assert spec == AUTO[case]
    assert devices == 8
    assert gathered == 0, f"{case}: {gathered} gathers onto one device"


@pytest.mark.parametrize("case", sorted(UNREDUCED))
def test_unreduced_jit_keeps_partial_sums_per_device(plax_run, case):
    label, ok, gathered, devices = plax_run["unreduced"][case]
    assert ok, case
    assert label == _label(case)
    assert gathered == 0 and devices == 8


@pytest.mark.parametrize("case", sorted(EAGER))
def test_explicit_eager_exchanges_blocks(plax_run, case):
    label, ok, gathered, devices = plax_run["eager"][case]
    assert ok, case
    assert label == EAGER[case]
    assert gathered == 0 and devices == 8


def test_unreduced_blocks_are_jaxs(plax_run):
    assert plax_run["blocks"] == BLOCKS


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
def test_record_is_jaxs():
    out = _run("jax")
    assert {k: v[0] for k, v in out["auto"].items()} == AUTO
    assert {k: v[0] for k, v in out["unreduced"].items()} == \
        {k: _label(k) for k in UNREDUCED}
    assert {k: v[0] for k, v in out["eager"].items()} == EAGER
    assert all(v[1] for part in ("auto", "unreduced", "eager") for v in out[part].values())
    assert out["blocks"] == BLOCKS
