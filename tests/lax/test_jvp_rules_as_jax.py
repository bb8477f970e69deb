"""The JVP rules of ``add``, ``sub``, ``max``, ``min`` and ``pow`` written as JAX 0.10.2's
(issue 25): a symbolic-zero tangent of ``add``/``sub`` passes the other tangent through
(nothing instantiated, nothing added), ``max``/``min``/``pow`` reuse the result and split a
tie as ``(x == z ? 1 : 0) / (y == z ? 2 : 1)``. Their jaxprs are compared with JAX's in
``test_staging_as_jax.py`` (cases ``jvp_*``); here the values: derivatives against finite
differences and hand-derived float64 references.
"""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from plax.test_util import check_grads

R = np.random.default_rng(25)


@pytest.mark.parametrize("name,fn", [
    ("add_constant", lambda x: lax.add(x, jnp.full(x.shape, 2.0, x.dtype))),
    ("constant_minus", lambda x: lax.sub(jnp.full(x.shape, 2.0, x.dtype), x)),
    ("minus_constant", lambda x: lax.sub(x, jnp.full(x.shape, 2.0, x.dtype))),
    ("add_broadcast", lambda x: lax.add(x[:1], jnp.ones((3, 4), x.dtype))),
    ("max", lambda x: lax.max(x, jnp.sin(x))), ("min", lambda x: lax.min(x, 0.5 * x)),
    ("pow", lambda x: lax.pow(jnp.abs(x) + 0.5, jnp.cos(x))),
    ("pow_constant_base", lambda x: lax.pow(jnp.full(x.shape, 3.0, x.dtype), x)),
])
def test_derivatives_against_finite_differences(name, fn):
    x = R.standard_normal((3, 4))
    with plax.enable_x64():
        check_grads(fn, (x,), order=2, modes=("fwd", "rev"))


def test_one_zero_tangent_passes_the_other_through():
    x = np.arange(3.0, dtype=np.float32)
    t = np.array([1.0, -2.0, 0.5], np.float32)
    for f, sign in [(lambda x: x + 2.0, 1), (lambda x: 2.0 - x, -1), (lambda x: x - 2.0, 1)]:
        _, tangent = plax.jvp(f, (x,), (t,))
        np.testing.assert_array_equal(np.asarray(tangent), sign * t)
    # a rank-0 tangent against a vector constant: broadcast to the result's shape
    _, tangent = plax.jvp(lambda s: s + jnp.ones(3), (np.float32(1.0),), (np.float32(4.0),))
    np.testing.assert_array_equal(np.asarray(tangent), np.full(3, 4.0, np.float32))


def test_max_and_min_split_ties_evenly():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = np.array([1.0, 5.0, 0.0], np.float32)  # a tie, y larger, x larger
    for op, x_wins in [(lax.max, np.array([0.5, 0.0, 1.0])), (lax.min, np.array([0.5, 1.0, 0.0]))]:
        gx, gy = plax.grad(lambda x, y: jnp.sum(op(x, y)), argnums=(0, 1))(x, y)
        np.testing.assert_array_equal(np.asarray(gx, np.float64), x_wins)
        np.testing.assert_array_equal(np.asarray(gy, np.float64), 1 - x_wins)


def test_pow_derivatives_against_the_formulas():
    x = np.array([0.5, 2.0, 0.0, 3.0])
    y = np.array([1.5, -1.0, 2.0, 0.0])
    with plax.enable_x64():
        gx, gy = plax.vmap(plax.grad(lax.pow, argnums=(0, 1)))(x, y)
    np.testing.assert_allclose(np.asarray(gx), y * x ** (y - 1), rtol=1e-12)
    # d/dy at x == 0 (y > 0): 0 ** y * log(1) = 0, as JAX's rule gives
    want = np.where(x == 0, 0.0, np.log(np.where(x == 0, 1.0, x)) * x ** y)
    np.testing.assert_allclose(np.asarray(gy), want, rtol=1e-12)


def test_same_tangents_as_jax():
    jax = pytest.importorskip("jax", reason="compares with JAX itself")
    x = np.array([0.0, 0.5, 2.0, 2.0], np.float32)
    y = np.array([1.0, 0.5, -1.0, 2.0], np.float32)
    t = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    for name in ("max", "min", "pow", "add", "sub"):
        ours = plax.jvp(lambda x: getattr(lax, name)(x, y), (x,), (t,))[1]
        theirs = jax.jvp(lambda x: getattr(jax.lax, name)(x, y), (x,), (t,))[1]
        np.testing.assert_array_equal(np.asarray(ours), np.asarray(theirs), err_msg=name)
