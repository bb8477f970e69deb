"""Results over a mesh of ``Auto`` axes laid out as JAX 0.10.2's partitioner lays them out
(issue 25, item 2; :mod:`plax.sharding_auto`): eagerly and out of ``jit``, an elementwise
result is split as its operand, a transpose permutes the split, a reduction drops the
reduced dimensions' axes, a product keeps its free dimensions' axes, and
``with_sharding_constraint`` inside ``jit`` stages JAX's ``sharding_constraint`` equation and
says the result's layout. The specs JAX printed
are recorded below (the plax side runs without JAX); a second test checks the record
against JAX itself. Values are checked against NumPy.
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
Auto = jax.sharding.AxisType.Auto
mesh = jax.make_mesh((4, 2), ("X", "Y"), (Auto, Auto))
jax.set_mesh(mesh)
a = np.arange(32.0, dtype=np.float32).reshape(8, 4)
b = np.arange(64.0, dtype=np.float32).reshape(4, 16)
x = jax.device_put(a, P("X", "Y"))
x1 = jax.device_put(a, P(None, "X"))
y1 = jax.device_put(b, P("X", None))
v = jax.device_put(np.arange(8.0, dtype=np.float32), P("X"))
cases = {
    "sin": (lambda: jnp.sin(x), np.sin(a)),
    "sin_jit": (lambda: jax.jit(jnp.sin)(x), np.sin(a)),
    "add_scalar": (lambda: x + 1, a + 1),
    "add_replicated": (lambda: x + jnp.ones((8, 4)), a + 1),
    "transpose": (lambda: x.T, a.T),
    "sum0": (lambda: x.sum(0), a.sum(0)),
    "sum1": (lambda: x.sum(1), a.sum(1)),
    "sum_all": (lambda: x.sum(), a.sum()),
    "sum0_jit": (lambda: jax.jit(lambda u: u.sum(0))(x), a.sum(0)),
    "dot_contract_split": (lambda: jnp.dot(x1, y1), a @ b),
    "dot_contract_split_jit": (lambda: jax.jit(jnp.dot)(x1, y1), a @ b),
    "dot_free_split": (lambda: jnp.dot(x, x.T), a @ a.T),
    "vector_sin": (lambda: jnp.sin(v), np.sin(np.arange(8.0))),
    "vector_sum": (lambda: v.sum(), np.arange(8.0).sum()),
    "reshape_merge": (lambda: x.reshape(32), a.reshape(32)),
    "jit_chain": (lambda: jax.jit(lambda u: jnp.sin(u).T.sum(1) * 2)(x), np.sin(a).T.sum(1) * 2),
    "constraint_jit": (lambda: jax.jit(lambda u, w: jax.lax.with_sharding_constraint(
        jnp.dot(u, w), P("X", None)))(x1, y1), a @ b),
}
out = {}
for name, (fn, want) in cases.items():
    r = fn()
    ok = bool(np.allclose(np.asarray(r, np.float64), want, rtol=1e-5, atol=1e-4))
    out[name] = [repr(r.sharding.spec), r.sharding.mesh == mesh, ok]
out["constraint_jaxpr"] = str(jax.make_jaxpr(
    lambda u: jax.lax.with_sharding_constraint(u * 2, P("X", None)))(x1))
print(json.dumps(out))
'''

RECORD = {
    "sin": "P('X', 'Y')", "sin_jit": "P('X', 'Y')", "add_scalar": "P('X', 'Y')",
    "add_replicated": "P('X', 'Y')", "transpose": "P('Y', 'X')", "sum0": "P('Y',)",
    "sum1": "P('X',)", "sum_all": "P()", "sum0_jit": "P('Y',)", "dot_contract_split": "P()",
    "dot_contract_split_jit": "P()", "dot_free_split": "P('X',)", "vector_sin": "P('X',)",
    "vector_sum": "P()", "reshape_merge": "P('X',)", "jit_chain": "P('Y',)",
    "constraint_jit": "P('X',)",
}

_AMESH = ("AbstractMesh('X': 4, 'Y': 2, axis_types=(Auto, Auto), device_kind=cpu, "
          "num_cores=None, platform=cpu)")
CONSTRAINT_JAXPR = f"""{{ lambda ; a:f32[8,4]. let
    b:f32[8,4] = mul a 2.0:f32[]
    c:f32[8,4] = sharding_constraint[
      context_mesh={_AMESH}
      layout=None
      sharding=NamedSharding(mesh={_AMESH}, spec=P('X', None))
      unconstrained_dims=frozenset({{}})
    ] b
  in (c,) }}"""


@pytest.fixture(scope="module")
def plax_run():
    return last_json(run_python(args=["-c", CASES, "plax"],
                                env={"PLAX_NUM_CPU_DEVICES": "8", "PLAX_PLATFORMS": "cpu"}))


def test_constraint_prints_as_jax(plax_run):
    assert plax_run["constraint_jaxpr"] == CONSTRAINT_JAXPR


@pytest.mark.parametrize("case", sorted(RECORD))
def test_partitioners_layout(plax_run, case):
    spec, on_mesh, values_ok = plax_run[case]
    assert values_ok, case
    assert on_mesh and spec == RECORD[case], json.dumps(plax_run[case])


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
def test_record_is_jaxs():
    out = last_json(run_python(args=["-c", CASES, "jax"], env={"JAX_PLATFORMS": "cpu"}))
    assert out.pop("constraint_jaxpr") == CONSTRAINT_JAXPR
    assert {k: v[0] for k, v in out.items()} == RECORD
    assert all(v[1] and v[2] for v in out.values())
