"""Unreduced (``{U:Y}``) values where JAX 0.10.2 refuses or accepts them (issue 25, item 2).

* ``device_put`` of a host value with unreduced axes and no split dimension
  (``P(None, None, unreduced={'X'})`` on a 1-d mesh) is JAX's ``NotImplementedError``; with a
  split dimension, or of an array already on the mesh, it is placed.
* ``dot``/``einsum`` with ``out_sharding=P(..., unreduced={...})`` want both operands'
  contracting dimensions split alike, over exactly the unreduced axes (JAX's two
  ``ShardingTypeError``\\ s), eagerly and under ``jit``.
* ``shard_map`` takes and returns unreduced values: ``in_specs``/``out_specs`` with
  ``unreduced=`` give the body each device's partial block, ``psum``/``pmean``/
  ``psum_scatter`` over the unreduced axis add the parts, an output typed unreduced keeps each
  device's block as its part (values against NumPy float64), and in_specs must say the
  argument's unreduced axes (JAX's ValueError otherwise), as must an output vary over them.

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
        if "{U" in t and expected is not None:  # the partial sums added
            r = sharding.reshard(r, P(*r.sharding.spec.partitions))
        ok = None if expected is None else bool(np.allclose(np.asarray(r, np.float64),
                                                            expected))
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
    # shard_map: each device's partial block in, psum over the unreduced axis
    U = P("X", None, unreduced={"Y"})
    y = jax.device_put(a, U)
    a64 = a.astype(np.float64)
    sm = jax.shard_map
    record("shard_map_psum", lambda: sm(lambda u: lax.psum(u, "Y"), in_specs=U,
                                        out_specs=P("X", None))(y), a64)
    record("shard_map_psum_jit", lambda: jax.jit(sm(lambda u: lax.psum(u, "Y"), in_specs=U,
                                                    out_specs=P("X", None)))(y), a64)
    record("shard_map_psum_inferred", lambda: sm(lambda u: lax.psum(u, "Y"),
                                                 out_specs=P("X", None))(y), a64)
    record("shard_map_pmean", lambda: sm(lambda u: lax.pmean(u, "Y"), in_specs=U,
                                         out_specs=P("X", None))(y), a64 / 4)
    record("shard_map_psum_scatter", lambda: sm(
        lambda u: lax.psum_scatter(u, "Y", scatter_dimension=1, tiled=True), in_specs=U,
        out_specs=P("X", "Y"))(y), a64)
    record("shard_map_spec_without_unreduced", lambda: sm(
        lambda u: u, in_specs=P("X", None), out_specs=P("X", None))(y))
    record("shard_map_spec_unreduced_argument_not", lambda: sm(
        lambda u: lax.psum(u, "Y"), in_specs=U, out_specs=P("X", None))(
        jax.device_put(a, P("X", None))))
    record("shard_map_parts_through", lambda: sm(lambda u: u, in_specs=U, out_specs=U)(y), a64)
    record("shard_map_parts_through_jit", lambda: jax.jit(
        sm(lambda u: u, in_specs=U, out_specs=U))(y), a64)
    record("shard_map_parts_added", lambda: sm(lambda u: u + u, in_specs=U, out_specs=U)(y),
           2 * a64)
    gram = np.concatenate([a64[:4] @ a64[:4].T, a64[4:] @ a64[4:].T])
    record("shard_map_partial_products", lambda: sm(
        lambda u: jnp.dot(u, u.T), in_specs=P("X", "Y"), out_specs=U)(x), gram)
    record("shard_map_partial_products_jit", lambda: jax.jit(sm(
        lambda u: jnp.dot(u, u.T), in_specs=P("X", "Y"), out_specs=U))(x), gram)
    record("shard_map_invariant_out_unreduced", lambda: sm(
        lambda u: u * 2, in_specs=P("X", None), out_specs=U)(jax.device_put(a, P("X", None))))
    if sys.argv[1] == "plax":  # eagerly the parts stay on their devices
        from plax.array import gather_count
        before = gather_count()
        r = sm(lambda u: lax.psum(u, "Y"), in_specs=U, out_specs=P("X", None))(y)
        r2 = sm(lambda u: u + u, in_specs=U, out_specs=U)(y)
        out["plax_gathers"] = [gather_count() - before, len(r._pieces), len(r2._pieces)]
print(json.dumps(out))
'''

_NOT_IMPLEMENTED = ["NotImplementedError", "device_indices_map doesn't work with unreduced. "
                    "Please file a bug at https://github.com/jax-ml/jax/issues"]
_NOT_ALIKE = ("lhs and rhs contracting dims should be sharded identically when out_sharding "
              "provided to dot_general mentions unreduced_axes. Got ")
_NOT_THE_AXES = ("out_sharding's unreduced axes should be equal to the contracting specs. Got "
                 "unreduced axes=frozenset({'X'}) and contracting spec=('Y',)")
_RESHARD = (" `in_specs` is an optional argument so you can omit specifying it and shard_map will "
            "infer the in_specs from the arguments. If you want to reshard your inputs, you "
            "can use `jax.reshard` on the arguments and then pass those args to shard_map.")
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
    "shard_map_psum": ["ok", "float32[8@X,8]", True],
    "shard_map_psum_jit": ["ok", "float32[8@X,8]", True],
    "shard_map_psum_inferred": ["ok", "float32[8@X,8]", True],
    "shard_map_pmean": ["ok", "float32[8@X,8]", True],
    "shard_map_psum_scatter": ["ok", "float32[8@X,8@Y]", True],
    "shard_map_spec_without_unreduced": [
        "ValueError", "in_specs passed to shard_map: P('X', None) does not match the specs of "
        "the input: P('X', None, unreduced={'Y'}) for arg: float32[8@X,8]{U:Y}." + _RESHARD],
    "shard_map_spec_unreduced_argument_not": [
        "ValueError", "in_specs passed to shard_map: P('X', None, unreduced={'Y'}) does not "
        "match the specs of the input: P('X', None) for arg: float32[8@X,8]." + _RESHARD],
    "shard_map_parts_through": ["ok", "float32[8@X,8]{U:Y}", True],
    "shard_map_parts_through_jit": ["ok", "float32[8@X,8]{U:Y}", True],
    "shard_map_parts_added": ["ok", "float32[8@X,8]{U:Y}", True],
    "shard_map_partial_products": ["ok", "float32[8@X,4]{U:Y}", True],
    "shard_map_partial_products_jit": ["ok", "float32[8@X,4]{U:Y}", True],
    "shard_map_invariant_out_unreduced": [
        "ValueError", "vary_unreduced_cast is a Varying->Unreduced collective. This means that "
        "the axis names mentioned in `axes` passed to `vary_unreduced_cast` must be present in "
        "`jax.typeof(x).mat.varying`. Got axes=('Y',) and "
        "jax.typeof(x).mat.varying=frozenset({'X'})"],
}


@pytest.fixture(scope="module")
def plax_run():
    return run_child(SCRIPT, "plax")


def test_plax_matches_the_recorded_jax_answers(plax_run):
    got = {k: v for k, v in plax_run.items() if k != "plax_gathers"}
    assert {k: got.get(k) for k in JAX_ANSWERS if got.get(k) != JAX_ANSWERS[k]} == {}
    assert set(got) == set(JAX_ANSWERS)


def test_shard_map_keeps_the_parts_on_their_devices(plax_run):
    # an eager shard_map of an unreduced argument hands each device its own buffer: nothing
    # is gathered onto one device, and the results hold one block per device
    assert plax_run["plax_gathers"] == [0, 8, 8]


def test_recorded_answers_are_jax_s():
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed (its answers are recorded in JAX_ANSWERS)")
    assert run_child(SCRIPT, "jax") == JAX_ANSWERS
