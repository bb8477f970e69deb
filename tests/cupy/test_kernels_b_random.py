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


@pytest.mark.parametrize("sampler", ["bits", "uniform", "normal"])
def test_random_samplers_hash_in_their_fused_kernel(sampler, monkeypatch):
    """``iota`` and ``threefry2x32`` fuse (issue 24): the counter is the kernel's element index
    and the hash runs in the sampler's kernel, and the scalar bounds fold into it
    (``fuses_scalar_producers``), so a jitted ``random.normal`` is one kernel without graphs
    (it launched five: iota, the zero counter word, threefry, the bounds, then the sampler),
    with no threefry kernel of its own; bits equal the NumPy backend's, samples to float32
    rounding."""
    import plax
    import plax_cupy
    import fake_cupy
    from plax import random
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")  # (a graph replay is one launch whatever it holds)
    fn = {"bits": lambda k: random.bits(k, (2100,)),
          "uniform": lambda k: random.uniform(k, (2100,), minval=-1.0, maxval=2.0),
          "normal": lambda k: random.normal(k, (2100,))}[sampler]
    key = random.PRNGKey(11)
    f = plax.jit(lambda k: fn(k))
    dev_key = plax.device_put(key, plax.devices("gpu")[0])
    f(dev_key)
    start = len(fake_cupy.LAUNCHES)
    with plax_cupy.count() as c:
        got = np.asarray(f(dev_key))
    names = [name for name, _, _ in fake_cupy.LAUNCHES[start:]]
    assert "plax_threefry2x32" not in names, names
    assert c.launches == 1 and c.host_fallbacks == 0, (c.launches, names, c.fallbacks)
    want = np.asarray(plax.jit(fn, backend="numpy")(key))
    if sampler == "bits":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
