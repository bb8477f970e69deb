"""The seed tutorials' timed examples: selu under jit, norm, vmap'd matrix products, grad steps."""
import numpy as np

from asv_benchmarks.common import frameworks, load


class SeluJit:
    params = [frameworks()]
    param_names = ["framework"]

    def setup(self, framework):
        jax, jnp, jit = load(framework)

        def selu(x, alpha=1.67, lmbda=1.05):
            return lmbda * jnp.where(x > 0, x, alpha * jnp.exp(x) - alpha)

        self.f = jit(selu)
        self.x = jnp.asarray(np.random.default_rng(0).standard_normal(1_000_000).astype(np.float32))
        self.f(self.x).block_until_ready()

    def time_selu(self, framework):
        self.f(self.x).block_until_ready()


class NormJit:
    params = [frameworks()]
    param_names = ["framework"]

    def setup(self, framework):
        jax, jnp, jit = load(framework)

        def norm(X):
            X = X - X.mean(0)
            return X / X.std(0)

        self.f = jit(norm)
        self.x = jnp.asarray(np.random.default_rng(0).random((10000, 100)).astype(np.float32))
        self.f(self.x).block_until_ready()

    def time_norm(self, framework):
        self.f(self.x).block_until_ready()


class VmapMatVec:
    params = [frameworks()]
    param_names = ["framework"]

    def setup(self, framework):
        jax, jnp, jit = load(framework)
        rng = np.random.default_rng(0)
        mat = jnp.asarray(rng.standard_normal((150, 100)).astype(np.float32))
        self.f = jit(jax.vmap(lambda v: jnp.dot(mat, v)))
        self.x = jnp.asarray(rng.standard_normal((10, 100)).astype(np.float32))
        self.f(self.x).block_until_ready()

    def time_vmap(self, framework):
        self.f(self.x).block_until_ready()


class LinearRegressionStep:
    params = [frameworks()]
    param_names = ["framework"]

    def setup(self, framework):
        jax, jnp, jit = load(framework)
        rng = np.random.default_rng(0)

        def mse(W, b, x, y):
            def sq(x, y):
                d = y - (jnp.dot(x, W) + b)
                return jnp.inner(d, d) / 2.0
            return jnp.mean(jax.vmap(sq)(x, y), axis=0)

        def update(W, b, x, y, lr):
            return W - lr * jax.grad(mse, 0)(W, b, x, y), b - lr * jax.grad(mse, 1)(W, b, x, y)

        self.f = jit(update)
        self.args = [jnp.asarray(a.astype(np.float32)) for a in (
            np.zeros((10, 5)), np.zeros(5), rng.standard_normal((20, 10)), rng.standard_normal((20, 5)))]
        jax.block_until_ready(self.f(*self.args, 0.3))

    def time_step(self, framework):
        out = self.f(*self.args, 0.3)
        out[0].block_until_ready()
