"""Per-call overhead: eager dispatch and cached jit calls on tiny arrays (plax beside JAX)."""
from asv_benchmarks.common import frameworks, load


class EagerDispatch:
    """One primitive, eagerly, on f32[3]: the path from the operator to the kernel.

    Eager work runs on the default device's backend (``PLAX_BACKEND`` chooses it, once per
    process), so plax appears once here, as ``plax`` (its default backend), beside JAX.
    """
    params = [["plax", "jax"]]
    param_names = ["framework"]

    def setup(self, framework):
        _, jnp, _ = load("jax" if framework == "jax" else "plax:default")
        self.jnp = jnp
        self.x = jnp.ones(3)
        self.y = jnp.ones(3)
        # warm every op up: JAX compiles each eager primitive on its first call
        for name in ("time_add", "time_sin", "time_sum", "time_chain_of_five"):
            getattr(self, name)(framework)
        (self.x + self.y).block_until_ready()

    def time_add(self, framework):
        self.x + self.y

    def time_sin(self, framework):
        self.jnp.sin(self.x)

    def time_sum(self, framework):
        self.jnp.sum(self.x)

    def time_chain_of_five(self, framework):
        x = self.x
        ((x * 2.0 + 1.0) * x - x) / 3.0


class JitTinyCall:
    """A cached jit call on f32[3] (the Python around the compiled executable)."""
    params = [frameworks()]
    param_names = ["framework"]

    def setup(self, framework):
        jax, jnp, jit = load(framework)
        self.f = jit(lambda a, b: a + b)
        self.g = jit(lambda a, b: [a + b, a * b, (a - b) * 2.0])
        self.x = jnp.ones(3)
        self.y = jnp.ones(3)
        self.f(self.x, self.y).block_until_ready()
        jax.block_until_ready(self.g(self.x, self.y))

    def time_call(self, framework):
        self.f(self.x, self.y)

    def time_call_three_outputs(self, framework):
        self.g(self.x, self.y)
