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
