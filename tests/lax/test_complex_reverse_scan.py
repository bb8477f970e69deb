"""The reverse complex ``cummax``/``cummin`` of the reference kernels
(``plax.lowering.complex_extremes.reverse_scan``): every suffix's lexicographic fold found at
once, bit for bit what folding each suffix whole (the former quadratic kernel, kept here as
the reference) gives, on data full of NaNs, ties, infinities and signed zeros."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax as plax_lax
from plax.lowering import complex_extremes

PARTS = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0, 2.0, 0.5])


def _suffix_folds(rows, is_max):
    """Each suffix along the last axis folded whole (the former kernel: quadratic)."""
    out = np.empty_like(rows)
    for k in range(rows.shape[-1]):
        out[..., k] = complex_extremes.reduce_extreme(rows[..., k:], is_max)
    return out


def _sample(rng, shape, dtype):
    x = np.empty(shape, dtype)
    x.real, x.imag = rng.choice(PARTS, shape), rng.choice(PARTS, shape)
    return x


def _assert_same_bits(got, want):
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("is_max", [True, False])
def test_reverse_scan_is_each_suffix_folded(dtype, is_max):
    rng = np.random.default_rng(3)
    for shape in [(1,), (2,), (7,), (3, 11), (2, 2, 9), (4, 0)]:
        for _ in range(8):
            rows = _sample(rng, shape, dtype)
            _assert_same_bits(complex_extremes.reverse_scan(rows, is_max),
                              _suffix_folds(rows, is_max))


@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_reverse_cumulative_extremes_on_an_axis(op):
    rng = np.random.default_rng(5)
    x = _sample(rng, (6, 5), np.complex64)
    f = lambda x: getattr(plax_lax, op)(x, axis=0, reverse=True)
    want = np.moveaxis(_suffix_folds(np.moveaxis(x, 0, -1), op == "cummax"), -1, 0)
    _assert_same_bits(f(x), want)
    _assert_same_bits(plax.jit(f)(x), want)


def test_reverse_cumulative_extremes_as_jax():
    # ties and infinities; JAX 0.10.2 differs from plax's fold (before this change as after)
    # where NaNs or zeros of both signs meet, so those are left out here
    jax = pytest.importorskip("jax")
    rng = np.random.default_rng(9)
    x = np.empty((40,), np.complex64)
    x.real, x.imag = (rng.choice([0.0, np.inf, -np.inf, 1.0, -1.0, 2.0, 0.5], 40)
                      for _ in range(2))
    for op in ("cummax", "cummin"):
        want = getattr(jax.lax, op)(x, reverse=True)
        _assert_same_bits(getattr(plax_lax, op)(x, reverse=True), want)
