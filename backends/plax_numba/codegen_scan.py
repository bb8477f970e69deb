"""Kernels for ``argmax``/``argmin`` and the cumulative ops on float16/bfloat16 operands.

These primitives are not fusion primitives (:func:`plax.lowering.fusion_kind`), so an
equation of them is a lone step. On float16/bfloat16 its reference kernel converts the
whole operand to float32 and, for ``cumsum``/``cumprod``, scans it in XLA's blocked order
(:func:`plax.lax.cumulative.blocked_scan`) one NumPy call per step of a block: many passes.
:func:`plan` writes the equation as one ``numba.njit`` kernel over the operand's uint16 bit
patterns (as :mod:`plax_numba.codegen` holds these formats: values as float32 locals, each
operation computed in float32 and rounded once to the narrow format, ties to even), with the
reference kernel's order and rounding, so its results equal the NumPy backend's bit for bit:

* ``argmax``/``argmin``: the first index of the largest (smallest) value; a NaN counts as
  the extreme, so the first NaN wins (NumPy's ``argmax``).
* ``cummax``/``cummin``: ``np.maximum``/``np.minimum`` accumulated in order (a NaN
  propagates); ``reverse`` from the end.
* ``cumsum``/``cumprod``: :func:`~plax.lax.cumulative.blocked_scan`'s order exactly: rows of
  more than 16 elements padded with the identity to whole blocks of 16, each block scanned
  in order (``reverse``: each suffix combined from its left end), the block totals scanned
  the same way, then each element combined with what the blocks before it (after it, for
  ``reverse``) contribute, the identity for the first, every step rounded.

The operand is passed as a C-contiguous ``(outer, n, inner)`` view (``n`` the scanned axis),
so one source serves every shape whose ``inner`` is, or is not, 1.
"""
from __future__ import annotations

import math

import numpy as np

from plax import lax

from plax_numba.codegen import LOW_FLOATS, KernelPlan, Unsupported

_ARG = {lax.argmax_p: ">", lax.argmin_p: "<"}
_EXTREME = {lax.cummax_p: "fmax", lax.cummin_p: "fmin"}
_BLOCKED = {lax.cumsum_p: ("+", 0.0), lax.cumprod_p: ("*", 1.0)}
#: XLA's block length (plax.lax.cumulative.SCAN_BLOCK), in the generated source
_BLOCK = 16


def takes(eqn) -> bool:
    """Whether :func:`plan` writes ``eqn`` as a kernel: an ``argmax``/``argmin``/``cumsum``/
    ``cumprod``/``cummax``/``cummin`` equation on a float16 or bfloat16 operand."""
    prim = eqn.primitive
    if prim not in _ARG and prim not in _EXTREME and prim not in _BLOCKED:
        return False
    return len(eqn.invars) == 1 and np.dtype(eqn.invars[0].aval.dtype) in LOW_FLOATS


def plan(cluster) -> KernelPlan:
    """The :class:`~plax_numba.codegen.KernelPlan` of a one-equation ``cluster`` whose
    equation :func:`takes` says this module writes (its step returns the cluster's outputs,
    as a fused kernel's does).

    Args:
      cluster: a :class:`plax.lowering.Cluster` of that equation alone.

    Returns:
      The plan: the kernel takes the operand's bits as an ``(outer, n, inner)`` uint16 array
      and returns the result's (uint16 bits, or the indices).

    Raises:
      Unsupported: an equation :func:`takes` declines, or an empty operand.

    Example::

      if takes(eqn):
          plan(Cluster([eqn], eqn.invars[0].aval.shape, list(eqn.invars), list(eqn.outvars)))
    """
    (eqn,) = cluster.eqns
    if not takes(eqn):
        raise Unsupported(f"{eqn.primitive.name} on {eqn.invars[0].aval.dtype}")
    prim = eqn.primitive
    operand, out = eqn.invars[0], eqn.outvars[0]
    shape = tuple(int(n) for n in operand.aval.shape)
    axis = int(eqn.params["axes"][0] if prim in _ARG else eqn.params["axis"])
    if not shape or math.prod(shape) == 0:
        raise Unsupported(f"{prim.name} of an empty or rank-0 operand")
    outer, n, inner = math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
    fmt = LOW_FLOATS[np.dtype(operand.aval.dtype)]
    column = inner > 1  # (walk the scanned axis in the outer loop, columns innermost)
    if prim in _ARG:
        source = _arg_source(_ARG[prim], fmt, np.dtype(out.aval.dtype), column)
    elif prim in _EXTREME:
        source = _extreme_source(_EXTREME[prim], fmt, column)
    else:
        op, identity = _BLOCKED[prim]
        source = _blocked_source(op, identity, fmt)
    # (reverse: an argument, so a scan and its reverse share one compiled kernel)
    extra = "" if prim in _ARG else f", {int(bool(eqn.params['reverse']))}"
    header = ("from plax_numba.scalar import f16_value, f16_bits, round_f16, bf16_value, "
              "bf16_bits, round_bf16\n")
    out_dtype = np.dtype(out.aval.dtype)
    low_out = out_dtype in LOW_FLOATS
    result = "_asa(r).reshape(_S).view(_D)" if low_out else "_asa(r).reshape(_S)"
    wrapper = "\n".join([
        "def step(a0):",
        "    if _ready:",
        f"        r = _kernel(_asc(a0).view(_U16).reshape({outer}, {n}, {inner}){extra})",
        f"        return [{result}]",
        "    return _interp(a0)",
    ]) + "\n"
    wrapper_globals = dict(_U16=np.uint16, _asa=np.asarray, _D=out_dtype,
                           _S=tuple(int(d) for d in out.aval.shape))
    arg_types = [("array", np.dtype(np.uint16), 3)] + ([("int",)] if extra else [])
    return KernelPlan(header + source, wrapper, arg_types,
                      wrapper_globals, [prim.name])


def _arg_source(op: str, fmt: str, index_dtype, column: bool) -> str:
    """``argmax`` (``op`` ``>``) or ``argmin`` (``<``): a value replaces the best so far
    if it is a NaN or beats it, until the best is a NaN.

    Along rows (``inner`` 1) in two passes over integer keys, which order the values as
    floats do (``-0`` and ``+0`` one key; every NaN the extreme key): the extreme key by a
    branch-free reduction (vectorised), then the first index holding it."""
    t = f"np.{index_dtype.name}"
    if not column:
        nan = 0x7C00 if fmt == "f16" else 0x7F80  # (magnitudes above: NaN)
        worst, nan_key = (-70000, 70000) if op == ">" else (70000, -70000)
        key = f"""
            b = np.int32(flat[base + i])
            mag = b & np.int32(0x7FFF)
            key = np.int32(-mag) if b & np.int32(0x8000) else mag
            key = np.int32({nan_key}) if mag > np.int32({nan}) else key"""
        return f"""
@njit(**_OPTIONS)
def kernel(a0):
    outer, n, inner = a0.shape
    out = np.empty((outer, 1), {t})
    flat = a0.reshape(outer * n)  # (inner is 1: a C-contiguous 1-D view, vectorised)
    for o in range(outer):
        base = o * n
        m = np.int32({worst})
        for i in range(n):{key}
            m = key if key {op} m else m
        k = 0
        for i in range(n):{key}
            if key == m:
                k = i
                break
        out[o, 0] = k
    return out
"""
    return f"""
@njit(**_OPTIONS)
def kernel(a0):
    outer, n, inner = a0.shape
    out = np.zeros((outer, inner), {t})
    best = np.empty(inner, np.float32)
    for o in range(outer):
        for j in range(inner):
            best[j] = {fmt}_value(a0[o, 0, j])
        for i in range(1, n):
            for j in range(inner):
                b = best[j]
                v = {fmt}_value(a0[o, i, j])
                if b == b and (v != v or v {op} b):
                    best[j] = v
                    out[o, j] = i
    return out
"""


def _extreme_source(fn: str, fmt: str, column: bool) -> str:
    """``cummax``/``cummin``: ``fn(accumulated, next)`` (``np.maximum``'s NaN rule), from
    the end if the kernel's ``reverse`` argument is 1."""
    if not column:
        return f"""
@njit(**_OPTIONS)
def kernel(a0, reverse):
    outer, n, inner = a0.shape
    out = np.empty((outer, n, 1), np.uint16)
    for o in range(outer):
        first = True
        acc = np.float32(0)
        for s in range(n):
            i = n - 1 - s if reverse else s
            v = {fmt}_value(a0[o, i, 0])
            acc = v if first else {fn}(acc, v)
            first = False
            out[o, i, 0] = {fmt}_bits(acc)
    return out
"""
    return f"""
@njit(**_OPTIONS)
def kernel(a0, reverse):
    outer, n, inner = a0.shape
    out = np.empty((outer, n, inner), np.uint16)
    acc = np.empty(inner, np.float32)
    for o in range(outer):
        first = True
        for s in range(n):
            i = n - 1 - s if reverse else s
            for j in range(inner):
                v = {fmt}_value(a0[o, i, j])
                acc[j] = v if first else {fn}(acc[j], v)
                out[o, i, j] = {fmt}_bits(acc[j])
            first = False
    return out
"""


def _blocked_source(op: str, identity: float, fmt: str) -> str:
    """``cumsum`` (``op`` ``+``) or ``cumprod`` (``*``) in
    :func:`~plax.lax.cumulative.blocked_scan`'s order (from the end if the kernel's
    ``reverse`` argument is 1), each row (gathered into a float32 work buffer that also
    holds the levels of block totals) scanned by ``_blocked``."""
    B = _BLOCK
    ident = f"np.float32({identity!r})"
    combine = lambda a, b: f"round_{fmt}({a} {op} {b})"  # noqa: E731
    return f"""
@njit(**_OPTIONS)
def _in_order(x, lo, n, reverse):
    if reverse:
        # each suffix x[i] op x[i+1] op ... combined from its left end: at step k every
        # x[i], i < k, takes x[k] (still unscanned), independent across i (vectorised)
        for k in range(1, n):
            xk = x[lo + k]
            for i in range(k):
                x[lo + i] = {combine('x[lo + i]', 'xk')}
    else:
        acc = x[lo]
        for k in range(1, n):
            acc = {combine('acc', 'x[lo + k]')}
            x[lo + k] = acc


@njit(**_OPTIONS)
def _blocks_in_order(x, lo, blocks, reverse):
    # _in_order on each of ``blocks`` blocks of {B} from x[lo]; forward, the blocks' steps
    # interleaved (independent chains, each rounded as _in_order's, in its order); reverse
    # block by block (_in_order's steps are independent already)
    if reverse:
        for b in range(blocks):
            _in_order(x, lo + {B} * b, {B}, True)
    else:
        for k in range(1, {B}):
            for b in range(blocks):
                at = lo + {B} * b
                x[at + k] = {combine('x[at + k - 1]', 'x[at + k]')}


@njit(**_OPTIONS)
def _blocked(x, n, reverse, starts, sizes):
    # up: each level of more than {B} values padded to whole blocks, the blocks scanned in
    # order, their totals (first element for reverse, else last) the next level; the last
    # level scanned in order
    lo, m, depth = 0, n, 0
    total = 0 if reverse else {B - 1}
    while m > {B}:
        p = (m + {B - 1}) // {B} * {B}
        for i in range(m, p):
            x[lo + i] = {ident}
        _blocks_in_order(x, lo, p // {B}, reverse)
        for b in range(p // {B}):
            x[lo + p + b] = x[lo + {B} * b + total]
        starts[depth] = lo
        sizes[depth] = m
        depth += 1
        lo += p
        m = p // {B}
    _in_order(x, lo, m, reverse)
    # down: each element combined with what the blocks before it (after it, for reverse)
    # contribute -- the identity for the first (last) -- from the level above's scan
    while depth > 0:
        depth -= 1
        top = lo
        lo, m = starts[depth], sizes[depth]
        nb = (m + {B - 1}) // {B}
        for i in range(m):
            b = i // {B}
            if reverse:
                before = {ident} if b == nb - 1 else x[top + b + 1]
            else:
                before = {ident} if b == 0 else x[top + b - 1]
            x[lo + i] = {combine('x[lo + i]', 'before')}


@njit(**_OPTIONS)
def kernel(a0, reverse):
    outer, n, inner = a0.shape
    out = np.empty((outer, n, inner), np.uint16)
    x = np.empty(2 * n + {4 * B}, np.float32)
    starts = np.empty(64, np.int64)
    sizes = np.empty(64, np.int64)
    for o in range(outer):
        for j in range(inner):
            for i in range(n):
                x[i] = {fmt}_value(a0[o, i, j])
            _blocked(x, n, reverse, starts, sizes)
            for i in range(n):
                out[o, i, j] = {fmt}_bits(x[i])
    return out
"""
