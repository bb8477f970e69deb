"""The Array API standard 2023.12's special cases for elementwise functions (real-valued
floating-point operands), as a table: one row per sentence of the standard, with the
standard's wording, representative operands for the values the sentence names, and the result
it requires.

Rows where JAX deliberately differs carry ``jax=`` (the result JAX gives, which plax keeps)
and ``why=``; ``test_special_cases.py`` checks plax against the standard's result or, on those
rows, against JAX's (and, where JAX is installed, that JAX indeed gives it).

Expected results are numbers (zeros compared with their sign, NaN as NaN), the tokens below,
or the ``approx(...)`` of an irrational constant.

The rows for complex operands are in ``special_cases_complex.py``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

NAN, INF = math.nan, math.inf
PZ, NZ = 0.0, -0.0

# representative operands for the value classes the standard names
POS_FINITE = [0.5, 1.0, 2.5, 1e30]
NEG_FINITE = [-v for v in POS_FINITE]
NONZERO_FINITE = POS_FINITE + NEG_FINITE
FINITE = NONZERO_FINITE + [PZ, NZ]
ANY = FINITE + [INF, -INF, NAN]
NOT_NAN = FINITE + [INF, -INF]
INTEGERS = [1.0, 2.0, -3.0, 4.0, 1e20, -1e20]
ODD_POS, EVEN_POS, NONINT_POS = [1.0, 3.0, 5.0], [2.0, 4.0, 1e20], [0.5, 2.5]
ODD_NEG, EVEN_NEG, NONINT_NEG = [-1.0, -3.0], [-2.0, -4.0], [-0.5, -2.5]

# tokens for results that depend on the operands
X1, X2 = "x1", "x2"                      # the result is x1_i / x2_i
ABS_X1, ABS_X2 = "abs(x1)", "abs(x2)"
NEG_ABS_X1 = "-abs(x1)"
POSITIVE, NEGATIVE = "positive", "negative"   # only the mathematical sign is prescribed
SIGNED_INF = "signed_inf"                # an infinity with the sign of the product's operands
ZERO = "zero"                            # 0 of either sign


@dataclass
class approx:
    """An implementation-dependent approximation to ``value``."""
    value: float


@dataclass
class Row:
    func: str
    wording: str
    x1: Sequence[float]
    x2: Optional[Sequence[float]] = None   # None for unary functions
    result: Any = NAN
    jax: Any = None                        # JAX's (and plax's) result where it deviates
    why: str = ""
    kwargs: dict = field(default_factory=dict)


ROWS: list[Row] = []


def unary(func: str, *cases) -> None:
    for case in cases:
        wording, xs, result = case[:3]
        extra = case[3] if len(case) > 3 else {}
        ROWS.append(Row(func, wording, xs, None, result, **extra))


def binary(func: str, *cases) -> None:
    for case in cases:
        wording, x1, x2, result = case[:4]
        extra = case[4] if len(case) > 4 else {}
        ROWS.append(Row(func, wording, x1, x2, result, **extra))


IS_NAN = ("If x_i is NaN, the result is NaN.", [NAN], NAN)
INTEGER_VALUED = ("If x_i is already integer-valued, the result is x_i.",
                  [PZ, NZ, INF, -INF, 3.0, -7.0, 1e20], "x")
INTEGER_NAN = ("If x_i is NaN, the result is NaN.", [NAN], NAN)

unary("abs", IS_NAN,
      ("If x_i is -0, the result is +0.", [NZ], PZ),
      ("If x_i is -infinity, the result is +infinity.", [-INF], INF))
unary("acos", IS_NAN,
      ("If x_i is greater than 1, the result is NaN.", [1.5, 10.0, INF], NAN),
      ("If x_i is less than -1, the result is NaN.", [-1.5, -10.0, -INF], NAN),
      ("If x_i is 1, the result is +0.", [1.0], PZ))
unary("acosh", IS_NAN,
      ("If x_i is less than 1, the result is NaN.", [0.5, PZ, -2.0, -INF], NAN),
      ("If x_i is 1, the result is +0.", [1.0], PZ),
      ("If x_i is +infinity, the result is +infinity.", [INF], INF))
unary("asin", IS_NAN,
      ("If x_i is greater than 1, the result is NaN.", [1.5, INF], NAN),
      ("If x_i is less than -1, the result is NaN.", [-1.5, -INF], NAN),
      ("If x_i is +0, the result is +0.", [PZ], PZ),
      ("If x_i is -0, the result is -0.", [NZ], NZ))
unary("asinh", IS_NAN,
      ("If x_i is +0, the result is +0.", [PZ], PZ),
      ("If x_i is -0, the result is -0.", [NZ], NZ),
      ("If x_i is +infinity, the result is +infinity.", [INF], INF),
      ("If x_i is -infinity, the result is -infinity.", [-INF], -INF))
unary("atan", IS_NAN,
      ("If x_i is +0, the result is +0.", [PZ], PZ),
      ("If x_i is -0, the result is -0.", [NZ], NZ),
      ("If x_i is +infinity, the result is an implementation-dependent approximation to +π/2.",
       [INF], approx(math.pi / 2)),
      ("If x_i is -infinity, the result is an implementation-dependent approximation to -π/2.",
       [-INF], approx(-math.pi / 2)))
unary("atanh", IS_NAN,
      ("If x_i is less than -1, the result is NaN.", [-1.5, -INF], NAN),
      ("If x_i is greater than 1, the result is NaN.", [1.5, INF], NAN),
      ("If x_i is -1, the result is -infinity.", [-1.0], -INF),
      ("If x_i is +1, the result is +infinity.", [1.0], INF),
      ("If x_i is +0, the result is +0.", [PZ], PZ),
      ("If x_i is -0, the result is -0.", [NZ], NZ))
unary("ceil", INTEGER_VALUED, INTEGER_NAN)
unary("floor", INTEGER_VALUED, INTEGER_NAN)
unary("trunc", INTEGER_VALUED, INTEGER_NAN)
unary("round", INTEGER_VALUED, INTEGER_NAN,
      ("If two integers are equally close to x_i, the result is the even integer closest to "
       "x_i.", [0.5, 1.5, 2.5, -0.5, -2.5], "round_half_even"))
unary("cos", IS_NAN,
      ("If x_i is +0, the result is 1.", [PZ], 1.0),
      ("If x_i is -0, the result is 1.", [NZ], 1.0),
      ("If x_i is +infinity, the result is NaN.", [INF], NAN),
      ("If x_i is -infinity, the result is NaN.", [-INF], NAN))
unary("cosh", IS_NAN,
      ("If x_i is +0, the result is 1.", [PZ], 1.0),
      ("If x_i is -0, the result is 1.", [NZ], 1.0),
      ("If x_i is +infinity, the result is +infinity.", [INF], INF),
      ("If x_i is -infinity, the result is +infinity.", [-INF], INF))
unary("exp", IS_NAN,
      ("If x_i is +0, the result is 1.", [PZ], 1.0),
      ("If x_i is -0, the result is 1.", [NZ], 1.0),
      ("If x_i is +infinity, the result is +infinity.", [INF], INF),
      ("If x_i is -infinity, the result is +0.", [-INF], PZ))
unary("expm1", IS_NAN,
      ("If x_i is +0, the result is +0.", [PZ], PZ),
      ("If x_i is -0, the result is -0.", [NZ], NZ),
      ("If x_i is +infinity, the result is +infinity.", [INF], INF),
      ("If x_i is -infinity, the result is -1.", [-INF], -1.0))
for _log in ("log", "log2", "log10"):
    unary(_log, IS_NAN,
          ("If x_i is less than 0, the result is NaN.", [-0.5, -2.0, -INF], NAN),
          ("If x_i is either +0 or -0, the result is -infinity.", [PZ, NZ], -INF),
          ("If x_i is 1, the result is +0.", [1.0], PZ),
          ("If x_i is +infinity, the result is +infinity.", [INF], INF))
unary("log1p", IS_NAN,
      ("If x_i is less than -1, the result is NaN.", [-1.5, -INF], NAN),
      ("If x_i is -1, the result is -infinity.", [-1.0], -INF),
      ("If x_i is -0, the result is -0.", [NZ], NZ),
      ("If x_i is +0, the result is +0.", [PZ], PZ),
      ("If x_i is +infinity, the result is +infinity.", [INF], INF))
unary("sign", IS_NAN,
      ("If x_i is less than 0, the result is -1.", NEG_FINITE + [-INF], -1.0),
      ("If x_i is either -0 or +0, the result is 0.", [PZ, NZ], ZERO),
      ("If x_i is greater than 0, the result is +1.", POS_FINITE + [INF], 1.0))
unary("signbit",
      ("If x_i is +0, the result is False.", [PZ], False),
      ("If x_i is -0, the result is True.", [NZ], True),
      ("If x_i is +infinity, the result is False.", [INF], False),
      ("If x_i is -infinity, the result is True.", [-INF], True),
      ("If x_i is a positive (i.e., greater than 0) finite number, the result is False.",
       POS_FINITE, False),
      ("If x_i is a negative (i.e., less than 0) finite number, the result is True.",
       NEG_FINITE, True),
      ("If x_i is NaN and the sign bit of x_i is 0, the result is False.", [NAN], False),
      ("If x_i is NaN and the sign bit of x_i is 1, the result is True.", [-NAN], True))
unary("sin", IS_NAN,
      ("If x_i is +0, the result is +0.", [PZ], PZ),
      ("If x_i is -0, the result is -0.", [NZ], NZ),
      ("If x_i is either +infinity or -infinity, the result is NaN.", [INF, -INF], NAN))
unary("sinh", IS_NAN,
      ("If x_i is +0, the result is +0.", [PZ], PZ),
      ("If x_i is -0, the result is -0.", [NZ], NZ),
      ("If x_i is +infinity, the result is +infinity.", [INF], INF),
      ("If x_i is -infinity, the result is -infinity.", [-INF], -INF))
unary("sqrt", IS_NAN,
      ("If x_i is less than 0, the result is NaN.", [-0.5, -2.0, -INF], NAN),
      ("If x_i is +0, the result is +0.", [PZ], PZ),
      ("If x_i is -0, the result is -0.", [NZ], NZ),
      ("If x_i is +infinity, the result is +infinity.", [INF], INF))
unary("tan", IS_NAN,
      ("If x_i is +0, the result is +0.", [PZ], PZ),
      ("If x_i is -0, the result is -0.", [NZ], NZ),
      ("If x_i is either +infinity or -infinity, the result is NaN.", [INF, -INF], NAN))
unary("tanh", IS_NAN,
      ("If x_i is +0, the result is +0.", [PZ], PZ),
      ("If x_i is -0, the result is -0.", [NZ], NZ),
      ("If x_i is +infinity, the result is +1.", [INF], 1.0),
      ("If x_i is -infinity, the result is -1.", [-INF], -1.0))
unary("square", ("For real-valued floating-point operands, special cases must be handled as if "
                 "the operation is implemented as x_i * x_i (see multiply).",
                 [NAN, INF, -INF, PZ, NZ], "x*x"))
unary("isnan",
      ("If x_i is NaN, the result is True; otherwise False.", [NAN, INF, PZ, 1.0], "isnan"))
unary("isinf",
      ("If x_i is either +infinity or -infinity, the result is True; otherwise False.",
       [NAN, INF, -INF, PZ, 1.0], "isinf"))
unary("isfinite",
      ("If x_i is a finite number, the result is True; otherwise False.",
       [NAN, INF, -INF, PZ, 1.0], "isfinite"))

EITHER_NAN = ("If either x1_i or x2_i is NaN, the result is NaN.", [NAN, 1.0, NAN, INF],
              [1.0, NAN, NAN, NAN], NAN, {"kwargs": {"paired": True}})

binary("add", EITHER_NAN,
       ("If x1_i is +infinity and x2_i is -infinity, the result is NaN.", [INF], [-INF], NAN),
       ("If x1_i is -infinity and x2_i is +infinity, the result is NaN.", [-INF], [INF], NAN),
       ("If x1_i is +infinity and x2_i is +infinity, the result is +infinity.", [INF], [INF], INF),
       ("If x1_i is -infinity and x2_i is -infinity, the result is -infinity.", [-INF], [-INF],
        -INF),
       ("If x1_i is +infinity and x2_i is a finite number, the result is +infinity.", [INF],
        FINITE, INF),
       ("If x1_i is -infinity and x2_i is a finite number, the result is -infinity.", [-INF],
        FINITE, -INF),
       ("If x1_i is a finite number and x2_i is +infinity, the result is +infinity.", FINITE,
        [INF], INF),
       ("If x1_i is a finite number and x2_i is -infinity, the result is -infinity.", FINITE,
        [-INF], -INF),
       ("If x1_i is -0 and x2_i is -0, the result is -0.", [NZ], [NZ], NZ),
       ("If x1_i is -0 and x2_i is +0, the result is +0.", [NZ], [PZ], PZ),
       ("If x1_i is +0 and x2_i is -0, the result is +0.", [PZ], [NZ], PZ),
       ("If x1_i is +0 and x2_i is +0, the result is +0.", [PZ], [PZ], PZ),
       ("If x1_i is either +0 or -0 and x2_i is a nonzero finite number, the result is x2_i.",
        [PZ, NZ], NONZERO_FINITE, X2),
       ("If x1_i is a nonzero finite number and x2_i is either +0 or -0, the result is x1_i.",
        NONZERO_FINITE, [PZ, NZ], X1),
       ("If x1_i is a nonzero finite number and x2_i is -x1_i, the result is +0.",
        NONZERO_FINITE, [-v for v in NONZERO_FINITE], PZ, {"kwargs": {"paired": True}}))
binary("subtract", EITHER_NAN,
       ("Special cases as for add(x1_i, -x2_i): +infinity - +infinity is NaN.", [INF, -INF],
        [INF, -INF], NAN, {"kwargs": {"paired": True}}),
       ("Special cases as for add(x1_i, -x2_i): +0 - +0 is +0 and -0 - +0 is -0.", [PZ, NZ],
        [PZ, PZ], "x1+(-x2)", {"kwargs": {"paired": True}}))
binary("atan2", EITHER_NAN,
       ("If x1_i is greater than 0 and x2_i is +0, the result is an implementation-dependent "
        "approximation to +π/2.", POS_FINITE + [INF], [PZ], approx(math.pi / 2)),
       ("If x1_i is greater than 0 and x2_i is -0, the result is an implementation-dependent "
        "approximation to +π/2.", POS_FINITE + [INF], [NZ], approx(math.pi / 2)),
       ("If x1_i is +0 and x2_i is greater than 0, the result is +0.", [PZ], POS_FINITE + [INF],
        PZ),
       ("If x1_i is +0 and x2_i is +0, the result is +0.", [PZ], [PZ], PZ),
       ("If x1_i is +0 and x2_i is -0, the result is an implementation-dependent approximation "
        "to +π.", [PZ], [NZ], approx(math.pi)),
       ("If x1_i is +0 and x2_i is less than 0, the result is an implementation-dependent "
        "approximation to +π.", [PZ], NEG_FINITE + [-INF], approx(math.pi)),
       ("If x1_i is -0 and x2_i is greater than 0, the result is -0.", [NZ], POS_FINITE + [INF],
        NZ),
       ("If x1_i is -0 and x2_i is +0, the result is -0.", [NZ], [PZ], NZ),
       ("If x1_i is -0 and x2_i is -0, the result is an implementation-dependent approximation "
        "to -π.", [NZ], [NZ], approx(-math.pi)),
       ("If x1_i is -0 and x2_i is less than 0, the result is an implementation-dependent "
        "approximation to -π.", [NZ], NEG_FINITE + [-INF], approx(-math.pi)),
       ("If x1_i is less than 0 and x2_i is +0, the result is an implementation-dependent "
        "approximation to -π/2.", NEG_FINITE + [-INF], [PZ], approx(-math.pi / 2)),
       ("If x1_i is less than 0 and x2_i is -0, the result is an implementation-dependent "
        "approximation to -π/2.", NEG_FINITE + [-INF], [NZ], approx(-math.pi / 2)),
       ("If x1_i is greater than 0, x1_i is a finite number, and x2_i is +infinity, the result "
        "is +0.", POS_FINITE, [INF], PZ),
       ("If x1_i is greater than 0, x1_i is a finite number, and x2_i is -infinity, the result "
        "is an implementation-dependent approximation to +π.", POS_FINITE, [-INF],
        approx(math.pi)),
       ("If x1_i is less than 0, x1_i is a finite number, and x2_i is +infinity, the result is "
        "-0.", NEG_FINITE, [INF], NZ),
       ("If x1_i is less than 0, x1_i is a finite number, and x2_i is -infinity, the result is "
        "an implementation-dependent approximation to -π.", NEG_FINITE, [-INF],
        approx(-math.pi)),
       ("If x1_i is +infinity and x2_i is a finite number, the result is an "
        "implementation-dependent approximation to +π/2.", [INF], FINITE, approx(math.pi / 2)),
       ("If x1_i is -infinity and x2_i is a finite number, the result is an "
        "implementation-dependent approximation to -π/2.", [-INF], FINITE, approx(-math.pi / 2)),
       ("If x1_i is +infinity and x2_i is +infinity, the result is an implementation-dependent "
        "approximation to +π/4.", [INF], [INF], approx(math.pi / 4)),
       ("If x1_i is +infinity and x2_i is -infinity, the result is an implementation-dependent "
        "approximation to +3π/4.", [INF], [-INF], approx(3 * math.pi / 4)),
       ("If x1_i is -infinity and x2_i is +infinity, the result is an implementation-dependent "
        "approximation to -π/4.", [-INF], [INF], approx(-math.pi / 4)),
       ("If x1_i is -infinity and x2_i is -infinity, the result is an implementation-dependent "
        "approximation to -3π/4.", [-INF], [-INF], approx(-3 * math.pi / 4)))

# nonzero finite operand pairs of the same sign and of different signs (a negative dividend
# over a larger negative divisor floors to +0)
_SAME_SIGN = (NONZERO_FINITE, [2.5, 0.5, 1e30, 1.0, -2.5, -0.5, -1e30, -1.0])
_DIFFERENT_SIGNS = (NONZERO_FINITE, [-2.5, -0.5, -1e30, -1.0, 2.5, 0.5, 1e30, 1.0])
_PAIRED = {"kwargs": {"paired": True}}

_DIVIDE_COMMON = [
    EITHER_NAN,
    ("If x1_i is either +infinity or -infinity and x2_i is either +infinity or -infinity, the "
     "result is NaN.", [INF, -INF], [INF, -INF], NAN),
    ("If x1_i is either +0 or -0 and x2_i is either +0 or -0, the result is NaN.", [PZ, NZ],
     [PZ, NZ], NAN),
    ("If x1_i is +0 and x2_i is greater than 0, the result is +0.", [PZ], POS_FINITE, PZ),
    ("If x1_i is -0 and x2_i is greater than 0, the result is -0.", [NZ], POS_FINITE, NZ),
    ("If x1_i is +0 and x2_i is less than 0, the result is -0.", [PZ], NEG_FINITE, NZ),
    ("If x1_i is -0 and x2_i is less than 0, the result is +0.", [NZ], NEG_FINITE, PZ),
    ("If x1_i is greater than 0 and x2_i is +0, the result is +infinity.", POS_FINITE, [PZ], INF),
    ("If x1_i is greater than 0 and x2_i is -0, the result is -infinity.", POS_FINITE, [NZ],
     -INF),
    ("If x1_i is less than 0 and x2_i is +0, the result is -infinity.", NEG_FINITE, [PZ], -INF),
    ("If x1_i is less than 0 and x2_i is -0, the result is +infinity.", NEG_FINITE, [NZ], INF),
]
binary("divide", *_DIVIDE_COMMON,
       ("If x1_i is +infinity and x2_i is a positive (i.e., greater than 0) finite number, the "
        "result is +infinity.", [INF], POS_FINITE, INF),
       ("If x1_i is +infinity and x2_i is a negative (i.e., less than 0) finite number, the "
        "result is -infinity.", [INF], NEG_FINITE, -INF),
       ("If x1_i is -infinity and x2_i is a positive (i.e., greater than 0) finite number, the "
        "result is -infinity.", [-INF], POS_FINITE, -INF),
       ("If x1_i is -infinity and x2_i is a negative (i.e., less than 0) finite number, the "
        "result is +infinity.", [-INF], NEG_FINITE, INF),
       ("If x1_i is a positive (i.e., greater than 0) finite number and x2_i is +infinity, the "
        "result is +0.", POS_FINITE, [INF], PZ),
       ("If x1_i is a positive (i.e., greater than 0) finite number and x2_i is -infinity, the "
        "result is -0.", POS_FINITE, [-INF], NZ),
       ("If x1_i is a negative (i.e., less than 0) finite number and x2_i is +infinity, the "
        "result is -0.", NEG_FINITE, [INF], NZ),
       ("If x1_i is a negative (i.e., less than 0) finite number and x2_i is -infinity, the "
        "result is +0.", NEG_FINITE, [-INF], PZ),
       ("If x1_i and x2_i have the same mathematical sign and are both nonzero finite numbers, "
        "the result has a positive mathematical sign.", *_SAME_SIGN, POSITIVE, _PAIRED),
       ("If x1_i and x2_i have different mathematical signs and are both nonzero finite "
        "numbers, the result has a negative mathematical sign.", *_DIFFERENT_SIGNS, NEGATIVE,
        _PAIRED))

_JAX_FLOOR = ("jnp.floor_divide on floats is floor(x1 / x2) after fmod-based correction (as "
              "NumPy's), so infinite quotients become NaN and signed zeros follow the product")
binary("floor_divide", *_DIVIDE_COMMON,
       ("If x1_i is +infinity and x2_i is a positive (i.e., greater than 0) finite number, the "
        "result is +infinity.", [INF], POS_FINITE, INF, {"jax": NAN, "why": _JAX_FLOOR}),
       ("If x1_i is +infinity and x2_i is a negative (i.e., less than 0) finite number, the "
        "result is -infinity.", [INF], NEG_FINITE, -INF, {"jax": NAN, "why": _JAX_FLOOR}),
       ("If x1_i is -infinity and x2_i is a positive (i.e., greater than 0) finite number, the "
        "result is -infinity.", [-INF], POS_FINITE, -INF, {"jax": NAN, "why": _JAX_FLOOR}),
       ("If x1_i is -infinity and x2_i is a negative (i.e., less than 0) finite number, the "
        "result is +infinity.", [-INF], NEG_FINITE, INF, {"jax": NAN, "why": _JAX_FLOOR}),
       ("If x1_i is a positive (i.e., greater than 0) finite number and x2_i is +infinity, the "
        "result is +0.", POS_FINITE, [INF], PZ),
       ("If x1_i is a positive (i.e., greater than 0) finite number and x2_i is -infinity, the "
        "result is -1.", POS_FINITE, [-INF], -1.0),
       ("If x1_i is a negative (i.e., less than 0) finite number and x2_i is +infinity, the "
        "result is -1.", NEG_FINITE, [INF], -1.0),
       ("If x1_i is a negative (i.e., less than 0) finite number and x2_i is -infinity, the "
        "result is +0.", NEG_FINITE, [-INF], PZ),  # JAX 0.10 gives -0 here; plax the standard's +0
       ("If x1_i and x2_i have the same mathematical sign and are both nonzero finite numbers, "
        "the result has a positive mathematical sign.", *_SAME_SIGN, POSITIVE, _PAIRED),
       ("If x1_i and x2_i have different mathematical signs and are both nonzero finite "
        "numbers, the result has a negative mathematical sign.", *_DIFFERENT_SIGNS, NEGATIVE,
        _PAIRED))

_JAX_REM = ("jnp.remainder follows NumPy: x1 - floor_divide(x1, x2) * x2 with the sign of x2, "
            "so a zero dividend keeps its own sign")
binary("remainder", EITHER_NAN,
       ("If x1_i is either +infinity or -infinity and x2_i is either +infinity or -infinity, "
        "the result is NaN.", [INF, -INF], [INF, -INF], NAN),
       ("If x1_i is either +0 or -0 and x2_i is either +0 or -0, the result is NaN.", [PZ, NZ],
        [PZ, NZ], NAN),
       ("If x1_i is +0 and x2_i is greater than 0, the result is +0.", [PZ], POS_FINITE, PZ),
       ("If x1_i is -0 and x2_i is greater than 0, the result is +0.", [NZ], POS_FINITE, PZ,
        {"jax": NZ, "why": _JAX_REM}),
       ("If x1_i is +0 and x2_i is less than 0, the result is -0.", [PZ], NEG_FINITE, NZ,
        {"jax": PZ, "why": _JAX_REM}),
       ("If x1_i is -0 and x2_i is less than 0, the result is -0.", [NZ], NEG_FINITE, NZ),
       ("If x1_i is greater than 0 and x2_i is +0, the result is NaN.", POS_FINITE, [PZ], NAN),
       ("If x1_i is greater than 0 and x2_i is -0, the result is NaN.", POS_FINITE, [NZ], NAN),
       ("If x1_i is less than 0 and x2_i is +0, the result is NaN.", NEG_FINITE, [PZ], NAN),
       ("If x1_i is less than 0 and x2_i is -0, the result is NaN.", NEG_FINITE, [NZ], NAN),
       ("If x1_i is +infinity and x2_i is a positive (i.e., greater than 0) finite number, the "
        "result is NaN.", [INF], POS_FINITE, NAN),
       ("If x1_i is +infinity and x2_i is a negative (i.e., less than 0) finite number, the "
        "result is NaN.", [INF], NEG_FINITE, NAN),
       ("If x1_i is -infinity and x2_i is a positive (i.e., greater than 0) finite number, the "
        "result is NaN.", [-INF], POS_FINITE, NAN),
       ("If x1_i is -infinity and x2_i is a negative (i.e., less than 0) finite number, the "
        "result is NaN.", [-INF], NEG_FINITE, NAN),
       ("If x1_i is a positive (i.e., greater than 0) finite number and x2_i is +infinity, the "
        "result is x1_i.", POS_FINITE, [INF], X1),
       ("If x1_i is a positive (i.e., greater than 0) finite number and x2_i is -infinity, the "
        "result is x2_i.", POS_FINITE, [-INF], X2),
       ("If x1_i is a negative (i.e., less than 0) finite number and x2_i is +infinity, the "
        "result is x2_i.", NEG_FINITE, [INF], X2),
       ("If x1_i is a negative (i.e., less than 0) finite number and x2_i is -infinity, the "
        "result is x1_i.", NEG_FINITE, [-INF], X1),
       ("If x1_i and x2_i are both nonzero finite numbers with the same mathematical sign, the "
        "result has that sign (the sign of x2_i).", [1.5, -1.5, 7.0], [1.0, -1.0, 2.0],
        "sign_of_x2", {"kwargs": {"paired": True}}),
       ("In the remaining cases, the result must match that of x1_i - floor(x1_i / x2_i) * "
        "x2_i, with the sign of x2_i.", [7.0, -7.0, 7.5], [-2.0, 2.0, -2.0], "sign_of_x2",
        {"kwargs": {"paired": True}}))

binary("multiply", EITHER_NAN,
       ("If x1_i is either +infinity or -infinity and x2_i is either +0 or -0, the result is "
        "NaN.", [INF, -INF], [PZ, NZ], NAN),
       ("If x1_i is either +0 or -0 and x2_i is either +infinity or -infinity, the result is "
        "NaN.", [PZ, NZ], [INF, -INF], NAN),
       ("If x1_i and x2_i have the same mathematical sign, the result has a positive "
        "mathematical sign, unless the result is NaN.", [PZ, 2.0, INF, -2.0], [PZ, 3.0, INF, -3.0],
        POSITIVE, {"kwargs": {"paired": True}}),
       ("If x1_i and x2_i have different mathematical signs, the result has a negative "
        "mathematical sign, unless the result is NaN.", [NZ, -2.0, -INF, 2.0], [PZ, 3.0, INF, -INF],
        NEGATIVE, {"kwargs": {"paired": True}}),
       ("If x1_i is either +infinity or -infinity and x2_i is either +infinity or -infinity, "
        "the result is a signed infinity with the mathematical sign determined by the rule "
        "already stated above.", [INF, -INF], [INF, -INF], SIGNED_INF),
       ("If x1_i is either +infinity or -infinity and x2_i is a nonzero finite number, the "
        "result is a signed infinity with the mathematical sign determined by the rule already "
        "stated above.", [INF, -INF], NONZERO_FINITE, SIGNED_INF),
       ("If x1_i is a nonzero finite number and x2_i is either +infinity or -infinity, the "
        "result is a signed infinity with the mathematical sign determined by the rule already "
        "stated above.", NONZERO_FINITE, [INF, -INF], SIGNED_INF))

binary("pow",
       ("If x1_i is not equal to 1 and x2_i is NaN, the result is NaN.", [2.0, PZ, NAN, -1.0],
        [NAN], NAN),
       ("If x2_i is +0, the result is 1, even if x1_i is NaN.", ANY, [PZ], 1.0),
       ("If x2_i is -0, the result is 1, even if x1_i is NaN.", ANY, [NZ], 1.0),
       ("If x1_i is NaN and x2_i is not equal to 0, the result is NaN.", [NAN],
        NONZERO_FINITE + [INF, -INF], NAN),
       ("If abs(x1_i) is greater than 1 and x2_i is +infinity, the result is +infinity.",
        [2.5, -2.5, INF, -INF], [INF], INF),
       ("If abs(x1_i) is greater than 1 and x2_i is -infinity, the result is +0.",
        [2.5, -2.5, INF, -INF], [-INF], PZ),
       ("If abs(x1_i) is 1 and x2_i is +infinity, the result is 1.", [1.0, -1.0], [INF], 1.0),
       ("If abs(x1_i) is 1 and x2_i is -infinity, the result is 1.", [1.0, -1.0], [-INF], 1.0),
       ("If x1_i is 1 and x2_i is not NaN, the result is 1.", [1.0], NOT_NAN, 1.0),
       ("If abs(x1_i) is less than 1 and x2_i is +infinity, the result is +0.",
        [0.5, -0.5, PZ, NZ], [INF], PZ),
       ("If abs(x1_i) is less than 1 and x2_i is -infinity, the result is +infinity.",
        [0.5, -0.5, PZ, NZ], [-INF], INF),
       ("If x1_i is +infinity and x2_i is greater than 0, the result is +infinity.", [INF],
        POS_FINITE + [INF], INF),
       ("If x1_i is +infinity and x2_i is less than 0, the result is +0.", [INF],
        NEG_FINITE + [-INF], PZ),
       ("If x1_i is -infinity, x2_i is greater than 0, and x2_i is an odd integer value, the "
        "result is -infinity.", [-INF], ODD_POS, -INF),
       ("If x1_i is -infinity, x2_i is greater than 0, and x2_i is not an odd integer value, "
        "the result is +infinity.", [-INF], EVEN_POS + NONINT_POS, INF),
       ("If x1_i is -infinity, x2_i is less than 0, and x2_i is an odd integer value, the "
        "result is -0.", [-INF], ODD_NEG, NZ),
       ("If x1_i is -infinity, x2_i is less than 0, and x2_i is not an odd integer value, the "
        "result is +0.", [-INF], EVEN_NEG + NONINT_NEG, PZ),
       ("If x1_i is +0 and x2_i is greater than 0, the result is +0.", [PZ], POS_FINITE + [INF],
        PZ),
       ("If x1_i is +0 and x2_i is less than 0, the result is +infinity.", [PZ],
        NEG_FINITE + [-INF], INF),
       ("If x1_i is -0, x2_i is greater than 0, and x2_i is an odd integer value, the result is "
        "-0.", [NZ], ODD_POS, NZ),
       ("If x1_i is -0, x2_i is greater than 0, and x2_i is not an odd integer value, the "
        "result is +0.", [NZ], EVEN_POS + NONINT_POS, PZ),
       ("If x1_i is -0, x2_i is less than 0, and x2_i is an odd integer value, the result is "
        "-infinity.", [NZ], ODD_NEG, -INF),
       ("If x1_i is -0, x2_i is less than 0, and x2_i is not an odd integer value, the result "
        "is +infinity.", [NZ], EVEN_NEG + NONINT_NEG, INF),
       ("If x1_i is less than 0, x1_i is a finite number, x2_i is a finite number, and x2_i is "
        "not an integer value, the result is NaN.", NEG_FINITE, NONINT_POS + NONINT_NEG, NAN))

binary("hypot",
       ("If x1_i is +infinity or -infinity and x2_i is any value, including NaN, the result is "
        "+infinity.", [INF, -INF], ANY, INF),
       ("If x2_i is +infinity or -infinity and x1_i is any value, including NaN, the result is "
        "+infinity.", ANY, [INF, -INF], INF),
       ("If x1_i is either +0 or -0, the result is equivalent to abs(x2_i).", [PZ, NZ],
        FINITE, ABS_X2),
       ("If x2_i is either +0 or -0, the result is equivalent to abs(x1_i).", FINITE, [PZ, NZ],
        ABS_X1),
       ("If x1_i is NaN and x2_i is not +infinity or -infinity, the result is NaN.", [NAN],
        FINITE + [NAN], NAN),
       ("If x2_i is NaN and x1_i is not +infinity or -infinity, the result is NaN.",
        FINITE + [NAN], [NAN], NAN))
binary("logaddexp", EITHER_NAN,
       ("If x1_i is +infinity and x2_i is not NaN, the result is +infinity.", [INF], NOT_NAN,
        INF),
       ("If x1_i is not NaN and x2_i is +infinity, the result is +infinity.", NOT_NAN, [INF],
        INF))
binary("maximum", EITHER_NAN,
       ("(Non-normative) For finite operands the result is the larger one.", [1.0, -2.0],
        [3.0, -5.0], "max", {"kwargs": {"paired": True}}))
binary("minimum", EITHER_NAN,
       ("(Non-normative) For finite operands the result is the smaller one.", [1.0, -2.0],
        [3.0, -5.0], "min", {"kwargs": {"paired": True}}))
binary("copysign",
       ("If x2_i is less than 0, the result is NaN with a sign bit of 1 if x1_i is NaN, else "
        "-abs(x1_i).", FINITE + [INF, -INF], NEG_FINITE + [-INF], NEG_ABS_X1),
       ("If x2_i is -0, the result is NaN with a sign bit of 1 if x1_i is NaN, else -abs(x1_i).",
        FINITE + [INF, -INF], [NZ], NEG_ABS_X1),
       ("If x2_i is +0, the result is NaN with a sign bit of 0 if x1_i is NaN, else abs(x1_i).",
        FINITE + [INF, -INF], [PZ], ABS_X1),
       ("If x2_i is greater than 0, the result is NaN with a sign bit of 0 if x1_i is NaN, else "
        "abs(x1_i).", FINITE + [INF, -INF], POS_FINITE + [INF], ABS_X1))
binary("nextafter", EITHER_NAN,
       ("If x1_i is -0 and x2_i is +0, the result is +0.", [NZ], [PZ], PZ),
       ("If x1_i is +0 and x2_i is -0, the result is -0.", [PZ], [NZ], NZ))
binary("equal",
       ("If x1_i is NaN or x2_i is NaN, the result is False.", [NAN, 1.0, NAN], [1.0, NAN, NAN],
        False, {"kwargs": {"paired": True}}),
       ("If x1_i is +infinity and x2_i is +infinity, the result is True.", [INF], [INF], True),
       ("If x1_i is -infinity and x2_i is -infinity, the result is True.", [-INF], [-INF], True),
       ("If x1_i is -0 and x2_i is either +0 or -0, the result is True.", [NZ], [PZ, NZ], True),
       ("If x1_i is +0 and x2_i is either +0 or -0, the result is True.", [PZ], [PZ, NZ], True))
binary("not_equal",
       ("If x1_i is NaN or x2_i is NaN, the result is True.", [NAN, 1.0, NAN], [1.0, NAN, NAN],
        True, {"kwargs": {"paired": True}}),
       ("If x1_i is +infinity and x2_i is -infinity, the result is True.", [INF], [-INF], True),
       ("If x1_i is -0 and x2_i is +0, the result is False.", [NZ], [PZ], False))
for _cmp in ("less", "less_equal", "greater", "greater_equal"):
    binary(_cmp, ("If x1_i is NaN or x2_i is NaN, the result is False.", [NAN, 1.0, NAN],
                  [1.0, NAN, NAN], False, {"kwargs": {"paired": True}}))
ROWS.append(Row("clip", "If x_i is NaN, the result is NaN.", [NAN], None, NAN,
                kwargs={"min": 0.0, "max": 1.0}))
ROWS.append(Row("clip", "If min_i is NaN, the result is NaN.", [0.5, 2.0], None, NAN,
                kwargs={"min": NAN, "max": 1.0}))
ROWS.append(Row("clip", "If max_i is NaN, the result is NaN.", [0.5, -2.0], None, NAN,
                kwargs={"min": 0.0, "max": NAN}))
