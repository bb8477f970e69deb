"""The keyed PRNG: key creation, splitting and samplers, eager and under jit."""
from asv_benchmarks.common import frameworks, load


class KeysEager:
    """Key handling as a training loop does it, eagerly (default backend, beside JAX)."""
    params = [["plax", "jax"]]
    param_names = ["framework"]

    def setup(self, framework):
        self.jax, self.jnp, _ = load("jax" if framework == "jax" else "plax:default")
        self.key = self.jax.random.PRNGKey(0)
        for name in ("time_prngkey", "time_split", "time_uniform_1k"):  # JAX compiles each once
            getattr(self, name)(framework)

    def time_prngkey(self, framework):
        self.jax.random.PRNGKey(42)

    def time_split(self, framework):
        self.jax.random.split(self.key)

    def time_uniform_1k(self, framework):
        self.jax.random.uniform(self.key, (1000,)).block_until_ready()


class SamplersJit:
    """Jitted samplers of 1M values, per backend."""
    params = [frameworks()]
    param_names = ["framework"]

    def setup(self, framework):
        jax, jnp, jit = load(framework)
        self.key = jax.random.PRNGKey(0)
        self.uniform = jit(lambda k: jax.random.uniform(k, (1_000_000,)))
        self.normal = jit(lambda k: jax.random.normal(k, (1_000_000,)))
        self.bits = jit(lambda k: jax.random.bits(k, (1_000_000,)))
        for f in (self.uniform, self.normal, self.bits):
            f(self.key).block_until_ready()

    def time_uniform_1M(self, framework):
        self.uniform(self.key).block_until_ready()

    def time_normal_1M(self, framework):
        self.normal(self.key).block_until_ready()

    def time_bits_1M(self, framework):
        self.bits(self.key).block_until_ready()
