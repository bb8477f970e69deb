"""Discrete calculus of plax.numpy (diff, ediff1d, gradient, trapezoid, unwrap, interp): values
against NumPy in float64 over several shapes and dtypes, dtypes against JAX's recording,
gradients against finite differences, jit and vmap."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import plax
import plax.numpy as jnp
from plax.test_util import check_grads
from jnp_extras_dtype_table import EXPRESSIONS, check_like_recorded, describe_plax

A = np.asarray
SHAPES_AXES = [((6,), -1), ((3, 5), 0), ((3, 5), 1), ((2, 3, 4), 1)]


def _x64():
    return plax.config.override("jax_enable_x64", True)


@pytest.mark.parametrize("expr", EXPRESSIONS["calculus"])
def test_dtype_weak_type_and_value_like_jax(expr):
    check_like_recorded(expr, describe_plax)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.uint8, np.bool_, np.complex128])
@pytest.mark.parametrize("shape,axis", SHAPES_AXES)
@pytest.mark.parametrize("n", [0, 1, 2, 4])
def test_diff_against_numpy(dtype, shape, axis, n):
    rng = np.random.default_rng(n)
    x = (rng.standard_normal(shape) * 5).astype(dtype)
    with _x64():
        np.testing.assert_allclose(A(jnp.diff(x, n, axis)), np.diff(x, n, axis))


def test_diff_prepend_append_and_errors():
    x = np.arange(12.0).reshape(3, 4) ** 2
    with _x64():
        np.testing.assert_allclose(A(jnp.diff(x, prepend=1.0, append=x[:, :2])),
                                   np.diff(x, prepend=1.0, append=x[:, :2]))
        np.testing.assert_allclose(A(jnp.diff(x, 2, 0, prepend=x[:1])),
                                   np.diff(x, 2, 0, prepend=x[:1]))
    with pytest.raises(ValueError, match="non-negative"):
        jnp.diff(x, -1)
    with pytest.raises(ValueError, match="one dimensional"):
        jnp.diff(np.float32(1.0))


@pytest.mark.parametrize("kw", [{}, {"to_begin": 5}, {"to_end": np.array([1, 2])},
                                {"to_begin": np.array([-1.5]), "to_end": 7.0}])
def test_ediff1d_against_numpy(kw):
    x = np.array([[1.0, 4.0, 9.0], [16.0, 25.0, 36.0]])
    with _x64():
        np.testing.assert_allclose(A(jnp.ediff1d(x, **kw)), np.ediff1d(x, **kw))


@pytest.mark.parametrize("spacing", ["none", "scalar", "coords", "per_axis"])
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4)])
def test_gradient_against_numpy(spacing, shape):
    rng = np.random.default_rng(1)
    f = rng.standard_normal(shape)
    args = {"none": (), "scalar": (0.7,),
            "coords": (np.cumsum(rng.uniform(0.2, 1.0, shape[0])),) if len(shape) == 1 else (),
            "per_axis": tuple(np.cumsum(rng.uniform(0.2, 1.0, d)) if i % 2 == 0 else 0.5
                              for i, d in enumerate(shape))}[spacing]
    with _x64():
        got, exp = jnp.gradient(f, *args), np.gradient(f, *args)
        got, exp = (got, exp) if isinstance(exp, (list, tuple)) else ([got], [exp])
        for g, e in zip(got, exp):
            np.testing.assert_allclose(A(g), e, rtol=1e-12)
        if len(shape) > 1:
            np.testing.assert_allclose(A(jnp.gradient(f, axis=-1)), np.gradient(f, axis=-1))
    with pytest.raises(NotImplementedError):
        jnp.gradient(f, edge_order=2)


@pytest.mark.parametrize("shape,axis", SHAPES_AXES)
@pytest.mark.parametrize("dtype", [np.float64, np.int32])
def test_trapezoid_against_numpy(shape, axis, dtype):
    rng = np.random.default_rng(2)
    y = (rng.standard_normal(shape) * 3).astype(dtype)
    n = shape[axis]
    with _x64():
        np.testing.assert_allclose(A(jnp.trapezoid(y, axis=axis)), np.trapezoid(y, axis=axis),
                                   rtol=1e-6)
        np.testing.assert_allclose(A(jnp.trapezoid(y, dx=0.3, axis=axis)),
                                   np.trapezoid(y, dx=0.3, axis=axis), rtol=1e-6)
        x = np.cumsum(rng.uniform(0.1, 1.0, n))
        np.testing.assert_allclose(A(jnp.trapezoid(y, x, axis=axis)),
                                   np.trapezoid(y, x, axis=axis), rtol=1e-6)
        xf = rng.standard_normal(shape)
        np.testing.assert_allclose(A(jnp.trapezoid(y, xf, axis=axis)),
                                   np.trapezoid(y, xf, axis=axis), rtol=1e-6)


@pytest.mark.parametrize("kw", [{}, {"discont": 2.0}, {"period": 4.0}, {"axis": 0},
                                {"period": 5.0, "discont": 1.0}])
def test_unwrap_against_numpy(kw):
    rng = np.random.default_rng(3)
    phase = np.cumsum(rng.uniform(-3, 3, (3, 20)), axis=-1)
    period = kw.get("period", 2 * np.pi)
    wrapped = np.mod(phase, period)
    with _x64():
        np.testing.assert_allclose(A(jnp.unwrap(wrapped, **kw)), np.unwrap(wrapped, **kw),
                                   rtol=1e-12)
        ints = np.array([0, 5, 10, 3, -7, 8, 8, 1])
        np.testing.assert_array_equal(A(jnp.unwrap(ints, period=6)), np.unwrap(ints, period=6))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=1, max_size=8, unique=True),
       st.lists(st.floats(-7, 7), min_size=1, max_size=5))
def test_interp_hypothesis(xp, x):
    xp = np.sort(np.array(xp))
    fp = np.sin(xp) * 3
    x = np.array(x)
    with _x64():
        np.testing.assert_allclose(A(jnp.interp(x, xp, fp)), np.interp(x, xp, fp),
                                   rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(A(jnp.interp(x, xp, fp, left=-10.0, right=10.0)),
                                   np.interp(x, xp, fp, left=-10.0, right=10.0),
                                   rtol=1e-9, atol=1e-9)


def test_interp_period_extrapolate_and_errors():
    rng = np.random.default_rng(4)
    xp = rng.uniform(0, 10, 7)
    fp = rng.standard_normal(7)
    x = rng.uniform(-12, 12, (2, 5))
    with _x64():
        np.testing.assert_allclose(A(jnp.interp(x, xp, fp, period=3.0)),
                                   np.interp(x, xp, fp, period=3.0), rtol=1e-9)
        xs = np.sort(xp)
        got = A(jnp.interp(np.array([-1.0, 20.0]), xs, fp, left="extrapolate",
                           right="extrapolate"))
        slope0 = (fp[1] - fp[0]) / (xs[1] - xs[0])
        np.testing.assert_allclose(got[0], fp[0] + (-1.0 - xs[0]) * slope0)
    with pytest.raises(ValueError, match="extrapolate"):
        jnp.interp(x, xs, fp, left="nope")
    with pytest.raises(ValueError, match="one-dimensional"):
        jnp.interp(x, xs, fp[:3])
    with pytest.raises(ValueError, match="complex"):
        jnp.interp(x + 1j, xs, fp)


def test_gradients_against_finite_differences():
    rng = np.random.default_rng(5)
    with _x64():
        y = jnp.asarray(rng.standard_normal((3, 5)))
        xs = jnp.asarray(np.cumsum(rng.uniform(0.3, 1.0, 5)))
        check_grads(lambda y: jnp.diff(y, 2), (y,), 1)
        check_grads(lambda y: jnp.ediff1d(y, to_begin=1.0), (y,), 1)
        check_grads(lambda y: jnp.gradient(y, 0.5)[1], (y,), 1)
        check_grads(lambda y, x: jnp.gradient(y, x, axis=1), (y, xs), 1)
        check_grads(lambda y, x: jnp.trapezoid(y, x), (y, xs), 2)
        check_grads(lambda y: jnp.unwrap(y * 4), (y,), 1)
        check_grads(lambda x, f: jnp.interp(jnp.asarray(np.array([0.9, 1.7, 2.2])), x, f),
                    (xs, y[0]), 1)
        check_grads(lambda q: jnp.interp(q, xs, y[0]), (jnp.asarray(np.array([0.9, 1.7])),), 1)


def test_jit_and_vmap():
    rng = np.random.default_rng(6)
    ys = rng.standard_normal((3, 6)).astype(np.float32)
    xp = np.arange(6.0, dtype=np.float32)
    fns = {"diff": lambda y: jnp.diff(y, 2, prepend=0.0), "ediff1d": jnp.ediff1d,
           "gradient": jnp.gradient, "gradient_coords": lambda y: jnp.gradient(y, xp ** 2),
           "trapezoid": jnp.trapezoid, "trapezoid_x": lambda y: jnp.trapezoid(y, xp),
           "unwrap": lambda y: jnp.unwrap(y * 3), "interp": lambda y: jnp.interp(
               np.array([0.5, 2.2, 7.0], np.float32), xp, y),
           "interp_x": lambda y: jnp.interp(y, xp, xp * 2, period=4.0)}
    for name, fn in fns.items():
        eager = np.stack([A(fn(row)) for row in ys])
        np.testing.assert_allclose(A(plax.vmap(fn)(ys)), eager, rtol=1e-5, atol=1e-6,
                                   err_msg=name)
        np.testing.assert_allclose(A(plax.jit(fn)(ys[0])), eager[0], rtol=1e-5, atol=1e-6,
                                   err_msg=name)
