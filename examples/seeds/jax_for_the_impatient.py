"""Seed tutorial "JAX for the Impatient" (shared/seeds/003), run unchanged with ``import plax as jax``.

The printed values match the tutorial's (the PRNG is bit-identical to JAX; the tutorial
was recorded with ``jax_threefry_partitionable=False``, which this script sets).

    python examples/seeds/jax_for_the_impatient.py
"""
import os
import time

import plax as jax
from plax import numpy as jnp, random

import numpy as np  # We import the standard NumPy library

jax.config.update("jax_threefry_partitionable", False)  # the tutorial's (older) JAX default


#: how many rounds each timing takes, of twice as many calls (tests/test_examples.py sets 1: it
#: checks the values the tutorial prints, not the timings)
ROUNDS = int(os.environ.get("PLAX_EXAMPLES_TIMING_ROUNDS", "5"))


def timeit(fn, repeat=ROUNDS):
    fn()
    best = min(_once(fn) for _ in range(repeat))
    print(f"{best * 1e6:.1f} µs per loop (best of {repeat})")


def _once(fn, number=2 * ROUNDS):
    start = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - start) / number


# ## NumPy API
m = jnp.ones((4, 4))
n = jnp.array([[1.0, 2.0, 3.0, 4.0],
               [5.0, 6.0, 7.0, 8.0]])
print(repr(m))
print(repr(jnp.dot(n, m).block_until_ready()))
x = np.random.normal(size=(4, 4))
print(repr(jnp.dot(x, m)))
x = np.random.normal(size=(4, 4))
x = jax.device_put(x)
print(repr(x))
x = jnp.array([[1.0, 2.0, 3.0, 4.0],
               [5.0, 6.0, 7.0, 8.0]])
print(repr(np.array(x)))

# ## Immutability
x = jnp.array([[1.0, 2.0, 3.0, 4.0],
               [5.0, 6.0, 7.0, 8.0]])
updated = x.at[0, 0].set(3.0)
print("x: \n", x)
print("updated: \n", updated)

# ## Random numbers
key = random.PRNGKey(0)
print(repr(key))
for i in range(3):
    print("Printing the random number using key: ", key, " gives: ", random.normal(key, shape=(1,)))
print("old key", key, "--> normal", random.normal(key, shape=(1,)))
key, subkey = random.split(key)
print("    \\---SPLIT --> new key   ", key, "--> normal", random.normal(key, shape=(1,)))
print("             \\--> new subkey", subkey, "--> normal", random.normal(subkey, shape=(1,)))
key, *subkeys = random.split(key, 4)
print(key, subkeys)

# ## Gradients
key = random.PRNGKey(0)


def f(x):
    return jnp.dot(x.T, x) / 2.0


v = jnp.ones((4,))
print(repr(f(v)))
v = random.normal(key, (4,))
print("Original v:")
print(v)
print("Gradient of f taken at point v")
print(jax.grad(f)(v))  # should be equal to v !


def f(x):
    return jnp.multiply(x, x) / 2.0


x = random.normal(key, (5,))
v = jnp.ones(5)
print("(x,f(x))")
print((x, f(x)))
print("jax.jvp(f, (x,),(v,))")
print(jax.jvp(f, (x,), (v,)))
(val, jvp_fun) = jax.vjp(f, x)
print("x = ", x)
print("v^T Jf(x) = ", jvp_fun(jnp.ones((5,)))[0])


# ## jit
def selu(x, alpha=1.67, lmbda=1.05):
    return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)


v = random.normal(key, (1000000,))
timeit(lambda: selu(v).block_until_ready())
selu_jit = jax.jit(selu)
timeit(lambda: selu_jit(v).block_until_ready())

# ## Vectorization
mat = random.normal(key, (15, 10))
batched_x = random.normal(key, (5, 10))
single = random.normal(key, (10,))


def apply_matrix(v):
    return jnp.dot(mat, v)


print("Single apply shape: ", apply_matrix(single).shape)
print("Batched example shape: ", jax.vmap(apply_matrix)(batched_x).shape)


# ## Linear regression
def predict(W, b, x):
    return jnp.dot(x, W) + b


def mse(W, b, x_batched, y_batched):
    def squared_error(x, y):
        y_pred = predict(W, b, x)
        return jnp.inner(y - y_pred, y - y_pred) / 2.0
    return jnp.mean(jax.vmap(squared_error)(x_batched, y_batched), axis=0)


n_samples = 20
x_dim = 10
y_dim = 5
key = random.PRNGKey(0)
k1, k2 = random.split(key)
W = random.normal(k1, (x_dim, y_dim))
b = random.normal(k2, (y_dim,))
key_sample, key_noise = random.split(k1)
x_samples = random.normal(key_sample, (n_samples, x_dim))
y_samples = predict(W, b, x_samples) + 0.1 * random.normal(key_noise, (n_samples, y_dim))
print('x shape:', x_samples.shape, '; y shape:', y_samples.shape)

W_hat = jnp.zeros_like(W)
b_hat = jnp.zeros_like(b)


@jax.jit
def update_params(W, b, x, y, lr):
    W, b = W - lr * jax.grad(mse, 0)(W, b, x, y), b - lr * jax.grad(mse, 1)(W, b, x, y)
    return W, b


learning_rate = 0.3
print('Loss for "true" W,b: ', mse(W, b, x_samples, y_samples))
for i in range(101):
    W_hat, b_hat = update_params(W_hat, b_hat, x_samples, y_samples, learning_rate)
    if (i % 5 == 0):
        print(f"Loss step {i}: ", mse(W_hat, b_hat, x_samples, y_samples))

# ## Pytrees
from plax import tree_util  # noqa: E402

t = [1, {"k1": 2, "k2": (3, 4)}, 5]
print(tree_util.tree_map(lambda x: x * x, t))
t2 = tree_util.tree_map(lambda x: x * x, t)
print(tree_util.tree_map(lambda x, y: x + y, t, t2))


def predict_pytree(params, x):
    return jnp.dot(x, params['W']) + params['b']


def mse_pytree(params, x_batched, y_batched):
    def squared_error(x, y):
        y_pred = predict_pytree(params, x)
        return jnp.inner(y - y_pred, y - y_pred) / 2.0
    return jnp.mean(jax.vmap(squared_error)(x_batched, y_batched), axis=0)


params = {'W': jnp.zeros_like(W), 'b': jnp.zeros_like(b)}
print(jax.grad(mse_pytree)(params, x_samples, y_samples))


@jax.jit
def update_params_pytree(params, learning_rate, x_samples, y_samples):
    params = jax.tree_map(
        lambda p, g: p - learning_rate * g, params,
        jax.grad(mse_pytree)(params, x_samples, y_samples))
    return params


print('Loss for "true" W,b: ', mse_pytree({'W': W, 'b': b}, x_samples, y_samples))
for i in range(101):
    params = update_params_pytree(params, learning_rate, x_samples, y_samples)
    if (i % 5 == 0):
        print(f"Loss step {i}: ", mse_pytree(params, x_samples, y_samples))

loss_grad_fn = jax.value_and_grad(mse_pytree)
for i in range(101):
    loss_val, grads = loss_grad_fn(params, x_samples, y_samples)
    params = jax.tree_map(lambda p, g: p - learning_rate * g, params, grads)
    if (i % 5 == 0):
        print(f"Loss step {i}: ", loss_val)
