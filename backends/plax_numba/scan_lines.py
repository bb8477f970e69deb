"""Floating ``cumsum``/``cumprod`` along lines of a work buffer, in XLA's blocked order: the
second half of a fused cumulative kernel (:func:`plax_numba.codegen_scan.fused_cumulative`),
whose loop has written the producer's values to the buffer.

Compiled once per process (numba's disk cache; :mod:`plax_numba.compiled_once`, one twin per
work dtype: ``scan_lines_f32_once``, ``scan_lines_f64_once``, ``scan_lines_bits_once``) and
called by every fused scan kernel, neither generated into each (the blocked order is four
functions whose compilation cost ~10 s per kernel on the 2-core host) nor linked into each
and optimised again there (~1 s per kernel). The operation (``OP_ADD``/``OP_MUL``) and the rounding
(``ROUND_NONE``: the work dtype's own, float32 or float64; ``ROUND_F16``/``ROUND_BF16``:
each step rounded to float16/bfloat16 as a float32) are arguments, the same for every step
(branches LLVM hoists out of the loops).

The order is :func:`plax.lax.cumulative.blocked_scan`'s exactly:
lines of more than 16 values padded with the identity to whole blocks of 16, each block
scanned in order (``reverse``: each suffix combined from its left end), the block totals
scanned the same way, then each element combined with what the blocks before it (after it,
for ``reverse``) contribute.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from plax_numba.compiled_once import compiled_once
from plax_numba.scalar import bf16_bits, f16_bits, round_bf16, round_f16

OP_ADD, OP_MUL = 0, 1
ROUND_NONE, ROUND_F16, ROUND_BF16 = 0, 1, 2
_BLOCK = 16  # plax.lax.cumulative.SCAN_BLOCK

_opts = dict(cache=True, nogil=True, error_model="numpy", boundscheck=False)


@njit(**dict(_opts, inline="never"))
def _rounded(r, rounding):
    # (a call, not inlined: the rounding's dozen operations at every site of both forms
    # made each compilation of this module ~14 CPU s)
    return round_f16(r) if rounding == ROUND_F16 else round_bf16(r)


@njit(**dict(_opts, inline="always"))
def _combine(a, b, op, rounding):
    r = a + b if op == OP_ADD else a * b
    return r if rounding == ROUND_NONE else _rounded(r, rounding)


@njit(**_opts)
def _in_order(x, lo, n, reverse, op, rounding):
    if reverse:
        for k in range(1, n):
            xk = x[lo + k]
            for i in range(k):
                x[lo + i] = _combine(x[lo + i], xk, op, rounding)
    else:
        acc = x[lo]
        for k in range(1, n):
            acc = _combine(acc, x[lo + k], op, rounding)
            x[lo + k] = acc


@njit(**_opts)
def _blocks_in_order(x, lo, blocks, reverse, op, rounding):
    if reverse:
        for b in range(blocks):
            _in_order(x, lo + _BLOCK * b, _BLOCK, True, op, rounding)
    else:  # the blocks' chains interleaved: independent, each in its order
        for k in range(1, _BLOCK):
            for b in range(blocks):
                at = lo + _BLOCK * b
                x[at + k] = _combine(x[at + k - 1], x[at + k], op, rounding)


@njit(**_opts)
def blocked(x, n, reverse, op, rounding, identity, starts, sizes):
    """The inclusive scan of ``x[:n]`` in place, ``x`` at least ``2 * n + 64`` long (the
    levels of block totals follow the line; ``identity`` of ``x``'s dtype pads them)."""
    lo, m, depth = 0, n, 0
    total = 0 if reverse else _BLOCK - 1
    while m > _BLOCK:
        p = (m + _BLOCK - 1) // _BLOCK * _BLOCK
        for i in range(m, p):
            x[lo + i] = identity
        _blocks_in_order(x, lo, p // _BLOCK, reverse, op, rounding)
        for b in range(p // _BLOCK):
            x[lo + p + b] = x[lo + _BLOCK * b + total]
        starts[depth] = lo
        sizes[depth] = m
        depth += 1
        lo += p
        m = p // _BLOCK
    _in_order(x, lo, m, reverse, op, rounding)
    while depth > 0:
        depth -= 1
        top = lo
        lo, m = starts[depth], sizes[depth]
        nb = (m + _BLOCK - 1) // _BLOCK
        for i in range(m):
            b = i // _BLOCK
            if reverse:
                before = identity if b == nb - 1 else x[top + b + 1]
            else:
                before = identity if b == 0 else x[top + b - 1]
            x[lo + i] = _combine(x[lo + i], before, op, rounding)


# The same order on ``inner`` lines at once (rows of ``x``: a line's values down a column),
# for a scan along an outer axis: every step is a row operation, contiguous and vectorised,
# instead of a strided gather per line (1000x1000 float32 cumsum along axis 0: 3.9 ms with
# the gather).

@njit(**_opts)
def _in_order_rows(x, lo, n, reverse, op, rounding):
    inner = x.shape[1]
    if reverse:
        for k in range(1, n):
            for i in range(k):
                for j in range(inner):
                    x[lo + i, j] = _combine(x[lo + i, j], x[lo + k, j], op, rounding)
    else:
        for k in range(1, n):
            for j in range(inner):
                x[lo + k, j] = _combine(x[lo + k - 1, j], x[lo + k, j], op, rounding)


@njit(**_opts)
def _blocks_in_order_rows(x, lo, blocks, reverse, op, rounding):
    inner = x.shape[1]
    if reverse:
        for b in range(blocks):
            _in_order_rows(x, lo + _BLOCK * b, _BLOCK, True, op, rounding)
    else:
        for k in range(1, _BLOCK):
            for b in range(blocks):
                at = lo + _BLOCK * b
                for j in range(inner):
                    x[at + k, j] = _combine(x[at + k - 1, j], x[at + k, j], op, rounding)


@njit(**_opts)
def blocked_rows(x, n, reverse, op, rounding, identity, starts, sizes):
    """:func:`blocked` on every column of ``x[:n]`` (``x`` at least ``2 * n + 64`` rows)."""
    inner = x.shape[1]
    lo, m, depth = 0, n, 0
    total = 0 if reverse else _BLOCK - 1
    while m > _BLOCK:
        p = (m + _BLOCK - 1) // _BLOCK * _BLOCK
        for i in range(m, p):
            for j in range(inner):
                x[lo + i, j] = identity
        _blocks_in_order_rows(x, lo, p // _BLOCK, reverse, op, rounding)
        for b in range(p // _BLOCK):
            for j in range(inner):
                x[lo + p + b, j] = x[lo + _BLOCK * b + total, j]
        starts[depth] = lo
        sizes[depth] = m
        depth += 1
        lo += p
        m = p // _BLOCK
    _in_order_rows(x, lo, m, reverse, op, rounding)
    while depth > 0:
        depth -= 1
        top = lo
        lo, m = starts[depth], sizes[depth]
        nb = (m + _BLOCK - 1) // _BLOCK
        for i in range(m):
            b = i // _BLOCK
            if reverse:
                if b == nb - 1:
                    for j in range(inner):
                        x[lo + i, j] = _combine(x[lo + i, j], identity, op, rounding)
                else:
                    for j in range(inner):
                        x[lo + i, j] = _combine(x[lo + i, j], x[top + b + 1, j], op,
                                                rounding)
            elif b == 0:
                for j in range(inner):
                    x[lo + i, j] = _combine(x[lo + i, j], identity, op, rounding)
            else:
                for j in range(inner):
                    x[lo + i, j] = _combine(x[lo + i, j], x[top + b - 1, j], op, rounding)


@njit(**_opts)
def scan_lines(w, out, reverse, op):
    """``out[o, :, j]`` = the blocked scan of ``w[o, :, j]`` for every ``o``, ``j`` (``w``
    and ``out`` of shape ``(outer, n, inner)``, float32 or float64, each step rounded to
    that dtype)."""
    outer, n, inner = w.shape
    starts = np.empty(64, np.int64)
    sizes = np.empty(64, np.int64)
    if inner > 1:
        x2 = np.empty((2 * n + 4 * _BLOCK, inner), w.dtype)
        x2[0, 0] = 0.0 if op == OP_ADD else 1.0
        identity2 = x2[0, 0]
        for o in range(outer):
            for i in range(n):
                for j in range(inner):
                    x2[i, j] = w[o, i, j]
            blocked_rows(x2, n, reverse, op, ROUND_NONE, identity2, starts, sizes)
            for i in range(n):
                for j in range(inner):
                    out[o, i, j] = x2[i, j]
        return
    x = np.empty(2 * n + 4 * _BLOCK, w.dtype)
    x[0] = 0.0 if op == OP_ADD else 1.0
    identity = x[0]
    for o in range(outer):
        for i in range(n):
            x[i] = w[o, i, 0]
        blocked(x, n, reverse, op, ROUND_NONE, identity, starts, sizes)
        for i in range(n):
            out[o, i, 0] = x[i]


@njit(**_opts)
def scan_lines_bits(w, out, reverse, op, rounding):
    """:func:`scan_lines` of float16 (``rounding`` ``ROUND_F16``) or bfloat16
    (``ROUND_BF16``) values held as float32 in ``w``, each step rounded to the format,
    written to ``out`` (uint16) as bit patterns."""
    outer, n, inner = w.shape
    identity = np.float32(0.0 if op == OP_ADD else 1.0)
    starts = np.empty(64, np.int64)
    sizes = np.empty(64, np.int64)
    if inner > 1:
        x2 = np.empty((2 * n + 4 * _BLOCK, inner), np.float32)
        for o in range(outer):
            for i in range(n):
                for j in range(inner):
                    x2[i, j] = w[o, i, j]
            blocked_rows(x2, n, reverse, op, rounding, identity, starts, sizes)
            for i in range(n):
                for j in range(inner):
                    out[o, i, j] = (f16_bits(x2[i, j]) if rounding == ROUND_F16
                                    else bf16_bits(x2[i, j]))
        return
    x = np.empty(2 * n + 4 * _BLOCK, np.float32)
    for o in range(outer):
        for i in range(n):
            x[i] = w[o, i, 0]
        blocked(x, n, reverse, op, rounding, identity, starts, sizes)
        for i in range(n):
            out[o, i, 0] = f16_bits(x[i]) if rounding == ROUND_F16 else bf16_bits(x[i])


# What the fused scan kernels call: the blocked scan compiled once per process for each work
# dtype (plax_numba.compiled_once), one call instruction in the kernel where linking its body
# made LLVM optimise it again in every kernel (~1 CPU s each). The same numba function: the
# same bits.
_LINES = "none({0}[:, :, ::1], {1}[:, :, ::1], int64, int64{2})"
scan_lines_f32_once = compiled_once(scan_lines, _LINES.format("float32", "float32", ""),
                                    __name__, "scan_lines_f32_once")
scan_lines_f64_once = compiled_once(scan_lines, _LINES.format("float64", "float64", ""),
                                    __name__, "scan_lines_f64_once")
scan_lines_bits_once = compiled_once(scan_lines_bits,
                                     _LINES.format("float32", "uint16", ", int64"),
                                     __name__, "scan_lines_bits_once")
