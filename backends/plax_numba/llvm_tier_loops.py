"""The first tier of a native loop: a ``scan``/``while`` program of
:mod:`plax_numba.wholegen` written as one LLVM function, built with llvmlite alone in this
process (:func:`plax_numba.llvm_tier.build`) while the worker compiles numba's kernel.

A whole-program kernel (a ``scan`` holding its body's clusters, a ``fori_loop``, a
``while_loop``) is one numba function: without this tier its first fast call waits for the
worker's whole compilation (seconds on a loaded 2-core host). :func:`plan` writes the same
program as IR text from its jaxpr, in the units :mod:`plax_numba.wholegen` lowers it to:

* fusion clusters: the loop functions of :func:`plax_numba.llvm_tier.loop_function` (the
  same operations as numba's cluster kernels), called on flat buffers;
* ``scan``: a loop over the steps (``reverse`` honoured; ``unroll`` changes no value, so the
  IR runs one step per iteration), ``xs[i]`` read in place, each ``ys[i]`` row written in
  place by the equation making it, each array carry in two fixed buffers used in turn (the
  step reads one, its new value is written straight into the other, the two swap by
  pointer: no per-step copy), scalar carries in registers; ``while`` likewise;
* rank-0 equations between clusters as single instructions (``llvm_tier``'s forms);
* ``reshape``/``squeeze``/``expand_dims``/``copy`` as the same buffer, static ``slice`` and
  ``transpose`` as copies (as wholegen makes them);
* reductions as ``llvm_tier`` writes them (float64 accumulators for sums and products, filled
  with the initial value before the call and rounded after it, as numba's kernel does);
* ``dot_general`` where numba's kernel sums each output in contraction order from zero (the
  inlined matrix-vector loop, :data:`plax_numba.wholegen.MATVEC_MAX`, or the small-product
  loops below :data:`plax_numba.wholegen.BLAS_MIN`): the same sums, in the same order. A
  product numba's kernel hands to BLAS is declined (BLAS's order is not numba's loop's).

Every buffer the program needs is a fixed slot of one scratch array the adapter allocates
per call; outputs are written into arrays the adapter allocates (numba's kernel allocates
its own). The entry point is called as numba's whole-program kernel is (constants, inputs,
``unit``) and returns the outputs.

Anything else (``cond``, BLAS-sized products, ``sin`` and other functions ``llvm_tier`` does
not write, float64 ``tanh``/``exp``, integer division, float16/bfloat16, ...) makes :func:`plan` return None, the reason counted in
:data:`plax_numba.llvm_tier.declined`; the program then waits for numba's kernel as before.
"""
from __future__ import annotations

import hashlib
import math
from types import SimpleNamespace

import numpy as np

from plax import lax
from plax.core.jaxpr import Literal
from plax.lowering import BROADCAST, ELEMENTWISE, REDUCTION, Cluster, call_body, \
    explicit_broadcasts, find_clusters, fusion_kind, order_for_fusion
from plax.lowering.literals import literal_value

from plax_numba import codegen, llvm_tier
from plax_numba.llvm_tier import _ALIGN, _MEM, _REG, FirstTier, Unsupported, _Array, _Body, \
    _float_text

#: programs whose first tier was planned, by their first loop primitive (``"program"``: a
#: whole-program kernel without one); tests read it
planned: dict = {}

_ALIAS = (lax.reshape_p, lax.squeeze_p, lax.expand_dims_p)
_MEMCPY = "declare void @llvm.memcpy.p0.p0.i64(ptr, ptr, i64, i1)"
_SLOT_ALIGN = 64  # bytes: each scratch slot starts on a cache line
_UNROLL = 8  # contracted indices per pass of a product's loop (numba's matvec_t: 8)


class _Value:
    """A value of the program: an array (``ptr``, a register holding its first element's
    address) or a scalar (``reg``, a register or constant of :data:`llvm_tier._REG`'s type).
    Identity matters: a product's matrix is read in place only where numba's kernel holds
    the very same value hoisted before its loop (:meth:`_Program.product`)."""

    def __init__(self, aval, ptr: str | None = None, reg: str | None = None):
        self.aval, self.ptr, self.reg = aval, ptr, reg
        self.dtype = np.dtype(aval.dtype)
        self.size = math.prod(aval.shape)


def _check_dtype(dtype) -> None:
    if np.dtype(dtype) not in _REG:
        raise Unsupported(f"a value of dtype {np.dtype(dtype)}")


class _Program:
    """Writes one function, ``@<name>_loop(inputs..., outputs..., scratch)``."""

    def __init__(self, outvars):
        self.body = _Body()
        self.allocas: list[str] = []
        self.functions: dict[str, list] = {}   # cluster loop function name -> its lines
        self.intrinsics: set[str] = set()
        self.scratch = 0                         # bytes of scratch slots so far
        self.labels = 0
        self.hoisted: dict = {}                  # id(loop-invariant matrix) -> its transpose
        # a program output's buffer: written in place by the first value bound to it
        self.out_of = {}
        for k, v in enumerate(outvars):
            if not isinstance(v, Literal):
                self.out_of.setdefault(id(v), k)
        self.claimed: set = set()
        self.in_loop = 0                         # loops around what is being written
        # a loop body's new array carry: written straight into the carry's next buffer
        # (ping-pong, :meth:`_carries`), id(var) -> that buffer's register
        self.targets: dict = {}

    # ------------------------------------------------------------ basics
    def emit(self, rhs: str) -> str:
        return self.body.emit(rhs)

    def line(self, text: str) -> None:
        self.body.lines.append(f"  {text}")

    def label(self, prefix: str) -> str:
        self.labels += 1
        return f"{prefix}{self.labels}"

    def block(self, label: str) -> None:
        self.body.lines.append(f"{label}:")

    def slot(self, nbytes: int) -> str:
        """A register pointing at a fresh scratch slot of ``nbytes``."""
        at = self.scratch
        self.scratch += -(-max(int(nbytes), 1) // _SLOT_ALIGN) * _SLOT_ALIGN
        return self.emit(f"getelementptr inbounds i8, ptr %scratch, i64 {at}")

    def buffer_for(self, var) -> str:
        """Where the array ``var`` is written: its program output's buffer if it is one not
        yet written, else a scratch slot."""
        target = self.targets.pop(id(var), None)
        if target is not None:
            return target
        k = self.out_of.get(id(var))
        if k is not None and k not in self.claimed and not self.in_loop:
            self.claimed.add(k)
            return f"%out{k}"
        return self.slot(math.prod(var.aval.shape) * np.dtype(var.aval.dtype).itemsize)

    def alloca(self, ty: str) -> str:
        name = f"%a{len(self.allocas)}"
        self.allocas.append(f"  {name} = alloca {ty}")
        return name

    def memcpy(self, dst: str, src: str, nbytes: int) -> None:
        if nbytes:
            self.intrinsics.add(_MEMCPY)
            self.line(f"call void @llvm.memcpy.p0.p0.i64(ptr {dst}, ptr {src}, i64 {nbytes}, "
                      "i1 false)")

    def element(self, ptr: str, offset: str, dtype) -> str:
        return self.emit(f"getelementptr inbounds {_MEM[dtype]}, ptr {ptr}, i64 {offset}")

    def load(self, ptr: str, offset: str, dtype) -> str:
        value = self.emit(f"load {_MEM[dtype]}, ptr {self.element(ptr, offset, dtype)}, "
                          f"align {_ALIGN[dtype]}")
        return self.emit(f"icmp ne i8 {value}, 0") if dtype == llvm_tier._BOOL else value

    def store(self, reg: str, ptr: str, offset: str, dtype) -> None:
        if dtype == llvm_tier._BOOL:
            reg = self.emit(f"zext i1 {reg} to i8")
        self.line(f"store {_MEM[dtype]} {reg}, ptr {self.element(ptr, offset, dtype)}, "
                  f"align {_ALIGN[dtype]}")

    def as_array(self, value: _Value, var=None) -> _Value:
        """``value`` in memory (a scalar stored into a one-element slot)."""
        if value.ptr is not None:
            return value
        ptr = self.slot(value.dtype.itemsize)
        self.store(value.reg, ptr, "0", value.dtype)
        return _Value(value.aval, ptr=ptr)

    def as_scalar(self, value: _Value) -> str:
        if value.reg is not None:
            return value.reg
        return self.load(value.ptr, "0", value.dtype)

    def literal(self, v) -> _Value:
        x = np.asarray(literal_value(v))
        dtype = np.dtype(v.aval.dtype)
        _check_dtype(dtype)
        if x.ndim:
            raise Unsupported("an array literal")
        return _Value(v.aval, reg=_constant(x[()], dtype))

    def read(self, env: dict, v) -> _Value:
        return self.literal(v) if isinstance(v, Literal) else env[id(v)]

    # ------------------------------------------------------------ jaxprs
    def jaxpr(self, jaxpr, ins: list, consts=(), targets=()) -> list:
        """Emits ``jaxpr`` (inputs bound to the values ``ins``), in wholegen's units;
        returns its outputs' values. ``targets`` (a loop body's): per output, the buffer
        the equation making it writes it into, or None (an output that is an input, a
        literal or another output's value stays where it is)."""
        from plax_numba.wholegen import _spliced_calls, outer_products_as_multiplies
        for v in list(jaxpr.invars) + list(jaxpr.constvars):
            _check_dtype(v.aval.dtype)
        env = {id(v): x for v, x in zip(jaxpr.constvars, consts)}
        env.update((id(v), x) for v, x in zip(jaxpr.invars, ins))
        jaxpr = explicit_broadcasts(outer_products_as_multiplies(_spliced_calls(jaxpr)))
        registered = []
        for v, target in zip(jaxpr.outvars, targets):
            if target is not None and not isinstance(v, Literal) and id(v) not in env \
                    and v.aval.shape and id(v) not in self.targets:
                self.targets[id(v)] = target
                registered.append(id(v))
        # (the clusters of numba's whole-program kernel: one with an arg-reduction or a
        # cumulative op, which the first tier does not write, is declined)
        for unit in find_clusters(order_for_fusion(jaxpr, codegen.FUSES), codegen.FUSES):
            if isinstance(unit, Cluster):
                self.cluster(unit, env)
            else:
                self.equation(unit, env)
        for key in registered:  # (those not written by an equation of this body)
            self.targets.pop(key, None)
        return [self.read(env, v) for v in jaxpr.outvars]

    def cluster(self, cluster: Cluster, env: dict) -> None:
        if not cluster.outputs:
            return
        if any(codegen.reference_only(e) for e in cluster.eqns):
            raise Unsupported("a reference-only equation in a loop")
        # (numba's kernel of a loop body, codegen.plan_cluster(..., into=True), takes rank-0
        # operands as scalars and the others as arrays: so does the loop function)
        layout = SimpleNamespace(index_base=False, out_params=False, arg_types=[
            ("array", np.dtype(a.aval.dtype), len(a.aval.shape)) if a.aval.shape
            else ("scalar", np.dtype(a.aval.dtype)) for a in cluster.inputs])
        loop = llvm_tier.loop_function(cluster, layout)
        self.functions.setdefault(loop.name, loop.define)
        self.intrinsics |= loop.intrinsics
        args = []
        for atom, how in zip(cluster.inputs, loop.entry_args):
            value = self.read(env, atom)
            if isinstance(how, _Array):
                args.append(f"ptr {self.as_array(value).ptr}")
            else:
                args.append(f"{_REG[how[1]]} {self.as_scalar(value)}")
        outs = []
        for v, array, how in zip(cluster.outputs, loop.made, loop.results):
            if how[0] == "array":
                ptr = self.buffer_for(v) if v.aval.shape else self.slot(array.dtype.itemsize)
            else:  # a reduction's accumulators, filled with its initial value
                ptr = self.slot(array.size * array.dtype.itemsize)
                with _Loop(self, array.size) as q:
                    self.store(_float_text(array.init, array.dtype), ptr, q, array.dtype)
            args.append(f"ptr {ptr}")
            outs.append((v, ptr, array, how))
        self.line(f"call void @{loop.name}_loop({', '.join(args)})")
        for v, ptr, array, how in outs:
            dtype = np.dtype(v.aval.dtype)
            if how[0] != "array" and array.dtype != dtype:  # cast as numba's kernel does
                ptr = self._cast(ptr, array, v)
            env[id(v)] = (_Value(v.aval, ptr=ptr) if v.aval.shape else
                          _Value(v.aval, reg=self.load(ptr, "0", dtype)))

    def _cast(self, ptr: str, array, var) -> str:
        """The float64 accumulators of a sum or product at ``ptr`` rounded to ``var``'s
        type, in a buffer of their own."""
        dtype = np.dtype(var.aval.dtype)
        out = self.buffer_for(var) if var.aval.shape else self.slot(dtype.itemsize)
        with _Loop(self, array.size) as q:
            value = self.load(ptr, q, array.dtype)
            self.store(self.emit(f"fptrunc {_REG[array.dtype]} {value} to {_REG[dtype]}"),
                       out, q, dtype)
        return out

    def equation(self, eqn, env: dict) -> None:
        prim = eqn.primitive
        for v in list(eqn.invars) + list(eqn.outvars):
            _check_dtype(v.aval.dtype)
        body = call_body(eqn)
        if body is not None:
            consts = [self.constant(c, v) for c, v in zip(body.consts, body.jaxpr.constvars)]
            outs = self.jaxpr(body.jaxpr, [self.read(env, v) for v in eqn.invars], consts)
            env.update((id(v), x) for v, x in zip(eqn.outvars, outs))
            return
        kind = fusion_kind(prim)
        if kind is not None and len(eqn.outvars) == 1 and not prim.multiple_results:
            self.lone(eqn, kind, env)
            return
        handler = {lax.dot_general_p: self.product, lax.scan_p: self.scan,
                   lax.while_p: self.while_loop, lax.slice_p: self.slice,
                   lax.transpose_p: self.transpose}.get(prim)
        if prim in _ALIAS or prim.name in ("copy", "copy_p"):
            handler = self.alias
        if handler is None:
            raise Unsupported(prim.name)
        outs = handler(eqn, [self.read(env, v) for v in eqn.invars])
        env.update((id(v), x) for v, x in zip(eqn.outvars, outs))

    def constant(self, value, var) -> _Value:
        value = np.asarray(value._host_value() if hasattr(value, "_host_value") else value)
        if value.ndim:
            raise Unsupported("an array constant in a body")
        return _Value(var.aval, reg=_constant(value[()], np.dtype(var.aval.dtype)))

    def lone(self, eqn, kind, env) -> None:
        """A fusible equation outside a cluster, as wholegen writes it: one instruction on
        scalars, else a cluster of its own."""
        if codegen.reference_only(eqn):
            raise Unsupported(f"{eqn.primitive.name} (NumPy's kernel)")
        out = eqn.outvars[0]
        shape = tuple((eqn.invars[0] if kind == REDUCTION else out).aval.shape)
        if kind == ELEMENTWISE and (
                any(tuple(v.aval.shape) not in (shape, ()) for v in eqn.invars)
                or (shape and not any(tuple(v.aval.shape) == shape for v in eqn.invars))):
            raise Unsupported(f"{eqn.primitive.name} of a scalar to shape {shape}")
        if not shape and kind != BROADCAST:
            args = [self.as_scalar(self.read(env, v)) for v in eqn.invars]
            env[id(out)] = _Value(out.aval, reg=llvm_tier._value(self.body, eqn, args))
            return
        inputs = list({id(v): v for v in eqn.invars}.values())  # each operand once, in order
        self.cluster(Cluster([eqn], shape, inputs, list(eqn.outvars)), env)

    def alias(self, eqn, ins):
        out, x = eqn.outvars[0], ins[0]
        if not out.aval.shape:
            return [_Value(out.aval, reg=self.as_scalar(x))]
        return [_Value(out.aval, ptr=self.as_array(x).ptr)]

    def slice(self, eqn, ins):
        """A static slice, copied (as wholegen does) by a loop nest over its shape."""
        out, x = eqn.outvars[0], self.as_array(ins[0])
        p = eqn.params
        starts = [int(s) for s in p["start_indices"]]
        steps = [int(s) for s in (p.get("strides") or [1] * len(starts))]
        shape = tuple(out.aval.shape)
        dst = self.buffer_for(out) if shape else self.slot(x.dtype.itemsize)
        strides = llvm_tier._strides(x.aval.shape)
        loops = [_Loop(self, n) for n in shape]
        idx = [loop.__enter__() for loop in loops]
        src = self._index([(str(sum(a * s for a, s in zip(starts, strides))), 1)]
                          + [(i, step * s) for i, step, s in zip(idx, steps, strides)])
        self.store(self.load(x.ptr, src, x.dtype), dst,
                   self._index(list(zip(idx, llvm_tier._strides(shape)))), x.dtype)
        for loop in reversed(loops):
            loop.__exit__(None, None, None)
        if not shape:
            return [_Value(out.aval, reg=self.load(dst, "0", x.dtype))]
        return [_Value(out.aval, ptr=dst)]

    def transpose(self, eqn, ins):
        """A transpose, copied (as wholegen does) by a loop nest over the result."""
        out, x = eqn.outvars[0], self.as_array(ins[0])
        perm = [int(d) for d in eqn.params["permutation"]]
        shape = tuple(out.aval.shape)
        dst = self.buffer_for(out)
        strides = llvm_tier._strides(x.aval.shape)
        loops = [_Loop(self, n) for n in shape]
        idx = [loop.__enter__() for loop in loops]
        src = self._index([(i, strides[d]) for i, d in zip(idx, perm)])
        self.store(self.load(x.ptr, src, x.dtype), dst,
                   self._index(list(zip(idx, llvm_tier._strides(shape)))), x.dtype)
        for loop in reversed(loops):
            loop.__exit__(None, None, None)
        return [_Value(out.aval, ptr=dst)]

    # ------------------------------------------------------------ dot_general
    def product(self, eqn, ins):
        """A product numba's kernel sums in contraction order from zero (its inlined
        matrix-vector loop, or its loops for products below BLAS's size): the same sums,
        ``out = out + a * b`` (no contraction) over the contracted index in order, the
        outputs in the inner loops (independent chains, vectorised as numba's axpy-form
        loop is; a loop-invariant matrix contracted on its last axis is read through its
        transpose, made once before the loop, as numba's kernel does)."""
        from plax_numba.wholegen import BLAS_MIN, MATVEC_MAX
        (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
        lhs, rhs = eqn.invars
        out = eqn.outvars[0]
        dtype = np.dtype(out.aval.dtype)
        ls, rs = tuple(lhs.aval.shape), tuple(rhs.aval.shape)
        if (dtype.kind != "f" or np.dtype(lhs.aval.dtype) != dtype
                or np.dtype(rhs.aval.dtype) != dtype or lb or rb or len(lc) != 1
                or len(ls) > 2 or len(rs) > 2):
            raise Unsupported("dot_general other than a float matrix/vector product")
        lf = [d for d in range(len(ls)) if d not in lc]
        rf = [d for d in range(len(rs)) if d not in rc]
        m, n, k = math.prod(ls[d] for d in lf), math.prod(rs[d] for d in rf), ls[lc[0]]
        if not (m * n * k < BLAS_MIN
                or 0 < m * n * k <= MATVEC_MAX and self._matvec_in_place(eqn, ins)):
            raise Unsupported("dot_general on BLAS")
        (a, ai, aj), (b, bc, bj) = (self._operand(x, shape, contract[0])
                                    for x, shape, contract in ((ins[0], ls, lc), (ins[1], rs, rc)))
        o = self.buffer_for(out) if out.aval.shape else self.slot(dtype.itemsize)
        t = _REG[dtype]
        with _Loop(self, m * n) as q:
            self.store(_float_text(0.0, dtype), o, q, dtype)
        # as numba's matvec_t: _UNROLL contracted indices per pass over the outputs, each
        # output's partial sum in a register across them (the same adds, in order)
        blocks, rest = divmod(k, _UNROLL)
        for count, unroll, first in ((blocks, _UNROLL, 0), (rest, 1, blocks * _UNROLL)):
            if not count:
                continue
            with _Loop(self, count) as jb, _Loop(self, m) as i:
                base = self.emit(f"add nuw nsw i64 {first}, "
                                 f"{self.emit(f'mul nuw nsw i64 {jb}, {unroll}')}")
                js = [base] + [self.emit(f"add nuw nsw i64 {base}, {u}")
                               for u in range(1, unroll)]
                xs = [self.load(a, self._index([(i, ai), (j, aj)]), dtype) for j in js]
                with _Loop(self, n) as c:
                    at = self._index([(i, n), (c, 1)])
                    acc = self.load(o, at, dtype)
                    for j, x in zip(js, xs):
                        y = self.load(b, self._index([(j, bj), (c, bc)]), dtype)
                        acc = self.emit(f"fadd {t} {acc}, {self.emit(f'fmul {t} {x}, {y}')}")
                    self.store(acc, o, at, dtype)
        if not out.aval.shape:
            return [_Value(out.aval, reg=self.load(o, "0", dtype))]
        return [_Value(out.aval, ptr=o)]

    def _operand(self, x: _Value, shape: tuple, contract: int) -> tuple:
        """``(pointer, free axis stride, contracted axis stride)`` of a product's operand
        (its hoisted transpose where it has one and is contracted on its last axis)."""
        x = self.as_array(x)
        strides = llvm_tier._strides(shape)
        free = [s for d, s in enumerate(strides) if d != contract]
        if len(shape) == 2 and contract == 1 and self.hoisted.get(id(x)):
            return self.hoisted[id(x)], 1, shape[0]
        return x.ptr, (free[0] if free else 0), strides[contract]

    def _index(self, terms) -> str:
        return llvm_tier._offset(self.body, [(r, s) for r, s in terms if s])

    def _matvec_in_place(self, eqn, ins) -> bool:
        """Whether wholegen's ``_matvec`` takes this product (its conditions)."""
        (lc, rc), _ = eqn.params["dimension_numbers"]
        ls, rs = tuple(eqn.invars[0].aval.shape), tuple(eqn.invars[1].aval.shape)
        if len(ls) == 2 and len(rs) in (1, 2) and math.prod(rs) == rs[rc[0]]:
            mat, cdim = ins[0], lc[0]
        elif len(rs) == 2 and len(ls) in (1, 2) and math.prod(ls) == ls[lc[0]]:
            mat, cdim = ins[1], rc[0]
        else:
            return False
        return cdim == 0 or id(mat) in self.hoisted

    def _hoist(self, consts: list) -> dict:
        """As wholegen's ``_hoist``: the loop-invariant float matrices a matrix-vector
        product may read in place, each transposed once here (before the loop) into a
        scratch slot; returns the previous table."""
        from plax_numba.wholegen import MATVEC_MAX
        saved = dict(self.hoisted)
        for x in consts:
            if (len(x.aval.shape) == 2 and x.dtype.kind == "f" and 0 < x.size <= MATVEC_MAX
                    and id(x) not in self.hoisted):
                rows, cols = x.aval.shape
                t = self.slot(x.size * x.dtype.itemsize)
                with _Loop(self, cols) as c, _Loop(self, rows) as r:
                    self.store(self.load(x.ptr, self._index([(r, cols), (c, 1)]), x.dtype),
                               t, self._index([(c, rows), (r, 1)]), x.dtype)
                self.hoisted[id(x)] = t
        return saved

    # ------------------------------------------------------------ loops
    def _carries(self, init: list) -> list:
        """Per carry: ``(kind, state, aval)``. An array carry has two fixed scratch slots
        (ping-pong): each step reads its value from the current one and the body writes its
        new value straight into the other (:meth:`jaxpr`'s ``targets``), then the two swap
        by pointer, so no step copies a carry it computes; two fixed slots, so LLVM sees them
        apart from every other buffer (and each other) and vectorises without run-time
        overlap checks. ``state`` is ``(current, next, nbytes)``, the first two allocas
        holding the slots' addresses (registers after LLVM's mem2reg). A scalar carry is an
        alloca (a register)."""
        carries = []
        for x in init:
            t = _REG[x.dtype]
            if x.aval.shape:
                nbytes = x.size * x.dtype.itemsize
                first, second = self.slot(nbytes), self.slot(nbytes)
                self.memcpy(first, x.ptr, nbytes)
                cur, nxt = self.alloca("ptr"), self.alloca("ptr")
                self.line(f"store ptr {first}, ptr {cur}")
                self.line(f"store ptr {second}, ptr {nxt}")
                carries.append(("array", (cur, nxt, nbytes), x.aval))
            else:
                cell = self.alloca(t)
                self.line(f"store {t} {self.as_scalar(x)}, ptr {cell}")
                carries.append(("scalar", cell, x.aval))
        return carries

    def _carry_values(self, carries) -> list:
        values = []
        for kind, state, aval in carries:
            if kind == "array":
                values.append(_Value(aval, ptr=self.emit(f"load ptr, ptr {state[0]}")))
            else:
                values.append(_Value(aval, reg=self.emit(f"load {_REG[np.dtype(aval.dtype)]}, "
                                                         f"ptr {state}")))
        return values

    def _next_buffers(self, carries) -> list:
        """Per carry, the buffer its new value is written into this step (None: a scalar)."""
        return [self.emit(f"load ptr, ptr {state[1]}") if kind == "array" else None
                for kind, state, _ in carries]

    def _update(self, carries, new: list, nexts: list) -> None:
        """The step's new carries: an array's new value not already in its next buffer (an
        input, another carry, a value two carries share, ...) is copied there (every
        current buffer is read-only during the step, every next buffer apart from them),
        then each array carry's two buffers swap; scalars are stored."""
        scalars = [self.as_scalar(x) if kind == "scalar" else None
                   for (kind, _, _), x in zip(carries, new)]
        for (kind, state, _), x, nxt in zip(carries, new, nexts):
            if kind == "array":
                src = self.as_array(x).ptr
                if src != nxt:
                    self.memcpy(nxt, src, state[2])
        for (kind, state, aval), reg, nxt in zip(carries, scalars, nexts):
            if kind == "array":
                cur, nxt_cell, _ = state
                old = self.emit(f"load ptr, ptr {cur}")
                self.line(f"store ptr {nxt}, ptr {cur}")
                self.line(f"store ptr {old}, ptr {nxt_cell}")
            else:
                self.line(f"store {_REG[np.dtype(aval.dtype)]} {reg}, ptr {state}")

    def scan(self, eqn, ins):
        p = eqn.params
        body, length, reverse = p["jaxpr"], int(p["length"]), p["reverse"]
        nc, ncarry = p["num_consts"], p["num_carry"]
        consts = [self.constant(c, v) for c, v in zip(body.consts, body.jaxpr.constvars)]
        carries = self._carries(ins[nc:nc + ncarry])
        ys = []
        for v, a in zip(eqn.outvars[ncarry:], body.out_avals[ncarry:]):
            _check_dtype(a.dtype)
            ys.append((self.buffer_for(v), a))
        saved = self._hoist(ins[:nc])
        self.in_loop += 1
        with _Loop(self, length) as it:
            i = self.emit(f"sub nuw nsw i64 {length - 1}, {it}") if reverse else it
            xs = []
            for x in ins[nc + ncarry:]:
                row_aval = _row(x.aval)
                row = math.prod(row_aval.shape)
                at = self.emit(f"mul nuw nsw i64 {i}, {row}")
                xs.append(_Value(row_aval, ptr=self.element(x.ptr, at, x.dtype))
                          if row_aval.shape else _Value(row_aval, reg=self.load(x.ptr, at,
                                                                                x.dtype)))
            nexts = self._next_buffers(carries)
            # each array row of ys written in place by the equation making it, where it can be
            rows = []
            for buf, a in ys:
                size = math.prod(a.shape)
                rows.append(self.element(buf, self.emit(f"mul nuw nsw i64 {i}, {size}"),
                                         np.dtype(a.dtype)) if a.shape else None)
            res = self.jaxpr(body.jaxpr, ins[:nc] + self._carry_values(carries) + xs, consts,
                             targets=nexts + rows)
            for (buf, a), r, row in zip(ys, res[ncarry:], rows):
                dtype = np.dtype(a.dtype)
                if not a.shape:
                    self.store(self.as_scalar(r), buf, i, dtype)
                elif self.as_array(r).ptr != row:
                    self.memcpy(row, self.as_array(r).ptr, math.prod(a.shape) * dtype.itemsize)
            self._update(carries, res[:ncarry], nexts)
        self.in_loop -= 1
        self.hoisted = saved
        outs = self._carry_values(carries)
        return outs + [_Value(v.aval, ptr=buf) for v, (buf, _) in
                       zip(eqn.outvars[ncarry:], ys)]

    def while_loop(self, eqn, ins):
        p = eqn.params
        nc, nb = p["cond_nconsts"], p["body_nconsts"]
        cj, bj = p["cond_jaxpr"], p["body_jaxpr"]
        cconsts = [self.constant(c, v) for c, v in zip(cj.consts, cj.jaxpr.constvars)]
        bconsts = [self.constant(c, v) for c, v in zip(bj.consts, bj.jaxpr.constvars)]
        carries = self._carries(ins[nc + nb:])
        saved = self._hoist(ins[:nc + nb])
        self.in_loop += 1
        head, run, done = self.label("wh"), self.label("wb"), self.label("we")
        self.line(f"br label %{head}")
        self.block(head)
        [pred] = self.jaxpr(cj.jaxpr, ins[:nc] + self._carry_values(carries), cconsts)
        self.line(f"br i1 {self.as_scalar(pred)}, label %{run}, label %{done}")
        self.block(run)
        nexts = self._next_buffers(carries)
        new = self.jaxpr(bj.jaxpr, ins[nc:nc + nb] + self._carry_values(carries), bconsts,
                         targets=nexts)
        self._update(carries, new, nexts)
        self.line(f"br label %{head}")
        self.block(done)
        self.in_loop -= 1
        self.hoisted = saved
        return self._carry_values(carries)


class _Loop:
    """``with _Loop(program, n) as i:`` a counted loop ``i = 0 .. n-1`` (the counter in an
    alloca, which LLVM's passes turn into a register)."""

    def __init__(self, program: _Program, n: int):
        self.p, self.n = program, int(n)

    def __enter__(self) -> str:
        p = self.p
        self.cell = p.alloca("i64")
        self.head, self.run, self.done = p.label("lh"), p.label("lb"), p.label("le")
        p.line(f"store i64 0, ptr {self.cell}")
        p.line(f"br label %{self.head}")
        p.block(self.head)
        i = p.emit(f"load i64, ptr {self.cell}")
        p.line(f"br i1 {p.emit(f'icmp slt i64 {i}, {self.n}')}, label %{self.run}, "
               f"label %{self.done}")
        p.block(self.run)
        self.i = i
        return i

    def __exit__(self, *exc) -> None:
        if exc[0] is not None:
            return
        p = self.p
        p.line(f"store i64 {p.emit(f'add nuw nsw i64 {self.i}, 1')}, ptr {self.cell}")
        p.line(f"br label %{self.head}")
        p.block(self.done)


def _row(aval):
    from plax.core.shaped_array import ShapedArray
    return ShapedArray(tuple(aval.shape[1:]), aval.dtype)


def _constant(value, dtype) -> str:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return _float_text(value, dtype)
    if dtype == llvm_tier._BOOL:
        return "true" if bool(value) else "false"
    return str(int(value))


def plan(jaxpr, whole_plan) -> FirstTier | None:
    """The first-tier kernel of the whole-program kernel ``whole_plan`` of ``jaxpr``
    (:func:`plax_numba.wholegen.plan_program`); None where this tier does not take it
    (the reason counted in :data:`plax_numba.llvm_tier.declined`). Pure Python.

    Args:
      jaxpr: the program (constvar-free): a loop equation's (``scan``, ``while``), or a
        small program's whole-program kernel.
      whole_plan: its :class:`plax_numba.wholegen.WholePlan`.

    Returns:
      A :class:`plax_numba.llvm_tier.FirstTier` whose built function takes numba's
      kernel's arguments (constants, inputs, ``unit``) and returns the outputs, or None.

    Example::

      first = plan(jaxpr, wholegen.plan_program(jaxpr))
      if first is not None:
          step = llvm_tier.build(first, plan.primitives, path)
    """
    from plax_numba import tiered
    try:
        # (milliseconds of Python, handed over at short intervals while a compile window is
        # open, as the emitter's _emit_kernel does for a cluster: it also runs outside the
        # emitter, for a whole-program kernel)
        with tiered.yielding_while_compiling():
            return _plan(jaxpr, whole_plan)
    except (Unsupported, codegen.Unsupported) as err:
        reason = f"native loop: {err}"
        llvm_tier.declined[reason] = llvm_tier.declined.get(reason, 0) + 1
        return None


def _plan(jaxpr, whole_plan) -> FirstTier:
    loops = [e.primitive.name for e in jaxpr.eqns if e.primitive in (lax.scan_p, lax.while_p)]
    if jaxpr.constvars:
        raise Unsupported("a program with constants")
    program = _Program(jaxpr.outvars)
    ins, entry_args, params = [], [], []
    for j, v in enumerate(jaxpr.invars):
        dtype = np.dtype(v.aval.dtype)
        _check_dtype(dtype)
        if v.aval.shape:
            ins.append(_Value(v.aval, ptr=f"%in{j}"))
            entry_args.append(_Array("in", dtype, math.prod(v.aval.shape)))
            params.append(f"ptr noalias nocapture readonly %in{j}")
        else:
            if dtype == np.uint64:
                raise Unsupported("a uint64 scalar operand")  # (the entry reads a Py_ssize_t)
            ins.append(_Value(v.aval, reg=f"%in{j}"))
            entry_args.append(("scalar", dtype))
            params.append(f"{_REG[dtype]} %in{j}")
    outs = program.jaxpr(jaxpr, ins)
    results = []
    for k, (v, value) in enumerate(zip(jaxpr.outvars, outs)):
        dtype = np.dtype(v.aval.dtype)
        _check_dtype(dtype)
        size = math.prod(v.aval.shape)  # (1 for a scalar)
        entry_args.append(_Array("out", dtype, size))
        params.append(f"ptr noalias nocapture %out{k}")
        results.append((dtype, tuple(v.aval.shape)))
        if not v.aval.shape:
            program.store(program.as_scalar(value), f"%out{k}", "0", dtype)
        elif value.ptr != f"%out{k}":
            program.memcpy(f"%out{k}", program.as_array(value).ptr, size * dtype.itemsize)
    scratch = program.scratch
    entry_args.append(_Array("out", np.uint8, max(scratch, 1)))
    params.append("ptr noalias nocapture %scratch")
    text = "\n".join(program.body.lines)
    name = "plax_first_loop_" + hashlib.sha256(
        (repr(params) + repr([str(a.aval) for a in ins]) + text
         + "".join(program.functions)).encode()).hexdigest()[:16]
    lines = [f"define internal void @{name}_loop({', '.join(params)}) nounwind {{", "entry:"]
    lines += program.allocas + program.body.lines + ["  ret void", "}"]
    functions = [line for define in program.functions.values() for line in define]
    entry = llvm_tier._entry(name, entry_args, None)
    intrinsics = sorted(program.intrinsics | program.body.intrinsics)
    first = FirstTier("\n".join(intrinsics + functions + lines + [entry]) + "\n", name)
    numba_consts = len(whole_plan.arg_types) - 1 - len(jaxpr.invars)
    first.loop_adapter = (numba_consts, results, max(scratch, 1))
    kind = loops[0] if loops else "program"
    planned[kind] = planned.get(kind, 0) + 1
    return first


def adapter(function, numba_consts: int, results: list, scratch: int):
    """``function`` (the entry point: inputs flat, then one buffer per output, then the
    scratch array) called as numba's whole-program kernel is: ``kernel(*constants,
    *inputs, unit)`` returning the outputs (the constants, which numba's kernel takes as
    arguments, are literals of the IR)."""
    def kernel(*args):
        ins = [a.reshape(-1) if isinstance(a, np.ndarray) else a
               for a in args[numba_consts:-1]]
        outs = [np.empty(math.prod(shape), dtype) for dtype, shape in results]
        # the scratch slots start on cache lines: the array's start too (NumPy aligns to 16
        # bytes; a vector load across two lines would make the kernel's speed depend on where
        # each call's scratch happened to land)
        space = np.empty(scratch + _SLOT_ALIGN, np.uint8)
        start = -space.ctypes.data % _SLOT_ALIGN
        function(*ins, *outs, space[start:start + scratch])
        return [o.reshape(shape) if shape else o[0] for o, (_, shape) in zip(outs, results)]
    return kernel
