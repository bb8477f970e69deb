"""logaddexp differentiates as JAX does: e^(x - out) for each operand, 1/2 each at a tie (the
stable form's max and |x - y| kinks would otherwise cancel to 0), +inf operands read as 0 in
the weights, and higher derivatives through the same rule."""
from __future__ import annotations

import math

import numpy as np
import pytest

import plax
from plax import numpy as jnp

INF = math.inf


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z))


@pytest.mark.parametrize("x,y", [(0.0, 0.0), (1.0, 3.0), (-2.5, 0.5), (4.0, 4.0), (-30.0, 2.0)])
def test_gradient_is_the_softmax_weight(x, y):
    gx, gy = plax.grad(jnp.logaddexp, argnums=(0, 1))(x, y)
    np.testing.assert_allclose([float(gx), float(gy)], [_sigmoid(x - y), _sigmoid(y - x)],
                               rtol=1e-6, atol=1e-7)


def test_gradient_matches_finite_differences_in_float64():
    with plax.config.override("jax_enable_x64", True):
        x = np.linspace(-3.0, 3.0, 7)
        y = np.array([0.5, -1.0, 2.0, 0.0, 1.5, -3.0, 3.0])
        g = np.asarray(plax.grad(lambda a: jnp.logaddexp(a, y).sum())(x))
        eps = 1e-6
        fd = (np.logaddexp(x + eps, y) - np.logaddexp(x - eps, y)) / (2 * eps)
        np.testing.assert_allclose(g, fd, rtol=1e-7)


def test_second_derivative_at_a_tie():
    # d2/dx2 log(e^x + e^c) = s (1 - s) with s = sigmoid(x - c): 1/4 at the tie
    assert float(plax.hessian(lambda x: jnp.logaddexp(x, 0.0))(0.0)) == pytest.approx(0.25)
    h = float(plax.hessian(lambda x: jnp.logaddexp(x, 1.0))(0.3))
    s = _sigmoid(0.3 - 1.0)
    assert h == pytest.approx(s * (1 - s), rel=1e-5)


@pytest.mark.parametrize("x,y,want", [
    (2.0, -INF, (1.0, 0.0)),
    (INF, INF, (1.0, 1.0)),
    (INF, -INF, (1.0, 0.0)),
    (INF, 1.0, (1.0, math.e)),      # JAX's weights read +inf as 0: e^(1 - 0)
])
def test_infinite_operands_follow_jax(x, y, want):
    gx, gy = plax.grad(jnp.logaddexp, argnums=(0, 1))(x, y)
    np.testing.assert_allclose([float(gx), float(gy)], want, rtol=1e-6)


def test_both_minus_infinity_gives_nan_as_in_jax():
    gx, gy = plax.grad(jnp.logaddexp, argnums=(0, 1))(-INF, -INF)
    assert math.isnan(float(gx)) and math.isnan(float(gy))


def test_jit_vmap_and_logaddexp2():
    xs = jnp.array([0.0, 1.0, 2.0])
    g = plax.jit(plax.vmap(plax.grad(jnp.logaddexp)))(xs, jnp.ones(3))
    np.testing.assert_allclose(np.asarray(g), [_sigmoid(-1.0), 0.5, _sigmoid(1.0)], rtol=1e-6)
    # log2(2^x + 2^x) = x + 1: derivative 1 everywhere, 1/2 per operand at the tie
    assert float(plax.grad(lambda x: jnp.logaddexp2(x, x))(2.0)) == pytest.approx(1.0)
    assert float(plax.grad(lambda x: jnp.logaddexp2(x, 2.0))(2.0)) == pytest.approx(0.5)
