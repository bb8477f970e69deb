"""plax-jet: known series, agreement with repeated jvp, the rules' coverage, and the error
when the plugin is absent."""
from __future__ import annotations

import importlib
import math
import sys

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.experimental.jet import jet


def _repeated_jvp(f, x, v, order):
    """Derivatives d^k/dt^k f(x + t v) at t = 0 for k = 1..order, by nesting jvp."""
    def along(g):
        return lambda y: plax.jvp(g, (y,), (v,))[1]
    out, g = [], f
    for _ in range(order):
        g = along(g)
        out.append(g(x))
    return out


def _check_against_jvp(f, x, order=4, rtol=2e-4, atol=1e-4):
    x = jnp.asarray(x, jnp.float32)
    v = jnp.ones_like(x)
    zeros = [jnp.zeros_like(x)] * (order - 1)
    primal, series = jet(f, (x,), ([v] + zeros,))
    np.testing.assert_allclose(primal, f(x), rtol=1e-6)
    for got, want in zip(series, _repeated_jvp(f, x, v, order)):
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def test_exp_series_is_all_ones():
    primal, series = jet(jnp.exp, (0.,), ((1., 0., 0., 0.),))
    np.testing.assert_allclose([primal] + series, [1.] * 5, rtol=1e-6)


def test_sin_series_cycles():
    x = 0.7
    _, series = jet(jnp.sin, (x,), ((1., 0., 0., 0., 0.),))
    want = [math.cos(x), -math.sin(x), -math.cos(x), math.sin(x), math.cos(x)]
    np.testing.assert_allclose(series, want, rtol=1e-5)


def test_higher_input_terms_follow_faa_di_bruno():
    # f(x(t)) with x(t) = t + t^2 (x' = 1, x'' = 2): d2/dt2 exp(x(t)) at 0 = x'^2 + x'' = 3
    _, series = jet(jnp.exp, (0.,), ((1., 2.),))
    np.testing.assert_allclose(series, [1., 3.], rtol=1e-6)


ELEMENTWISE = {
    "add_sub_mul_neg": lambda x: -(x * x - 3. * x + 1.),
    "div": lambda x: (x + 2.) / (x * x + 1.),
    "exp_log": lambda x: jnp.log(jnp.exp(x) + x * x + 1.),
    "log1p_expm1": lambda x: jnp.log1p(x * x) + jnp.expm1(x),
    "sin_cos": lambda x: jnp.sin(x) * jnp.cos(2. * x),
    "tanh": jnp.tanh,
    "logistic": plax.nn.sigmoid if hasattr(plax, "nn") else lax.logistic,
    "sqrt_rsqrt": lambda x: jnp.sqrt(x + 2.) + lax.rsqrt(x + 3.),
    "integer_pow": lambda x: x ** 3 + x ** -2,
    "square": lambda x: jnp.square(x) + lax.square(jnp.sin(x)) + jnp.hypot(x, 2.),
    "pow_const": lambda x: jnp.power(x + 2., 1.5),
    "pow_series": lambda x: jnp.power(x + 2., x),
    "abs_max_min": lambda x: jnp.abs(x) + jnp.maximum(x, 0.3) + jnp.minimum(2. * x, 0.1),
}


@pytest.mark.parametrize("name", sorted(ELEMENTWISE))
def test_elementwise_against_repeated_jvp(name):
    _check_against_jvp(ELEMENTWISE[name], np.array([0.6, -0.4, 1.3], np.float32))


STRUCTURAL = {
    "reduce_sum": lambda x: jnp.sum(jnp.sin(x)) * x,
    "reduce_max": lambda x: jnp.max(x * x) * x,
    "reshape_transpose": lambda x: jnp.ravel(jnp.reshape(jnp.exp(x), (2, 3)).T),
    "broadcast": lambda x: jnp.sum(jnp.sin(x)[:, None] * jnp.ones((6, 2)), axis=1),
    "slice_concatenate": lambda x: jnp.concatenate([jnp.exp(x[:3]), jnp.sin(x[3:])]),
    "select_n": lambda x: jnp.where(x > 0, jnp.exp(x), x ** 2),
    "convert": lambda x: (jnp.cos(x) * (x + 2.).astype(jnp.int32).astype(jnp.float32)
                          + lax.convert_element_type(jnp.exp(x), jnp.float32)),
    "dot_general": lambda x: jnp.reshape(x, (2, 3)).T @ jnp.sin(jnp.reshape(x, (2, 3))) @ x[:3],
    "gather_dynamic_slice": lambda x: jnp.exp(x)[jnp.array([0, 2, 2, 5, 1, 3])] + x[1] * x,
    "jit_call": lambda x: plax.jit(lambda y: jnp.tanh(y) * y)(x),
}


@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_structural_against_repeated_jvp(name):
    _check_against_jvp(STRUCTURAL[name],
                       np.array([0.6, -0.4, 1.3, 0.2, -1.1, 0.9], np.float32), order=3)


def test_pytrees_and_constant_outputs():
    primal, series = jet(lambda x, y: (x * y, x + 1), (2., 3.), ([1., 0.], [0., 0.]))
    np.testing.assert_allclose(primal, (6., 3.))
    np.testing.assert_allclose(series, ([3., 0.], [1., 0.]))
    _, series = jet(lambda x: (x > 0, jnp.float32(3.)), (1.,), ((1., 1.),))
    np.testing.assert_allclose(series, ([0., 0.], [0., 0.]))


def test_first_order_is_jvp():
    f = lambda x: jnp.sum(jnp.tanh(x) ** 2)  # noqa: E731
    x, v = jnp.array([0.1, 0.5]), jnp.array([1., -2.])
    _, (t,) = jet(f, (x,), ([v],))
    np.testing.assert_allclose(t, plax.jvp(f, (x,), (v,))[1], rtol=1e-6)


def test_bad_series_raise():
    with pytest.raises(ValueError, match="inconsistent lengths"):
        jet(lambda x, y: x + y, (0., 1.), ((1., 0.), (1.,)))
    with pytest.raises(ValueError, match="does not match its primal"):
        jet(jnp.sin, (jnp.ones(2),), ((jnp.ones(3),),))


def test_missing_rule_names_the_primitive_and_jet():
    with pytest.raises(NotImplementedError, match=r"'cumprod' has no 'jet' rule"):
        jet(jnp.cumprod, (jnp.ones(3),), ([jnp.ones(3)],))


def test_plugin_registers_its_own_transform_table():
    from plax.core import rule_table, transforms
    assert "jet" in transforms()
    assert lax.sin_p in rule_table("jet")


def test_absent_plugin_gives_a_clear_error(monkeypatch):
    from plax import plugins

    real = plugins._entry_points
    monkeypatch.setattr(plugins, "_entry_points",
                        lambda group: [ep for ep in real(group) if ep.name != "jet"])
    monkeypatch.delitem(sys.modules, "plax.experimental.jet", raising=False)
    monkeypatch.delattr(plax.experimental, "jet", raising=False)
    plugins.reset()
    try:
        with pytest.raises(AttributeError, match="'plax-jet', which is not installed"):
            plax.experimental.jet
        with pytest.raises(ImportError, match="pip install -e plugins/plax_jet"):
            importlib.import_module("plax.experimental.jet")
        assert float(jnp.cos(0.)) == 1.0
    finally:
        monkeypatch.undo()
        plugins.reset()
    assert plax.experimental.jet.jet is jet


def test_stack_and_unstack_series_against_the_derivatives():
    # f(x) = sin x + x**3 through one stack and one unstack equation: its first two Taylor
    # coefficients along v = 1 are cos x + 3x**2 and -sin x + 6x
    def f(x):
        return jnp.stack([jnp.sin(x), x * x])[0] + lax.unstack(jnp.stack([x, x]))[1] ** 3
    x = np.float32(0.7)
    primal, (d1, d2) = jet(f, (x,), ([np.float32(1.0), np.float32(0.0)],))
    np.testing.assert_allclose(float(primal), math.sin(0.7) + 0.7 ** 3, rtol=1e-6)
    np.testing.assert_allclose(float(d1), math.cos(0.7) + 3 * 0.7 ** 2, rtol=1e-6)
    np.testing.assert_allclose(float(d2), -math.sin(0.7) + 6 * 0.7, rtol=1e-6)


def test_split_series_against_the_derivatives():
    # f(x) = sum(sin(x[1:])) through one split equation: its Taylor coefficients along v = 1
    # are sum(cos x[1:]) and -sum(sin x[1:]) (jet's second term is f'' v v)
    x = np.array([0.3, 0.5, 0.7, 0.9])
    primal, (d1, d2) = jet(lambda x: jnp.sin(jnp.split(x, [1])[1]).sum(), (x,),
                           ([np.ones(4), np.zeros(4)],))
    np.testing.assert_allclose(float(primal), np.sin(x[1:]).sum(), rtol=1e-6)
    np.testing.assert_allclose(float(d1), np.cos(x[1:]).sum(), rtol=1e-6)
    np.testing.assert_allclose(float(d2), -np.sin(x[1:]).sum(), rtol=1e-6)
