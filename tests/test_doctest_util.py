"""The float-tolerant doctest checker accepts last-digit differences of floats printed to full
precision and nothing more: a short decimal (``-2.``, ``0.08``) must be printed exactly."""
from __future__ import annotations

import doctest

import pytest

from doctest_util import NumericOutputChecker

FLAGS = doctest.NORMALIZE_WHITESPACE


@pytest.mark.parametrize("want, got", [
    ("Array(1.5430807, dtype=float32)", "Array(1.5430806, dtype=float32)"),
    ("Array([ 1.7182817, 0.       ], dtype=float32)", "Array([1.7182818, 0.], dtype=float32)"),
    ("Array([nan, -inf,  1.], dtype=float32)", "Array([nan, -inf, 1.], dtype=float32)"),
    ("1.5000000e-07", "1.5000001e-07"),
    ("Array(-8.742278e-08, dtype=float32)", "Array(-8.742277e-08, dtype=float32)"),
    ("Array(0.946083, dtype=float32)", "Array(0.94608307, dtype=float32)"),  # 6 digits: full
    ("Array([-1.4901161e-08,  1.0000000e+00], dtype=float32)",
     "Array([-1.4901161e-08,  9.9999994e-01], dtype=float32)"),
    ("Array(0.3374, dtype=float32)", "Array(0.3374, dtype=float32)"),
])
def test_accepts_last_digit_differences(want, got):
    assert NumericOutputChecker().check_output(want + "\n", got + "\n", FLAGS)


@pytest.mark.parametrize("want, got", [
    ("Array(1.5430807, dtype=float32)", "Array(1.5431, dtype=float32)"),        # 4th digit
    ("Array(1.5430807, dtype=float32)", "Array(1.5430807, dtype=float64)"),      # dtype name
    ("Array([1., 2.], dtype=float32)", "Array([1., 2., 3.], dtype=float32)"),   # length
    ("Array([[1., 2.]], dtype=float32)", "Array([1., 2.], dtype=float32)"),     # rank
    ("Array(3, dtype=int32)", "Array(4, dtype=int32)"),                          # integers exact
    ("Array(1., dtype=float32)", "Array(-1., dtype=float32)"),                   # sign
    ("Array(nan, dtype=float32)", "Array(inf, dtype=float32)"),
    ("Array(inf, dtype=float32)", "Array(-inf, dtype=float32)"),
    ("1e-07", "0.0"),
    # a short decimal claims an exact value: a value that moves in the last digit is rounded
    ("Array(-2., dtype=float32)", "Array(-1.9999999, dtype=float32)"),
    ("Array([0.08, 1.  , 0.08], dtype=float32)", "Array([0.08000001, 1., 0.08000001], dtype=float32)"),
    ("Array([[ 1.,  0.],\n       [-1.,  1.]], dtype=float32)",
     "Array([[ 1., -0.],\n       [-1.,  1.]], dtype=float32)"),
    ("1.5e-07", "1.5000001e-07"),
    ("Array(2, dtype=int32)", "Array(2., dtype=float32)"),
])
def test_rejects_real_differences(want, got):
    assert not NumericOutputChecker().check_output(want + "\n", got + "\n", FLAGS)
