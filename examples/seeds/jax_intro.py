"""Seed tutorial "JAX introduction" (shared/seeds/001): grad, jit, vmap, jaxpr.

    python examples/seeds/jax_intro.py
"""
import time

import numpy as np

import plax as jax
from plax import numpy as jnp
from plax import grad, jit, vmap


def f(x):
    return x**3 + 2*x


grad_f = grad(f)
grad_grad_f = grad(grad_f)
grad_grad_grad_f = grad(grad_grad_f)
print(grad_f(2.), grad_grad_f(2.), grad_grad_grad_f(2.))  # 14.0 12.0 6.0


def f(x):
    return jnp.sum(x * x)


print(repr(grad(f)(jnp.array([1, 2, 3.]))))  # [2., 4., 6.]


def norm(X):
    X = X - X.mean(0)
    return X / X.std(0)


norm_compiled = jit(norm)
X = jnp.array(np.random.rand(10000, 100))
for name, fn in (("norm", norm), ("norm_compiled", norm_compiled)):
    fn(X).block_until_ready()
    start = time.perf_counter()
    for _ in range(10):
        fn(X).block_until_ready()
    print(f"{name}: {(time.perf_counter() - start) / 10 * 1e3:.2f} ms per loop")
np.testing.assert_allclose(norm(X), norm_compiled(X), rtol=1e-5, atol=1e-5)


def vec_vec_dot(x, y):
    """vector-vector dot, ([a], [a]) -> []"""
    return jnp.dot(x, y)


x = jnp.array([1, 1, 2])
y = jnp.array([2, 1, 1, ])
print(repr(vec_vec_dot(x, y)))  # Array(5, dtype=int32)
mat_vec = vmap(vec_vec_dot, in_axes=(0, None), out_axes=0)
xx = jnp.array([[1, 1, 2], [1, 1, 2]])
print(repr(mat_vec(xx, y)))  # Array([5, 5], dtype=int32)

x = jnp.arange(8)
y = jnp.arange(8)
print(repr(vmap(jnp.add)(x, y)))

# transformations compose in any order: the second derivative of sin, vectorised and compiled
d2sin = jit(vmap(grad(grad(jnp.sin))))
print(d2sin(jnp.arange(3.)))  # -sin(x)
print(jax.make_jaxpr(d2sin)(jnp.arange(3.)))
