"""Refs from outside a sharded ``jit``, ``debug.callback(partitioned=True)`` and callbacks on
partial sums, beside JAX 0.10.2 (issue 25, items 2 and 3).

* A ref passed into or closed over by a ``jit`` of arguments sharded over an 8-device mesh
  runs per device: nothing is gathered onto one device, and the ref's final value (and
  type, ``Ref{float32[8@X,4@Y]}`` for a sharded one) is JAX's. Slicing a sharded ref along
  a split dimension raises JAX's ValueError.
* ``jax.debug.callback(fn, x, partitioned=True)`` calls ``fn`` on each device with that
  device's blocks (each block once per device holding it), under ``jit``, ``grad``, ``vmap``
  (one call per batch member and device), inside a loop (per iteration) and ``shard_map``;
  eagerly it is one call on the whole value; ``ordered=True`` over several devices is JAX's
  ValueError; the two-call form ``debug.callback(partitioned=True)(fn, x)`` works.
* A callback inside ``shard_map`` on an unreduced argument sees each device's part.

One script runs under plax and, where JAX is installed, under JAX; ``JAX_ANSWERS`` is JAX
0.10.2's record, so CI (no JAX) checks plax against it. The calls a callback receives are
recorded as ``[shape, first element, sum]``, sorted (JAX's device threads call in any order).
"""
import importlib.util

import pytest

from sharding_child import PRELUDE, run_child

SCRIPT = PRELUDE + r'''
if sys.argv[1] == "plax":
    from plax.array import gather_count
else:
    gather_count = lambda: 0
a = np.arange(32, dtype=np.float32).reshape(8, 4)
out, gathers = {}, {}
calls = []


def cb(v):
    v = np.asarray(v)
    calls.append([list(v.shape), float(v.ravel()[0]), float(v.sum())])


def error(fn):
    try:
        fn()
        return None
    except Exception as e:  # noqa: BLE001 -- the error is the answer
        return [type(e).__name__, str(e).split(": [<")[0].split(": [Ordered")[0]]


def record(name, fn):
    # what fn returns (JSON-able), the callback's calls (sorted), and for plax the gathers
    # onto one device it made
    before = gather_count()
    got = fn()
    jax.effects_barrier()
    out[name] = [got, sorted(calls)]
    calls.clear()
    gathers[name] = gather_count() - before


with jax.set_mesh(jax.make_mesh((2, 4), ("X", "Y"))):
    x = jax.device_put(a, P("X", "Y"))

    # ---- refs from outside
    passed = jax.new_ref(jnp.zeros((), jnp.float32))

    def passed_in(u, ref):
        ref[...] += u.sum()
        return u + 1

    def twice():
        jax.jit(passed_in)(x, passed)
        r = jax.jit(passed_in)(x, passed)
        return [ty(r), float(np.asarray(passed[...])), str(jax.typeof(passed))]
    record("ref_passed", twice)

    split = jax.new_ref(x)

    def split_in(u, ref):
        ref[...] = ref[...] * 2 + u
        return ref[...].sum()

    def run_split():
        r = jax.jit(split_in)(x, split)
        return [str(jax.typeof(r)), float(np.asarray(r)), str(jax.typeof(split)),
                bool(np.array_equal(np.asarray(split[...]), 3 * a)), ty(split[...])]
    record("ref_split_passed", run_split)

    closed = jax.new_ref(x)

    def add_into_closed(u):
        closed[...] += u
        return u * 2

    def run_closed():
        r = jax.jit(add_into_closed)(x)
        return [ty(r), bool(np.array_equal(np.asarray(closed[...]), 2 * a)),
                str(jax.typeof(closed))]
    record("ref_split_closed", run_closed)

    outer = jax.new_ref(jnp.zeros((), jnp.float32))

    def loop_ref(u):
        def body(i, c):
            outer[...] += c.sum()
            return c * 2
        return lax.fori_loop(0, 2, body, u)
    record("ref_closed_in_loop",
           lambda: [ty(jax.jit(loop_ref)(x)), float(np.asarray(outer[...]))])
    three = jax.new_ref(jnp.full((), 3.0, jnp.float32))
    record("ref_read_only", lambda: [
        ty(r := jax.jit(lambda u: u * three[...])(x)),
        bool(np.array_equal(np.asarray(r), 3 * a))])
    sliced = jax.new_ref(x)

    def slice_split(u):
        sliced[0:2] = jnp.zeros((2, 4))
        return u
    out["ref_slice_split_dim"] = error(lambda: jax.jit(slice_split)(x))
    out["ref_int_index_split"] = error(lambda: jax.jit(lambda u: sliced[0])(x))

    # ---- debug.callback(partitioned=True)
    def per_shard(u):
        jax.debug.callback(cb, u, partitioned=True)
        return u + 1
    record("part_jit", lambda: ty(jax.jit(per_shard)(x)))
    record("part_jit_rows", lambda: ty(jax.jit(
        lambda u: (jax.debug.callback(cb, u.sum(axis=0), partitioned=True), u)[1])(x)))
    record("part_jit_scalar", lambda: ty(jax.jit(
        lambda u: (jax.debug.callback(cb, u.sum(), partitioned=True), u)[1])(x)))
    record("part_two_call_form", lambda: ty(jax.jit(
        lambda u: (jax.debug.callback(partitioned=True)(cb, u), u)[1])(x)))
    record("part_eager", lambda: ty(per_shard(x)))
    xr = jax.device_put(a, P(None, "Y"))
    record("part_vmap", lambda: ty(jax.jit(jax.vmap(per_shard))(xr)))
    record("part_grad", lambda: ty(jax.jit(jax.grad(
        lambda u: (jax.debug.callback(cb, u, partitioned=True), jnp.sum(u * u))[1]))(x)))

    def in_loop(u):
        def body(i, c):
            jax.debug.callback(cb, c, partitioned=True)
            return c * 2
        return lax.fori_loop(0, 2, body, u)
    record("part_loop", lambda: ty(jax.jit(in_loop)(x)))
    record("part_shard_map", lambda: ty(jax.jit(jax.shard_map(
        lambda u: (jax.debug.callback(cb, u, partitioned=True), u)[1],
        in_specs=P("X", "Y"), out_specs=P("X", "Y")))(x)))
    out["part_ordered"] = error(lambda: (jax.jit(lambda u: (jax.debug.callback(
        cb, u, partitioned=True, ordered=True), u)[1])(x), jax.effects_barrier()))
    out["print_ordered"] = error(lambda: (jax.jit(lambda u: (jax.debug.print(
        "{}", u.sum(), ordered=True), u)[1])(x), jax.effects_barrier()))
    out["not_callable"] = error(lambda: jax.debug.callback(3, x))
    calls.clear()

    # ---- a callback on partial sums, inside shard_map: each device's part
    U = P("X", None, unreduced={"Y"})
    y = jax.device_put(a, U)
    record("unreduced_in_shard_map", lambda: ty(jax.jit(jax.shard_map(
        lambda t: (jax.debug.callback(cb, t), lax.psum(t, "Y"))[1],
        in_specs=U, out_specs=P("X", None)))(y)))
    if sys.argv[1] == "plax":
        # JAX 0.10.2 aborts the process here (XLA: "Some operands have unreduced axes but
        # the operation has no results"); plax raises instead
        out["plax_unreduced_in_jit"] = error(
            lambda: jax.jit(lambda t: (jax.debug.callback(cb, t), t)[1])(y))
print(json.dumps({"out": out, "gathers": gathers}))
'''


def _calls(*rows):
    return sorted([list(r) for r in rows])


def _blocks(scale=1.0):
    # each device's [4, 1] block of a (times scale): first element and sum
    return [[[4, 1], scale * (16 * i + j), scale * (4 * (16 * i + j) + 24)]
            for i in range(2) for j in range(4)]


JAX_ANSWERS = {
    "ref_passed": [["[8@X,4@Y]", 992.0, "Ref{float32[]}"], []],
    "ref_split_passed": [["float32[]", 1488.0, "Ref{float32[8@X,4@Y]}", True, "[8@X,4@Y]"],
                         []],
    "ref_split_closed": [["[8@X,4@Y]", True, "Ref{float32[8@X,4@Y]}"], []],
    "ref_closed_in_loop": [["[8@X,4@Y]", 1488.0], []],
    "ref_read_only": [["[8@X,4@Y]", True], []],
    "ref_slice_split_dim": [
        "ValueError", "sharded ref (array reference) can only be sliced along unsharded axes, "
        "but ref of shape (8, 4) was sliced on axis 0, which is sharded like X"],
    "ref_int_index_split": [
        "TypeError", "sharded ref (array reference) can only be indexed by slices, not integers"],
    "part_jit": ["[8@X,4@Y]", _calls(*_blocks())],
    "part_jit_rows": ["[8@X,4@Y]", _calls(*[[[1], 112.0 + 8 * j, 112.0 + 8 * j]
                                            for j in range(4) for _ in range(2)])],
    "part_jit_scalar": ["[8@X,4@Y]", [[[], 496.0, 496.0]] * 8],
    "part_two_call_form": ["[8@X,4@Y]", _calls(*_blocks())],
    "part_eager": ["[8@X,4@Y]", [[[8, 4], 0.0, 496.0]]],
    "part_vmap": ["[8,4@Y]", _calls(*[[[1], float(k), float(k)]
                                      for k in range(32) for _ in range(2)])],
    "part_grad": ["[8@X,4@Y]", _calls(*_blocks())],
    "part_loop": ["[8@X,4@Y]", _calls(*_blocks(), *_blocks(2.0))],
    "part_shard_map": ["[8@X,4@Y]", _calls(*_blocks())],
    "part_ordered": ["ValueError", "The following ordered effects are not supported for more "
                     "than 1 device"],
    "print_ordered": ["ValueError", "The following ordered effects are not supported for more "
                      "than 1 device"],
    "not_callable": ["TypeError", "first argument to jax.debug.callback must be callable, but "
                     "got an object of type <class 'int'>"],
    # the devices after the first along Y hold zeros; the first holds the rows of its X block
    "unreduced_in_shard_map": ["[8@X,4]", [[[4, 4], 0.0, 0.0]] * 6 + [
        [[4, 4], 0.0, 120.0], [[4, 4], 16.0, 376.0]]],
}


@pytest.fixture(scope="module")
def plax_run():
    return run_child(SCRIPT, "plax")


def test_plax_matches_the_recorded_jax_answers(plax_run):
    got = {k: v for k, v in plax_run["out"].items() if not k.startswith("plax_")}
    assert {k: got.get(k) for k in JAX_ANSWERS if got.get(k) != JAX_ANSWERS[k]} == {}
    assert set(got) == set(JAX_ANSWERS)


def test_refs_and_partitioned_callbacks_gather_nothing(plax_run):
    # every ref and partitioned-callback program above ran on the devices' own blocks; only
    # the eager call (outside jit: one call on the whole value, as JAX's) gathers its operand
    gathers = plax_run["gathers"]
    assert gathers.pop("part_eager") == 1
    assert gathers == {k: 0 for k in gathers} and len(gathers) == 14


def test_a_callback_on_partial_sums_in_jit_is_a_clear_error(plax_run):
    # JAX 0.10.2 aborts the process (an XLA check); plax says what to do instead
    kind, text = plax_run["out"]["plax_unreduced_in_jit"]
    assert kind == "NotImplementedError"
    assert "float32[8@X,4]{U:Y}" in text and "jax.reshard" in text and "shard_map" in text


def test_recorded_answers_are_jax_s():
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed (its answers are recorded in JAX_ANSWERS)")
    assert run_child(SCRIPT, "jax")["out"] == JAX_ANSWERS
