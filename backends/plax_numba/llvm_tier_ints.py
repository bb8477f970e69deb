"""Integer values in the first tier's loops (:mod:`plax_numba.llvm_tier`): the LLVM IR of
the elementwise operations and reductions on int8..int64 and uint8..uint64 operands that
:mod:`plax_numba.codegen` writes for numba, with numba's kernel's bits.

numba computes ``int32 + int32`` in int64 and the generated code casts the result back
(``np.int32(a + b)``), which is the two's-complement wrap-around of an ``add i32``; so
arithmetic, bitwise operations, shifts (with :func:`plax_numba.codegen._shift`'s
out-of-range rules) and comparisons are the plain instructions of the operands' width, signed
or unsigned by their dtype. Conversions are :func:`plax_numba.codegen._convert`'s: float to
integer truncates toward zero, saturates at the type's bounds and takes NaN to 0 (XLA's
rule, which numba's kernel computes with compares in float64); integers widen by sign or
zero extension and narrow by truncation; integer to float rounds once (``sitofp``/``uitofp``,
as numba's casts). Sums and products of integers accumulate in int64 (uint64) and wrap when
cast to the result's type; max and min compare in the operand's type.

Nothing here imports numba: like :mod:`plax_numba.llvm_tier` it writes IR text.
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax.lowering import integer_exponent

#: the integer dtypes: their LLVM type (registers and memory alike)
INT_TYPES = {np.dtype(t): f"i{np.dtype(t).itemsize * 8}"
             for t in (np.int8, np.int16, np.int32, np.int64,
                       np.uint8, np.uint16, np.uint32, np.uint64)}

_BOOL = np.dtype(np.bool_)
_ARITH = {lax.add_p: "add", lax.add_any_p: "add", lax.sub_p: "sub", lax.mul_p: "mul"}
_BITWISE = {lax.and_p: "and", lax.or_p: "or", lax.xor_p: "xor"}
_SIGNED_CMP = {lax.eq_p: "eq", lax.ne_p: "ne", lax.lt_p: "slt", lax.le_p: "sle",
               lax.gt_p: "sgt", lax.ge_p: "sge"}
_UNSIGNED_CMP = {lax.eq_p: "eq", lax.ne_p: "ne", lax.lt_p: "ult", lax.le_p: "ule",
                 lax.gt_p: "ugt", lax.ge_p: "uge"}
_FLOAT_TYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double"}


def _unsupported(message: str) -> Exception:
    from plax_numba.llvm_tier import Unsupported  # (that module imports this one)
    return Unsupported(message)


def takes(eqn) -> bool:
    """Whether ``eqn``'s value is this module's to write: an integer operand or result, or a
    ``not``/``select_n`` (whose bool forms are here too)."""
    dtypes = [np.dtype(v.aval.dtype) for v in (*eqn.invars, *eqn.outvars)]
    return (any(d in INT_TYPES for d in dtypes)
            or eqn.primitive in (lax.not_p, lax.select_n_p))


def _reg(dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype in INT_TYPES:
        return INT_TYPES[dtype]
    if dtype == _BOOL:
        return "i1"
    if dtype in _FLOAT_TYPES:
        return _FLOAT_TYPES[dtype]
    raise _unsupported(f"a value of {dtype}")


def value(body, eqn, args: list[str]) -> str:
    """The register holding ``eqn``'s result (an equation :func:`takes`), from its
    operands' registers ``args``, emitted into ``body`` (a ``llvm_tier._Body``).

    Raises:
      llvm_tier.Unsupported: an operation this tier does not write on these dtypes (integer
        ``div``/``rem``, ``pow``, a negative ``integer_pow``...).
    """
    prim = eqn.primitive
    din = [np.dtype(v.aval.dtype) for v in eqn.invars]
    dout = np.dtype(eqn.outvars[0].aval.dtype)
    t = _reg(dout)
    src = din[0] if din else dout
    unsigned = src.kind == "u"
    if prim in _ARITH and src in INT_TYPES:
        return body.emit(f"{_ARITH[prim]} {t} {args[0]}, {args[1]}")
    if prim in _BITWISE and (src in INT_TYPES or src == _BOOL):
        return body.emit(f"{_BITWISE[prim]} {t} {args[0]}, {args[1]}")
    if prim in _SIGNED_CMP and src in INT_TYPES:
        cmp = (_UNSIGNED_CMP if unsigned else _SIGNED_CMP)[prim]
        return body.emit(f"icmp {cmp} {_reg(src)} {args[0]}, {args[1]}")
    if prim is lax.not_p and (src in INT_TYPES or src == _BOOL):
        return body.emit(f"xor {t} {args[0]}, {'true' if src == _BOOL else -1}")
    if prim is lax.neg_p and src in INT_TYPES:
        return body.emit(f"sub {t} 0, {args[0]}")
    if prim is lax.abs_p and src in INT_TYPES:
        if unsigned:
            return args[0]
        negative = body.emit(f"icmp slt {t} {args[0]}, 0")
        return body.emit(f"select i1 {negative}, {t} {body.emit(f'sub {t} 0, {args[0]}')}, "
                         f"{t} {args[0]}")
    if prim is lax.sign_p and src in INT_TYPES:
        if unsigned:  # (a != 0) as the type
            return body.emit(f"zext i1 {body.emit(f'icmp ne {t} {args[0]}, 0')} to {t}")
        pos = body.emit(f"icmp sgt {t} {args[0]}, 0")
        neg = body.emit(f"icmp slt {t} {args[0]}, 0")
        rest = body.emit(f"select i1 {neg}, {t} -1, {t} 0")
        return body.emit(f"select i1 {pos}, {t} 1, {t} {rest}")
    if prim in (lax.max_p, lax.min_p) and src in INT_TYPES:
        # codegen: (a if a > b else b), (a if a < b else b)
        op = ("u" if unsigned else "s") + ("gt" if prim is lax.max_p else "lt")
        c = body.emit(f"icmp {op} {t} {args[0]}, {args[1]}")
        return body.emit(f"select i1 {c}, {t} {args[0]}, {t} {args[1]}")
    if prim is lax.clamp_p and src in INT_TYPES:  # min(max(x, lo), hi)
        lo, x, hi = args
        s = "u" if unsigned else "s"
        up = body.emit(f"select i1 {body.emit(f'icmp {s}gt {t} {x}, {lo}')}, {t} {x}, {t} {lo}")
        return body.emit(f"select i1 {body.emit(f'icmp {s}lt {t} {up}, {hi}')}, {t} {up}, "
                         f"{t} {hi}")
    if prim in (lax.shift_left_p, lax.shift_right_logical_p, lax.shift_right_arithmetic_p):
        if src not in INT_TYPES:
            raise _unsupported(f"{prim.name} on {src}")
        return _shift(body, prim, args, src)
    if prim is lax.select_n_p:
        return _select(body, args, din[0], t)
    if prim is lax.convert_element_type_p:
        return _convert(body, args[0], src, dout)
    y = integer_exponent(eqn)  # integer_pow, square
    if y is not None and src in INT_TYPES:
        if y < 0:
            raise _unsupported("integer_pow with a negative exponent on integers")
        if y == 0:
            return "1"
        from plax_numba.llvm_tier import power_products  # (that module imports this one)
        return power_products(body, args[0], y, "mul", t)
    raise _unsupported(f"{prim.name} on {', '.join(map(str, din))}")


def _shift(body, prim, args, dtype) -> str:
    """codegen._shift: amounts outside ``[0, bits)`` give 0 (left, logical right) or the
    sign (arithmetic right, as a shift by ``bits - 1``)."""
    x, y = args
    t = INT_TYPES[dtype]
    bits = dtype.itemsize * 8
    # (signed amounts: 0 <= y < bits is one unsigned compare, a negative y being large)
    in_range = body.emit(f"icmp ult {t} {y}, {bits}")
    if prim is lax.shift_right_arithmetic_p:
        amount = body.emit(f"select i1 {in_range}, {t} {y}, {t} {bits - 1}")
        return body.emit(f"ashr {t} {x}, {amount}")
    op = "shl" if prim is lax.shift_left_p else "lshr"
    # (the out-of-range shift is poison, never selected)
    shifted = body.emit(f"{op} {t} {x}, {y}")
    return body.emit(f"select i1 {in_range}, {t} {shifted}, {t} 0")


def _select(body, args, which_dtype, t: str) -> str:
    """``select_n``: one case is itself; a bool predicate picks case 1 when true; an integer
    one compares with each case's index, the last case for every other value."""
    which, cases = args[0], args[1:]
    if len(cases) == 1:
        return cases[0]
    if which_dtype == _BOOL:
        return body.emit(f"select i1 {which}, {t} {cases[1]}, {t} {cases[0]}")
    if which_dtype not in INT_TYPES:
        raise _unsupported(f"select_n on a {which_dtype} predicate")
    w = INT_TYPES[which_dtype]
    expr = cases[-1]
    for i in range(len(cases) - 2, -1, -1):
        hit = body.emit(f"icmp eq {w} {which}, {i}")
        expr = body.emit(f"select i1 {hit}, {t} {cases[i]}, {t} {expr}")
    return expr


def _convert(body, x: str, src, dst) -> str:
    """codegen._convert, instruction by instruction."""
    if src == dst:
        return x
    if dst == _BOOL:
        if src in INT_TYPES:
            return body.emit(f"icmp ne {INT_TYPES[src]} {x}, 0")
        raise _unsupported(f"convert_element_type from {src} to bool")
    if src == _BOOL:
        return body.emit(f"zext i1 {x} to {_reg(dst)}")
    if src in INT_TYPES and dst in INT_TYPES:
        a, b = src.itemsize, dst.itemsize
        if a == b:
            return x  # (the same bits)
        if a > b:
            return body.emit(f"trunc {INT_TYPES[src]} {x} to {INT_TYPES[dst]}")
        ext = "sext" if src.kind == "i" else "zext"
        return body.emit(f"{ext} {INT_TYPES[src]} {x} to {INT_TYPES[dst]}")
    if src in INT_TYPES and dst in _FLOAT_TYPES:
        op = "sitofp" if src.kind == "i" else "uitofp"
        return body.emit(f"{op} {INT_TYPES[src]} {x} to {_FLOAT_TYPES[dst]}")
    if src in _FLOAT_TYPES and dst in INT_TYPES:
        # NaN -> 0; >= max + 1 -> max; < min -> min; else truncated (compared in float64)
        from plax_numba.llvm_tier import _float_text
        info = np.iinfo(dst)
        t, f64 = INT_TYPES[dst], np.dtype(np.float64)
        wide = x if src == f64 else body.emit(f"fpext float {x} to double")
        conv = "fptosi" if dst.kind == "i" else "fptoui"
        # (a float outside the range converts to poison, never selected)
        direct = body.emit(f"{conv} {_FLOAT_TYPES[src]} {x} to {t}")
        below = body.emit(f"fcmp olt double {wide}, {_float_text(float(info.min), f64)}")
        r = body.emit(f"select i1 {below}, {t} {int(info.min)}, {t} {direct}")
        above = body.emit(f"fcmp oge double {wide}, {_float_text(float(info.max) + 1.0, f64)}")
        r = body.emit(f"select i1 {above}, {t} {_int_text(info.max, dst)}, {t} {r}")
        nan = body.emit(f"fcmp uno double {wide}, {wide}")
        return body.emit(f"select i1 {nan}, {t} 0, {t} {r}")
    raise _unsupported(f"convert_element_type from {src} to {dst}")


def _int_text(value: int, dtype) -> str:
    """An integer constant as LLVM reads it for ``dtype``'s width (two's complement)."""
    bits = np.dtype(dtype).itemsize * 8
    value = int(value) & ((1 << bits) - 1)
    return str(value - (1 << bits) if value >= 1 << (bits - 1) else value)


def accumulator(kind: str, dtype) -> tuple:
    """``(accumulator dtype, initial value)`` of a ``sum``/``prod``/``max``/``min``
    reduction of integers, as :func:`plax_numba.codegen.reduction`'s: int64 (uint64) for
    sums and products, the operand's type for max and min."""
    dtype = np.dtype(dtype)
    if kind in ("sum", "prod"):
        acc = np.dtype(np.int64 if dtype.kind == "i" else np.uint64)
        return acc, 0 if kind == "sum" else 1
    info = np.iinfo(dtype)
    return dtype, int(info.min if kind == "max" else info.max)


def widen(body, value: str, src, acc) -> str:
    """``value`` (of ``src``) as the accumulator type ``acc``."""
    src, acc = np.dtype(src), np.dtype(acc)
    if src.itemsize == acc.itemsize:
        return value
    ext = "sext" if src.kind == "i" else "zext"
    return body.emit(f"{ext} {INT_TYPES[src]} {value} to {INT_TYPES[acc]}")


def update_lines(kind: str, old: str, value: str, acc) -> list[str]:
    """The lines computing ``{old}.new`` from the accumulator ``old`` and ``value``."""
    t = INT_TYPES[np.dtype(acc)]
    if kind in ("sum", "prod"):
        return [f"  {old}.new = {'add' if kind == 'sum' else 'mul'} {t} {old}, {value}"]
    s = "u" if np.dtype(acc).kind == "u" else "s"
    # codegen: (v if v > s else s) / (v if v < s else s)
    op = f"{s}gt" if kind == "max" else f"{s}lt"
    return [f"  {old}.c = icmp {op} {t} {value}, {old}",
            f"  {old}.new = select i1 {old}.c, {t} {value}, {t} {old}"]


def scalar_argument(lines: list, j: int, dtype, failed_if) -> str:
    """Entry-point lines reading the integer scalar argument ``j`` (a Python or NumPy
    integer) as ``dtype``; returns the call's argument text. uint64 is not taken (numbers
    above 2**63 do not fit the signed read)."""
    dtype = np.dtype(dtype)
    if dtype == np.dtype(np.uint64):
        raise _unsupported("a uint64 scalar operand")
    lines.append(f"  %n{j} = call i64 @PyNumber_AsSsize_t(ptr %arg{j}, ptr null)")
    failed_if(f"icmp eq i64 %n{j}, -1")
    t = INT_TYPES[dtype]
    if t == "i64":
        return f"i64 %n{j}"
    lines.append(f"  %x{j} = trunc i64 %n{j} to {t}")
    return f"{t} %x{j}"
