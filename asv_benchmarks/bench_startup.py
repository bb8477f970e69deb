"""Start-up costs: importing the library, tracing, and compiling a function for the first time."""

from asv_benchmarks.common import frameworks, load, peak_rss_of


class Import:
    """``import plax`` / ``import jax`` in a fresh interpreter (bytecode already cached)."""
    params = [["plax", "jax"]]
    param_names = ["framework"]
    repeat = (3, 10, 20.0)

    def setup(self, framework):
        if framework == "jax":
            load("jax")  # NotImplementedError (skipped) when JAX is absent

    def timeraw_import(self, framework):
        return f"import {framework}"

    def track_peak_rss_after_import(self, framework):
        return peak_rss_of(f"import {framework}")
    track_peak_rss_after_import.unit = "bytes"


class Trace:
    """``make_jaxpr`` of a 30-op elementwise chain: the tracing machinery alone."""
    params = [["plax", "jax"]]
    param_names = ["framework"]

    def setup(self, framework):
        self.jax, self.jnp, _ = load("jax" if framework == "jax" else "plax:default")
        self.x = self.jnp.ones(8)

    def time_make_jaxpr_chain(self, framework):
        jnp = self.jnp

        def f(x):  # a new function each call: nothing cached
            for _ in range(10):
                x = jnp.sin(x) * 2.0 + 1.0
            return x
        self.jax.make_jaxpr(f)(self.x)


class Compile:
    """Trace, compile and run a fresh jitted function once (steady-state backends: the Numba
    backend compiles synchronously, from its on-disk kernel cache after the first time)."""
    params = [frameworks()]
    param_names = ["framework"]
    number = 1
    repeat = (1, 10, 20.0)
    warmup_time = 0

    def setup(self, framework):
        self.jax, self.jnp, self.jit = load(framework)
        self.x = self.jnp.ones((100, 100))

    def time_compile_elementwise_chain(self, framework):
        jnp = self.jnp

        def f(x):
            return jnp.tanh(x * 2.0 + 1.0).sum(axis=0) / jnp.exp(-x).mean()
        self.jit(f)(self.x).block_until_ready()

    def time_compile_grad(self, framework):
        jnp = self.jnp

        def loss(w, x):
            return jnp.mean((jnp.tanh(x @ w) - 1.0) ** 2)
        self.jax.block_until_ready(self.jit(self.jax.grad(loss))(self.x, self.x))
