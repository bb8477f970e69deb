"""Programs made of the shape, indexing, reduction, sort and precision primitives run on the
simulated GPU, eagerly and under ``jit``, without leaving the device: no host fallback and no
host copy but reading the results (``plax_cupy.count``), values equal to the CPU's (run by
test_kernels_a_simulated.py)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax import lax
from test_kernels_a_simulated import on_a_gpu

pytestmark = on_a_gpu


def _program(x, i, u):
    y = jnp.pad(x[1:, ::2], ((1, 2), (0, 1)))
    z = x.at[i].add(u).at[i].max(u)
    s = lax.sort((x[0], x[1]), num_keys=1)
    t = lax.top_k(x, 3)
    c = (lax.cumsum(x, axis=1, reverse=True), lax.cummax(x, axis=0))
    r = (jnp.max(x, axis=0), jnp.argmax(x, axis=1), jnp.sum(x, axis=(0, 1)))
    d = lax.dynamic_update_slice(x, u[:1], (i[0], i[1]))
    g = jnp.take(jnp.concatenate([x, x[::-1]], axis=0), i, axis=0, mode="clip")
    return y, z, s, t, c, r, d, g, jnp.transpose(x).reshape(-1)[::3]


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.int8],
                         ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_program_stays_on_the_device(dtype, jitted):
    import plax_cupy
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((5, 6)) * 8).astype(dtype)
    i = np.array([4, 0, 2, 9], np.int32)
    u = (rng.standard_normal((4, 6)) * 8).astype(dtype)
    gpu, cpu = plax.devices("gpu")[0], plax.devices("cpu")[0]
    f = plax.jit(_program) if jitted else _program
    args = [plax.device_put(a, gpu) for a in (x, i, u)]
    f(*args)  # compiles once (constants go to the device once)
    with plax_cupy.count() as c:
        out = plax.tree_util.tree_leaves(f(*args))
        for o in out:
            o.block_until_ready()
    assert c.host_fallbacks == 0, c.fallbacks
    assert c.device_to_host == 0
    want = plax.tree_util.tree_leaves(f(*[plax.device_put(a, cpu) for a in (x, i, u)]))
    for o, w in zip(out, want):
        assert o.dtype == w.dtype and o.shape == w.shape
        np.testing.assert_allclose(np.asarray(o).astype(np.float64), np.asarray(w).astype(np.float64),
                                   rtol=1e-2 if np.dtype(dtype).itemsize == 2 else 1e-6)


@pytest.mark.parametrize("name, fn, most", [
    ("dynamic_slice", lambda x, i: lax.dynamic_slice(x, (i[0], 1), (2, 3)), 2),
    ("gather", lambda x, i: x[i], 2),
    ("scatter-add", lambda x, i: x.at[i].add(1.0), 10),  # (its two generated kernels counted)
    ("dynamic_update_slice", lambda x, i: lax.dynamic_update_slice(x, x[:1], (i[1], 0)), 4),
])
def test_launches_of_the_generated_indexing_kernels(name, fn, most, monkeypatch):
    # dynamic_slice and gather are one generated kernel each (plus whatever index arithmetic
    # the program has); a scatter a handful of launches: targets, sort, combine. Counted on the
    # plain program (its second call would be a CUDA graph's capture, test_simulated_graphs)
    import plax_cupy
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")
    gpu = plax.devices("gpu")[0]
    x = plax.device_put(np.arange(20, dtype=np.float32).reshape(4, 5), gpu)
    i = plax.device_put(np.array([0, 3, 7], np.int32), gpu)
    f = plax.jit(fn)
    f(x, i).block_until_ready()
    with plax_cupy.count() as c:
        f(x, i).block_until_ready()
    assert c.launches <= most, (name, c.launches)
    assert c.host_to_device == c.device_to_host == c.host_fallbacks == 0


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_size_one_broadcasting_stays_on_the_device(jitted):
    # elementwise operands of size 1 along some axes (JAX's rule; what vmap stages for an
    # unbatched operand): generated kernels read them in place, eagerly and in fused
    # programs, with no host fallback or copy
    import plax_cupy
    rng = np.random.default_rng(25)
    a = rng.uniform(0.5, 2.0, (1, 3, 1)).astype(np.float32)
    b = rng.uniform(0.5, 2.0, (4, 3, 5)).astype(np.float32)
    c = rng.uniform(0.5, 2.0, (4, 1, 5)).astype(np.float32)

    def f(a, b, c):
        t = lax.mul(lax.add(a, b), lax.sin(c))
        return lax.sub(t, lax.max(a, c)), jnp.sum(lax.pow(a, c), axis=(0, 2)), lax.lt(a, c)

    gpu = plax.devices("gpu")[0]
    g = plax.jit(f) if jitted else f
    args = [plax.device_put(v, gpu) for v in (a, b, c)]
    g(*args)
    with plax_cupy.count() as counts:
        out = g(*args)
        for o in out:
            o.block_until_ready()
    assert counts.host_fallbacks == 0, counts.fallbacks
    assert counts.device_to_host == 0
    a64, b64, c64 = (v.astype(np.float64) for v in (a, b, c))
    want = ((a64 + b64) * np.sin(c64) - np.maximum(a64, c64), (a64 ** c64).sum(axis=(0, 2)),
            a64 < c64)
    for o, w in zip(out, want):
        assert o.shape == w.shape
        np.testing.assert_allclose(np.asarray(o, np.float64), w, rtol=1e-5)


@pytest.mark.parametrize("jitted", [False, True], ids=["eager", "jit"])
def test_random_bits_with_size_one_operands(jitted):
    # threefry2x32 of keys f32[4,1] against counters f32[1,5] (what vmap of a sampler hashes),
    # eagerly (the hash kernel's own launcher) and compiled, bit for bit the CPU's; and vmap
    # of a sampler against a loop
    from plax import random
    k = np.arange(4, dtype=np.uint32).reshape(4, 1)
    c = np.arange(5, dtype=np.uint32).reshape(1, 5) * 7
    args = (k, k + 1, c, c + 3)
    gpu, cpu = plax.devices("gpu")[0], plax.devices("cpu")[0]
    want = lax.threefry2x32(*[plax.device_put(np.broadcast_to(a, (4, 5)).copy(), cpu)
                              for a in args])
    f = plax.jit(lax.threefry2x32) if jitted else lax.threefry2x32
    got = f(*[plax.device_put(a, gpu) for a in args])
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    keys = random.split(random.PRNGKey(0), 4)
    sampler = plax.vmap(lambda key: random.normal(key, (3, 5)))
    loop = np.stack([np.asarray(random.normal(key, (3, 5))) for key in keys])
    got = (plax.jit(sampler) if jitted else sampler)(plax.device_put(keys, gpu))
    np.testing.assert_allclose(np.asarray(got), loop, rtol=1e-6)



@pytest.mark.parametrize("dtype", [np.float32, np.int32], ids=lambda d: np.dtype(d).name)
def test_fused_reduction_is_one_launch_split_or_not(dtype, monkeypatch):
    # with one block per output (codegen.reduction_launch's blocks_per_output 1) the block
    # stores its result: one launch. A long sum over few outputs splits over blocks
    # (ITEMS_PER_THREAD 1 here: 600 terms over 256-thread blocks are 3 blocks per output on the
    # simulated GPU's 2 multiprocessors), and is one launch too: the last block of each output
    # combines the partials (two launches before, a partial and a final kernel). The values are
    # the NumPy backend's either way.
    import plax_cupy
    from plax_cupy import codegen
    monkeypatch.setenv("PLAX_CUDA_GRAPHS", "0")  # (read at compile: count plain launches)
    x = (np.random.default_rng(1).standard_normal((6, 600)) * 9).astype(dtype)
    xg = plax.device_put(x, plax.devices("gpu")[0])
    rows, cols = (lambda v: (v * 3).sum(axis=1)), (lambda v: (v * 2).max(axis=0))
    for items, blocks_per_row in ((codegen.ITEMS_PER_THREAD, 1), (1, 3)):
        monkeypatch.setattr(codegen, "ITEMS_PER_THREAD", items)
        assert codegen.reduction_launch(6, 600, 2)[2] == blocks_per_row
        for f in (rows, cols):
            want = np.asarray(plax.jit(f, backend="numpy")(x), np.float64)
            fn = plax.jit(lambda v: f(v))  # (a fresh program per setting)
            fn(xg).block_until_ready()
            with plax_cupy.count() as c:
                got = fn(xg).block_until_ready()
            assert c.launches == 1 and c.host_fallbacks == 0, (items, c)
            np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-5)
