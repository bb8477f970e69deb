"""vmap: in_axes/out_axes (ints, None, negative, pytrees, lists), axis_size, axis_name,
nesting, keyword arguments, closures, and every error, against Python loops."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import core, lax
from plax import numpy as jnp

A = np.arange(6, dtype=np.float32).reshape(2, 3)
V = np.array([1.0, -2.0, 0.5], np.float32)


def _loop(f, *args, axes):
    """Reference: apply f to slices taken along ``axes`` (None: unmapped) and stack on 0."""
    size = next(np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None)
    outs = [f(*[a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, axes)])
            for i in range(size)]
    return np.stack([np.asarray(o) for o in outs])


def test_in_axes_int_negative_none_and_list():
    f = lambda a, b: jnp.sin(a) * b  # noqa: E731
    np.testing.assert_allclose(plax.vmap(f, in_axes=(0, None))(A, V),
                               _loop(lambda a, b: np.sin(a) * b, A, V, axes=(0, None)), rtol=1e-6)
    np.testing.assert_allclose(plax.vmap(f, in_axes=[1, 0])(A, np.ones((3, 2), np.float32)),
                               _loop(lambda a, b: np.sin(a) * b, A, np.ones((3, 2)), axes=(1, 0)),
                               rtol=1e-6)
    np.testing.assert_allclose(plax.vmap(jnp.sum, in_axes=-1)(A), A.sum(0))
    np.testing.assert_allclose(plax.vmap(jnp.sum, in_axes=-2)(A), A.sum(1))


def test_in_axes_pytrees():
    f = lambda p: p["a"] * p["b"]  # noqa: E731
    out = plax.vmap(f, in_axes=({"a": 0, "b": None},))({"a": A, "b": V})
    np.testing.assert_allclose(out, A * V)
    # a prefix: one entry for a whole tuple argument
    g = lambda t, s: t[0] * t[1] + s  # noqa: E731
    out = plax.vmap(g, in_axes=((0, 1), None))((A, A.T), 1.0)
    np.testing.assert_allclose(out, A * A + 1.0)


def test_out_axes_ints_negative_pytrees_and_none():
    assert plax.vmap(lambda a: a * 2, out_axes=1)(A).shape == (3, 2)
    np.testing.assert_allclose(plax.vmap(lambda a: a * 2, out_axes=-1)(A), (A * 2).T)
    o1, o2 = plax.vmap(lambda a: (a, a.sum()), out_axes=(1, 0))(A)
    assert o1.shape == (3, 2) and o2.shape == (2,)
    out, const = plax.vmap(lambda a, b: (a * 2, b), in_axes=(0, None), out_axes=(0, None))(A, V)
    np.testing.assert_allclose(const, V)
    np.testing.assert_allclose(out, A * 2)


def test_axis_size_with_nothing_mapped():
    out = plax.vmap(lambda b: b * 2, in_axes=None, axis_size=4)(V)
    np.testing.assert_allclose(out, np.broadcast_to(V * 2, (4, 3)))
    out = plax.vmap(lambda: jnp.ones(2), axis_size=3)()
    assert out.shape == (3, 2)


def test_nested_vmap_and_closures():
    f = plax.vmap(plax.vmap(lambda a, b: a * b), in_axes=(0, None))
    np.testing.assert_allclose(f(A, V), A * V)
    outer = plax.vmap(plax.vmap(lambda a: a * V.sum(), in_axes=0), in_axes=1)  # closes over V
    np.testing.assert_allclose(outer(A), np.transpose(A * V.sum()))
    closed = jnp.asarray(V)
    np.testing.assert_allclose(plax.vmap(lambda a: jnp.dot(a, closed))(A), A @ V)


def test_keyword_arguments_are_mapped_over_axis_zero():
    np.testing.assert_allclose(plax.vmap(lambda a, b=None: a + b)(A, b=A), 2 * A)


def test_python_scalar_and_none_outputs():
    out = plax.vmap(lambda a: 1.0)(A)
    assert out.shape == (2,) and out.weak_type
    assert plax.vmap(lambda a: None)(A) is None


def test_vmap_of_integer_indexing_and_updates():
    np.testing.assert_allclose(plax.vmap(lambda a, i: a[i])(A, np.array([2, 0])), [2.0, 3.0])
    out = plax.vmap(lambda a, i: a.at[i].set(9.0))(A, np.array([2, 0]))
    np.testing.assert_allclose(out, [[0, 1, 9], [9, 4, 5]])


# ------------------------------------------------------------------ axis_name

_probe_p = core.Primitive("axis_probe_sum")
_probe_p.def_abstract_eval(lambda x, *, axis_name: x)


def _probe_batch(vals, dims, *, axis_name, axis_data):
    # A psum-like collective: it needs the vmap level's axis name and size.
    (x,), (d,) = vals, dims
    assert axis_data.name == axis_name, (axis_data.name, axis_name)
    total = lax.reduce_sum(x, (d,))
    return lax.broadcast_in_dim(total, (axis_data.size,) + total.shape,
                                tuple(range(1, total.ndim + 1))), 0


_probe_batch.needs_axis_data = True
core.register_rule("batch", _probe_p)(_probe_batch)


def test_axis_name_reaches_batching_rules():
    out = plax.vmap(lambda x: x / _probe_p.bind(x, axis_name="i"), axis_name="i")(V)
    np.testing.assert_allclose(out, V / V.sum(), rtol=1e-6)
    # nested: the inner rule sees its own level's name
    f = plax.vmap(plax.vmap(lambda x: _probe_p.bind(x, axis_name="inner"), axis_name="inner"),
                  axis_name="outer")
    np.testing.assert_allclose(f(A), np.broadcast_to(A.sum(1, keepdims=True), A.shape))


# ------------------------------------------------------------------ errors

def test_inconsistent_sizes_name_the_arguments_and_sizes():
    def f(a, b):
        return a.sum() + b.sum()

    with pytest.raises(ValueError) as info:
        plax.vmap(f)(A, np.ones((3, 3), np.float32))
    msg = str(info.value)
    assert "inconsistent sizes" in msg
    assert "axis 0 of argument a of type f32[2,3]" in msg
    assert "axis 0 of argument b of type f32[3,3]" in msg
    with pytest.raises(ValueError, match=r"argument p\['b'\] of type f32\[3,3\]"):
        plax.vmap(lambda p: p["a"].sum() + p["b"].sum())({"a": A, "b": np.ones((3, 3))})
    with pytest.raises(ValueError, match="axis_size=3"):
        plax.vmap(lambda a: a, axis_size=3)(A)


@pytest.mark.parametrize("kwargs,args,exc,msg", [
    (dict(in_axes=(0,)), (A, V), ValueError, r"len\(in_axes\)=1, len\(args\)=2"),
    (dict(in_axes=({"z": 0},)), ({"a": A},), ValueError, "tree prefix"),
    (dict(in_axes="a"), (A,), TypeError, "in_axes must be an int, None"),
    (dict(in_axes=2), (A,), ValueError, r"axis 2.*rank should be at least 3.*\(2, 3\)"),
    (dict(in_axes=0), (1.0,), ValueError, r"rank should be at least 1, but is only 0"),
    (dict(out_axes=3), (A,), ValueError, "out_axes 3 is out of bounds"),
    (dict(out_axes="x"), (A,), TypeError, "out_axes must be an int, None"),
    (dict(in_axes=None), (A,), ValueError, "at least one non-None value in in_axes"),
])
def test_bad_axes(kwargs, args, exc, msg):
    with pytest.raises(exc, match=msg):
        plax.vmap(lambda *a: a[0], **kwargs)(*args)


def test_out_axes_none_on_a_batched_output():
    with pytest.raises(ValueError, match=r"out_axes is None for output\[1\]\['k'\].*batched"):
        plax.vmap(lambda a: (a, {"k": a * 2}), out_axes=(0, {"k": None}))(A)


def test_non_array_output_and_non_callable():
    with pytest.raises(TypeError, match="not a valid JAX type"):
        plax.vmap(lambda a: "s")(A)
    with pytest.raises(TypeError, match="vmap requires a callable"):
        plax.vmap(3)


def test_vmap_control_flow_on_batched_value_raises():
    with pytest.raises(plax.errors.TracerBoolConversionError, match="jnp.where"):
        plax.vmap(lambda x: x if x > 0 else -x)(V)


def test_unmapped_arguments_pass_through_unchanged():
    # an unmapped Python int stays a Python int: it can be a static argument inside
    f = plax.jit(lambda x, n: x * n, static_argnums=1)
    np.testing.assert_allclose(plax.vmap(f, in_axes=(0, None))(V, 3), V * 3)
    seen = []
    plax.vmap(lambda x, s: seen.append(s) or x, in_axes=(0, None))(V, "label")
    assert seen == ["label"]


def test_where_with_a_batched_scalar_condition():
    b = np.array([True, False, True])
    np.testing.assert_allclose(plax.vmap(lambda c: jnp.where(c, 1.0, 0.0))(b), [1.0, 0.0, 1.0])
    np.testing.assert_allclose(plax.vmap(lambda c, x: jnp.where(c, x, -x))(b, V),
                               np.where(b, V, -V))
    np.testing.assert_allclose(plax.vmap(lambda c, x: jnp.where(c, x, 0.0), in_axes=(0, None))(
        b, A), np.where(b[:, None, None], A, 0.0))
    np.testing.assert_allclose(plax.vmap(lambda x: lax.select_n(x > 2, x, 0 * x), in_axes=1)(A),
                               np.where(A > 2, 0, A).T)


def test_out_axes_not_a_prefix_of_the_output():
    with pytest.raises(ValueError, match="out_axes specification must be a tree prefix"):
        plax.vmap(lambda a: (a, a), out_axes=(0, 0, 0))(A)
