"""Per-call overhead: eager ops and cached jit calls on tiny arrays (plax beside JAX)."""
from asv_benchmarks.common import frameworks, load


class EagerTinyAdd:
    params = [frameworks()]
    param_names = ["framework"]

    def setup(self, framework):
        jax, jnp, _ = load(framework)
        self.x = jnp.ones(3)
        self.y = jnp.ones(3)
        (self.x + self.y).block_until_ready()

    def time_add(self, framework):
        self.x + self.y


class JitTinyCall:
    params = [frameworks()]
    param_names = ["framework"]

    def setup(self, framework):
        jax, jnp, jit = load(framework)
        self.f = jit(lambda a, b: a + b)
        self.x = jnp.ones(3)
        self.y = jnp.ones(3)
        self.f(self.x, self.y).block_until_ready()

    def time_call(self, framework):
        self.f(self.x, self.y)
