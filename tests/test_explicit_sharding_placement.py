"""Where explicit sharding places values, beside JAX 0.10.2 (issue 25, the placement items).

* ``lax.reshape``/``jnp.reshape``/``x.reshape`` given ``out_sharding=`` record it in the
  equation's ``sharding=`` parameter (a NamedSharding over the abstract mesh, the spec as
  given), printed as JAX prints it; ``grad`` and ``vmap`` record theirs as JAX's rules do; a
  split that does not divide a dimension is JAX's ``ValueError``.
* Under a set mesh, an argument committed to one device other than the mesh's devices is
  refused by ``jit`` (and by an eager operation, which JAX runs as a ``jit``) with JAX's
  ``ValueError``; uncommitted and host arguments, arrays on the mesh and a one-device mesh's
  own device are accepted, and results lie on the mesh.
* An Array made eagerly under a set mesh (``jnp.zeros``, ``arange``, ``asarray`` of a host
  value, arithmetic on host values, ``random.normal``) is placed on it as JAX places it:
  ``NamedSharding(mesh, P(None, ...))`` for results of operations, ``P()`` for
  ``asarray``/``array`` of host values; ``asarray`` of an Array and ``device_put`` of a host
  value are not placed. Under a mesh of Auto axes every such value is placed ``P()``.
* JAX types a host value or an uncommitted array ``P()`` and one placed on the mesh
  ``P(None, ...)``: a one-operand elementwise or cumulative operation (``jnp.sin``,
  ``negative``, ``cumsum``) keeps its operand's, ``*_like`` of an array placed ``P()`` is
  ``P()``, and ``jnp.array`` of an Array copies it (``P(None, ...)`` for one placed ``P()``).
  Typed keys (``random.key``, ``split``, ``fold_in``) are placed as their data, less the key
  words' dimension (``P()`` for one key), and typed so (``jax.typeof``); over a mesh of Auto
  axes, where data is placed ``P()``, ``split`` keys are ``P(None, ...)``.
* The rules that keep a host value's ``P()`` (reductions, ``reshape``, ``sort``,
  ``dot_general``, one-operand elementwise and cumulative ones) keep it eagerly and through a
  ``jit`` program of host or uncommitted arguments (``jit(jnp.sin)(np_array)`` is ``P()``);
  ``jax.numpy`` functions that convert host operands first (``transpose``, ``argmax``,
  ``pad``, ``einsum``, ``tensordot``) give ``P(None, ...)`` eagerly, ``zeros_like`` of a host
  scalar is placed ``P()``, and ``jnp.reshape`` of a NumPy array is NumPy's (not placed).

The script runs under plax and, where JAX is installed, under JAX; ``JAX_ANSWERS`` is JAX
0.10.2's record, so CI (no JAX) checks plax against it.
"""
import importlib.util

import pytest

from sharding_child import PRELUDE, run_child

SCRIPT = PRELUDE + r'''
out = {}


def err(f):  # "ok", or the error's type and first line
    try:
        f()
        return "ok"
    except Exception as e:  # noqa: BLE001
        return [type(e).__name__, str(e).split("\n")[0].split(" This error occurs")[0]]


def placed(r):  # how a result is placed: [sharding kind, spec or device ids, committed]
    s = r.sharding
    where = str(s.spec) if hasattr(s, "spec") else sorted(d.id for d in s.device_set)
    return [type(s).__name__, where, bool(r.committed)]


def reshape_shardings(f, *args):  # the sharding= parameter of each reshape staged by f
    return [str(e.params.get("sharding")) for e in jax.make_jaxpr(f)(*args).jaxpr.eqns
            if e.primitive.name == "reshape"]


a = np.arange(32.0, dtype=np.float32).reshape(8, 4)
d3 = jax.devices()[3]
on_d3 = jax.device_put(np.ones(8, np.float32), d3)
outside, outside2 = jnp.ones(8), jnp.ones((2, 4))
f = jax.jit(lambda v: v * 2)
with jax.set_mesh(jax.make_mesh((2, 4), ("X", "Y"))):
    x = jax.device_put(a, P("X", "Y"))
    merge = lambda u: lax.reshape(u, (32,), out_sharding=P(("X", "Y")))
    out["reshape_params"] = {
        "lax": reshape_shardings(merge, x),
        "method": reshape_shardings(lambda u: u.reshape((4, 8), out_sharding=P("X", None)), x),
        "jnp": reshape_shardings(lambda u: jnp.reshape(u, (4, 8), out_sharding=P("X")), x),
        "same_shape": reshape_shardings(lambda u: lax.reshape(u, (8, 4), out_sharding=P("X")), x),
        "derived": reshape_shardings(lambda u: u.reshape(2, 4, 4), x),
        "grad": reshape_shardings(jax.grad(lambda u: merge(u).sum()), x),
        "vmap": reshape_shardings(jax.vmap(lambda u: lax.reshape(u, (4, 1), out_sharding=P("Y"))), x),
    }
    out["reshape_text"] = str(jax.make_jaxpr(
        lambda u: lax.reshape(u, (4, 8), out_sharding=P("X", None)))(x))
    r = jax.jit(merge)(x)
    out["reshape_results"] = [ty(merge(x)), ty(r), bool(np.array_equal(np.asarray(r), a.reshape(32)))]
    out["reshape_errors"] = [
        err(lambda: lax.reshape(x, (2, 16), out_sharding=P("Y"))),
        err(lambda: jax.jit(jax.vmap(lambda u: lax.reshape(u, (2, 2), out_sharding=P("Y"))))(x))]
    out["jit_devices"] = {
        "committed": err(lambda: f(on_d3)),
        "in_a_dict": err(lambda: jax.jit(lambda d: d["k"] * 2)({"k": on_d3})),
        "second_argument": err(lambda: jax.jit(lambda u, v: u * v)(jnp.ones(8), on_d3)),
        "beside_a_split_one": err(lambda: jax.jit(lambda u, v: u + v)(on_d3, jax.device_put(np.ones(8, np.float32), P("X")))),
        "uncommitted": placed(f(outside)),
        "host": placed(f(np.ones(8, np.float32))),
        "on_the_mesh": placed(f(jax.device_put(np.ones(8, np.float32), P("X")))),
        "closed_over": placed(jax.jit(lambda: on_d3 * 2)()),
        "no_argument": placed(jax.jit(lambda: jnp.ones(8))()),
    }
    out["eager_devices"] = [err(lambda: jnp.sin(on_d3)), err(lambda: on_d3 * 2)]
    key = jax.random.PRNGKey(0)
    z = jnp.zeros((8, 4))
    made = {
        "zeros": z, "arange": jnp.arange(8), "full": jnp.full((8,), 2.0),
        "eye": jnp.eye(4), "linspace": jnp.linspace(0, 1, 8),
        "asarray_numpy": jnp.asarray(np.ones(8, np.float32)), "array_list": jnp.array([1.0, 2.0]),
        "array_scalar": jnp.array(3), "asarray_uncommitted": jnp.asarray(outside),
        "uncommitted_plus_one": outside + 1, "zeros_plus_one": z + 1, "sum": z.sum(),
        "index": jnp.arange(8)[0], "where": jnp.where(np.ones(8) > 0, 1.0, 2.0),
        "prng_key": key, "normal": jax.random.normal(key, (8,)),
        "device_put_host": jax.device_put(np.ones(8)), "split_plus_replicated": x + z,
    }
    out["eager_placed"] = {k: placed(v) for k, v in made.items()}
    n2, r0, k = np.ones((8, 4), np.float32), jnp.asarray(np.ones((8, 4), np.float32)), jax.random.key(0)
    kept = {  # one-operand operations keep a host value's P(); *_like, jnp.array as JAX's
        "sin_numpy": jnp.sin(n2), "neg_numpy": jnp.negative(n2),
        "sin_int_numpy": jnp.sin(np.ones(8, np.int32)), "cumsum_numpy": jnp.cumsum(n2[0]),
        "sin_uncommitted": jnp.sin(outside), "sin_placed": jnp.sin(r0), "sin_sin": jnp.sin(jnp.sin(n2)),
        "add_numpy": jnp.add(n2, n2), "zeros_like_asarray": jnp.zeros_like(r0),
        "ones_like_zeros": jnp.ones_like(z), "full_like_numpy": jnp.full_like(n2, 2.0),
        "array_of_asarray": jnp.array(r0), "array_of_uncommitted": jnp.array(outside),
        "array_no_copy": jnp.array(r0, copy=False), "array_of_split": jnp.array(x),
        "key": k, "split": jax.random.split(k), "split_2d": jax.random.split(k, (2, 3)),
        "fold_in": jax.random.fold_in(k, 1), "split_index": jax.random.split(k)[0],
        "key_data": jax.random.key_data(k),
    }
    out["eager_kept"] = {name: placed(v) for name, v in kept.items()}
    out["eager_kept_checks"] = [jnp.array(r0) is r0, jnp.asarray(r0) is r0,
                                bool(np.allclose(np.asarray(jnp.sin(n2)), np.sin(n2), rtol=1e-6)),
                                str(jax.typeof(k)), str(jax.typeof(jax.random.split(k, 8))),
                                str(jax.typeof(k).sharding.spec),
                                str(jax.typeof(jax.random.split(k, 8)).sharding.spec),
                                str(jax.typeof(jax.device_put(jax.random.split(k, 8), P("X"))))]
    n1 = np.ones(8, np.float32)
    out["jit_kept"] = {  # a jit call's host arguments are typed P(); rules that keep it
        "sin": placed(jax.jit(jnp.sin)(n2)), "neg": placed(jax.jit(jnp.negative)(n1)),
        "sum_axis": placed(jax.jit(lambda v: v.sum(0))(n2)),
        "transpose": placed(jax.jit(lambda v: v.T)(n2)), "dot": placed(jax.jit(jnp.dot)(n2, n2.T)),
        "cumsum": placed(jax.jit(jnp.cumsum)(n1)), "pad": placed(jax.jit(lambda v: jnp.pad(v, 1))(n1)),
        "sort": placed(jax.jit(jnp.sort)(n1)), "argmax": placed(jax.jit(lambda v: v.argmax(1))(n2)),
        "two_results": [placed(r) for r in jax.jit(lambda v: (jnp.sin(v), v * 2))(n1)],
        "nested_jit": placed(jax.jit(lambda v: jax.jit(jnp.cos)(v))(n1)),
        "identity": placed(jax.jit(lambda v: v)(n1)),
        "add": placed(jax.jit(lambda v, w: v + w)(n1, n1)),
        "times_literal": placed(jax.jit(lambda v: v * 2)(n1)),
        "expand_dims": placed(jax.jit(lambda v: jnp.expand_dims(v, 0))(n1)),
        "uncommitted": placed(jax.jit(jnp.sin)(outside)),
        "dot_beside_placed": placed(jax.jit(jnp.dot)(n2, z.T)),
        "beside_a_split_argument": [placed(r) for r in jax.jit(
            lambda u, v: (u * 2, jnp.sin(v), v.sum(), v + 1))(x, n1)],
    }
    out["eager_kept_more"] = {name: placed(v) for name, v in {
        "dot": jnp.dot(n2, n2.T), "matmul": jnp.matmul(n2, n2.T), "inner": jnp.inner(n2, n2),
        "sum_axis": jnp.sum(n2, axis=0), "max_axis": jnp.max(n2, axis=1), "sort": jnp.sort(n1),
        "ravel": jnp.ravel(n2), "transpose": jnp.transpose(n2), "argmax": jnp.argmax(n2, axis=1),
        "einsum": jnp.einsum("ij,kj->ik", n2, n2), "einsum_sum": jnp.einsum("ij->j", n2),
        "tensordot": jnp.tensordot(n2, n2.T, 1), "pad": jnp.pad(n1, 1), "mean": jnp.mean(n2, 0),
        "zeros_like_float": jnp.zeros_like(1.0), "ones_like_int": jnp.ones_like(3),
        "full_like_numpy_scalar": jnp.full_like(np.float32(1), 2.0),
        "empty_like_float": jnp.empty_like(1.0)}.items()}
    n3, r1 = np.ones((2, 3, 4), np.float32), jnp.asarray(n1)
    out["eager_one_jit"] = {name: placed(v) for name, v in {  # as JAX's one jit of the function
        "swapaxes": jnp.swapaxes(n2, 0, 1), "lax_transpose": lax.transpose(n2, (1, 0)),
        "rollaxis": jnp.rollaxis(n3, 2), "transpose_uncommitted": jnp.transpose(outside2),
        "moveaxis": jnp.moveaxis(n3, 0, 2), "matrix_transpose": jnp.linalg.matrix_transpose(n2),
        "lax_squeeze": lax.squeeze(n2[:1], (0,)), "squeeze": jnp.squeeze(n2[:1]),
        "astype": jnp.astype(n1, jnp.int32), "astype_same": jnp.astype(n1, jnp.float32),
        "astype_copy": jnp.astype(n1, jnp.float32, copy=True),
        "astype_scalar": jnp.astype(1.5, jnp.int32), "astype_asarray": jnp.astype(r1, jnp.int32),
        "matmul_mv": jnp.matmul(n2, np.ones(4, np.float32)),
        "matmul_vm": jnp.matmul(n1, n2), "matmul_3d": jnp.matmul(n3, n2[:4, :3]),
        "matmul_uncommitted": outside2 @ np.ones(4, np.float32),
        "matmul_placed": jnp.matmul(r0, np.ones(4, np.float32)), "dot_scalar": jnp.dot(n2, 2.0),
        "dot_scalar_left": jnp.dot(np.float32(2), n1), "dot_scalar_placed": jnp.dot(r0, 2.0),
        "zeros_like_shape_rank1": jnp.zeros_like(z, shape=(5,)),
        "ones_like_shape_rank3": jnp.ones_like(z, shape=(2, 3, 4)),
        "full_like_shape_rank0": jnp.full_like(z, 2.0, shape=()),
        "zeros_like_shape_asarray": jnp.zeros_like(r0, shape=(5,)),
        "jit_squeeze": jax.jit(jnp.squeeze)(n2[:1]),
        "jit_matmul_mv": jax.jit(jnp.matmul)(n2, np.ones(4, np.float32))}.items()}
    z5 = jnp.zeros_like(z, shape=(5,))
    out["eager_one_jit_values"] = [
        np.asarray(jnp.matmul(n2, np.arange(4.0, dtype=np.float32))).tolist(),
        np.asarray(jnp.dot(np.arange(3.0), 2.0)).tolist(),
        np.asarray(jnp.astype(n1 * 1.5, jnp.int32)).tolist(),
        np.asarray(jnp.swapaxes(a, 0, 1)).tolist() == a.T.tolist(), placed(z5 + 1), ty(z5)]
    out["reshape_numpy"] = [type(jnp.reshape(n2, (32,))).__name__,
                            type(jax.numpy.reshape(np.float32(1), (1,))).__name__,
                            placed(jnp.reshape(jnp.asarray(n2), (32,))),
                            err(lambda: jnp.reshape(n2, (5, 2)))]
    out["eager_values"] = [bool(np.array_equal(np.asarray(z + 1), np.ones((8, 4)))),
                           bool(np.array_equal(np.asarray(x + z), a)),
                           float(np.asarray(jnp.arange(8.0).sum())), ty(z + 1)]
out["after_the_block"] = [placed(z), placed(z * 2)]
with jax.set_mesh(jax.make_mesh((2, 4), ("X", "Y"), axis_types=(sharding.AxisType.Auto,) * 2)):
    za = jnp.zeros((8, 4))
    out["auto_mesh"] = [placed(za), placed(za + 1), placed(jnp.asarray(np.ones(8))),
                        placed(f(np.ones(8, np.float32))), err(lambda: f(on_d3))]
    out["auto_mesh_kept"] = [placed(jax.random.key(0)), placed(jnp.sin(np.ones(8))),
                             placed(jnp.zeros_like(za)), placed(jnp.array(jnp.asarray(np.ones(8))))]
    ka = jax.random.key(0)
    out["auto_mesh_keys"] = [placed(jax.random.split(ka)), placed(jax.random.split(ka, (2, 3))),
                             placed(jax.random.split(jax.random.PRNGKey(0))),
                             placed(jax.random.fold_in(ka, 1)), placed(jnp.zeros_like(1.0)),
                             placed(jax.jit(jnp.sin)(np.ones(8)))]
with jax.set_mesh(jax.make_mesh((1,), ("X",))):
    out["one_device_mesh"] = [placed(f(jax.device_put(np.ones(8, np.float32), jax.devices()[0]))),
                              err(lambda: f(on_d3)), placed(jnp.zeros(3))]
print(json.dumps(out))
'''

_AM = ("AbstractMesh('X': 2, 'Y': 4, axis_types=(Explicit, Explicit), device_kind=cpu, "
       "num_cores=None, platform=cpu)")


def _recorded(spec: str) -> str:
    return f"NamedSharding(mesh={_AM}, spec={spec})"


def _refused(what: str, shape: str = "float32[8]", mesh_ids: str = "[0, 1, 2, 3, 4, 5, 6, 7]"):
    return ["ValueError", f"Received incompatible devices for jitted computation. Got argument "
            f"{what} with shape {shape} and with device ids [3] on platform CPU and jit's "
            f"context mesh with device ids {mesh_ids} on platform CPU"]


def _undivided(axis: int, shape: str, spec: str):
    return ["ValueError", f"Sharding spec ('Y',) implies that array axis {axis} is partitioned 4 "
            f"times, but does not evenly divide the dimension size 2. Got shape: {shape} and "
            f"sharding {_recorded(spec)}"]


_NAMED = "NamedSharding"
JAX_ANSWERS = {
    "reshape_params": {
        "lax": [_recorded("P(('X', 'Y'),)")], "method": [_recorded("P('X', None)")],
        "jnp": [_recorded("P('X',)")], "same_shape": [_recorded("P('X',)")], "derived": ["None"],
        "grad": [_recorded("P(('X', 'Y'),)"), _recorded("P('X', 'Y')")],
        "vmap": [_recorded("P('X', 'Y')")]},
    "reshape_text": (
        "{ lambda ; a:f32[8@X,4@Y]. let\n    b:f32[4@X,8] = reshape[\n      dimensions=None\n"
        "      new_sizes=(4, 8)\n      sharding=" + _recorded("P('X', None)") + "\n    ] a\n"
        "  in (b,) }"),
    "reshape_results": ["[32@(X,Y)]", "[32@(X,Y)]", True],
    "reshape_errors": [_undivided(0, "(2, 16)", "P('Y', None)"),
                       _undivided(1, "(8, 2, 2)", "P('X', 'Y', None)")],
    "jit_devices": {
        "committed": _refused("v of <lambda>"),
        "in_a_dict": _refused("d['k'] of <lambda>.<locals>.<lambda>"),
        "second_argument": _refused("v of <lambda>.<locals>.<lambda>"),
        "beside_a_split_one": _refused("u of <lambda>.<locals>.<lambda>"),
        "uncommitted": [_NAMED, "P(None,)", True], "host": [_NAMED, "P(None,)", True],
        "on_the_mesh": [_NAMED, "P('X',)", True], "closed_over": [_NAMED, "P(None,)", True],
        "no_argument": [_NAMED, "P(None,)", True]},
    "eager_devices": [_refused("x of sin"), _refused("x of multiply")],
    "eager_placed": {
        "zeros": [_NAMED, "P(None, None)", True], "arange": [_NAMED, "P(None,)", True],
        "full": [_NAMED, "P(None,)", True], "eye": [_NAMED, "P(None, None)", True],
        "linspace": [_NAMED, "P(None,)", True], "asarray_numpy": [_NAMED, "P()", True],
        "array_list": [_NAMED, "P()", True], "array_scalar": [_NAMED, "P()", True],
        "asarray_uncommitted": ["SingleDeviceSharding", [0], False],
        "uncommitted_plus_one": [_NAMED, "P(None,)", True],
        "zeros_plus_one": [_NAMED, "P(None, None)", True], "sum": [_NAMED, "P()", True],
        "index": [_NAMED, "P()", True], "where": [_NAMED, "P(None,)", True],
        "prng_key": [_NAMED, "P(None,)", True], "normal": [_NAMED, "P(None,)", True],
        "device_put_host": ["SingleDeviceSharding", [0], False],
        "split_plus_replicated": [_NAMED, "P('X', 'Y')", True]},
    "eager_kept": {
        "sin_numpy": [_NAMED, "P()", True], "neg_numpy": [_NAMED, "P()", True],
        "sin_int_numpy": [_NAMED, "P()", True], "cumsum_numpy": [_NAMED, "P()", True],
        "sin_uncommitted": [_NAMED, "P()", True], "sin_placed": [_NAMED, "P(None, None)", True],
        "sin_sin": [_NAMED, "P(None, None)", True], "add_numpy": [_NAMED, "P(None, None)", True],
        "zeros_like_asarray": [_NAMED, "P()", True], "ones_like_zeros": [_NAMED, "P(None, None)", True],
        "full_like_numpy": [_NAMED, "P(None, None)", True],
        "array_of_asarray": [_NAMED, "P(None, None)", True], "array_of_uncommitted": [_NAMED, "P()", True],
        "array_no_copy": [_NAMED, "P()", True], "array_of_split": [_NAMED, "P('X', 'Y')", True],
        "key": [_NAMED, "P()", True], "split": [_NAMED, "P(None,)", True],
        "split_2d": [_NAMED, "P(None, None)", True], "fold_in": [_NAMED, "P()", True],
        "split_index": [_NAMED, "P()", True], "key_data": [_NAMED, "P(None,)", True]},
    "jit_kept": {
        **{k: [_NAMED, "P()", True] for k in (
            "sin", "neg", "sum_axis", "transpose", "dot", "cumsum", "pad", "sort", "argmax",
            "nested_jit", "identity", "uncommitted")},
        "two_results": [[_NAMED, "P()", True], [_NAMED, "P(None,)", True]],
        "add": [_NAMED, "P(None,)", True], "times_literal": [_NAMED, "P(None,)", True],
        "expand_dims": [_NAMED, "P(None, None)", True],
        "dot_beside_placed": [_NAMED, "P(None, None)", True],
        "beside_a_split_argument": [[_NAMED, "P('X', 'Y')", True], [_NAMED, "P()", True],
                                    [_NAMED, "P()", True], [_NAMED, "P(None,)", True]]},
    "eager_kept_more": {
        **{k: [_NAMED, "P()", True] for k in (
            "dot", "matmul", "inner", "sum_axis", "max_axis", "sort", "ravel", "zeros_like_float",
            "ones_like_int", "full_like_numpy_scalar", "empty_like_float")},
        "transpose": [_NAMED, "P(None, None)", True], "argmax": [_NAMED, "P(None,)", True],
        "einsum": [_NAMED, "P(None, None)", True], "einsum_sum": [_NAMED, "P(None,)", True],
        "tensordot": [_NAMED, "P(None, None)", True], "pad": [_NAMED, "P(None,)", True],
        "mean": [_NAMED, "P(None,)", True]},
    "eager_one_jit": {
        **{k: [_NAMED, "P()", True] for k in (
            "swapaxes", "lax_transpose", "rollaxis", "transpose_uncommitted", "lax_squeeze",
            "astype_same", "astype_scalar", "matmul_mv", "matmul_vm", "matmul_3d",
            "matmul_uncommitted", "dot_scalar", "dot_scalar_left", "zeros_like_shape_asarray",
            "jit_squeeze", "jit_matmul_mv")},
        **{k: [_NAMED, "P(None, None)", True] for k in (
            "matrix_transpose", "dot_scalar_placed", "zeros_like_shape_rank1",
            "ones_like_shape_rank3", "full_like_shape_rank0")},
        "moveaxis": [_NAMED, "P(None, None, None)", True], "squeeze": [_NAMED, "P(None,)", True],
        "astype": [_NAMED, "P(None,)", True], "astype_copy": [_NAMED, "P(None,)", True],
        "astype_asarray": [_NAMED, "P(None,)", True], "matmul_placed": [_NAMED, "P(None,)", True]},
    "eager_one_jit_values": [[6.0] * 8, [0.0, 2.0, 4.0], [1] * 8, True,
                             [_NAMED, "P(None,)", True], "[5]"],
    "reshape_numpy": ["ndarray", "ndarray", [_NAMED, "P(None,)", True],
                      ["ValueError", "cannot reshape array of size 32 into shape (5,2)"]],
    "eager_kept_checks": [False, True, True, "key<fry>[]", "key<fry>[8]", "P()", "P(None,)",
                          "key<fry>[8@X]"],
    "eager_values": [True, True, 28.0, "[8,4]"],
    "after_the_block": [[_NAMED, "P(None, None)", True], [_NAMED, "P(None, None)", True]],
    "auto_mesh": [[_NAMED, "P()", True]] * 4 + [_refused("v of <lambda>")],
    "auto_mesh_kept": [[_NAMED, "P()", True]] * 4,
    "auto_mesh_keys": [[_NAMED, "P(None,)", True], [_NAMED, "P(None, None)", True]] +
                      [[_NAMED, "P()", True]] * 4,
    "one_device_mesh": [[_NAMED, "P(None,)", True], _refused("v of <lambda>", mesh_ids="[0]"),
                        [_NAMED, "P(None,)", True]],
}


@pytest.mark.parametrize("key", sorted(JAX_ANSWERS))
def test_plax_places_as_jax(plax_run, key):
    assert plax_run[key] == JAX_ANSWERS[key]


@pytest.fixture(scope="module")
def plax_run():
    return run_child(SCRIPT, "plax")


def test_recorded_answers_are_jax_s():
    if importlib.util.find_spec("jax") is None:
        pytest.skip("jax is not installed (its answers are recorded in JAX_ANSWERS)")
    assert run_child(SCRIPT, "jax") == JAX_ANSWERS
