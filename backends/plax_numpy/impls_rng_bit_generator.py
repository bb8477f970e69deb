"""NumPy kernel of ``rng_bit_generator``: :func:`plax.lax.bit_generator.generate` on NumPy
arrays (the Numba backend runs it too, through the per-equation fallback)."""
from __future__ import annotations

import numpy as np

from plax.lax.bit_generator import generate, rng_bit_generator_p
from plax_numpy.registry import impl


@impl(rng_bit_generator_p, fresh=True)
def rng_bit_generator(key, *, shape, dtype, algorithm, out_sharding):
    """``[new_key, bits]`` (XLA's Threefry or Philox bit generator, as JAX-CPU)."""
    return generate(np, np.asarray(key), tuple(shape), dtype, algorithm)
