"""The samplers' arithmetic after the hash fuses on the Numba backend (``bitcast_convert_type``,
``nextafter``, the FMA emulation, the ``erf_inv`` polynomial) and stays bit-identical to the
NumPy backend; the scalar helpers behind it (:func:`plax_numba.scalar.bitcast`,
``nextafter_f32``/``nextafter_f64``) against NumPy over edge values."""
from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest
from numba import njit

import plax
from plax import lax, random
from plax.lowering import PlaxFallbackWarning

from plax_numba import scalar
from numba_vs_numpy import assert_bits_equal, compiled_source, jit_both


# ---------------------------------------------------------------- samplers, end to end

@pytest.mark.parametrize("partitionable", [True, False])
@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 5), (1000,), (65_537,)])
@pytest.mark.parametrize("seed", [0, 42, 2**31 + 7])
def test_samplers_bit_identical_to_numpy_backend(partitionable, shape, seed):
    def sample(key):
        k1, k2, k3 = random.split(key, 3)
        return (random.normal(k1, shape), random.uniform(k2, shape, minval=-3.0, maxval=2.5),
                random.truncated_normal(k3, -1.5, 2.0, shape),
                random.normal(k1, shape, dtype=np.float32) * 2.0 + 1.0)

    with plax.config.override("jax_threefry_partitionable", partitionable):
        key = random.PRNGKey(seed)
        with warnings.catch_warnings():
            warnings.simplefilter("error", PlaxFallbackWarning)
            got, want = jit_both(sample, key)
    for g, w in zip(got, want):
        assert_bits_equal(g, w)


def test_normal_post_hash_arithmetic_is_one_kernel():
    source = compiled_source(lambda k: random.normal(k, (1000,)), random.PRNGKey(0))
    # the bits -> float conversion and the sampler's arithmetic (its multiply-add one fma,
    # llvm.fma): in generated loops
    assert "bitcast(" in source and "fma_f32(" in source, source
    program = source.split("# ---- fused kernel")[0]
    assert program.count("= _f") <= 16, program  # formerly ~70 separate steps


def test_fused_bitcast_and_nextafter_match_numpy_backend():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32)
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4028235e38]
    y = np.roll(x, 3)

    def f(x, y):
        b = lax.bitcast_convert_type(x * 2.0, np.uint32) ^ np.uint32(1)
        i = lax.bitcast_convert_type(b, np.int32)
        back = lax.bitcast_convert_type(i + 1, np.float32)
        return (lax.nextafter(x, y) + 1.0, back, lax.bitcast_convert_type(x, np.int32) >> 3,
                lax.nextafter(x.astype(np.float64) * 3.0, y.astype(np.float64)))

    with plax.config.override("jax_enable_x64", True):
        got, want = jit_both(f, x, y)
    for g, w in zip(got, want):
        assert_bits_equal(g, w)


def test_narrowing_bitcast_of_a_scalar_is_not_fused():
    # f32[] -> u16[2]: the output is not a broadcast of the scalar operand
    def f(x):
        return lax.bitcast_convert_type(x * 3.0, np.uint16) + np.uint16(1)
    got, want = jit_both(f, np.float32(1.75))
    assert_bits_equal(got[0], want[0])


# ---------------------------------------------------------------- the scalar helpers

def _edge_values(dtype):
    fi = np.finfo(dtype)
    vals = [0.0, -0.0, np.inf, -np.inf, np.nan, fi.tiny, -fi.tiny, fi.smallest_subnormal,
            -fi.smallest_subnormal, 2 * fi.smallest_subnormal, fi.tiny - fi.smallest_subnormal,
            fi.max, -fi.max, 1.0, -1.0, fi.eps, 0.5, -2.5, 1e-30, 123.456]
    return np.array(vals, dtype)


@njit
def _nextafter32(x, y):
    out = np.empty(x.shape[0], np.float32)
    for i in range(x.shape[0]):
        out[i] = scalar.nextafter_f32(x[i], y[i])
    return out


@njit
def _nextafter64(x, y):
    out = np.empty(x.shape[0], np.float64)
    for i in range(x.shape[0]):
        out[i] = scalar.nextafter_f64(x[i], y[i])
    return out


@pytest.mark.parametrize("dtype,fn", [(np.float32, _nextafter32), (np.float64, _nextafter64)])
def test_nextafter_matches_numpy_on_edge_values(dtype, fn):
    v = _edge_values(dtype)
    x, y = np.meshgrid(v, v)
    x, y = x.ravel(), y.ravel()
    with np.errstate(all="ignore"):
        want = np.nextafter(x, y)
    assert_bits_equal(fn(x, y), want)


@pytest.mark.parametrize("dtype,fn", [(np.float32, _nextafter32), (np.float64, _nextafter64)])
def test_nextafter_matches_numpy_on_random_bits(dtype, fn):
    rng = np.random.default_rng(1)
    ui = np.dtype(f"u{np.dtype(dtype).itemsize}")
    x = rng.integers(0, np.iinfo(ui).max, 20_000, dtype=ui, endpoint=True).view(dtype)
    y = rng.integers(0, np.iinfo(ui).max, 20_000, dtype=ui, endpoint=True).view(dtype)
    y[::3] = x[::3]
    with np.errstate(all="ignore"):
        want = np.nextafter(x, y)
    assert_bits_equal(fn(x, y), want)


_PAIRS = [(np.uint32, np.float32), (np.float32, np.uint32), (np.int32, np.float32),
          (np.float32, np.int32), (np.uint32, np.int32), (np.int32, np.uint32),
          (np.uint64, np.float64), (np.float64, np.int64), (np.int64, np.uint64),
          (np.int16, np.uint16), (np.uint8, np.int8)]


@functools.lru_cache(maxsize=None)
def _bitcaster(to):
    """A compiled loop bitcasting each element to ``to``; one per target type (numba
    specializes it per source type), shared by the pairs with that target."""
    @njit
    def cast(x):
        out = np.empty(x.shape[0], to)
        for i in range(x.shape[0]):
            out[i] = scalar.bitcast(x[i], to(0))
        return out
    return cast


@pytest.mark.parametrize("src,dst", _PAIRS)
def test_bitcast_matches_numpy_view(src, dst):
    src, dst = np.dtype(src), np.dtype(dst)
    ui = np.dtype(f"u{src.itemsize}")
    info = np.iinfo(ui)
    rng = np.random.default_rng(2)
    bits = np.concatenate([rng.integers(0, info.max, 5000, dtype=ui, endpoint=True),
                           np.array([0, 1, info.max, info.max >> 1, (info.max >> 1) + 1], ui)])
    if src.kind == "f":
        bits = np.concatenate([bits, _edge_values(src).view(ui)])
    x = bits.view(src)
    got = _bitcaster(dst.type)(x)
    assert got.dtype == dst
    np.testing.assert_array_equal(got.view(ui), x.view(ui))  # NaN payloads too


def test_bitcast_rejects_a_width_change():
    from numba.core.errors import TypingError

    @njit
    def bad(x):
        return scalar.bitcast(x, np.float64(0))

    with pytest.raises(TypingError):
        bad(np.float32(1))
