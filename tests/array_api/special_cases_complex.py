"""The Array API standard 2023.12's special cases for elementwise functions on COMPLEX
floating-point operands, as a table: one row per sentence of the standard (``special_cases.py``
holds the real-valued rows), with the standard's wording, representative operands and the
result it requires.

The standard writes a complex operand ``x_i`` as ``a + bj`` (``a = real(x_i)``,
``b = imag(x_i)``) and, for binary functions, ``x2_i`` as ``c + dj``. A row's operands are
complex numbers, usually the grid of the values it names for ``a`` and for ``b``
(:func:`grid`). Its result is a pair ``(real, imaginary)`` of component specifications:

- a number: that value, zeros and infinities with their sign (``+0`` for the standard's
  ``+ 0j``, ``-0`` for ``- 0j``); NaN is any NaN;
- ``approx(v)``: an implementation-dependent approximation to the irrational ``v``;
- ``pm(v)``: ``v`` with either sign, where the standard says the sign is unspecified, or
  where it writes an unsigned ``0`` (as the real-valued table reads "the result is 0");
- ``ANY``: not constrained by this sentence (it prescribes the other component only);
- a function of the operands' components ``(a, b)`` (``(a, b, c, d)`` for binary
  functions), giving the required values, as for ``+infinity * cis(b)``.

Functions that the standard defines "as if" by another (asin, atan, cos, sin, tan from the
hyperbolic ones; log2 and log10 by the change of base) get one row per sentence of the
function they refer to, with the operands and results mapped accordingly; ``x*1j`` is read as
the exact rotation ``-b + aj`` (C99 Annex G's imaginary unit), and dividing by ``log(2)``
divides each component (the standard's table for a complex divided by a real). ``pow`` has no
row: the standard only says "as if exp(x2*log(x1))", and its complex multiplication is
implementation dependent once an infinity or NaN is involved.

Rows where JAX deliberately differs carry ``jax=`` (JAX's result, which plax keeps) and
``why=``, as in ``special_cases.py``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

import numpy as np

from special_cases import approx

NAN, INF = math.nan, math.inf
PZ, NZ = 0.0, -0.0
PI = math.pi

# representative values of the classes the standard names, for one component
POS = [0.5, 1.0, 2.5, 1e30]                      # a positive (i.e., greater than 0) finite number
NONZERO = POS + [-v for v in POS]                # a nonzero finite number
FINITE = NONZERO + [PZ, NZ]                      # a finite number
ANY_VALUE = FINITE + [INF, -INF, NAN]            # any value (including NaN)
# for sentences whose result is a function of cis(b) = cos(b) + sin(b)*1j: values whose cosine
# and sine have unambiguous signs (2.5 and 4 lie in the second and third quadrants)
CIS_POS = [0.5, 2.5, 4.0]
CIS_NONZERO = CIS_POS + [-v for v in CIS_POS]
CIS_FINITE = CIS_NONZERO + [PZ, NZ]

ANY = "any"                                      # component not constrained by the sentence


@dataclass(frozen=True)
class pm:
    """``value`` with either sign (0, an infinity or an ``approx``)."""
    value: Any


def grid(a: Sequence[float], b: Sequence[float]) -> list[tuple[float, float]]:
    """The operands ``a + bj`` for every ``a`` and ``b`` named."""
    return [(x, y) for x in a for y in b]


@dataclass
class CRow:
    func: str
    wording: str
    x1: list                                     # (a, b) pairs
    result: Any                                  # (re, im) specs, a real spec, a bool or callable
    x2: Optional[list] = None                    # (c, d) pairs for binary functions
    jax: Any = None                              # JAX's (and plax's) result where it deviates
    why: str = ""
    paired: bool = False                         # x1[i] with x2[i] rather than every pair
    namespace_result: Optional[str] = None       # result defined by another function (square)


COMPLEX_ROWS: list[CRow] = []


def unary(func: str, *cases) -> list[CRow]:
    rows = []
    for case in cases:
        wording, a, b, result = case[:4]
        extra = case[4] if len(case) > 4 else {}
        rows.append(CRow(func, wording, grid(a, b), result, **extra))
    COMPLEX_ROWS.extend(rows)
    return rows


def _cis(scale: float, shift: float = 0.0) -> tuple[Callable, Callable]:
    """``scale * cis(b) - shift``: real ``scale*cos(b) - shift``, imaginary ``scale*sin(b)``."""
    def re(a, b):
        with np.errstate(all="ignore"):
            return np.asarray(scale, a.dtype) * np.cos(b) - np.asarray(shift, a.dtype)

    def im(a, b):
        with np.errstate(all="ignore"):
            return np.asarray(scale, a.dtype) * np.sin(b)
    return re, im


NAN_NAN = (NAN, NAN)

unary("abs",
      ("If a is either +infinity or -infinity and b is any value (including NaN), the result "
       "is +infinity.", [INF, -INF], ANY_VALUE, INF),
      ("If a is any value (including NaN) and b is either +infinity or -infinity, the result "
       "is +infinity.", ANY_VALUE, [INF, -INF], INF),
      ("If a is either +0 or -0, the result is equal to abs(b).", [PZ, NZ], ANY_VALUE,
       lambda a, b: np.abs(b)),
      ("If b is either +0 or -0, the result is equal to abs(a).", ANY_VALUE, [PZ, NZ],
       lambda a, b: np.abs(a)),
      ("If a is NaN and b is a finite number, the result is NaN.", [NAN], FINITE, NAN),
      ("If a is a finite number and b is NaN, the result is NaN.", FINITE, [NAN], NAN),
      ("If a is NaN and b is NaN, the result is NaN.", [NAN], [NAN], NAN))

unary("acos",
      ("If a is either +0 or -0 and b is +0, the result is π/2 - 0j.", [PZ, NZ], [PZ],
       (approx(PI / 2), NZ)),
      ("If a is either +0 or -0 and b is NaN, the result is π/2 + NaN j.", [PZ, NZ], [NAN],
       (approx(PI / 2), NAN)),
      ("If a is a finite number and b is +infinity, the result is π/2 - infinity j.", FINITE,
       [INF], (approx(PI / 2), -INF)),
      ("If a is a nonzero finite number and b is NaN, the result is NaN + NaN j.", NONZERO,
       [NAN], NAN_NAN),
      ("If a is -infinity and b is a positive (i.e., greater than 0) finite number, the result "
       "is π - infinity j.", [-INF], POS, (approx(PI), -INF)),
      ("If a is +infinity and b is a positive (i.e., greater than 0) finite number, the result "
       "is +0 - infinity j.", [INF], POS, (PZ, -INF)),
      ("If a is -infinity and b is +infinity, the result is 3π/4 - infinity j.", [-INF], [INF],
       (approx(3 * PI / 4), -INF)),
      ("If a is +infinity and b is +infinity, the result is π/4 - infinity j.", [INF], [INF],
       (approx(PI / 4), -INF)),
      ("If a is either +infinity or -infinity and b is NaN, the result is NaN ± infinity j "
       "(sign of the imaginary component is unspecified).", [INF, -INF], [NAN],
       (NAN, pm(INF))),
      ("If a is NaN and b is a finite number, the result is NaN + NaN j.", [NAN], FINITE,
       NAN_NAN),
      ("If a is NaN and b is +infinity, the result is NaN - infinity j.", [NAN], [INF],
       (NAN, -INF)),
      ("If a is NaN and b is NaN, the result is NaN + NaN j.", [NAN], [NAN], NAN_NAN))

unary("acosh",
      ("If a is either +0 or -0 and b is +0, the result is +0 + πj/2.", [PZ, NZ], [PZ],
       (PZ, approx(PI / 2))),
      ("If a is a finite number and b is +infinity, the result is +infinity + πj/2.", FINITE,
       [INF], (INF, approx(PI / 2))),
      ("If a is a nonzero finite number and b is NaN, the result is NaN + NaN j.", NONZERO,
       [NAN], NAN_NAN),
      ("If a is +0 and b is NaN, the result is NaN ± πj/2 (sign of imaginary component is "
       "unspecified).", [PZ], [NAN], (NAN, pm(approx(PI / 2)))),
      ("If a is -infinity and b is a positive (i.e., greater than 0) finite number, the result "
       "is +infinity + πj.", [-INF], POS, (INF, approx(PI))),
      ("If a is +infinity and b is a positive (i.e., greater than 0) finite number, the result "
       "is +infinity + 0j.", [INF], POS, (INF, PZ)),
      ("If a is -infinity and b is +infinity, the result is +infinity + 3πj/4.", [-INF], [INF],
       (INF, approx(3 * PI / 4))),
      ("If a is +infinity and b is +infinity, the result is +infinity + πj/4.", [INF], [INF],
       (INF, approx(PI / 4))),
      ("If a is either +infinity or -infinity and b is NaN, the result is +infinity + NaN j.",
       [INF, -INF], [NAN], (INF, NAN)),
      ("If a is NaN and b is a finite number, the result is NaN + NaN j.", [NAN], FINITE,
       NAN_NAN),
      ("If a is NaN and b is +infinity, the result is +infinity + NaN j.", [NAN], [INF],
       (INF, NAN)),
      ("If a is NaN and b is NaN, the result is NaN + NaN j.", [NAN], [NAN], NAN_NAN))

ASINH = unary(
    "asinh",
    ("If a is +0 and b is +0, the result is +0 + 0j.", [PZ], [PZ], (PZ, PZ)),
    ("If a is a positive (i.e., greater than 0) finite number and b is +infinity, the result is "
     "+infinity + πj/2.", POS, [INF], (INF, approx(PI / 2))),
    ("If a is a finite number and b is NaN, the result is NaN + NaN j.", FINITE, [NAN],
     NAN_NAN),
    ("If a is +infinity and b is a positive (i.e., greater than 0) finite number, the result is "
     "+infinity + 0j.", [INF], POS, (INF, PZ)),
    ("If a is +infinity and b is +infinity, the result is +infinity + πj/4.", [INF], [INF],
     (INF, approx(PI / 4))),
    ("If a is +infinity and b is NaN, the result is +infinity + NaN j.", [INF], [NAN],
     (INF, NAN)),
    ("If a is NaN and b is +0, the result is NaN + 0j.", [NAN], [PZ], (NAN, PZ)),
    ("If a is NaN and b is a nonzero finite number, the result is NaN + NaN j.", [NAN], NONZERO,
     NAN_NAN),
    ("If a is NaN and b is +infinity, the result is ±infinity + NaN j (sign of the real "
     "component is unspecified).", [NAN], [INF], (pm(INF), NAN)),
    ("If a is NaN and b is NaN, the result is NaN + NaN j.", [NAN], [NAN], NAN_NAN))

ATANH = unary(
    "atanh",
    ("If a is +0 and b is +0, the result is +0 + 0j.", [PZ], [PZ], (PZ, PZ)),
    ("If a is +0 and b is NaN, the result is +0 + NaN j.", [PZ], [NAN], (PZ, NAN)),
    ("If a is 1 and b is +0, the result is +infinity + 0j.", [1.0], [PZ], (INF, PZ)),
    ("If a is a positive (i.e., greater than 0) finite number and b is +infinity, the result is "
     "+0 + πj/2.", POS, [INF], (PZ, approx(PI / 2))),
    ("If a is a nonzero finite number and b is NaN, the result is NaN + NaN j.", NONZERO, [NAN],
     NAN_NAN),
    ("If a is +infinity and b is a positive (i.e., greater than 0) finite number, the result is "
     "+0 + πj/2.", [INF], POS, (PZ, approx(PI / 2))),
    ("If a is +infinity and b is +infinity, the result is +0 + πj/2.", [INF], [INF],
     (PZ, approx(PI / 2))),
    ("If a is +infinity and b is NaN, the result is +0 + NaN j.", [INF], [NAN], (PZ, NAN)),
    ("If a is NaN and b is a finite number, the result is NaN + NaN j.", [NAN], FINITE, NAN_NAN),
    ("If a is NaN and b is +infinity, the result is ±0 + πj/2 (sign of the real component is "
     "unspecified).", [NAN], [INF], (pm(PZ), approx(PI / 2))),
    ("If a is NaN and b is NaN, the result is NaN + NaN j.", [NAN], [NAN], NAN_NAN))

COSH = unary(
    "cosh",
    ("If a is +0 and b is +0, the result is 1 + 0j.", [PZ], [PZ], (1.0, PZ)),
    ("If a is +0 and b is +infinity, the result is NaN + 0j (sign of the imaginary component is "
     "unspecified).", [PZ], [INF], (NAN, pm(PZ))),
    ("If a is +0 and b is NaN, the result is NaN + 0j (sign of the imaginary component is "
     "unspecified).", [PZ], [NAN], (NAN, pm(PZ))),
    ("If a is a nonzero finite number and b is +infinity, the result is NaN + NaN j.", NONZERO,
     [INF], NAN_NAN),
    ("If a is a nonzero finite number and b is NaN, the result is NaN + NaN j.", NONZERO, [NAN],
     NAN_NAN),
    ("If a is +infinity and b is +0, the result is +infinity + 0j.", [INF], [PZ], (INF, PZ)),
    ("If a is +infinity and b is a nonzero finite number, the result is +infinity * cis(b).",
     [INF], CIS_NONZERO, _cis(INF)),
    ("If a is +infinity and b is +infinity, the result is +infinity + NaN j (sign of the real "
     "component is unspecified).", [INF], [INF], (pm(INF), NAN)),
    ("If a is +infinity and b is NaN, the result is +infinity + NaN j.", [INF], [NAN],
     (INF, NAN)),
    ("If a is NaN and b is either +0 or -0, the result is NaN + 0j (sign of the imaginary "
     "component is unspecified).", [NAN], [PZ, NZ], (NAN, pm(PZ))),
    ("If a is NaN and b is a nonzero finite number, the result is NaN + NaN j.", [NAN], NONZERO,
     NAN_NAN),
    ("If a is NaN and b is NaN, the result is NaN + NaN j.", [NAN], [NAN], NAN_NAN))

unary("exp",
      ("If a is either +0 or -0 and b is +0, the result is 1 + 0j.", [PZ, NZ], [PZ], (1.0, PZ)),
      ("If a is a finite number and b is +infinity, the result is NaN + NaN j.", FINITE, [INF],
       NAN_NAN),
      ("If a is a finite number and b is NaN, the result is NaN + NaN j.", FINITE, [NAN],
       NAN_NAN),
      ("If a is +infinity and b is +0, the result is infinity + 0j.", [INF], [PZ], (INF, PZ)),
      ("If a is -infinity and b is a finite number, the result is +0 * cis(b).", [-INF],
       CIS_FINITE, _cis(PZ)),
      ("If a is +infinity and b is a nonzero finite number, the result is +infinity * cis(b).",
       [INF], CIS_NONZERO, _cis(INF)),
      ("If a is -infinity and b is +infinity, the result is 0 + 0j (signs of real and imaginary "
       "components are unspecified).", [-INF], [INF], (pm(PZ), pm(PZ))),
      ("If a is +infinity and b is +infinity, the result is infinity + NaN j (sign of real "
       "component is unspecified).", [INF], [INF], (pm(INF), NAN)),
      ("If a is -infinity and b is NaN, the result is 0 + 0j (signs of real and imaginary "
       "components are unspecified).", [-INF], [NAN], (pm(PZ), pm(PZ))),
      ("If a is +infinity and b is NaN, the result is infinity + NaN j (sign of real component "
       "is unspecified).", [INF], [NAN], (pm(INF), NAN)),
      ("If a is NaN and b is +0, the result is NaN + 0j.", [NAN], [PZ], (NAN, PZ)),
      ("If a is NaN and b is not equal to 0, the result is NaN + NaN j.", [NAN],
       NONZERO + [INF, -INF], NAN_NAN),
      ("If a is NaN and b is NaN, the result is NaN + NaN j.", [NAN], [NAN], NAN_NAN))

unary("expm1",
      ("If a is either +0 or -0 and b is +0, the result is 0 + 0j.", [PZ, NZ], [PZ],
       (pm(PZ), PZ)),
      ("If a is a finite number and b is +infinity, the result is NaN + NaN j.", FINITE, [INF],
       NAN_NAN),
      ("If a is a finite number and b is NaN, the result is NaN + NaN j.", FINITE, [NAN],
       NAN_NAN),
      ("If a is +infinity and b is +0, the result is +infinity + 0j.", [INF], [PZ], (INF, PZ)),
      ("If a is -infinity and b is a finite number, the result is +0 * cis(b) - 1.0.", [-INF],
       CIS_FINITE, _cis(PZ, 1.0)),
      ("If a is +infinity and b is a nonzero finite number, the result is +infinity * cis(b) - "
       "1.0.", [INF], CIS_NONZERO, _cis(INF, 1.0)),
      ("If a is -infinity and b is +infinity, the result is -1 + 0j (sign of imaginary "
       "component is unspecified).", [-INF], [INF], (-1.0, pm(PZ))),
      ("If a is +infinity and b is +infinity, the result is infinity + NaN j (sign of real "
       "component is unspecified).", [INF], [INF], (pm(INF), NAN)),
      ("If a is -infinity and b is NaN, the result is -1 + 0j (sign of imaginary component is "
       "unspecified).", [-INF], [NAN], (-1.0, pm(PZ))),
      ("If a is +infinity and b is NaN, the result is infinity + NaN j (sign of real component "
       "is unspecified).", [INF], [NAN], (pm(INF), NAN)),
      ("If a is NaN and b is +0, the result is NaN + 0j.", [NAN], [PZ], (NAN, PZ)),
      ("If a is NaN and b is not equal to 0, the result is NaN + NaN j.", [NAN],
       NONZERO + [INF, -INF], NAN_NAN),
      ("If a is NaN and b is NaN, the result is NaN + NaN j.", [NAN], [NAN], NAN_NAN))

LOG = unary(
    "log",
    ("If a is -0 and b is +0, the result is -infinity + πj.", [NZ], [PZ], (-INF, approx(PI))),
    ("If a is +0 and b is +0, the result is -infinity + 0j.", [PZ], [PZ], (-INF, PZ)),
    ("If a is a finite number and b is +infinity, the result is +infinity + πj/2.", FINITE,
     [INF], (INF, approx(PI / 2))),
    ("If a is a finite number and b is NaN, the result is NaN + NaN j.", FINITE, [NAN],
     NAN_NAN),
    ("If a is -infinity and b is a positive (i.e., greater than 0) finite number, the result is "
     "+infinity + πj.", [-INF], POS, (INF, approx(PI))),
    ("If a is +infinity and b is a positive (i.e., greater than 0) finite number, the result is "
     "+infinity + 0j.", [INF], POS, (INF, PZ)),
    ("If a is -infinity and b is +infinity, the result is +infinity + 3πj/4.", [-INF], [INF],
     (INF, approx(3 * PI / 4))),
    ("If a is +infinity and b is +infinity, the result is +infinity + πj/4.", [INF], [INF],
     (INF, approx(PI / 4))),
    ("If a is either +infinity or -infinity and b is NaN, the result is +infinity + NaN j.",
     [INF, -INF], [NAN], (INF, NAN)),
    ("If a is NaN and b is a finite number, the result is NaN + NaN j.", [NAN], FINITE, NAN_NAN),
    ("If a is NaN and b is +infinity, the result is +infinity + NaN j.", [NAN], [INF],
     (INF, NAN)),
    ("If a is NaN and b is NaN, the result is NaN + NaN j.", [NAN], [NAN], NAN_NAN))

unary("log1p",
      ("If a is -1 and b is +0, the result is -infinity + 0j.", [-1.0], [PZ], (-INF, PZ)),
      ("If a is a finite number and b is +infinity, the result is +infinity + πj/2.", FINITE,
       [INF], (INF, approx(PI / 2))),
      ("If a is a finite number and b is NaN, the result is NaN + NaN j.", FINITE, [NAN],
       NAN_NAN),
      ("If a is -infinity and b is a positive (i.e., greater than 0) finite number, the result "
       "is +infinity + πj.", [-INF], POS, (INF, approx(PI))),
      ("If a is +infinity and b is a positive (i.e., greater than 0) finite number, the result "
       "is +infinity + 0j.", [INF], POS, (INF, PZ)),
      ("If a is -infinity and b is +infinity, the result is +infinity + 3πj/4.", [-INF], [INF],
       (INF, approx(3 * PI / 4))),
      ("If a is +infinity and b is +infinity, the result is +infinity + πj/4.", [INF], [INF],
       (INF, approx(PI / 4))),
      ("If a is either +infinity or -infinity and b is NaN, the result is +infinity + NaN j.",
       [INF, -INF], [NAN], (INF, NAN)),
      ("If a is NaN and b is a finite number, the result is NaN + NaN j.", [NAN], FINITE,
       NAN_NAN),
      ("If a is NaN and b is +infinity, the result is +infinity + NaN j.", [NAN], [INF],
       (INF, NAN)),
      ("If a is NaN and b is NaN, the result is NaN + NaN j.", [NAN], [NAN], NAN_NAN))

SINH = unary(
    "sinh",
    ("If a is +0 and b is +0, the result is +0 + 0j.", [PZ], [PZ], (PZ, PZ)),
    ("If a is +0 and b is +infinity, the result is 0 + NaN j (sign of the real component is "
     "unspecified).", [PZ], [INF], (pm(PZ), NAN)),
    ("If a is +0 and b is NaN, the result is 0 + NaN j (sign of the real component is "
     "unspecified).", [PZ], [NAN], (pm(PZ), NAN)),
    ("If a is a positive (i.e., greater than 0) finite number and b is +infinity, the result is "
     "NaN + NaN j.", POS, [INF], NAN_NAN),
    ("If a is a positive (i.e., greater than 0) finite number and b is NaN, the result is "
     "NaN + NaN j.", POS, [NAN], NAN_NAN),
    ("If a is +infinity and b is +0, the result is +infinity + 0j.", [INF], [PZ], (INF, PZ)),
    ("If a is +infinity and b is a positive finite number, the result is +infinity * cis(b).",
     [INF], CIS_POS, _cis(INF)),
    ("If a is +infinity and b is +infinity, the result is infinity + NaN j (sign of the real "
     "component is unspecified).", [INF], [INF], (pm(INF), NAN)),
    ("If a is +infinity and b is NaN, the result is infinity + NaN j (sign of the real "
     "component is unspecified).", [INF], [NAN], (pm(INF), NAN)),
    ("If a is NaN and b is +0, the result is NaN + 0j.", [NAN], [PZ], (NAN, PZ)),
    ("If a is NaN and b is a nonzero finite number, the result is NaN + NaN j.", [NAN], NONZERO,
     NAN_NAN),
    ("If a is NaN and b is NaN, the result is NaN + NaN j.", [NAN], [NAN], NAN_NAN))

# The 2023.12 text of the two sentences for -infinity + bj and +infinity + bj (b > 0) reads
# "NaN + NaN j" and "+0 + infinity j": a slip corrected in every revision by data-apis/array-api
# #987 (2026). The rows carry the corrected results, which are C99's csqrt.
unary("sqrt",
      ("If a is either +0 or -0 and b is +0, the result is +0 + 0j.", [PZ, NZ], [PZ], (PZ, PZ)),
      ("If a is any value (including NaN) and b is +infinity, the result is +infinity + "
       "infinity j.", ANY_VALUE, [INF], (INF, INF)),
      ("If a is a finite number and b is NaN, the result is NaN + NaN j.", FINITE, [NAN],
       NAN_NAN),
      ("If a is -infinity and b is a positive (i.e., greater than 0) finite number, the result "
       "is +0 + infinity j (as corrected by data-apis/array-api#987).", [-INF], POS, (PZ, INF)),
      ("If a is +infinity and b is a positive (i.e., greater than 0) finite number, the result "
       "is +infinity + 0j (as corrected by data-apis/array-api#987).", [INF], POS, (INF, PZ)),
      ("If a is -infinity and b is NaN, the result is NaN + infinity j (sign of the imaginary "
       "component is unspecified).", [-INF], [NAN], (NAN, pm(INF))),
      ("If a is +infinity and b is NaN, the result is +infinity + NaN j.", [INF], [NAN],
       (INF, NAN)),
      # "any value" short of the infinities, for which the sentence on b = +infinity (and its
      # conjugate) comes first
      ("If a is NaN and b is any value, the result is NaN + NaN j.", [NAN], FINITE + [NAN],
       NAN_NAN),
      ("If a is NaN and b is NaN, the result is NaN + NaN j.", [NAN], [NAN], NAN_NAN))

TANH = unary(
    "tanh",
    ("If a is +0 and b is +0, the result is +0 + 0j.", [PZ], [PZ], (PZ, PZ)),
    ("If a is a nonzero finite number and b is +infinity, the result is NaN + NaN j.", NONZERO,
     [INF], NAN_NAN),
    ("If a is +0 and b is +infinity, the result is +0 + NaN j.", [PZ], [INF], (PZ, NAN)),
    ("If a is a nonzero finite number and b is NaN, the result is NaN + NaN j.", NONZERO, [NAN],
     NAN_NAN),
    ("If a is +0 and b is NaN, the result is +0 + NaN j.", [PZ], [NAN], (PZ, NAN)),
    # JAX's result is 1 + copysign(0, sin(2b)) j, so the operands are values whose sin(2b) has
    # an unambiguous sign (2.5 makes it negative)
    ("If a is +infinity and b is a positive (i.e., greater than 0) finite number, the result is "
     "1 + 0j.", [INF], CIS_POS, (1.0, PZ),
     {"jax": (1.0, lambda a, b: np.copysign(np.zeros_like(b), np.sin(b + b))),
      "why": "JAX (XLA) computes tanh(+infinity + bj) as C99's ctanh does, 1 + 0 sin(2b) j, so "
             "the zero takes the sign of sin(2b); the standard writes +0"}),
    ("If a is +infinity and b is +infinity, the result is 1 + 0j (sign of the imaginary "
     "component is unspecified).", [INF], [INF], (1.0, pm(PZ))),
    ("If a is +infinity and b is NaN, the result is 1 + 0j (sign of the imaginary component is "
     "unspecified).", [INF], [NAN], (1.0, pm(PZ))),
    ("If a is NaN and b is +0, the result is NaN + 0j.", [NAN], [PZ], (NAN, PZ)),
    ("If a is NaN and b is a nonzero number, the result is NaN + NaN j.", [NAN],
     NONZERO + [INF, -INF], NAN_NAN),
    ("If a is NaN and b is NaN, the result is NaN + NaN j.", [NAN], [NAN], NAN_NAN))


# ------------------------------------------------------------------ "as if" functions

def _neg(spec):
    if isinstance(spec, pm) or spec is ANY:
        return spec
    if isinstance(spec, approx):
        return approx(-spec.value)
    if callable(spec):
        return lambda a, b: -spec(a, b)
    return -spec


def _scaled(spec, k: float):
    if spec is ANY:
        return spec
    if isinstance(spec, pm):
        return pm(_scaled(spec.value, k))
    if isinstance(spec, approx):
        return approx(spec.value / k)
    if callable(spec):
        return lambda a, b: spec(a, b) / np.asarray(k, a.dtype)
    return spec / k


def _rotated_arg(spec):
    """A result spec of f(-b + aj) as a function of (a, b)."""
    if callable(spec):
        return lambda a, b: spec(-b, a)
    return spec


def _as_if(func: str, rule: str, source: list[CRow], minus_j: bool) -> None:
    """Rows for ``func(x) = [-1j *] g(x*1j)`` from the rows of ``g``: the operand ``a + bj`` of
    ``g`` is ``x*1j``, so ``x = b - aj``; ``-1j * (u + vj)`` is ``v - uj``."""
    def mapped(spec):
        re, im = (_rotated_arg(s) for s in spec)
        return (im, _neg(re)) if minus_j else (re, im)

    for row in source:
        COMPLEX_ROWS.append(CRow(
            func, f"As if {rule}, by {row.func}'s sentence on x*1j: {row.wording}",
            [(b, -a) for a, b in row.x1],
            mapped(row.result), jax=None if row.jax is None else mapped(row.jax),
            why=row.why and f"{row.why} (through {rule})"))


_as_if("asin", "-1j * asinh(x*1j)", ASINH, True)
_as_if("atan", "-1j * atanh(x*1j)", ATANH, True)
_as_if("cos", "cosh(x*1j)", COSH, False)
_as_if("sin", "-1j * sinh(x*1j)", SINH, True)
_as_if("tan", "-1j * tanh(x*1j)", TANH, True)
for _name, _base in (("log2", 2.0), ("log10", 10.0)):
    for _row in LOG:
        COMPLEX_ROWS.append(CRow(
            _name, f"As if log(x)/log({int(_base)}), by log's sentence: {_row.wording}", _row.x1,
            tuple(_scaled(s, math.log(_base)) for s in _row.result)))


# ------------------------------------------------------------------ sign, predicates, rounding

unary("sign",
      ("If a is either -0 or +0 and b is either -0 or +0, the result is 0 + 0j.", [PZ, NZ],
       [PZ, NZ], (pm(PZ), PZ)))
COMPLEX_ROWS.append(CRow(
    "sign", "If a is NaN or b is NaN, the result is NaN + NaN j.",
    grid([NAN], ANY_VALUE) + grid(FINITE + [INF, -INF], [NAN]), NAN_NAN))
unary("sign",
      ("In the remaining cases, special cases must be handled according to the rules of complex "
       "number division (see divide): x / abs(x) for finite x.", FINITE, NONZERO,
       (approx(lambda a, b: a / np.hypot(a, b)), approx(lambda a, b: b / np.hypot(a, b)))),
      ("In the remaining cases, special cases must be handled according to the rules of complex "
       "number division (see divide): x / abs(x) for finite x with b zero.", NONZERO, [PZ, NZ],
       (lambda a, b: a / np.abs(a), lambda a, b: b / np.abs(a))))

COMPLEX_ROWS.append(CRow("isfinite", "If a is NaN or b is NaN, the result is False.",
                         grid([NAN], ANY_VALUE) + grid(ANY_VALUE, [NAN]), False))
unary("isfinite",
      ("If a is either +infinity or -infinity and b is any value, the result is False.",
       [INF, -INF], ANY_VALUE, False),
      ("If a is any value and b is either +infinity or -infinity, the result is False.",
       ANY_VALUE, [INF, -INF], False),
      ("If a is a finite number and b is a finite number, the result is True.", FINITE, FINITE,
       True))
unary("isinf",
      ("If a is either +infinity or -infinity and b is any value (including NaN), the result is "
       "True.", [INF, -INF], ANY_VALUE, True),
      ("If a is either a finite number or NaN and b is either +infinity or -infinity, the result "
       "is True.", FINITE + [NAN], [INF, -INF], True),
      ("In the remaining cases, the result is False.", FINITE + [NAN], FINITE + [NAN], False))
COMPLEX_ROWS.append(CRow("isnan", "If a or b is NaN, the result is True.",
                         grid([NAN], ANY_VALUE) + grid(ANY_VALUE, [NAN]), True))
unary("isnan",
      ("In the remaining cases, the result is False.", FINITE + [INF, -INF],
       FINITE + [INF, -INF], False))

_SQUARE_VALUES = [PZ, NZ, 0.5, -1.0, 2.5, INF, -INF, NAN]
_ROUND_VALUES = [PZ, NZ, INF, -INF, NAN, 0.5, 1.5, 2.5, -0.5, -2.5, 3.0, -7.0, 1e20]
unary("round",
      ("For complex floating-point operands, the special cases apply to real and imaginary "
       "components independently (already integer-valued, ±0, ±infinity and NaN are kept; "
       "halves round to the even integer).", _ROUND_VALUES, _ROUND_VALUES,
       (lambda a, b: np.round(a), lambda a, b: np.round(b))))
unary("square",
      # values whose products are exact, so that only the special cases are compared
      ("For floating-point operands, special cases must be handled as if the operation is "
       "implemented as x * x (see multiply).", _SQUARE_VALUES, _SQUARE_VALUES, None,
       {"namespace_result": "multiply"}))


# ------------------------------------------------------------------ binary functions

def binary(func: str, wording: str, x1: list, x2: list, result, **extra) -> None:
    COMPLEX_ROWS.append(CRow(func, wording, x1, result, x2=x2, **extra))


_SPECIAL = [PZ, NZ, 1.5, -2.5, INF, -INF, NAN]
_SPECIAL_GRID = grid(_SPECIAL, _SPECIAL)
_PAIRS = [(NZ, PZ), (PZ, NZ), (NZ, NZ), (PZ, PZ), (INF, NAN), (1.5, -INF), (NAN, 2.0),
          (-INF, -INF)]

binary("add", "If a is -0 and c is -0, the real component of the result is -0.",
       grid([NZ], [PZ, NZ, 1.5, INF, NAN]), grid([NZ], [PZ, NZ, -2.0, -INF, NAN]), (NZ, ANY))
binary("add", "Similarly, if b is +0 and d is -0, the imaginary component of the result is +0.",
       grid([PZ, NZ, 1.5, INF, NAN], [PZ]), grid([PZ, NZ, -2.0, -INF, NAN], [NZ]), (ANY, PZ))
binary("add", "Hence, if z1 = a + bj = -0 + 0j and z2 = c + dj = -0 - 0j, the result of z1 + z2 "
       "is -0 + 0j.", [(NZ, PZ)], [(NZ, NZ)], (NZ, PZ))
binary("add", "Real-valued floating-point special cases must independently apply to the real "
       "and imaginary component operations: (a + c) + (b + d)j.", _SPECIAL_GRID, _PAIRS,
       (lambda a, b, c, d: a + c, lambda a, b, c, d: b + d))
binary("subtract", "The result of x1_i - x2_i must be the same as x1_i + (-x2_i), governed by "
       "the rules of addition: (a - c) + (b - d)j.", _SPECIAL_GRID, _PAIRS,
       (lambda a, b, c, d: a + (-c), lambda a, b, c, d: b + (-d)))

_FIN_PAIRS = [(1.5, -2.0), (-0.5, 3.0), (4.0, 0.25), (-3.0, -1.5), (2.0, 2.0)]
binary("multiply", "If a, b, c, and d are all NaN, the result is NaN + NaN j.", [(NAN, NAN)],
       [(NAN, NAN)], NAN_NAN)
binary("multiply", "When a, b, c, or d are all finite numbers, multiplication of complex "
       "floating-point operands should be computed as if calculated according to the textbook "
       "formula (ac - bd) + (bc + ad)j.", _FIN_PAIRS, _FIN_PAIRS,
       (approx(lambda a, b, c, d: a * c - b * d), approx(lambda a, b, c, d: b * c + a * d)))
binary("divide", "If a, b, c, and d are all NaN, the result is NaN + NaN j.", [(NAN, NAN)],
       [(NAN, NAN)], NAN_NAN)
binary("divide", "When a, b, c, or d are all finite numbers, division of complex floating-point "
       "operands should be computed as if calculated according to the textbook formula "
       "((ac + bd) + (bc - ad)j) / (c^2 + d^2).", _FIN_PAIRS, _FIN_PAIRS,
       (approx(lambda a, b, c, d: (a * c + b * d) / (c * c + d * d)),
        approx(lambda a, b, c, d: (b * c - a * d) / (c * c + d * d))))

_NAN_SOMEWHERE = [(NAN, 1.0), (1.0, NAN), (NAN, NAN), (INF, NAN)]
_CMP = [(PZ, PZ), (NZ, NZ), (PZ, NZ), (INF, -INF), (1.5, 2.0), (-INF, PZ)]
COMPLEX_ROWS.append(CRow(
    "equal", "If a, b, c, or d is NaN, the result is False.",
    _NAN_SOMEWHERE + [(1.0, 2.0)] * 4, False,
    x2=[(1.0, 2.0)] * 4 + _NAN_SOMEWHERE, paired=True))
binary("equal", "In the remaining cases, the result is the logical AND of the equality "
       "comparison between the real values a and c (real components) and between the real "
       "values b and d (imaginary components) (i.e., a == c AND b == d).", _CMP, _CMP,
       lambda a, b, c, d: (a == c) & (b == d))
COMPLEX_ROWS.append(CRow(
    "not_equal", "If a, b, c, or d is NaN, the result is True.",
    _NAN_SOMEWHERE + [(1.0, 2.0)] * 4, True,
    x2=[(1.0, 2.0)] * 4 + _NAN_SOMEWHERE, paired=True))
binary("not_equal", "In the remaining cases, the result is the logical OR of the equality "
       "comparison between the real values a and c (real components) and between the real "
       "values b and d (imaginary components) (i.e., a != c OR b != d).", _CMP, _CMP,
       lambda a, b, c, d: (a != c) | (b != d))
