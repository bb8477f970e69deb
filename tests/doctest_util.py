"""Doctests whose printed floats may differ in the last digits from machine to machine.

A float32 ``cosh(1)`` prints ``1.5430807`` with one NumPy build and ``1.5430806`` with
another (vector libm, CPU features). :class:`NumericOutputChecker` accepts such output:
the text between numbers must match (whitespace normalised), integers must be equal, and
floats written to full precision (at least :data:`FULL_PRECISION_DIGITS` significant digits,
as NumPy prints a float32 that is not a short decimal) must agree to a relative tolerance of a
few float32 ulps. A float written with fewer digits (``-2.``, ``0.08``, ``0.``, a value an
example rounded) claims that exact value and must be printed exactly: ``-1.9999999`` for
``-2.`` or ``-0.`` for ``0.`` fails, so an example whose value may move in the last digit
prints it rounded. Anything else (a different dtype name, shape, sign or a wrong value) still
fails.
"""
from __future__ import annotations

import doctest
import linecache
import math
import re
from typing import NamedTuple
from unittest import mock

# A number as NumPy and Python print it: 1, -2., 1.5e-07, nan, -inf. Digits inside words
# (float32, int8, x1) are part of the word, not numbers.
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf)(?![\w])")

RTOL = 1e-6  # about eight float32 ulps (float32 eps is 1.2e-7)
#: a float printed with fewer significant digits is a short decimal, compared exactly
FULL_PRECISION_DIGITS = 6


def _split(text: str):
    """The text with numbers replaced by a marker (whitespace normalised), and the numbers."""
    numbers = _NUMBER.findall(text)
    skeleton = " ".join(_NUMBER.sub("#", text).split())
    # NumPy pads numbers to a common width: normalise the padding around brackets and commas
    skeleton = re.sub(r"\s*([\[\](),])\s*", r"\1", skeleton)
    return skeleton, numbers


def _is_int(token: str) -> bool:
    return token.lstrip("+-").isdigit()


def significant_digits(token: str) -> int:
    """How many significant digits a printed number shows: ``0.08`` 1, ``-2.`` 1, ``20.`` 2,
    ``1.2660658`` 8, ``1.0000000e+00`` 8 (written zeros after the first nonzero digit count)."""
    mantissa = re.split(r"[eE]", token.lstrip("+-"))[0]
    return len(mantissa.replace(".", "").lstrip("0"))


def numbers_close(want: str, got: str, rtol: float = RTOL) -> bool:
    """Whether two printed numbers agree: integers and short decimals exactly, floats written
    to full precision to a relative tolerance.

    The tolerance is relative only: libm differences are a few ulps of the result, also near 0.
    """
    if _is_int(want) and _is_int(got):
        return int(want) == int(got)
    if significant_digits(want) < FULL_PRECISION_DIGITS:
        return want == got
    a, b = float(want), float(got)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return a == b
    return abs(a - b) <= rtol * abs(a)


class NumericOutputChecker(doctest.OutputChecker):
    """An OutputChecker that tolerates last-digit differences in printed floats."""

    def check_output(self, want: str, got: str, optionflags: int) -> bool:
        if super().check_output(want, got, optionflags):
            return True
        want_text, want_numbers = _split(want)
        got_text, got_numbers = _split(got)
        return (want_text == got_text and len(want_numbers) == len(got_numbers)
                and all(map(numbers_close, want_numbers, got_numbers)))


class DoctestReport(NamedTuple):
    failed: int
    attempted: int
    failed_names: list  # the dotted names of the docstrings with a failing example


def run_doctests(tests, optionflags: int = doctest.NORMALIZE_WHITESPACE) -> DoctestReport:
    """Runs doctest ``tests`` with :class:`NumericOutputChecker` (each failure's report goes to
    stdout); returns how many examples failed, how many ran, and which docstrings failed."""
    runner = doctest.DocTestRunner(checker=NumericOutputChecker(), optionflags=optionflags)
    # DocTestRunner.run resets a pdb for every docstring, and that stats every file in
    # linecache (hundreds, once plax is imported): over half the CPU time of running plax's
    # examples. Nothing edits a source file while they run, so the check is skipped.
    with mock.patch.object(linecache, "checkcache", lambda filename=None: None):
        failed_names = [test.name for test in tests if runner.run(test).failed]
    failed, attempted = runner.summarize(verbose=False)
    return DoctestReport(failed, attempted, failed_names)
