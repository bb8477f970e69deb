"""The plax quickstart: the tour of the seed tutorials with ``import plax as jax``.

Runs on the default device: an accelerator platform's when a backend for one is
installed, else the CPU, with the highest-priority backend of that platform (it prints
``plax.devices()`` and ``plax.default_backend()``). Set ``PLAX_BACKEND=numpy`` to force
the NumPy reference backend (on the CPU), or ``PLAX_PLATFORMS=cpu`` to stay on the CPU.

    python examples/quickstart.py
"""
from __future__ import annotations

import os
import time

import numpy as np

import plax as jax
from plax import numpy as jnp
from plax import random


def timeit(fn, repeat: int | None = None, number: int | None = None) -> float:
    """Best time per call in seconds (like IPython's %timeit); ``repeat`` rounds (default:
    ``PLAX_EXAMPLES_TIMING_ROUNDS``, else 7; the tests set 1)."""
    if repeat is None:
        repeat = int(os.environ.get("PLAX_EXAMPLES_TIMING_ROUNDS", "7"))
    fn()  # warm up (and compile)
    if number is None:
        number, t = 1, 0.0
        while t < 0.05 and number < 10_000:
            start = time.perf_counter()
            for _ in range(number):
                fn()
            t = time.perf_counter() - start
            number *= 2
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def fmt(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    return f"{seconds * 1e3:.2f} ms"


def section(title: str) -> None:
    print(f"\n== {title} ==")


def main() -> None:
    section("devices")
    print("devices:", jax.devices())
    print("default backend:", jax.default_backend())

    section("NumPy API and immutability")
    m = jnp.ones((4, 4))
    n = jnp.array([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
    print(repr(jnp.dot(n, m).block_until_ready()))
    updated = n.at[0, 0].set(3.0)
    print("n[0, 0] after n.at[0, 0].set(3.0):", n[0, 0], "| updated[0, 0]:", updated[0, 0])
    try:
        n[0, 0] = 3.0
    except TypeError as err:
        print("n[0, 0] = 3.0 ->", type(err).__name__)

    section("random numbers")
    key = random.PRNGKey(0)
    print("key:", repr(key))
    key, subkey = random.split(key)
    print("normal(subkey, (3,)):", random.normal(subkey, (3,)))

    section("jit: selu on 1,000,000 values")

    def selu(x, alpha=1.67, lmbda=1.05):
        return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)

    x = random.normal(key, (1_000_000,))
    selu_jit = jax.jit(selu)
    t_eager = timeit(lambda: selu(x).block_until_ready())
    t_jit = timeit(lambda: selu_jit(x).block_until_ready())
    print(f"selu eager: {fmt(t_eager)}   selu jit: {fmt(t_jit)}   speed-up: {t_eager / t_jit:.1f}x")

    section("grad")
    f = lambda x: x ** 3 + 2 * x  # noqa: E731
    print("grad:", jax.grad(f)(2.0), jax.grad(jax.grad(f))(2.0), jax.grad(jax.grad(jax.grad(f)))(2.0))

    def sum_logistic(x):
        return jnp.sum(1.0 / (1.0 + jnp.exp(-x)))

    print("grad(sum_logistic)(arange(3.)):", jax.grad(sum_logistic)(jnp.arange(3.0)))
    print(jax.make_jaxpr(jax.grad(f))(2.0))

    section("vmap")
    mat = random.normal(key, (150, 100))
    batched_x = random.normal(key, (10, 100))

    def apply_matrix(v):
        return jnp.dot(mat, v)

    naive = lambda vs: jnp.stack([apply_matrix(v) for v in vs])  # noqa: E731
    vmapped = jax.jit(jax.vmap(apply_matrix))
    np.testing.assert_allclose(naive(batched_x), vmapped(batched_x), rtol=1e-4, atol=1e-4)
    print(f"naively batched: {fmt(timeit(lambda: naive(batched_x).block_until_ready()))}   "
          f"jit(vmap): {fmt(timeit(lambda: vmapped(batched_x).block_until_ready()))}")

    section("linear regression")

    def predict(W, b, x):
        return jnp.dot(x, W) + b

    def mse(W, b, x_batched, y_batched):
        def squared_error(x, y):
            y_pred = predict(W, b, x)
            return jnp.inner(y - y_pred, y - y_pred) / 2.0
        return jnp.mean(jax.vmap(squared_error)(x_batched, y_batched), axis=0)

    n_samples, x_dim, y_dim = 20, 10, 5
    k1, k2 = random.split(random.PRNGKey(0))
    W = random.normal(k1, (x_dim, y_dim))
    b = random.normal(k2, (y_dim,))
    key_sample, key_noise = random.split(k1)
    x_samples = random.normal(key_sample, (n_samples, x_dim))
    y_samples = predict(W, b, x_samples) + 0.1 * random.normal(key_noise, (n_samples, y_dim))

    @jax.jit
    def update_params(W, b, x, y, lr):
        return W - lr * jax.grad(mse, 0)(W, b, x, y), b - lr * jax.grad(mse, 1)(W, b, x, y)

    W_hat, b_hat = jnp.zeros_like(W), jnp.zeros_like(b)
    print('Loss for "true" W,b: ', mse(W, b, x_samples, y_samples))
    for i in range(101):
        W_hat, b_hat = update_params(W_hat, b_hat, x_samples, y_samples, 0.3)
        if i % 20 == 0:
            print(f"Loss step {i}: ", mse(W_hat, b_hat, x_samples, y_samples))

    section("pytrees")
    t = [1, {"k1": 2, "k2": (3, 4)}, 5]
    t2 = jax.tree_util.tree_map(lambda x: x * x, t)
    print(jax.tree_util.tree_map(lambda x, y: x + y, t, t2))


if __name__ == "__main__":
    main()
