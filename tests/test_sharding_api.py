"""JAX 0.10's sharding API in plax: ``AxisType`` and ``axis_types`` on meshes, ``reshard``,
``lax.with_sharding_constraint``, ``auto_axes`` and ``explicit_axes``.

The expected values are JAX 0.10.2's (checked against it while writing these tests; JAX is
not imported here). plax does not partition ``jit``: under a transformation these functions
return their traced operands unchanged, eagerly they place arrays as JAX does. Tests over
several devices run in a child interpreter with ``PLAX_NUM_CPU_DEVICES=4``.
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.sharding import (AxisType, Mesh, NamedSharding, PartitionSpec as P,
                           SingleDeviceSharding, auto_axes, explicit_axes, get_mesh, make_mesh,
                           reshard, set_mesh, use_mesh)
from subprocess_util import last_json, run_python


@pytest.fixture
def dev():
    return plax.devices()[0]


@pytest.fixture
def mesh():
    return make_mesh((1,), ("x",))  # Explicit, as JAX 0.10's make_mesh


@pytest.fixture(autouse=True)
def no_global_mesh():
    previous = get_mesh()
    set_mesh(None)
    yield
    set_mesh(previous)


# ------------------------------------------------------------------ AxisType and meshes

def test_axis_type_members_and_repr():
    assert [t.name for t in AxisType] == ["Auto", "Explicit", "Manual"]
    assert [t.value for t in AxisType] == [1, 2, 3]  # JAX's values
    assert repr(AxisType.Explicit) == "Explicit" and str(AxisType.Explicit) == "AxisType.Explicit"
    assert repr((AxisType.Auto, AxisType.Manual)) == "(Auto, Manual)"
    assert plax.sharding.AxisType is AxisType


def test_mesh_defaults_to_auto_and_make_mesh_to_explicit(dev):
    direct = Mesh(np.array([dev]), ("x",))
    assert direct.axis_types == (AxisType.Auto,)
    assert make_mesh((1,), ("x",)).axis_types == (AxisType.Explicit,)
    assert make_mesh((1, 1), ("a", "b")).axis_types == (AxisType.Explicit,) * 2


def test_axis_types_accepted_forms(dev):
    grid = np.array([[dev]])
    both = (AxisType.Auto, AxisType.Explicit)
    assert Mesh(grid, ("a", "b"), both).axis_types == both
    assert Mesh(grid, ("a", "b"), axis_types=list(both)).axis_types == both
    # one AxisType for every axis (a plax convenience; JAX takes it for one-axis meshes)
    assert Mesh(grid, ("a", "b"), AxisType.Manual).axis_types == (AxisType.Manual,) * 2
    assert make_mesh((1, 1), ("a", "b"), AxisType.Auto).axis_types == (AxisType.Auto,) * 2
    assert make_mesh((1,), ("x",), axis_types=(AxisType.Manual,)).axis_types == \
        (AxisType.Manual,)


@pytest.mark.parametrize("build", [
    lambda types: Mesh(np.array(plax.devices()[:1]), ("x",), types),
    lambda types: make_mesh((1,), ("x",), types),
], ids=["Mesh", "make_mesh"])
def test_axis_types_validation(build):
    # JAX: ValueError "Number of axis names should match the number of axis_types"
    with pytest.raises(ValueError, match="axis_types has 2 entries"):
        build((AxisType.Auto, AxisType.Auto))
    with pytest.raises(ValueError, match="axis_types has 0 entries"):
        build(())
    # JAX: TypeError "axis_types passed to Mesh must be of type `jax.sharding.AxisType`"
    with pytest.raises(TypeError, match="axis_types entries must be plax.sharding.AxisType"):
        build(("Explicit",))
    with pytest.raises(TypeError, match="axis_types"):
        build("Explicit")
    with pytest.raises(TypeError, match="axis_types must be a plax.sharding.AxisType"):
        build(2)


def test_make_mesh_validates_axis_types_before_counting_devices():
    with pytest.raises(TypeError, match="make_mesh: axis_types"):
        make_mesh((1,), ("x",), ("Auto",))


def test_mesh_repr_shows_axis_types_as_jax(dev):
    # JAX 0.10.2's repr(mesh) is the keyword form; its str(mesh) is the compact form, which
    # it also uses inside a NamedSharding's repr
    assert repr(make_mesh((1,), ("x",))) == \
        "Mesh(axis_sizes=(1,), axis_names=('x',), axis_types=(Explicit,))"
    assert repr(Mesh(np.array([dev]), ("x",))) == \
        "Mesh(axis_sizes=(1,), axis_names=('x',), axis_types=(Auto,))"
    assert repr(make_mesh((1, 1), ("a", "b"), (AxisType.Auto, AxisType.Explicit))) == \
        "Mesh(axis_sizes=(1, 1), axis_names=('a', 'b'), axis_types=(Auto, Explicit))"
    assert str(make_mesh((1,), ("x",))) == "Mesh('x': 1, axis_types=(Explicit,))"
    assert str(make_mesh((1, 1), ("a", "b"), (AxisType.Auto, AxisType.Explicit))) == \
        "Mesh('a': 1, 'b': 1, axis_types=(Auto, Explicit))"
    assert repr(NamedSharding(make_mesh((1,), ("x",)), P("x"))) == \
        "NamedSharding(mesh=Mesh('x': 1, axis_types=(Explicit,)), spec=P('x',), memory_kind=device)"


def test_meshes_differing_only_in_axis_types_are_not_equal(dev):
    # as in JAX 0.10: make_mesh(...) != Mesh(...) over the same devices (Explicit vs Auto)
    auto = Mesh(np.array([dev]), ("x",))
    explicit = Mesh(np.array([dev]), ("x",), (AxisType.Explicit,))
    assert auto != explicit and make_mesh((1,), ("x",)) == explicit
    assert auto == Mesh(np.array([dev]), ("x",), AxisType.Auto)
    assert hash(auto) == hash(Mesh(np.array([dev]), ("x",)))
    assert hash(explicit) == hash(make_mesh((1,), ("x",)))
    assert len({auto, explicit, make_mesh((1,), ("x",))}) == 2
    assert NamedSharding(auto, P("x")) != NamedSharding(explicit, P("x"))
    # the same placement all the same
    assert NamedSharding(auto, P("x")).is_equivalent_to(NamedSharding(explicit, P("x")), 1)


def test_mesh_attributes(dev):
    mesh = make_mesh((1, 1), ("a", "b"), (AxisType.Auto, AxisType.Explicit))
    assert mesh.axis_names == ("a", "b") and mesh.axis_sizes == (1, 1) and mesh.size == 1
    assert isinstance(mesh.devices, np.ndarray) and mesh.devices.shape == (1, 1)
    assert mesh.devices[0, 0] == dev
    assert mesh.shape == {"a": 1, "b": 1} and mesh.shape_tuple == (("a", 1), ("b", 1))
    assert mesh.auto_axes == ("a",) and mesh.explicit_axes == ("b",) and mesh.manual_axes == ()
    assert not mesh.are_all_axes_auto and not mesh.are_all_axes_explicit
    assert not mesh.empty
    assert make_mesh((1,), ("x",)).are_all_axes_explicit
    assert Mesh(np.array([dev]), ("x",)).are_all_axes_auto
    updated = mesh.update(axis_types=(AxisType.Manual,) * 2)
    assert updated.are_all_axes_manual and updated.axis_names == mesh.axis_names
    assert mesh.update(axis_names=("c", "d")).axis_names == ("c", "d")


# ------------------------------------------------------------------ reshard

def test_reshard_named_sharding_over_one_device(mesh):
    x = jnp.arange(4.0)
    s = NamedSharding(mesh, P("x"))
    y = reshard(x, s)
    assert isinstance(y, plax.Array)
    assert y.sharding == s  # JAX: the result carries the NamedSharding, one device or many
    assert y.devices() == {plax.devices()[0]} and y.committed
    np.testing.assert_array_equal(np.asarray(y), np.arange(4.0))
    assert y.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(y + 1), np.arange(1.0, 5.0))
    assert reshard(y, s) is y  # already placed so


def test_reshard_accepts_host_values_and_pads_the_spec(mesh):
    y = reshard(np.arange(6.0).reshape(2, 3), NamedSharding(mesh, P("x")))
    assert isinstance(y, plax.Array) and y.shape == (2, 3)
    # JAX normalizes the spec to the array's rank: P('x', None)
    assert tuple(y.sharding.spec) == ("x", None) and y.sharding == NamedSharding(mesh, P("x"))
    z = reshard(3.0, NamedSharding(mesh, P()))
    assert float(z) == 3.0 and z.shape == ()
    [a, b] = reshard([1, 2], NamedSharding(mesh, P()))
    assert (int(a), int(b)) == (1, 2)


def test_reshard_partition_spec_uses_the_current_mesh(mesh):
    x = jnp.arange(4.0)
    with use_mesh(mesh):
        y = reshard(x, P("x"))
    assert y.sharding == NamedSharding(mesh, P("x"))
    with set_mesh(mesh):
        y = reshard(x, P())
    assert y.sharding == NamedSharding(mesh, P()) and tuple(y.sharding.spec) == (None,)
    assert get_mesh() is None


def test_reshard_pytree(mesh):
    x = jnp.arange(4.0)
    with use_mesh(mesh):
        out = reshard({"a": x, "b": (x, x * 2)}, {"a": P("x"), "b": P()})
        assert out["a"].sharding.spec == P("x")
        assert [v.sharding.spec for v in out["b"]] == [P(), P()]
        np.testing.assert_array_equal(np.asarray(out["b"][1]), np.arange(4.0) * 2)
        # one spec for all leaves; None leaves of the values are empty subtrees
        out = reshard((None, [x, x]), P("x"))
        assert out[0] is None and all(v.sharding.spec == P("x") for v in out[1])
        out = reshard((None, x), (P(), P("x")))
        assert out[1].sharding.spec == P("x")


def test_reshard_without_a_mesh_says_how_to_set_one():
    # JAX: ValueError "Using PartitionSpec when you are not under a mesh context ..."
    with pytest.raises(ValueError, match=r"no current mesh.*use_mesh.*set_mesh"):
        reshard(jnp.ones(2), P("x"))
    with pytest.raises(ValueError, match="use_mesh"):
        plax.jit(lambda v: reshard(v, P()))(jnp.ones(2))


def test_reshard_rejects_bad_shardings(mesh):
    x = jnp.ones(4)
    with pytest.raises(ValueError, match="reshard out_shardings got None"):
        reshard(x, None)
    with pytest.raises(TypeError, match="reshard out_shardings must be"):
        reshard(x, "x")
    with use_mesh(mesh):
        with pytest.raises(ValueError, match="reshard out_shardings must be a single Sharding"):
            reshard({"a": x, "b": x}, [P("x"), P()])
        with pytest.raises(ValueError, match="reshard out_shardings"):
            reshard((x, x), (P(), P(), P()))
        # (trailing Nones beyond the rank are dropped, as JAX's reshard does)
        with pytest.raises(ValueError, match="has 2 entries, but the value it applies to has "
                                             "rank 1"):
            reshard(x, P(None, "x"))
        assert reshard(x, P("x", None)).sharding.spec == P("x")
        with pytest.raises(ValueError, match="names axis 'y'"):
            reshard(x, P("y"))


def test_reshard_single_device_sharding(dev):
    # JAX takes only NamedSharding/PartitionSpec here; plax also places on a device
    y = reshard(np.ones(2), SingleDeviceSharding(dev))
    assert y.sharding == SingleDeviceSharding(dev) and y.committed


def test_reshard_under_transformations(mesh):
    s = NamedSharding(mesh, P("x"))
    x = jnp.arange(4.0)
    f = plax.jit(lambda v: reshard(v * 2, s) + 1)
    np.testing.assert_array_equal(np.asarray(f(x)), np.arange(4.0) * 2 + 1)
    with use_mesh(mesh):
        np.testing.assert_array_equal(
            np.asarray(plax.jit(lambda v: reshard({"v": v}, P("x")))(x)["v"]), np.arange(4.0))
    g = plax.grad(lambda v: (reshard(v, s) ** 2).sum())(x)
    np.testing.assert_array_equal(np.asarray(g), 2 * np.arange(4.0))
    v = plax.vmap(lambda row: reshard(row, NamedSharding(mesh, P())))(x.reshape(2, 2))
    np.testing.assert_array_equal(np.asarray(v), np.arange(4.0).reshape(2, 2))
    # on an Explicit mesh the traced value's type takes the sharding (JAX stages a reshard)
    jaxpr = plax.make_jaxpr(lambda v: reshard(v, s))(x)
    assert jaxpr.jaxpr.outvars[0].aval.sharding == s
    # the rank is checked under a trace too
    with pytest.raises(ValueError, match="rank 0"):
        plax.jit(lambda v: reshard(v, s))(1.0)


def test_reshard_is_top_level_and_in_all():
    assert "reshard" in plax.sharding.__all__ and "AxisType" in plax.sharding.__all__
    assert {"auto_axes", "explicit_axes"} <= set(plax.sharding.__all__)


# ------------------------------------------------------------------ with_sharding_constraint

@pytest.fixture
def auto_mesh():
    return make_mesh((1,), ("x",), axis_types=(AxisType.Auto,))


def test_with_sharding_constraint_pytree(auto_mesh):
    # on Auto axes the constraint places the values (on Explicit ones it asserts: below)
    mesh = auto_mesh
    tree = {"a": jnp.ones(2), "b": (jnp.zeros(4), np.arange(2.0))}
    s = NamedSharding(mesh, P("x"))
    out = lax.with_sharding_constraint(tree, s)  # one sharding for every leaf
    assert plax.tree_util.tree_structure(out) == plax.tree_util.tree_structure(tree)
    for leaf, want in zip(plax.tree_util.tree_leaves(out), plax.tree_util.tree_leaves(tree)):
        assert isinstance(leaf, plax.Array) and leaf.sharding == s
        np.testing.assert_array_equal(np.asarray(leaf), np.asarray(want))
    # a matching pytree of shardings, and a prefix of one
    out = lax.with_sharding_constraint(tree, {"a": s, "b": (NamedSharding(mesh, P()), s)})
    assert out["b"][0].sharding.spec == P() and out["b"][1].sharding == s
    out = lax.with_sharding_constraint(tree, {"a": s, "b": NamedSharding(mesh, P())})
    assert all(v.sharding.spec == P() for v in out["b"])
    with use_mesh(mesh):
        out = lax.with_sharding_constraint(tree, {"a": P("x"), "b": P()})
        assert out["a"].sharding == s
    # unlike reshard, the spec is kept as given (JAX does not normalize it here)
    out = lax.with_sharding_constraint(jnp.ones((2, 2)), s)
    assert tuple(out.sharding.spec) == ("x",)


def test_with_sharding_constraint_errors(mesh):
    tree = {"a": jnp.ones(2), "b": jnp.ones(2)}
    s = NamedSharding(mesh, P("x"))
    # JAX: ValueError "with_sharding_constraint shardings specification must be a tree
    # prefix of the corresponding value"
    with pytest.raises(ValueError, match="with_sharding_constraint shardings must be a single"):
        lax.with_sharding_constraint(tree, [s, s])
    with pytest.raises(ValueError, match="with_sharding_constraint shardings"):
        lax.with_sharding_constraint(tree, {"a": s})
    # JAX raises a RuntimeError here; plax a ValueError, as reshard
    with pytest.raises(ValueError, match="no current mesh"):
        lax.with_sharding_constraint(tree, P("x"))
    with pytest.raises(ValueError, match="got None"):
        lax.with_sharding_constraint(tree, None)
    with pytest.raises(TypeError, match="with_sharding_constraint shardings must be"):
        lax.with_sharding_constraint(tree, "x")


def test_with_sharding_constraint_under_jit_and_grad(auto_mesh):
    s = NamedSharding(auto_mesh, P("x"))

    def loss(w):
        h = lax.with_sharding_constraint(jnp.tanh(w) * 3.0, s)
        return (h ** 2).sum()

    w = jnp.linspace(-1.0, 1.0, 4)
    np.testing.assert_allclose(float(plax.jit(loss)(w)), float(loss(w)), rtol=1e-6)
    want = 2 * 9 * np.tanh(np.asarray(w)) * (1 - np.tanh(np.asarray(w)) ** 2)
    np.testing.assert_allclose(np.asarray(plax.jit(plax.grad(loss))(w)), want, rtol=1e-5)
    assert plax.lax.with_sharding_constraint is lax.with_sharding_constraint


def test_with_sharding_constraint_asserts_on_explicit_axes(mesh):
    # JAX 0.10.2: an assertion on a mesh of Explicit axes, refused with no mesh set
    x = jnp.ones(2)
    with pytest.raises(ValueError, match="can only refer to Auto axes of the mesh"):
        lax.with_sharding_constraint(x, NamedSharding(mesh, P("x")))
    with use_mesh(mesh):
        with pytest.raises(AssertionError, match=r"The array sharding: P\(None,\) did not "
                                                 r"match the sharding provided: P\('x',\)"):
            lax.with_sharding_constraint(x, P("x"))
        y = reshard(x, P("x"))
        assert lax.with_sharding_constraint(y, P("x")) is y
        assert plax.jit(lambda v: lax.with_sharding_constraint(v, P("x")) * 2)(y).tolist() == \
            [2.0, 2.0]


# ------------------------------------------------------------------ auto_axes / explicit_axes

def test_auto_axes_passes_through_and_reshards_outputs(mesh):
    s = NamedSharding(mesh, P("x"))
    f = auto_axes(lambda a, b: (a * b, a + b), out_sharding=s)
    prod, total = f(jnp.arange(3.0), 2.0)
    np.testing.assert_array_equal(np.asarray(prod), [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(np.asarray(total), [2.0, 3.0, 4.0])
    assert prod.sharding == s and total.sharding == s  # Explicit mesh: resharded, as JAX


def test_auto_axes_forms_and_keyword_out_sharding(mesh):
    def double(a):
        """Doubles."""
        return a * 2

    s = NamedSharding(mesh, P("x"))
    decorated = auto_axes(out_sharding=s)(double)
    assert decorated.__name__ == "double" and decorated.__doc__ == "Doubles."
    assert decorated.__wrapped__ is double
    assert decorated(jnp.ones(2)).sharding == s
    late = auto_axes(double)  # out_sharding given at the call, not passed on to double
    y = late(jnp.ones(2), out_sharding=s)
    assert y.sharding == s and np.asarray(y).tolist() == [2.0, 2.0]
    with pytest.raises(TypeError, match="Missing required keyword argument: 'out_sharding'"):
        late(jnp.ones(2))
    with use_mesh(mesh):
        assert auto_axes(double, axes="x", out_sharding=P("x"))(jnp.ones(2)).sharding == s
        with pytest.raises(ValueError, match="'y'"):
            auto_axes(double, axes="y", out_sharding=P("x"))(jnp.ones(2))


def test_auto_axes_without_mesh_or_on_auto_axes_leaves_outputs(dev):
    # JAX: with no current mesh and no NamedSharding, or with the axes Auto already,
    # auto_axes returns f's outputs as they are
    f = auto_axes(lambda a: a + 1, out_sharding=P("x"))
    y = f(jnp.ones(2))
    assert y.sharding == SingleDeviceSharding(dev) and np.asarray(y).tolist() == [2.0, 2.0]
    auto_mesh = Mesh(np.array([dev]), ("x",))
    with use_mesh(auto_mesh):  # f's output as it is: an eager result lies on the mesh (JAX)
        assert f(jnp.ones(2)).sharding == NamedSharding(auto_mesh, P())


def test_auto_axes_under_jit(mesh):
    f = plax.jit(auto_axes(lambda a: jnp.sin(a), out_sharding=NamedSharding(mesh, P())))
    np.testing.assert_allclose(np.asarray(f(jnp.arange(3.0))), np.sin(np.arange(3.0)),
                               rtol=1e-6)


def test_explicit_axes(mesh):
    f = explicit_axes(lambda a, b: a @ b, in_sharding=P())
    with use_mesh(mesh):
        out = f(jnp.eye(2), jnp.arange(4.0).reshape(2, 2))
        np.testing.assert_array_equal(np.asarray(out), np.arange(4.0).reshape(2, 2))
        seen = []
        g = explicit_axes(axes="x")(lambda a: seen.append(a.sharding) or a)
        g(jnp.ones(2), in_sharding=P("x"))
        assert seen == [NamedSharding(mesh, P("x"))]  # the inputs are resharded, as JAX
        with pytest.raises(TypeError, match="Missing required keyword argument: 'in_sharding'"):
            g(jnp.ones(2))
        np.testing.assert_array_equal(np.asarray(plax.jit(f)(jnp.eye(2), jnp.eye(2))),
                                      np.eye(2))
    # JAX: ValueError "Context mesh cannot be empty"
    with pytest.raises(ValueError, match="needs a current mesh"):
        f(jnp.eye(2), jnp.eye(2))
    with pytest.raises(ValueError, match="needs a current mesh"):
        explicit_axes(lambda a: a, in_sharding=NamedSharding(mesh, P()))(jnp.ones(2))


# ------------------------------------------------------------------ several devices

_MULTI = r"""
import json
import numpy as np
import plax, plax.numpy as jnp
from plax import lax
from plax.sharding import (AxisType, Mesh, NamedSharding, PartitionSpec as P, auto_axes,
                           explicit_axes, make_mesh, reshard, use_mesh)

out = {}
devs = plax.devices()
mesh = make_mesh((2, 2), ("x", "y"))
out["repr"] = repr(mesh)
out["direct"] = repr(Mesh(np.array(devs).reshape(2, 2), ("x", "y")))
x = jnp.arange(16.0).reshape(4, 4)

def shards(a):
    return sorted([[d.id, [[s.start, s.stop] for s in idx], np.asarray(a)[idx].tolist()]
                   for d, idx in a.sharding.devices_indices_map(a.shape).items()]), \
        sorted([[s.device.id, [[i.start, i.stop] for i in s.index], np.asarray(s.data).tolist()]
                for s in a.addressable_shards])

y = reshard(x, NamedSharding(mesh, P("x", "y")))
out["xy"] = [repr(y.sharding), shards(y)[0] == shards(y)[1], shards(y)[1],
             np.asarray(y).tolist() == np.asarray(x).tolist()]
with use_mesh(mesh):
    z = reshard(y, P(None, "x"))            # from one split to another
    out["none_x"] = [repr(z.sharding.spec), shards(z)[1],
                     np.asarray(z).tolist() == np.asarray(x).tolist()]
    r = reshard(z, P())
    out["replicated"] = [r.is_fully_replicated, len(r.addressable_shards)]
    with use_mesh(Mesh(np.array(devs).reshape(2, 2), ("x", "y"))):  # Auto axes: placed
        w = lax.with_sharding_constraint({"a": x, "b": jnp.ones(4)}, {"a": P("y"), "b": P()})
    out["wsc"] = [repr(w["a"].sharding), shards(w["a"])[1]]
    # on Explicit axes the constraint is an assertion the type already satisfies
    j = plax.jit(lambda v: reshard(v * 2, P("x")) +
                 lax.with_sharding_constraint(v, P("x", "y")))(y)
    out["jit"] = np.asarray(j).tolist() == (np.asarray(x) * 3).tolist()
    a = auto_axes(lambda v: v + 1, out_sharding=P("y", "x"))(y)
    out["auto"] = [repr(a.sharding.spec), np.asarray(a).tolist() == (np.asarray(x) + 1).tolist()]
    seen = []
    e = explicit_axes(lambda v: seen.append(v.sharding) or v.sum(), in_sharding=P("x"))(x)
    out["explicit"] = [repr(seen[0]), float(e)]
    g = plax.grad(lambda v: (reshard(v, P("x", "y")) ** 2).sum())(y)
    out["grad"] = np.asarray(g).tolist() == (2 * np.asarray(x)).tolist()
try:
    reshard(jnp.ones(3), NamedSharding(mesh, P("x")))
except ValueError as err:
    out["uneven"] = str(err)
# JAX 0.10's idiom: device_put with a PartitionSpec under the current mesh
with plax.set_mesh(mesh):
    d = plax.device_put(np.arange(16.0, dtype=np.float32).reshape(4, 4), P("y"))
    out["device_put_spec"] = [repr(d.sharding), shards(d)[1]]
pair = plax.device_put((np.ones(2), {"k": np.zeros(4)}), (devs[1], NamedSharding(mesh, P("x"))))
out["device_put_prefix"] = [sorted(dev.id for dev in pair[0].devices()),
                            repr(pair[1]["k"].sharding.spec), len(pair[1]["k"].addressable_shards)]
try:
    plax.device_put((np.ones(2), np.ones(2)), (devs[0], devs[1], devs[2]))
except ValueError as err:
    out["device_put_bad_prefix"] = str(err)
print(json.dumps(out))
"""


def test_several_devices():
    out = last_json(run_python(_MULTI, env={"PLAX_NUM_CPU_DEVICES": "4",
                                            "PLAX_PLATFORMS": "cpu"}))
    assert out["repr"] == ("Mesh(axis_sizes=(2, 2), axis_names=('x', 'y'), "
                           "axis_types=(Explicit, Explicit))")
    assert out["direct"] == ("Mesh(axis_sizes=(2, 2), axis_names=('x', 'y'), "
                             "axis_types=(Auto, Auto))")
    sharding, consistent, shards, values = out["xy"]
    assert sharding == ("NamedSharding(mesh=Mesh('x': 2, 'y': 2, axis_types=(Explicit, "
                        "Explicit)), spec=P('x', 'y'), memory_kind=device)")
    assert consistent and values
    # JAX 0.10.2's devices_indices_map for P('x', 'y') on a (2, 2) mesh of devices 0..3
    assert shards == [[0, [[0, 2], [0, 2]], [[0.0, 1.0], [4.0, 5.0]]],
                      [1, [[0, 2], [2, 4]], [[2.0, 3.0], [6.0, 7.0]]],
                      [2, [[2, 4], [0, 2]], [[8.0, 9.0], [12.0, 13.0]]],
                      [3, [[2, 4], [2, 4]], [[10.0, 11.0], [14.0, 15.0]]]]
    spec, shards, values = out["none_x"]
    assert spec == "P(None, 'x')" and values
    assert [s[:2] for s in shards] == [[0, [[None, None], [0, 2]]], [1, [[None, None], [0, 2]]],
                                       [2, [[None, None], [2, 4]]], [3, [[None, None], [2, 4]]]]
    assert out["replicated"] == [True, 4]
    sharding, shards = out["wsc"]
    assert sharding.endswith("spec=P('y',), memory_kind=device)")
    assert [s[:2] for s in shards] == [[0, [[0, 2], [None, None]]], [1, [[2, 4], [None, None]]],
                                       [2, [[0, 2], [None, None]]], [3, [[2, 4], [None, None]]]]
    assert out["jit"] and out["grad"]
    assert out["auto"] == ["P('y', 'x')", True]
    assert out["explicit"][0].endswith("spec=P('x', None), memory_kind=device)")
    assert out["explicit"][1] == 120.0
    assert "not divisible by 2" in out["uneven"]
    # device_put(x, P("y")) under set_mesh: split over "y" (devices 0,2 hold rows 0:2 and
    # devices 1,3 rows 2:4, as JAX 0.10.2 places them), replicated over "x"
    sharding, shards = out["device_put_spec"]
    assert sharding.endswith("spec=P('y',), memory_kind=device)")
    assert [s[:2] for s in shards] == [[0, [[0, 2], [None, None]]], [1, [[2, 4], [None, None]]],
                                       [2, [[0, 2], [None, None]]], [3, [[2, 4], [None, None]]]]
    assert shards[1][2] == [[8.0, 9.0, 10.0, 11.0], [12.0, 13.0, 14.0, 15.0]]
    # a pytree prefix of targets: a device for the first leaf, a sharding for the subtree
    assert out["device_put_prefix"][0] == [1]
    assert out["device_put_prefix"][1:] == ["P('x',)", 4]
    assert "prefix" in out["device_put_bad_prefix"]


def test_device_put_partition_spec_needs_a_mesh_and_fits_the_rank(mesh):
    with pytest.raises(ValueError, match="no current mesh"):
        plax.device_put(np.ones(2), P("x"))
    with use_mesh(mesh):
        a = plax.device_put(np.arange(4.0), P("x"))
        assert a.sharding == NamedSharding(mesh, P("x"))
        np.testing.assert_array_equal(np.asarray(a), np.arange(4.0))
        with pytest.raises(ValueError, match="rank"):
            plax.device_put(np.ones(2), P("x", None))
