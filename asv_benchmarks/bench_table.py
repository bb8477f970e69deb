"""The Numba backend's table (docs/performance.md, ``benchmarks/compare.py``): each workload on
plax per backend and on JAX, steady state (compiled before timing) except the first call."""
from asv_benchmarks.common import frameworks, library, workload


class _Row:
    """One row of the table: ``setup`` builds the jitted function and its inputs, warms it up,
    and the time_ method times one call including ``block_until_ready``."""
    prefix = ""
    params = [frameworks()]
    param_names = ["framework"]

    def setup(self, framework):
        self.lib = library(framework)
        self.fn, self.args = workload(self.prefix)["plax"](self.lib)
        self.lib.block(self.fn(*self.args))

    def run(self):
        self.lib.block(self.fn(*self.args))


class Selu(_Row):
    prefix = "selu"

    def time_selu_1M(self, framework):
        self.run()


class TinyCall(_Row):
    prefix = "tiny jit call"

    def time_tiny_call(self, framework):
        self.run()


class LinregStep(_Row):
    prefix = "linreg step"

    def time_linreg_step(self, framework):
        self.run()


class MLPStep(_Row):
    prefix = "MLP step 784"

    def time_mlp_step(self, framework):
        self.run()


class RandomNormal(_Row):
    prefix = "random.normal"

    def time_normal_10M(self, framework):
        self.run()


class JitVmap(_Row):
    prefix = "jit(vmap"

    def time_jit_vmap_matvec(self, framework):
        self.run()


class ScanRNN(_Row):
    prefix = "scan tanh RNN"

    def time_scan_rnn(self, framework):
        self.run()


class MLPFirstCall:
    """Trace, compile and run a freshly defined MLP step: what a user waits for on the first
    call (the Numba backend in its default tiered mode: a program runs on the reference
    kernels until it is hot, so a first call neither compiles nor imports numba; the first
    sample of each process also pays the libraries' lazy imports)."""
    params = [frameworks()]
    param_names = ["framework"]
    number = 1            # every sample a new function: nothing cached in memory
    repeat = (1, 5, 20.0)
    warmup_time = 0

    def setup(self, framework):
        import os
        self._sync = os.environ.pop("PLAX_NUMBA_SYNC", None)
        self.lib = library(framework)
        self.fn, self.args = workload("MLP step first call")["plax"](self.lib)

    def teardown(self, framework):
        import os
        if self._sync is not None:
            os.environ["PLAX_NUMBA_SYNC"] = self._sync

    def time_first_call(self, framework):
        self.lib.block(self.fn(*self.args))
