"""GPU kernel of ``rng_bit_generator``: :func:`plax.lax.bit_generator.generate` on CuPy arrays.

The state stays on the device: its 64-bit words, the counters and the Threefry/Philox rounds
are CuPy array arithmetic (unsigned, so it wraps as XLA specifies), bit for bit the CPU
backends' (and JAX-CPU's) output. ``threefry2x32`` has its own generated kernel
(:class:`plax_cupy.backend.ThreefryLauncher`).
"""
from __future__ import annotations

import cupy

from plax.lax.bit_generator import generate, rng_bit_generator_p
from plax_cupy.kernels import kernel


@kernel(rng_bit_generator_p)
def _rng_bit_generator(key, *, shape, dtype, algorithm, out_sharding):
    return generate(cupy, key, tuple(shape), dtype, algorithm)
