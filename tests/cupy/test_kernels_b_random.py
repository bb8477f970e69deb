"""The GPU kernel of ``rng_bit_generator`` (``plax_cupy.kernels_random``) on the simulated GPU,
bit for bit against the NumPy backend's (run by test_kernels_b_simulated.py)."""
from __future__ import annotations

import numpy as np
import pytest

from plax import lax
from plax.lax.bit_generator import rng_bit_generator_p
from test_kernels_a_simulated import on_a_gpu
from test_kernels_b_simulated import close

pytestmark = on_a_gpu


@pytest.mark.parametrize("algorithm", list(lax.RandomAlgorithm), ids=lambda a: a.name)
@pytest.mark.parametrize("dtype", ["uint8", "uint16", "uint32", "uint64"])
def test_rng_bit_generator(algorithm, dtype):
    rng = np.random.default_rng(int(algorithm))
    key32 = rng.integers(0, 2**32, 4, dtype=np.uint64).astype(np.uint32)
    key32[2:] = 0xFFFFFFFF  # the counter's carry into the high word
    key64 = rng.integers(0, 2**63, 2, dtype=np.uint64)
    for key in (key32, key64):
        for shape in ((), (5,), (3, 5), (4, 3, 1), (2, 0)):
            close(rng_bit_generator_p, key, shape=shape, dtype=np.dtype(dtype),
                  algorithm=algorithm, out_sharding=None)
