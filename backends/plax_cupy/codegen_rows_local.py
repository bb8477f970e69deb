"""Row-local clusters as CUDA C: softmax, log-softmax, layer norm and ``x / norm(x)`` as one
kernel, a block per row.

A row-local cluster (:attr:`plax.lowering.Cluster.row_axes`, formed by the fusion pass for a
generator asking ``FusionOptions.row_local``) holds reductions over the trailing ``row_axes``
axes of its iteration shape (a *row*: the reduced elements of one kept index), elementwise
work on row-shaped values (the iteration shape), on kept-shaped values (one per row: the kept
axes, with or without the reduced ones as size 1) and on rank-0 values, ``broadcast_in_dim``\\ s
of kept or rank-0 values back over the row, and reshapes between the two kept shapes.

:func:`plan_rows` computes it in ``plax_rows`` in *phases*. A value's phase is the number of
reductions on its longest chain of operands (the row's inputs: 0). Phase ``p`` walks the row
once: it computes the row-shaped values the phase needs, accumulates the reductions whose
operands are of phase ``p`` and stores the row-shaped outputs of phase ``p``. The row's
threads then combine each reduction with :class:`plax_cupy.codegen.Reduction`'s combine (the
same sum/max/min/prod rules, float16 and bfloat16 held as float, NaN rules of the separate
kernels), and every thread computes the kept values of phase ``p + 1`` (registers: the same
for the whole row); the row's first thread stores those that are outputs. Reductions combine
in an order fixed by the geometry, so results are deterministic. ``argmax``/``argmin`` do not
form row-local clusters (the fusion pass admits ``REDUCTION`` equations only); an ``iota`` read
through a broadcast over the rows (``one_hot``) is computed per element from the index. A
``gather`` of one element a row (``take_along_axis``) is a reduction too (:class:`_Pick`: the
element at the row's index, or the fill value), a ``scatter-add`` of one update a row (its
transpose) elementwise work on the row (the update added where the column is the row's index).
With ``K`` labels a row (``take_along_axis(x, idx[:, :K], -1)``,
:func:`plax.lowering.fusion.labels_per_row`), a value holds ``K`` registers a row, a gather is
``K`` picks and a scatter-add a chain of ``K`` such terms in label order.

Geometry: rows of up to 32 elements share warps, a lane group of :func:`row_lanes` lanes per
row and a ``__shfl_xor_sync`` butterfly per reduction; longer rows take a block of
:func:`row_threads` threads each, reductions combined in shared memory. Where a thread takes
at most :data:`ROW_REGISTER_ELEMENTS` elements of its row, the values a later phase reads
(the row's inputs, softmax's ``exp(x - max)``) stay in registers within
:data:`ROW_REGISTER_WORDS`; past it each phase re-reads its row from global memory (in L1/L2)
and recomputes. Rows are short (``codegen.ROW_LOCAL_MAX_ELEMENTS``). Like
:mod:`plax_cupy.codegen` this module never imports CuPy: the source is text that CI compiles
with NVRTC and, built for the host, runs (``tests/cupy/test_codegen_rows_local.py``); on the
simulated GPU (one host thread a block) the kernel's thread plays every lane in turn
(*slots*).
"""
from __future__ import annotations

import math
import re

import numpy as np

from plax import lax
from plax.core.jaxpr import JaxprEqn
from plax.lowering import BROADCAST, REDUCTION, fusion_kind
from plax.lax.slicing import GatherScatterMode, gather_fill_value
from plax.lowering.fusion import ROW_LOCAL_IDENTITIES, labels_per_row, per_row as one_per_row

from plax_cupy import codegen, special_source
from plax_cupy.gather_index import start_inside
from plax_cupy.dtypes import UnsupportedDtype, ctype, value_ctype


class RowsKernel:
    """A generated row-local kernel: its source and how to launch it.

    Attributes:
      source: the complete CUDA C++ translation unit.
      entry: ``("plax_rows",)``.
      inputs: a :class:`plax_cupy.codegen.KernelInput` per cluster input.
      out_dtypes, out_shapes: per cluster output (the kernel's output parameters, in order).
      n_rows: rows (kept elements); ``row``: elements of a row.
      threads: threads per block: :func:`row_threads` of ``row`` (a block a row), or of
        ``n_rows * lanes`` where short rows share warps (whole warps, up to a block).
      lanes: threads computing one row: :func:`row_lanes` where rows of up to 32 elements
        share warps (a lane group each), else ``threads``.
      rows_per_block: rows a block takes at a time, ``threads // lanes`` (1 for a block a
        row); :func:`rows_launch`'s grid covers ``n_rows`` with it.
      per_thread: elements of its row each thread takes per phase, ``ceil(row / lanes)``
        (the kernel's ``E``).
      held: row values kept in registers across phases (0 where ``per_thread`` exceeds
        :data:`ROW_REGISTER_ELEMENTS` or nothing fits :data:`ROW_REGISTER_WORDS`).
      phases: passes over a row.
      primitives, shape: the fused primitives' names and the iteration shape, for messages.
    """

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return f"RowsKernel({' '.join(self.primitives)}; rows={self.n_rows}x{self.row})"


def row_threads(row: int, block: int = codegen.BLOCK) -> int:
    """Threads of a block computing rows of ``row`` elements a block per row: the power of two
    covering the row, at least a warp (32) and at most ``block``.

    Example:
      >>> row_threads(7), row_threads(100), row_threads(8192)
      (32, 128, 256)
    """
    return min(block, max(32, 1 << (max(row, 1) - 1).bit_length()))


def row_lanes(row: int) -> int:
    """Lanes of a warp computing one row of ``row`` (at most 32) elements where several rows
    share a warp: the power of two covering the row (``32 // row_lanes(row)`` rows a warp).

    Example:
      >>> row_lanes(2), row_lanes(10), row_lanes(17)
      (2, 16, 32)
    """
    return 1 << (max(row, 2) - 1).bit_length()


def rows_launch(n_rows: int, sm_count: int = codegen.DEFAULT_SM_COUNT,
                rows_per_block: int = 1) -> int:
    """Blocks of a row-local kernel over ``n_rows`` rows, each block taking ``rows_per_block``
    rows at a time (the rest covered by the blocks' grid-stride loop).

    Example:
      >>> rows_launch(64), rows_launch(10**6, sm_count=132), rows_launch(64, rows_per_block=8)
      (64, 4224, 8)
    """
    return max(1, min(-(-n_rows // rows_per_block), sm_count * codegen.WAVES * 4))


#: elements of its row a thread holds in registers across phases (rows of up to 2048 at 256
#: threads): past it each phase re-reads the row's inputs from global memory
ROW_REGISTER_ELEMENTS = 8

#: 32-bit registers a thread gives to held row values (inputs and values a later phase
#: reads: softmax's ``exp(x - max)``), all held arrays together; past it a phase holds nothing
#: new (its values are recomputed from what is held or re-read)
ROW_REGISTER_WORDS = 32

#: accumulator types ``__shfl_xor_sync`` exchanges: rows of up to 32 elements of a cluster
#: whose reductions all accumulate in one of them share warps (:func:`row_lanes`)
SHUFFLE_CTYPES = ("float", "double", "int", "unsigned int", "long long", "unsigned long long")

#: the kernels' macros: unrolling (registers need constant indices on the device) and the
#: lane exchange (a shuffle; the simulated device's one thread plays every lane: its slots)
ROWS_MACROS = r"""#ifndef PLAX_ROWS_MACROS
#define PLAX_ROWS_MACROS
#if defined(PLAX_SIM) || defined(PLAX_HOST)
#define PLAX_ROWS_UNROLL
#else
#define PLAX_ROWS_UNROLL _Pragma("unroll")
#endif
#ifdef PLAX_SIM
#define PLAX_ROWS_XOR(a, s, off) (a)[(s) ^ (off)]
#else
#define PLAX_ROWS_XOR(a, s, off) __shfl_xor_sync(0xffffffffu, (a)[s], (off))
#endif
#endif
"""


def _words(dtype) -> int:
    """32-bit registers a value of ``dtype`` takes as the kernels compute it."""
    size = 4 if np.dtype(dtype).itemsize < 4 else np.dtype(dtype).itemsize
    return -(-size // 4)


def _used_defs(defs: list, body: list) -> list:
    """The definition lines of ``defs`` (``(name, line)`` in order) that ``body`` or a kept
    later definition reads (NVRTC warns of a variable never read)."""
    text, kept = "\n".join(body), []
    for name, line in reversed(defs):
        if re.search(rf"\b{name}\b", text):
            kept.append(line)
            text += "\n" + line
    return kept[::-1]


def _role(var, shape: tuple, kept: tuple, labels: int = 0) -> str:
    """A value's role in a row-local cluster: ``row`` (row-shaped), ``scalar``, ``kept`` (one
    per row) or ``labels`` (``labels`` a row, :func:`plax.lowering.fusion.labels_per_row`)."""
    s = tuple(var.aval.shape)
    if s == shape:
        return "row"
    if s == ():
        return "scalar"
    if one_per_row(s, kept):
        return "kept"
    if labels and len(kept) == len(shape) - 1 and \
            labels_per_row(s, kept, shape[-1]) == labels:
        return "labels"
    raise codegen.Unsupported(f"a value of shape {s} in a row-local cluster over {shape}")


class _Pick(codegen.Reduction):
    """A ``gather`` of one element per row (``take_along_axis(x, labels[:, None], -1)``) as a
    reduction of the row: each lane's accumulator starts at zero, ORs in the element at the
    row's index and the lanes combine by OR: the picked element, exactly. Floats go through
    their bits (an unsigned integer as wide as the value type), so a NaN's sign and payload
    and a -0 come through as a copy keeps them (an arithmetic identity such as ``-0 + x``
    would give the device's canonical NaN); integers sum in the wrap-around accumulator (also
    exact: one term is not zero). Out of bounds: the fill value (``FILL_OR_DROP``,
    :meth:`result`) or the clamped index (``CLIP``, ``PROMISE_IN_BOUNDS``)."""

    def __init__(self, eqn, row: int, label: int | None = None):
        self.label = label   # (of a gather of K labels a row: which; None: one a row)
        dtype = np.dtype(eqn.outvars[0].aval.dtype)
        if dtype == np.bool_ or dtype.kind == "c":
            raise codegen.Unsupported(f"gather of {dtype} in a row-local cluster")
        self.value = dtype
        self.floating = dtype.kind not in "iu"
        if self.floating:   # (float16/bfloat16 are floats in registers: 32 bits)
            super().__init__("or", np.uint64 if dtype.itemsize == 8 else np.uint32)
        else:
            super().__init__("sum", dtype)
        self.row, self.index_dtype = row, np.dtype(eqn.invars[1].aval.dtype)
        self.fill = eqn.params["mode"] == GatherScatterMode.FILL_OR_DROP
        self.fill_value = gather_fill_value(dtype, eqn.params["fill_value"])

    def operand(self, value: str, index: str | None = None) -> str:
        """The element ``value`` (at the row's column ``c``) where ``c`` is the row's
        ``index`` (a C expression of the gather's one index), else the identity."""
        at = f"(long long)({index})" if self.fill else \
            codegen.clamped_start(index, self.index_dtype, self.row - 1)
        term = f"plax_bitcast<{self.acc_ctype}>({value})" if self.floating else \
            super().operand(value)
        return f"(c == {at} ? {term} : {self.init})"

    def store(self, expr: str, dtype) -> str:
        """The accumulator ``expr`` (the picked element, or its bits) as ``dtype`` is stored."""
        if self.floating:
            return codegen.store_expr(f"plax_bitcast<{value_ctype(self.value)}>({expr})", dtype)
        return super().store(expr, dtype)

    def result(self, value: str, index: str) -> str:
        """The gathered ``value`` (the value type), or the fill value where ``index`` is out of
        the row (``FILL_OR_DROP``)."""
        if not self.fill:
            return value
        return f"(({start_inside(f'({index})', self.index_dtype, self.row - 1)}) ? {value} : " \
            f"{codegen.c_literal(self.fill_value, self.value)})"


def _scatter_expr(eqn, operand: str, index: str, update: str, row: int) -> str:
    """A row element (column ``c``) of a ``scatter-add`` of one update per row into the row
    ``operand`` (its transpose of a ``take_along_axis``): the operand plus ``update`` where
    ``c`` is the row's ``index``, the operand elsewhere (``FILL_OR_DROP`` and
    ``PROMISE_IN_BOUNDS`` drop an update out of the row; ``CLIP`` clamps its index)."""
    index_dtype = np.dtype(eqn.invars[1].aval.dtype)
    at = codegen.clamped_start(index, index_dtype, row - 1) \
        if eqn.params["mode"] == GatherScatterMode.CLIP else f"(long long)({index})"
    add = codegen.elementwise_expr(   # (the sum rounded as an ``add`` equation's)
        JaxprEqn(lax.add_p, [eqn.invars[0], eqn.invars[2]], [eqn.outvars[0]], {}),
        [operand, update])
    return f"(c == {at} ? {add} : {operand})"


def plan_rows(cluster, *, literal_values: bool = True) -> RowsKernel:
    """The CUDA kernel of a row-local ``cluster`` (see the module docstring).

    Args:
      cluster: a :class:`plax.lowering.Cluster` with ``row_axes`` set.
      literal_values: pass rank-0 literals by value (as compiled programs do).

    Returns:
      A :class:`RowsKernel`.

    Raises:
      Unsupported: an equation, dtype or value the generator does not express here (the
        emitter then lowers the cluster's parts as they were).
    """
    shape = tuple(int(d) for d in cluster.shape)
    m = int(cluster.row_axes)
    if not 0 < m <= len(shape):
        raise codegen.Unsupported("not a row-local cluster")
    rank = len(shape)
    kept = shape[:rank - m]
    row = math.prod(shape[rank - m:])
    n_rows = math.prod(kept)
    strides = codegen._strides(shape)
    for eqn in cluster.eqns:
        for v in list(eqn.invars) + list(eqn.outvars):
            try:
                ctype(v.aval.dtype)
            except UnsupportedDtype as err:
                raise codegen.Unsupported(f"{eqn.primitive.name}: {err}") from None
        if len(eqn.outvars) != 1:
            raise codegen.Unsupported(f"{eqn.primitive.name}: several results")

    inputs = codegen.kernel_inputs(cluster, literal_values)
    by_atom = {id(inp.atom): inp for inp in inputs}
    outputs = {id(v): j for j, v in enumerate(cluster.outputs)}
    out_dtypes = [np.dtype(v.aval.dtype) for v in cluster.outputs]
    out_shapes = [tuple(v.aval.shape) for v in cluster.outputs]

    # what is live (an equation nothing reads is not generated), and each value's phase
    live = {id(v) for v in cluster.outputs}
    for eqn in reversed(cluster.eqns):
        if id(eqn.outvars[0]) in live:
            live.update(id(v) for v in eqn.invars)
    eqns = [e for e in cluster.eqns if id(e.outvars[0]) in live]
    phase: dict = {}
    picks = lambda e: e.primitive is lax.gather_p   # (a gather of one element a row)
    for eqn in eqns:
        p = max((phase.get(id(v), 0) for v in eqn.invars), default=0)
        phase[id(eqn.outvars[0])] = p + 1 if fusion_kind(eqn.primitive) == REDUCTION or \
            picks(eqn) else p
    # (values of K labels a row: K values per row in registers, a gather of K elements K
    # picks; one K a cluster)
    counts = {labels_per_row(tuple(v.aval.shape), kept, row) for e in eqns
              for v in list(e.invars) + list(e.outvars) if m == 1}
    counts.discard(0)
    if len(counts) > 1:
        raise codegen.Unsupported(f"values of {sorted(counts)} labels a row in one cluster")
    K = counts.pop() if counts else 0
    # (an iota's values are its index's: computed per element where a broadcast over the
    # rows reads them, role "index")
    roles = {id(e.outvars[0]): "index" if e.primitive is lax.iota_p and
             tuple(e.outvars[0].aval.shape) != shape else _role(e.outvars[0], shape, kept, K)
             for e in eqns}
    iotas = {id(e.outvars[0]): e for e in eqns if roles[id(e.outvars[0])] == "index"}
    for eqn in eqns:
        if any(id(v) in iotas for v in eqn.invars) and not (
                fusion_kind(eqn.primitive) == BROADCAST and
                tuple(eqn.outvars[0].aval.shape) == shape):
            raise codegen.Unsupported(f"{eqn.primitive.name} of an iota in a row-local cluster")
    if any(id(v) in iotas for v in cluster.outputs):
        raise codegen.Unsupported("an iota leaving a row-local cluster")
    last = max(phase.values(), default=0)

    reductions: list = []   # (eqn, Reduction) in program order
    for eqn in eqns:
        if fusion_kind(eqn.primitive) == REDUCTION:
            if tuple(eqn.invars[0].aval.shape) != shape or \
                    sorted(int(a) for a in eqn.params["axes"]) != list(range(rank - m, rank)):
                raise codegen.Unsupported("a reduction outside the row")
            red = codegen.reduction_of(eqn)
            if red.folds_in_order:   # (a row's threads combine in a tree)
                raise codegen.Unsupported(f"{eqn.primitive.name} of complex values in a row")
            reductions.append((eqn, red))
        elif eqn.primitive in (lax.gather_p, lax.scatter_add_p) and m != 1:
            raise codegen.Unsupported(f"{eqn.primitive.name} in rows over {m} axes")
        elif picks(eqn):   # (K labels a row: one pick each, label q the q-th)
            for q in range(K) if roles[id(eqn.outvars[0])] == "labels" else (None,):
                reductions.append((eqn, _Pick(eqn, row, q)))
    red_index: dict = {}   # id(result) -> its (first) reduction
    for r, (e, _) in enumerate(reductions):
        red_index.setdefault(id(e.outvars[0]), r)

    def acc_phase(eqn) -> int:
        """The phase accumulating a reduction (or a gather: its index read too)."""
        return max((phase.get(id(v), 0) for v in eqn.invars), default=0)

    # the geometry: several rows a warp (a lane group each, shuffles) or a block a row
    packed = row <= 32 and all(red.acc_ctype in SHUFFLE_CTYPES for _, red in reductions)
    lanes = row_lanes(row) if packed else row_threads(row)
    threads = row_threads(n_rows * lanes) if packed else lanes   # (whole warps, up to a block)
    per_block = threads // lanes
    per_thread = -(-row // lanes)
    holds = per_thread <= ROW_REGISTER_ELEMENTS
    decls: list = []      # per-slot arrays, declared at the start of each row

    uniform: dict = {}    # id(value) -> its row-uniform expression in a slot (kept, rank-0)
    labelled: dict = {}   # id(value of K labels a row) -> its register array (K a slot)

    def at(atom, q) -> str:
        """A row-uniform value's expression for label ``q`` (a value of K labels a row: its
        ``q``-th; others are the same for every label; ``q`` None: one label a row)."""
        if id(atom) in labelled and q is not None:
            return f"{labelled[id(atom)]}[s * {K} + {q}]"
        return uniform[id(atom)]
    prelude: list = []    # lines before the row loop (rank-0 array inputs)
    per_row: list = []    # lines at the start of each row's slot (kept-shaped array inputs)
    for inp in inputs:
        if id(inp.atom) not in live or inp.kind == "literal":
            if inp.kind == "literal":
                uniform[id(inp.atom)] = inp.name
            continue
        if tuple(inp.atom.aval.shape) not in (shape, ()) and \
                not one_per_row(tuple(inp.atom.aval.shape), kept) and \
                not (K and labels_per_row(tuple(inp.atom.aval.shape), kept, row) == K):
            continue   # (an operand broadcast over the rows: read through the index map)
        role = _role(inp.atom, shape, kept, K)
        if role == "row":
            continue   # (read at each element, by the phases that need it)
        vt = value_ctype(inp.dtype)
        if role == "scalar":
            prelude.append(f"const {vt} {inp.name}_u = {codegen.load_expr(f'{inp.name}[0]', inp.dtype)};")
            uniform[id(inp.atom)] = f"{inp.name}_u"
        elif role == "labels":   # (the row's K values: a row's K consecutive elements)
            decls.append(f"{vt} {inp.name}_u[S * {K}];")
            for q in range(K):
                load = codegen.load_expr(f"{inp.name}[o * {K} + {q}]", inp.dtype)
                per_row.append(f"{inp.name}_u[s * {K} + {q}] = "
                               f"{load if not packed else f'live ? {load} : ({vt})0'};")
            labelled[id(inp.atom)] = f"{inp.name}_u"
        else:
            decls.append(f"{vt} {inp.name}_u[S];")
            load = codegen.load_expr(f"{inp.name}[o]", inp.dtype)
            per_row.append(f"{inp.name}_u[s] = {load if not packed else f'live ? {load} : ({vt})0'};")
            uniform[id(inp.atom)] = f"{inp.name}_u[s]"

    def slot_loop(lines: list) -> list:
        """``lines`` once per slot (the threads the simulated device's one thread plays;
        one on a GPU), after the slot's thread, lane, row and liveness they read."""
        defs = [("v", "const int v = threadIdx.x + s * blockDim.x;  // the thread in the block"),
                ("lane", "const int lane = v % T;  // its place in its row"),
                ("o", "const long long o = b + v / T;  // its row" if packed else
                 "const long long o = b;"),
                ("live", "const bool live = o < n_rows;")]
        return ["for (int s = 0; s < S; ++s) {"] + \
            ["  " + t for t in _used_defs(defs, lines) + lines] + ["}"]

    def uniform_lines(p: int) -> list:
        """The row-uniform values of phase ``p`` (each thread computes them: registers) and
        the stores of those that are outputs (a row's first lane)."""
        lines = []
        for k, eqn in enumerate(eqns):
            out = eqn.outvars[0]
            if roles[id(out)] in ("row", "index") or phase.get(id(out), 0) != p:
                continue
            if roles[id(out)] == "labels":
                lines += label_lines(k, eqn)
                continue
            dout = np.dtype(out.aval.dtype)
            if id(out) in red_index:
                r = red_index[id(out)]
                red = reductions[r][1]
                expr = codegen.load_expr(red.store(f"grp{r}[s]" if packed else f"s{r}[0]", dout), dout)
                if isinstance(red, _Pick):
                    expr = red.result(expr, uniform[id(eqn.invars[1])])
            elif eqn.primitive in (lax.broadcast_in_dim_p, lax.reshape_p, lax.squeeze_p) or \
                    eqn.primitive.name in ROW_LOCAL_IDENTITIES:
                expr = uniform[id(eqn.invars[0])]   # (the same value: one per row)
            else:
                expr = codegen.elementwise_expr(eqn, [uniform[id(v)] for v in eqn.invars])
            decls.append(f"{value_ctype(dout)} u{k}[S];")
            lines.append(f"u{k}[s] = {expr};")
            uniform[id(out)] = f"u{k}[s]"
            j = outputs.get(id(out))
            if j is not None:
                where = "o" if out.aval.shape else "0"
                guard = ("lane == 0 && live" if packed else "v == 0") + \
                    ("" if out.aval.shape else " && o == 0")
                lines.append(f"if ({guard}) o{j}[{where}] = {codegen.store_expr(f'u{k}[s]', dout)};")
        return slot_loop(lines) if lines else []

    def label_lines(k: int, eqn) -> list:
        """The K values a row of ``eqn``'s result (``K`` labels a row), label after label,
        and their stores where it is an output (a row's first lane)."""
        out = eqn.outvars[0]
        dout = np.dtype(out.aval.dtype)
        decls.append(f"{value_ctype(dout)} u{k}[S * {K}];")
        labelled[id(out)] = f"u{k}"
        lines = []
        for q in range(K):
            if id(out) in red_index:   # (a gather's K picks, in order)
                r = red_index[id(out)] + q
                red = reductions[r][1]
                expr = codegen.load_expr(red.store(f"grp{r}[s]" if packed else f"s{r}[0]", dout), dout)
                expr = red.result(expr, at(eqn.invars[1], q))
            elif eqn.primitive in (lax.broadcast_in_dim_p, lax.reshape_p, lax.squeeze_p) or \
                    eqn.primitive.name in ROW_LOCAL_IDENTITIES:
                expr = at(eqn.invars[0], q)
            else:
                expr = codegen.elementwise_expr(eqn, [at(v, q) for v in eqn.invars])
            lines.append(f"u{k}[s * {K} + {q}] = {expr};")
        j = outputs.get(id(out))
        if j is not None:
            guard = "lane == 0 && live" if packed else "v == 0"
            lines.append(f"if ({guard}) {{")
            lines += [f"  o{j}[o * {K} + {q}] = {codegen.store_expr(f'u{k}[s * {K} + {q}]', dout)};"
                      for q in range(K)]
            lines.append("}")
        return lines

    def targets_of(p: int) -> set:
        """The row values phase ``p`` must make: its reductions' operands, its row outputs."""
        targets = {id(e.invars[0]) for e, _ in reductions if acc_phase(e) == p}
        return targets | {id(v) for v in cluster.outputs
                          if roles.get(id(v)) == "row" and phase.get(id(v), 0) == p}

    def needed(p: int, held) -> set:
        """The row values (equation results and row inputs) phase ``p`` computes, loads or
        reads from registers when the values ``held`` are there."""
        need = set(targets_of(p))
        for eqn in reversed(eqns):
            out = id(eqn.outvars[0])
            if out in need and out not in held and roles[out] == "row":
                need.update(id(v) for v in eqn.invars if id(v) not in uniform and
                            (id(v) in roles or id(v) in by_atom))
        return {k for k in need if (roles[k] == "row" if k in roles else
                                    tuple(by_atom[k].atom.aval.shape) == shape)}

    # (row values not worth registers: a broadcast's is a read of a row value, a kept value or
    # an input's element; an identity's is its operand's)
    cheap = {id(e.outvars[0]) for e in eqns if fusion_kind(e.primitive) == BROADCAST or
             e.primitive.name in ROW_LOCAL_IDENTITIES or e.primitive is lax.iota_p}
    words = {id(e.outvars[0]): _words(e.outvars[0].aval.dtype) for e in eqns}
    words.update({id(inp.atom): _words(inp.dtype) for inp in inputs})
    held: dict = {}   # id(row value) -> its register array (per slot and element)

    def element_lines(p: int, accumulated: list, hold: set) -> tuple[list, set]:
        """Per element ``i`` of a row in phase ``p``: the row-shaped values the phase needs
        (held ones read from registers), the accumulation of ``accumulated`` (reduction
        indices), the stores of the row-shaped outputs of phase ``p`` and of the values
        ``hold`` into registers; and the iteration axes whose index they read."""
        need = needed(p, held)
        need_index: set = set()
        locals_: dict = {key: f"{name}[s * E + e]" for key, name in held.items()}
        lines: list = []

        def keep(key, local: str, dtype) -> None:
            if key in hold:
                decls.append(f"{value_ctype(dtype)} {local}_h[S * E];")
                lines.append(f"{local}_h[s * E + e] = {local};")
                held[key] = f"{local}_h"

        def value(atom) -> str:
            key = id(atom)
            if key in locals_:
                return locals_[key]
            if key in uniform:
                return uniform[key]
            inp = by_atom.get(key)
            if inp is None or tuple(atom.aval.shape) != shape:
                raise codegen.Unsupported(f"operand {atom} is not readable in the row")
            local = f"{inp.name}_v"
            lines.append(f"const {value_ctype(inp.dtype)} {local} = "
                         f"{codegen.load_expr(f'{inp.name}[i]', inp.dtype)};")
            locals_[key] = local
            keep(key, local, inp.dtype)
            return local

        for k, eqn in enumerate(eqns):
            out = eqn.outvars[0]
            if id(out) not in need or id(out) in held or roles[id(out)] != "row":
                continue
            dout = np.dtype(out.aval.dtype)
            op = eqn.invars[0] if eqn.invars else None
            if eqn.primitive is lax.iota_p or id(op) in iotas:
                iota = iotas.get(id(op), eqn)
                d = int(iota.params["dimension"])
                if iota is not eqn:   # (the iota's axis among the broadcast's)
                    d = int(eqn.params["broadcast_dimensions"][d]) \
                        if iota.outvars[0].aval.shape[d] != 1 else None
                if d is not None:
                    need_index.add(d)
                expr = f"(({value_ctype(dout)}){'0' if d is None else f'idx{d}'})"
            elif fusion_kind(eqn.primitive) == BROADCAST and id(op) not in uniform and \
                    tuple(op.aval.shape) != shape:
                inp = by_atom.get(id(op))
                if inp is None or inp.kind != "array":
                    raise codegen.Unsupported("a broadcast operand that is not an input array")
                bdims = [int(d) for d in eqn.params["broadcast_dimensions"]]
                offset = codegen._broadcast_offset(op.aval.shape, bdims, shape, need_index)
                expr = codegen.load_expr(f"{inp.name}[{offset}]", dout)
            elif fusion_kind(eqn.primitive) == BROADCAST or \
                    eqn.primitive.name in ROW_LOCAL_IDENTITIES:
                expr = value(op)
            elif eqn.primitive is lax.scatter_add_p and id(eqn.invars[1]) in labelled:
                # (K updates a row, added in label order as the scatter adds them: a chain)
                expr = value(op)
                for q in range(K):
                    term = _scatter_expr(eqn, expr, at(eqn.invars[1], q), at(eqn.invars[2], q), row)
                    lines.append(f"const {value_ctype(dout)} t{k}_{q} = {term};")
                    expr = f"t{k}_{q}"
            elif eqn.primitive is lax.scatter_add_p:
                expr = _scatter_expr(eqn, value(op), uniform[id(eqn.invars[1])],
                                     uniform[id(eqn.invars[2])], row)
            else:
                expr = codegen.elementwise_expr(eqn, [value(v) for v in eqn.invars])
            lines.append(f"const {value_ctype(dout)} t{k} = {expr};")
            locals_[id(out)] = f"t{k}"
            keep(id(out), f"t{k}", dout)
            j = outputs.get(id(out))
            if j is not None and phase.get(id(out), 0) == p:
                lines.append(f"o{j}[i] = {codegen.store_expr(f't{k}', dout)};")
        for r in accumulated:
            red, e = reductions[r][1], reductions[r][0]
            operand = red.operand(value(e.invars[0]), at(e.invars[1], red.label)) if picks(e) \
                else red.operand(value(e.invars[0]))
            lines.append(f"acc{r} = {red.accumulate(f'acc{r}', operand)};")
        return lines, need_index

    def to_hold(p: int) -> set:
        """The values phase ``p`` makes that a later phase reads, where they fit the budget."""
        if not holds:
            return set()
        made = needed(p, held) - set(held) - cheap
        assume = set(held) | made
        later = set().union(*[needed(q, assume) for q in range(p + 1, last + 1)]) & made
        budget = ROW_REGISTER_WORDS // per_thread
        if sum(words[k] for k in set(held) | later) <= budget:
            return later
        inputs_only = {k for k in later if k in by_atom}
        return inputs_only if sum(words[k] for k in set(held) | inputs_only) <= budget else set()

    body: list = (slot_loop(per_row) if per_row else []) + uniform_lines(0)
    phases = 0
    for p in range(last + 1):
        accumulated = [r for r, (e, _) in enumerate(reductions) if acc_phase(e) == p]
        lines, need_index = element_lines(p, accumulated, to_hold(p))
        if lines:
            phases += 1
            cond = (["live"] if packed else []) + (["c < ROW"] if per_thread * lanes != row else [])
            defs = [("c", "const long long c = lane + (long long)e * T;"),
                    ("i", "const long long i = o * ROW + c;")]
            defs += [(f"idx{d}", f"const long long idx{d} = (i / {strides[d]}LL) % {shape[d]}LL;")
                     for d in sorted(need_index)]
            inner = lines
            if cond:
                inner = [f"if ({' && '.join(cond)}) {{"] + ["  " + t for t in inner] + ["}"]
            inner = _used_defs(defs, inner) + inner
            loop = ["PLAX_ROWS_UNROLL" if holds else "// (each element re-read: a long row)",
                    "for (int e = 0; e < E; ++e) {"] + ["  " + t for t in inner] + ["}"]
            if accumulated:
                body.append(f"// phase {p}: {len(accumulated)} reduction(s) of the row")
                init = [f"{reductions[r][1].acc_ctype} acc{r} = {reductions[r][1].init};"
                        for r in accumulated]
                if packed:
                    decls.extend(f"{reductions[r][1].acc_ctype} grp{r}[S];" for r in accumulated)
                    body += slot_loop(init + loop + [f"grp{r}[s] = acc{r};" for r in accumulated])
                    body += ["for (int off = T / 2; off > 0; off >>= 1) {  // the lane group's "
                             "butterfly"]
                    body += [f"  {reductions[r][1].acc_ctype} pair{r}[S];" for r in accumulated]
                    body += [f"  for (int s = 0; s < S; ++s) pair{r}[s] = PLAX_ROWS_XOR(grp{r}, s, off);"
                             for r in accumulated]
                    for r in accumulated:
                        red = reductions[r][1]
                        low = red.combine(f"grp{r}[s]", f"pair{r}[s]")
                        if red.kind in ("max", "min"):   # (both lanes of a pair combine
                            # lower, higher: the same bits for +-0 and NaNs in every lane)
                            high = red.combine(f"pair{r}[s]", f"grp{r}[s]")
                            low = f"((threadIdx.x + s * blockDim.x) & off) ? {high} : {low}"
                        body.append(f"  for (int s = 0; s < S; ++s) grp{r}[s] = {low};")
                    body += ["}"]
                else:
                    body += slot_loop(init + loop + [f"s{r}[v] = acc{r};" for r in accumulated])
                    body += ["__syncthreads();",
                             "for (int h = T / 2; h > 0; h >>= 1) {",
                             "  for (int v = threadIdx.x; v < h; v += blockDim.x) {"]
                    body += [f"    s{r}[v] = {reductions[r][1].combine(f's{r}[v]', f's{r}[v + h]')};"
                             for r in accumulated]
                    body += ["  }", "  __syncthreads();", "}"]
            else:
                body.append(f"// phase {p}: the row's outputs")
                body += slot_loop(loop)
        body += uniform_lines(p + 1)

    params = [inp.param() for inp in inputs]
    params += [f"{ctype(d)}* __restrict__ o{j}" for j, d in enumerate(out_dtypes)]
    params += ["long long n_rows"]
    geometry = (f"{per_block} rows of a block, {lanes} lanes each" if packed else
                f"a block of {threads} a row")
    # (the shape and primitive names stay out of the text, as in codegen.plan_cluster's)
    kernel = [f"// cluster (row-local: rows of {row}, {phases} phase(s); {geometry}, "
              f"{len(held)} value(s) held)",
              ROWS_MACROS.rstrip("\n"),
              "#ifndef PLAX_HOST",
              f"extern \"C\" __global__ void plax_rows({', '.join(params)}) {{",
              f"  constexpr int T = {lanes};  // threads a row",
              f"  constexpr int RB = {per_block};  // rows a block takes at once",
              f"  constexpr int E = {per_thread};  // elements of its row a thread takes"]
    kernel += ["  " + t for t in _used_defs([("ROW", f"constexpr long long ROW = {row}LL;")], body)]
    kernel += ["#ifdef PLAX_SIM",
              "  constexpr int S = RB * T;  // slots: the simulated device's one thread plays them all",
              "#else",
              "  constexpr int S = 1;",
              "#endif"]
    if not packed:
        kernel += [f"  __shared__ {red.acc_ctype} s{r}[T];" for r, (_, red) in enumerate(reductions)]
    kernel += ["  " + t for t in prelude]
    kernel += ["  for (long long b = (long long)blockIdx.x * RB; b < n_rows; "
               "b += (long long)gridDim.x * RB) {"]
    kernel += ["    " + t for t in dict.fromkeys(decls)]
    kernel += ["    " + t for t in body]
    if not packed:
        kernel += ["    __syncthreads();  // s* are rewritten by the next row"]
    kernel += ["  }", "}", "#endif", ""]
    text = "\n".join(kernel)
    source = codegen.PREAMBLE + special_source.helpers_for(text) + text
    return RowsKernel(source=source, entry=("plax_rows",), inputs=inputs, out_dtypes=out_dtypes,
                      out_shapes=out_shapes, n_rows=n_rows, row=row, threads=threads,
                      lanes=lanes, rows_per_block=per_block, per_thread=per_thread,
                      held=len(held), phases=phases,
                      primitives=[e.primitive.name for e in cluster.eqns], shape=shape)
