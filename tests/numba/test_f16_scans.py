"""float16/bfloat16 ``argmax``/``argmin`` and cumulative ops as Numba kernels
(:mod:`plax_numba.codegen_scan`): the kernel is the path taken (its source in the compiled
program, no fallback warning) and its results are the NumPy backend's bit for bit (NaNs in
the same places: the sign of a NaN made from two NaNs is the hardware's choice) -- NaN
ties, first-index ties, all-NaN rows, ``reverse``, and rows shorter than, equal to and
longer than XLA's block of 16 (cumsum/cumprod follow its blocked order, where ``-0`` plus
the identity is ``+0``)."""
from __future__ import annotations

import numpy as np
import pytest

from plax import lax
from plax.dtypes import bfloat16

from numba_vs_numpy import assert_bits_equal, compiled_source, jit_both

LOW = [np.dtype(np.float16), np.dtype(bfloat16)]


def _values(dtype, shape, seed):
    """Small integers (many ties), with NaNs, zeros of both signs and infinities."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, shape).astype(np.float32)
    x[rng.random(shape) < 0.06] = np.nan
    x[rng.random(shape) < 0.06] = -0.0
    x[rng.random(shape) < 0.02] = np.inf
    x[rng.random(shape) < 0.02] = -np.inf
    return x.astype(dtype)


def _ops(axis):
    return {
        "argmax": lambda v: lax.argmax(v, axis, np.int32),
        "argmin": lambda v: lax.argmin(v, axis, np.int32),
        "cumsum": lambda v: lax.cumsum(v, axis),
        "cumsum_reverse": lambda v: lax.cumsum(v, axis, reverse=True),
        "cumprod": lambda v: lax.cumprod(v, axis),
        "cumprod_reverse": lambda v: lax.cumprod(v, axis, reverse=True),
        "cummax": lambda v: lax.cummax(v, axis),
        "cummin_reverse": lambda v: lax.cummin(v, axis, reverse=True),
        "cummin": lambda v: lax.cummin(v, axis),
        "cummax_reverse": lambda v: lax.cummax(v, axis, reverse=True),
    }


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("shape,axis", [((300,), 0), ((33, 5), 0), ((2, 16, 3), 1),
                                        ((4, 17), 1)])
def test_kernels_equal_the_reference_bit_for_bit(dtype, shape, axis):
    x = _values(dtype, shape, seed=sum(shape) + axis)
    for name, f in _ops(axis).items():
        source = compiled_source(f, x)
        # the equation's own kernel, reading the operand's bits
        prim = name.split("_")[0]
        assert f"generated from the equations ({prim})" in source, (name, source)
        assert "def kernel(a0" in source
        (got,), (want,) = jit_both(f, x, fallback_is_error=True)
        assert_bits_equal(got, want)


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_arg_reductions_nan_and_ties(dtype):
    nan = np.nan
    x = np.array([[1, 3, 3, 2, 3],          # first of equal maxima: 1
                  [nan, 5, nan, 9, -1],     # a NaN first: 0
                  [2, 7, nan, 7, nan],      # the first NaN wins: 2
                  [nan, nan, nan, nan, nan],  # all NaN: 0
                  [-1, -1, -1, -1, -1],     # all equal: 0
                  [0, -0.0, 0, -0.0, -4]], np.float32).astype(dtype)
    for f in (lambda v: lax.argmax(v, 1, np.int32), lambda v: lax.argmin(v, 1, np.int32),
              lambda v: lax.argmax(v, 0, np.int32), lambda v: lax.argmin(v, 0, np.int64)):
        (got,), (want,) = jit_both(f, x, fallback_is_error=True)
        assert_bits_equal(got, want)
    (got,), _ = jit_both(lambda v: lax.argmax(v, 1, np.int32), x)
    np.testing.assert_array_equal(got, [1, 0, 2, 0, 0, 0])


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_blocked_sums_round_every_step(dtype):
    # random values: every partial sum rounds, so only XLA's blocked order (blocks of 16,
    # their totals scanned by blocks, then combined) gives the reference's bits; long rows
    # make three levels of totals
    x = np.random.default_rng(5).standard_normal((2, 5000)).astype(dtype)
    x[0, :40] = -0.0  # -0 plus the identity: +0 in both
    for reverse in (False, True):
        for f in (lambda v: lax.cumsum(v, 1, reverse=reverse),
                  lambda v: lax.cumprod(v * 0.0 + 1.0009765625, 1, reverse=reverse)):
            (got,), (want,) = jit_both(f, x, fallback_is_error=True)
            assert_bits_equal(got, want)


def test_other_dtypes_keep_the_reference_kernel():
    x = np.arange(40, dtype=np.float32)
    source = compiled_source(lambda v: (lax.argmax(v, 0, np.int32), lax.cumsum(v, 0)), x)
    assert "generated from the equations (argmax)" not in source
    assert "generated from the equations (cumsum)" not in source


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_sums_of_decoded_values_may_reassociate(dtype):
    # jnp.sum of a float16 array (decode, reduce_sum): its kernel adds in any order
    # (vectorised); on multiples of 1/8 every order is exact, so the bits are the reference's
    from plax import numpy as jnp
    x = (np.random.default_rng(6).integers(-64, 65, (40, 300)) / 8).astype(dtype)
    for axis in (None, 0, 1):
        f = lambda v: jnp.sum(v, axis=axis)  # noqa: E731
        assert 'fastmath={"reassoc"}' in compiled_source(f, x)
        (got,), (want,) = jit_both(f, x, fallback_is_error=True)
        assert_bits_equal(got, want)
    # with an arithmetic producer (whose rounding reassociation could change): in order
    assert "reassoc" not in compiled_source(lambda v: jnp.sum(v * 2.0), x)
