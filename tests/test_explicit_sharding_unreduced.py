"""Types' shardings and unreduced arrays as JAX 0.10.2 has them (issue 25, item 2).

``jax.typeof(x).sharding`` is a NamedSharding over an AbstractMesh (outside and inside
``jit``); ``P(..., unreduced={'Y'})`` builds, prints and compares as JAX's; an array put
with it holds partial sums (JAX's placement: zeros on the devices after the first along
``Y``), its type prints ``{U:Y}``, and ``reshard`` sums it; inside ``jit``, ``reshard`` to a
spec over the mesh of ``use_abstract_mesh`` lays it over the devices. One script runs with plax (its
output compared with JAX 0.10.2's, recorded here) and, where JAX is installed, with JAX.
"""
import importlib.util
import json

import pytest

from subprocess_util import last_json, run_python

CASES = r'''
import json, sys
import numpy as np
if sys.argv[1] == "jax":
    import jax
    jax.config.update("jax_num_cpu_devices", 8)
else:
    import plax as jax
jnp, P = jax.numpy, jax.P
out = {}

def error(fn):
    try:
        fn()
        return None
    except Exception as e:  # noqa: BLE001 -- the error is the answer
        return [type(e).__name__, str(e)]

out["unsharded"] = repr(jax.typeof(jnp.ones(3)).sharding)
mesh = jax.make_mesh((4, 2), ("X", "Y"))
x = jax.device_put(np.arange(32.0, dtype=np.float32).reshape(8, 4),
                   jax.NamedSharding(mesh, P("X", "Y")))
out["type_sharding"] = repr(jax.typeof(x).sharding)
out["type_sharding_jit"] = []
jax.jit(lambda a: out["type_sharding_jit"].append(repr(jax.typeof(a * 2).sharding)))(x)
out["type_vs_array"] = [jax.typeof(x).sharding == x.sharding,
                        jax.typeof(x).sharding.mesh == mesh.abstract_mesh]

spec = P("X", None, unreduced={"Y"})
out["spec"] = [repr(spec), repr(P("X", reduced={"Y"})), repr(P(unreduced={"X"}, reduced={"Y"})),
               spec == P("X", None), spec.partitions, sorted(spec.unreduced), len(spec)]
out["spec_errors"] = [error(lambda: P("X", unreduced={"X"})),
                      error(lambda: P(unreduced="Y")),
                      error(lambda: P(unreduced={"X"}, reduced={"X"}))]
jax.set_mesh(mesh)
host = np.arange(32.0, dtype=np.float32).reshape(8, 4) + 1
y = jax.device_put(host, spec)
out["unreduced"] = [repr(y.sharding), str(jax.typeof(y)), repr(jax.typeof(y).sharding), str(y),
                    [np.asarray(s.data).tolist() for s in y.addressable_shards[:2]]]
out["from_split"] = [np.asarray(s.data).tolist() for s in
                     jax.device_put(jax.device_put(host, P("X", "Y")), spec).addressable_shards[:2]]
out["reduced"] = [str(jax.typeof(jax.device_put(host, P("X", reduced={"Y"})))),
                  np.asarray(jax.device_put(host, P("X", reduced={"Y"})).addressable_shards[1].data).tolist()]
out["reshard"] = [str(jax.typeof(jax.reshard(y, P("X", None)))),
                  bool(np.array_equal(np.asarray(jax.reshard(y, P("X", None))), host))]
w = jax.device_put(host, P("X", "Y"))
v = jax.device_put(host.T, P("Y", None))
z = jnp.dot(w, v, out_sharding=P("X", None, unreduced={"Y"}))
r = jax.reshard(z, P("X", None))
out["dot"] = [str(jax.typeof(z)), str(jax.typeof(r)),
              bool(np.allclose(np.asarray(r), host.astype(np.float64) @ host.T, rtol=1e-6))]

# what JAX refuses on an unreduced array (and the sums it accepts), eagerly and in jit
def summed(fn):
    return np.asarray(jax.reshard(fn(), P())).ravel()[:3].tolist()
out["unreduced_ops"] = {
    "sin": error(lambda: jnp.sin(y)), "jit_neg": error(lambda: jax.jit(lambda a: -a)(y)),
    "times_2": error(lambda: y * 2), "jit_times_2": error(lambda: jax.jit(lambda a: a * 2)(y)),
    "squared": error(lambda: y * y), "plus_1": error(lambda: y + 1),
    "one_plus": error(lambda: 1 + y), "dot": error(lambda: jnp.dot(y, jnp.ones(4))),
    "max": error(lambda: jnp.max(y)), "index": error(lambda: y[0]),
    "reshape": error(lambda: y.reshape(32)), "to_numpy": error(lambda: np.asarray(y)),
    "sum": summed(lambda: jnp.sum(y, axis=1)), "twice": summed(lambda: y + y),
    "jit_sum": summed(lambda: jax.jit(jnp.sum)(y)), "transposed": summed(lambda: y.T),
}
# what JAX keeps unreduced ({U:Y}): the type, and the summed value; on partial sums held on
# both devices along Y (from_split), where a result computed from one device's blocks is wrong
y2 = jax.device_put(jax.device_put(host, P("X", "Y")), spec)
def typed(fn):
    try:
        r = fn()
    except Exception as e:  # noqa: BLE001 -- the error is the answer
        return [type(e).__name__, str(e)]
    whole = np.asarray(jax.reshard(r, P(*r.sharding.spec.partitions)))
    return [str(jax.typeof(r)), whole.ravel()[:3].tolist()]
out["unreduced_types"] = {
    "twice": typed(lambda: y2 + y2), "sum": typed(lambda: jnp.sum(y2)),
    "sum1": typed(lambda: jnp.sum(y2, axis=1)), "sum0": typed(lambda: jnp.sum(y2, axis=0)),
    "T": typed(lambda: y2.T), "astype": typed(lambda: y2.astype(jnp.float16)),
    "astype_int": typed(lambda: y2.astype(jnp.int32)),
    "where": typed(lambda: jnp.where(host > 5, y2, y2)),
    "jit_where": typed(lambda: jax.jit(lambda a: jnp.where(host > 5, a, a))(y2)),
    "jit_sum1": typed(lambda: jax.jit(lambda a: jnp.sum(a, axis=1))(y2)),
    "jit_T": typed(lambda: jax.jit(lambda a: a.T)(y2)),
    "mean": typed(lambda: jnp.mean(y2, axis=1)), "where_mixed": typed(lambda: jnp.where(host > 5, y2, 0.0)),
}
out["type_sharding_memory"] = [jax.typeof(y).sharding.memory_kind,
                               jax.typeof(jnp.ones(3)).sharding.memory_kind]
out["device_put_type_sharding"] = error(lambda: jax.device_put(host, jax.typeof(y).sharding))


@jax.jit
def remesh(a):  # reshard to a spec over the abstract mesh in use, inside jit
    amesh = jax.sharding.AbstractMesh((8,), ("A",), (jax.sharding.AxisType.Explicit,))
    with jax.sharding.use_abstract_mesh(amesh):
        return jax.reshard(a, P("A", None)) * 2
zz = remesh(w)
out["use_abstract_mesh"] = [str(jax.typeof(zz)), repr(zz.sharding),
                            bool(np.array_equal(np.asarray(zz), host * 2))]
print(json.dumps(out))
'''

AMESH = ("AbstractMesh('X': 4, 'Y': 2, axis_types=(Explicit, Explicit), device_kind=cpu, "
         "num_cores=None, platform=cpu)")
MESH = "Mesh('X': 4, 'Y': 2, axis_types=(Explicit, Explicit))"
U_SHARDING = f"NamedSharding(mesh={MESH}, spec=P('X', None, unreduced={{'Y'}}), memory_kind=device)"

_NO_RULE = ("unreduced rule for {} is not implemented. Please file an issue at "
            "https://github.com/jax-ml/jax/issues")
_RHS_REDUCED = ("RHS should be reduced along the same axes LHS is unreduced on. Got "
                "lhs=float32[8@X,4]{U:Y} and rhs=float32[]")
_ADD = ("{} is unreduced while {} is not. `add` operation does not allow this because there "
        "will be implicit communication. Please reduce {} via `reshard` before calling `add`.")
_UNPACK = ("Using *pspec is dangerous when PartitionSpec has non-empty unreduced/reduced set. "
           "Please use *spec.partitions")

RECORD = {
    "unsharded": "NamedSharding(mesh=AbstractMesh((), axis_types=()), spec=P(None,))",
    "type_sharding": f"NamedSharding(mesh={AMESH}, spec=P('X', 'Y'))",
    "type_sharding_jit": [f"NamedSharding(mesh={AMESH}, spec=P('X', 'Y'))"],
    "type_vs_array": [False, True],
    "spec": ["P('X', None, unreduced={'Y'})", "P('X', reduced={'Y'})",
             "P(unreduced={'X'}, reduced={'Y'})", False, ["X", None], ["Y"], 2],
    "spec_errors": [
        ["ValueError", "partitions cannot overlap with unreduced axes passed to PartitionSpec. "
         "Got partitions: ('X',) and unreduced axes: frozenset({'X'})"],
        ["TypeError", None], ["ValueError", None]],
    "unreduced": [U_SHARDING, "float32[8@X,4]{U:Y}",
                  f"NamedSharding(mesh={AMESH}, spec=P('X', None, unreduced={{'Y'}}))",
                  f"Array(shape=(8, 4), dtype=float32, sharding={U_SHARDING})",
                  [[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]], [[0.0] * 4] * 2]],
    "from_split": [[[1.0, 2.0, 0.0, 0.0], [5.0, 6.0, 0.0, 0.0]],
                   [[0.0, 0.0, 3.0, 4.0], [0.0, 0.0, 7.0, 8.0]]],
    "reduced": ["float32[8@X,4]{R:Y}", [[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]],
    "reshard": ["float32[8@X,4]", True],
    "dot": ["float32[8@X,8]{U:Y}", "float32[8@X,8]", True],
    "unreduced_ops": {
        "sin": ["NotImplementedError", _NO_RULE.format("sin")],
        "jit_neg": ["NotImplementedError", _NO_RULE.format("neg")],
        "times_2": ["ShardingTypeError", _RHS_REDUCED],
        "jit_times_2": ["ShardingTypeError", _RHS_REDUCED],
        "squared": ["ShardingTypeError", "lhs and rhs to `mul` cannot be unreduced since mul "
                    "is bilinear. Got lhs=frozenset({'Y'}), rhs=frozenset({'Y'})"],
        "plus_1": ["ShardingTypeError", _ADD.format("lhs", "rhs", "lhs")],
        "one_plus": ["ShardingTypeError", _ADD.format("rhs", "lhs", "rhs")],
        "dot": ["ShardingTypeError", "lhs or rhs passed to dot_general cannot be unreduced. "
                "Got lhs=ShapedArray(float32[8@X,4]{U:Y}) and rhs=ShapedArray(float32[4])"],
        "max": ["ValueError", _UNPACK], "index": ["ValueError", _UNPACK],
        "reshape": ["ValueError", _UNPACK],
        "to_numpy": ["NotImplementedError", "device_indices_map doesn't work with unreduced. "
                     "Please file a bug at https://github.com/jax-ml/jax/issues"],
        "sum": [10.0, 26.0, 42.0], "twice": [2.0, 4.0, 6.0], "jit_sum": [528.0],
        "transposed": [1.0, 5.0, 9.0]},
    "unreduced_types": {
        "twice": ["float32[8@X,4]{U:Y}", [2.0, 4.0, 6.0]],
        "sum": ["float32[]{U:Y}", [528.0]],
        "sum1": ["float32[8@X]{U:Y}", [10.0, 26.0, 42.0]],
        "sum0": ["float32[4]{U:Y}", [120.0, 128.0, 136.0]],
        "T": ["float32[4,8@X]{U:Y}", [1.0, 5.0, 9.0]],
        "astype": ["float16[8@X,4]{U:Y}", [1.0, 2.0, 3.0]],
        "astype_int": ["int32[8@X,4]{U:Y}", [1, 2, 3]],
        "where": ["float32[8@X,4]{U:Y}", [1.0, 2.0, 3.0]],
        "jit_where": ["float32[8@X,4]{U:Y}", [1.0, 2.0, 3.0]],
        "jit_sum1": ["float32[8@X]{U:Y}", [10.0, 26.0, 42.0]],
        "jit_T": ["float32[4,8@X]{U:Y}", [1.0, 5.0, 9.0]],
        "mean": ["NotImplementedError", _NO_RULE.format("div")],
        "where_mixed": ["TypeError", None]},
    "type_sharding_memory": [None, None],
    "device_put_type_sharding": ["ValueError", "is_fully_addressable is not implemented for "
                                 "`jax.sharding.AbstractMesh`."],
    "use_abstract_mesh": ["float32[8@A,4]", "NamedSharding(mesh=Mesh('A': 8, axis_types="
                          "(Explicit,)), spec=P('A', None), memory_kind=device)", True],
}


def _same(got, want) -> bool:
    """Equal, an error's message compared only where the record gives it."""
    if isinstance(want, list) and len(want) == 2 and want[1] is None and \
            isinstance(got, list) and len(got) == 2:
        return got[0] == want[0]
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        return all(_same(g, w) for g, w in zip(got, want))
    if isinstance(want, dict) and isinstance(got, dict) and want.keys() == got.keys():
        return all(_same(got[k], want[k]) for k in want)
    return got == want


@pytest.fixture(scope="module")
def plax_run():
    return last_json(run_python(args=["-c", CASES, "plax"],
                                env={"PLAX_NUM_CPU_DEVICES": "8", "PLAX_PLATFORMS": "cpu"}))


@pytest.mark.parametrize("case", sorted(RECORD))
def test_as_jax_prints_it(plax_run, case):
    assert _same(plax_run[case], RECORD[case]), json.dumps(plax_run[case])


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
def test_record_is_jaxs():
    out = last_json(run_python(args=["-c", CASES, "jax"], env={"JAX_PLATFORMS": "cpu"}))
    bad = {k: out[k] for k in RECORD if not _same(out[k], RECORD[k])}
    assert not bad, json.dumps(bad)
