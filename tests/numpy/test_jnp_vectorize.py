"""vectorize (signature=, excluded=), frompyfunc and the ufunc class: values against NumPy,
jit, grad, and signature errors."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp


def test_vectorize_scalar_and_signature():
    f = jnp.vectorize(lambda x, y: x * y + 1)
    x, y = np.arange(6.).reshape(2, 3), np.arange(3.)
    np.testing.assert_allclose(f(x, y), x * y + 1)
    dot = jnp.vectorize(jnp.dot, signature="(n),(n)->()")
    a, b = np.random.default_rng(0).standard_normal((2, 4, 3)), np.ones(3)
    np.testing.assert_allclose(dot(a, b), a @ b, rtol=1e-5)
    mv = jnp.vectorize(lambda m, v: m @ v, signature="(m,n),(n)->(m)")
    m = np.random.default_rng(1).standard_normal((5, 2, 3))
    np.testing.assert_allclose(plax.jit(mv)(m, np.ones(3)), m @ np.ones(3), rtol=1e-5)
    two = jnp.vectorize(lambda v: (v.sum(), v.max()), signature="(n)->(),()")
    s, mx = two(m)
    np.testing.assert_allclose(s, m.sum(-1), rtol=1e-5)
    np.testing.assert_allclose(mx, m.max(-1))


def test_vectorize_excluded_and_grad():
    f = jnp.vectorize(lambda x, p: x ** p, excluded={1})
    np.testing.assert_allclose(f(np.arange(3.), 2), np.arange(3.) ** 2)
    g = jnp.vectorize(lambda x, *, scale: x * scale, excluded={"scale"})
    np.testing.assert_allclose(g(np.arange(3.), scale=3.), np.arange(3.) * 3)
    h = jnp.vectorize(lambda x, y: jnp.sin(x) * y)
    grad = plax.grad(lambda x: h(x, 2.0).sum())(jnp.arange(3.))
    np.testing.assert_allclose(grad, 2 * np.cos(np.arange(3.)), rtol=1e-5)


def test_vectorize_errors():
    dot = jnp.vectorize(jnp.dot, signature="(n),(n)->()")
    with pytest.raises(ValueError, match="core dimension"):
        dot(np.ones(3), np.ones(4))
    with pytest.raises(ValueError):
        dot(np.ones(()), np.ones(3))
    with pytest.raises(ValueError, match="signature"):
        jnp.vectorize(jnp.dot, signature="(n)->")(np.ones(3))


def test_frompyfunc_and_ufunc_methods():
    mul = jnp.frompyfunc(lambda x, y: x * y, 2, 1, identity=1)
    assert isinstance(mul, jnp.ufunc) and mul.nin == 2 and mul.nout == 1 and mul.identity == 1
    x = np.arange(1, 5)
    np.testing.assert_array_equal(mul(x, 2), x * 2)
    np.testing.assert_array_equal(mul.outer(x, x[:2]), np.multiply.outer(x, x[:2]))
    np.testing.assert_array_equal(mul.reduce(x), np.prod(x))
    m = np.arange(1, 7).reshape(2, 3)
    np.testing.assert_array_equal(mul.reduce(m, axis=1, keepdims=True), m.prod(1, keepdims=True))
    np.testing.assert_array_equal(mul.accumulate(m, axis=1), np.cumprod(m, 1))
    np.testing.assert_array_equal(mul.at(np.ones(3), 1, 5., inplace=False), [1, 5, 1])
    np.testing.assert_array_equal(plax.jit(mul.reduce)(x), 24)
    with pytest.raises(NotImplementedError, match="inplace=False"):
        mul.at(np.ones(3), 1, 5.)
    add = jnp.ufunc(lambda a, b: a + b, 2, 1, identity=0)
    np.testing.assert_array_equal(add.reduce(np.zeros((0,), np.int32)), 0)
