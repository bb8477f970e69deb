"""Row-local clusters as CUDA C: softmax, log-softmax, layer norm and ``x / norm(x)`` as one
kernel, a block per row.

A row-local cluster (:attr:`plax.lowering.Cluster.row_axes`, formed by the fusion pass for a
generator asking ``FusionOptions.row_local``) holds reductions over the trailing ``row_axes``
axes of its iteration shape (a *row*: the reduced elements of one kept index), elementwise
work on row-shaped values (the iteration shape), on kept-shaped values (one per row: the kept
axes, with or without the reduced ones as size 1) and on rank-0 values, ``broadcast_in_dim``\\ s
of kept or rank-0 values back over the row, and reshapes between the two kept shapes.

:func:`plan_rows` computes it in ``plax_rows``, each block taking rows in a grid-stride loop
and each row in *phases*. A value's phase is the number of reductions on its longest chain
of operands (the row's inputs: 0). Phase ``p`` walks the row once (each thread a strided part
of it): it computes the row-shaped values the phase needs from the inputs (re-reading them
from global memory: the row was read by the phase before, so it is in L1/L2), accumulates the
reductions whose operands are of phase ``p``, and stores the row-shaped outputs of phase
``p``. The block then combines each reduction's lanes in shared memory with
:class:`plax_cupy.codegen.Reduction`'s combine (the same sum/max/min/prod rules, float16 and
bfloat16 held as float, NaN rules of the separate kernels), and every thread computes the
kept values of phase ``p + 1`` (in registers: they are the same for the whole row); thread 0
stores those that are outputs. Reductions combine in an order fixed by the block size, so
results are deterministic. ``argmax``/``argmin`` do not form row-local clusters (the fusion
pass admits ``REDUCTION`` equations only).

Rows are short (``codegen.ROW_LOCAL_MAX_ELEMENTS``): a block of
:func:`row_threads` threads (a warp for rows of up to 32 elements, up to
``codegen.BLOCK`` for longer ones). Like :mod:`plax_cupy.codegen` this module never imports
CuPy: the source is text that CI compiles with NVRTC and, built for the host, runs
(``tests/cupy/test_codegen_rows_local.py``).
"""
from __future__ import annotations

import math

import numpy as np

from plax import lax
from plax.lowering import BROADCAST, REDUCTION, fusion_kind
from plax.lowering.fusion import ROW_LOCAL_IDENTITIES

from plax_cupy import codegen, special_source
from plax_cupy.dtypes import UnsupportedDtype, ctype, value_ctype


class RowsKernel:
    """A generated row-local kernel: its source and how to launch it.

    Attributes:
      source: the complete CUDA C++ translation unit.
      entry: ``("plax_rows",)``.
      inputs: a :class:`plax_cupy.codegen.KernelInput` per cluster input.
      out_dtypes, out_shapes: per cluster output (the kernel's output parameters, in order).
      n_rows: rows (kept elements); ``row``: elements of a row.
      threads: threads per block (:func:`row_threads`).
      phases: passes over a row.
      primitives, shape: the fused primitives' names and the iteration shape, for messages.
    """

    def __init__(self, **fields):
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return f"RowsKernel({' '.join(self.primitives)}; rows={self.n_rows}x{self.row})"


def row_threads(row: int, block: int = codegen.BLOCK) -> int:
    """Threads of a block computing rows of ``row`` elements: the power of two covering the
    row, at least a warp (32) and at most ``block``.

    Example:
      >>> row_threads(7), row_threads(100), row_threads(8192)
      (32, 128, 256)
    """
    return min(block, max(32, 1 << (max(row, 1) - 1).bit_length()))


def rows_launch(n_rows: int, sm_count: int = codegen.DEFAULT_SM_COUNT) -> int:
    """Blocks of a row-local kernel over ``n_rows`` rows (a block per row, the rest covered
    by the blocks' grid-stride loop).

    Example:
      >>> rows_launch(64), rows_launch(10**6, sm_count=132)
      (64, 4224)
    """
    return max(1, min(n_rows, sm_count * codegen.WAVES * 4))


def _role(var, shape: tuple, kept_shapes: tuple) -> str:
    s = tuple(var.aval.shape)
    if s == shape:
        return "row"
    if s == ():
        return "scalar"
    if s in kept_shapes:
        return "kept"
    raise codegen.Unsupported(f"a value of shape {s} in a row-local cluster over {shape}")


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
    kept_shapes = (kept, kept + (1,) * m)
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
    for eqn in eqns:
        p = max((phase.get(id(v), 0) for v in eqn.invars), default=0)
        phase[id(eqn.outvars[0])] = p + 1 if fusion_kind(eqn.primitive) == REDUCTION else p
    roles = {id(e.outvars[0]): _role(e.outvars[0], shape, kept_shapes) for e in eqns}
    last = max(phase.values(), default=0)

    uniform: dict = {}    # id(value) -> its row-uniform expression (kept and rank-0 values)
    prelude: list = []    # lines before the row loop (rank-0 array inputs)
    per_row: list = []    # lines at the start of each row (kept-shaped array inputs)
    for inp in inputs:
        if id(inp.atom) not in live or inp.kind == "literal":
            if inp.kind == "literal":
                uniform[id(inp.atom)] = inp.name
            continue
        if tuple(inp.atom.aval.shape) not in (shape, ()) + kept_shapes:
            continue   # (an operand broadcast over the rows: read through the index map)
        role = _role(inp.atom, shape, kept_shapes)
        if role == "row":
            continue   # (read at each element, by the phases that need it)
        index = "0" if role == "scalar" else "o"
        (prelude if role == "scalar" else per_row).append(
            f"const {value_ctype(inp.dtype)} {inp.name}_u = "
            f"{codegen.load_expr(f'{inp.name}[{index}]', inp.dtype)};")
        uniform[id(inp.atom)] = f"{inp.name}_u"

    reductions: list = []   # (eqn, Reduction) in program order
    for eqn in eqns:
        if fusion_kind(eqn.primitive) == REDUCTION:
            if tuple(eqn.invars[0].aval.shape) != shape or \
                    sorted(int(a) for a in eqn.params["axes"]) != list(range(rank - m, rank)):
                raise codegen.Unsupported("a reduction outside the row")
            reductions.append((eqn, codegen.reduction_of(eqn)))
    red_index = {id(e.outvars[0]): r for r, (e, _) in enumerate(reductions)}

    def uniform_lines(p: int) -> list:
        """The row-uniform values of phase ``p`` (each thread computes them: registers) and
        the stores of those that are outputs (thread 0)."""
        lines = []
        for k, eqn in enumerate(eqns):
            out = eqn.outvars[0]
            if roles[id(out)] == "row" or phase.get(id(out), 0) != p:
                continue
            dout = np.dtype(out.aval.dtype)
            if id(out) in red_index:
                r = red_index[id(out)]
                red = reductions[r][1]
                expr = codegen.load_expr(red.store(f"s{r}[0]", dout), dout)
            elif eqn.primitive in (lax.broadcast_in_dim_p, lax.reshape_p, lax.squeeze_p) or \
                    eqn.primitive.name in ROW_LOCAL_IDENTITIES:
                expr = uniform[id(eqn.invars[0])]   # (the same value: one per row)
            else:
                expr = codegen.elementwise_expr(eqn, [uniform[id(v)] for v in eqn.invars])
            lines.append(f"const {value_ctype(dout)} u{k} = {expr};")
            uniform[id(out)] = f"u{k}"
            j = outputs.get(id(out))
            if j is not None:
                where = "o" if out.aval.shape else "0"
                guard = "threadIdx.x == 0" + ("" if out.aval.shape else " && o == 0")
                lines.append(f"if ({guard}) o{j}[{where}] = {codegen.store_expr(f'u{k}', dout)};")
        return lines

    def element_lines(p: int, accumulated: list) -> tuple[list, set]:
        """Per element ``i`` of a row in phase ``p``: the row-shaped values the phase needs,
        the accumulation of ``accumulated`` (reduction indices) and the stores of the
        row-shaped outputs of phase ``p``; and the iteration axes whose index they read."""
        targets = {id(reductions[r][0].invars[0]) for r in accumulated}
        targets |= {id(v) for v in cluster.outputs
                    if roles.get(id(v)) == "row" and phase.get(id(v), 0) == p}
        needed = set(targets)
        for eqn in reversed(eqns):
            if id(eqn.outvars[0]) in needed and roles[id(eqn.outvars[0])] == "row":
                needed.update(id(v) for v in eqn.invars)
        need_index: set = set()
        locals_: dict = {}
        lines: list = []

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
            return local

        for k, eqn in enumerate(eqns):
            out = eqn.outvars[0]
            if id(out) not in needed or roles[id(out)] != "row":
                continue
            dout = np.dtype(out.aval.dtype)
            op = eqn.invars[0] if eqn.invars else None
            if fusion_kind(eqn.primitive) == BROADCAST and id(op) not in uniform and \
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
            else:
                expr = codegen.elementwise_expr(eqn, [value(v) for v in eqn.invars])
            lines.append(f"const {value_ctype(dout)} t{k} = {expr};")
            locals_[id(out)] = f"t{k}"
            j = outputs.get(id(out))
            if j is not None and phase.get(id(out), 0) == p:
                lines.append(f"o{j}[i] = {codegen.store_expr(f't{k}', dout)};")
        for r in accumulated:
            red = reductions[r][1]
            lines.append(f"acc{r} = {red.accumulate(f'acc{r}', red.operand(value(reductions[r][0].invars[0])))};")
        return lines, need_index

    body: list = list(per_row) + uniform_lines(0)
    phases = 0
    for p in range(last + 1):
        accumulated = [r for r, (e, _) in enumerate(reductions) if phase.get(id(e.invars[0]), 0) == p]
        lines, need_index = element_lines(p, accumulated)
        if lines:
            phases += 1
            head = [f"const long long idx{d} = (i / {strides[d]}LL) % {shape[d]}LL;"
                    for d in sorted(need_index)]
            inner = ["  const long long i = o * ROW + c;"] + ["  " + t for t in head + lines]
            if accumulated:
                body += [f"// phase {p}: {len(accumulated)} reduction(s) of the row",
                         "for (int v = threadIdx.x; v < T; v += blockDim.x) {"]
                body += [f"  {reductions[r][1].acc_ctype} acc{r} = {reductions[r][1].init};"
                         for r in accumulated]
                body += ["  for (long long c = v; c < ROW; c += T) {"]
                body += ["  " + t for t in inner]
                body += ["  }"]
                body += [f"  s{r}[v] = acc{r};" for r in accumulated]
                body += ["}", "__syncthreads();",
                         "for (int h = T / 2; h > 0; h >>= 1) {",
                         "  for (int v = threadIdx.x; v < h; v += blockDim.x) {"]
                body += [f"    s{r}[v] = {reductions[r][1].combine(f's{r}[v]', f's{r}[v + h]')};"
                         for r in accumulated]
                body += ["  }", "  __syncthreads();", "}"]
            else:
                body += [f"// phase {p}: the row's outputs",
                         "for (long long c = threadIdx.x; c < ROW; c += blockDim.x) {"]
                body += inner + ["}"]
        body += uniform_lines(p + 1)

    threads = row_threads(row)
    params = [inp.param() for inp in inputs]
    params += [f"{ctype(d)}* __restrict__ o{j}" for j, d in enumerate(out_dtypes)]
    params += ["long long n_rows"]
    kernel = [f"// cluster: {' '.join(e.primitive.name for e in cluster.eqns)} over {shape} "
              f"(row-local: rows of {row}, {phases} phase(s))",
              "#ifndef PLAX_HOST",
              f"extern \"C\" __global__ void plax_rows({', '.join(params)}) {{",
              f"  constexpr int T = {threads};  // threads a row (slots: a block of fewer "
              "threads takes several)",
              f"  constexpr long long ROW = {row}LL;"]
    kernel += [f"  __shared__ {red.acc_ctype} s{r}[T];" for r, (_, red) in enumerate(reductions)]
    kernel += ["  " + t for t in prelude]
    kernel += ["  for (long long o = blockIdx.x; o < n_rows; o += gridDim.x) {"]
    kernel += ["    " + t for t in body]
    kernel += ["    __syncthreads();  // s* are rewritten by the next row", "  }", "}", "#endif", ""]
    text = "\n".join(kernel)
    source = codegen.PREAMBLE + special_source.helpers_for(text) + text
    return RowsKernel(source=source, entry=("plax_rows",), inputs=inputs, out_dtypes=out_dtypes,
                      out_shapes=out_shapes, n_rows=n_rows, row=row, threads=threads,
                      phases=phases, primitives=[e.primitive.name for e in cluster.eqns],
                      shape=shape)
