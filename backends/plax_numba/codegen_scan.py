"""Kernels for ``argmax``/``argmin`` and the cumulative ops: fused with their producers
(:func:`fused_arg`, :func:`fused_cumulative`), and alone on float16/bfloat16 operands.

**Fused.** The Numba emitter opts in to ``ARG_REDUCTION`` and ``CUMULATIVE`` clusters
(:attr:`plax.lowering.Emitter.fuses_arg_reductions`, ``fuses_cumulative``): the elementwise
chain producing the operand and the scan are one loop nest, with the same results as the
reference kernels bit for bit (``cumlogsumexp``: within libm's rounding of ``exp``/
``log1p``). :func:`plax_numba.codegen.plan_cluster` asks :func:`fused_arg` and
:func:`fused_cumulative` for the lines of the scan:

* an arg-reduction keeps the best value and its index in locals (to a scalar) or arrays
  over the kept axes, replacing the best when the value beats it or is a NaN, until the
  best is a NaN: the first NaN wins, ties keep the first index (NumPy's and JAX's rule);
* ``cummax``/``cummin``, and ``cumsum``/``cumprod`` on integers (exact in any order), and
  ``cumlogsumexp`` (``np.logaddexp.accumulate``'s order; float16/bfloat16 accumulate in
  float32, rounded once per output, as the reference does) accumulate in the loop, whose
  scan axis runs from its end for ``reverse``;
* floating ``cumsum``/``cumprod`` write the producer's values to a work buffer in the loop,
  then scan each line in :func:`~plax.lax.cumulative.blocked_scan`'s order (below).

**Alone.** An ``argmax``/``argmin``/cumulative equation with no producer in front is not a
cluster (a run of one), so it is a lone step. On float16/bfloat16 its reference kernel
converts the whole operand to float32 (and, for ``cumsum``/``cumprod``, scans it one NumPy
call per step of a block: many passes). ``cumsum``/``cumprod`` then run as the one-equation
form of the fused scan (:func:`own_kernel` says which); for the others :func:`plan` writes
the equation as one ``numba.njit`` kernel over the operand's uint16 bit patterns (values as
float32 locals, as :mod:`plax_numba.codegen` holds these formats), with the reference
kernel's order, so its results equal the NumPy backend's bit for bit:

* ``argmax``/``argmin``: the first index of the largest (smallest) value; a NaN counts as
  the extreme, so the first NaN wins (NumPy's ``argmax``).
* ``cummax``/``cummin``: ``np.maximum``/``np.minimum`` accumulated in order (a NaN
  propagates); ``reverse`` from the end.

The operand is passed as a C-contiguous ``(outer, n, inner)`` view (``n`` the scanned axis),
so one source serves every shape whose ``inner`` is, or is not, 1.
"""
from __future__ import annotations

import math

import numpy as np

from plax import lax

from plax_numba.codegen import LOW_FLOATS, KernelPlan, Unsupported, _t, constant

_ARG = {lax.argmax_p: ">", lax.argmin_p: "<"}
_EXTREME = {lax.cummax_p: "fmax", lax.cummin_p: "fmin"}
_BLOCKED = {lax.cumsum_p: ("+", 0.0), lax.cumprod_p: ("*", 1.0)}


def takes(eqn) -> bool:
    """Whether :func:`plan` writes ``eqn`` as a kernel: an ``argmax``/``argmin``/``cumsum``/
    ``cumprod``/``cummax``/``cummin`` equation on a float16 or bfloat16 operand."""
    prim = eqn.primitive
    if prim not in _ARG and prim not in _EXTREME and prim not in _BLOCKED:
        return False
    return len(eqn.invars) == 1 and np.dtype(eqn.invars[0].aval.dtype) in LOW_FLOATS


def own_kernel(eqn) -> bool:
    """Whether a lone ``eqn`` :func:`takes` is written by :func:`plan` rather than as the
    one-equation form of a fused scan: all but ``cumsum``/``cumprod``, whose fused form scans
    the lines along an outer axis together (:mod:`plax_numba.scan_lines`; 1000x1000
    bfloat16 ``cumsum`` along axis 0: 5.2 ms as this module's kernel, 2.6 ms so)."""
    return takes(eqn) and eqn.primitive not in _BLOCKED


def plan(cluster) -> KernelPlan:
    """The :class:`~plax_numba.codegen.KernelPlan` of a one-equation ``cluster`` whose
    equation :func:`own_kernel` says this module writes (its step returns the cluster's outputs,
    as a fused kernel's does).

    Args:
      cluster: a :class:`plax.lowering.Cluster` of that equation alone.

    Returns:
      The plan: the kernel takes the operand's bits as an ``(outer, n, inner)`` uint16 array
      and returns the result's (uint16 bits, or the indices).

    Raises:
      Unsupported: an equation :func:`own_kernel` declines, or an empty operand.

    Example::

      if takes(eqn):
          plan(Cluster([eqn], eqn.invars[0].aval.shape, list(eqn.invars), list(eqn.outvars)))
    """
    (eqn,) = cluster.eqns
    if not own_kernel(eqn):
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
    else:
        source = _extreme_source(_EXTREME[prim], fmt, column)
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


# ---------------------------------------------------------------- fused with producers

class FusedLines:
    """What :func:`fused_arg` and :func:`fused_cumulative` add to a cluster's kernel.

    Attributes:
      pre, body, post: source lines before, inside (innermost) and after the loop nest.
      value: for a sequential scan, the expression of its value at the loop's element (the
        caller binds and stores it as an elementwise value); None otherwise.
      reversed_axis: the axis whose loop must run from its end (a ``reverse`` sequential
        scan), or None.
      helpers: source of functions the kernel calls, defined before it ("" if none).
    """

    def __init__(self, pre, body, post, value=None, reversed_axis=None, helpers="",
                 row_post=()):
        self.pre, self.body, self.post = pre, body, post
        self.value, self.reversed_axis, self.helpers = value, reversed_axis, helpers
        #: lines run after each row of a nested loop nest (its innermost loop)
        self.row_post = list(row_post)


def _value_dtype(dtype) -> np.dtype:
    """The dtype of a loop's local holding a value of ``dtype`` (float32 for the 16-bit
    floats, :data:`plax_numba.codegen.LOW_FLOATS`)."""
    dtype = np.dtype(dtype)
    return np.dtype(np.float32) if dtype in LOW_FLOATS else dtype


def fused_arg(eqn, k: int, j: int, operand: str, position: str, at: str | None,
              kept_dims: str, row: str | None = None) -> FusedLines:
    """The lines of an ``argmax``/``argmin`` equation (the ``k``-th of its cluster, its
    result the kernel's ``r{j}``) in a cluster's loop.

    Args:
      eqn: the equation.
      k, j: its position in the cluster and its output's.
      operand: the expression of its operand's value at the loop's element.
      position: the loop's index along the reduced axis.
      at: the indices of the kept axes (``"i0, i2"``), or None for a rank-1 operand (the
        result a scalar).
      kept_dims: the kept axes' extents (``"n0, n2"``).
      row: where the reduced axis is the innermost loop of a nested loop nest, its extent
        (:func:`_row_arg` then writes the lines).

    Returns:
      :class:`FusedLines`: the best value ``b{k}`` and its index ``m{k}`` (locals, or arrays
      over the kept axes) updated per element.
    """
    if row is not None:
        return _row_arg(eqn, k, j, operand, position, at, kept_dims, row)
    is_max = eqn.primitive is lax.argmax_p
    vt = _value_dtype(eqn.invars[0].aval.dtype)
    odt = np.dtype(eqn.outvars[0].aval.dtype)
    op = ">" if is_max else "<"
    if vt.kind == "f":
        init = constant(-np.inf if is_max else np.inf, vt)
    elif vt.kind == "b":
        init = "False" if is_max else "True"
    else:
        info = np.iinfo(vt)
        init = constant(info.min if is_max else info.max, vt)
    b, m = (f"b{k}", f"m{k}") if at is None else (f"b{k}[{at}]", f"m{k}[{at}]")
    v = f"v{k}"
    # floats: a NaN replaces the best, and once the best is a NaN nothing does (the first
    # NaN wins); a tie never replaces it (the first index wins)
    better = (f"{b} == {b} and ({v} != {v} or {v} {op} {b})" if vt.kind == "f"
              else f"{v} {op} {b}")
    body = [f"{v} = {operand}", f"if {better}:", f"    {b} = {v}", f"    {m} = {position}"]
    if at is None:
        return FusedLines([f"b{k} = {init}", f"m{k} = 0"], body,
                          [f"r{j} = {_t(odt)}(m{k})"])
    return FusedLines([f"b{k} = np.full(({kept_dims},), {init})",
                       f"m{k} = np.zeros(({kept_dims},), {_t(odt)})"], body,
                      [f"r{j} = m{k}"])


def _key_lines(vt, v: str, key: str, is_max: bool) -> list[str]:
    """Lines binding ``key``, an integer ordered as the value ``v`` of dtype ``vt`` is
    (floats: their bits, negatives mirrored, ``-0`` and ``+0`` one key, every NaN the
    extreme key that wins: above every value for ``argmax``, below for ``argmin``)."""
    if vt.kind == "b":
        return [f"{key} = np.int8({v})"]
    if vt.kind in "iu":
        return [f"{key} = {v}"]
    bits = vt.itemsize * 8
    it = f"np.int{bits}"
    sign = 1 << (bits - 1)
    inf = 0x7F800000 if bits == 32 else 0x7FF0000000000000
    nan_key = inf + 1 if is_max else -(inf + 1)
    return [f"{key}b = bitcast({_t(vt)}({v}), {it}(0))",
            f"{key}m = {it}({key}b & {it}({sign - 1}))",
            f"{key} = {it}(-{key}m) if {key}b < 0 else {key}m",
            f"{key} = {it}({nan_key}) if {key}m > {it}({inf}) else {key}"]


def _row_arg(eqn, k, j, operand, position, at, kept_dims, row) -> FusedLines:
    """An arg-reduction along the innermost loop of a nested loop nest: the loop writes
    each value's integer key (:func:`_key_lines`) to a row buffer; after the row, the
    extreme key (a vectorised integer reduction) and then the first index holding it. The
    one-pass form (a compare and branch per element on the best so far, in memory) cost
    ~1 ms per million float32 elements on the 2-core host."""
    is_max = eqn.primitive is lax.argmax_p
    vt = _value_dtype(eqn.invars[0].aval.dtype)
    odt = np.dtype(eqn.outvars[0].aval.dtype)
    key = f"key{k}"
    op = ">" if is_max else "<"
    body = _key_lines(vt, operand, key, is_max) + [f"row{k}[{position}] = {key}"]
    row_post = [f"best{k} = row{k}[0]",
                f"for q in range(1, {row}):",
                f"    best{k} = row{k}[q] if row{k}[q] {op} best{k} else best{k}",
                f"for q in range({row}):",
                f"    if row{k}[q] == best{k}:",
                f"        m{k}[{at}] = q",
                "        break"]
    key_t = "np.int8" if vt.kind == "b" else (_t(vt) if vt.kind in "iu"
                                              else f"np.int{vt.itemsize * 8}")
    return FusedLines([f"m{k} = np.zeros(({kept_dims},), {_t(odt)})",
                       f"row{k} = np.empty({row}, {key_t})"], body, [f"r{j} = m{k}"],
                      row_post=row_post)


_SEQUENTIAL_FLOAT = {lax.cummax_p: "fmax({0}, {1})", lax.cummin_p: "fmin({0}, {1})",
                     lax.cumlogsumexp_p: "_logaddexp({0}, {1})"}


def _logaddexp_source(dtype) -> str:
    """``np.logaddexp`` on scalars of ``dtype`` (NumPy's ``npy_logaddexp``: equal arguments
    give ``x + log 2``, so infinities of one sign stay; else the larger plus ``log1p`` of
    the exponential of the difference; a NaN difference is returned)."""
    t = _t(dtype)
    return f"""
@njit(**_OPTIONS)
def _logaddexp(x, y):
    if x == y:
        return x + {t}({math.log(2.0)!r})
    d = x - y
    if d > 0:
        return x + np.log1p(np.exp(-d))
    if d <= 0:
        return y + np.log1p(np.exp(d))
    return d

"""


def fused_cumulative(eqn, k: int, j: int, operand: str, idx: list, dims: list,
                     rows: list) -> FusedLines:
    """The lines of a cumulative equation (the ``k``-th of its cluster, its result the
    kernel's array ``o{j}``) in a cluster's loop nest (``idx`` its indices, ``dims`` their
    extents, C order).

    Sequential scans (``cummax``/``cummin``/``cumlogsumexp``; ``cumsum``/``cumprod`` on
    integers) accumulate in ``c{k}`` (a local, or an array over the other axes), the scan
    axis's loop reversed for ``reverse``; their value at each element is stored as an
    elementwise value's. Floating ``cumsum``/``cumprod`` fill the work buffer ``w{k}`` and
    scan its lines after the loop (:mod:`plax_numba.scan_lines`, XLA's blocked order),
    into ``o{j}``.

    Raises:
      Unsupported: ``cumsum``/``cumprod`` on booleans.
    """
    from plax_numba.codegen import _nested_at
    prim = eqn.primitive
    axis, reverse = int(eqn.params["axis"]), bool(eqn.params["reverse"])
    dtype = np.dtype(eqn.outvars[0].aval.dtype)
    vt = _value_dtype(dtype)
    rank = len(idx)
    if prim in _BLOCKED and vt.kind == "f":
        # the loop fills the work buffer; the lines are scanned after it, in the blocked
        # order, by plax_numba.scan_lines (compiled once for every kernel)
        op = "OP_ADD" if prim is lax.cumsum_p else "OP_MUL"
        fmt = LOW_FLOATS.get(dtype)
        if fmt is None:
            name = f"scan_lines_f{vt.itemsize * 8}_once"
            call = f"{name}({{}}, {{}}, {int(reverse)}, {op})"
        else:
            rounding = "ROUND_F16" if fmt == "f16" else "ROUND_BF16"
            name = "scan_lines_bits_once"
            call = f"{name}({{}}, {{}}, {int(reverse)}, {op}, {rounding})"
        outer = " * ".join(dims[:axis]) or "1"
        inner = " * ".join(dims[axis + 1:]) or "1"
        lines = f"({outer}, {dims[axis]}, {inner})"
        return FusedLines(
            [f"w{k} = np.empty(({', '.join(dims)},), {_t(vt)})"],
            [f"{_nested_at(f'w{k}', idx, rows)} = {operand}"],
            [call.format(f"w{k}.reshape({lines})", f"o{j}.reshape({lines})")],
            helpers=(f"from plax_numba.scan_lines import {name}, {op}"
                     + (f", {rounding}" if fmt else "") + "\n"))
    if vt.kind == "b" and prim in _BLOCKED:
        raise Unsupported(f"{prim.name} on bool")
    if vt.kind == "f":
        combine = _SEQUENTIAL_FLOAT[prim]
    elif prim is lax.cummax_p:
        combine = "({0} or {1})" if vt.kind == "b" else "({1} if {1} > {0} else {0})"
    elif prim is lax.cummin_p:
        combine = "({0} and {1})" if vt.kind == "b" else "({1} if {1} < {0} else {0})"
    elif prim in _BLOCKED:  # integers: exact in any order, wrapping as the reference's
        combine = f"{_t(vt)}({{0}} {_BLOCKED[prim][0]} {{1}})"
    else:
        raise Unsupported(f"{prim.name} on {dtype}")
    helpers = _logaddexp_source(vt) if prim is lax.cumlogsumexp_p else ""
    kept = [d for d in range(rank) if d != axis]
    c = f"c{k}[{', '.join(idx[d] for d in kept)}]" if kept else f"c{k}"
    pre = ([f"c{k} = np.empty(({', '.join(dims[d] for d in kept)},), {_t(vt)})"] if kept
           else [f"c{k} = {_t(vt) if vt.kind != 'b' else 'np.bool_'}(0)"])
    first = f"{idx[axis]} == {dims[axis]} - 1" if reverse else f"{idx[axis]} == 0"
    body = [f"if {first}:", f"    {c} = {operand}", "else:",
            f"    {c} = {combine.format(c, operand)}"]
    return FusedLines(pre, body, [], value=c, reversed_axis=axis if reverse else None,
                      helpers=helpers)
