"""plax.smap (JAX 0.10's single-axis shard_map) in one process: results against NumPy and,
where JAX is installed, against jax.smap on a one-device mesh; JAX's errors. The runs on 2
and 4 devices are in multi_device_checks.py (smap_over_the_context_mesh)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp

X = np.arange(12, dtype=np.float32).reshape(4, 3)

# (function of the axis-name module m, in_axes, out_axes, arguments)
CASES = {
    "rows": (lambda m: lambda a: a * 2 + m.lax.axis_index("x"), 0, 0, (X,)),
    "columns": (lambda m: lambda a: a * 2, 1, 1, (X,)),
    "broadcast_arg": (lambda m: lambda a, b: a + b, (0, None), 0, (X, np.ones(3, np.float32))),
    "replicated_out": (lambda m: lambda a: m.lax.psum(a.sum(0), "x"), 0, None, (X,)),
    "pytree": (lambda m: lambda d: (d["a"] * d["b"], d["a"]), ({"a": 0, "b": None},), (0, 0),
               ({"a": X, "b": np.float32(3)},)),
}


def _plax(name):
    make, in_axes, out_axes, args = CASES[name]
    # Auto, as the JAX side below: on an Explicit mesh shard_map demands arguments already
    # sharded as in_specs say (JAX's check, which plax makes too)
    mesh = plax.make_mesh((1,), ("x",), axis_types=(plax.sharding.AxisType.Auto,))
    with plax.set_mesh(mesh):
        return plax.smap(make(plax), in_axes=in_axes, out_axes=out_axes, axis_name="x")(*args)


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_member_is_the_function(name):
    make, _, _, args = CASES[name]
    want = make(type("m", (), {"lax": type("l", (), {"axis_index": lambda n: 0,
                                                       "psum": lambda v, n: v})}))(*args)
    plax.tree_util.tree_map(lambda g, w: np.testing.assert_allclose(g, w), _plax(name), want)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_jax(name):
    jax = pytest.importorskip("jax")
    make, in_axes, out_axes, args = CASES[name]
    # Auto: on an Explicit mesh JAX's shard_map also demands arguments already sharded as
    # in_specs say (a check of shard_map's, not of smap's)
    mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    with jax.set_mesh(mesh):
        want = jax.smap(make(jax), in_axes=in_axes, out_axes=out_axes, axis_name="x")(*args)
    got = _plax(name)
    plax.tree_util.tree_map(lambda g, w: np.testing.assert_allclose(g, w), got, want)
    assert [np.asarray(g).shape for g in plax.tree_util.tree_leaves(got)] == \
        [np.asarray(w).shape for w in jax.tree_util.tree_leaves(want)]


def test_infers_in_axes_from_sharding_and_decorates():
    with plax.set_mesh(plax.make_mesh((1,), ("x",))):
        x = plax.sharding.reshard(jnp.asarray(X), plax.sharding.PartitionSpec("x"))

        @plax.smap(out_axes=0, axis_name="x")
        def double(a):
            return a * 2

        np.testing.assert_array_equal(double(x), X * 2)
        np.testing.assert_array_equal(plax.jit(double)(x), X * 2)


BAD = {
    "axis_name_tuple": (dict(in_axes=0, out_axes=0, axis_name=("x",)), TypeError),
    "in_axes_list": (dict(in_axes=[0], out_axes=0, axis_name="x"), TypeError),
    "in_axes_float": (dict(in_axes=0.5, out_axes=0, axis_name="x"), TypeError),
    "out_axes_str": (dict(in_axes=0, out_axes="a", axis_name="x"), TypeError),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_arguments(name):
    kwargs, exc = BAD[name]
    with pytest.raises(exc, match="smap"):
        plax.smap(lambda a: a, **kwargs)


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_arguments_raise_as_jax(name):
    jax = pytest.importorskip("jax")
    kwargs, exc = BAD[name]
    with pytest.raises(exc):
        jax.smap(lambda a: a, **kwargs)


def test_needs_a_mesh_with_the_axis():
    f = plax.smap(lambda a: a, in_axes=0, out_axes=0, axis_name="x")
    with pytest.raises(ValueError, match="set_mesh"):
        f(X)
    with plax.set_mesh(plax.make_mesh((1,), ("y",))):
        with pytest.raises(ValueError, match="not an axis"):
            f(X)
        with pytest.raises(ValueError, match="out of range"):
            plax.smap(lambda a: a, in_axes=2, out_axes=0, axis_name="y")(X)
    with pytest.raises(TypeError, match="out_axes"):
        plax.smap(lambda a: a, axis_name="x")
