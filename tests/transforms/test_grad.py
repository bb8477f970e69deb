"""grad and value_and_grad: argnums, has_aux, pytrees, holomorphic, allow_int, errors,
perturbation confusion, higher order, symbolic zeros, stop_gradient and checkpoint.

References are hand-derived formulas checked with NumPy float64, or central finite
differences (``_fd``), never plax's own derivatives.
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import dtypes, lax
from plax import numpy as jnp


def _fd(f, x: float, eps: float = 1e-3) -> float:
    """Central difference of a float -> float function evaluated in NumPy float64."""
    return (f(x + eps) - f(x - eps)) / (2 * eps)


X = np.array([0.5, -1.0, 2.0], np.float32)
Y = np.array([1.5, 0.25, -0.75], np.float32)


def _f(x, y):
    return jnp.sum(x * y ** 2 + jnp.sin(x))


# ------------------------------------------------------------------ argnums

def test_argnums_int_tuple_negative():
    gx = Y ** 2 + np.cos(X)                   # d/dx sum(x y^2 + sin x)
    gy = 2 * X * Y                            # d/dy
    np.testing.assert_allclose(plax.grad(_f)(X, Y), gx, rtol=1e-6)
    np.testing.assert_allclose(plax.grad(_f, 1)(X, Y), gy, rtol=1e-6)
    np.testing.assert_allclose(plax.grad(_f, -1)(X, Y), gy, rtol=1e-6)
    a, b = plax.grad(_f, (0, 1))(X, Y)
    np.testing.assert_allclose(a, gx, rtol=1e-6)
    np.testing.assert_allclose(b, gy, rtol=1e-6)
    (b2,) = plax.grad(_f, (1,))(X, Y)        # a 1-tuple argnums gives a 1-tuple
    np.testing.assert_allclose(b2, gy, rtol=1e-6)


@pytest.mark.parametrize("argnums", [2, -3, (0, 2)])
def test_argnums_out_of_range(argnums):
    with pytest.raises(TypeError, match="requires at least 3 positional arguments"):
        plax.grad(_f, argnums)(X, Y)


@pytest.mark.parametrize("argnums,exc,msg", [
    (1.0, TypeError, "argnums must be an int or a tuple of ints"),
    (("a",), TypeError, "argnums must be an int or a tuple of ints"),
    ((), ValueError, "at least one argnum"),
])
def test_argnums_bad_values(argnums, exc, msg):
    with pytest.raises(exc, match=msg):
        plax.grad(_f, argnums)(X, Y)


# ------------------------------------------------------------------ has_aux, value_and_grad

def test_has_aux_returns_aux_unchanged():
    g, aux = plax.grad(lambda x: (jnp.sum(x ** 2), {"x": x, "n": 3}), has_aux=True)(X)
    np.testing.assert_allclose(g, 2 * X)
    np.testing.assert_allclose(aux["x"], X)
    assert aux["n"] == 3


def test_value_and_grad_matches_value_and_fd():
    f = lambda x: jnp.sum(jnp.tanh(x) * x)  # noqa: E731
    val, g = plax.value_and_grad(f)(X)
    x64 = X.astype(np.float64)
    np.testing.assert_allclose(val, np.sum(np.tanh(x64) * x64), rtol=1e-6)
    want = [_fd(lambda t, i=i: np.sum(np.tanh(np.where(np.arange(3) == i, t, x64))
                                      * np.where(np.arange(3) == i, t, x64)), x64[i])
            for i in range(3)]
    np.testing.assert_allclose(g, want, rtol=1e-5)


def test_value_and_grad_has_aux_and_tuple_argnums():
    (val, aux), (gx, gy) = plax.value_and_grad(lambda x, y: (_f(x, y), x * 2), (0, 1),
                                               has_aux=True)(X, Y)
    np.testing.assert_allclose(val, np.sum(X * Y ** 2 + np.sin(X)), rtol=1e-6)
    np.testing.assert_allclose(aux, 2 * X)
    np.testing.assert_allclose(gy, 2 * X * Y, rtol=1e-6)


@pytest.mark.parametrize("out", [
    lambda x: jnp.sum(x),                    # not a pair
    lambda x: (jnp.sum(x), 1, 2),            # a triple
])
def test_has_aux_requires_a_pair(out):
    with pytest.raises(TypeError, match="has_aux=True requires the function to return a pair"):
        plax.grad(out, has_aux=True)(X)


# ------------------------------------------------------------------ outputs and inputs

def test_non_scalar_output_raises():
    with pytest.raises(TypeError, match=r"Gradient only defined for scalar-output functions. "
                                        r"Output had shape: \(3,\)"):
        plax.grad(lambda x: x ** 2)(X)


def test_list_holding_a_scalar_is_not_scalar():
    with pytest.raises(TypeError, match="Gradient only defined for scalar-output functions"):
        plax.grad(lambda x: [jnp.sum(x)])(X)


@pytest.mark.parametrize("arg", [3, np.arange(3, dtype=np.int32), True])
def test_integer_input_raises(arg):
    with pytest.raises(TypeError, match="grad requires real- or complex-valued inputs.*allow_int"):
        plax.grad(lambda x: jnp.sum(x * 2.0))(arg)


def test_integer_and_complex_outputs_raise():
    with pytest.raises(TypeError, match="requires real-valued outputs.*int32.*use jax.vjp"):
        plax.grad(lambda x: jnp.sum(x).astype(jnp.int32))(X)
    with pytest.raises(TypeError, match="complex64.*holomorphic=True"):
        plax.grad(lambda z: z * z)(1.0 + 2.0j)


def test_allow_int_gives_float0_gradient():
    gx, gn = plax.grad(lambda x, n: jnp.sum(x * n), (0, 1), allow_int=True)(X, np.arange(3))
    np.testing.assert_allclose(gx, np.arange(3))
    assert isinstance(gn, np.ndarray) and gn.dtype == dtypes.float0 and gn.shape == (3,)


def test_holomorphic_grad():
    z = 1.0 + 2.0j
    g = plax.grad(lambda z: z ** 3 + 2 * z, holomorphic=True)(z)
    assert g.dtype == np.complex64
    np.testing.assert_allclose(g, 3 * z ** 2 + 2, rtol=1e-6)
    with pytest.raises(TypeError, match="holomorphic=True requires inputs with complex dtype"):
        plax.grad(lambda z: z * z, holomorphic=True)(1.0)


def test_pytree_arguments_and_kwargs():
    params = {"w": X, "b": (1.0, 2.0)}

    def loss(p, scale=1.0):
        return scale * (jnp.sum(p["w"] ** 2) + p["b"][0] * p["b"][1])

    g = plax.grad(loss)(params, scale=3.0)
    assert set(g) == {"w", "b"} and isinstance(g["b"], tuple)
    np.testing.assert_allclose(g["w"], 6 * X, rtol=1e-6)
    np.testing.assert_allclose(g["b"][0], 6.0)
    np.testing.assert_allclose(g["b"][1], 3.0)


def test_gradient_dtype_and_weak_type_follow_the_input():
    g = plax.grad(lambda x: x * x)(3.0)       # a Python float: weakly typed f32
    assert g.dtype == np.float32 and g.weak_type
    g = plax.grad(lambda x: x * x)(jnp.float32(3.0))
    assert g.dtype == np.float32 and not g.weak_type
    g = plax.grad(lambda x: jnp.sum(x.astype(jnp.float32) ** 2))(X.astype(np.float16))
    assert g.dtype == np.float16
    np.testing.assert_allclose(g, 2 * X, rtol=1e-3)


# ------------------------------------------------------------------ nesting

def test_grad_of_closure_over_outer_tracer_no_perturbation_confusion():
    # d/dx [ d/dy (x * y) at y=1 ] = d/dx x = 1
    assert float(plax.grad(lambda x: plax.grad(lambda y: x * y)(1.0))(2.0)) == 1.0

    # The classic: f(x) = x * d/dy (x + y) = x, so f'(x) = 1 (a confused system gives 2).
    def f(x):
        return x * plax.grad(lambda y: x + y)(x)

    assert float(plax.grad(f)(3.0)) == 1.0


def test_nested_grad_with_closure_and_mixed_transforms():
    # g(x) = d/dy[sin(x y)] at y = x = x cos(x^2); g'(x) = cos(x^2) - 2 x^2 sin(x^2)
    g = lambda x: plax.grad(lambda y: jnp.sin(x * y))(x)  # noqa: E731
    x = 0.7
    want = np.cos(x ** 2) - 2 * x ** 2 * np.sin(x ** 2)
    for dg in (plax.grad(g), plax.jit(plax.grad(g)), plax.grad(plax.jit(g))):
        np.testing.assert_allclose(dg(x), want, rtol=1e-5)


def test_higher_order_derivatives():
    f = lambda x: x ** 3 + 2 * x  # noqa: E731  (the seed tutorial's example)
    assert [float(plax.grad(f)(2.0)), float(plax.grad(plax.grad(f))(2.0)),
            float(plax.grad(plax.grad(plax.grad(f)))(2.0))] == [14.0, 12.0, 6.0]
    d3 = plax.grad(plax.grad(plax.grad(jnp.sin)))
    np.testing.assert_allclose(d3(1.0), -np.cos(1.0), rtol=1e-6)
    d4 = plax.jit(plax.grad(plax.grad(plax.grad(plax.grad(jnp.sin)))))
    np.testing.assert_allclose(d4(1.0), np.sin(1.0), rtol=1e-6)


def test_jvp_of_vmap_of_jit_of_grad_chain():
    f = lambda x: jnp.sum(jnp.sin(x) * x)  # noqa: E731  grad: cos(x) x + sin(x)
    g = plax.vmap(plax.jit(plax.grad(f)))
    xs = np.array([[0.1, 0.2], [0.3, -0.4]], np.float32)
    ts = np.array([[1.0, 0.5], [-1.0, 2.0]], np.float32)
    out, tangent = plax.jvp(g, (xs,), (ts,))
    x64 = xs.astype(np.float64)
    np.testing.assert_allclose(out, np.cos(x64) * x64 + np.sin(x64), rtol=1e-6)
    # d/dx [cos(x) x + sin(x)] = 2 cos(x) - x sin(x)
    np.testing.assert_allclose(tangent, (2 * np.cos(x64) - x64 * np.sin(x64)) * ts, rtol=1e-5)


# ------------------------------------------------------------------ symbolic zeros

def _eqn_names(closed):
    return [e.primitive.name for e in closed.jaxpr.eqns]


def test_unused_input_costs_no_equations():
    # grad with respect to an unused input: zeros, and the linearised part has no work for it
    gx, gy = plax.grad(lambda x, y: jnp.sum(jnp.sin(x)), (0, 1))(X, Y)
    np.testing.assert_allclose(gy, np.zeros(3))
    np.testing.assert_allclose(gx, np.cos(X), rtol=1e-6)
    names = _eqn_names(plax.make_jaxpr(plax.grad(lambda x, y: jnp.sum(y ** 2), 0))(X, Y))
    # only the primal (y ** 2, its sum) and the zeros of the result: no tangent arithmetic
    assert "mul" not in names and "add_any" not in names, names
    assert names.count("broadcast_in_dim") == 1


def test_integer_side_input_has_float0_tangent_and_no_work():
    out, t = plax.jvp(lambda x, n: x * n, (2.0, 3), (1.0, np.zeros((), dtypes.float0)))
    assert float(out) == 6.0 and float(t) == 3.0
    names = _eqn_names(plax.make_jaxpr(
        lambda x, n: plax.jvp(lambda a: a * n, (x,), (x,))[1])(2.0, 3))
    assert names.count("mul") == 2  # primal a*n and tangent t*n; nothing for n's tangent


# ------------------------------------------------------------------ stop_gradient, checkpoint

def test_stop_gradient():
    # d/dx [x * sg(x)] = sg(x) = x
    assert float(plax.grad(lambda x: x * lax.stop_gradient(x))(3.0)) == 3.0
    np.testing.assert_allclose(
        plax.vmap(plax.grad(lambda x: x * lax.stop_gradient(x ** 2)))(X), X ** 2)
    assert float(plax.grad(plax.grad(lambda x: lax.stop_gradient(x) * x ** 2))(3.0)) == 6.0
    # pytrees and integers pass through
    out = lax.stop_gradient({"a": jnp.arange(3), "b": X})
    np.testing.assert_array_equal(out["a"], np.arange(3))


@pytest.mark.parametrize("wrap", [plax.checkpoint, plax.remat,
                                  lambda f: plax.checkpoint(f, prevent_cse=False)])
def test_checkpoint_is_correct_under_grad(wrap):
    f = lambda x: jnp.sin(jnp.sin(x)) * x  # noqa: E731
    g = wrap(f)
    x = 0.8
    ref = lambda t: np.sin(np.sin(t)) * t  # noqa: E731
    np.testing.assert_allclose(g(x), ref(x), rtol=1e-6)
    np.testing.assert_allclose(plax.grad(g)(x), _fd(ref, x), rtol=1e-5)
    np.testing.assert_allclose(plax.grad(plax.grad(g))(x),
                               _fd(lambda t: _fd(ref, t), x), rtol=1e-3)
    np.testing.assert_allclose(plax.jit(plax.vmap(plax.grad(g)))(X),
                               [_fd(ref, float(t)) for t in X], rtol=1e-4)


def test_checkpoint_with_policy_and_static_argnums():
    @plax.checkpoint(policy=plax.checkpoint_policies.nothing_saveable, static_argnums=(1,))
    def f(x, n):
        return x ** n

    assert float(plax.grad(f)(2.0, 3)) == 12.0
