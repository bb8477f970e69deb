"""The random primitives: threefry2x32 and random_gamma_grad, on every installed backend."""
from __future__ import annotations

import functools

import numpy as np
import pytest
import scipy.special

import plax
from plax import lax
from plax import numpy as jnp

U32 = np.uint32

# Known-answer vectors of Threefry-2x32 with 20 rounds, from the Random123 distribution
# (kat_vectors: "threefry2x32 20"): (key, counter) -> output.
RANDOM123_KAT = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]


def _threefry_reference(k1, k2, x1, x2):
    """Threefry-2x32-20 on Python ints, one block at a time (the specification, slowly)."""
    mask = 0xFFFFFFFF
    rotations = ((13, 15, 26, 6), (17, 29, 16, 24))
    ks = (k1, k2, k1 ^ k2 ^ 0x1BD11BDA)
    x = [(x1 + ks[0]) & mask, (x2 + ks[1]) & mask]
    for i in range(5):
        for r in rotations[i % 2]:
            x[0] = (x[0] + x[1]) & mask
            x[1] = ((x[1] << r) | (x[1] >> (32 - r))) & mask
            x[1] ^= x[0]
        x[0] = (x[0] + ks[(i + 1) % 3]) & mask
        x[1] = (x[1] + ks[(i + 2) % 3] + i + 1) & mask
    return tuple(x)


def _on_backend(fn, backend_name):
    return plax.jit(fn, backend=backend_name)


@pytest.mark.parametrize("key,counter,expected", RANDOM123_KAT)
def test_threefry_random123_vectors(key, counter, expected, backend_name):
    f = _on_backend(lambda *a: lax.threefry2x32(*a), backend_name)
    out = f(*(np.asarray([v], U32) for v in key + counter))
    assert [int(np.asarray(o)[0]) for o in out] == list(expected)
    assert _threefry_reference(*key, *counter) == expected


def test_threefry_matches_reference_on_many_counters(backend_name):
    rng = np.random.default_rng(0)
    k1, k2 = (int(v) for v in rng.integers(0, 2 ** 32, 2))
    # more than one chunk of the NumPy implementation, and an odd length
    x1 = rng.integers(0, 2 ** 32, 20_001, dtype=np.uint64).astype(U32)
    x2 = rng.integers(0, 2 ** 32, 20_001, dtype=np.uint64).astype(U32)
    f = _on_backend(lambda *a: lax.threefry2x32(*a), backend_name)
    y1, y2 = (np.asarray(o) for o in f(U32(k1), U32(k2), x1, x2))
    for i in (0, 1, 16_383, 16_384, 20_000):
        assert (int(y1[i]), int(y2[i])) == _threefry_reference(k1, k2, int(x1[i]), int(x2[i]))


def test_threefry_eager_equals_jit_and_keeps_shapes():
    x1 = np.arange(12, dtype=U32).reshape(3, 4)
    x2 = (x1 * 7).astype(U32)
    eager = lax.threefry2x32(U32(5), U32(9), x1, x2)
    jitted = plax.jit(lax.threefry2x32)(U32(5), U32(9), x1, x2)
    for e, j in zip(eager, jitted):
        assert e.shape == (3, 4) and e.dtype == np.uint32
        np.testing.assert_array_equal(np.asarray(e), np.asarray(j))


def test_threefry_empty_operands():
    y1, y2 = lax.threefry2x32(U32(1), U32(2), np.zeros(0, U32), np.zeros(0, U32))
    assert y1.shape == (0,) and y2.shape == (0,)


@pytest.mark.parametrize("in_axes", [(0, 0, 0, 0), (None, None, 0, 0), (0, 0, None, None),
                                     (0, None, 1, None)])
def test_threefry_vmap_matches_loop(in_axes):
    rng = np.random.default_rng(1)
    n = 3
    shapes = {0: (n, 4), 1: (4, n), None: (4,)}
    keys = [rng.integers(0, 2 ** 32, shapes[a][:1] if a == 0 else (), dtype=np.uint64).astype(U32)
            for a in in_axes[:2]]
    counters = [rng.integers(0, 2 ** 32, shapes[a], dtype=np.uint64).astype(U32)
                for a in in_axes[2:]]
    args = keys + counters
    batched = plax.vmap(lax.threefry2x32, in_axes=in_axes)(*args)

    def member(arg, axis, i):
        return arg if axis is None else np.take(arg, i, axis=axis)

    for i in range(n):
        single = lax.threefry2x32(*(member(a, ax, i) for a, ax in zip(args, in_axes)))
        for b, s in zip(batched, single):
            np.testing.assert_array_equal(np.asarray(b)[i], np.asarray(s))


def test_threefry_has_a_zero_derivative():
    def f(x):
        bits = lax.threefry2x32(U32(1), U32(2), jnp.zeros(3, U32), jnp.arange(3, dtype=U32))[0]
        return jnp.sum(x * bits.astype(jnp.float32))

    x = jnp.ones(3)
    np.testing.assert_allclose(np.asarray(plax.grad(f)(x)),
                               np.asarray(lax.threefry2x32(U32(1), U32(2), np.zeros(3, U32),
                                                           np.arange(3, dtype=U32))[0],
                                          np.float32))
    _, tangent = plax.jvp(lambda k: lax.threefry2x32(k, k, k, k)[0], (U32(3),),
                          (np.zeros((), plax.dtypes.float0),))
    assert np.asarray(tangent).dtype == plax.dtypes.float0


def test_threefry_rejects_bad_operands():
    with pytest.raises(TypeError, match="uint32"):
        lax.threefry2x32(np.int32(1), U32(2), np.zeros(2, U32), np.zeros(2, U32))
    with pytest.raises(TypeError, match="shapes"):
        lax.threefry2x32(U32(1), U32(2), np.zeros(2, U32), np.zeros(3, U32))


def test_threefry_in_jaxpr():
    text = str(plax.make_jaxpr(lax.threefry2x32)(U32(1), U32(2), np.zeros(2, U32),
                                                 np.zeros(2, U32)))
    assert "threefry2x32" in text


# ------------------------------------------------------------------ random_gamma_grad

def _implicit_gamma_grad(a, x):
    """-(dF/da)/(dF/dx) for the regularised lower incomplete gamma F, in float64."""
    h = 1e-6 * max(a, 1e-3)
    dF_da = (scipy.special.gammainc(a + h, x) - scipy.special.gammainc(a - h, x)) / (2 * h)
    dF_dx = np.exp((a - 1) * np.log(x) - x - scipy.special.gammaln(a))
    return -dF_da / dF_dx


@pytest.mark.parametrize("a,x", [(0.3, 0.05), (0.3, 2.0), (1.0, 0.7), (2.5, 1.0), (2.5, 6.0),
                                 (40.0, 35.0), (40.0, 47.0), (500.0, 520.0)])
def test_random_gamma_grad_matches_implicit_derivative(a, x, backend_name):
    f = _on_backend(lax.random_gamma_grad, backend_name)
    got = float(np.asarray(f(np.float64(a), np.float64(x)) if plax.config.x64_enabled
                           else f(np.float32(a), np.float32(x))))
    np.testing.assert_allclose(got, _implicit_gamma_grad(a, x), rtol=2e-3)


def test_random_gamma_grad_float64(x64):
    a = np.array([0.3, 2.5, 40.0, 500.0])
    x = np.array([2.0, 1.0, 47.0, 480.0])
    got = np.asarray(lax.random_gamma_grad(a, x))
    assert got.dtype == np.float64
    want = [_implicit_gamma_grad(ai, xi) for ai, xi in zip(a, x)]
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_random_gamma_grad_edge_cases():
    a = np.array([1.0, 0.0, -1.0, 1.0, np.nan], np.float32)
    x = np.array([0.0, 1.0, 1.0, -1.0, 1.0], np.float32)
    got = np.asarray(lax.random_gamma_grad(a, x))
    assert got[0] == 0 and np.all(np.isnan(got[1:]))


def test_random_gamma_grad_vmap_and_jit_match_eager():
    a = np.array([[0.5, 1.5], [3.0, 30.0]], np.float32)
    x = np.array([[0.2, 2.0], [4.0, 25.0]], np.float32)
    eager = np.asarray(lax.random_gamma_grad(a, x))
    # a compiling backend may fuse or reorder the float math: equal to a few ulps, not bitwise
    close = functools.partial(np.testing.assert_allclose, rtol=2e-6, atol=0)
    close(np.asarray(plax.vmap(lax.random_gamma_grad)(a, x)), eager)
    close(np.asarray(plax.jit(lax.random_gamma_grad)(a, x)), eager)
    rows = [np.asarray(lax.random_gamma_grad(np.float32(1.5), x[i])) for i in range(2)]
    close(
        np.asarray(plax.vmap(lax.random_gamma_grad, in_axes=(None, 0))(np.float32(1.5), x)),
        np.stack(rows))


def test_random_gamma_grad_rejects_bad_operands():
    with pytest.raises(TypeError, match="float"):
        lax.random_gamma_grad(np.int32(1), np.int32(1))
    with pytest.raises(TypeError, match="one dtype"):
        lax.random_gamma_grad(np.float32(1), np.float16(1))
    with pytest.raises(NotImplementedError, match="random_gamma_grad"):
        plax.grad(lambda a: lax.random_gamma_grad(a, np.float32(1.0)))(np.float32(2.0))
