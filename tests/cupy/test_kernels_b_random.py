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


def _samplers():
    from plax import dtypes, random
    from plax import numpy as jnp
    import plax
    return {
        "bits_u32": lambda k, n: random.bits(k, (n,)),
        "bits_u8": lambda k, n: random.bits(k, (n,), jnp.uint8),
        "bits_u64": lambda k, n: random.bits(k, (n,), jnp.uint64),
        "uniform_f32": lambda k, n: random.uniform(k, (n,), minval=-1.0, maxval=2.0),
        "uniform_bf16": lambda k, n: random.uniform(k, (n,), dtypes.bfloat16),
        "normal_f32": lambda k, n: random.normal(k, (n,)),
        "normal_f16": lambda k, n: random.normal(k, (n,), jnp.float16),
        "normal_bf16": lambda k, n: random.normal(k, (n, 3), dtypes.bfloat16),
        "bernoulli": lambda k, n: random.bernoulli(k, 0.3, (n,)),
        "randint": lambda k, n: random.randint(k, (n,), -3, 1000),
        "gumbel": lambda k, n: random.gumbel(k, (n,)),
        "categorical": lambda k, n: random.categorical(k, jnp.linspace(-1.0, 1.0, 7), shape=(n,)),
        "permutation": lambda k, n: random.permutation(k, n),
        "split": lambda k, n: random.split(k, n),
        "split_typed_key_data": lambda k, n: random.key_data(random.split(random.wrap_key_data(k), n)),
        "fold_in": lambda k, n: plax.vmap(lambda d: random.fold_in(k, d))(jnp.arange(n, dtype=jnp.uint32)),
    }


def _bits(x) -> np.ndarray:
    x = np.asarray(x)
    return x.view(np.dtype(f"u{x.dtype.itemsize}")) if x.dtype != np.bool_ else x


_MODES = [(s, p) for p in (True, False) for s in sorted(_samplers())]
#: (the samplers computed through the inverse erf, compared to a few ulps: log1p is CUDA's, or
#: on the simulated GPU the C library's, against NumPy's float32 loop, which may differ in the
#: last bits; the branch form itself is bit for bit the select's,
#: test_normal_kernel_computes_one_inverse_erf_polynomial; gumbel's log likewise)
_TRANSCENDENTAL = ("normal", "gumbel")


@pytest.mark.parametrize("sampler,partitionable", _MODES,
                         ids=[f"{s}-{'partitionable' if p else 'original'}" for s, p in _MODES])
def test_samplers_bits_equal_the_numpy_backend(sampler, partitionable):
    """Every sampler jitted on the GPU gives the NumPy backend's bits (normal and gumbel
    samples to a few ulps, as before the inverse erf became a branch), at an odd size, at one
    element and at none, in both threefry modes (the original one hashes counter halves and
    concatenates the words: one kernel computing each element at its half's counter pair,
    ``codegen_structural``)."""
    import plax
    from plax import random
    fn = _samplers()[sampler]
    key = random.PRNGKey(20261130)
    gpu = plax.devices("gpu")[0]
    saved = plax.config.read("jax_threefry_partitionable")
    plax.config.update("jax_threefry_partitionable", partitionable)
    try:
        for n in (0, 1, 999):   # (999: the size test_random_calls_launch_... compiles too)
            got = plax.jit(lambda k: fn(k, n))(plax.device_put(key, gpu))
            want = plax.jit(lambda k: fn(k, n), backend="numpy")(key)
            assert np.asarray(got).shape == np.asarray(want).shape
            if sampler.startswith(_TRANSCENDENTAL):
                import ml_dtypes
                eps = float(ml_dtypes.finfo(np.asarray(want).dtype).eps)
                np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32),
                                           rtol=4 * eps, atol=4 * eps, err_msg=f"{sampler} n={n}")
            else:
                np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=f"{sampler} n={n}")
    finally:
        plax.config.update("jax_threefry_partitionable", saved)


#: (_launches) launches of one jitted call with CUDA graphs off: (program, partitionable,
#: original); 1 is
#: one fused kernel (counter, key words, hash, halves, bits to samples; categorical's argmax
#: too, the CuPy generator fusing arg-reductions; permutation 2: its keys and the iota it
#: sorts beside them one multi-tensor kernel, then the sort); 8- and 16-bit
#: bits in the original mode compute each field's word (the fields' broadcast repeats it at
#: most 4 times, ``plax.lowering.fusion.STRUCTURAL_MAX_REPEAT``)
def _launches():
    from plax import numpy as jnp, random
    return [
        ("normal (1000,)", lambda k: random.normal(k, (1000,)), 1, 1),
        ("normal (999,)", lambda k: random.normal(k, (999,)), 1, 1),
        ("uniform (1001,)", lambda k: random.uniform(k, (1001,)), 1, 1),
        ("bits (1000,)", lambda k: random.bits(k, (1000,)), 1, 1),
        ("split 7", lambda k: random.split(k, 7), 1, 1),
        ("fold_in", lambda k: random.fold_in(k, 3), 1, 1),
        ("randint (999,)", lambda k: random.randint(k, (999,), 0, 10), 1, 1),
        ("bernoulli (999,)", lambda k: random.bernoulli(k, 0.3, (999,)), 1, 1),
        ("gumbel (999,)", lambda k: random.gumbel(k, (999,)), 1, 1),
        ("typed key: key_data(split(key))",
         lambda k: random.key_data(random.split(random.wrap_key_data(k), 3)), 1, 1),
        ("typed key: normal", lambda k: random.normal(random.wrap_key_data(k), (5,)), 1, 1),
        ("categorical (5, 7)", lambda k: random.categorical(k, jnp.zeros((5, 7))), 1, 1),
        ("permutation 9", lambda k: random.permutation(k, 9), 2, 2),
        ("bits uint8 (999,)", lambda k: random.bits(k, (999,), jnp.uint8), 1, 1),
        ("normal bfloat16 (999,)", lambda k: random.normal(k, (999,), jnp.bfloat16), 1, 1),
    ]


@pytest.mark.parametrize("partitionable", [True, False], ids=["partitionable", "original"])
def test_random_calls_launch_one_kernel_in_both_threefry_modes(partitionable, monkeypatch):
    """Issue 24's table: with CUDA graphs off (an eager call, or a program that cannot be
    captured), each jitted PRNG call launches one kernel in both ``jax_threefry_partitionable``
    modes (the original mode launched 3-5: its counter halves, the hash, the concatenation
    and the pad's slice were kernels or copies of their own; ``split`` 3 in both: its words'
    expand_dims and their concatenation); no lone threefry kernel and no host trip. The
    exceptions are counted too, with their reasons (``_launches``)."""
    import fake_cupy
    import plax
    import plax_cupy
    from plax import random
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    saved = plax.config.read("jax_threefry_partitionable")
    plax.config.update("jax_threefry_partitionable", partitionable)
    key = plax.device_put(random.PRNGKey(3), plax.devices("gpu")[0])
    counts = {}
    try:
        for name, fn, *want in _launches():
            f = plax.jit(fn)
            plax.block_until_ready(f(key))
            start = len(fake_cupy.LAUNCHES)
            with plax_cupy.count() as c:
                plax.block_until_ready(f(key))
            names = [entry for entry, _, _ in fake_cupy.LAUNCHES[start:]]
            assert "plax_threefry2x32" not in names, (name, names)
            assert c.host_fallbacks == 0, (name, c.fallbacks)
            counts[name] = (c.launches, want[0 if partitionable else 1])
    finally:
        plax.config.update("jax_threefry_partitionable", saved)
    assert all(got == want for got, want in counts.values()), counts


def test_concatenated_slices_of_fused_values_are_one_kernel(monkeypatch):
    """Structural fusion beyond the PRNG: a concatenation of differently computed pieces, a
    strided slice of it and a reshape are one kernel (each element computes only the piece it
    falls in, an ``if``/``else`` chain), values equal to the NumPy backend's."""
    import plax
    import plax_cupy
    from plax import numpy as jnp
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")

    def f(x, y):
        z = jnp.concatenate([jnp.exp(x), jnp.sin(y) * 2.0, x[:2] + 1.0])[1:-1:2]
        return jnp.reshape(z * 3.0, (-1, 2)) - 1.0

    rng = np.random.default_rng(4)
    x, y = rng.standard_normal(9).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    gpu = plax.devices("gpu")[0]
    g = plax.jit(f)
    args = (plax.device_put(x, gpu), plax.device_put(y, gpu))
    g(*args)
    with plax_cupy.count() as c:
        got = np.asarray(g(*args))
    assert (c.launches, c.host_fallbacks) == (1, 0), c
    want = np.asarray(plax.jit(f, backend="numpy")(x, y))
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


def test_normal_kernel_computes_one_inverse_erf_polynomial(monkeypatch):
    """The inverse erf's ``select_n`` between its two polynomials is a branch in the fused
    kernel (``codegen._branch_selects``): the square root and the tail polynomial only on the
    ``else`` side, in the scalar loop and the vector path's copy of the per-element code (the
    size takes the vector path and leaves a tail); samples equal bit for bit those of the
    kernel computing both, and the NumPy backend's to a few ulps."""
    import plax
    from plax import random
    from plax_cupy import codegen
    n = codegen.VECTOR_MIN_ELEMENTS + 3
    key = plax.device_put(random.PRNGKey(5), plax.devices("gpu")[0])
    f = plax.jit(lambda k: random.normal(k, (n,)))
    text = f.lower(key).compile().as_text()
    elems = text.split("void plax_elem(")[1:]
    assert len(elems) == 2 and "plax_vstore" in text   # the scalar and the vector copies
    for elem in elems:
        elem = elem[:elem.index("\n}\n")]
        assert elem.count("sqrtf(") == 1 and elem.count("if (") == 1
        assert elem.index("if (") < elem.index("} else {") < elem.index("sqrtf(")
    branched = np.asarray(f(key))
    monkeypatch.setattr(codegen, "LAZY_SELECT_MIN_EQUATIONS", 1 << 30)
    g = plax.jit(lambda k: random.normal(k, (n,)))
    text = g.lower(key).compile().as_text()
    assert "if (" not in text[text.index("void plax_elem("):].split("\n}\n")[0]
    np.testing.assert_array_equal(_bits(g(key)), _bits(branched))
    want = np.asarray(plax.jit(lambda k: random.normal(k, (n,)), backend="numpy")(random.PRNGKey(5)))
    np.testing.assert_allclose(branched, want, rtol=5e-7, atol=5e-7)
