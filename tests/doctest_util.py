"""Doctests whose printed floats may differ in the last digits from machine to machine.

A float32 ``cosh(1)`` prints ``1.5430807`` with one NumPy build and ``1.5430806`` with
another (vector libm, CPU features). :class:`NumericOutputChecker` accepts such output:
the text between numbers must match (whitespace normalised), integers must be equal, and
floats must agree to a relative tolerance of a few float32 ulps. Anything else (a
different dtype name, shape, sign or a wrong value) still fails.
"""
from __future__ import annotations

import doctest
import math
import re

# A number as NumPy and Python print it: 1, -2., 1.5e-07, nan, -inf. Digits inside words
# (float32, int8, x1) are part of the word, not numbers.
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf)(?![\w])")

RTOL = 1e-6  # about eight float32 ulps (float32 eps is 1.2e-7)


def _split(text: str):
    """The text with numbers replaced by a marker (whitespace normalised), and the numbers."""
    numbers = _NUMBER.findall(text)
    skeleton = " ".join(_NUMBER.sub("#", text).split())
    # NumPy pads numbers to a common width: normalise the padding around brackets and commas
    skeleton = re.sub(r"\s*([\[\](),])\s*", r"\1", skeleton)
    return skeleton, numbers


def _is_int(token: str) -> bool:
    return token.lstrip("+-").isdigit()


def numbers_close(want: str, got: str, rtol: float = RTOL) -> bool:
    """Whether two printed numbers agree: integers exactly, floats to a relative tolerance.

    The tolerance is relative only: libm differences are a few ulps of the result, also near 0.
    """
    if _is_int(want) and _is_int(got):
        return int(want) == int(got)
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


def run_doctests(tests, optionflags: int = doctest.NORMALIZE_WHITESPACE) -> doctest.TestResults:
    """Runs doctest ``tests`` with :class:`NumericOutputChecker`; returns (failed, attempted)."""
    runner = doctest.DocTestRunner(checker=NumericOutputChecker(), optionflags=optionflags)
    for test in tests:
        runner.run(test)
    return runner.summarize(verbose=False)
