"""Unreduced (``{U:Y}``) values where JAX 0.10.2 refuses or accepts them (issue 25, item 2).

* ``device_put`` of a host value with unreduced axes and no split dimension
  (``P(None, None, unreduced={'X'})`` on a 1-d mesh) is JAX's ``NotImplementedError``; with a
  split dimension, or of an array already on the mesh, it is placed.
* ``dot``/``einsum`` with ``out_sharding=P(..., unreduced={...})`` want both operands'
  contracting dimensions split alike, over exactly the unreduced axes (JAX's two
  ``ShardingTypeError``\\ s), eagerly and under ``jit``.
* ``shard_map`` takes and returns unreduced values: ``in_specs``/``out_specs`` with
  ``unreduced=`` give the body each device's partial block, and ``psum`` over the unreduced
  axis sums the partial blocks (values against NumPy float64).

The script runs under plax and, where JAX is installed, under JAX; ``JAX_ANSWERS`` is JAX
0.10.2's record, so CI (no JAX) checks plax against it.
"""
import importlib.util

import pytest

from sharding_child import PRELUDE, run_child

SCRIPT = PRELUDE + r'''
out = {}
a = np.arange(64, dtype=np.float32).reshape(8, 8)


def record(name, f, expected=None):
    # the result's type and, for a value that is not unreduced, whether it equals `expected`
    # (NumPy float64); or the error's type and message
    try:
        r = f()
        t = str(jax.typeof(r))
        ok = None if "{U" in t or expected is None else bool(
            np.allclose(np.asarray(r, np.float64), expected))
        out[name] = ["ok", t, ok]
    except Exception as e:  # noqa: BLE001 -- the error is the answer
        out[name] = [type(e).__name__, str(e)]


with jax.set_mesh(jax.make_mesh((8,), ("X",))):
    record("put_host_all_unreduced", lambda: jax.device_put(a, P(None, None, unreduced={"X"})))
    record("put_host_short_spec", lambda: jax.device_put(a, P(unreduced={"X"})))
    record("put_host_vector", lambda: jax.device_put(np.arange(8.0), P(None, unreduced={"X"})))
with jax.set_mesh(jax.make_mesh((2, 4), ("X", "Y"))):
    record("put_host_split", lambda: jax.device_put(a, P("X", None, unreduced={"Y"})))
    record("put_host_split_columns", lambda: jax.device_put(a, P(None, "X", unreduced={"Y"})))
    record("put_host_unsplit", lambda: jax.device_put(a, P(None, None, unreduced={"Y"})))
    record("put_host_both_axes", lambda: jax.device_put(a, P(unreduced={"X", "Y"})))
    x = jax.device_put(a, P("X", "Y"))
    record("put_array_unsplit", lambda: jax.device_put(x, P(None, None, unreduced={"Y"})))
    record("reshard_unsplit", lambda: sharding.reshard(x, P(None, None, unreduced={"Y"})))
    # a product asked for an unreduced result
    rows_y = jax.device_put(a, P("Y", None))
    record("dot_contracting_split_otherwise",
           lambda: jnp.dot(x, x, out_sharding=P(None, None, unreduced={"Y"})))
    record("dot_contracting_split_otherwise_jit", lambda: jax.jit(
        lambda u: jnp.dot(u, u, out_sharding=P(None, None, unreduced={"Y"})))(x))
    record("dot_one_operand_split", lambda: jnp.dot(x, a, out_sharding=P("X", None,
                                                                           unreduced={"Y"})))
    record("dot_two_axes_against_one", lambda: jnp.dot(
        x, jax.device_put(a, P(("Y", "X"), None)), out_sharding=P(None, None, unreduced={"Y"})))
    record("dot_other_unreduced_axis", lambda: jnp.dot(
        x, rows_y, out_sharding=P(None, None, unreduced={"X"})))
    record("einsum_other_unreduced_axis", lambda: jnp.einsum(
        "ij,jk->ik", x, rows_y, out_sharding=P(None, None, unreduced={"X"})))
    record("dot_agrees", lambda: jnp.dot(x, rows_y, out_sharding=P("X", None, unreduced={"Y"})))
    record("dot_agrees_reduced", lambda: sharding.reshard(
        jnp.dot(x, rows_y, out_sharding=P("X", None, unreduced={"Y"})), P("X", None)),
        a.astype(np.float64) @ a)
    record("dot_agrees_jit", lambda: jax.jit(lambda u, v: sharding.reshard(
        jnp.dot(u, v, out_sharding=P(None, None, unreduced={"Y"})), P()))(x, rows_y),
        a.astype(np.float64) @ a)
print(json.dumps(out))
'''

_NOT_IMPLEMENTED = ["NotImplementedError", "device_indices_map doesn't work with unreduced. "
                    "Please file a bug at https://github.com/jax-ml/jax/issues"]
_NOT_ALIKE = ("lhs and rhs contracting dims should be sharded identically when out_sharding "
              "provided to dot_general mentions unreduced_axes. Got ")
_NOT_THE_AXES = ("out_sharding's unreduced axes should be equal to the contracting specs. Got "
                 "unreduced axes=frozenset({'X'}) and contracting spec=('Y',)")
JAX_ANSWERS = {
    "put_host_all_unreduced": _NOT_IMPLEMENTED,
    "put_host_short_spec": _NOT_IMPLEMENTED,
    "put_host_vector": _NOT_IMPLEMENTED,
    "put_host_split": ["ok", "float32[8@X,8]{U:Y}", None],
    "put_host_split_columns": ["ok", "float32[8,8@X]{U:Y}", None],
    "put_host_unsplit": _NOT_IMPLEMENTED,
    "put_host_both_axes": _NOT_IMPLEMENTED,
    "put_array_unsplit": ["ok", "float32[8,8]{U:Y}", None],
    "reshard_unsplit": ["ok", "float32[8,8]{U:Y}", None],
    "dot_contracting_split_otherwise": [
        "ShardingTypeError", _NOT_ALIKE + "lhs_contracting_spec=('Y',), "
        "rhs_contracting_spec=('X',)"],
    "dot_contracting_split_otherwise_jit": [
        "ShardingTypeError", _NOT_ALIKE + "lhs_contracting_spec=('Y',), "
        "rhs_contracting_spec=('X',)"],
    "dot_one_operand_split": [
        "ShardingTypeError", _NOT_ALIKE + "lhs_contracting_spec=('Y',), "
        "rhs_contracting_spec=(None,)"],
    "dot_two_axes_against_one": [
        "ShardingTypeError", _NOT_ALIKE + "lhs_contracting_spec=('Y',), "
        "rhs_contracting_spec=(('Y', 'X'),)"],
    "dot_other_unreduced_axis": ["ShardingTypeError", _NOT_THE_AXES],
    "einsum_other_unreduced_axis": ["ShardingTypeError", _NOT_THE_AXES],
    "dot_agrees": ["ok", "float32[8@X,8]{U:Y}", None],
    "dot_agrees_reduced": ["ok", "float32[8@X,8]", True],
    "dot_agrees_jit": ["ok", "float32[8,8]", True],
}


def test_plax_matches_the_recorded_jax_answers():
    got = run_child(SCRIPT, "plax")
    assert {k: got.get(k) for k in JAX_ANSWERS if got.get(k) != JAX_ANSWERS[k]} == {}
    assert set(got) == set(JAX_ANSWERS)


def test_recorded_answers_are_jax_s():
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed (its answers are recorded in JAX_ANSWERS)")
    assert run_child(SCRIPT, "jax") == JAX_ANSWERS
