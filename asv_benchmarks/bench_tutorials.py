"""The seed tutorials' other timed examples (the rest are rows of bench_table.py): the
standardisation ``norm`` under jit and a matrix product, per backend and for JAX."""
import numpy as np

from asv_benchmarks.common import frameworks, load


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


class MatMul:
    params = [frameworks()]
    param_names = ["framework"]

    def setup(self, framework):
        jax, jnp, jit = load(framework)
        self.f = jit(lambda x: jnp.dot(x, x.T))
        self.x = jnp.asarray(np.random.default_rng(0).standard_normal((1000, 1000))
                             .astype(np.float32))
        self.f(self.x).block_until_ready()

    def time_matmul_1000(self, framework):
        self.f(self.x).block_until_ready()
