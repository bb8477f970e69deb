"""Row-local clusters as one Numba kernel: softmax, log-softmax, logsumexp, layer norm and the
cross-entropy gradient computed a block of rows at a time, each row read from memory once.

A row-local cluster (:attr:`plax.lowering.Cluster.row_axes`, formed by the fusion pass for an
emitter asking ``FusionOptions.row_local``) holds reductions over the trailing ``row_axes``
axes of its iteration shape (a *row*: the reduced elements of one kept index) and the work on
those rows and on the reductions' results: values are row-shaped, one per row (*per-row*: the
kept axes followed by size-1 axes) or rank 0 (see :mod:`plax.lowering.fusion`, "Row-local
clusters"). Apart, those are three to five kernels, each walking the whole array: softmax on
1024x1024 float32 read ``x`` from memory three times.

:func:`plan_rows` computes the cluster in *passes* over each row. A value's phase is the number
of reductions (and ``gather`` picks) on its longest chain of operands; pass ``p`` walks the row
once, computing the row values that pass needs (the operands of the reductions whose operand
is of phase ``p``, the row outputs of phase ``p``); after it the reductions of the pass are
summed, and per-row values of the next phase are plain scalars of each row. A row value a later
pass reads again is written to a scratch row in the pass that computes it (softmax's
``exp(x - max)``, read by the sum and again by the division) rather than computed twice; the
cluster's inputs are read from their arrays in each pass (a block of rows stays in the cache).

Rows come in blocks of up to :data:`ROW_BLOCK` (threaded over blocks where the cluster is
large; a block's scratch rows are allocated once; blocks of short rows take more of them, at
least :data:`BLOCK_MIN_ELEMENTS` elements a block). A pass's reductions are computed after the
pass, a row at a time, in chunks of :data:`LANES` elements (64, or 8 for short rows), each
position of a chunk into its own accumulator (float64 for float sums, as elsewhere in this
backend), then the accumulators and the row's last elements in order: a fixed order whatever
the threads, and an elementwise loop over the chunk, which vectorises where one dependent
addition after another does not (rows shorter than 32 elements are reduced in order).
The row loops themselves carry no reduction and vectorise too.

A ``gather`` of one element a row (``take_along_axis(x, labels[:, None], -1)``) is a pick after
its pass (the element at the row's index, or the fill value out of the row); a ``scatter-add``
of one update a row (its transpose) is elementwise work on the row: the update added where the
column is the row's index. Values of several labels a row, ``iota``\\ s other than along the row
(one axis) or the rows (one kept axis), and broadcasts of outside values over parts of the row
are declined (:class:`plax_numba.codegen.Unsupported`): the emitter then lowers the cluster's
parts as they were.
"""
from __future__ import annotations

import math

import numpy as np

from plax import lax
from plax.core.jaxpr import JaxprEqn, Literal
from plax.lax.slicing import GatherScatterMode, gather_fill_value
from plax.lowering import BROADCAST, REDUCTION, fusion_kind
from plax.lowering.fusion import ROW_LOCAL_IDENTITIES, per_row

from plax_numba.codegen import (DTYPES, LOW_FLOATS, PARALLEL_MIN, _LOW_IMPORT, KernelPlan,
                                Unsupported, _cast, _load, _t, constant, elementwise,
                                reduction, scratch_storage)

#: the longest row (elements) the Numba emitter asks row-local clusters for: a block of rows,
#: its scratch rows and its outputs stay in the core's cache between passes (rows of 1024
#: float32 elements: 4 KiB each)
ROW_LOCAL_MAX_ELEMENTS = 1 << 14

#: rows a block takes (each pass over the block's rows, then their reductions, row by row),
#: while the block's scratch rows fit :data:`ROW_BLOCK_BYTES` and blocks are not too few to
#: share among threads
ROW_BLOCK = 8
ROW_BLOCK_BYTES = 1 << 18
#: ... and at least this many elements where rows are short (softmax over (262144, 4))
BLOCK_MIN_ELEMENTS = 4096

#: a row is reduced in chunks of the first of these counts (lanes) that is at most a quarter
#: of the row, each element of a chunk into its own accumulator (an elementwise loop over the
#: chunk, which vectorises: a float64 sum of 1024x1024 float32 rows ~180 us in 64 lanes against
#: ~1 ms for one dependent addition after another, a max ~340 us against ~1.2 ms), then the
#: accumulators in order, then the row's last elements; rows under 4 * 8 elements in order
LANES = (64, 8)


def plan_rows(cluster, parallel: bool | None = None) -> KernelPlan:
    """The kernel plan of a row-local ``cluster`` (see the module docstring).

    Args:
      cluster: a :class:`plax.lowering.Cluster` with ``row_axes`` set.
      parallel: force the serial (False) or threaded (True) loop over blocks of rows; None:
        threaded from :data:`plax_numba.codegen.PARALLEL_MIN` elements.

    Returns:
      A :class:`plax_numba.codegen.KernelPlan` whose wrapper allocates the outputs and calls
      ``kernel(*inputs, *outputs, n_rows, row)``.

    Raises:
      Unsupported: an equation, dtype or value the generator does not express.

    Example::

      plan = plan_rows(cluster)        # softmax over (1024, 1024): one kernel, three passes
      print(plan.source)
    """
    return _RowsPlan(cluster, parallel).plan()


def _each_row(lines: list) -> list:
    """``lines`` run for each row of the block (``t`` its place in the block, ``r`` its
    number)."""
    return ["for t in range(nb):", "    r = lo + t"] + ["    " + s for s in lines]


def _stored(dtype, expr: str) -> str:
    """A value as an output of ``dtype`` holds it (float16/bfloat16: its bits)."""
    return f"{LOW_FLOATS[dtype]}_bits({expr})" if dtype in LOW_FLOATS else expr


class _RowsPlan:
    """One row-local cluster's analysis (roles, phases, what each pass computes) and source."""

    def __init__(self, cluster, parallel):
        self.cluster = cluster
        self.shape = shape = tuple(int(d) for d in cluster.shape)
        self.m = m = int(cluster.row_axes)
        if not 0 < m <= len(shape):
            raise Unsupported("not a row-local cluster")
        self.kept = shape[:len(shape) - m]
        self.row = math.prod(shape[len(shape) - m:])
        self.n_rows = math.prod(self.kept)
        # (lanes a row's reductions take: fewer for shorter rows, none for the shortest)
        self.lanes = next((n for n in LANES if self.row >= 4 * n), 0)
        self.parallel = parallel
        self.low = False
        for eqn in cluster.eqns:
            if len(eqn.outvars) != 1:
                raise Unsupported(f"{eqn.primitive.name}: several results")
            for v in (*eqn.invars, *eqn.outvars):
                dtype = np.dtype(v.aval.dtype)
                if dtype in LOW_FLOATS:
                    self.low = True
                elif dtype not in DTYPES:
                    raise Unsupported(f"{eqn.primitive.name} on {dtype}")
        self.defining = {id(e.outvars[0]): e for e in cluster.eqns}
        self.index = {id(e): k for k, e in enumerate(cluster.eqns)}   # (its locals' suffix)
        self._inputs()
        self._values()

    # ------------------------------------------------------------ analysis
    def _inputs(self):
        """Each input's name and role: ``row``, ``kept`` (one per row), ``scalar`` or
        ``outside`` (read through a broadcast's index map only)."""
        self.inputs = {}   # id(atom) -> (name, role, dtype)
        for i, atom in enumerate(self.cluster.inputs):
            s = tuple(atom.aval.shape)
            if s == ():
                role = "scalar"
            elif isinstance(atom, Literal):
                raise Unsupported("an array literal in a row-local cluster")
            elif s == self.shape:
                role = "row"
            elif per_row(s, self.kept):
                role = "kept"
            else:
                role = "outside"
            self.inputs[id(atom)] = (f"a{i}", role, np.dtype(atom.aval.dtype))

    def _values(self):
        """Aliases (values another value stands for), each value's kind and phase."""
        self.alias = {}   # id(var) -> the atom it stands for
        self.kind = {}    # id(var) -> "row", "kept", "pick" (a reduction or gather) or "index"
        self.phase = {}   # id(var) -> phase
        for eqn in self.cluster.eqns:
            out = eqn.outvars[0]
            s = tuple(out.aval.shape)
            prim = eqn.primitive
            op = eqn.invars[0] if eqn.invars else None
            p = max((self.phase.get(id(self.resolve(v)), 0) for v in eqn.invars), default=0)
            if prim is lax.iota_p and s != self.shape:
                self.kind[id(out)] = "index"
                continue
            if s != self.shape and not per_row(s, self.kept):
                raise Unsupported(f"a value of shape {s} in a row-local cluster over "
                                  f"{self.shape}")
            role = self.role(op) if op is not None else None
            if prim.name in ROW_LOCAL_IDENTITIES or (
                    prim in (lax.reshape_p, lax.squeeze_p) and role != "row"
                    and s != self.shape) or (
                    fusion_kind(prim) == BROADCAST and role in ("kept", "scalar", "pick")) or (
                    fusion_kind(prim) == BROADCAST and role == "row"
                    and tuple(op.aval.shape) == s):
                self.alias[id(out)] = self.resolve(op)
                continue
            if fusion_kind(prim) == REDUCTION or prim is lax.gather_p:
                if s == self.shape:
                    raise Unsupported(f"{prim.name} to the row's shape")
                self.kind[id(out)] = "pick"
                self.phase[id(out)] = p + 1
                continue
            self.kind[id(out)] = "row" if s == self.shape else "kept"
            self.phase[id(out)] = p
        for v in self.cluster.outputs:
            if self.kind.get(id(self.resolve(v))) == "index":
                raise Unsupported("an iota leaving a row-local cluster")

    def resolve(self, atom):
        """The atom ``atom`` stands for (through stop_gradient, reshapes between per-row
        shapes, broadcasts of per-row and rank-0 values)."""
        while id(atom) in self.alias:
            atom = self.alias[id(atom)]
        return atom

    def role(self, atom) -> str:
        """``row``, ``kept``, ``scalar``, ``outside``, ``index`` or ``pick`` (a per-row value
        computed after a pass)."""
        atom = self.resolve(atom)
        if id(atom) in self.inputs:
            return self.inputs[id(atom)][1]
        return self.kind[id(atom)]

    # ------------------------------------------------------------ what each pass computes
    def _schedule(self):
        """Simulates the passes in order: which row values each computes (``pass_rows``, and
        ``computed_in``: the pass computing each) and which of them a later pass reads again or a
        reduction reads after its pass (``buffered``: written to a buffer)."""
        self.picks = [e for e in self.cluster.eqns if self.kind.get(id(e.outvars[0])) == "pick"
                      and self.live(e.outvars[0])]
        out_rows = [v for v in self.cluster.outputs if tuple(v.aval.shape) == self.shape]
        roots: dict = {}
        for e in self.picks:
            roots.setdefault(self.phase[id(e.outvars[0])] - 1, []).append(e.invars[0])
        for v in out_rows:
            roots.setdefault(self.phase.get(id(self.resolve(v)), 0), []).append(v)
        self.n_passes = max(roots, default=-1) + 1
        self.computed_in: dict = {}   # id(row value) -> the pass computing it
        self.buffered: set = set()    # row values read by a later pass or reduced: buffered
        self.pass_rows = []           # per pass: ids of the row values it computes
        for p in range(self.n_passes):
            rows = set()

            def need(atom):
                atom = self.resolve(atom)
                if id(atom) in self.inputs or self.kind[id(atom)] != "row":
                    return
                if id(atom) in rows:
                    return
                if id(atom) in self.computed_in:
                    self.buffered.add(id(atom))
                    return
                self.computed_in[id(atom)] = p
                rows.add(id(atom))
                eqn = self.defining[id(atom)]
                if fusion_kind(eqn.primitive) == BROADCAST:
                    return   # (an outside value or an iota, read by index)
                for v in eqn.invars:
                    need(v)

            for v in roots.get(p, ()):
                need(v)
            self.pass_rows.append(rows)
        for e in self.picks:   # (a reduced value is read from its buffer after its pass)
            op = self.resolve(e.invars[0])
            if self.role(op) == "row" and id(op) not in self.inputs:
                self.buffered.add(id(op))

    def live(self, var) -> bool:
        """Whether ``var`` is read by an output (directly or through other values)."""
        if not hasattr(self, "_live"):
            live = {id(self.resolve(v)) for v in self.cluster.outputs}
            for eqn in reversed(self.cluster.eqns):
                out = self.resolve(eqn.outvars[0])
                if id(out) in live or id(eqn.outvars[0]) in live:
                    live.update(id(self.resolve(v)) for v in eqn.invars)
            self._live = live
        return id(self.resolve(var)) in self._live

    # ------------------------------------------------------------ source
    def plan(self) -> KernelPlan:
        self._schedule()
        outputs = self.cluster.outputs
        for v in outputs:
            s = tuple(v.aval.shape)
            if s != self.shape and not per_row(s, self.kept):
                raise Unsupported(f"an output of shape {s}")
        # buffers: a row output (not float16/bfloat16: its buffer holds bits) is its own
        self.buffer = {}   # id(row value) -> (name, scratch: bool)
        scratch: list = []
        row_outs = {id(self.resolve(v)): j for j, v in enumerate(outputs)
                    if tuple(v.aval.shape) == self.shape}
        for k, e in enumerate(self.cluster.eqns):
            v = id(e.outvars[0])
            if v not in self.buffered:
                continue
            dtype = np.dtype(e.outvars[0].aval.dtype)
            if v in row_outs and dtype not in LOW_FLOATS:
                self.buffer[v] = (f"o{row_outs[v]}", False)
            else:
                self.buffer[v] = (f"w{k}", True)
                scratch.append((f"w{k}", dtype))
        large = self.n_rows * self.row >= PARALLEL_MIN
        threaded = large if self.parallel is None else self.parallel
        self.block = B = self._block(len(scratch), threaded)
        threaded = threaded and -(-self.n_rows // B) >= 2
        allocs = [f"{name} = np.empty(({B}, row), {scratch_storage(dtype)})"
                  for name, dtype in scratch]
        for e in self.picks:
            k = self.index[id(e)]
            allocs.append(f"s{k} = np.empty({B}, {self._acc_storage(e)})")
            if e.primitive is not lax.gather_p and self.lanes:
                allocs.append(f"acc{k} = np.empty({self.lanes}, {self._acc_storage(e)})")
        # (a block's scratch: per block where threaded, numba giving each thread its own;
        # once before the loop where serial, not once a block)
        lines = [] if threaded else ["    " + a for a in allocs]
        lines += [f"    for blk in {'prange' if threaded else 'range'}"
                  f"((n_rows + {B - 1}) // {B}):",
                  f"        lo = blk * {B}",
                  f"        nb = min(lo + {B}, n_rows) - lo"]
        if threaded:
            lines += ["        " + a for a in allocs]
        body: list = []
        for p in range(self.n_passes):
            body += self._pass(p)
        body += self._per_row_outputs()
        lines += ["        " + s for s in body]
        params = ([name for name, _, _ in self.inputs.values()]
                  + [f"o{j}" for j in range(len(outputs))] + ["n_rows", "row"])
        head = [f"@njit(**{'_PARALLEL' if threaded else '_OPTIONS'})",
                f"def kernel({', '.join(params)}):"]
        lows = [f"    {name}_x = {_load(dtype, name)}" for name, role, dtype in
                self.inputs.values() if role == "scalar" and dtype in LOW_FLOATS]
        source = ((_LOW_IMPORT if self.low else "")
                  + "\n".join(head + lows + lines + ["    return 0"]) + "\n")
        return self._wrapped(source)

    def _block(self, n_scratch: int, threaded: bool) -> int:
        """Rows a block takes: :data:`ROW_BLOCK`, doubled while a block holds fewer than
        :data:`BLOCK_MIN_ELEMENTS` (short rows: a block's loop setup spread over enough
        work), then halved while the scratch rows (at most 8 bytes an element) pass
        :data:`ROW_BLOCK_BYTES` or, ``threaded``, blocks would number fewer than 16."""
        B = ROW_BLOCK
        while B * self.row < BLOCK_MIN_ELEMENTS:
            B *= 2
        while B > 1 and (B * self.row * 8 * max(n_scratch, 1) > ROW_BLOCK_BYTES
                         or (threaded and self.n_rows < 16 * B)):
            B //= 2
        return min(B, max(self.n_rows, 1))

    def _acc_storage(self, eqn) -> str:
        """The dtype of the block's results of a reduction or pick ``eqn`` (as source)."""
        if eqn.primitive is lax.gather_p:
            dtype = np.dtype(eqn.outvars[0].aval.dtype)
        else:
            dtype = np.dtype(reduction(eqn.primitive, np.dtype(eqn.outvars[0].aval.dtype))[0])
        return scratch_storage(dtype)

    # per-row scalars ----------------------------------------------------------
    def _scalar(self, atom, lines: list, done: dict) -> str:
        """The expression of a per-row or rank-0 value for row ``r`` (block row ``t``),
        appending to ``lines`` the statements computing it (``done``: those already made)."""
        atom = self.resolve(atom)
        if id(atom) in self.inputs:
            name, role, dtype = self.inputs[id(atom)]
            if role == "scalar":
                return f"{name}_x" if dtype in LOW_FLOATS else name
            if role == "kept":
                return _load(dtype, f"{name}[r]")
            raise Unsupported(f"an input of role {role} read per row")
        if id(atom) in done:
            return done[id(atom)]
        eqn = self.defining[id(atom)]
        k = self.index[id(eqn)]
        kind = self.kind[id(atom)]
        odt = np.dtype(atom.aval.dtype)
        if kind == "pick":
            if eqn.primitive is lax.gather_p:
                expr = f"s{k}[t]"
            elif odt in LOW_FLOATS:
                expr = f"{_t(odt)}(np.float32(s{k}[t]))"
            else:
                expr = _cast(f"s{k}[t]", odt)
        elif kind == "kept":
            expr = elementwise(eqn, [self._scalar(v, lines, done) for v in eqn.invars])
        else:
            raise Unsupported(f"a {kind} value read per row")
        lines.append(f"p{k} = {expr}")
        done[id(atom)] = f"p{k}"
        return f"p{k}"

    # row values ----------------------------------------------------------------
    def _pass(self, p: int) -> list:
        """The lines of pass ``p`` over a block: each row's loop, then the reductions and
        picks whose operands the pass made."""
        pre: list = []          # per row, before its loop
        done: dict = {}         # per-row values made in ``pre``
        body: list = []         # the loop over the row's columns
        names: dict = {}        # id(row value) -> its local in the loop
        bound: dict = {}        # array -> its row's view, bound in ``pre``

        def row_of(array: str, at: str = "r") -> str:
            if array not in bound:
                bound[array] = f"{array}_r"
                pre.append(f"{array}_r = {array}[{at}]")
            return bound[array]

        def value(atom) -> str:
            atom = self.resolve(atom)
            if id(atom) in names:
                return names[id(atom)]
            if id(atom) in self.inputs:
                name, role, dtype = self.inputs[id(atom)]
                if role != "row":
                    return self._scalar(atom, pre, done)
                local = f"{name}_v"
                body.append(f"{local} = {_load(dtype, row_of(name) + '[c]')}")
                names[id(atom)] = local
                return local
            if self.kind[id(atom)] != "row":
                return self._scalar(atom, pre, done)
            if self.computed_in[id(atom)] < p:   # (made by an earlier pass: its buffer)
                name, scratch = self.buffer[id(atom)]
                local = f"{name}_v"
                body.append(f"{local} = {row_of(name, 't' if scratch else 'r')}[c]")
                names[id(atom)] = local
                return local
            eqn = self.defining[id(atom)]
            k = self.index[id(eqn)]
            body.append(f"t{k} = {self._row_expr(eqn, value, pre, done)}")
            names[id(atom)] = f"t{k}"
            if id(atom) in self.buffer and self.buffer[id(atom)][1]:
                body.append(f"{row_of(self.buffer[id(atom)][0], 't')}[c] = t{k}")
            return f"t{k}"

        for eqn in self.cluster.eqns:   # (program order)
            if id(eqn.outvars[0]) in self.pass_rows[p]:
                value(eqn.outvars[0])
        for j, v in enumerate(self.cluster.outputs):
            if tuple(v.aval.shape) == self.shape and \
                    self.phase.get(id(self.resolve(v)), 0) == p:
                local = value(v)
                body.append(f"{row_of(f'o{j}')}[c] = {_stored(np.dtype(v.aval.dtype), local)}")
        lines = _each_row(pre + ["for c in range(row):"] + ["    " + s for s in body]) \
            if body else []
        for e in self.picks:
            if self.phase[id(e.outvars[0])] - 1 == p:
                lines += self._finish(e)
        return lines

    def _row_expr(self, eqn, value, pre: list, done: dict) -> str:
        """The expression of the row value ``eqn`` makes at column ``c``."""
        prim = eqn.primitive
        dtype = np.dtype(eqn.outvars[0].aval.dtype)
        if prim is lax.iota_p:
            return self._index(eqn, int(eqn.params["dimension"]))
        if fusion_kind(prim) == BROADCAST:
            op = self.resolve(eqn.invars[0])
            dims = tuple(int(d) for d in eqn.params["broadcast_dimensions"])
            if eqn.params.get("sharding") is not None:
                raise Unsupported("broadcast_in_dim with a sharding")
            if id(op) not in self.inputs:   # (an iota along one of the output's axes)
                if self.kind.get(id(op)) != "index":
                    raise Unsupported("a broadcast of a computed value over the rows")
                iota = self.defining[id(op)]
                return self._index(iota, dims[int(iota.params["dimension"])], dtype)
            name, role, odt = self.inputs[id(op)]
            s = tuple(op.aval.shape)
            n = len(self.kept)
            if all(d >= n for d in dims) and list(dims) == sorted(dims):
                if all(x == 1 for x in s):
                    return _load(odt, f"{name}[0]")
                if list(dims) == list(range(n, len(self.shape))) and \
                        s == self.shape[n:]:
                    return _load(odt, f"{name}[c]")
            raise Unsupported(f"a broadcast of {s} over the rows {self.shape}")
        if prim is lax.scatter_add_p:
            if self.m != 1:
                raise Unsupported("scatter-add over rows of several axes")
            operand, update = value(eqn.invars[0]), value(eqn.invars[2])
            at = self._label(eqn, pre, done, clamp=eqn.params["mode"] == GatherScatterMode.CLIP)
            add = elementwise(JaxprEqn(lax.add_p, [eqn.invars[0], eqn.invars[2]],
                                       [eqn.outvars[0]], {}), [operand, update])
            return f"({add} if c == {at} else {operand})"
        if prim in (lax.gather_p, lax.reshape_p, lax.squeeze_p) or \
                fusion_kind(prim) == REDUCTION:
            raise Unsupported(f"{prim.name} to the row's shape")
        return elementwise(eqn, [value(v) for v in eqn.invars])

    def _index(self, iota, axis: int, dtype=None) -> str:
        """An ``iota``'s value at column ``c`` of row ``r``, along the output's ``axis``."""
        t = _t(dtype if dtype is not None else iota.outvars[0].aval.dtype)
        rank = len(self.shape)
        if axis == rank - 1 and self.m == 1:
            return f"{t}(c)"
        if axis == 0 and len(self.kept) == 1:
            return f"{t}(r)"
        raise Unsupported("an iota along part of the rows or of their index")

    def _label(self, eqn, pre: list, done: dict, clamp: bool) -> str:
        """A gather's or scatter-add's one index for row ``r``, as an int64 local in ``pre``
        (clamped into the row where ``clamp``)."""
        indices = eqn.invars[1]
        if not per_row(tuple(indices.aval.shape), self.kept) or \
                np.dtype(indices.aval.dtype).kind not in "iu":
            raise Unsupported(f"{eqn.primitive.name} of several labels a row")
        k = self.index[id(eqn)]
        index = self._scalar(indices, pre, done)
        if clamp:
            pre.append(f"q{k} = min(max(np.int64({index}), 0), row - 1)")
        else:
            pre.append(f"q{k} = np.int64({index})")
        return f"q{k}"

    def _source_row(self, atom, t: str) -> tuple[str, np.dtype]:
        """The array row holding row value ``atom`` for block row ``t`` after its pass, and the
        dtype its elements are read as (:func:`plax_numba.codegen._load`: an input's
        float16/bfloat16 bits decoded; a buffer holds values as computed)."""
        atom = self.resolve(atom)
        if id(atom) in self.inputs:
            name, _, dtype = self.inputs[id(atom)]
            return f"{name}[lo + {t}]", dtype
        name, scratch = self.buffer[id(atom)]
        return (f"{name}[{t}]" if scratch else f"{name}[lo + {t}]"), np.dtype(np.float32)

    def _finish(self, eqn) -> list:
        """The lines after a pass computing the block's results of the reduction or pick
        ``eqn`` into ``s{k}``."""
        k = self.index[id(eqn)]
        # (a row of one value: a per-row or rank-0 one broadcast over it, grad's cotangent of
        # a sum; it is reduced, or picked, from that value)
        uniform = self.role(eqn.invars[0]) != "row"
        if eqn.primitive is lax.gather_p:
            if self.m != 1:
                raise Unsupported("gather over rows of several axes")
            fill = eqn.params["mode"] == GatherScatterMode.FILL_OR_DROP
            pre: list = []
            done: dict = {}
            at = self._label(eqn, pre, done, clamp=not fill)
            if uniform:
                picked = self._scalar(eqn.invars[0], pre, done)
            else:
                src, read_as = self._source_row(eqn.invars[0], "t")
                picked = _load(read_as, f"{src}[{at}]")
            dtype = np.dtype(eqn.outvars[0].aval.dtype)
            if fill:
                filled = constant(gather_fill_value(dtype, eqn.params["fill_value"]), dtype)
                picked = f"({picked} if 0 <= {at} < row else {filled})"
            return _each_row(pre + [f"s{k}[t] = {picked}"])
        _, init, update = reduction(eqn.primitive, np.dtype(eqn.outvars[0].aval.dtype))
        if uniform:   # (the same value row-many times, in order)
            pre = []
            value = self._scalar(eqn.invars[0], pre, {})
            return _each_row(pre + [f"c{k} = {init}", "for q in range(row):",
                                    f"    c{k} = {update(f'c{k}', value)}", f"s{k}[t] = c{k}"])
        src, read_as = self._source_row(eqn.invars[0], "t")
        L = self.lanes
        if L:   # (the row's chunks into the lanes, the lanes in order, then the rest in order)
            head = [f"for j in range({L}):", f"    acc{k}[j] = {init}",
                    f"for q in range(0, row - row % {L}, {L}):", f"    v{k} = w{k}_t[q:q + {L}]",
                    f"    for j in range({L}):",
                    f"        acc{k}[j] = {update(f'acc{k}[j]', _load(read_as, f'v{k}[j]'))}",
                    f"c{k} = acc{k}[0]", f"for j in range(1, {L}):",
                    f"    c{k} = {update(f'c{k}', f'acc{k}[j]')}"]
            rest = f"row - row % {L}"
        else:   # (short rows: in order, no lanes to set up and combine)
            head, rest = [f"c{k} = {init}"], "0"
        return _each_row([f"w{k}_t = {src}"] + head + [
            f"for q in range({rest}, row):",
            f"    c{k} = {update(f'c{k}', _load(read_as, f'w{k}_t[q]'))}", f"s{k}[t] = c{k}"])

    def _per_row_outputs(self) -> list:
        """The lines storing the per-row outputs, after the last pass."""
        lines: list = []
        done: dict = {}
        for j, v in enumerate(self.cluster.outputs):
            if tuple(v.aval.shape) == self.shape:
                continue
            expr = self._scalar(v, lines, done)
            lines.append(f"o{j}[r] = {_stored(np.dtype(v.aval.dtype), expr)}")
        return _each_row(lines) if lines else []

    # ------------------------------------------------------------ the wrapper
    def _wrapped(self, source: str) -> KernelPlan:
        """The plan: ``source`` and the wrapper allocating the outputs, reshaping the inputs
        to rows and the outputs back."""
        R, N = self.row, self.n_rows
        arg_types, call, names = [], [], []
        wrapper_globals = {"_U16": np.uint16, "_asa": np.asarray, "_empty": np.empty}
        for i, atom in enumerate(self.cluster.inputs):
            name, role, dtype = self.inputs[id(atom)]
            names.append(name)
            bits = dtype in LOW_FLOATS
            storage = np.dtype(np.uint16) if bits else dtype
            if role == "scalar":
                call.append(f"_asa({name}).view(_U16)[()]" if bits else f"{name}[()]")
                arg_types.append(("scalar", storage))
                continue
            view = {"row": f".reshape({N}, {R})", "kept": f".reshape({N})",
                    "outside": ".reshape(-1)"}[role]
            call.append(f"_asc({name}){view}" + (".view(_U16)" if bits else ""))
            arg_types.append(("array", storage, 2 if role == "row" else 1))
        alloc, results = [], []
        for j, v in enumerate(self.cluster.outputs):
            dtype = np.dtype(v.aval.dtype)
            storage = np.dtype(np.uint16) if dtype in LOW_FLOATS else dtype
            wrapper_globals[f"_S{j}"] = storage
            wrapper_globals[f"_D{j}"] = dtype
            is_row = tuple(v.aval.shape) == self.shape
            alloc.append(f"        _o{j} = _empty({(N, R) if is_row else (N,)!r}, _S{j})")
            call.append(f"_o{j}")
            arg_types.append(("array", storage, 2 if is_row else 1))
            shaped = f"_o{j}.reshape({tuple(v.aval.shape)!r})"
            results.append(f"{shaped}.view(_D{j})" if dtype in LOW_FLOATS else shaped)
        call += [str(N), str(R)]
        arg_types += [("int",), ("int",)]
        wrapper = "\n".join([
            f"def step({', '.join(names)}):",
            "    if _ready:",
            *alloc,
            f"        _kernel({', '.join(call)})",
            f"        return [{', '.join(results)}]",
            f"    return _interp({', '.join(names)})",
        ]) + "\n"
        return KernelPlan(source, wrapper, arg_types, wrapper_globals,
                          [e.primitive.name for e in self.cluster.eqns])
