"""Seed tutorial "JAX Quickstart" (shared/seeds/002), run with ``import plax as jax``.

IPython's ``%timeit`` lines are replaced by a small timing helper; the GPU lines print
what is available instead (plax runs on the GPU only with a GPU backend installed).

    python examples/seeds/jax_quickstart.py
"""
import os
import time

import numpy as np

import plax as jax
import plax.numpy as jnp
from plax import grad, jit, vmap
from plax import random
from plax import device_put


#: how many rounds of how many calls each timing takes (tests/test_examples.py sets 1: it checks
#: the values the tutorial prints, not the timings, which took most of the script's time)
ROUNDS = int(os.environ.get("PLAX_EXAMPLES_TIMING_ROUNDS", "5"))


def timeit(label, fn, repeat=ROUNDS, number=ROUNDS):
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    print(f"{label}: {best * 1e3:.3f} ms per loop")


print(jax.devices())
print(jax.devices('cpu'))
try:
    print(jax.devices('gpu'))
except RuntimeError as err:
    print("no GPU:", str(err).splitlines()[0])

# Matrix multiplication
size = 1000  # the tutorial uses 5000; smaller here so the example runs in seconds on a laptop
key = random.PRNGKey(0)
x = random.normal(key, (size, size), dtype=jnp.float32)
timeit("jnp.dot(x, x.T)", lambda: jnp.dot(x, x.T).block_until_ready())
x_np = np.random.normal(size=(size, size)).astype(np.float32)
timeit("np.dot(x, x.T)", lambda: np.dot(x_np, x_np.T))
timeit("jnp.dot on a NumPy array", lambda: jnp.dot(x_np, x_np.T).block_until_ready())
x_dev = device_put(x_np)
timeit("jnp.dot after device_put", lambda: jnp.dot(x_dev, x_dev.T).block_until_ready())


# jit
def selu(x, alpha=1.67, lmbda=1.05):
    return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)


x = random.normal(key, (1000000,))
timeit("selu", lambda: selu(x).block_until_ready())
selu_jit = jit(selu)
timeit("selu_jit", lambda: selu_jit(x).block_until_ready())


# grad
def sigmoid(x):
    return 1.0 / (1.0 + jnp.exp(-x))


def sum_logistic(x):
    return jnp.sum(sigmoid(x))


def derivative_sum_logistic(x):
    y = sigmoid(x)
    return y * (1 - y)


def first_finite_differences(f, x):
    eps = 1e-3
    return jnp.array([(f(x + eps * v) - f(x - eps * v)) / (2 * eps)
                      for v in jnp.eye(len(x))])


x_small = jnp.arange(3.)
derivative_fn = grad(sum_logistic)
print(derivative_fn(x_small))
print(derivative_sum_logistic(x_small))
print(first_finite_differences(sum_logistic, x_small))


# vmap
def apply_matrix(v):
    return jnp.dot(mat, v)


def naively_batched_apply_matrix(v_batched):
    return jnp.stack([apply_matrix(v) for v in v_batched])


mat = random.normal(key, (150, 100))
batched_x = random.normal(key, (10, 100))
timeit("Naively batched", lambda: naively_batched_apply_matrix(batched_x).block_until_ready())


@jit
def batched_apply_matrix(v_batched):
    return jnp.dot(v_batched, mat.T)


timeit("Manually batched", lambda: batched_apply_matrix(batched_x).block_until_ready())


@jit
def vmap_batched_apply_matrix(v_batched):
    return vmap(apply_matrix)(v_batched)


timeit("Auto-vectorized with vmap", lambda: vmap_batched_apply_matrix(batched_x).block_until_ready())
np.testing.assert_allclose(batched_apply_matrix(batched_x), vmap_batched_apply_matrix(batched_x),
                           rtol=1e-4, atol=1e-4)
