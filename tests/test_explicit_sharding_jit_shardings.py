"""``jit(in_shardings=, out_shardings=)`` as JAX 0.10.2 applies them (issue 25, item 2).

At a top-level call an argument already sharded (or committed to a device) must have the
sharding its ``in_shardings`` entry gives (JAX's ``ValueError`` otherwise; with no mesh set a
host argument is placed by it), each output is placed as its ``out_shardings`` entry says
(``jit(f, out_shardings=P('Y', 'X'))(x)`` is typed ``float32[8@Y,8@X]``), PartitionSpecs need
a current mesh (JAX's ``RuntimeError``), and under a trace both are inert. Donation follows
JAX's rule on each device's buffer of the placed outputs: a shard of the donated one's shape
and dtype, else one of as many elements (deleted when the bytes agree); the rest warn.

One script runs every case on 8 CPU devices under plax and, where JAX is installed, under
JAX; ``JAX_ANSWERS`` is JAX 0.10.2's record, so CI (no JAX) checks plax against it.
"""
import importlib.util

import pytest

from sharding_child import PRELUDE, run_child

SCRIPT = PRELUDE + r'''
import warnings
NamedSharding, AxisType = sharding.NamedSharding, sharding.AxisType
mesh = jax.make_mesh((2, 4), ("X", "Y"))
auto = jax.make_mesh((2, 4), ("X", "Y"), axis_types=(AxisType.Auto,) * 2)
a = np.arange(64, dtype=np.float32).reshape(8, 8)
out, plax_only = {}, {}


def placed(r):  # each dimension's mesh axes as the result's sharding places it
    s = r.sharding
    if not isinstance(s, NamedSharding):
        return "single device"
    parts = list(s.spec)[:r.ndim] + [None] * (r.ndim - len(s.spec))
    return [list(p) if isinstance(p, tuple) else p for p in parts]


def record(name, f, expected=None, where=True):
    # the results' types, placements (where=True) and values against NumPy float64, or the
    # error's type and message
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = f()
        rs = list(r) if isinstance(r, tuple) else [r]
        exp = expected if isinstance(expected, list) else [expected] * len(rs)
        out[name] = ["ok", [ty(v) for v in rs], [placed(v) for v in rs] if where else None,
                     [e is None or bool(np.allclose(np.asarray(v, np.float64), e))
                      for v, e in zip(rs, exp)],
                     [str(w.message).split("\n")[0] for w in caught]]
    except Exception as e:  # noqa: BLE001 -- the error is the answer
        out[name] = [type(e).__name__, str(e)]


double = lambda u: u * 2
a2 = a.astype(np.float64) * 2
# with no mesh set: a PartitionSpec is JAX's RuntimeError, a NamedSharding places the argument
record("no_mesh_in_spec", lambda: jax.jit(double, in_shardings=P("X"))(a))
record("no_mesh_out_spec", lambda: jax.jit(double, out_shardings=P("X"))(a))
record("no_mesh_in_named", lambda: jax.jit(
    double, in_shardings=NamedSharding(mesh, P("X", None)))(a), a2)
record("no_mesh_out_named", lambda: jax.jit(
    double, out_shardings=NamedSharding(mesh, P("X")))(a), a2)
record("no_mesh_in_named_other_split", lambda: jax.jit(
    double, in_shardings=NamedSharding(mesh, P("X")))(
    jax.device_put(a, NamedSharding(mesh, P("Y")))))
record("no_mesh_out_auto", lambda: jax.jit(
    double, out_shardings=NamedSharding(auto, P("X")))(a), a2)
with jax.set_mesh(mesh):
    x = jax.device_put(a, P("X", "Y"))
    xr = jax.device_put(a, P("X", None))
    # in_shardings: checked against the arguments' types
    record("in_agrees", lambda: jax.jit(double, in_shardings=P("X", "Y"))(x), a2)
    record("in_agrees_named", lambda: jax.jit(
        double, in_shardings=NamedSharding(mesh, P("X", "Y")))(x), a2)
    record("in_disagrees", lambda: jax.jit(double, in_shardings=P("X", None))(x))
    record("in_second_disagrees", lambda: jax.jit(
        lambda u, v: u + v, in_shardings=(P("X", "Y"), P("X", "Y")))(x, xr))
    record("in_per_argument", lambda: jax.jit(
        lambda u, v: u + v, in_shardings=(None, P("X")))(x, xr), a2)
    record("in_committed_device", lambda: jax.jit(double, in_shardings=P("X"))(
        jax.device_put(a, jax.devices()[1])))
    record("in_host_value", lambda: jax.jit(double, in_shardings=P("X", None))(a), a2,
           where=False)  # (JAX places it replicated on the mesh; plax on one device)
    record("in_kwargs", lambda: jax.jit(lambda u, v: u + v, in_shardings=(P("X", "Y"),) * 2)(
        x, v=x))
    record("in_wrong_length", lambda: jax.jit(double, in_shardings=(P("X"), P()))(a))
    record("in_not_a_sharding", lambda: jax.jit(double, in_shardings=3)(a))
    record("in_unknown_axis", lambda: jax.jit(double, in_shardings=P("Z"))(a))
    # static arguments take no entry; a pytree argument an entry per leaf
    scaled = lambda n, u: u * n
    record("in_static_skipped", lambda: jax.jit(
        scaled, static_argnums=0, in_shardings=(P("X", "Y"),))(2, x), a2)
    record("in_static_counted", lambda: jax.jit(
        scaled, static_argnums=0, in_shardings=(None, P("X", "Y")))(2, x))
    record("in_pytree_leaf_disagrees", lambda: jax.jit(
        lambda d: d["a"] + d["b"], in_shardings=({"a": P("X", "Y"), "b": P("X")},))(
        {"a": x, "b": x}))
    # out_shardings: the outputs placed as they say
    record("out_other_split", lambda: jax.jit(double, out_shardings=P("Y", "X"))(x), a2)
    record("out_replicated", lambda: jax.jit(double, out_shardings=P())(x), a2)
    record("out_named", lambda: jax.jit(
        double, out_shardings=NamedSharding(mesh, P(None, "Y")))(x), a2)
    record("out_same", lambda: jax.jit(double, out_shardings=P("X", "Y"))(x), a2)
    record("out_per_output", lambda: jax.jit(
        lambda u: (u, u + 1), out_shardings=(P("Y"), P()))(x), [a, a + 1.0])
    record("out_prefix", lambda: jax.jit(
        lambda u: (u, u + 1), out_shardings=P("Y"))(x), [a, a + 1.0])
    record("out_none_entry", lambda: jax.jit(
        lambda u: (u, u), out_shardings=(None, P("Y")))(x), a)
    record("out_wrong_length", lambda: jax.jit(
        lambda u: (u, u + 1), out_shardings=(P("Y"),))(x)[0][:0])
    record("out_rank", lambda: jax.jit(double, out_shardings=P("X", "Y", None))(x))
    record("out_unknown_axis", lambda: jax.jit(double, out_shardings=P("Z"))(a))
    record("out_auto_mesh", lambda: jax.jit(
        double, out_shardings=NamedSharding(auto, P("X")))(x), a2)
    record("out_lowered", lambda: jax.jit(double, out_shardings=P("Y")).lower(x).compile()(x),
           a2)
    # under a trace both are inert: the types are the body's
    record("nested_out", lambda: jax.jit(
        lambda u: jax.jit(double, out_shardings=P("Y", "X"))(u) + 1)(x), a2 + 1)
    record("nested_in_disagrees", lambda: jax.jit(
        lambda u: jax.jit(double, in_shardings=P("Y", "X"))(u) + 1)(x), a2 + 1)
    out["jaxpr_out_type"] = re.findall(r"b:(f32\[[^\]]*\]) = jit", str(jax.make_jaxpr(
        jax.jit(double, out_shardings=P("Y", "X")))(x)))

    # donation, decided on each device's buffer of the placed outputs
    def donated(name, f, **kw):
        z = jax.device_put(a, P("X", "Y"))
        record(name, lambda: jax.jit(f, donate_argnums=0, **kw)(z), where=False)
        out[name].append(z.is_deleted())

    donated("donate_same_split", double, out_shardings=P("X", "Y"))
    donated("donate_other_split_same_size", double, out_shardings=P("Y", "X"))
    donated("donate_replicated_out", double, out_shardings=P())
    donated("donate_half_split_out", double, in_shardings=P("X", "Y"),
            out_shardings=P(None, "Y"))
    donated("donate_transposed", lambda u: u.T)
    donated("donate_transposed_back", lambda u: u.T, out_shardings=P("X", "Y"))
    donated("donate_cast_same_bytes", lambda u: u.astype(jnp.int32))
    donated("donate_cast_fewer_bytes", lambda u: u.astype(jnp.float16))
    donated("donate_reshaped", lambda u: u.reshape(64))
    if sys.argv[1] == "plax":
        from plax.array import gather_count
        before = gather_count()
        r = jax.jit(double, out_shardings=P("Y", "X"))(x)
        r2 = jax.jit(double, out_shardings=P())(x)
        plax_only["gathers"] = gather_count() - before
        plax_only["pieces"] = [len(r._pieces), len(r2._pieces)]
        plax_only["shard_shapes"] = [list(s.data.shape) for s in r.addressable_shards[:2]]
for name, f in (("single_reshaped", lambda u: u.reshape(2, 4)),
                ("single_cast_same_bytes", lambda u: u.astype(jnp.int32)),
                ("single_cast_fewer_bytes", lambda u: u.astype(jnp.float16)),
                ("single_summed", lambda u: u.sum())):
    z = jnp.ones(8)
    record(name, lambda: jax.jit(f, donate_argnums=0)(z), where=False)
    out[name].append(z.is_deleted())
print(json.dumps({"out": out, "plax_only": plax_only}))
'''

_MESH = "Mesh('X': 2, 'Y': 4, axis_types=(Explicit, Explicit))"
_AUTO = "Mesh('X': 2, 'Y': 4, axis_types=(Auto, Auto))"
_UNUSABLE = "Some donated buffers were not usable: float32[4,2]."


def _named(spec: str, mesh: str = _MESH) -> str:
    return f"NamedSharding(mesh={mesh}, spec={spec}, memory_kind=device)"


def _mismatch(want: str, have: str, arg_type: str) -> list:
    return ["ValueError", "Sharding passed to jit does not match the sharding on the "
            f"respective arg. Got jit sharding: {want},\narg sharding: {have} for arg type: "
            f"{arg_type}"]


def _no_mesh(what: str) -> list:
    return ["RuntimeError", "jit requires a non-empty mesh in context if you are passing "
            f"`PartitionSpec`s to {what}. You can define a context mesh via "
            f"`jax.set_mesh(mesh)`. Alternatively, provide `Sharding`s to {what} and then the "
            "mesh context manager is not required."]


XY = ["X", "Y"]
JAX_ANSWERS = {
    "no_mesh_in_spec": _no_mesh("in_shardings"),
    "no_mesh_out_spec": _no_mesh("out_shardings"),
    "no_mesh_in_named": ["ok", ["[8@X,8]"], [["X", None]], [True], []],
    "no_mesh_out_named": ["ok", ["[8@X,8]"], [["X", None]], [True], []],
    "no_mesh_in_named_other_split": _mismatch(_named("P('X',)"), _named("P('Y',)"),
                                              "float32[8@Y,8]"),
    "no_mesh_out_auto": ["ok", ["[8,8]"], [["X", None]], [True], []],
    "in_agrees": ["ok", ["[8@X,8@Y]"], [XY], [True], []],
    "in_agrees_named": ["ok", ["[8@X,8@Y]"], [XY], [True], []],
    "in_disagrees": _mismatch(_named("P('X', None)"), _named("P('X', 'Y')"),
                              "float32[8@X,8@Y]"),
    "in_second_disagrees": _mismatch(_named("P('X', 'Y')"), _named("P('X', None)"),
                                     "float32[8@X,8]"),
    "in_per_argument": ["ok", ["[8@X,8@Y]"], [XY], [True], []],
    "in_committed_device": _mismatch(
        _named("P('X',)"), "SingleDeviceSharding(device=CpuDevice(id=1), memory_kind=device)",
        "float32[8,8]"),
    "in_host_value": ["ok", ["[8,8]"], None, [True], []],
    "in_kwargs": ["ValueError", "pjit does not support kwargs when in_shardings is specified."],
    "in_wrong_length": [
        "ValueError", "pjit in_shardings specification must be a tree prefix of the positional "
        "arguments tuple. In particular, pjit in_shardings must either be a Sharding, a "
        "PartitionSpec, or a tuple of length equal to the number of positional arguments. But "
        "pjit in_shardings is the wrong length: got a tuple or list of length 2 for an args "
        "tuple of length 1."],
    "in_not_a_sharding": ["TypeError", "in_shardings leaf specifications are expected to be "
                          "PartitionSpec instances or None, but got 3"],
    "in_unknown_axis": ["ValueError", "Resource axis: Z of P('Z',) is not found in mesh: "
                        "('X', 'Y')."],
    "in_static_skipped": ["ok", ["[8@X,8@Y]"], [XY], [True], []],
    "in_static_counted": [
        "ValueError", "pjit in_shardings specification must be a tree prefix of the positional "
        "arguments tuple. In particular, pjit in_shardings must either be a Sharding, a "
        "PartitionSpec, or a tuple of length equal to the number of positional arguments. But "
        "pjit in_shardings is the wrong length: got a tuple or list of length 2 for an args "
        "tuple of length 1."],
    "in_pytree_leaf_disagrees": _mismatch(_named("P('X',)"), _named("P('X', 'Y')"),
                                          "float32[8@X,8@Y]"),
    "out_other_split": ["ok", ["[8@Y,8@X]"], [["Y", "X"]], [True], []],
    "out_replicated": ["ok", ["[8,8]"], [[None, None]], [True], []],
    "out_named": ["ok", ["[8,8@Y]"], [[None, "Y"]], [True], []],
    "out_same": ["ok", ["[8@X,8@Y]"], [XY], [True], []],
    "out_per_output": ["ok", ["[8@Y,8]", "[8,8]"], [["Y", None], [None, None]], [True, True],
                       []],
    "out_prefix": ["ok", ["[8@Y,8]", "[8@Y,8]"], [["Y", None], ["Y", None]], [True, True], []],
    "out_none_entry": ["ok", ["[8@X,8@Y]", "[8@Y,8]"], [XY, ["Y", None]], [True, True], []],
    "out_wrong_length": "ValueError",
    "out_rank": [
        "ValueError", "One of pjit outputs with pytree key path result is incompatible with its "
        f"sharding annotation {_named(chr(80) + repr(('X', 'Y', None)))}: Sharding "
        f"{_named(chr(80) + repr(('X', 'Y', None)))} is only valid for values of rank at least "
        "3, but was applied to a value of rank 2."],
    "out_unknown_axis": ["ValueError", "Resource axis: Z of P('Z',) is not found in mesh: "
                         "('X', 'Y')."],
    "out_auto_mesh": ["ok", ["[8,8]"], [["X", None]], [True], []],
    "out_lowered": ["ok", ["[8@Y,8]"], [["Y", None]], [True], []],
    "nested_out": ["ok", ["[8@X,8@Y]"], [XY], [True], []],
    "nested_in_disagrees": ["ok", ["[8@X,8@Y]"], [XY], [True], []],
    "jaxpr_out_type": ["f32[8@X,8@Y]"],
    "donate_same_split": ["ok", ["[8@X,8@Y]"], None, [True], [], True],
    "donate_other_split_same_size": ["ok", ["[8@Y,8@X]"], None, [True], [], True],
    "donate_replicated_out": ["ok", ["[8,8]"], None, [True], [_UNUSABLE], False],
    "donate_half_split_out": ["ok", ["[8,8@Y]"], None, [True], [_UNUSABLE], False],
    "donate_transposed": ["ok", ["[8@Y,8@X]"], None, [True], [], True],
    "donate_transposed_back": ["ok", ["[8@X,8@Y]"], None, [True], [], True],
    "donate_cast_same_bytes": ["ok", ["[8@X,8@Y]"], None, [True], [], True],
    "donate_cast_fewer_bytes": ["ok", ["[8@X,8@Y]"], None, [True], [], False],
    "donate_reshaped": ["ok", ["[64@(X,Y)]"], None, [True], [], True],
    "single_reshaped": ["ok", ["[2,4]"], None, [True], [], True],
    "single_cast_same_bytes": ["ok", ["[8]"], None, [True], [], True],
    "single_cast_fewer_bytes": ["ok", ["[8]"], None, [True], [], False],
    "single_summed": ["ok", ["[]"], None, [True],
                      ["Some donated buffers were not usable: float32[8]."], False],
}


def _comparable(out: dict) -> dict:
    # a tree-prefix error's text is each library's own; its type is compared
    return {k: (v[0] if k == "out_wrong_length" else v) for k, v in out.items()}


@pytest.fixture(scope="module")
def plax_run():
    return run_child(SCRIPT, "plax")


def test_plax_matches_the_recorded_jax_answers(plax_run):
    got = _comparable(plax_run["out"])
    assert {k: got.get(k) for k in JAX_ANSWERS if got.get(k) != JAX_ANSWERS[k]} == {}
    assert set(got) == set(JAX_ANSWERS)


def test_outputs_are_placed_without_a_gather(plax_run):
    # reshard to P('Y', 'X') and to P(): blocks move between the devices, nothing is
    # gathered onto one device; every device holds its block of the placed output
    assert plax_run["plax_only"] == {"gathers": 0, "pieces": [8, 8],
                                      "shard_shapes": [[2, 4], [2, 4]]}


def test_recorded_answers_are_jax_s():
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed (its answers are recorded in JAX_ANSWERS)")
    assert _comparable(run_child(SCRIPT, "jax")["out"]) == JAX_ANSWERS
