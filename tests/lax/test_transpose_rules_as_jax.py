"""Transpose and JVP rules staged as JAX 0.10.2's (issue 25): the transpose of a
``broadcast_in_dim`` from size-1 axes sums, then re-expands with ``broadcast_in_dim``;
``squeeze`` transposes to ``expand_dims``, ``slice`` to a ``pad`` computed with NumPy ints;
``sub`` negates its cotangent before summing it down, ``add_any``'s batcher broadcasts
an unbatched operand; ``atan2`` and ``div`` differentiate with
``square`` and ``integer_pow``; a ``custom_jvp``/``custom_vjp`` under ``vmap`` keeps its
rules' names; integer index arrays are normalized in their own dtype. Their jaxprs are
compared with JAX's in ``test_staging_as_jax.py`` (cases ``grad_*``, ``vmap_custom_*``,
``index_*``, ``x64_index_*``); here the values: gradients against finite differences and
hand-derived float64 references, vmap against a loop, indexing against NumPy.
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.test_util import check_grads

R = np.random.default_rng(34)


@pytest.mark.parametrize("name,fn", [
    ("where_size_one", lambda x: jnp.where(x > 0.0, x * x, jnp.sin(x[:1]))),
    ("broadcast_to_size_one", lambda x: jnp.sin(jnp.broadcast_to(x[:1], (2, 1, 4)))),
    ("slice", lambda x: jnp.sin(x[1:3])),
    ("slice_steps", lambda x: jnp.sin(x[::2, 3:0:-2])),
    ("lax_slice_unit_strides", lambda x: lax.slice(x, (0, 1), (2, 3), (1, 1)) ** 2),
    ("squeeze", lambda x: jnp.sin(jnp.squeeze(x[:, :1], 1))),
    ("arctan2", lambda x: jnp.arctan2(x, jnp.cos(x) + 2.0)),
    ("true_divide", lambda x: jnp.true_divide(jnp.sin(x), x[:1] ** 2 + 1.0)),
    ("mul_sub_size_one", lambda x: x[:, :1] * x[:1] - x[:1]),
])
def test_derivatives_against_finite_differences(name, fn):
    x = R.standard_normal((3, 4))
    with plax.enable_x64():
        check_grads(fn, (x,), order=2, modes=("fwd", "rev"))


def test_gradients_against_the_formulas():
    x = R.standard_normal((3, 1))
    y = R.standard_normal((1, 4))
    with plax.enable_x64():
        gx, gy = plax.grad(lambda x, y: jnp.sum(jnp.where(x > 0.0, x, y)), argnums=(0, 1))(x, y)
        np.testing.assert_array_equal(np.asarray(gx), np.where(x > 0, 4.0, 0.0))
        np.testing.assert_array_equal(np.asarray(gy), np.sum(x <= 0.0) * np.ones((1, 4)))
        gx, gy = plax.grad(lambda x, y: jnp.sum(x * y - y), argnums=(0, 1))(x, y)
        np.testing.assert_allclose(np.asarray(gx), np.full((3, 1), y.sum()), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(gy), np.full((1, 4), x.sum() - 3.0), rtol=1e-12)
        a, b = R.standard_normal(5), R.standard_normal(5)
        ga, gb = plax.grad(lambda a, b: jnp.sum(jnp.arctan2(a, b)), argnums=(0, 1))(a, b)
        np.testing.assert_allclose(np.asarray(ga), b / (a * a + b * b), rtol=1e-12)
        np.testing.assert_allclose(np.asarray(gb), -a / (a * a + b * b), rtol=1e-12)
        ga, gb = plax.grad(lambda a, b: jnp.sum(a / b), argnums=(0, 1))(a, b)
        np.testing.assert_allclose(np.asarray(ga), 1 / b, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(gb), -a / b ** 2, rtol=1e-12)
    v = np.arange(7.0, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(plax.grad(lambda v: v[1:6:2].sum())(v)),
                                  [0, 1, 0, 1, 0, 1, 0])
    np.testing.assert_array_equal(
        np.asarray(plax.jit(plax.grad(lambda v: v[5:0:-3].sum()))(v)), [0, 0, 1, 0, 0, 1, 0])
    g = plax.grad(lambda m: jnp.squeeze(m).sum())(np.ones((3, 1), np.float32))
    assert g.shape == (3, 1) and np.all(np.asarray(g) == 1)


def test_custom_rules_under_vmap_against_a_loop():
    @plax.custom_vjp
    def f(x):
        return jnp.sin(x)

    def f_fwd(x):
        return f(x), jnp.cos(x)

    def f_bwd(cos_x, g):
        return (2.0 * g * cos_x,)  # twice the true derivative: the rule is what runs

    f.defvjp(f_fwd, f_bwd)
    xs = R.standard_normal((4, 3)).astype(np.float32)
    got = plax.vmap(plax.grad(lambda x: f(x).sum()))(xs)
    np.testing.assert_allclose(np.asarray(got), 2 * np.cos(xs), rtol=1e-6)
    ys = R.standard_normal((4, 3)).astype(np.float32)
    got = plax.vmap(jnp.logaddexp)(xs, ys)
    np.testing.assert_allclose(np.asarray(got), np.logaddexp(xs, ys), rtol=1e-6)
    text = str(plax.make_jaxpr(plax.vmap(f))(xs))
    assert "fwd=f_fwd" in text and "bwd=f_bwd" in text


def test_add_any_under_vmap_against_a_loop():
    xs, ys = R.standard_normal(5), R.standard_normal(5)
    with plax.enable_x64():
        # vmap of a gradient whose cotangents meet in add_any, one of them unbatched
        gx, gy = plax.vmap(plax.grad(lambda x, y: x * y - y, argnums=(0, 1)))(xs, ys)
        np.testing.assert_allclose(np.asarray(gx), ys, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(gy), xs - 1.0, rtol=1e-12)
        m = R.standard_normal((3, 2))
        # batch axes in different places (axis 1 of x, axis 0 of y)
        got = plax.vmap(plax.grad(lambda x, y: jnp.sum(jnp.sin(x * y) - y), argnums=1),
                        in_axes=(1, 0))(m, m.T)
        want = [np.cos(m[:, k] * m.T[k]) * m[:, k] - 1.0 for k in range(2)]
        np.testing.assert_allclose(np.asarray(got), np.stack(want), rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.int32, np.int64])
def test_index_arrays_of_every_dtype_against_numpy(dtype):
    x = np.arange(300 * 3, dtype=np.float32).reshape(300, 3)
    # an int8 index into a longer axis than int8 counts: normalized as int32
    i = np.array([255, 0, 5] if dtype == np.uint8 else [-1, 0, 5, -100], dtype)
    with plax.enable_x64():
        got = jnp.asarray(x)[i, 1]
        np.testing.assert_array_equal(np.asarray(got), x[i, 1])
        got = plax.jit(lambda x, i: x[::-1, i])(x.T, i)
        np.testing.assert_array_equal(np.asarray(got), x.T[::-1, i])
    np.testing.assert_array_equal(np.asarray(jnp.asarray(x)[i, -1]), x[i, -1])
