"""custom_jvp and custom_vjp: the rules are used (they are chosen to differ from the true
derivative, so a test fails if plax differentiates the primal instead), under jit, vmap and
grad in every order, with nondiff_argnums, residuals, pytrees, and the errors."""
from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

import plax
from plax import numpy as jnp

XS = np.array([0.3, -0.7, 1.1], np.float32)


# A function whose custom derivative is 3 cos(x) (the true one is cos(x)).

@plax.custom_jvp
def sin_jvp3(x):
    return jnp.sin(x)


@sin_jvp3.defjvp
def _sin_jvp3_rule(primals, tangents):
    (x,), (t,) = primals, tangents
    return sin_jvp3(x), 3.0 * jnp.cos(x) * t


@plax.custom_vjp
def sin_vjp3(x):
    return jnp.sin(x)


def _sin_vjp3_fwd(x):
    return sin_vjp3(x), jnp.cos(x)       # residual: cos(x)


def _sin_vjp3_bwd(cos_x, ct):
    return (3.0 * cos_x * ct,)


sin_vjp3.defvjp(_sin_vjp3_fwd, _sin_vjp3_bwd)


def _apply(order, f):
    """Composes jit, vmap and grad in the given order (outermost first) around f; grad of a
    batched function sums it first."""
    g = f
    for name in reversed(order):
        if name == "jit":
            g = plax.jit(g)
        elif name == "vmap":
            g = plax.vmap(g)
        else:
            g = plax.grad(lambda x, g=g: jnp.sum(g(x)))
    return g


@pytest.mark.parametrize("order", list(itertools.permutations(("jit", "vmap", "grad"))),
                         ids="-".join)
@pytest.mark.parametrize("fun", [sin_jvp3, sin_vjp3], ids=["custom_jvp", "custom_vjp"])
def test_custom_rule_used_under_every_order(fun, order):
    out = _apply(order, fun)(XS)
    np.testing.assert_allclose(out, 3.0 * np.cos(XS.astype(np.float64)), rtol=1e-6)


@pytest.mark.parametrize("fun", [sin_jvp3, sin_vjp3], ids=["custom_jvp", "custom_vjp"])
def test_primal_values_and_second_order(fun):
    np.testing.assert_allclose(fun(XS), np.sin(XS), rtol=1e-6)
    np.testing.assert_allclose(plax.jit(fun)(XS), np.sin(XS), rtol=1e-6)
    # the rule's own derivative: d/dx 3 cos(x) = -3 sin(x)
    np.testing.assert_allclose(plax.grad(plax.grad(fun))(0.4), -3 * np.sin(0.4), rtol=1e-6)


def test_custom_jvp_under_jvp_and_jacfwd():
    _, t = plax.jvp(sin_jvp3, (XS,), (np.ones(3, np.float32),))
    np.testing.assert_allclose(t, 3 * np.cos(XS), rtol=1e-6)
    np.testing.assert_allclose(plax.jacfwd(sin_jvp3)(XS), np.diag(3 * np.cos(XS)), rtol=1e-6)
    np.testing.assert_allclose(plax.hessian(sin_jvp3)(0.4), -3 * np.sin(0.4), rtol=1e-6)


def test_custom_jvp_two_arguments_and_zero_tangents():
    @plax.custom_jvp
    def f(x, y):
        return x * y

    @f.defjvp
    def f_jvp(primals, tangents):
        x, y = primals
        tx, ty = tangents
        return f(x, y), 10.0 * tx * y + 100.0 * x * ty

    assert float(plax.grad(f)(2.0, 3.0)) == 30.0
    assert float(plax.grad(f, 1)(2.0, 3.0)) == 200.0
    # a tangent that is symbolically zero reaches the rule as zeros
    assert float(plax.jvp(lambda x: f(x, 3.0), (2.0,), (1.0,))[1]) == 30.0


def test_defjvps():
    @plax.custom_jvp
    def f(x, y):
        return jnp.exp(x) * y

    f.defjvps(lambda tx, ans, x, y: 2.0 * ans * tx, None)
    assert float(plax.grad(f)(0.0, 3.0)) == 6.0
    assert float(plax.grad(f, 1)(0.0, 3.0)) == 0.0  # None: no dependence declared


def test_custom_jvp_nondiff_argnums():
    @functools.partial(plax.custom_jvp, nondiff_argnums=(0,))
    def apply(fn, x):
        return fn(x)

    @apply.defjvp
    def apply_jvp(fn, primals, tangents):
        (x,), (t,) = primals, tangents
        return apply(fn, x), 10.0 * t

    for g in (plax.grad(lambda x: apply(jnp.sin, x)),
              plax.jit(plax.grad(lambda x: apply(jnp.sin, x)))):
        assert float(g(1.0)) == 10.0
    np.testing.assert_allclose(plax.vmap(plax.grad(lambda x: apply(jnp.sin, x)))(XS), [10.0] * 3)


def test_custom_vjp_residuals_pytrees_and_none_cotangents():
    @plax.custom_vjp
    def f(p, scale):
        return {"y": jnp.sin(p["a"]) * scale, "z": p["b"] * 2.0}

    def f_fwd(p, scale):
        return f(p, scale), (jnp.cos(p["a"]), scale)

    def f_bwd(res, ct):
        cos_a, scale = res
        return {"a": 5.0 * cos_a * scale * ct["y"], "b": None}, None

    f.defvjp(f_fwd, f_bwd)
    p = {"a": XS, "b": np.float32(1.0)}
    g_p, g_s = plax.grad(lambda p, s: jnp.sum(f(p, s)["y"]) + f(p, s)["z"], (0, 1))(p, 2.0)
    np.testing.assert_allclose(g_p["a"], 10.0 * np.cos(XS), rtol=1e-6)
    assert float(g_p["b"]) == 0.0 and float(g_s) == 0.0


def test_custom_vjp_nondiff_argnums():
    @functools.partial(plax.custom_vjp, nondiff_argnums=(1,))
    def clip_gradient(x, bound):
        return x

    clip_gradient.defvjp(lambda x, bound: (x, None),
                         lambda bound, _, g: (jnp.clip(g, -bound, bound),))
    f = lambda x: 3.0 * clip_gradient(x, 1.0)  # noqa: E731
    assert float(plax.grad(f)(2.0)) == 1.0
    assert float(plax.jit(plax.grad(f))(2.0)) == 1.0
    np.testing.assert_allclose(plax.vmap(plax.grad(f))(XS), [1.0] * 3)


@pytest.mark.parametrize("forward", [
    lambda f: plax.jvp(f, (XS,), (XS,)),
    lambda f: plax.jit(lambda x: plax.jvp(f, (x,), (x,)))(XS),
    lambda f: plax.jvp(plax.jit(f), (XS,), (XS,)),
    lambda f: plax.jacfwd(f)(XS),
    lambda f: plax.hessian(lambda x: jnp.sum(f(x)))(XS),
    lambda f: plax.linearize(f, XS)[1](XS),
])
def test_forward_mode_of_custom_vjp_raises_type_error(forward):
    with pytest.raises(TypeError, match="can't apply forward-mode autodiff .jvp. to a "
                                        "custom_vjp function"):
        forward(sin_vjp3)


def test_custom_functions_closing_over_jit_tracers():
    @plax.jit
    def outer(x, y):
        @plax.custom_jvp
        def k(a):
            return a * y

        k.defjvp(lambda p, t: (k(p[0]), t[0] * y * 10))
        return k(x) + plax.grad(k)(x)

    assert float(outer(2.0, 3.0)) == 6.0 + 30.0
    np.testing.assert_allclose(plax.vmap(outer)(XS, XS), XS * XS + 10 * XS, rtol=1e-6)


# ------------------------------------------------------------------ errors

def test_missing_rules_raise():
    f = plax.custom_jvp(lambda x: x)
    with pytest.raises(AttributeError, match="No JVP defined for custom_jvp function"):
        f(1.0)
    g = plax.custom_vjp(lambda x: x)
    with pytest.raises(AttributeError, match="No VJP defined for custom_vjp function"):
        g(1.0)


def test_bad_jvp_rule_outputs():
    f = plax.custom_jvp(lambda x: jnp.sin(x))
    f.defjvp(lambda p, t: jnp.sin(p[0]))
    with pytest.raises(TypeError, match="must produce a pair"):
        plax.grad(f)(1.0)
    f.defjvp(lambda p, t: ((jnp.sin(p[0]),), t[0]))
    with pytest.raises(TypeError, match="equal container .pytree. structures"):
        plax.grad(f)(1.0)
    f.defjvp(lambda p, t: (jnp.sin(p[0]), jnp.ones(2)))
    with pytest.raises(ValueError, match="equal shapes"):
        plax.jvp(f, (1.0,), (1.0,))


def test_bad_vjp_rule_outputs():
    f = plax.custom_vjp(lambda x, y: x * y)
    f.defvjp(lambda x, y: x * y, lambda r, g: (g, g))
    with pytest.raises(TypeError, match="fwd rule .* must produce a pair"):
        plax.grad(f)(1.0, 2.0)
    f.defvjp(lambda x, y: (x * y, None), lambda r, g: g)
    with pytest.raises(TypeError, match="bwd rule must produce a tuple"):
        plax.grad(f)(1.0, 2.0)
    f.defvjp(lambda x, y: (x * y, None), lambda r, g: (g,))
    with pytest.raises(TypeError, match="returned 1 cotangents for 2 arguments"):
        plax.grad(f)(1.0, 2.0)


def test_custom_vjp_none_cotangent_under_vmap():
    @plax.custom_vjp
    def f(x, y):
        return x * y

    f.defvjp(lambda x, y: (x * y, y), lambda y, g: (g * y, None))
    gx, gy = plax.vmap(plax.grad(f, (0, 1)))(XS, 2 * XS)
    np.testing.assert_allclose(gx, 2 * XS)
    np.testing.assert_allclose(gy, np.zeros(3))


def test_differentiating_a_closed_over_value_raises():
    def outer(x, y):
        @plax.custom_jvp
        def k(a):
            return a * y

        k.defjvp(lambda p, t: (k(p[0]), t[0] * 10.0))
        return k(x)

    with pytest.raises(TypeError, match="with respect to a value it closes over"):
        plax.grad(plax.jit(outer), 1)(2.0, 3.0)
    assert float(plax.jit(outer)(2.0, 3.0)) == 6.0
    # The rule itself closes over the jit-time value of y, gone once the jit is traced: JAX
    # fails here too. Inside the jit (grad taken at trace time) it works.
    with pytest.raises(plax.errors.UnexpectedTracerError):
        plax.grad(plax.jit(outer))(2.0, 3.0)
    assert float(plax.jit(plax.grad(outer))(2.0, 3.0)) == 10.0


def _jvp_of_custom_vjp_log(jax_mod):
    """What JAX's custom-derivatives tutorial prints for jvp of a custom_vjp function: the
    forward rule runs (tracing it calls f), then jvp refuses."""
    log = []

    @jax_mod.custom_vjp
    def f(x):
        log.append("f")
        return jax_mod.numpy.sin(x)

    def f_fwd(x):
        log.append("f_fwd")
        return f(x), jax_mod.numpy.cos(x)

    f.defvjp(f_fwd, lambda cos_x, g: (cos_x * g,))
    with pytest.raises(TypeError) as info:
        jax_mod.jvp(f, (3.,), (1.,))
    return log, str(info.value)


def test_forward_mode_of_custom_vjp_runs_fwd_then_raises():
    assert _jvp_of_custom_vjp_log(plax) == (
        ["f_fwd", "f"], "can't apply forward-mode autodiff (jvp) to a custom_vjp function.")


def test_forward_mode_of_custom_vjp_as_jax():
    jax = pytest.importorskip("jax")
    assert _jvp_of_custom_vjp_log(plax) == _jvp_of_custom_vjp_log(jax)
