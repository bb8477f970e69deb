"""plax.closure_convert: traced closed-over values become explicit trailing arguments, so a
custom_vjp can return their cotangents (checked against implicit differentiation in float64)."""
import numpy as np
import pytest

import plax
import plax.numpy as jnp


def test_concrete_closure_hoists_nothing():
    w = jnp.asarray(3.0)
    g, hoisted = plax.closure_convert(lambda x: w * x, 2.0)
    assert hoisted == []
    assert float(g(2.0)) == 6.0


def test_traced_float_closure_is_hoisted_and_values_agree():
    def outer(w):
        g, hoisted = plax.closure_convert(lambda x, y: jnp.sin(w * x) + y, 1.0, 2.0)
        assert len(hoisted) == 1
        return g(0.5, 2.0, *hoisted)
    assert np.isclose(float(plax.jit(outer)(0.7)), np.sin(0.35) + 2.0, rtol=1e-6)
    np.testing.assert_allclose(float(plax.grad(outer)(0.7)), 0.5 * np.cos(0.35), rtol=1e-5)


def _solve_scalar(f_of, c):
    """The root of x - f_of(x) = c by fixed-point iteration, with an implicit-function VJP
    written for closure-converted functions."""
    @plax.custom_vjp
    def solve(c, *consts):
        x = c
        for _ in range(60):
            x = c + f_of(x, *consts)
        return x

    def fwd(c, *consts):
        x = solve(c, *consts)
        return x, (x, consts)

    def bwd(res, g):
        x, consts = res
        dfdx = plax.grad(f_of, 0)(x, *consts)
        u = g / (1.0 - dfdx)
        _, vjp = plax.vjp(lambda *cs: f_of(x, *cs), *consts)
        return (u,) + tuple(vjp(u))

    solve.defvjp(fwd, bwd)
    return solve


def test_custom_vjp_gets_the_cotangent_of_a_closed_over_value():
    def loss(a, c):
        f = lambda x: 0.5 * jnp.tanh(a * x)             # closes over the traced ``a``
        conv, hoisted = plax.closure_convert(f, c)
        return _solve_scalar(conv, c)(c, *hoisted)

    a, c = 0.8, 0.3
    x = c
    for _ in range(200):  # the root in float64
        x = c + 0.5 * np.tanh(a * x)
    s = 0.5 / np.cosh(a * x) ** 2
    np.testing.assert_allclose(float(loss(a, c)), x, rtol=1e-6)
    # implicit differentiation of x = c + 0.5 tanh(a x)
    np.testing.assert_allclose(float(plax.grad(loss, 0)(a, c)), s * x / (1 - s * a), rtol=1e-5)
    np.testing.assert_allclose(float(plax.grad(loss, 1)(a, c)), 1 / (1 - s * a), rtol=1e-5)


def test_vmap_and_pytrees():
    def outer(w):
        g, hoisted = plax.closure_convert(lambda p: {"s": p["a"] * w, "t": p["b"]},
                                          {"a": 1.0, "b": jnp.ones(2)})
        return g({"a": 2.0, "b": jnp.arange(2.0)}, *hoisted)["s"]
    ws = jnp.arange(3.0)
    np.testing.assert_allclose(np.asarray(plax.vmap(outer)(ws)), 2.0 * np.arange(3.0))


def test_wrong_argument_structure_is_a_type_error():
    def outer(w):
        g, hoisted = plax.closure_convert(lambda x: x * w, 1.0)
        return g((1.0, 2.0), *hoisted)
    with pytest.raises(TypeError, match="closure_convert"):
        plax.grad(outer)(1.0)
