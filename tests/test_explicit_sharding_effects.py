"""``jit`` of explicitly sharded programs with refs or debug callbacks (issue 25, item 2).

* A ref made inside the program (``jax.new_ref``), replicated or split as its type says,
  is discharged: the program runs on every device on its blocks, as JAX's does, with JAX's
  types and values.
* ``jax.debug.print``/``jax.debug.callback`` and ``io_callback`` are called once per
  execution with the whole operands (JAX gathers them onto one device), also inside a loop
  (once per iteration), an ``io_callback``'s result given to every device, while the rest of
  the program runs on every device on its blocks.
* A ref closed over from outside runs per device too: its value enters the program as it is
  laid out, and its final value is written back (JAX's result and the ref's value); also
  when the ref is split and no argument is (none at all, or a host scalar).

The script runs under plax and, where JAX is installed, under JAX; ``JAX_ANSWERS`` is JAX
0.10.2's record, so CI (no JAX) checks plax against it; the plax run also counts gathers
onto one device (:func:`plax.array.gather_count`) and the devices holding the results.
"""
import importlib.util

import pytest

from sharding_child import PRELUDE, run_child

SCRIPT = PRELUDE + r'''
import contextlib, io
if sys.argv[1] == "plax":
    from plax.array import gather_count
    from plax.experimental import io_callback
else:
    from jax.experimental import io_callback
    gather_count = lambda: 0
a = np.arange(32, dtype=np.float32).reshape(8, 4)
A = a.astype(np.float64)
out, spread = {}, {}


def record(name, f, expected):
    # the result's type, whether it equals `expected` (NumPy float64), what was printed;
    # for plax also the gathers onto one device and the devices holding the result
    before = gather_count()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        r = f()
        jax.block_until_ready(r)
        jax.effects_barrier()
    out[name] = [ty(r), bool(np.allclose(np.asarray(r, np.float64), expected)),
                 printed.getvalue().splitlines()]
    spread[name] = [gather_count() - before, len({s.device for s in r.addressable_shards})]


calls = []
with jax.set_mesh(jax.make_mesh((2, 4), ("X", "Y"))):
    x = jax.device_put(a, P("X", "Y"))

    def scalar_ref(u):
        ref = jax.new_ref(jnp.zeros((), u.dtype))
        ref[...] += u.sum()
        return ref[...] * u

    def split_ref(u):
        ref = jax.new_ref(u)
        ref[...] = ref[...] * 2 + 1
        return ref[...]

    def printed(u):
        jax.debug.print("sum {}", u.sum())
        return jnp.sin(u) * 2

    def called(u):
        jax.debug.callback(lambda v: calls.append(["whole", np.asarray(v).tolist()]), u * 2)
        return u + 1

    def called_in_loop(u):
        def body(i, c):
            jax.debug.callback(lambda s: calls.append(["step", float(s)]), c.sum())
            return c * 2
        return lax.fori_loop(0, 3, body, u)

    record("replicated_ref", lambda: jax.jit(scalar_ref)(x), A.sum() * A)
    record("split_ref", lambda: jax.jit(split_ref)(x), A * 2 + 1)
    record("debug_print", lambda: jax.jit(printed)(x), np.sin(A) * 2)
    record("debug_callback", lambda: jax.jit(called)(x), A + 1)
    record("debug_callback_in_loop", lambda: jax.jit(called_in_loop)(x), A * 8)
    def host_double(v):
        calls.append(["io", list(np.shape(v))])
        return (np.asarray(v) * 2).astype(np.float32)

    def via_host(u):
        return io_callback(host_double, jax.ShapeDtypeStruct(u.shape, u.dtype), u) + u

    def io_in_loop(u):
        def body(i, c):
            return io_callback(host_double, jax.ShapeDtypeStruct(c.shape, c.dtype), c) * u
        return lax.fori_loop(0, 2, body, u)

    record("io_callback", lambda: jax.jit(via_host)(x), A * 3)
    record("io_callback_in_loop", lambda: jax.jit(io_in_loop)(x), 4 * A ** 3)
    out["calls"] = calls
    outer = jax.new_ref(jnp.zeros((), jnp.float32))

    def closed_over(u):
        outer[...] += u.sum()
        return u * 2

    record("closed_over_ref", lambda: jax.jit(closed_over)(x), A * 2)
    out["closed_over_ref_value"] = float(np.asarray(outer[...]))
    # a split ref closed over by a jit with no sharded argument (none at all, or a host
    # scalar): the program runs per device all the same, its second call too
    split_outer = jax.new_ref(x)

    def ref_only():
        split_outer[...] = split_outer[...] * 2 + 1
        return split_outer[...].sum(axis=1)

    def ref_and_scalar(c):
        split_outer[...] += c
        return split_outer[...] * c

    step = jax.jit(ref_only)
    record("split_ref_no_argument", step, (A * 2 + 1).sum(axis=1))
    record("split_ref_no_argument_again", step, ((A * 2 + 1) * 2 + 1).sum(axis=1))
    record("split_ref_scalar_argument", lambda: jax.jit(ref_and_scalar)(jnp.float32(2)),
           ((A * 2 + 1) * 2 + 3) * 2)
    out["split_ref_value"] = [ty(split_outer[...]),
                              bool(np.allclose(np.asarray(split_outer[...]), (A * 2 + 1) * 2 + 3))]
print(json.dumps({"out": out, "spread": spread}))
'''

JAX_ANSWERS = {
    "replicated_ref": ["[8@X,4@Y]", True, []],
    "split_ref": ["[8@X,4@Y]", True, []],
    "debug_print": ["[8@X,4@Y]", True, ["sum 496.0"]],
    "debug_callback": ["[8@X,4@Y]", True, []],
    "debug_callback_in_loop": ["[8@X,4@Y]", True, []],
    "io_callback": ["[8@X,4@Y]", True, []],
    "io_callback_in_loop": ["[8@X,4@Y]", True, []],
    "calls": [["whole", [[2.0 * (4 * i + j) for j in range(4)] for i in range(8)]],
              ["step", 496.0], ["step", 992.0], ["step", 1984.0],
              ["io", [8, 4]], ["io", [8, 4]], ["io", [8, 4]]],
    "closed_over_ref": ["[8@X,4@Y]", True, []],
    "closed_over_ref_value": 496.0,
    "split_ref_no_argument": ["[8@X]", True, []],
    "split_ref_no_argument_again": ["[8@X]", True, []],
    "split_ref_scalar_argument": ["[8@X,4@Y]", True, []],
    "split_ref_value": ["[8@X,4@Y]", True],
}


@pytest.fixture(scope="module")
def plax_run():
    return run_child(SCRIPT, "plax")


def test_plax_matches_the_recorded_jax_answers(plax_run):
    assert plax_run["out"] == JAX_ANSWERS


def test_refs_and_debug_callbacks_run_on_every_device(plax_run):
    # nothing gathered onto one device, every device holds its block of the result (a ref
    # from outside included: its value enters the program per device)
    spread = plax_run["spread"]
    assert spread == {
        k: [0, 8] for k in ("replicated_ref", "split_ref", "debug_print", "debug_callback",
                            "debug_callback_in_loop", "io_callback", "io_callback_in_loop",
                            "closed_over_ref", "split_ref_no_argument",
                            "split_ref_no_argument_again", "split_ref_scalar_argument")}


def test_recorded_answers_are_jax_s():
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed (its answers are recorded in JAX_ANSWERS)")
    assert run_child(SCRIPT, "jax")["out"] == JAX_ANSWERS
