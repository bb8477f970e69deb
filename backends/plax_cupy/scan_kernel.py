"""A ``scan`` with a small body as one persistent CUDA kernel: one thread block loops over the
steps on the device.

The host loop of :mod:`plax_cupy.control_flow` launches the body's kernels once per step (a CUDA
graph replays them, but still as a node per kernel and step: ~2 us of GPU time each). Where the
body is small, :func:`plan_scan` generates instead one kernel, ``plax_scan``, run by a single
block:

* the body's values live in the block's shared memory (or, past :data:`SHARED_BYTES`, in a
  global scratch buffer of at most :data:`SCRATCH_BYTES`); the carry is double-buffered (step
  ``s`` reads buffer ``s & 1`` and writes the other), so a step's outputs never overwrite what
  the step still reads;
* each step runs the body's equations as block-wide **phases** -- ``for (i = tid; i < n; i +=
  blockDim.x)`` over a phase's output elements, a ``__syncthreads()`` before a phase that reads
  an element another thread wrote since the last one (:meth:`_Body.phase`) and at the end of
  each step. Consecutive elementwise equations of one shape share a phase (a thread reads only
  the elements it wrote);
  ``reshape``/``squeeze``/``expand_dims`` are aliases (no phase); ``broadcast_in_dim``,
  ``transpose``, ``rev``, ``slice`` and ``dynamic_slice`` read through an index map,
  ``dynamic_update_slice`` reads the update inside its window and the operand outside;
  ``pad`` (negative and interior padding too), ``concatenate``, ``stack``, ``split`` and
  ``unstack`` read the operand their element falls in; ``gather`` locates its element with
  :func:`plax_cupy.gather_index.gather_read` (starts clamped by
  :func:`plax_cupy.codegen.clamped_start`, as every dynamic start here); ``scatter`` and
  ``scatter-add/mul/min/max`` are a thread per result element folding in, in order, the
  updates that land on it (no atomics); ``dot_general`` is a thread per output element
  looping over the contraction (an operand constant across steps, such as an RNN's weights,
  staged in shared memory once before the loop where it fits: :func:`_place_staged`); a
  reduction, ``argmax``/``argmin`` (:class:`plax_cupy.codegen.ArgReduction`'s pair) and
  ``cumsum``/``cumprod``/``cummax``/``cummin``/``cumlogsumexp`` a thread per output element
  folding in order; ``sort`` (several keys and operands, up to :data:`MAX_SORT` elements along
  its axis) a bitonic network over the rows' positions, a phase per stage (:func:`_sort`);
  calls (``jit``: ``jnp.where``, ``remainder``, ``take``) are spliced in first, and a ``cond``
  becomes its branches and a ``select_n`` (:func:`_branches_selected`); an empty value takes
  no phase;
* ``xs[t]`` is read in place and ``ys[t]`` written into the stacked outputs; ``reverse`` and
  ``length`` are baked into the source.

The scalar code of each elementwise primitive and reduction is the fused generator's
(:func:`plax_cupy.codegen.elementwise_expr`, :func:`~plax_cupy.codegen.reduction_of`), so a
step computes what the host loop's kernels compute (reductions and contractions fold in another
order: float results within the conformance tolerances).

A body the kernel does not express -- a primitive outside the list above (nested control flow,
host callbacks, cuSOLVER/cuFFT operations...), complex contractions, a sort of more than
:data:`MAX_SORT` elements along its axis, a value over :data:`MAX_ELEMENTS` elements, a
working set over :data:`SCRATCH_BYTES`, or more than
:data:`MAX_STEP_WORK` multiply-adds per step (where one block would be slower than the library
kernels the host loop launches) -- raises :class:`plax_cupy.codegen.Unsupported` with the reason,
and the scan keeps the host loop (``Compiled.as_text()`` says why).
"""
from __future__ import annotations

import math
import re

import numpy as np

from plax import lax
from plax.core.jaxpr import Jaxpr, JaxprEqn, Literal, Var
from plax.lax.slicing import GatherScatterMode, _scatter_to_gather_dnums, gather_fill_value
from plax.lowering import BROADCAST, ELEMENTWISE, INDEX, REDUCTION, fusion_kind
from plax.lowering.calls import spliced_calls
from plax.transforms.call import jit_p

from plax_cupy import codegen, codegen_structural, special_source
from plax_cupy.codegen import Unsupported, c_literal, load_expr, store_expr
from plax_cupy.dtypes import UnsupportedDtype, ctype, is_floating, value_ctype
from plax_cupy.gather_index import gather_read

#: the most elements of any one value of the body (an intermediate, the carry, a slice of xs)
MAX_ELEMENTS = 1 << 14
#: the working set (every body value, the carry twice) kept in the block's static shared
#: memory up to this many bytes (of the 48 KiB a block may declare statically)
SHARED_BYTES = 40 * 1024
#: past SHARED_BYTES, the working set lives in a global scratch buffer of at most this many
#: bytes (L1/L2-resident for one block); beyond it the scan keeps the host loop
SCRATCH_BYTES = 1 << 20
#: the most multiply-adds (elements times contraction or reduced extent, summed over the body)
#: one step may cost: past it a single block is slower than the host loop's library kernels
MAX_STEP_WORK = 1 << 20
#: how many steps ahead the rows of ``xs`` are prefetched into L2 (a row is read once, when
#: its step comes: without it each step would wait for HBM, ~0.5 us on an H200)
PREFETCH_STEPS = 8
#: the most threads of the block (a multiple of 32; fewer when the body's values are smaller)
MAX_BLOCK = 256

_ALIASES = ("reshape", "squeeze", "expand_dims")


class ScanKernel(codegen.ClusterKernel):
    """A generated persistent scan kernel and how to launch it.

    Attributes:
      source: the CUDA C++ translation unit; ``entry``: ``("plax_scan",)``.
      block: threads of its one block.
      n_inputs: array inputs in order (body constants, scan consts, initial carry, xs).
      out_shapes, out_dtypes: the scan's outputs (final carry, then stacked ys).
      scratch_bytes: the global scratch it needs (0: the working set is in shared memory).
      phases, barriers: a step's block-wide loops and ``__syncthreads()``.
      primitives, shape: for :func:`plax_cupy.codegen.describe`.
    """

    def __repr__(self) -> str:
        return (f"ScanKernel(length={self.shape[0]}, block={self.block}, phases={self.phases}, "
                f"barriers={self.barriers})")


_strides = codegen._strides  # (C order)


def _check_dtype(v) -> np.dtype:
    dtype = np.dtype(v.aval.dtype)
    # (an empty value -- the transpose of a slice of nothing, cumprod's gradient -- takes a
    # slot of one element that no phase touches: its loops run zero times)
    try:
        ctype(dtype)
    except UnsupportedDtype as err:
        raise Unsupported(f"scan body value of {err}") from None
    return dtype


class _Body:
    """The kernel source of one body, built phase by phase."""

    def __init__(self):
        self.where: dict = {}       # id(var) -> C pointer expression of its elements
        self.offset = 0             # bytes of the working set so far
        self.decls: list[str] = []  # working-set pointers, declared once
        self.lines: list[str] = []  # the step's code
        self.phases = 0
        self.widest = 1
        self.work = 0
        self.consts: dict = {}      # id(var) -> j of the kernel parameter k{j} (constant in steps)
        self.staged: list = []      # (var, j, perm, marker, staged read, direct read) per operand
        self.dirty: set = set()     # arrays written since the last barrier
        self.barriers = 0           # in a step
        self.helpers: set = set()   # source the kernel needs before it (argmax's pair type)
        self.names = 0              # locals made by :meth:`fresh`

    def fresh(self) -> str:
        """A new local name (gather's and scatter's index arithmetic)."""
        self.names += 1
        return f"g{self.names}"

    def slot(self, var, name: str, copies: int = 1) -> str:
        """Places ``var`` in the working set (``copies`` times, one after the other); returns
        the C pointer of its elements (for an empty value, a pointer no phase reads: nothing
        declared, nothing to warn of)."""
        dtype = _check_dtype(var)
        size = math.prod(var.aval.shape)
        if size == 0:
            return f"(({ctype(dtype)}*)plax_work)"
        if size > MAX_ELEMENTS:
            raise Unsupported(f"a body value of {size} elements (the kernel takes at most "
                              f"{MAX_ELEMENTS})")
        self.widest = max(self.widest, size)
        return self.buffer(name, dtype, size * copies)

    def buffer(self, name: str, dtype, size: int) -> str:
        """Declares ``name``, ``size`` (at least one) elements of ``dtype`` in the working set
        (16-byte aligned); returns ``name``."""
        self.offset = (self.offset + 15) // 16 * 16
        self.decls.append(f"{ctype(dtype)}* const {name} = ({ctype(dtype)}*)(plax_work + {self.offset});")
        self.offset += size * np.dtype(dtype).itemsize
        return name

    def read(self, atom, index: str) -> str:
        """The value (value type) of ``atom`` at flat ``index``."""
        if isinstance(atom, Literal):
            if atom.aval.shape:
                raise Unsupported("an array literal in the scan body")
            return c_literal(atom.val, atom.aval.dtype)
        return load_expr(f"{self.where[id(atom)]}[{index if atom.aval.shape else '0'}]",
                         atom.aval.dtype)

    def phase(self, n: int, body: list[str], head: list[str] = ()) -> None:
        """One block-wide loop over ``n`` elements, after a barrier where it reads an element
        another thread may have written since the last barrier.

        Element ``i`` of every phase is thread ``i % blockDim.x``'s, so a phase reading only
        element ``i`` of the values written since the last barrier reads what its own thread
        wrote: no barrier. Each value is written once a step (its own slot), so a phase never
        overwrites what an earlier phase of the step reads (a sort's stages write its two
        buffers of positions in turn, but each stage reads another thread's element of the one
        before, so a barrier comes before every stage); the end of the step
        (:meth:`barrier`) separates one step's reads from the next step's writes. A phase of
        no elements (an empty value) is left out."""
        if n == 0:
            return
        self.phases += 1
        self.widest = max(self.widest, n)
        # index variables nothing reads would be NVRTC warnings
        text = "\n".join(body)
        text += "".join(staged + direct for *_, marker, staged, direct in self.staged if marker in text)
        body = [b for b in body if not (b.startswith("const int q") and len(
            re.findall(rf"\b{b.split()[2]}\b", text)) == 1)]
        reads = "\n".join([text, *head])
        if any(index != "i" for name in self.dirty
               for index in re.findall(rf"\b{name}\[([^\]]*)\]", reads)):
            self.barrier()
        self.lines += ["    {", *["      " + h for h in head],
                       f"      for (int i = threadIdx.x; i < {n}; i += blockDim.x) {{",
                       *["        " + b for b in body], "      }", "    }"]
        self.dirty |= set(re.findall(r"\b(\w+)\[i\] = ", text))

    def barrier(self) -> None:
        """``__syncthreads()``: every thread's writes so far visible to every other."""
        self.lines.append("    __syncthreads();")
        self.barriers += 1
        self.dirty.clear()


def _staged_read(body: _Body, var, axis_of_last, terms_of) -> str:
    """The read of constant ``var`` by a ``dot_general`` phase, left as a marker that
    :func:`_place_staged` replaces: from a copy staged in shared memory before the loop where
    it fits (its axis ``axis_of_last`` -- the one the output's last axis, consecutive threads,
    walks -- moved last, so a warp reads consecutive words: no bank conflicts), else from
    global memory. ``terms_of(strides)``: the flat index of the element read, given the strides
    of ``var``'s axes."""
    shape = tuple(var.aval.shape)
    rank = len(shape)
    perm = list(range(rank))
    if axis_of_last is not None:
        perm = [d for d in perm if d != axis_of_last] + [axis_of_last]
    pst = _strides([shape[d] for d in perm])
    staged_strides = [pst[perm.index(d)] for d in range(rank)]
    j = body.consts[id(var)]
    marker = f"@plax_staged{len(body.staged)}@"
    staged = load_expr(f"ks{len(body.staged)}[{_offset(terms_of(staged_strides))}]", var.aval.dtype)
    direct = body.read(var, _offset(terms_of(_strides(shape))))
    body.staged.append((var, j, perm, marker, staged, direct))
    return marker


def _place_staged(body: _Body) -> list[str]:
    """Stages the constant operands of the body's contractions in shared memory (after the
    working set, while the total stays within :data:`SHARED_BYTES`; none where the working set
    is in the global scratch): their declarations, and the lines that copy them before the
    loop. Replaces every marker of :func:`_staged_read` in ``body.lines``."""
    copies: list[str] = []
    chosen: dict = {}
    for n, (var, j, perm, marker, staged, direct) in enumerate(body.staged):
        shape = tuple(var.aval.shape)
        size = max(math.prod(shape), 1)
        dtype = np.dtype(var.aval.dtype)
        at = (body.offset + 15) // 16 * 16
        if body.offset > SHARED_BYTES or at + size * dtype.itemsize > SHARED_BYTES:
            chosen[marker] = direct
            continue
        body.offset = at + size * dtype.itemsize
        t = ctype(dtype)
        body.decls.append(f"{t}* const ks{n} = ({t}*)(plax_work + {at});")
        pshape = [shape[d] for d in perm]
        pst, st = _strides(pshape), _strides(shape)
        src_at = _offset([f"((i / {pst[k]}) % {pshape[k]}) * {st[d]}" for k, d in enumerate(perm)])
        copies.append(f"  for (int i = threadIdx.x; i < {size}; i += blockDim.x) ks{n}[i] = k{j}[{src_at}];")
        chosen[marker] = staged
    if chosen:
        pattern = re.compile("|".join(re.escape(m) for m in chosen))
        body.lines = [pattern.sub(lambda m: chosen[m.group(0)], line) for line in body.lines]
    return copies


def _index(shape, var: str = "q") -> list[str]:
    """Lines decomposing the flat index ``i`` over ``shape`` into ``q0, q1...``."""
    st = _strides(shape)
    return [f"const int {var}{d} = (i / {st[d]}) % {shape[d]};" for d in range(len(shape))]


def _offset(terms: list[str]) -> str:
    return " + ".join(terms) or "0"


def _operand_offset(op_shape, out_shape) -> str:
    """The flat index of an elementwise operand broadcast along its size-1 axes."""
    st = _strides(op_shape)
    return _offset([f"q{d} * {st[d]}" for d in range(len(op_shape)) if op_shape[d] != 1])


def _elementwise_group(body: _Body, eqns: list, k0: int) -> None:
    """Consecutive elementwise (and iota) equations of one output shape as one phase."""
    shape = tuple(eqns[0].outvars[0].aval.shape)
    n = math.prod(shape)
    lines: list[str] = []
    local: dict = {}   # id(var) -> register holding its element i (made in this phase)
    need_q = False
    for k, eqn in enumerate(eqns, k0):
        out = eqn.outvars[0]
        dout = _check_dtype(out)
        if fusion_kind(eqn.primitive, index=True) == INDEX:
            if dout.kind == "c":
                raise Unsupported("complex iota in the scan body")
            need_q = need_q or len(shape) > 0
            pos = f"q{int(eqn.params['dimension'])}" if shape else "0"
            expr = f"(({value_ctype(dout)}){pos})"
        else:
            args = []
            for j, v in enumerate(eqn.invars):
                _check_dtype(v)
                if id(v) in local:
                    args.append(local[id(v)])
                    continue
                vshape = tuple(v.aval.shape)
                if not vshape or vshape == shape:
                    value = body.read(v, "i")
                elif len(vshape) == len(shape):
                    need_q = True
                    value = body.read(v, _operand_offset(vshape, shape))
                else:
                    raise Unsupported(f"{eqn.primitive.name}: operand shape {vshape}")
                name = f"e{k}_{j}"
                lines.append(f"const {value_ctype(v.aval.dtype)} {name} = {value};")
                args.append(name)
            expr = codegen.elementwise_expr(eqn, args)
        lines.append(f"const {value_ctype(dout)} t{k} = {expr};")
        lines.append(f"{body.where[id(out)]}[i] = {store_expr(f't{k}', dout)};")
        local[id(out)] = f"t{k}"
    body.work += n * len(eqns)
    body.phase(n, (_index(shape) if need_q else []) + lines)


def _store_phase(body: _Body, eqn, value: str, head: list[str] = (), lines: list[str] = (),
                 result: int = 0) -> None:
    """A phase writing ``value`` (a C expression of element ``i``, after ``lines``) to the
    equation's result (its ``result``-th), a thread per element."""
    out = eqn.outvars[result]
    shape = tuple(out.aval.shape)
    n = math.prod(shape)
    body.work += n
    body.phase(n, _index(shape) + list(lines)
               + [f"{body.where[id(out)]}[i] = {store_expr(f'({value})', out.aval.dtype)};"], head)


def _structural(body: _Body, eqn) -> None:
    """broadcast_in_dim, transpose, slice, dynamic_slice: a gather through an index map."""
    prim, params = eqn.primitive.name, eqn.params
    op, out = eqn.invars[0], eqn.outvars[0]
    shape, oshape = tuple(out.aval.shape), tuple(op.aval.shape)
    st = _strides(oshape)
    head: list[str] = []
    if prim == "broadcast_in_dim":
        if params.get("sharding") is not None:
            raise Unsupported("broadcast_in_dim with a sharding")
        bd = [int(d) for d in params["broadcast_dimensions"]]
        terms = [f"q{bd[j]} * {st[j]}" for j in range(len(oshape)) if oshape[j] != 1]
    elif prim == "transpose":
        perm = [int(p) for p in params["permutation"]]
        terms = [f"q{d} * {st[perm[d]]}" for d in range(len(shape))]
    elif prim == "rev":
        dims = {int(d) for d in params["dimensions"]}
        terms = [f"({shape[d] - 1} - q{d}) * {st[d]}" if d in dims else f"q{d} * {st[d]}"
                 for d in range(len(shape))]
    elif prim == "slice":
        start = [int(s) for s in params["start_indices"]]
        step = [int(s) for s in (params.get("strides") or [1] * len(shape))]
        terms = [f"({start[d]} + q{d} * {step[d]}) * {st[d]}" for d in range(len(shape))]
    elif prim == "dynamic_slice":
        head = _clamped_starts(body, eqn, oshape, [int(s) for s in params["slice_sizes"]])
        terms = [f"(s{d} + q{d}) * {st[d]}" for d in range(len(shape))]
    else:
        raise Unsupported(f"{prim} in the scan body")
    _store_phase(body, eqn, body.read(op, _offset(terms)), head)


def _clamped_starts(body: _Body, eqn, dims, sizes) -> list[str]:
    """Lines declaring ``s0, s1...``: the start indices of a ``dynamic_slice`` or
    ``dynamic_update_slice`` equation (its last operands) clamped so a window of ``sizes``
    fits in ``dims`` (:func:`plax_cupy.codegen.clamped_start`)."""
    indices = eqn.invars[len(eqn.invars) - len(dims):]
    head = []
    for d, idx in enumerate(indices):
        if idx.aval.shape or np.dtype(idx.aval.dtype).kind not in "iu":
            raise Unsupported(f"{eqn.primitive.name} with a non-scalar or non-integer index")
        start = codegen.clamped_start(body.read(idx, "0"), idx.aval.dtype, dims[d] - sizes[d])
        head.append(f"const long long s{d} = {start};")
    return head


def _dynamic_update(body: _Body, eqn) -> None:
    """dynamic_update_slice: each element of the result reads the update where it falls in
    the window at the clamped starts, else the operand."""
    op, update = eqn.invars[:2]
    out = eqn.outvars[0]
    shape, ushape = tuple(out.aval.shape), tuple(update.aval.shape)
    head = _clamped_starts(body, eqn, shape, ushape)
    ust = _strides(ushape)
    inside = [f"q{d} >= s{d} && q{d} < s{d} + {ushape[d]}" for d in range(len(shape))]
    terms = [f"(q{d} - s{d}) * {ust[d]}" for d in range(len(shape))]
    value = (f"({' && '.join(inside)}) ? {body.read(update, _offset(terms))} : {body.read(op, 'i')}"
             if shape else body.read(update, "0"))
    _store_phase(body, eqn, value, head)


def _reduction(body: _Body, eqn) -> None:
    """A reduction: a thread per output element folding the reduced elements in order."""
    red = codegen.reduction_of(eqn)
    op, out = eqn.invars[0], eqn.outvars[0]
    oshape = tuple(op.aval.shape)
    axes = sorted(int(a) for a in eqn.params["axes"])
    kept = [d for d in range(len(oshape)) if d not in axes]
    n_red = math.prod(oshape[d] for d in axes)
    st = _strides(oshape)
    kst, rst = _strides([oshape[d] for d in kept]), _strides([oshape[d] for d in axes])
    at = " + ".join([f"((i / {kst[j]}) % {oshape[d]}) * {st[d]}" for j, d in enumerate(kept)]
                    + [f"((r / {rst[j]}) % {oshape[d]}) * {st[d]}" for j, d in enumerate(axes)]) or "0"
    acc = ctype(red.acc)
    value = codegen._to_acc(body.read(op, at), red)
    n = math.prod(oshape[d] for d in kept)
    body.work += n * max(n_red, 1)
    body.phase(n, [f"{acc} acc = {red.init};",
                   *([f"for (int r = 0; r < {n_red}; ++r) acc = {red.combine('acc', value)};"]
                     if n_red else []),
                   f"{body.where[id(out)]}[i] = {store_expr('acc', out.aval.dtype, red.acc)};"])


def _dot(body: _Body, eqn) -> None:
    """dot_general: a thread per output element, looping over the contraction."""
    lhs, rhs = eqn.invars
    out = eqn.outvars[0]
    dout = _check_dtype(out)
    for v in (lhs, rhs, out):
        d = np.dtype(v.aval.dtype)
        if not (is_floating(d) or d.kind in "iub"):
            raise Unsupported(f"dot_general of {d} in the scan body")
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = ([int(a) for a in x] for x in (lc, rc, lb, rb))
    ls, rs = tuple(lhs.aval.shape), tuple(rhs.aval.shape)
    lf = [d for d in range(len(ls)) if d not in lc and d not in lb]
    rf = [d for d in range(len(rs)) if d not in rc and d not in rb]
    shape = tuple(out.aval.shape)
    lst, rst = _strides(ls), _strides(rs)
    csizes = [ls[d] for d in lc]
    cst = _strides(csizes)
    k = math.prod(csizes)
    # output axes: batch, lhs free, rhs free; then the contraction (index c)
    l_axes = [(j, d) for j, d in enumerate(lb)] + [(len(lb) + j, d) for j, d in enumerate(lf)]
    r_axes = [(j, d) for j, d in enumerate(rb)] + [(len(lb) + len(lf) + j, d) for j, d in enumerate(rf)]

    def terms_of(axes, contracted):
        return lambda st: ([f"q{q} * {st[d]}" for q, d in axes]
                           + [f"((c / {cst[j]}) % {csizes[j]}) * {st[d]}" for j, d in enumerate(contracted)])

    def operand(v, axes, contracted, strides) -> str:
        if id(v) in body.consts and v.aval.shape:   # constant across steps: staged once
            last = [d for q, d in axes if q == len(shape) - 1]
            return _staged_read(body, v, last[0] if last else None, terms_of(axes, contracted))
        return body.read(v, _offset(terms_of(axes, contracted)(strides)))
    if is_floating(dout):  # float64 operands in double, the rest in float (as cuBLAS does)
        wide = any(np.dtype(v.aval.dtype) == np.float64 for v in (lhs, rhs, out))
        acc = np.dtype(np.float64 if wide else np.float32)
    elif dout == np.bool_:  # a bool result: whether any pair of the contraction is true
        acc = dout
    else:  # integers wrap, as the reference's fixed-width arithmetic does
        acc = np.dtype(np.uint64)
    t = ctype(acc)
    a = f"({t}){operand(lhs, l_axes, lc, lst)}"
    b = f"({t}){operand(rhs, r_axes, rc, rst)}"
    n = math.prod(shape)
    body.work += n * max(k, 1)
    fold = f"acc = acc || ({a} && {b});" if acc == np.bool_ else f"acc += {a} * {b};"
    body.phase(n, _index(shape) + [f"{t} acc = 0;"]
               + ([f"for (int c = 0; c < {k}; ++c) {fold}"] if k else [])
               + [f"{body.where[id(out)]}[i] = {store_expr('acc', dout, acc)};"])


def _pad(body: _Body, eqn) -> None:
    """pad: element ``q`` reads the operand where
    :func:`plax_cupy.codegen_structural.pad_map` lands it on an operand element (low and high
    may be negative: the position starts before the operand, or the result stops inside it),
    else the padding value."""
    op, value = eqn.invars
    lines: list[str] = []

    def name(expr: str) -> str:
        local = body.fresh()
        lines.append(f"const long long {local} = {expr};")
        return local
    condition, flat = codegen_structural.pad_map(
        [f"q{d}" for d in range(len(op.aval.shape))], tuple(op.aval.shape),
        eqn.params["padding_config"], name)
    read = body.read(op, flat)
    _store_phase(body, eqn, read if condition is None else
                 f"{condition} ? {read} : {body.read(value, '0')}", lines=lines)


def _joined(body: _Body, eqn) -> None:
    """concatenate (along ``dimension``) and stack (a new ``axis``: a concatenation of the
    operands with a size-1 axis there): element ``q`` reads the operand its position along the
    axis falls in (:func:`plax_cupy.codegen_structural.concatenate_map`; a chain of
    conditionals, the last operand the default)."""
    stack = eqn.primitive.name == "stack"
    axis = int(eqn.params["axis" if stack else "dimension"])
    shapes = [tuple(v.aval.shape) for v in eqn.invars]
    if stack:
        shapes = [s[:axis] + (1,) + s[axis:] for s in shapes]
    reads = codegen_structural.concatenate_map(
        [f"q{d}" for d in range(len(eqn.outvars[0].aval.shape))], shapes, axis)
    if not reads:   # (no operand has elements: neither has the result)
        return
    value = body.read(eqn.invars[reads[-1][0]], reads[-1][2])
    for k, end, flat in reversed(reads[:-1]):
        value = f"(q{axis} < {end} ? {body.read(eqn.invars[k], flat)} : {value})"
    _store_phase(body, eqn, value)


def _gather(body: _Body, eqn) -> None:
    """gather: the operand element that :func:`plax_cupy.gather_index.gather_read` locates
    for each result element (its starts clamped by :func:`plax_cupy.codegen.clamped_start`),
    or the fill value where a ``FILL_OR_DROP`` window does not fit."""
    op, indices = eqn.invars
    out = eqn.outvars[0]
    p = eqn.params
    shape = tuple(out.aval.shape)
    lines: list[str] = []
    off, inside = gather_read(
        lines, [f"q{d}" for d in range(len(shape))], tuple(op.aval.shape),
        tuple(indices.aval.shape), _index_dtype(indices, "gather"),
        dimension_numbers=p["dimension_numbers"], slice_sizes=p["slice_sizes"],
        index_value=lambda flat: body.read(indices, flat), fresh=body.fresh,
        bounds=p["mode"] == GatherScatterMode.FILL_OR_DROP)
    value = body.read(op, off)
    if inside is not None:
        dout = np.dtype(out.aval.dtype)
        value = f"{inside} ? {value} : {c_literal(gather_fill_value(dout, p['fill_value']), dout)}"
    _store_phase(body, eqn, value, lines=lines)


def _fold(kind: str, dtype, prim: str) -> codegen.Reduction:
    """The :class:`plax_cupy.codegen.Reduction` a scatter or cumulative op folds with."""
    if np.dtype(dtype) == np.bool_ and kind in ("sum", "prod"):
        raise Unsupported(f"{prim} of bool in the scan body")
    return codegen.Reduction(kind, dtype)


def _index_dtype(indices, prim: str) -> np.dtype:
    dtype = np.dtype(indices.aval.dtype)
    if dtype.kind not in "iu":
        raise Unsupported(f"{prim} with {dtype} indices")
    return dtype


#: each scatter's combine: the Reduction kind folding the updates into the operand element
_SCATTERS = {"scatter": None, "scatter-add": "sum", "scatter-mul": "prod", "scatter-min": "min",
             "scatter-max": "max"}


def _scatter(body: _Body, eqn) -> None:
    """scatter and scatter-add/mul/min/max: a thread per result element starts from the
    operand's element and folds in, in the reference's order (index vector major, then the
    window), every update element whose target
    (:func:`plax_cupy.gather_index.gather_read`, the update's window read as gather's result)
    is that element: deterministic, no atomics, at the cost of every thread visiting every
    update (counted in the step's work). A window out of bounds is dropped (clamped under
    ``CLIP``); of several updates of one element under ``scatter``, the last wins."""
    op, indices, updates = eqn.invars
    out = eqn.outvars[0]
    dn, mode = eqn.params["dimension_numbers"], eqn.params["mode"]
    oshape, ushape = tuple(op.aval.shape), tuple(updates.aval.shape)
    dropped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    kept = [d for d in range(len(oshape)) if d not in dropped]
    sizes = [1] * len(oshape)
    for k, d in enumerate(kept):
        sizes[d] = ushape[dn.update_window_dims[k]]
    # the updates visited in the reference's order (index vector major, then the window, as
    # the host kernels' stable sort orders them): under ``scatter`` the last of several updates
    # of one element wins, and overlapping windows land in the order their index vectors come
    order = [d for d in range(len(ushape)) if d not in dn.update_window_dims] + list(dn.update_window_dims)
    ost = _strides([ushape[d] for d in order])
    inner = [f"const long long w{d} = (u / {ost[k]}LL) % {ushape[d]}LL;" for k, d in enumerate(order)]
    ust = _strides(ushape)
    at = "u" if order == list(range(len(ushape))) else \
        _offset([f"w{d} * {ust[d]}" for d in range(len(ushape))])
    off, inside = gather_read(
        inner, [f"w{d}" for d in range(len(ushape))], oshape, tuple(indices.aval.shape),
        _index_dtype(indices, eqn.primitive.name), dimension_numbers=_scatter_to_gather_dnums(dn),
        slice_sizes=sizes,
        index_value=lambda flat: body.read(indices, flat), fresh=body.fresh,
        bounds=mode != GatherScatterMode.CLIP)
    hit = f"({off}) == i" if inside is None else f"{inside} && ({off}) == i"
    kind = _SCATTERS[eqn.primitive.name]
    dout = np.dtype(out.aval.dtype)
    n_upd = math.prod(ushape)
    if kind is None:
        acc_t, init, fold = value_ctype(dout), body.read(op, "i"), body.read(updates, at)
    else:
        red = _fold(kind, dout, eqn.primitive.name)
        acc_t, init = ctype(red.acc), codegen._to_acc(body.read(op, "i"), red)
        fold = red.combine("acc", codegen._to_acc(body.read(updates, at), red))
    n = math.prod(oshape)
    body.work += n * max(n_upd, 1)
    loop = [f"for (long long u = 0; u < {n_upd}LL; ++u) {{", *["  " + line for line in inner],
            f"  if ({hit}) acc = {fold};", "}"] if n_upd else []
    body.phase(n, [f"{acc_t} acc = {init};", *loop,
                   f"{body.where[id(out)]}[i] = "
                   f"{store_expr('acc', dout, None if kind is None else red.acc)};"])


def _arg_reduction(body: _Body, eqn) -> None:
    """argmax/argmin: a thread per result element walking its axis in order with
    :class:`plax_cupy.codegen.ArgReduction`'s pair (the first NaN, else the first best)."""
    red = codegen.arg_reduction_of(eqn)
    op, out = eqn.invars[0], eqn.outvars[0]
    oshape = tuple(op.aval.shape)
    (axis,) = (int(a) for a in eqn.params["axes"])
    st = _strides(oshape)
    kept = [d for d in range(len(oshape)) if d != axis]
    kst = _strides([oshape[d] for d in kept])
    at = _offset([f"((i / {kst[j]}) % {oshape[d]}) * {st[d]}" for j, d in enumerate(kept)]
                 + [f"r * {st[axis]}"])
    body.helpers.add(red.typedef)
    n = math.prod(oshape[d] for d in kept)
    body.work += n * oshape[axis]
    body.phase(n, [f"{red.acc_ctype} acc = {red.init};",
                   f"for (int r = 0; r < {oshape[axis]}; ++r) "
                   f"acc = {red.accumulate('acc', red.operand(body.read(op, at), 'r'))};",
                   f"{body.where[id(out)]}[i] = {red.store('acc', out.aval.dtype)};"])


#: the cumulative primitives the kernel takes: the Reduction kind each folds with (None:
#: cumlogsumexp, folded with the row kernels' ``plax_logaddexp``)
_CUMULATIVE = {"cumsum": "sum", "cumprod": "prod", "cummax": "max", "cummin": "min",
               "cumlogsumexp": None}


def _cumulative(body: _Body, eqn) -> None:
    """cumsum/cumprod/cummax/cummin/cumlogsumexp along ``axis``: a thread per result element
    folding the elements up to it in order (from the end under ``reverse``), as the reference
    does. cumlogsumexp folds with ``plax_logaddexp``
    (:data:`plax_cupy.special_source.LOGADDEXP_SOURCE`, the row kernels' combine: NumPy's
    ``logaddexp`` rules for NaN and infinities) in the value type (float16 and bfloat16 in
    float, as the reference accumulates them), from the first element itself (as
    ``np.logaddexp.accumulate`` starts: a leading ``-0.0`` stays ``-0.0``)."""
    op, out = eqn.invars[0], eqn.outvars[0]
    kind = _CUMULATIVE[eqn.primitive.name]
    shape = tuple(op.aval.shape)
    axis, reverse = int(eqn.params["axis"]), bool(eqn.params["reverse"])
    st = _strides(shape)
    def at_(r: str) -> str:   # (the element at position r of the thread's row)
        return _offset([f"{r} * {st[d]}" if d == axis else f"q{d} * {st[d]}"
                        for d in range(len(shape)) if shape[d] != 1 or d == axis])
    at = at_("r")
    n = math.prod(shape)
    body.work += n * shape[axis]
    if kind is None:   # (logsumexp: no identity that leaves -0.0 as it is; start from the end)
        first = shape[axis] - 1 if reverse else 0
        acc_t, init = value_ctype(op.aval.dtype), body.read(op, at_(str(first)))
        fold = f"plax_logaddexp(acc, {body.read(op, at)})"
        walk = (f"for (int r = {first - 1}; r >= q{axis}; --r)" if reverse
                else f"for (int r = 1; r <= q{axis}; ++r)")
        stored = store_expr("acc", out.aval.dtype)
    else:
        red = _fold(kind, op.aval.dtype, eqn.primitive.name)
        acc_t, init = ctype(red.acc), red.init
        fold = red.combine("acc", codegen._to_acc(body.read(op, at), red))
        walk = (f"for (int r = {shape[axis] - 1}; r >= q{axis}; --r)" if reverse
                else f"for (int r = 0; r <= q{axis}; ++r)")
        if reverse and red.folds_in_order:   # (complex max/min: each suffix from its start)
            walk = f"for (int r = q{axis}; r < {shape[axis]}; ++r)"
        stored = store_expr("acc", out.aval.dtype, red.acc)
    body.phase(n, _index(shape) + [f"{acc_t} acc = {init};", f"{walk} acc = {fold};",
                                   f"{body.where[id(out)]}[i] = {stored};"])


def _parts(body: _Body, eqn) -> None:
    """split (along ``axis``, ``sizes``) and unstack (each index of ``axis``, dropped): a
    phase per result, each reading its part of the operand."""
    op = eqn.invars[0]
    oshape = tuple(op.aval.shape)
    st = _strides(oshape)
    axis = int(eqn.params["axis"])
    unstack = eqn.primitive.name == "unstack"
    start = 0
    for k, out in enumerate(eqn.outvars):
        if unstack:   # (result axis d is the operand's d, or d + 1 past the dropped axis)
            terms = [f"q{d - (d > axis)} * {st[d]}" if d != axis else f"{k} * {st[d]}"
                     for d in range(len(oshape)) if oshape[d] != 1]
        else:
            terms = [f"(q{d} + {start}) * {st[d]}" if d == axis and start else f"q{d} * {st[d]}"
                     for d in range(len(oshape)) if oshape[d] != 1]
            start += int(out.aval.shape[axis])
        _store_phase(body, eqn, body.read(op, _offset(terms)), result=k)


#: the most elements along a ``sort``'s axis the kernel sorts: a bitonic network over the next
#: power of two ``w`` takes ``log2(w) (log2(w) + 1) / 2`` phases a step, each behind a barrier
#: (55 at 1024); a longer axis keeps the host loop (the library sort)
MAX_SORT = 1024

#: the order ``sort`` compares keys in (the reference's: NaN after every number whatever its
#: sign, ``-0.0`` tied with ``0.0``, complex values by real part then imaginary part, each
#: NaN-last), as -1, 0 or 1 (``a`` before, tied with, after ``b``)
SORT_SOURCE = r"""#ifndef PLAX_SORT_CMP
#define PLAX_SORT_CMP
template <typename T> __device__ __forceinline__ int plax_sort_cmp(T a, T b) {
  bool tie;
  if (plax_nan_last_less(a, b, &tie)) return -1;
  return tie ? 0 : 1;
}
template <typename T>
__device__ __forceinline__ int plax_sort_cmp(plax_complex<T> a, plax_complex<T> b) {
  return plax_csort_less(a, b) ? -1 : plax_csort_less(b, a) ? 1 : 0;
}
#endif
"""


def _sort(body: _Body, eqn) -> None:
    """sort (``num_keys`` keys, any further operands carried along) along ``dimension``: a
    bitonic network over each row's positions, padded to a power of two ``w`` (a padding
    position after every element), sorting the *positions* (``int``, in two buffers of
    ``rows * w`` read and written alternately), a phase per stage: element ``i`` of a stage
    takes the earlier or the later of its own position and its partner's (``p ^ j``), compared
    by the keys in order (:data:`SORT_SOURCE`), then by position -- a strict total order, so the
    network gives the one stable order (``is_stable`` or not: a stable result is a valid
    unstable one, and the reference's). A last phase reads every operand at its sorted
    position. Up to :data:`MAX_SORT` elements along the axis."""
    p = eqn.params
    dim, num_keys = int(p["dimension"]), int(p["num_keys"])
    ops = eqn.invars
    shape = tuple(ops[0].aval.shape)
    n = shape[dim]
    if n > MAX_SORT:
        raise Unsupported(f"sort of {n} elements along its axis (the kernel sorts at most "
                          f"{MAX_SORT})")
    size = math.prod(shape)
    if size == 0:
        return
    inner = math.prod(shape[dim + 1:])
    log_w = (n - 1).bit_length()
    rows, w = size // n, 1 << log_w
    row_base = f"(r / {inner}) * {n * inner}LL + r % {inner}" if inner > 1 else f"r * {n}LL"
    k0 = body.fresh()
    # (no buffer where no stage writes one -- a row of one element --, one for a single stage:
    # a buffer nothing reads would be an NVRTC warning)
    perm = [body.buffer(f"{k0}_{half}", np.int32, rows * w)
            for half in "ab"[:min(2, log_w * (log_w + 1) // 2)]]

    # (the stages' comparison of positions a and b by the keys in order, the same in every
    # stage: c is -1 where position b comes before a)
    order = [f"const long long base = {row_base};", "int c = 0;"]
    for key in ops[:num_keys]:
        x, y = (body.read(key, f"base + {pos} * {inner}LL") for pos in ("b", "a"))
        order.append(f"{'if (c == 0) ' if len(order) > 2 else ''}c = plax_sort_cmp({x}, {y});")
    src, stages = None, 0
    size_k = 2
    while size_k <= w:
        j = size_k // 2
        while j:
            dst = perm[stages % 2]
            a, b = (f"{src}[i]", f"{src}[r * {w} + q]") if src else ("p", "q")
            body.phase(rows * w, [
                f"const int r = i / {w}, p = i % {w}, q = p ^ {j};",
                f"const int a = {a}, b = {b};",
                "bool before;   // (b before a: a padding position is after everything)",
                f"if (b >= {n}) before = false; else if (a >= {n}) before = true; else {{",
                *["  " + line for line in order],
                "  before = c != 0 ? c < 0 : b < a;", "}",
                f"{dst}[i] = ((p & {size_k}) == 0) == (p < q) ? (before ? b : a) "
                f": (before ? a : b);"])
            src, stages = dst, stages + 1
            j //= 2
        size_k *= 2
    body.work += rows * w * stages * num_keys + size * len(ops)
    # (one element a row: no stage, the operands as they are)
    st_lines = [f"const int p = (i / {inner}) % {n};",
                f"const long long r = (i / {n * inner}LL) * {inner} + i % {inner};",
                f"const long long at = i + ((long long){src}[r * {w} + p] - p) * {inner};"] if src else []
    at = "at" if src else "i"
    body.phase(size, st_lines + [f"{body.where[id(out)]}[i] = "
                                 f"{store_expr(body.read(v, at), out.aval.dtype)};"
                                 for v, out in zip(ops, eqn.outvars)])


def _branches_selected(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with each ``cond`` (branches without constants) replaced by every branch's
    equations and a ``select_n`` of their results by the cond's index: a step runs all the
    branches and keeps one (what ``vmap`` of a ``cond`` does; the body holds no effects, and a
    branch not taken computes values nobody reads), so the kernel takes a ``cond`` whose
    branches it takes, at the cost of their summed work. The index is clamped into range
    first, as the host loop clamps it (a ``clamp`` equation). Each branch becomes a ``jit``
    call of its body, spliced by :func:`plax.lowering.calls.spliced_calls` (with the calls it
    holds); a ``cond`` inside a branch is selected in turn. Returns ``jaxpr`` itself where it
    holds no such ``cond``."""
    def selectable(e) -> bool:
        return e.primitive is lax.cond_p and bool(e.params.get("branches")) and \
            not any(b.consts for b in e.params["branches"])
    if not any(selectable(e) for e in jaxpr.eqns):
        return jaxpr
    eqns: list = []
    for e in jaxpr.eqns:   # (the cond's results are the select_n's: nothing after it renamed)
        if not selectable(e):
            eqns.append(e)
            continue
        branches = e.params["branches"]
        index, *operands = e.invars
        if len(branches) > 1:
            bound = [Literal(np.int32(b), index.aval) for b in (0, len(branches) - 1)]
            clamped = Var(index.aval)
            eqns.append(JaxprEqn(lax.clamp_p, [bound[0], index, bound[1]], [clamped], {}))
            index = clamped
        results = []
        for k, branch in enumerate(branches):
            outs = [Var(v.aval) for v in branch.jaxpr.outvars]
            eqns.append(JaxprEqn(jit_p, list(operands), outs,
                                 {"jaxpr": branch, "name": f"branch{k}"}))
            results.append(outs)
        for k, out in enumerate(e.outvars):
            eqns.append(JaxprEqn(lax.select_n_p, [index, *(r[k] for r in results)], [out], {}))
    called = Jaxpr(jaxpr.constvars, jaxpr.invars, list(jaxpr.outvars), eqns)
    return _branches_selected(spliced_calls(called))   # (a cond inside a branch: selected next)


def _reshaped_literal(body: _Body, eqn) -> None:
    """reshape/squeeze/expand_dims of a scalar literal (``x.at[i].add(1.0)``'s update): the
    literal in every element. (Of a value they are aliases; a reshape with ``dimensions``,
    which transposes first, is declined.)"""
    if not isinstance(eqn.invars[0], Literal):
        raise Unsupported(f"{eqn.primitive.name} with dimensions in the scan body")
    _store_phase(body, eqn, body.read(eqn.invars[0], "0"))


#: the handlers of the primitives taken by name (the rest: by fusion kind, above)
_HANDLERS = {"pad": _pad, "concatenate": _joined, "stack": _joined, "gather": _gather,
             "argmax": _arg_reduction, "argmin": _arg_reduction,
             **{name: _reshaped_literal for name in _ALIASES},
             **{name: _scatter for name in _SCATTERS}, **{name: _cumulative for name in _CUMULATIVE}}


#: the handlers of the primitives of several results (each result its own slot)
_SEVERAL = {"split": _parts, "unstack": _parts, "sort": _sort}


def plan_scan(params: dict) -> ScanKernel:
    """The persistent kernel of a ``scan`` equation's parameters.

    Args:
      params: the ``scan`` equation's parameters (``jaxpr``, ``length``, ``reverse``,
        ``num_consts``, ``num_carry``).

    Returns:
      A :class:`ScanKernel`.

    Raises:
      Unsupported: a body the kernel does not express (the message says what).

    Example::

      plan = plan_scan(eqn.params)   # plan.source: one kernel for all the steps
    """
    closed = params["jaxpr"]
    jaxpr = spliced_calls(closed.jaxpr)  # jnp.where, remainder...: their bodies in place
    jaxpr = _branches_selected(jaxpr)      # a cond: every branch, then a select_n
    length, reverse = int(params["length"]), bool(params["reverse"])
    nc, ncarry = int(params["num_consts"]), int(params["num_carry"])
    invars = list(jaxpr.invars)
    consts, carry, xs = invars[:nc], invars[nc:nc + ncarry], invars[nc + ncarry:]
    outs = list(jaxpr.outvars)
    carry_out, ys = outs[:ncarry], outs[ncarry:]
    body = _Body()
    params_c: list[str] = []
    inputs: list = []   # (kind, var) of each array argument, in order
    for j, v in enumerate(list(jaxpr.constvars) + consts):
        t = ctype(_check_dtype(v))
        params_c.append(f"const {t}* __restrict__ k{j}")
        body.where[id(v)] = f"k{j}"
        body.consts[id(v)] = j
        inputs.append(v)
    for j, v in enumerate(carry):
        t = ctype(_check_dtype(v))
        params_c.append(f"const {t}* __restrict__ init{j}")
        inputs.append(v)
        body.where[id(v)] = body.slot(v, f"cb{j}", copies=2)
        if math.prod(v.aval.shape):
            body.where[id(v)] = f"c{j}"
    for j, v in enumerate(xs):
        t = ctype(_check_dtype(v))
        params_c.append(f"const {t}* __restrict__ xs{j}")
        body.where[id(v)] = f"x{j}"
        inputs.append(v)
    out_params = [f"{ctype(_check_dtype(v))}* __restrict__ cout{j}" for j, v in enumerate(carry_out)]
    out_params += [f"{ctype(_check_dtype(v))}* __restrict__ ys{j}" for j, v in enumerate(ys)]

    eqns = list(jaxpr.eqns)
    k = 0
    while k < len(eqns):
        eqn = eqns[k]
        prim = eqn.primitive
        if prim.name in _SEVERAL:   # (several results, each its own slot)
            for j, v in enumerate(eqn.outvars):
                body.where[id(v)] = body.slot(v, f"v{k}_{j}")
            _SEVERAL[prim.name](body, eqn)
            k += 1
            continue
        if len(eqn.outvars) != 1:
            raise Unsupported(f"{prim.name} (several results) in the scan body")
        out = eqn.outvars[0]
        if prim.name in _ALIASES and not (prim.name == "reshape" and eqn.params.get("dimensions")) \
                and not isinstance(eqn.invars[0], Literal):
            _check_dtype(out)
            body.where[id(out)] = body.where[id(eqn.invars[0])]  # same elements, same order
            k += 1
            continue
        body.where[id(out)] = body.slot(out, f"v{k}")
        kind = fusion_kind(prim, index=True)
        if kind in (ELEMENTWISE, INDEX):
            group = [eqn]
            shape = tuple(out.aval.shape)
            made = {id(out)}
            while k + len(group) < len(eqns):
                nxt = eqns[k + len(group)]
                if fusion_kind(nxt.primitive, index=True) not in (ELEMENTWISE, INDEX) or \
                        len(nxt.outvars) != 1 or tuple(nxt.outvars[0].aval.shape) != shape or \
                        any(id(v) in made and tuple(v.aval.shape) != shape for v in nxt.invars):
                    break
                body.where[id(nxt.outvars[0])] = body.slot(nxt.outvars[0], f"v{k + len(group)}")
                made.add(id(nxt.outvars[0]))
                group.append(nxt)
            _elementwise_group(body, group, k)
            k += len(group)
            continue
        if kind == REDUCTION:
            _reduction(body, eqn)
        elif kind == BROADCAST or prim.name in ("transpose", "rev", "slice", "dynamic_slice"):
            _structural(body, eqn)
        elif prim is lax.dynamic_update_slice_p:
            _dynamic_update(body, eqn)
        elif prim is lax.dot_general_p:
            _dot(body, eqn)
        elif prim.name in _HANDLERS:
            _HANDLERS[prim.name](body, eqn)
        else:
            raise Unsupported(f"{prim.name} in the scan body")
        k += 1
    if body.work > MAX_STEP_WORK:
        raise Unsupported(f"{body.work} multiply-adds a step (the kernel takes at most {MAX_STEP_WORK})")

    # the step's results: ys[t] and the next carry buffer, in one phase (the carry is
    # double-buffered: nothing this step reads is overwritten)
    def stored(v) -> str:  # element i as stored: bits copied, a literal converted
        if isinstance(v, Literal):
            return store_expr(body.read(v, "i"), v.aval.dtype)
        return f"{body.where[id(v)]}[{'i' if v.aval.shape else '0'}]"

    copy: list[str] = []
    for j, v in enumerate(ys):
        size = math.prod(v.aval.shape)
        if size:
            copy.append(f"if (i < {size}) ys{j}[t * {size}LL + i] = {stored(v)};")
    for j, v in enumerate(carry_out):  # (a carry passed through unchanged is copied too)
        size = math.prod(v.aval.shape)
        if size:
            copy.append(f"if (i < {size}) cn{j}[i] = {stored(v)};")
    widest = max([math.prod(v.aval.shape) for v in outs] + [1])
    if copy:
        body.phase(widest, copy)
    body.barrier()   # the end of the step: the next one reads the carry at any element

    staging = _place_staged(body)
    work_bytes = body.offset
    scratch = 0 if work_bytes <= SHARED_BYTES else work_bytes
    if scratch > SCRATCH_BYTES:
        raise Unsupported(f"a working set of {work_bytes} bytes (the kernel takes at most "
                          f"{SCRATCH_BYTES})")
    block = min(MAX_BLOCK, max(32, (body.widest + 31) // 32 * 32))
    sizes = [math.prod(v.aval.shape) for v in carry]   # (an empty carry: never read)
    step_ptrs = [f"    const {ctype(v.aval.dtype)}* const c{j} = cb{j} + (s & 1) * {sizes[j]};"
                 for j, v in enumerate(carry) if math.prod(v.aval.shape)]
    step_ptrs += [f"    {ctype(v.aval.dtype)}* const cn{j} = cb{j} + ((s + 1) & 1) * {sizes[j]};"
                  for j, v in enumerate(carry) if math.prod(v.aval.shape)]
    step_ptrs += [f"    const {ctype(v.aval.dtype)}* const x{j} = xs{j} + t * {math.prod(v.aval.shape)}LL;"
                  for j, v in enumerate(xs)]
    # (a pointer no phase uses -- an x the body ignores, a carry it only overwrites -- would
    # be an NVRTC warning)
    used = set(re.findall(r"\b\w+\b", "\n".join(body.lines)))
    step_ptrs = [p for p in step_ptrs if re.search(r"\b(\w+) = ", p).group(1) in used]
    all_params = params_c + out_params + (["unsigned char* __restrict__ scratch"] if scratch else [])
    src = ["", "struct alignas(16) plax_scan_word { unsigned long long lo, hi; };",
           "#if defined(PLAX_HOST) || defined(PLAX_SIM)",
           "static inline void plax_prefetch_l2(const void*) {}",
           "#else",
           "__device__ __forceinline__ void plax_prefetch_l2(const void* p) {",
           "  asm volatile(\"prefetch.global.L2 [%0];\" :: \"l\"(p));",
           "}",
           "#endif",
           f"// scan: {length} steps{' (reverse)' if reverse else ''} of "
               f"{' '.join(e.primitive.name for e in eqns)}",
           f"extern \"C\" __global__ void plax_scan({', '.join(all_params)}) {{"]
    if scratch:
        src.append("  unsigned char* const plax_work = scratch;")
    else:
        # (16-byte words: every value type, complex128 included, is aligned in them)
        src += [f"  __shared__ plax_scan_word plax_smem[{max((work_bytes + 15) // 16, 1)}];",
                "  unsigned char* const plax_work = (unsigned char*)plax_smem;"]
    src += ["  " + d for d in body.decls]
    for j, v in enumerate(carry):
        if math.prod(v.aval.shape):   # (an empty carry: nothing to copy)
            src.append(f"  for (int i = threadIdx.x; i < {sizes[j]}; i += blockDim.x) cb{j}[i] = init{j}[i];")
    src += staging   # (the constant operands of the contractions, into shared memory once)
    # the rows of xs PREFETCH_STEPS steps ahead are asked into L2 at the start of each step
    # (one prefetch a 128-byte line): the step that reads them waits for L2, not for HBM
    prefetch = []
    for j, v in enumerate(xs):
        row = math.prod(v.aval.shape) * np.dtype(v.aval.dtype).itemsize
        prefetch.append(f"if (ahead < {length}LL) for (long long b = threadIdx.x * 128LL; b < {row}LL; "
                        f"b += blockDim.x * 128LL) plax_prefetch_l2((const unsigned char*)xs{j} + "
                        f"{f'({length - 1}LL - ahead)' if reverse else 'ahead'} * {row}LL + b);")
    ahead = [f"    const long long ahead = s + {PREFETCH_STEPS};"] if prefetch else []
    src += ["  __syncthreads();"]
    if prefetch:
        src += [f"  for (long long s = -{PREFETCH_STEPS}; s < 0; ++s) {{", *ahead,
                *["    " + p for p in prefetch], "  }"]
    src += [f"  for (long long s = 0; s < {length}LL; ++s) {{",
            f"    const long long t = {f'{length - 1}LL - s' if reverse else 's'};",
            "    (void)t;", *ahead, *["    " + p for p in prefetch],
            *step_ptrs, *body.lines, "  }"]
    for j, v in enumerate(carry):
        if math.prod(v.aval.shape):
            src.append(f"  for (int i = threadIdx.x; i < {sizes[j]}; i += blockDim.x) "
                       f"cout{j}[i] = cb{j}[({length}LL & 1) * {sizes[j]} + i];")
    src.append("}")
    text = "\n".join(src)
    helpers = special_source.helpers_for(text)
    helpers += codegen.arg_helpers(body.helpers)   # (argmax/argmin's pair types)
    if "plax_sort_cmp(" in text:
        helpers += SORT_SOURCE
    out_shapes = [tuple(v.aval.shape) for v in carry_out] + [(length,) + tuple(v.aval.shape) for v in ys]
    out_dtypes = [np.dtype(v.aval.dtype) for v in outs]
    return ScanKernel(source=codegen.PREAMBLE + helpers + text, entry=("plax_scan",), block=block,
                      n_consts=len(jaxpr.constvars), out_shapes=out_shapes, out_dtypes=out_dtypes,
                      scratch_bytes=scratch, primitives=["scan"] + [e.primitive.name for e in eqns],
                      shape=(length,), phases=body.phases, barriers=body.barriers, in_dtypes=[np.dtype(v.aval.dtype) for v in inputs],
                      body_consts=list(closed.consts))


__all__ = ["MAX_ELEMENTS", "MAX_SORT", "MAX_STEP_WORK", "SCRATCH_BYTES", "SHARED_BYTES",
           "SORT_SOURCE", "ScanKernel", "plan_scan"]
