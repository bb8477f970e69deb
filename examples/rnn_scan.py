"""A small tanh RNN trained with lax.scan: it learns to output the running mean of a noisy
input sequence. Reverse-mode differentiation runs through the scan (`plax.grad`), the
training step is jitted, and the loss falls over a few dozen steps.

Run: python examples/rnn_scan.py
"""
import plax as jax
from plax import lax, random
from plax import numpy as jnp

HIDDEN, STEPS, BATCH = 16, 20, 32


def init(key):
    k1, k2, k3 = random.split(key, 3)
    return {"w_in": random.normal(k1, (1, HIDDEN)) * 0.5,
            "w_h": random.normal(k2, (HIDDEN, HIDDEN)) * (0.5 / HIDDEN ** 0.5),
            "b": jnp.zeros(HIDDEN),
            "w_out": random.normal(k3, (HIDDEN, 1)) * 0.1}


def predict(params, xs):
    """xs: (STEPS, BATCH, 1) -> predictions (STEPS, BATCH, 1)."""
    def cell(h, x):
        h = jnp.tanh(x @ params["w_in"] + h @ params["w_h"] + params["b"])
        return h, h @ params["w_out"]

    _, ys = lax.scan(cell, jnp.zeros((xs.shape[1], HIDDEN)), xs)
    return ys


def loss(params, xs, targets):
    return jnp.mean((predict(params, xs) - targets) ** 2)


@jax.jit
def update(params, xs, targets, lr=0.3):
    value, grads = jax.value_and_grad(loss)(params, xs, targets)
    return jax.tree_util.tree_map(lambda p, g: p - lr * g, params, grads), value


def main():
    key = random.PRNGKey(0)
    params = init(key)
    losses = []
    for step in range(60):
        key, sub = random.split(key)
        xs = random.normal(sub, (STEPS, BATCH, 1))
        targets = jnp.cumsum(xs, axis=0) / jnp.arange(1, STEPS + 1)[:, None, None]
        params, value = update(params, xs, targets)
        losses.append(float(value))
        if step % 10 == 0:
            print(f"step {step:3d}  loss {value:.4f}")
    print(f"first loss {losses[0]:.4f}  last loss {losses[-1]:.4f}")


if __name__ == "__main__":
    main()
