"""Explicit-mode checks JAX 0.10.2 makes (issue 25, item 2): ``shard_map`` on a mesh whose
axes are all Explicit compares ``in_specs`` with its arguments' types (and infers them when
left out), a binary operation of differently split operands is a ``ShardingTypeError``,
``out_sharding=``/``reshard`` accept a spec padded with trailing Nones, and a mesh of Auto
axes (or one only partly Explicit) is not checked; ``concatenate`` and ``select_n`` want
their operands split alike and an elementwise result may not split two dimensions over one
axis (JAX's messages); a factorization or solve of split matrix dimensions is JAX's error;
``with_sharding_constraint`` is an assertion on Explicit axes; ``reshard`` refuses Auto axes.

One script runs each case on 8 CPU devices and records the result's type and sum, or the
exception's type and message (messages compared where JAX's and plax's agree word for word).
``JAX_ANSWERS`` holds JAX 0.10.2's record; a second test checks the record against JAX.
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
    from jax.sharding import NamedSharding, reshard
else:
    import plax as jax
    from plax.sharding import NamedSharding, reshard
jnp, P = jax.numpy, jax.P
AxisType = jax.sharding.AxisType
mesh = jax.make_mesh((2, 4), ("X", "Y"))
auto = jax.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)
mixed = jax.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Explicit, AxisType.Auto))
a = np.arange(64, dtype=np.float32).reshape(8, 8)
out = {}


def record(name, f, message=True):
    try:
        r = f()
        out[name] = ["ok", str(jax.typeof(r)), float(np.asarray(r, np.float64).sum())]
    except Exception as e:  # noqa: BLE001 -- the error is the answer
        out[name] = [type(e).__name__, str(e) if message else ""]


sm = jax.shard_map
with jax.set_mesh(mesh):
    x = jax.device_put(a, P("X", "Y"))
    xr = jax.device_put(a, P("X", None))
    y = jax.device_put(a, P("Y", "X"))
    double = lambda u: u * 2
    record("sm_agrees", lambda: sm(double, in_specs=P("X", "Y"), out_specs=P("X", "Y"))(x))
    record("sm_disagrees", lambda: sm(double, in_specs=P("X", None), out_specs=P("X"))(x))
    record("sm_disagrees_jit", lambda: jax.jit(sm(double, in_specs=P("X"), out_specs=P("X")))(x))
    record("sm_replicated_spec", lambda: sm(double, in_specs=P(), out_specs=P())(x))
    record("sm_unsharded_arg", lambda: sm(double, in_specs=P("X"), out_specs=P("X"))(a))
    record("sm_second_arg", lambda: sm(lambda u, v: u + v, in_specs=(P("X", "Y"), P("Y")),
                                       out_specs=P("X", "Y"))(x, xr))
    record("sm_inferred", lambda: sm(double, out_specs=P("X", "Y"))(x))
    record("sm_inferred_jit", lambda: jax.jit(sm(double, out_specs=P("X")))(xr))
    record("binop_differently_split", lambda: x + y, message=False)
    record("binop_differently_split_jit", lambda: jax.jit(lambda u, v: u + v)(x, y),
           message=False)
    record("reshard_trailing_none", lambda: reshard(x, P("X", None, None)))
    record("dot_out_trailing_none", lambda: jnp.dot(x, xr.T, out_sharding=P("X", None, None)))
    record("zeros_out_trailing_none", lambda: jnp.zeros((8, 8), out_sharding=P("X", "Y", None)))
    record("reshard_unknown_axis", lambda: reshard(x, P("Z")), message=False)
    record("reshard_indivisible", lambda: reshard(jnp.ones((6, 8)), P("Y")), message=False)
    # operations JAX wants split alike (a plain constant goes with any split)
    xc = jax.device_put(a, P(None, "X"))
    record("binop_one_axis_twice", lambda: xr + xc)
    record("concatenate_differently_split", lambda: jnp.concatenate([x, y]))
    record("concatenate_jit_partly_split", lambda: jax.jit(jnp.concatenate)([x, xr]))
    record("concatenate_jit_constant", lambda: jax.jit(lambda u: jnp.concatenate([u, a]))(x))
    record("select_cases_differ", lambda: jax.lax.select(x > 0, x, y))
    record("select_which_differs", lambda: jax.lax.select(xr > 0, x, x))
    record("where_scalar_case", lambda: jnp.where(x > 10, x, 0.0))
    # linear algebra on split matrix dimensions
    spd = jax.device_put(a @ a.T / 1e4 + 8 * np.eye(8, dtype=np.float32), P("X", None))
    record("inv_split_rows", lambda: jnp.linalg.inv(spd))
    record("qr_split_rows", lambda: jnp.linalg.qr(spd)[1])
    record("svd_split_rows", lambda: jnp.linalg.svd(spd, compute_uv=False))
    record("triangular_solve_split_b", lambda: jax.lax.linalg.triangular_solve(
        jnp.eye(8), spd, left_side=True, lower=True))
# with_sharding_constraint: an assertion on Explicit axes, refused with no mesh set
record("wsc_no_mesh", lambda: jax.lax.with_sharding_constraint(a, NamedSharding(mesh, P("X"))))
with jax.set_mesh(mesh):
    record("wsc_agrees", lambda: jax.lax.with_sharding_constraint(x, P("X", "Y")))
    record("wsc_disagrees", lambda: jax.lax.with_sharding_constraint(x, P(None, "X")))
    record("wsc_disagrees_jit", lambda: jax.jit(
        lambda u: jax.lax.with_sharding_constraint(u, P(None, "X")))(x))
    record("wsc_unsharded", lambda: jax.lax.with_sharding_constraint(a, P("X")))
# reshard changes types: a spec naming an Auto axis is JAX's ValueError (JAX's message
# then names the source line)
record("reshard_onto_auto_axis", lambda: reshard(a, NamedSharding(auto, P("X"))),
       message=False)
with jax.set_mesh(auto):
    record("sm_auto_mesh_unsharded_arg",
           lambda: sm(double, in_specs=P("X"), out_specs=P("X"))(a))
with jax.set_mesh(mixed):
    xm = jax.device_put(a, P("X", None))
    record("sm_mixed_mesh_not_checked",
           lambda: sm(double, in_specs=P(None, "Y"), out_specs=P(None, "Y"))(xm))
record("sm_mesh_argument_unsharded",
       lambda: sm(double, mesh=mesh, in_specs=P("X"), out_specs=P("X"))(a))
print(json.dumps(out))
'''

#: JAX 0.10.2's answers (checked by test_record_matches_jax)
JAX_ANSWERS = {'sm_agrees': ['ok', 'float32[8@X,8@Y]', 4032.0],
 'sm_disagrees': ['ValueError',
                  "in_specs passed to shard_map: P('X', None) does not match the specs of the "
                  "input: P('X', 'Y') for arg: float32[8@X,8@Y]. `in_specs` is an optional "
                  'argument so you can omit specifying it and shard_map will infer the '
                  'in_specs from the arguments. If you want to reshard your inputs, you can '
                  'use `jax.reshard` on the arguments and then pass those args to shard_map.'],
 'sm_disagrees_jit': ['ValueError',
                      "in_specs passed to shard_map: P('X', None) does not match the specs of "
                      "the input: P('X', 'Y') for arg: float32[8@X,8@Y]. `in_specs` is an "
                      'optional argument so you can omit specifying it and shard_map will '
                      'infer the in_specs from the arguments. If you want to reshard your '
                      'inputs, you can use `jax.reshard` on the arguments and then pass those '
                      'args to shard_map.'],
 'sm_replicated_spec': ['ValueError',
                        'in_specs passed to shard_map: P(None, None) does not match the specs '
                        "of the input: P('X', 'Y') for arg: float32[8@X,8@Y]. `in_specs` is an "
                        'optional argument so you can omit specifying it and shard_map will '
                        'infer the in_specs from the arguments. If you want to reshard your '
                        'inputs, you can use `jax.reshard` on the arguments and then pass '
                        'those args to shard_map.'],
 'sm_unsharded_arg': ['ValueError',
                      "in_specs passed to shard_map: P('X', None) does not match the specs of "
                      'the input: P(None, None) for arg: float32[8,8]. `in_specs` is an '
                      'optional argument so you can omit specifying it and shard_map will '
                      'infer the in_specs from the arguments. If you want to reshard your '
                      'inputs, you can use `jax.reshard` on the arguments and then pass those '
                      'args to shard_map.'],
 'sm_second_arg': ['ValueError',
                   "in_specs passed to shard_map: P('Y', None) does not match the specs of the "
                   "input: P('X', None) for arg: float32[8@X,8]. `in_specs` is an optional "
                   'argument so you can omit specifying it and shard_map will infer the '
                   'in_specs from the arguments. If you want to reshard your inputs, you can '
                   'use `jax.reshard` on the arguments and then pass those args to shard_map.'],
 'sm_inferred': ['ok', 'float32[8@X,8@Y]', 4032.0],
 'sm_inferred_jit': ['ok', 'float32[8@X,8]', 4032.0],
 'binop_differently_split': ['ShardingTypeError', ''],
 'binop_differently_split_jit': ['ShardingTypeError', ''],
 'reshard_trailing_none': ['ok', 'float32[8@X,8]', 2016.0],
 'dot_out_trailing_none': ['ok', 'float32[8@X,8]', 510720.0],
 'zeros_out_trailing_none': ['ok', 'float32[8@X,8@Y]', 0.0],
 'reshard_unknown_axis': ['ValueError', ''],
 'reshard_indivisible': ['ValueError', ''],
 'binop_one_axis_twice': ['ShardingTypeError',
                          'add operation with inputs: f32[8@X,8], f32[8,8@X] produces an '
                          'illegally sharded result: f32[8@X,8@X]'],
 'concatenate_differently_split': ['ShardingTypeError',
                                   'All operands should have the same sharding. Got shardings '
                                   "NamedSharding(mesh=AbstractMesh('X': 2, 'Y': 4, "
                                   'axis_types=(Explicit, Explicit), device_kind=cpu, '
                                   "num_cores=None, platform=cpu), spec=P('X', 'Y')), "
                                   "NamedSharding(mesh=AbstractMesh('X': 2, 'Y': 4, "
                                   'axis_types=(Explicit, Explicit), device_kind=cpu, '
                                   "num_cores=None, platform=cpu), spec=P('Y', 'X'))"],
 'concatenate_jit_partly_split': ['ShardingTypeError',
                                  'All operands should have the same sharding. Got shardings '
                                  "NamedSharding(mesh=AbstractMesh('X': 2, 'Y': 4, "
                                  'axis_types=(Explicit, Explicit), device_kind=cpu, '
                                  "num_cores=None, platform=cpu), spec=P('X', 'Y')), "
                                  "NamedSharding(mesh=AbstractMesh('X': 2, 'Y': 4, "
                                  'axis_types=(Explicit, Explicit), device_kind=cpu, '
                                  "num_cores=None, platform=cpu), spec=P('X', None))"],
 'concatenate_jit_constant': ['ok', 'float32[16@X,8@Y]', 4032.0],
 'select_cases_differ': ['ShardingTypeError',
                         'select cases must have the same shardings, got '
                         "[NamedSharding(mesh=AbstractMesh('X': 2, 'Y': 4, "
                         'axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, '
                         "platform=cpu), spec=P('Y', 'X')), "
                         "NamedSharding(mesh=AbstractMesh('X': 2, 'Y': 4, "
                         'axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, '
                         "platform=cpu), spec=P('X', 'Y'))]."],
 'select_which_differs': ['ShardingTypeError',
                          'select `which` must be scalar or have the same sharding as cases, '
                          "got `which` sharding NamedSharding(mesh=AbstractMesh('X': 2, 'Y': "
                          '4, axis_types=(Explicit, Explicit), device_kind=cpu, '
                          "num_cores=None, platform=cpu), spec=P('X', None)) but case sharding "
                          "NamedSharding(mesh=AbstractMesh('X': 2, 'Y': 4, "
                          'axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, '
                          "platform=cpu), spec=P('X', 'Y'))."],
 'where_scalar_case': ['ok', 'float32[8@X,8@Y]', 1961.0],
 'inv_split_rows': ['ShardingTypeError',
                    "Input 0 to lu must be unsharded on non-batch dimensions, but got P('X', "
                    'None).'],
 'qr_split_rows': ['ShardingTypeError',
                   "Input 0 to qr must be unsharded on non-batch dimensions, but got P('X', "
                   'None).'],
 'svd_split_rows': ['ShardingTypeError',
                    "Input 0 to svd must be unsharded on non-batch dimensions, but got P('X', "
                    'None).'],
 'triangular_solve_split_b': ['ShardingTypeError',
                              'triangular solve input `b` must be unsharded on the contracting '
                              "axis, but got P('X', None) with left_side=True and "
                              'transpose_a=False.'],
 'wsc_no_mesh': ['ValueError',
                 'The spec of NamedSharding passed to with_sharding_constraint can only refer '
                 "to Auto axes of the mesh. Got spec=P('X',) and mesh=AbstractMesh('X': 2, "
                 "'Y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, num_cores=None, "
                 'platform=cpu). You probably meant to use `reshard` API?'],
 'wsc_agrees': ['ok', 'float32[8@X,8@Y]', 2016.0],
 'wsc_disagrees': ['AssertionError',
                   '`with_sharding_constraint` acts as an assert when all axes of mesh are of '
                   "type `Explicit`. The array sharding: P('X', 'Y') did not match the "
                   "sharding provided: P(None, 'X'). Please use `jax.sharding.reshard` to "
                   'shard your input to the sharding you want.'],
 'wsc_disagrees_jit': ['AssertionError',
                       '`with_sharding_constraint` acts as an assert when all axes of mesh are '
                       "of type `Explicit`. The array sharding: P('X', 'Y') did not match the "
                       "sharding provided: P(None, 'X'). Please use `jax.sharding.reshard` to "
                       'shard your input to the sharding you want.'],
 'wsc_unsharded': ['AssertionError',
                   '`with_sharding_constraint` acts as an assert when all axes of mesh are of '
                   'type `Explicit`. The array sharding: P(None, None) did not match the '
                   "sharding provided: P('X', None). Please use `jax.sharding.reshard` to "
                   'shard your input to the sharding you want.'],
 'reshard_onto_auto_axis': ['ValueError', ''],
 'sm_auto_mesh_unsharded_arg': ['ok', 'float32[8,8]', 4032.0],
 'sm_mixed_mesh_not_checked': ['ok', 'float32[8,8]', 4032.0],
 'sm_mesh_argument_unsharded': ['ValueError',
                                "in_specs passed to shard_map: P('X', None) does not match the "
                                'specs of the input: P(None, None) for arg: float32[8,8]. '
                                '`in_specs` is an optional argument so you can omit specifying '
                                'it and shard_map will infer the in_specs from the arguments. '
                                'If you want to reshard your inputs, you can use `jax.reshard` '
                                'on the arguments and then pass those args to shard_map.']}

_ENV = {"PLAX_NUM_CPU_DEVICES": "8", "PLAX_PLATFORMS": "cpu"}


@pytest.fixture(scope="module")
def plax_run():
    return last_json(run_python(args=["-c", CASES, "plax"], env=_ENV))


@pytest.mark.parametrize("name", sorted(JAX_ANSWERS))
def test_answers_are_jaxs(plax_run, name):
    assert plax_run[name] == JAX_ANSWERS[name]


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="JAX is not installed")
def test_record_matches_jax():
    out = last_json(run_python(args=["-c", CASES, "jax"], env={"JAX_PLATFORMS": "cpu"}))
    assert out == JAX_ANSWERS
