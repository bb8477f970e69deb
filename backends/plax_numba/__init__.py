"""plax_numba: the Numba CPU backend.

``jit`` on a CPU device compiles the jaxpr through :mod:`plax.lowering`: fusion clusters
(elementwise chains with broadcasting and the reductions that consume them) become one loop
each, written as Python source (:mod:`plax_numba.codegen`) and compiled by ``numba.njit``
(:mod:`plax_numba.cache` keeps the kernels in memory and on disk). Everything else runs on
per-equation kernels: NumPy ufuncs for lone elementwise equations, BLAS for ``dot_general``,
the reference kernels of ``plax_numpy.impls()`` for the rest; control flow re-enters this
backend for its bodies.

Compilation is tiered (:mod:`plax_numba.tiered`): a cluster runs on the reference kernels
until it is hot (its second run, ``PLAX_NUMBA_COMPILE_AFTER``), then until its kernel is
compiled in a worker process (:mod:`plax_numba.compile_worker`, ``PLAX_NUMBA_WORKERS``) and
loaded here from the disk cache, so the compiler never holds this process's GIL; a kernel
already in the disk cache loads when the program is built, and runs from the first call.
``PLAX_NUMBA_SYNC=1`` compiles at ``jit`` time instead (benchmarks, and the conformance kit
through :mod:`plax_numba.pytest_plugin`).

The plugin hook only checks that numba is installed (a missing numba is reported as a failed
plugin, not as an import error elsewhere). numba itself is imported by the first kernel
compilation or disk-cache load: building a program whose kernels are not in the disk cache
and running it on the reference kernels (every call until a cluster is hot) never imports
it, so such a first call costs what it costs on the NumPy backend.
"""
from __future__ import annotations

__all__: list[str] = []

import os as _os

# Parallel kernels (prange) run on numba's OpenMP pool. With libgomp's default waiting this
# 2-core host measured ~8 ms per parallel call, with OMP_WAIT_POLICY=passive ~50 us (a futex
# wake-up per call), with GOMP_SPINCOUNT=10000 ~2 us: selu on 2**16 float32 took 22 us
# against 37 us serially. (30000 measured ~1.5 ms per call inside plax: keep it short.) Each
# spin step is a PAUSE, tens of cycles on these cores, so 10000 steps is up to ~0.25 ms of a
# core per wait: on the shared host (load 8-16) a thread waiting at a loop's end for a
# preempted partner, or for the next loop, burnt it, and the parallel rows of
# benchmarks/compare.py cost 1.1-1.7x JAX's CPU time where their serial loops cost 0.45-0.9x.
# 1000 steps keep back-to-back calls on the spinning path and burn a tenth as much: process
# CPU per call, best of 20 batches, two rounds each, load ~8: selu 1M 0.65/0.67 ms (10000)
# against 0.26/0.26 (1000), log1p(x/2)*2+1 1M 0.54/0.91 against 0.49/0.39, bessel_i0e 1M
# 1.22/1.70 against 1.24/0.63, selu 100k 0.51/0.017 against 0.078/0.026, the RNN's grad
# through scan 1.12/1.05 against 0.70/0.66 (load ~15); at load 1.3 the same either way
# (selu 1M 0.22/0.20 against 0.21/0.20 ms, 100k 27/26 against 24/21 us). libgomp reads it
# when the pool starts, so it is set here, before any parallel kernel runs; a value the user
# set wins.
_os.environ.setdefault("GOMP_SPINCOUNT", "1000")
