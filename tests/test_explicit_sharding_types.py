"""Explicit sharding beside JAX 0.10.2, what the previous round left (issue 25, item 2):
``jit(in_shardings=, out_shardings=)`` recorded on the ``jit`` equation and printed as JAX
prints it, ``eval_shape``/``out_info`` and ``ShapeDtypeStruct`` carrying shardings, host
arguments of ``jit`` under ``set_mesh`` placed replicated on the mesh, ``*_like`` keeping the
operand's sharding, JAX's ``reshape`` sharding rule (and ``out_sharding=``), and ``x[i % 8]``
on a split dimension.

One script runs every case with ``import plax as jax`` (8 CPU devices through
``PLAX_NUM_CPU_DEVICES``) and, where JAX is installed, under JAX (``jax_num_cpu_devices``).
Each answer is a type as ``jax.typeof`` prints it, a repr, a jaxpr's text or an error (its
type and message). JAX's answers are recorded in ``explicit_sharding_types_jax.json`` beside
this file, so CI without JAX checks plax against them; a second test re-records them from JAX
and compares.

Jaxpr texts are compared as printed, line breaks included.
"""
import importlib.util
import json
import pathlib

import pytest

from sharding_child import PRELUDE, run_child

RECORD = pathlib.Path(__file__).with_name("explicit_sharding_types_jax.json")

CASES = PRELUDE + r'''
NamedSharding = sharding.NamedSharding
out = {}


def message(e):  # without JAX's traceback-filtering note
    return str(e).split("\n--------------------")[0].strip()


def case(name, f):
    try:
        out[name] = f()
    except Exception as e:  # noqa: BLE001 -- the error is the answer
        out[name] = ["error", type(e).__name__, message(e)]


def text(closed):  # a jaxpr's text, line breaks included
    return str(closed)


def specified(t):  # a jit equation's shardings parameter as JAX prints it, None when unset
    if t is None or all(repr(s) == "UnspecifiedValue" for s in t):
        return None
    return repr(tuple(t))


def jit_shardings(closed):  # (in_shardings, out_shardings) of each jit equation
    return [[specified(e.params.get("in_shardings")), specified(e.params.get("out_shardings"))]
            for e in closed.jaxpr.eqns if e.primitive.name in ("jit", "pjit")]


mesh = jax.make_mesh((2, 4), ("X", "Y"))
a = np.arange(32.0, dtype=np.float32).reshape(8, 4)
h = np.ones((8, 4), np.float32)
x = jax.device_put(a, NamedSharding(mesh, P("X", "Y")))
XY, X_ = NamedSharding(mesh, P("X", "Y")), NamedSharding(mesh, P("X", None))


def f(u):
    return u * 2


g = jax.jit(f, in_shardings=XY, out_shardings=X_)

# ---- 1. the jit equation's in_shardings= / out_shardings=
case("jit_eqn/named", lambda: text(jax.make_jaxpr(lambda u: g(u) + 1)(x)))
case("jit_eqn/unspecified", lambda: text(jax.make_jaxpr(lambda u: jax.jit(f)(u) + 1)(x)))
g2 = jax.jit(lambda u, v: (u * 2, v + 1), out_shardings=(NamedSharding(mesh, P("X")), None))
case("jit_eqn/partial_out", lambda: text(jax.make_jaxpr(lambda u: g2(u, u))(x)))
case("jit_eqn/host_exact", lambda: str(jax.make_jaxpr(g)(h)))
gs = jax.jit(jnp.sin, in_shardings=XY, out_shardings=XY)
case("jit_eqn/jvp", lambda: jit_shardings(jax.make_jaxpr(
    lambda u, t: jax.jvp(gs, (u,), (t,)))(x, x)))
case("jit_eqn/vmap", lambda: jit_shardings(jax.make_jaxpr(jax.vmap(gs))(
    np.ones((3, 8, 4), np.float32))))
case("jit_eqn/grad", lambda: jit_shardings(jax.make_jaxpr(jax.grad(lambda u: gs(u).sum()))(x)))
case("jit_eqn/spec_no_mesh", lambda: text(jax.make_jaxpr(
    jax.jit(f, in_shardings=P("X", "Y")))(x)))
# the other parameters JAX prints on a jit equation when they are set
f2 = lambda u, v: u * 2  # noqa: E731
case("jit_eqn/donated", lambda: str(jax.make_jaxpr(lambda u: jax.jit(f2, donate_argnums=0)(
    u, u))(np.ones(3, np.float32))))
case("jit_eqn/keep_unused", lambda: str(jax.make_jaxpr(lambda u: jax.jit(f2, keep_unused=True)(
    u, u))(np.ones(3, np.float32))))
case("jit_eqn/inline", lambda: str(jax.make_jaxpr(lambda u: jax.jit(f2, inline=True)(u, u))(
    np.ones(3, np.float32))))


def donations(closed):  # donated_invars of each jit equation, None when nothing is donated
    return [list(e.params["donated_invars"]) if any(e.params.get("donated_invars", ())) else None
            for e in closed.jaxpr.eqns if e.primitive.name in ("jit", "pjit")]


gd = jax.jit(lambda u, v: jnp.sin(u) * v, donate_argnums=0)
case("jit_eqn/donated_jvp", lambda: donations(jax.make_jaxpr(
    lambda u, t: jax.jvp(gd, (u, u), (t, t)))(h, h)))
case("jit_eqn/donated_vmap", lambda: donations(jax.make_jaxpr(jax.vmap(gd))(h, h)))
case("jit_eqn/donated_grad", lambda: donations(jax.make_jaxpr(
    jax.grad(lambda u: gd(u, u).sum()))(h)))
with jax.set_mesh(mesh):
    gp = jax.jit(f, in_shardings=P("X", "Y"), out_shardings=P("X", None))
    case("jit_eqn/set_mesh_specs", lambda: text(jax.make_jaxpr(lambda u: gp(u) + 1)(x)))

# ---- 2. eval_shape, out_info and ShapeDtypeStruct
sds = jax.ShapeDtypeStruct((8, 4), jnp.float32, sharding=NamedSharding(mesh, P("X")))
case("eval_shape/jit_method", lambda: repr(g.eval_shape(x)))
case("eval_shape/api", lambda: repr(jax.eval_shape(g, x)))
case("eval_shape/host", lambda: repr(jax.eval_shape(g, h)))
case("eval_shape/sds_argument", lambda: repr(jax.eval_shape(g, sds)))
case("eval_shape/other_split", lambda: repr(jax.jit(f, out_shardings=NamedSharding(
    mesh, P("Y", "X"))).eval_shape(x)))
case("eval_shape/body_type", lambda: repr(jax.eval_shape(jax.jit(f), x)))
case("eval_shape/summed", lambda: repr(jax.eval_shape(lambda u: u.sum(), x)))
case("eval_shape/no_mesh", lambda: repr(jax.eval_shape(f, jnp.ones(3))))
case("eval_shape/lower_out_info", lambda: repr(g.lower(x).out_info))
with jax.set_mesh(mesh):
    case("eval_shape/set_mesh_spec", lambda: repr(jax.jit(f, out_shardings=P("X")).eval_shape(x)))
    case("eval_shape/set_mesh_host", lambda: repr(jax.eval_shape(f, np.ones(3, np.float32))))
    case("sds/spec_on_mesh", lambda: [repr(jax.ShapeDtypeStruct((8, 4), jnp.float32,
                                                                sharding=P("X"))),
                                      str(jax.typeof(jax.ShapeDtypeStruct(
                                          (8, 4), jnp.float32, sharding=P("X"))))])
case("sds/repr", lambda: [repr(sds), str(sds), str(jax.typeof(sds))])
case("sds/weak", lambda: [repr(jax.ShapeDtypeStruct((8, 4), jnp.float32, weak_type=True,
                                                    sharding=NamedSharding(mesh, P("X")))),
                          str(jax.typeof(jax.ShapeDtypeStruct(
                              (8, 4), jnp.float32, weak_type=True,
                              sharding=NamedSharding(mesh, P("X")))))])
case("sds/unsharded", lambda: [repr(jax.ShapeDtypeStruct((8, 4), jnp.float32)),
                               str(jax.typeof(jax.ShapeDtypeStruct((8, 4), jnp.float32)))])
case("sds/spec_no_mesh", lambda: repr(jax.ShapeDtypeStruct((8, 4), jnp.float32,
                                                           sharding=P("X"))))
case("sds/not_a_sharding", lambda: repr(jax.ShapeDtypeStruct((8, 4), jnp.float32,
                                                             sharding="X")))
case("sds/equality", lambda: [sds == jax.ShapeDtypeStruct((8, 4), jnp.float32),
                              sds == jax.ShapeDtypeStruct((8, 4), jnp.float32,
                                                          sharding=NamedSharding(mesh, P("X")))])

# ---- 3. host arguments of jit under set_mesh
seen = []
with jax.set_mesh(mesh):
    f_jit = jax.jit(f)
    case("host/numpy", lambda: [ty(f_jit(h)), repr(f_jit(h).sharding),
                                bool(np.array_equal(np.asarray(f_jit(h)), 2 * h))])
    case("host/scalar", lambda: [str(jax.typeof(jax.jit(lambda u: u * 2)(3.0))),
                                 repr(jax.jit(lambda u: u * 2)(3.0).sharding)])
    case("host/typed_inside", lambda: (jax.jit(lambda u: seen.append(str(jax.typeof(u))) or u)(h),
                                       seen[-1])[1])
    case("host/uncommitted_array", lambda: repr(f_jit(jnp.ones((8, 4))).sharding))
    case("host/in_shardings_spec", lambda: [ty(jax.jit(f, in_shardings=P("X", "Y"))(h)),
                                            repr(jax.jit(f, in_shardings=P("X", "Y"))(h).sharding)])
    case("host/in_and_out_specs", lambda: ty(jax.jit(f, in_shardings=P("X", "Y"),
                                                     out_shardings=P("X", "Y"))(h)))
    case("host/beside_sharded", lambda: ty(jax.jit(lambda u, v: u + v)(x, h)))

# ---- 4. zeros_like, ones_like, empty_like, full_like
likes = {"zeros_like": jnp.zeros_like, "ones_like": jnp.ones_like,
         "empty_like": jnp.empty_like, "full_like": lambda u, **k: jnp.full_like(u, 3.0, **k)}
for name, like in likes.items():
    case(f"like/{name}/eager", lambda: [ty(like(x)), repr(like(x).sharding)])
    case(f"like/{name}/jaxpr", lambda: text(jax.make_jaxpr(like)(x)))
    with jax.set_mesh(mesh):
        case(f"like/{name}/jit", lambda: [ty(jax.jit(like)(x)), repr(jax.jit(like)(x).sharding)])
case("like/values", lambda: [bool(np.array_equal(np.asarray(jnp.zeros_like(x)), 0 * a)),
                             bool(np.array_equal(np.asarray(jnp.full_like(x, 3.0)), 0 * a + 3))])
case("like/dtype", lambda: text(jax.make_jaxpr(lambda u: jnp.zeros_like(u, dtype=jnp.int32))(x)))
case("like/shape_traced", lambda: text(jax.make_jaxpr(
    lambda u: jnp.zeros_like(u, shape=(8, 4)))(x)))
case("like/shape_eager_same", lambda: ty(jnp.zeros_like(x, shape=(8, 4))))
case("like/shape_eager_other", lambda: ty(jnp.zeros_like(x, shape=(2, 16))))
case("like/array_fill", lambda: text(jax.make_jaxpr(lambda u: jnp.full_like(u, jnp.ones(4)))(x)))
case("like/unsharded", lambda: ty(jnp.zeros_like(jnp.ones((8, 4)))))

# ---- 5. reshape's sharding rule, out_sharding=, and x[i % 8]
xt = jax.device_put(a.reshape(4, 8), NamedSharding(mesh, P(None, "X")))
x3 = jax.device_put(np.arange(64.0, dtype=np.float32).reshape(2, 8, 4),
                    NamedSharding(mesh, P(None, "Y", None)))
with jax.set_mesh(mesh):
    for label, arr, shape in [("merge_major", x, (32,)), ("merge_minor", xt, (32,)),
                              ("merge_minor3", x3, (16, 4)), ("merge_major3", x3, (2, 32)),
                              ("split", x, (2, 4, 4))]:
        case(f"reshape/{label}/eager", lambda: ty(jnp.reshape(arr, shape)))
        case(f"reshape/{label}/jit", lambda: ty(jax.jit(lambda u: jnp.reshape(u, shape))(arr)))
        case(f"reshape/{label}/dimensions", lambda: ty(jax.jit(lambda u: lax.reshape(
            u, shape, dimensions=tuple(reversed(range(u.ndim)))))(arr)))
        spec = P("X", *(None,) * (len(shape) - 1))
        case(f"reshape/{label}/out_sharding", lambda: [
            ty(jnp.reshape(arr, shape, out_sharding=spec)),
            ty(jax.jit(lambda u: jnp.reshape(u, shape, out_sharding=spec))(arr)),
            bool(np.array_equal(np.asarray(jnp.reshape(arr, shape, out_sharding=spec)),
                                np.asarray(arr).reshape(shape)))])
    case("reshape/lax_out_sharding", lambda: [
        ty(lax.reshape(xt, (32,), out_sharding=P("X"))),
        ty(lax.reshape(xt, (8, 4), dimensions=(1, 0), out_sharding=P("X", None))),
        bool(np.array_equal(np.asarray(lax.reshape(xt, (8, 4), dimensions=(1, 0),
                                                   out_sharding=P("X", None))),
                            np.asarray(xt).T))])
    case("reshape/method_out_sharding", lambda: ty(xt.reshape(32, out_sharding=P("X"))))
    i = jnp.int32(11)
    case("index/mod_eager", lambda: ty(x[i % 8]))
    case("index/mod_jit", lambda: ty(jax.jit(lambda u, k: u[k % 8])(x, 11)))
    case("index/mod_jit_cols", lambda: ty(jax.jit(lambda u, k: u[:, k % 4])(x, 11)))
    case("index/int_eager", lambda: ty(x[1]))
    case("index/slice_eager", lambda: ty(x[0:4]))
    case("index/two_ints_eager", lambda: ty(x[1, 2]))
    case("index/array_eager", lambda: ty(x[np.array([1, 2])]))
print(json.dumps(out))
'''


def _run(which: str) -> dict:
    return run_child(CASES, which)


def _recorded() -> dict:
    return json.loads(RECORD.read_text())


@pytest.fixture(scope="module")
def plax_answers() -> dict:
    return _run("plax")


@pytest.mark.parametrize("case", sorted(_recorded()))
def test_plax_answers_as_jax(plax_answers, case):
    assert plax_answers[case] == _recorded()[case]


def test_every_case_is_recorded(plax_answers):
    assert sorted(plax_answers) == sorted(_recorded())


@pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                    reason="jax is not installed: the recorded answers are not re-checked")
def test_recorded_answers_are_jax_s():
    assert _run("jax") == _recorded()


if __name__ == "__main__":  # re-record JAX's answers: python tests/test_explicit_sharding_types.py
    RECORD.write_text(json.dumps(_run("jax"), indent=1, sort_keys=True) + "\n")
