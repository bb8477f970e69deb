"""float16 and bfloat16 in the Numba backend's fused kernels: their arrays travel as uint16 bit
patterns, their values are float32 locals, and each operation computes in float32 and rounds
once to the narrow format (``plax_numba.scalar``'s ``f16_bits``/``bf16_bits``), so a program
on them compiles to one kernel instead of running the reference kernels. Checked: the
conversions against NumPy's float16 and ml_dtypes' bfloat16 on every bit pattern, the kernel
source, no fallback warning, and values against the NumPy backend (bit for bit where both
round one float32 result; within one unit of the narrow format for the transcendental
functions, whose float32 kernels differ from NumPy's in the last float32 bit)."""
from __future__ import annotations

import numpy as np
import pytest

from plax import lax, numpy as jnp
from plax.dtypes import bfloat16

from numba_vs_numpy import assert_bits_equal, compiled_source, jit_both

LOW = [np.dtype(np.float16), np.dtype(bfloat16)]
_NAME = {np.dtype(np.float16): "f16", np.dtype(bfloat16): "bf16"}


def _loop(fn, out_dtype):
    from numba import njit

    @njit(error_model="numpy")
    def run(a):
        out = np.empty(a.size, out_dtype)
        for i in range(a.size):
            out[i] = fn(a[i])
        return out
    return run


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_bits_to_value_every_pattern(dtype):
    from plax_numba import scalar
    bits = np.arange(1 << 16, dtype=np.uint16)
    got = _loop(getattr(scalar, f"{_NAME[dtype]}_value"), np.float32)(bits)
    assert_bits_equal(got, bits.view(dtype).astype(np.float32))


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_value_to_bits_rounds_to_nearest_even(dtype):
    from plax_numba import scalar
    exact = np.arange(1 << 16, dtype=np.uint16).view(dtype).astype(np.float32)
    exact = exact[np.isfinite(exact)]
    up = np.nextafter(exact, np.float32(np.inf))
    # the midpoints between neighbours (ties: to even) and the float32s next to them
    mid = ((exact[:-1].astype(np.float64) + np.sort(exact)[1:].astype(np.float64)) / 2)
    mid = np.sort(exact).astype(np.float64)
    mid = ((mid[:-1] + mid[1:]) / 2).astype(np.float32)
    rng = np.random.default_rng(0)
    random = rng.integers(0, 1 << 32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([exact, up, mid, np.nextafter(mid, np.float32(np.inf)),
                        np.nextafter(mid, -np.float32(np.inf)), random,
                        np.float32([65519.99, 65520.0, 65536.0, 3.4e38, np.inf, -np.inf])])
    with np.errstate(all="ignore"):
        want = x.astype(dtype)
    got = _loop(getattr(scalar, f"{_NAME[dtype]}_bits"), np.uint16)(x).view(dtype)
    nan = np.isnan(x)
    assert np.isnan(got[nan].astype(np.float32)).all()
    np.testing.assert_array_equal(got[~nan].view(np.uint16), want[~nan].view(np.uint16))


def _arith(a, b):
    c = jnp.where(a > b, a * b + 1.5, a - b) / b
    c = jnp.maximum(c, -a) + jnp.sqrt(jnp.abs(b)) + a ** 3
    other = jnp.bfloat16 if a.dtype == np.float16 else jnp.float16
    bits = lax.bitcast_convert_type(c, jnp.int16)
    return (c, c.astype(jnp.float32) * 0.25, (a < 0).astype(a.dtype), bits + 1,
            lax.bitcast_convert_type(bits, a.dtype) * 2.0, c.astype(other) - 1.0)


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_arithmetic_fuses_and_matches_numpy_bit_for_bit(dtype):
    x = np.linspace(-30, 30, 20_001).astype(dtype)
    y = np.linspace(0.01, 9, 20_001)[::-1].astype(dtype)
    source = compiled_source(_arith, x, y)
    name = _NAME[dtype]
    assert f"{name}_value(a0_f[i])" in source and f"round_{name}(" in source
    assert "np.uint16" in source
    got, want = jit_both(_arith, x, y, fallback_is_error=True)
    for g, w in zip(got, want):
        assert_bits_equal(g, w)


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_scalar_operands_and_results(dtype):
    # rank-0 operands and a rank-0 cluster: bits through the wrapper both ways
    x = np.asarray(1.337, dtype)

    def f(a, b):
        return a * b + 0.1, b * 2.0 - 1.0
    got, want = jit_both(f, np.linspace(-2, 2, 101).astype(dtype), x, fallback_is_error=True)
    for g, w in zip(got, want):
        assert_bits_equal(g, w)


#: one float32 kernel of each kind (plax_numba.scalar, libm_free, special): each compiles into
#: the kernel, so a few keep the test quick
_TRANSCENDENTAL = {"exp": (-10, 10), "erf_inv": (-0.99, 0.99), "bessel_i0e": (-30, 30)}


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_transcendental_and_special_fuse(dtype):
    # one program holding them all (one kernel to compile): each between neighbours
    n = 20_001
    names = sorted(_TRANSCENDENTAL)
    xs = [np.linspace(*_TRANSCENDENTAL[k], n).astype(dtype) for k in names]

    def f(*vs):
        return [getattr(lax, k)(v * 0.5) * 2.0 + 1.0 for k, v in zip(names, vs)]
    source = compiled_source(f, *xs)
    for k in names:
        assert f"{k}_f32(" in source, k
    assert f"round_{_NAME[dtype]}(" in source
    got, want = jit_both(f, *xs, fallback_is_error=True)
    for k, g, w in zip(names, got, want):
        assert g.dtype == dtype
        g, w = g.astype(np.float64), w.astype(np.float64)
        # the float32 results round to the same narrow value except next to a rounding
        # boundary: at most one unit of the narrow format apart, nearly always equal
        unit = np.spacing(np.abs(w).astype(dtype)).astype(np.float64)
        assert np.all(np.abs(g - w) <= unit), (k, np.max(np.abs(g - w) / unit))
        assert np.mean(g == w) > 0.99, k


def test_conversions_that_would_round_twice_are_not_fused():
    # float64 -> float16 rounds once in NumPy; through float32 it could round twice: that
    # equation runs on the reference kernel, and the values still agree
    from plax import config
    with config.override("jax_enable_x64", True):
        x = np.linspace(-3, 3, 1001)
        f = lambda v: (v * 3.0).astype(jnp.float16) * 2  # noqa: E731
        got, want = jit_both(f, x)
    assert_bits_equal(got[0], want[0])
