"""The first tier of a hot kernel: a fusion cluster compiled to LLVM IR with llvmlite
alone, in this process, in tens of milliseconds; numba's kernel, compiled in the worker
(:mod:`plax_numba.compile_worker`), replaces it when it is loaded.

A cold compilation in the worker costs the worker's start, numba's import and registries
(0.6-0.8 CPU s) and numba's own front end and lowering before LLVM sees the kernel: seconds
to the fast path on a 2-core host. For the kernels :func:`plax_numba.codegen.plan_cluster`
plans (flat loops writing into preallocated outputs, ``kernel(*inputs, *outputs, n)``;
loop nests over the cluster's shape reading operands broadcast along any axes, with
reductions over some or all axes, ``kernel(*inputs, *extents)`` returning the results;
not ``iota`` or 16-bit floats; integer operations as :mod:`plax_numba.llvm_tier_ints`
writes them) this module writes the same loops as LLVM IR text
straight from the cluster's equations (:func:`plan`; the shapes are static), with a
``METH_FASTCALL`` entry point over flat buffers, called with numba's kernel's arguments
(through :func:`_adapter` where numba's kernel allocates its results), and links it with
llvmlite (:func:`build`, through :func:`plax_numba.native_loader.link_ir`): IR generation
is Python (about a millisecond), LLVM's passes and code generation run in C with the GIL
released.

The loop is serial (numba's ``parallel=True`` kernel follows) and computes what numba's
kernel computes, operation for operation and in its loop order: IEEE arithmetic in the
operands' type, no contraction of ``a * b + c`` and no reassociated reduction (no fast-math
flags), sums and products accumulated in float64, NaN-propagating ``max``/``min`` as
:func:`plax_numba.scalar.fmax`, and the float32 ``exp``/``tanh``/``logistic`` forms of
:mod:`plax_numba.scalar` with the same constants (:mod:`plax_numba.f32_coefficients`) and
fused multiply-adds: the first tier and numba's kernel give the same bits.

:func:`loop_function` hands the loop function alone to :mod:`plax_numba.llvm_tier_loops`,
which calls it from a native loop's first tier.

A cluster using anything else is not taken (:func:`plan` returns None and counts why in
:data:`declined`); its step tiers as before (numba's serial form first). A first-tier build
that fails warns once (``PlaxFallbackWarning``) and the step keeps running the reference
path until numba's kernel arrives. ``PLAX_NUMBA_FIRST_TIER=0`` turns the tier off
(``only``: see :func:`only`).
"""
from __future__ import annotations

import hashlib
import itertools
import math
import os
import struct
import threading
import time
import warnings
from typing import Callable

import numpy as np

from plax import lax
from plax.config import env_flag
from plax.core.jaxpr import Literal
from plax.lax.fused_multiply_add import fma_p
from plax.lowering import PlaxFallbackWarning, integer_exponent

from plax_numba import f32_coefficients as C
from plax_numba import llvm_tier_ints as ints

#: kernels built (``"built"``), builds that failed (``"failed"``); tests read it
stats = {"built": 0, "failed": 0}
#: why a cluster was not taken: reason -> count
declined: dict = {}
#: ``time.perf_counter()`` when each first-tier kernel was put in use (benchmarks)
built_at: list = []
#: per build: ``{"wall", "cpu"}`` seconds (``cpu``: the building thread's, most of it in
#: llvmlite's C calls, which release the GIL)
build_times: list = []
_lock = threading.Lock()


class Unsupported(Exception):
    """The cluster uses something this tier does not compile (the message says what)."""


def enabled() -> bool:
    """Whether hot elementwise kernels get a first tier (``PLAX_NUMBA_FIRST_TIER``, default
    on)."""
    return only() or env_flag("PLAX_NUMBA_FIRST_TIER", True)  # ("only": on, alone)


def only() -> bool:
    """Whether the kernels this tier takes run on it alone, built when their program is,
    numba's kernel never compiled (``PLAX_NUMBA_FIRST_TIER=only``): a testing mode, e.g.
    the conformance kit run on the first tier."""
    return os.environ.get("PLAX_NUMBA_FIRST_TIER", "").strip().lower() == "only"


class FirstTier:
    """A cluster's first-tier kernel: ``ir`` (the module's text), ``entry`` (the entry
    point's symbol), and ``function`` once :func:`build` has linked it."""

    def __init__(self, ir: str, entry: str):
        self.ir, self.entry, self.function = ir, entry, None
        #: for a kernel numba allocates the results of: what :func:`_adapter` needs to
        #: call the entry point as numba's kernel is called (None: called as it is)
        self.adapter = None
        #: for a native loop's kernel (:mod:`plax_numba.llvm_tier_loops`): what its adapter
        #: needs to call the entry point as numba's whole-program kernel is called
        self.loop_adapter = None

    def __repr__(self) -> str:
        return f"FirstTier({self.entry})"


# ---------------------------------------------------------------- IR text

_F32, _F64, _BOOL = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.bool_)
_REG = {_F32: "float", _F64: "double", _BOOL: "i1"}     # a value in a register
_MEM = {_F32: "float", _F64: "double", _BOOL: "i8"}     # an element in memory
_ALIGN = {_F32: 4, _F64: 8, _BOOL: 1}
# integers: llvm_tier_ints writes their operations
_REG.update(ints.INT_TYPES)
_MEM.update(ints.INT_TYPES)
_ALIGN.update({d: d.itemsize for d in ints.INT_TYPES})
_ARITH = {lax.add_p: "fadd", lax.add_any_p: "fadd", lax.sub_p: "fsub", lax.mul_p: "fmul",
          lax.div_p: "fdiv"}
# numba's float comparisons: ordered, except != (true for NaN)
_COMPARE = {lax.eq_p: "oeq", lax.ne_p: "une", lax.lt_p: "olt", lax.le_p: "ole",
            lax.gt_p: "ogt", lax.ge_p: "oge"}


def _float_text(value, dtype) -> str:
    """An exact LLVM constant of a float type (hex of the value as a double)."""
    return "0x%016X" % struct.unpack("<Q", struct.pack("<d", float(dtype.type(value))))[0]


class _Body:
    """The loop body's instructions, with fresh SSA names."""

    def __init__(self):
        self.lines: list[str] = []
        self.count = 0
        self.intrinsics: set[str] = set()

    def emit(self, rhs: str) -> str:
        self.count += 1
        name = f"%v{self.count}"
        self.lines.append(f"  {name} = {rhs}")
        return name

    def call(self, intrinsic: str, ret: str, *args: str) -> str:
        self.intrinsics.add(f"declare {ret} @{intrinsic}"
                            f"({', '.join(a.split(' ')[0] for a in args)})")
        return self.emit(f"call {ret} @{intrinsic}({', '.join(args)})")

    # float32 helpers, each the same operations as plax_numba.scalar's form
    def fma(self, a: str, b: str, c: str) -> str:
        return self.call("llvm.fma.f32", "float", f"float {a}", f"float {b}", f"float {c}")

    def clamp(self, x: str, lo: str, hi: str) -> str:
        # min(max(x, lo), hi) for a number; a NaN x is replaced by the caller
        up = self.emit(f"select i1 {self.emit(f'fcmp ogt float {x}, {lo}')}, float {x}, "
                       f"float {lo}")
        return self.emit(f"select i1 {self.emit(f'fcmp olt float {up}, {hi}')}, float {up}, "
                         f"float {hi}")

    def exp_f32(self, x: str) -> str:
        k = lambda v: _float_text(v, _F32)  # noqa: E731
        xc = self.clamp(x, k(C.LO), k(C.HI))
        t = self.fma(xc, k(C.LOG2E), k(C.ROUNDER))
        n = self.emit(f"fsub float {t}, {k(C.ROUNDER)}")
        ni = self.emit(f"sub i32 {self.emit(f'bitcast float {t} to i32')}, "
                       f"{int(C.ROUNDER_BITS)}")
        neg_n = self.emit(f"fneg float {n}")
        r = self.fma(neg_n, k(C.LN2_HI), xc)
        r = self.fma(neg_n, k(C.LN2_LO), r)
        q = self.fma(self.fma(self.fma(self.fma(k(C.Q4), r, k(C.Q3)), r, k(C.Q2)), r,
                              k(C.Q1)), r, k(C.Q0))
        rr = self.emit(f"fmul float {r}, {r}")
        qrr = self.emit(f"fmul float {q}, {rr}")
        p = self.emit(f"fadd float {self.emit(f'fadd float {qrr}, {r}')}, {k(C.ONE)}")
        hi = self.emit(f"select i1 {self.emit(f'icmp sgt i32 {ni}, -125')}, i32 {ni}, i32 -125")
        e1 = self.emit(f"select i1 {self.emit(f'icmp slt i32 {hi}, 127')}, i32 {hi}, i32 127")
        pbits = self.emit(f"bitcast float {p} to i32")
        shifted = self.emit(f"shl i32 {e1}, 23")
        scaled = self.emit(f"bitcast i32 {self.emit(f'add i32 {pbits}, {shifted}')} to float")
        two = self.emit(f"add i32 {self.emit(f'sub i32 {ni}, {e1}')}, 127")
        factor = self.emit(f"bitcast i32 {self.emit(f'shl i32 {two}, 23')} to float")
        out = self.emit(f"fmul float {scaled}, {factor}")
        return self.emit(f"select i1 {self.emit(f'fcmp uno float {x}, {x}')}, float {x}, "
                         f"float {out}")

    def tanh_f32(self, x: str) -> str:
        k = lambda v: _float_text(v, _F32)  # noqa: E731
        xc = self.clamp(x, k(-C.TBIG), k(C.TBIG))
        z = self.emit(f"fmul float {xc}, {xc}")
        z2 = self.emit(f"fmul float {z}, {z}")
        n = self.fma(z2, self.fma(z2, k(C.N4), self.fma(z, k(C.N3), k(C.N2))),
                     self.fma(z, k(C.N1), k(C.ONE)))
        d = self.fma(z2, self.fma(z2, k(C.D4), self.fma(z, k(C.D3), k(C.D2))),
                     self.fma(z, k(C.D1), k(C.ONE)))
        r = self.emit(f"fdiv float {self.emit(f'fmul float {xc}, {n}')}, {d}")
        return self.emit(f"select i1 {self.emit(f'fcmp oeq float {x}, {x}')}, float {r}, "
                         f"float {x}")

    def logistic_f32(self, x: str) -> str:
        k = lambda v: _float_text(v, _F32)  # noqa: E731
        magnitude = self.call("llvm.fabs.f32", "float", f"float {x}")
        e = self.exp_f32(self.emit(f"fneg float {magnitude}"))
        d = self.emit(f"fadd float {k(C.ONE)}, {e}")
        num = self.emit(f"select i1 {self.emit(f'fcmp oge float {x}, 0.0')}, float {k(C.ONE)}, "
                        f"float {e}")
        r = self.emit(f"fdiv float {num}, {d}")
        return self.emit(f"select i1 {self.emit(f'fcmp uno float {x}, {x}')}, float {x}, "
                         f"float {r}")


def _extreme(emit: Callable[[str], str], kind: str, t: str, a: str, b: str) -> str:
    """XLA's ``max``/``min`` (``kind``) of float registers ``a``, ``b`` of LLVM type ``t``, as
    :func:`plax_numba.scalar.fmax`/``fmin``: NaN wins (``a``'s first), ``-0 < +0``; ``emit``
    writes one instruction and returns its register."""
    r = emit(f"select i1 {emit(f'fcmp {_ORDER[kind]} {t} {a}, {b}')}, {t} {a}, {t} {b}")
    # equal operands: the AND of their bits (max) is -0 only for two -0s, the OR (min) is -0
    # for either; equal nonzero operands have equal bits
    i = _INT_OF[t]
    merged = emit(f"{'and' if kind == 'max' else 'or'} {i} {emit(f'bitcast {t} {a} to {i}')}, "
                  f"{emit(f'bitcast {t} {b} to {i}')}")
    r = emit(f"select i1 {emit(f'fcmp oeq {t} {a}, {b}')}, {t} "
             f"{emit(f'bitcast {i} {merged} to {t}')}, {t} {r}")
    r = emit(f"select i1 {emit(f'fcmp uno {t} {b}, {b}')}, {t} {b}, {t} {r}")
    return emit(f"select i1 {emit(f'fcmp uno {t} {a}, {a}')}, {t} {a}, {t} {r}")


_ORDER = {"max": "ogt", "min": "olt"}
_INT_OF = {"float": "i32", "double": "i64"}


def _value(body: _Body, eqn, args: list[str]) -> str:
    """The register holding ``eqn``'s result, from its operands' registers ``args``."""
    prim = eqn.primitive
    din = [np.dtype(v.aval.dtype) for v in eqn.invars]
    dout = np.dtype(eqn.outvars[0].aval.dtype)
    for d in (*din, dout):
        if d not in _REG:
            raise Unsupported(f"{prim.name} on {d}")
    if ints.takes(eqn):
        return ints.value(body, eqn, args)
    t = _REG[dout]
    floats = all(d.kind == "f" for d in din)
    if prim in _ARITH and floats:
        return body.emit(f"{_ARITH[prim]} {t} {args[0]}, {args[1]}")
    if prim in _COMPARE and floats:
        return body.emit(f"fcmp {_COMPARE[prim]} {_REG[din[0]]} {args[0]}, {args[1]}")
    if prim is lax.neg_p and floats:
        return body.emit(f"fneg {t} {args[0]}")
    if prim in (lax.abs_p, lax.sqrt_p) and floats:
        name = "fabs" if prim is lax.abs_p else "sqrt"
        bits = 32 if dout == _F32 else 64
        return body.call(f"llvm.{name}.f{bits}", t, f"{t} {args[0]}")
    if prim is fma_p and floats:  # numba's kernel's fma_f32 / fma_f64: llvm.fma
        bits = 32 if dout == _F32 else 64
        return body.call(f"llvm.fma.f{bits}", t, *(f"{t} {a}" for a in args))
    if prim in (lax.max_p, lax.min_p) and floats:
        return _extreme(body.emit, "max" if prim is lax.max_p else "min", t, *args)
    if prim is lax.select_n_p and len(args) == 2:  # one case: it
        return args[1]
    if prim is lax.select_n_p and din[0] == _BOOL and len(args) == 3:
        return body.emit(f"select i1 {args[0]}, {t} {args[2]}, {t} {args[1]}")
    if prim is lax.exp_p and dout == _F32:
        return body.exp_f32(args[0])
    if prim is lax.tanh_p and dout == _F32:
        return body.tanh_f32(args[0])
    if prim is lax.logistic_p and dout == _F32:
        return body.logistic_f32(args[0])
    y = integer_exponent(eqn)  # integer_pow, square
    if y is not None and floats:
        if y == 0:
            return _float_text(1.0, dout)
        acc = power_products(body, args[0], abs(y), "fmul", t)
        return body.emit(f"fdiv {t} {_float_text(1.0, dout)}, {acc}") if y < 0 else acc
    if prim is lax.convert_element_type_p:
        src = din[0]
        if src == dout:
            return args[0]
        if src.kind == "f" and dout.kind == "f":
            op = "fpext" if dout.itemsize > src.itemsize else "fptrunc"
            return body.emit(f"{op} {_REG[src]} {args[0]} to {t}")
        if src == _BOOL and dout.kind == "f":
            return body.emit(f"uitofp i1 {args[0]} to {t}")
        if src.kind == "f" and dout == _BOOL:
            return body.emit(f"fcmp une {_REG[src]} {args[0]}, 0.0")
    raise Unsupported(f"{prim.name} on {', '.join(map(str, din))}")


def power_products(body, base: str, n: int, mul: str, t: str) -> str:
    """The register holding ``base ** n`` (``n >= 1``) by squaring and multiplying, in the
    order of ``plax_numba.codegen._integer_pow`` (so the same roundings as numba's kernel);
    ``mul`` is the multiply instruction (``fmul``, or ``mul`` for integers)."""
    acc = None
    while n:
        if n & 1:
            acc = base if acc is None else body.emit(f"{mul} {t} {acc}, {base}")
        n >>= 1
        if n:
            base = body.emit(f"{mul} {t} {base}, {base}")
    return acc


def plan(cluster, kernel_plan) -> FirstTier | None:
    """The first-tier kernel of ``cluster``, whose numba kernel is ``kernel_plan``
    (:func:`plax_numba.codegen.plan_cluster`); None if this tier does not take it (the
    reason counted in :data:`declined`). Pure Python, nothing compiled.

    Args:
      cluster: the fusion cluster.
      kernel_plan: its :class:`plax_numba.codegen.KernelPlan`.

    Returns:
      A :class:`FirstTier` taking the arguments ``kernel_plan.arg_types`` describes, or None.

    Example::

      first = plan(cluster, codegen.plan_cluster(cluster, preallocate=True))
      if first is not None:
          build(first, plan.primitives, path)
    """
    try:
        # (milliseconds of Python per cluster: its caller, the emitter's _emit_kernel, hands
        # the GIL over at short intervals while a compile window is open)
        return _plan(cluster, kernel_plan)
    except Unsupported as err:
        reason = str(err)
        declined[reason] = declined.get(reason, 0) + 1
        return None


_REDUCTIONS = {lax.reduce_sum_p: "sum", lax.reduce_prod_p: "prod", lax.reduce_max_p: "max",
               lax.reduce_min_p: "min"}


def _strides(shape) -> list[int]:
    """Row-major element strides of ``shape``."""
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= int(n)
    return out[::-1]


def _offset(body: _Body, terms: list) -> str:
    """The register of ``sum(index * stride)`` over ``terms`` (``(index register, stride)``;
    ``"0"`` for none)."""
    total = "0"
    for index, stride in terms:
        if stride == 0:
            continue
        term = index if stride == 1 else body.emit(f"mul nuw nsw i64 {index}, {stride}")
        total = term if total == "0" else body.emit(f"add nuw nsw i64 {total}, {term}")
    return total


class _Array:
    """An array the loop function takes: ``role`` ``in``/``out``/``acc``, its element dtype
    and its number of elements (checked by the entry point)."""

    def __init__(self, role: str, dtype, size: int):
        self.role, self.dtype, self.size = role, np.dtype(dtype), int(size)


def _plan(cluster, kernel_plan, function_only: bool = False):
    loop = _loop_function(cluster, kernel_plan)
    if function_only:
        return loop
    return _with_entry(loop, tuple(int(n) for n in cluster.shape), len(cluster.inputs),
                       tuple(kernel_plan.given))


def _loop_function(cluster, kernel_plan) -> "LoopFunction":
    if kernel_plan.index_base or any(e.primitive is lax.iota_p for e in cluster.eqns):
        raise Unsupported("iota")
    shape = tuple(int(n) for n in cluster.shape)
    rank, size = len(shape), math.prod(shape)
    arg_types = kernel_plan.arg_types
    n_in = len(cluster.inputs)
    out_params = bool(kernel_plan.out_params)
    if arg_types is None or len(arg_types) < n_in:
        raise Unsupported("an argument layout this tier does not know")
    idx = [f"%i{d}" for d in range(rank)]
    body = _Body()
    lin = _offset(body, list(zip(idx, _strides(shape)))) if rank else "0"
    params: list[str] = []      # the loop function's parameters: inputs, then `made`
    made: list = []             # (output index, _Array, parameter) of outputs, accumulators
    regs: dict = {}
    reads: dict = {}            # id(input atom) -> its pointer parameter
    entry_args: list = []       # per entry argument: an _Array, or ("scalar", dtype)
    for j, (atom, t) in enumerate(zip(cluster.inputs, arg_types)):
        if t[0] == "scalar":
            dtype = np.dtype(t[1])
            if dtype not in _REG or dtype == np.uint64:  # (the entry reads a Py_ssize_t)
                raise Unsupported(f"an operand of {dtype}")
            params.append(f"{_REG[dtype]} %s{j}")
            regs[id(atom)] = f"%s{j}"
            entry_args.append(("scalar", dtype))
            continue
        dtype = np.dtype(atom.aval.dtype)
        if t[0] != "array" or dtype not in _REG or np.dtype(t[1]) != dtype:
            raise Unsupported(f"an operand of {t}")
        entry_args.append(_Array("in", dtype, math.prod(atom.aval.shape)))
        params.append(f"ptr noalias nocapture readonly %p{j}")
        reads[id(atom)] = f"%p{j}"
        if tuple(atom.aval.shape) == shape:
            regs[id(atom)] = _load(body, f"%p{j}", lin, dtype)

    out_lines: list[str] = []   # stores and accumulations, after the body's values
    outputs = {id(v): k for k, v in enumerate(cluster.outputs)}
    results: list = [None] * len(cluster.outputs)  # how the adapter returns each output
    for eqn in cluster.eqns:
        prim = eqn.primitive
        if len(eqn.outvars) != 1:
            raise Unsupported(f"{prim.name} (several results)")
        out = eqn.outvars[0]
        if prim is lax.broadcast_in_dim_p:
            op = eqn.invars[0]
            if id(op) in regs and (not op.aval.shape or tuple(op.aval.shape) == shape):
                regs[id(out)] = regs[id(op)]
            elif id(op) in reads:
                dims = eqn.params["broadcast_dimensions"]
                terms = [(idx[d], stride) for j, (d, stride) in
                         enumerate(zip(dims, _strides(op.aval.shape)))
                         if not (op.aval.shape[j] == 1 and shape[d] != 1)]
                regs[id(out)] = _load(body, reads[id(op)], _offset(body, terms),
                                      np.dtype(op.aval.dtype))
            else:
                raise Unsupported("a broadcast of a value the loop does not hold")
        elif prim in _REDUCTIONS:
            k = outputs.get(id(out))
            if k is None:
                continue  # (numba's kernel computes it, the step never reads it)
            results[k] = _reduce(body, eqn, regs, idx, shape, k, made, out_lines)
            continue
        else:
            args = []
            for v in eqn.invars:
                if id(v) not in regs:
                    raise Unsupported("an inline literal" if isinstance(v, Literal)
                                      else f"operand {v} is not readable in the loop")
                args.append(regs[id(v)])
            regs[id(out)] = _value(body, eqn, args)
        k = outputs.get(id(out))
        if k is not None and results[k] is None:
            dtype = np.dtype(out.aval.dtype)
            if dtype not in _MEM:
                raise Unsupported(f"an output of {dtype}")
            p = f"%o{k}"
            made.append((k, _Array("out", dtype, size), f"ptr noalias nocapture writeonly {p}"))
            value = regs[id(out)]
            if dtype == _BOOL:
                value = body.emit(f"zext i1 {value} to i8")
            at = body.emit(f"getelementptr inbounds {_MEM[dtype]}, ptr {p}, i64 {lin}")
            out_lines.append(f"  store {_MEM[dtype]} {value}, ptr {at}, align {_ALIGN[dtype]}")
            results[k] = ("array",)
    for v, how in zip(cluster.outputs, results):
        if how is None:
            raise Unsupported(f"output {v} is not computed in the loop")
    if out_params and any(how[0] != "array" for how in results):
        raise Unsupported("a kernel writing into its outputs with a reduction")
    made.sort(key=lambda m: m[0])  # the outputs in the cluster's order (numba's kernel's)
    params += [param for _, _, param in made]
    entry_args += [a for _, a, _ in made]

    name = "plax_first_" + hashlib.sha256(
        (repr((shape, arg_types, out_params, [p for _, _, p in made]))
         + "\n".join(body.lines + out_lines)).encode()).hexdigest()[:16]
    lines = [f"define internal void @{name}_loop({', '.join(params)}) nounwind {{", "entry:"]
    # (metadata numbers are the module's: one pair per loop function, from its name, which
    # each module holds once)
    loop_id = 2 * int(name[-7:], 16)
    if size == 0:
        lines.append("  ret void")
    else:
        for d in range(rank):
            pred = "entry" if d == 0 else f"loop{d - 1}"
            back = f"loop{d}" if d == rank - 1 else f"end{d + 1}"
            lines += [f"  br label %loop{d}", f"loop{d}:",
                      f"  %i{d} = phi i64 [ 0, %{pred} ], [ %i{d}.next, %{back} ]"]
        lines += body.lines + out_lines
        for d in reversed(range(rank)):
            if d < rank - 1:
                lines.append(f"end{d + 1}:")
            done = f"end{d}" if d > 0 else "exit"
            # the innermost loop of a nest is not unrolled: fully unrolled (a short row), it
            # would leave LLVM to vectorise the outer loop, across rows, with gathers and
            # scatters; kept, it is vectorised along the row, in contiguous loads and stores
            keep = f", !llvm.loop !{loop_id}" if d == rank - 1 and rank > 1 else ""
            lines += [f"  %i{d}.next = add nuw nsw i64 %i{d}, 1",
                      f"  %c{d} = icmp eq i64 %i{d}.next, {shape[d]}",
                      f"  br i1 %c{d}, label %{done}, label %loop{d}{keep}"]
        if rank:
            lines.append("exit:")
        lines.append("  ret void")
    lines.append("}")
    if rank > 1 and size:
        lines += [f"!{loop_id} = distinct !{{!{loop_id}, !{loop_id + 1}}}",
                  f"!{loop_id + 1} = !{{!\"llvm.loop.unroll.disable\"}}"]
    return LoopFunction(name, lines, body.intrinsics, entry_args, [a for _, a, _ in made],
                        results, out_params)


class LoopFunction:
    """A cluster's loop as an LLVM function ``@<name>_loop`` (:func:`loop_function`):
    ``define`` (its lines), the ``intrinsics`` it declares, its parameters as
    ``entry_args`` (per input an :class:`_Array` or ``("scalar", dtype)``, then per output
    or accumulator an :class:`_Array`, ``made``, in the cluster's output order) and how each
    output comes out (``results``: ``("array",)`` or a reduction's ``("reduction", dtype,
    kept shape)``)."""

    def __init__(self, name, define, intrinsics, entry_args, made, results, out_params):
        self.name, self.define, self.intrinsics = name, define, set(intrinsics)
        self.entry_args, self.made, self.results = entry_args, made, results
        self.out_params = out_params


def loop_function(cluster, kernel_plan) -> LoopFunction:
    """The loop of ``cluster`` (whose numba kernel is ``kernel_plan``) as an LLVM function
    over flat buffers, for a caller written in IR (a native loop's first tier,
    :mod:`plax_numba.llvm_tier_loops`): the same operations as numba's kernel.

    Raises:
      Unsupported: what this tier does not compile.
    """
    return _plan(cluster, kernel_plan, function_only=True)


def _with_entry(loop: LoopFunction, shape: tuple, n_in: int, given: tuple = ()
                ) -> FirstTier:
    size = math.prod(shape)
    entry = _entry(loop.name, loop.entry_args, size if loop.out_params else None)
    first = FirstTier("\n".join(sorted(loop.intrinsics) + loop.define + [entry]) + "\n",
                      loop.name)
    if not loop.out_params:  # numba's kernel's calling convention, around the entry point
        first.adapter = (n_in, loop.made, loop.results, shape, given)
    return first


def _load(body: _Body, pointer: str, offset: str, dtype) -> str:
    """The register of element ``offset`` of the array at ``pointer``."""
    at = body.emit(f"getelementptr inbounds {_MEM[dtype]}, ptr {pointer}, i64 {offset}")
    value = body.emit(f"load {_MEM[dtype]}, ptr {at}, align {_ALIGN[dtype]}")
    return body.emit(f"icmp ne i8 {value}, 0") if dtype == _BOOL else value


def _reduce(body, eqn, regs, idx, shape, k: int, made: list, out_lines: list) -> tuple:
    """A reduction as numba's kernel does it (:func:`plax_numba.codegen.reduction`): sums
    and products accumulate in float64, max and min in the operand's type, one accumulator
    per kept position (an array the adapter fills with the initial value), in the loop's
    order; the adapter casts the accumulators to the result's type."""
    kind = _REDUCTIONS[eqn.primitive]
    operand = eqn.invars[0]
    dtype, odt = np.dtype(operand.aval.dtype), np.dtype(eqn.outvars[0].aval.dtype)
    if dtype.kind not in "fiu" or odt != dtype or id(operand) not in regs:
        raise Unsupported(f"{eqn.primitive.name} on {dtype}")
    axes = sorted(eqn.params["axes"])
    kept = [d for d in range(len(shape)) if d not in axes]
    kept_shape = tuple(shape[d] for d in kept)
    if dtype.kind in "iu":
        acc, init = ints.accumulator(kind, dtype)
    else:
        acc = _F64 if kind in ("sum", "prod") else dtype
        init = {"sum": 0.0, "prod": 1.0, "max": -np.inf, "min": np.inf}[kind]
    accumulators = _Array("acc", acc, math.prod(kept_shape))
    accumulators.init = init
    p = f"%o{k}"
    made.append((k, accumulators, f"ptr noalias nocapture {p}"))
    t = _REG[acc]
    value = regs[id(operand)]
    if acc != dtype:
        value = (ints.widen(body, value, dtype, acc) if dtype.kind in "iu"
                 else body.emit(f"fpext {_REG[dtype]} {value} to {t}"))
    at = body.emit(f"getelementptr inbounds {t}, ptr {p}, i64 "
                   f"{_offset(body, [(idx[d], s) for d, s in zip(kept, _strides(kept_shape))])}")
    # (after the body's values: the accumulation reads and writes memory in loop order)
    old = f"%acc{k}"
    out_lines.append(f"  {old} = load {t}, ptr {at}, align {_ALIGN[acc]}")
    if dtype.kind in "iu":
        out_lines += ints.update_lines(kind, old, value, acc)
        new = f"{old}.new"
    elif kind in ("sum", "prod"):
        new = f"{old}.new"
        out_lines.append(f"  {new} = {'fadd' if kind == 'sum' else 'fmul'} {t} {old}, {value}")
    else:  # plax_numba.scalar.fmax / fmin of (accumulator, value)
        names = itertools.count()

        def emit(rhs: str) -> str:
            name = f"{old}.m{next(names)}"
            out_lines.append(f"  {name} = {rhs}")
            return name
        new = _extreme(emit, kind, t, old, value)
    out_lines.append(f"  store {t} {new}, ptr {at}, align {_ALIGN[acc]}")
    return ("reduction", odt, kept_shape)


def _entry(name: str, entry_args: list, n: int | None) -> str:
    """The ``METH_FASTCALL`` entry point ``name``: checks its arguments (exact ndarrays of
    the planned dtype and number of elements, rank 1, C-contiguous and aligned, those it
    writes writeable; numbers for the scalars; with ``n`` given, a last argument equal to
    it), releases the GIL, runs the loop, returns None."""
    from plax_numba import native_emit as e
    described = [f"{a.dtype}[{a.size}]" if isinstance(a, _Array) else str(a[1])
                 for a in entry_args] + ([f"n={n}"] if n is not None else [])
    message = (f"plax_numba: a first-tier kernel was called with arguments other than those "
               f"it was compiled for: ({', '.join(described)}) (rank-1 arrays, "
               "C-contiguous and aligned; outputs writeable)").encode() + b"\0"
    text = "".join(f"\\{b:02X}" for b in message)
    count = len(entry_args) + (n is not None)
    lines = [f"@{name}_ndarray_type = global ptr null",
             f"@{name}_bad_args = private constant [{len(message)} x i8] c\"{text}\"",
             "@PyExc_TypeError = external global i8",  # numba's convention: the class itself
             "@_Py_NoneStruct = external global i8",
             "declare void @PyErr_SetString(ptr, ptr)", "declare ptr @PyErr_Occurred()",
             "declare double @PyFloat_AsDouble(ptr)", "declare i64 @PyNumber_AsSsize_t(ptr, ptr)",
             "declare i32 @PyObject_IsTrue(ptr)", "declare ptr @PyEval_SaveThread()",
             "declare void @PyEval_RestoreThread(ptr)", "declare void @Py_IncRef(ptr)",
             f"define ptr @{name}(ptr %self, ptr %args, i64 %nargs) {{", "entry:"]
    checks = [0]

    def check(cond: str) -> None:  # cond: a register, or an instruction computing one
        checks[0] += 1
        k = checks[0]
        if not cond.startswith("%"):
            lines.append(f"  %c{k} = {cond}")
            cond = f"%c{k}"
        lines.extend([f"  br i1 {cond}, label %ok{k}, label %bad", f"ok{k}:"])

    def failed_if(cond: str) -> None:  # cond: an instruction
        checks[0] += 1
        k = checks[0]
        lines.extend([f"  %c{k} = {cond}", f"  br i1 %c{k}, label %maybe{k}, label %ok{k}",
                      f"maybe{k}:", f"  %err{k} = call ptr @PyErr_Occurred()",
                      f"  %raised{k} = icmp ne ptr %err{k}, null",
                      f"  br i1 %raised{k}, label %fail, label %ok{k}", f"ok{k}:"])

    check(f"icmp eq i64 %nargs, {count}")
    lines.append(f"  %ndarray = load ptr, ptr @{name}_ndarray_type")
    call = []
    for j, a in enumerate(entry_args + ([("int",)] if n is not None else [])):
        lines += [f"  %arg{j}.p = getelementptr ptr, ptr %args, i64 {j}",
                  f"  %arg{j} = load ptr, ptr %arg{j}.p"]

        def field(offset: int, ty: str, tag: str) -> str:
            lines.extend([f"  %f{j}{tag}.p = getelementptr i8, ptr %arg{j}, i64 {offset}",
                          f"  %f{j}{tag} = load {ty}, ptr %f{j}{tag}.p"])
            return f"%f{j}{tag}"
        if isinstance(a, _Array):
            check(f"icmp eq ptr {field(8, 'ptr', 'type')}, %ndarray")
            check(f"icmp eq i32 {field(e.ARRAY_NDIM, 'i32', 'ndim')}, 1")
            descr = field(e.ARRAY_DESCR, "ptr", "descr")
            lines += [f"  %num{j}.p = getelementptr i8, ptr {descr}, i64 {e.DESCR_TYPE_NUM}",
                      f"  %num{j} = load i32, ptr %num{j}.p"]
            check(f"icmp eq i32 %num{j}, {a.dtype.num}")
            want = e.C_CONTIGUOUS_ALIGNED | (0x400 if a.role != "in" else 0)  # + WRITEABLE
            lines.append(f"  %fl{j} = and i32 {field(e.ARRAY_FLAGS, 'i32', 'flags')}, {want}")
            check(f"icmp eq i32 %fl{j}, {want}")
            lines.append(f"  %dim{j} = load i64, ptr {field(e.ARRAY_DIMS, 'ptr', 'dims')}")
            check(f"icmp eq i64 %dim{j}, {a.size}")
            call.append(f"ptr {field(e.ARRAY_DATA, 'ptr', 'data')}")
        elif a[0] == "scalar" and a[1] == _BOOL:
            lines.append(f"  %b{j} = call i32 @PyObject_IsTrue(ptr %arg{j})")
            failed_if(f"icmp slt i32 %b{j}, 0")
            lines.append(f"  %x{j} = icmp ne i32 %b{j}, 0")
            call.append(f"i1 %x{j}")
        elif a[0] == "scalar" and a[1].kind in "iu":
            call.append(ints.scalar_argument(lines, j, a[1], failed_if))
        elif a[0] == "scalar":
            lines.append(f"  %d{j} = call double @PyFloat_AsDouble(ptr %arg{j})")
            failed_if(f"fcmp oeq double %d{j}, -1.0")
            if a[1] == _F32:
                lines.append(f"  %x{j} = fptrunc double %d{j} to float")
                call.append(f"float %x{j}")
            else:
                call.append(f"double %d{j}")
        else:  # n, which the kernel's caller passes: the arrays' size
            lines.append(f"  %n = call i64 @PyNumber_AsSsize_t(ptr %arg{j}, ptr null)")
            failed_if("icmp eq i64 %n, -1")
            check(f"icmp eq i64 %n, {n}")
    lines += ["  %state = call ptr @PyEval_SaveThread()",
              f"  call void @{name}_loop({', '.join(call)})",
              "  call void @PyEval_RestoreThread(ptr %state)",
              "  call void @Py_IncRef(ptr @_Py_NoneStruct)",
              "  ret ptr @_Py_NoneStruct",
              "bad:",
              f"  call void @PyErr_SetString(ptr @PyExc_TypeError, ptr @{name}_bad_args)",
              "  ret ptr null",
              "fail:",
              "  ret ptr null",
              "}"]
    return "\n".join(lines)


def _adapter(function, n_in: int, made: list, results: list, shape: tuple,
             given: tuple = ()):
    """``function`` (an entry point taking flat inputs, then one buffer per output, in the
    cluster's order) called as numba's kernel is: ``kernel(*inputs, *extents)`` returning
    the outputs, or, for the outputs ``given`` (positions), ``kernel(*inputs, *their
    buffers, *extents)`` returning the others (:attr:`plax_numba.codegen.KernelPlan.given`).
    The other buffers are allocated here (accumulators filled with their initial value), and
    the accumulators cast to the results' type as numba's kernel casts them."""
    def kernel(*args):
        ins = [a.reshape(-1) if isinstance(a, np.ndarray) else a for a in args[:n_in]]
        passed = dict(zip(given, args[n_in:n_in + len(given)]))
        buffers = [passed[j].reshape(-1) if j in passed
                   else np.full(a.size, a.init, a.dtype) if a.role == "acc"
                   else np.empty(a.size, a.dtype) for j, a in enumerate(made)]
        function(*ins, *buffers)
        out = []
        for j, (buffer, how) in enumerate(zip(buffers, results)):
            if j in passed:
                continue
            if how[0] == "array":
                out.append(buffer.reshape(shape) if shape else buffer[0])
            elif how[2]:  # a reduction over some axes: an array
                out.append(buffer.reshape(how[2]).astype(how[1]))
            else:  # over all axes: a scalar
                out.append(how[1].type(buffer[0]))
        return out
    return kernel


# ---------------------------------------------------------------- linking

_prestarted: list = []


def prestart() -> None:
    """Sets up llvmlite and the loader's symbols now (:func:`plax_numba.native_loader.prepare`,
    ~0.1 CPU s, once per process) on the first tier's background lane, so that the first
    :func:`build` (when the step gets hot, at its second call) does not wait for it. Called
    when a program with a first-tier kernel is lowered."""
    if _prestarted:
        return
    with _lock:
        if _prestarted:
            return
        _prestarted.append(True)
    from plax_numba import tiered
    tiered.submit(_prepare, lane="first tier")


def _prepare() -> None:
    """The loader's set-up on the first tier's lane, handing the GIL over every
    :data:`plax_numba.tiered.LOAD_SWITCH_INTERVAL` (``import llvmlite.binding`` and numba's
    helpers are Python: measured 1.0-1.25 ms at a stretch, which the program's threads
    waited for at the default switch interval)."""
    from plax_numba import native_loader, tiered
    with tiered.yielding_gil():
        native_loader.prepare()


def object_path(first: FirstTier, opt: int = 2) -> str:
    """Where ``first``'s machine code is kept between processes (beside numba's kernels, in
    :func:`plax_numba.cache.cache_dir`), keyed by its IR and what the code depends on
    (:func:`plax_numba.native_loader.machine_key`): a later process links it without LLVM's
    passes and code generation (a program whose numba kernel never finished compiling,
    e.g. a script shorter than the compilation, still gets its first tier at once)."""
    from plax_numba import native_loader
    machine = hashlib.sha256(native_loader.machine_key(opt).encode()).hexdigest()[:12]
    return f"{_object_stem(first)}-{machine}.o"


def _object_stem(first: FirstTier) -> str:
    from plax_numba import cache
    return os.path.join(cache.cache_dir(), "first_tier",
                        hashlib.sha256(first.ir.encode()).hexdigest()[:32])


def on_disk(first: FirstTier) -> bool:
    """Whether ``first``'s machine code is in the cache (:func:`object_path`; checked without
    setting the loader up, by the IR's part of the name): building it then takes
    milliseconds (parsing the IR, linking) once the loader is set up."""
    import glob
    return bool(glob.glob(glob.escape(_object_stem(first)) + "-*.o"))


def build(first: FirstTier, primitives: list[str], path: str):
    """Links ``first`` (:func:`plan`) into this process and returns its entry point (a
    builtin function taking the numba kernel's arguments); None if that failed, after one
    ``PlaxFallbackWarning`` naming the kernel (its step keeps running what it runs until
    numba's kernel is loaded). Runs on the background compile thread.

    Args:
      first: the kernel.
      primitives: the cluster's primitive names, for the warning.
      path: the numba kernel's generated source, for the warning.

    Returns:
      The entry point, or None.
    """
    from plax_numba import native_loader, tiered
    start, cpu = time.perf_counter(), time.thread_time()
    try:
        # each of llvmlite's calls releases the GIL and takes it back: at the default switch
        # interval (5 ms) every return would wait for the program's busy thread that long
        with tiered.yielding_gil():
            function = native_loader.link_ir(first.ir, first.entry,
                                             cache_path=object_path(first))
    except Exception as err:  # noqa: BLE001 - reported; numba's kernel still follows
        stats["failed"] += 1
        warnings.warn(f"plax_numba: the first-tier (LLVM IR) kernel of [{' '.join(primitives)}]"
                      f" (numba's source: {path}) failed to build; the reference path runs "
                      f"until numba's kernel is loaded. {type(err).__name__}: {err}",
                      PlaxFallbackWarning, stacklevel=2)
        return None
    if first.adapter is not None:
        function = _adapter(function, *first.adapter)
    elif first.loop_adapter is not None:
        from plax_numba import llvm_tier_loops
        function = llvm_tier_loops.adapter(function, *first.loop_adapter)
    first.function = function
    with _lock:
        stats["built"] += 1
        built_at.append(time.perf_counter())
        build_times.append({"wall": time.perf_counter() - start,
                            "cpu": time.thread_time() - cpu})
    return function
