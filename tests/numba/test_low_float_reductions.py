"""float16 and bfloat16 reductions in the Numba backend's fused kernels: ``reduce_sum``,
``reduce_prod``, ``reduce_max`` and ``reduce_min`` over any axes join the cluster of their
elementwise producers (the operand's uint16 bits decoded to float32 locals in the loop).

Accumulation: the NumPy backend (the reference) reduces float16/bfloat16 in float32 (NumPy's
pairwise sum) and casts the float32 result to the narrow format; the kernel accumulates sums
and products in float64, as it does for float32, then rounds to float32 and to the narrow
format. Both give the same bits whenever the float32 results agree, which holds exactly when
every partial result is exact in float32 (the inputs of the bit-for-bit tests below: multiples
of 1/8, sums below 2**20) and otherwise up to one float32 rounding, hence at most one unit of
the narrow format (the random-input test, where nearly all agree). max/min are exact in any
order. (JAX's ``jnp.sum`` converts float16 to float32 before ``reduce_sum`` too; a bare
``lax.reduce_sum`` on float16 under XLA:CPU adds in float16 along a tree, which neither
backend reproduces: the NumPy backend is the reference here.)
"""
from __future__ import annotations

import numpy as np
import pytest

from plax import lax, numpy as jnp
from plax.dtypes import bfloat16

from numba_vs_numpy import assert_bits_equal, compiled_source, jit_both

LOW = [np.dtype(np.float16), np.dtype(bfloat16)]
_NAME = {np.dtype(np.float16): "f16", np.dtype(bfloat16): "bf16"}


def _same(got, want):
    """Bit for bit (bfloat16, whose dtype kind is not ``f``, compared through float32, which
    holds it exactly: NaNs in the same places)."""
    assert got.dtype == want.dtype
    if got.dtype == bfloat16:
        got, want = got.astype(np.float32), want.astype(np.float32)
    assert_bits_equal(got, want)


def _exact_grid(dtype, shape, seed=0):
    """Multiples of 1/8 in [-8, 8]: every sum of a few thousand of them (times 2) is exact in
    float32, so any summation order gives the same bits."""
    rng = np.random.default_rng(seed)
    return (rng.integers(-64, 65, shape) / 8).astype(dtype)


def _reductions(v):
    w = v * 2.0 - 0.5  # the elementwise producer the reductions fuse with
    return (lax.reduce_sum(w, (0, 1)), lax.reduce_sum(w, (1,)), lax.reduce_sum(w, (0,)),
            lax.reduce_max(w, (1,)), lax.reduce_min(w, (0,)), lax.reduce_max(w, (0, 1)),
            jnp.sum(w, axis=1))


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_reductions_fuse_with_their_producer_bit_for_bit(dtype):
    x = _exact_grid(dtype, (48, 40))
    source = compiled_source(_reductions, x)
    name = _NAME[dtype]
    # one kernel reads the bits, accumulates every reduction, and writes each result's bits
    # (jnp.sum's conversion of its float32 result back to the narrow format follows)
    kernels = source.split("# ---- fused kernel")[1:]
    first = kernels[0]
    assert "reduce_sum reduce_max reduce_min" in first, first
    assert not any("reduce_" in k for k in kernels[1:]), source
    source = first
    assert f"{name}_value(a0_r[i1])" in source
    assert "np.float64(0.0)" in source and "fmax(" in source and "fmin(" in source
    assert f"{name}_bits(np.float32(s" in source
    got, want = jit_both(_reductions, x, fallback_is_error=True)
    for g, w in zip(got, want):
        _same(g, w)


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_products_and_nan_and_infinities(dtype):
    # products of powers of two are exact; NaN propagates through max/min and sums, an
    # infinity through max, as the reference's
    rng = np.random.default_rng(1)
    x = (2.0 ** rng.integers(-3, 4, (6, 30))).astype(dtype)
    x[1, 3] = np.nan
    x[2, 5] = np.inf
    x[3, 7] = -np.inf

    def f(v):
        w = v * 1.0
        return (lax.reduce_prod(w, (1,)), lax.reduce_max(w, (1,)), lax.reduce_min(w, (1,)),
                lax.reduce_sum(w, (1,)), lax.reduce_prod(w[:, :4], (0, 1)))
    got, want = jit_both(f, x, fallback_is_error=True)
    for g, w in zip(got, want):
        _same(g, w)


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_random_sums_within_one_unit(dtype):
    # general inputs: the reference's float32 pairwise sum and the kernel's float64 sum may
    # round to different float32 values, so at most one unit of the narrow format apart
    x = np.random.default_rng(2).standard_normal((200, 300)).astype(dtype)

    def f(v):
        return lax.reduce_sum(v * 3.0, (0, 1)), lax.reduce_sum(v * 3.0, (0,))
    got, want = jit_both(f, x, fallback_is_error=True)
    for g, w in zip(got, want):
        g, w = g.astype(np.float64), w.astype(np.float64)
        unit = np.spacing(np.abs(w).astype(dtype)).astype(np.float64)
        assert np.all(np.abs(g - w) <= unit)
        assert np.mean(g == w) > 0.9


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_argmax_and_cumsum_equal_the_reference(dtype):
    # not fusion-cluster primitives: each is a native kernel of its own
    # (plax_numba.codegen_scan; no fallback warning), with the NumPy backend's bits (first
    # index on ties, the first NaN winning; XLA's blocked cumsum order)
    x = np.random.default_rng(3).standard_normal((30, 70)).astype(dtype)
    x[4, 9] = np.nan

    def f(v):
        return (jnp.argmax(v * 2.0, axis=1), jnp.argmin(v, axis=0), jnp.cumsum(v, axis=1),
                jnp.cumsum(v, axis=0))
    got, want = jit_both(f, x, fallback_is_error=True)
    for g, w in zip(got, want):
        _same(g, w)
