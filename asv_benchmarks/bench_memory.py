"""Peak memory (RSS) of whole workloads, each in a fresh interpreter, per backend and for JAX."""
from asv_benchmarks.common import REPO, frameworks, load, peak_rss_of

_SETUP = f"""
import sys
sys.path.insert(0, {REPO!r})
from asv_benchmarks.common import library, workload
lib = library({{framework!r}})
"""


class PeakRSS:
    params = [frameworks()]
    param_names = ["framework"]
    repeat = 1
    number = 1
    timeout = 300

    def setup(self, framework):
        if framework == "jax":
            load("jax")  # NotImplementedError (skipped) when JAX is absent

    def _peak(self, framework, prefix, calls):
        code = _SETUP.format(framework=framework) + (
            f"fn, args = workload({prefix!r})['plax'](lib)\n"
            f"for _ in range({calls}):\n    lib.block(fn(*args))\n")
        return peak_rss_of(code)

    def track_peak_rss_mlp_training(self, framework):
        """Ten MLP steps (784-512-512-10, batch 128): parameters, activations, gradients."""
        return self._peak(framework, "MLP step 784", 10)
    track_peak_rss_mlp_training.unit = "bytes"

    def track_peak_rss_random_normal_10M(self, framework):
        """random.normal of 10M float32 (40 MB of output) under jit."""
        return self._peak(framework, "random.normal", 3)
    track_peak_rss_random_normal_10M.unit = "bytes"
