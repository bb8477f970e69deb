"""The bit comparison the Numba backend's tests rely on (``numba_vs_numpy.assert_bits_equal``):
NaNs in the same places count as equal whatever their payload, every other value must have
the same bits, for NumPy's floats, bfloat16 (NumPy kind "V") and complex values alike."""
from __future__ import annotations

import numpy as np
import pytest

from plax import dtypes

from numba_vs_numpy import assert_bits_equal

FLOATS = [dtypes.bfloat16, np.float16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_nans_in_the_same_places_are_equal(dtype):
    a = np.array([1.5, np.nan, -0.0, np.inf], dtype)
    b = a.copy()
    ui = np.dtype(f"u{a.dtype.itemsize}")
    b.view(ui)[1] |= 1  # another NaN payload
    assert np.isnan(b[1]) and a.view(ui)[1] != b.view(ui)[1]
    assert_bits_equal(a, b)


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_other_bits_differ(dtype):
    a = np.array([1.5, np.nan, 0.0], dtype)
    with pytest.raises(AssertionError):  # a NaN where the other has a number
        assert_bits_equal(a, np.array([1.5, 2.0, 0.0], dtype))
    with pytest.raises(AssertionError):  # -0.0 is not 0.0 bit for bit
        assert_bits_equal(a, np.array([1.5, np.nan, -0.0], dtype))
    with pytest.raises(AssertionError):  # dtypes differ
        assert_bits_equal(a, a.astype(np.float64 if a.dtype != np.float64 else np.float32))


def test_complex_parts_compared_bit_for_bit():
    a = np.array([1 + 2j, complex(np.nan, 1.0)], np.complex64)
    assert_bits_equal(a, a.copy())
    assert_bits_equal(np.complex128(3 - 1j) * np.ones(()), np.array(3 - 1j))  # 0-d
    with pytest.raises(AssertionError):
        assert_bits_equal(a, np.array([1 - 0.0j + 2j, complex(1.0, np.nan)], np.complex64))


def test_integers_compared_as_values():
    a = np.array([1, 2, 3], np.int32)
    assert_bits_equal(a, a.copy())
    with pytest.raises(AssertionError):
        assert_bits_equal(a, np.array([1, 2, 4], np.int32))
