"""Fusion clusters as Python source for ``numba.njit``: one loop over the iteration shape.

:func:`plan_cluster` turns a :class:`plax.lowering.Cluster` into a :class:`KernelPlan`:

* ``source``: a module defining ``kernel(...)``, the loop nest, compiled by numba. Every
  value of the cluster is a scalar local inside the loop; elementwise equations become one
  line each, cast to the output dtype (numba widens int32 arithmetic to int64, so the casts
  give the wrap-around XLA specifies); reductions accumulate in locals (whole-array
  reductions) or arrays (reductions over some axes) in a wide type (float64 for floats,
  int64/uint64 for integers) and are cast at the end.
* ``wrapper``: Python source of ``step(*cluster_inputs)``, the function the lowered program
  calls: it passes array operands as they are, rank-0 operands (literals included, so that
  kernels differing only in their constants share one compilation) as scalars and the
  iteration extents as integers, and wraps scalar results as NumPy scalars of the right
  dtype.

Two loop forms: *flat* (one loop over ``prod(shape)`` elements of C-contiguous operands) when
every operand has the iteration shape or is a scalar and every reduction reduces all axes;
*nested* (one loop per dimension, operands indexed per dimension) otherwise, for
``broadcast_in_dim`` and partial reductions. The source depends on the shape's rank and on
which broadcast dimensions have size 1, not on the sizes, so kernels are shared across
shapes.

Whatever the plan cannot express (a primitive or dtype not in the tables below) makes
:func:`plan_cluster` return None with a reason: the lowering driver then runs the cluster's
equations one by one.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from plax.config import env_number
from plax import dtypes, lax
from plax.core.jaxpr import Literal, Var
from plax.lax.fused_multiply_add import fma_p
from plax.lowering import (ARG_REDUCTION, CUMULATIVE, REDUCTION, FusionOptions, fusion_kind,
                           integer_exponent)

#: dtypes the generated loops handle natively (no complex; float16 and bfloat16 below)
DTYPES = frozenset(np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64,
                                         np.uint8, np.uint16, np.uint32, np.uint64,
                                         np.float32, np.float64))

#: the 16-bit floats: the elementwise kernels of :func:`plan_cluster` read and write them as
#: their uint16 bit patterns and hold their values as float32 locals (each exactly a float32),
#: so an operation computes in float32 and rounds once to the narrow format (ties to even;
#: :mod:`plax_numba.scalar`'s ``round_f16``/``round_bf16``), as the NumPy backend does;
#: reductions accumulate as :func:`reduction` says. Not in conversions from float64 or from
#: integers wider than 16 bits (rounding twice through float32 could differ) or
#: ``nextafter``. The native loops of :mod:`wholegen` hold them the same way.
LOW_FLOATS = {np.dtype(np.float16): "f16", np.dtype(dtypes.bfloat16): "bf16"}
_LOW_IMPORT = ("from plax_numba.scalar import f16_value, f16_bits, round_f16, bf16_value, "
               "bf16_bits, round_bf16\n")


#: flat loops over at least this many elements, with no reduction, run on numba's threads
#: (``prange``, ``parallel=True``); smaller ones get the serial kernel (no threading
#: overhead). Reductions stay serial: their order, hence their rounding, is fixed. Measured on
#: the 2-core host (selu / tanh, float32): parallel breaks even near 2**12, wins 1.5x at 2**15
#: and ~2x from 2**16 (see GOMP_SPINCOUNT in plax_numba/__init__.py).
PARALLEL_MIN = env_number("PLAX_NUMBA_PARALLEL_MIN", 1 << 15)

#: a flat loop reducing to scalars computes this many elements at a time, its reductions'
#: operands kept in scratch and accumulated after each chunk (:func:`plan_cluster`)
SUM_CHUNK = 512

#: an *indexed* loop over at least this many rows of at least this many elements runs as
#: nested loops threaded over its rows; otherwise as one flat loop recovering the indices
#: from the flat position (the threads then share out the elements, not a handful of rows,
#: and a short row's loop does not pay its setup per handful of elements)
INDEXED_ROWS_MIN = 16


class Unsupported(Exception):
    """The cluster uses something the code generator does not express (the message says what)."""


class KernelPlan:
    """What :func:`plan_cluster` produces: the kernel's source, its Python wrapper, and the
    argument types to compile it for.

    Attributes:
      source: the module source defining ``kernel`` (without the decorator line's options).
      wrapper: Python source defining ``step(*cluster inputs)``; it reads the globals
        ``_kernel`` (the compiled kernel's entry point for ``arg_types``), ``_ready``
        (whether to use it), ``_interp`` (the reference path) and ``_asc``
        (``np.ascontiguousarray``).
      arg_types: per kernel argument, ``("array", dtype, ndim)``, ``("scalar", dtype)`` or
        ``("int",)``.
      wrapper_globals: constants the wrapper reads (output dtypes).
      primitives: the names of the fused primitives, for messages.
    """

    def __init__(self, source, wrapper, arg_types, wrapper_globals, primitives,
                 out_params: bool = False):
        self.source, self.wrapper, self.arg_types = source, wrapper, arg_types
        self.wrapper_globals, self.primitives = wrapper_globals, primitives
        #: whether ``kernel`` is ``kernel(*inputs, *outputs, n)`` over flat (1-D) arrays,
        #: writing into outputs allocated by its caller (see :func:`plan_cluster`), so it
        #: can also run on contiguous chunks of its operands
        self.out_params = out_params
        #: whether an ``out_params`` kernel takes its first element's flat position after
        #: ``n`` (it computes an ``iota``; chunks pass their offset)
        self.index_base = False
        #: the outputs (by position) whose buffers the caller passes after the inputs, of
        #: the iteration shape (C-contiguous), the kernel returning only the others
        #: (``into``, and large kernels other than ``out_params`` ones: see
        #: :func:`plan_cluster`)
        self.given: list[int] = []


def _t(dtype) -> str:
    """The NumPy scalar constructor of ``dtype`` in generated code (``np.float32``); for
    float16/bfloat16 the function rounding a number to them, as a float32 (``round_f16``)."""
    dtype = np.dtype(dtype)
    if dtype in LOW_FLOATS:
        return f"round_{LOW_FLOATS[dtype]}"
    return f"np.{dtype.name}" if dtype != np.bool_ else "np.bool_"


def constant(value, dtype) -> str:
    """A scalar constant of ``dtype`` as source text, exact (``np.float32(1.6699999570846558)``)."""
    dtype = np.dtype(dtype)
    value = np.asarray(value, dtype)[()]
    if dtype in LOW_FLOATS:  # held as a float32 local, which is exact
        return constant(np.float32(value), np.float32)
    if dtype == np.bool_:
        return "True" if value else "False"
    if dtype.kind == "f":
        v = float(value)
        if math.isnan(v):
            text = "np.nan"
        elif math.isinf(v):
            text = "np.inf" if v > 0 else "-np.inf"
        else:
            text = repr(v)
        return f"{_t(dtype)}({text})"
    return f"{_t(dtype)}({int(value)})"


# ---------------------------------------------------------------- elementwise expressions

def _cast(expr: str, dtype) -> str:
    return expr if np.dtype(dtype) == np.bool_ else f"{_t(dtype)}({expr})"


_FLOAT_UNARY = {
    lax.exp_p: "np.exp({0})", lax.exp2_p: "np.exp2({0})", lax.log_p: "np.log({0})",
    lax.log1p_p: "np.log1p({0})", lax.expm1_p: "np.expm1({0})", lax.tanh_p: "np.tanh({0})",
    lax.sin_p: "np.sin({0})", lax.cos_p: "np.cos({0})", lax.tan_p: "np.tan({0})",
    lax.asin_p: "np.arcsin({0})", lax.acos_p: "np.arccos({0})", lax.atan_p: "np.arctan({0})",
    lax.sinh_p: "np.sinh({0})", lax.cosh_p: "np.cosh({0})", lax.asinh_p: "np.arcsinh({0})",
    lax.acosh_p: "np.arccosh({0})", lax.atanh_p: "np.arctanh({0})", lax.sqrt_p: "np.sqrt({0})",
    lax.cbrt_p: "np.cbrt({0})", lax.floor_p: "np.floor({0})", lax.ceil_p: "np.ceil({0})",
    lax.logistic_p: "logistic({0})", lax.sign_p: "fsign({0})", lax.abs_p: "abs({0})",
    lax.neg_p: "-{0}",
}
#: float32 functions with a vectorisable kernel, no libm call: plax_numba.scalar's exp (0.99
#: ulp), tanh (4.96, as JAX's 4.8) and logistic (2.26), plax_numba.libm_free's others (at most
#: 1.06 ulp, lgamma/digamma away from their zeros)
_F32_KERNELS = {lax.exp_p: "exp_f32", lax.tanh_p: "tanh_f32", lax.logistic_p: "logistic_f32",
                lax.log_p: "log_f32", lax.expm1_p: "expm1_f32", lax.erf_p: "erf_f32",
                lax.erfc_p: "erfc_f32", lax.sin_p: "sin_f32", lax.cos_p: "cos_f32",
                lax.erf_inv_p: "erf_inv_f32", lax.lgamma_p: "lgamma_f32",
                lax.digamma_p: "digamma_f32"}
#: special functions of other float dtypes: libm's float64 ones, one scalar call per element
#: (still one pass, where the reference kernel makes several through SciPy)
_SPECIAL_F64 = {lax.erf_p: "math.erf", lax.erfc_p: "math.erfc", lax.lgamma_p: "math.lgamma"}
#: special functions with a scalar form of their own per float width (plax_numba.special):
#: float32 and float64 operands call ``<name>_f32`` / ``<name>_f64``
_SPECIAL_SCALAR = {lax.bessel_i0e_p: "bessel_i0e", lax.bessel_i1e_p: "bessel_i1e",
                   lax.igamma_p: "igamma", lax.igammac_p: "igammac",
                   lax.igamma_grad_a_p: "igamma_grad_a",
                   lax.random_gamma_grad_p: "random_gamma_grad", lax.zeta_p: "zeta",
                   lax.polygamma_p: "polygamma", lax.regularized_incomplete_beta_p: "betainc"}
#: heavy scalar forms, inlined (vectorised with their loop) only in kernels over at least this
#: many elements; smaller kernels call their compiled-once twin ``<name>_once``
#: (:func:`plax_numba.compiled_once.twin`), the same code compiled once per process. Inlined,
#: a form costs LLVM 0.2-0.5 CPU s per kernel (``lgamma``/``digamma`` ~1.5-2.5, float64
#: ``erf_inv`` ~1, ``zeta`` ~4), which a kernel over few elements never repays: the conformance
#: kit's, the tests', a scalar program's, a cond branch's. Called, a form runs unvectorised,
#: ~15 ns more per element (~30 ns for ``lgamma``/``digamma``, ~1 us for ``zeta``): the
#: thresholds keep that within 1-3 us per call. The iterative forms (``igamma``, ``betainc``,
#: ...) never vectorise: their names are their compiled-once forms, whatever the size.
#: Always inlined: ``exp``, ``tanh`` and ``logistic`` (0.1-0.2 s, and in every small network's
#: hot loop). A kernel's native artifact carries the object code of the twins it calls, so a
#: program calling them still loads from the disk cache without numba
#: (:func:`plax_numba.native_emit.compiled_once_objects`).
INLINE_FROM = {
    **dict.fromkeys(("log_f32", "sin_f32", "cos_f32", "expm1_f32", "erf_f32", "erfc_f32",
                     "erf_inv_f32", "bessel_i0e_f32", "bessel_i1e_f32", "bessel_i0e_f64",
                     "bessel_i1e_f64", "digamma_f64"), 1 << 6),
    **dict.fromkeys(("lgamma_f32", "digamma_f32", "erf_inv_f64"), 1 << 8),
    "zeta_f32": 1 << 12,
}


def _inlined_or_called(name: str, eqn) -> str:
    """``name``, or its compiled-once twin where ``eqn``'s kernel is too small to repay
    inlining it (:data:`INLINE_FROM`)."""
    least = INLINE_FROM.get(name)
    if least is not None and math.prod(eqn.outvars[0].aval.shape) < least:
        return f"{name}_once"
    return name


#: float64 forms of functions whose float32 form is in _F32_KERNELS (plax_numba.special*)
_F64_KERNELS = {lax.digamma_p: "digamma_f64", lax.erf_inv_p: "erf_inv_f64"}
#: elementwise functions costly enough per element (a polynomial or a libm call) that a flat
#: loop reducing to scalars computes them apart from its additions (:func:`plan_cluster`)
_COSTLY = (frozenset(_F32_KERNELS) | frozenset(_SPECIAL_SCALAR) | frozenset(_FLOAT_UNARY)) - {
    lax.abs_p, lax.neg_p, lax.sign_p, lax.floor_p, lax.ceil_p, lax.sqrt_p}
_ARITH = {lax.add_p: "+", lax.add_any_p: "+", lax.sub_p: "-", lax.mul_p: "*"}
_COMPARE = {lax.eq_p: "==", lax.ne_p: "!=", lax.lt_p: "<", lax.le_p: "<=", lax.gt_p: ">",
            lax.ge_p: ">="}
_BITWISE = {lax.and_p: "&", lax.or_p: "|", lax.xor_p: "^"}


#: what this generator's clusters hold beyond the plain kinds (the Numba emitter's
#: ``fuses_*`` flags are these; the kernels of native loops and whole programs,
#: :mod:`plax_numba.wholegen`, and their first tier, :mod:`plax_numba.llvm_tier_loops`, form
#: their clusters with them too): ``threefry2x32``'s two words hashed in one pass, ``iota``
#: from the loop index, ``argmax``/``argmin`` and the cumulative ops after their producers
FUSES = FusionOptions(multiple_results=True, index=True, arg_reductions=True, cumulative=True)


def kind_of(primitive) -> str | None:
    """``primitive``'s fusion kind as this generator sees it: ``argmax``/``argmin`` as
    ``ARG_REDUCTION`` and the cumulative ops as ``CUMULATIVE`` (the Numba emitter opts in to
    both, :attr:`plax.lowering.Emitter.fuses_arg_reductions`), ``iota`` as ``INDEX``."""
    return fusion_kind(primitive, FUSES.index, FUSES.arg_reductions, FUSES.cumulative)


def reduces(eqn) -> bool:
    """Whether ``eqn``'s value is complete only when its cluster's loop ends (a reduction,
    an arg-reduction or a cumulative op): its loop's order is fixed, never threaded."""
    return kind_of(eqn.primitive) in (REDUCTION, ARG_REDUCTION, CUMULATIVE)


def reference_only(eqn) -> bool:
    """Whether a cluster's equation should run on the reference kernel (the emitter splits the
    cluster around it) to stay bit-identical with the NumPy backend: NumPy's ``log1p`` loops
    (SIMD on AVX-512 machines) have no reproducible scalar equivalent in numba, and the
    samplers of :mod:`plax.random` (``normal`` computes its inverse error function from
    ``log1p`` and arithmetic, not ``erf_inv_p``) must match NumPy bit for bit."""
    return eqn.primitive is lax.log1p_p


def elementwise(eqn, a: list[str]) -> str:
    """The expression computing ``eqn``'s output from the operand expressions ``a``."""
    if any(np.dtype(v.aval.dtype) in LOW_FLOATS for v in (*eqn.invars, *eqn.outvars)):
        return _low_float(eqn, a)
    prim = eqn.primitive
    din = [np.dtype(v.aval.dtype) for v in eqn.invars]
    dout = np.dtype(eqn.outvars[0].aval.dtype)
    k = din[0].kind if din else dout.kind
    bits = din[0].itemsize * 8 if din else 0
    if prim in _COMPARE:
        return f"({a[0]} {_COMPARE[prim]} {a[1]})"
    if prim in _ARITH:
        if k == "b":
            raise Unsupported(f"{prim.name} on bool")
        return _cast(f"{a[0]} {_ARITH[prim]} {a[1]}", dout)
    if prim in _BITWISE:
        return _cast(f"{a[0]} {_BITWISE[prim]} {a[1]}", dout)
    if prim is lax.not_p:
        return f"(not {a[0]})" if k == "b" else _cast(f"~{a[0]}", dout)
    if prim is lax.neg_p and k == "u":
        return _cast(f"{_t(dout)}(0) - {a[0]}", dout)
    if prim is lax.abs_p and k == "u":
        return a[0]
    if prim is lax.sign_p and k in "iu":
        if k == "u":
            return _cast(f"{a[0]} != 0", dout)
        return _cast(f"(1 if {a[0]} > 0 else (-1 if {a[0]} < 0 else 0))", dout)
    if prim in _SPECIAL_SCALAR and din[0] in (np.float32, np.float64):
        name = _inlined_or_called(f"{_SPECIAL_SCALAR[prim]}_f{bits}", eqn)
        return f"{name}({', '.join(a)})"
    if prim in _F64_KERNELS and din[0] == np.float64:
        return f"{_inlined_or_called(_F64_KERNELS[prim], eqn)}({a[0]})"
    scalar = not eqn.outvars[0].aval.shape
    if prim in _F32_KERNELS and din[0] == np.float32 and not (scalar and prim in _SPECIAL_F64):
        return f"{_inlined_or_called(_F32_KERNELS[prim], eqn)}({a[0]})"
    if prim in _SPECIAL_F64 and k == "f" and din[0].itemsize >= 4:
        # float32 scalars too: their rounding of libm's float64 erf matches SciPy's (the NumPy
        # backend's), which truncated_normal's bounds need to stay bit-identical
        return _cast(f"{_SPECIAL_F64[prim]}(np.float64({a[0]}))", dout)
    if prim in _FLOAT_UNARY and (k == "f" or prim in (lax.neg_p, lax.abs_p)):
        return _cast(_FLOAT_UNARY[prim].format(a[0]), dout)
    if prim is lax.rsqrt_p and k == "f":
        return _cast(f"{_t(dout)}(1) / np.sqrt({a[0]})", dout)
    if prim is lax.is_finite_p:
        return f"np.isfinite({a[0]})"
    if prim is lax.round_p and k == "f":
        fn = "np.rint" if eqn.params["rounding_method"] == 1 else "round_away"
        return _cast(f"{fn}({a[0]})", dout)
    if prim in (lax.max_p, lax.min_p):
        if k == "f":
            return _cast(f"{'fmax' if prim is lax.max_p else 'fmin'}({a[0]}, {a[1]})", dout)
        op = ">" if prim is lax.max_p else "<"
        return f"({a[0]} if {a[0]} {op} {a[1]} else {a[1]})"
    if prim is lax.clamp_p:  # clamp(lo, x, hi) = min(max(x, lo), hi)
        lo, x, hi = a
        if k == "f":
            return _cast(f"fmin(fmax({x}, {lo}), {hi})", dout)
        if k == "b":
            raise Unsupported("clamp on bool")
        return _cast(f"min(max({x}, {lo}), {hi})", dout)
    if prim is lax.div_p:
        if k == "f":
            return _cast(f"{a[0]} / {a[1]}", dout)
        if k == "i":
            return _cast(f"idiv(np.int64({a[0]}), np.int64({a[1]}))", dout)
        if k == "u":
            return f"({_t(dout)}(-1) if {a[1]} == 0 else {_cast(f'{a[0]} // {a[1]}', dout)})"
    if prim is lax.rem_p:
        if k == "f":
            return _cast(f"np.fmod({a[0]}, {a[1]})", dout)
        if k == "i":
            return _cast(f"irem(np.int64({a[0]}), np.int64({a[1]}))", dout)
        if k == "u":
            return f"({a[0]} if {a[1]} == 0 else {_cast(f'{a[0]} % {a[1]}', dout)})"
    if prim is lax.pow_p and k == "f":  # (an integer exponent converted to the base's dtype)
        y = _cast(a[1], dout) if din[1].kind in "iu" else a[1]
        return _cast(f"np.power({a[0]}, {y})", dout)
    if prim is lax.atan2_p and k == "f":
        return _cast(f"np.arctan2({a[0]}, {a[1]})", dout)
    if prim is lax.nextafter_p and k == "f":  # exact, on the bits (plax_numba.scalar)
        return f"nextafter_f{bits}({a[0]}, {a[1]})"
    if prim is fma_p:  # llvm.fma: the CPU's FMA instruction, or libm's correctly rounded fma
        return f"fma_f{bits}({', '.join(a)})"
    if prim is lax.bitcast_convert_type_p:
        if din[0] == dout:
            return a[0]
        if din[0].itemsize != dout.itemsize or np.bool_ in (din[0], dout):
            raise Unsupported(f"bitcast_convert_type from {din[0]} to {dout}")
        return f"bitcast({a[0]}, {_t(dout)}(0))"  # a register bit-cast (plax_numba.scalar)
    if prim in (lax.shift_left_p, lax.shift_right_logical_p, lax.shift_right_arithmetic_p):
        return _shift(prim, a, din[0], bits)
    if prim is lax.select_n_p:
        which, cases = a[0], a[1:]
        if len(cases) == 1:
            return cases[0]
        if din[0] == np.bool_:
            return f"({cases[1]} if {which} else {cases[0]})"
        expr = cases[-1]
        for i in range(len(cases) - 2, -1, -1):
            expr = f"({cases[i]} if {which} == {i} else {expr})"
        return expr
    if prim is lax.convert_element_type_p:
        return _convert(a[0], din[0], dout)
    y = integer_exponent(eqn)  # integer_pow, square
    if y is not None:
        return _integer_pow(a[0], y, dout)
    raise Unsupported(f"{prim.name} on {din[0] if din else dout}")


class _Float32View:
    """An equation seen with its float16/bfloat16 operands and result typed float32: what
    :func:`_low_float` asks :func:`elementwise` for before rounding."""

    class _Var:
        def __init__(self, v):
            from types import SimpleNamespace
            dtype = np.dtype(v.aval.dtype)
            self.aval = SimpleNamespace(
                shape=v.aval.shape,
                dtype=np.dtype(np.float32) if dtype in LOW_FLOATS else dtype)

    def __init__(self, eqn):
        self.primitive, self.params = eqn.primitive, eqn.params
        self.invars = [self._Var(v) for v in eqn.invars]
        self.outvars = [self._Var(v) for v in eqn.outvars]


def _low_float(eqn, a: list[str]) -> str:
    """:func:`elementwise` for an equation with float16/bfloat16 operands or result (their
    values are float32 locals): the float32 expression, rounded once to the result's format
    (see :data:`LOW_FLOATS`)."""
    prim = eqn.primitive
    din = [np.dtype(v.aval.dtype) for v in eqn.invars]
    dout = np.dtype(eqn.outvars[0].aval.dtype)
    if prim is lax.bitcast_convert_type_p:
        if din[0].itemsize != 2 or dout.itemsize != 2:
            raise Unsupported(f"bitcast_convert_type from {din[0]} to {dout}")
        bits = (f"{LOW_FLOATS[din[0]]}_bits({a[0]})" if din[0] in LOW_FLOATS
                else f"np.uint16({a[0]})")
        return (f"{LOW_FLOATS[dout]}_value({bits})" if dout in LOW_FLOATS
                else f"{_t(dout)}({bits})")
    if prim is lax.nextafter_p:
        raise Unsupported(f"nextafter on {dout}")
    if prim is fma_p:  # rounded to odd in float32, then once to the narrow format
        return f"{_t(dout)}(fma_odd_f32({', '.join(a)}))"
    if prim is lax.convert_element_type_p and dout in LOW_FLOATS:
        src = din[0]
        if src in LOW_FLOATS or src == np.float32 or src == np.bool_:
            return f"{_t(dout)}({a[0]})"
        if src.kind in "iu" and (src.itemsize <= 2 or dout == np.float16):
            # exact in float32 (16-bit integers; any integer below 2**24, and float16 is
            # infinite from 65520 on whatever float32 made of a larger one): rounded once
            return f"{_t(dout)}(np.float32({a[0]}))"
        raise Unsupported(f"convert_element_type from {src} to {dout} (would round twice)")
    y = integer_exponent(eqn)
    if y is not None and dout == np.float16:
        # NumPy multiplies float16 values in float16: each product rounded (as _integer_pow
        # does with _t(float16), the rounding function)
        return _integer_pow(a[0], y, dout)
    expr = elementwise(_Float32View(eqn), a)
    if dout not in LOW_FLOATS or prim in _EXACT:
        return expr
    return f"{_t(dout)}({expr})"


#: primitives whose float32 result on float16/bfloat16 operands is one of them already
_EXACT = {lax.select_n_p, lax.max_p, lax.min_p, lax.clamp_p, lax.neg_p, lax.abs_p, lax.floor_p,
          lax.ceil_p, lax.round_p, lax.sign_p, lax.rem_p}


def _shift(prim, a, dtype, bits: int) -> str:
    x, y = a
    in_range = f"({y} >= 0 and {y} < {bits})" if dtype.kind == "i" else f"({y} < {bits})"
    t = _t(dtype)
    if prim is lax.shift_left_p:
        return f"({t}({x} << {y}) if {in_range} else {t}(0))"
    unsigned = f"np.uint{bits}"
    signed = f"np.int{bits}"
    if prim is lax.shift_right_logical_p:
        return f"({t}({unsigned}({x}) >> {unsigned}({y})) if {in_range} else {t}(0))"
    # arithmetic: shifting by the width or more gives the sign
    amount = f"({y} if {in_range} else {bits - 1})"
    return f"{t}({signed}({x}) >> {signed}({amount}))"


def _convert(x: str, src, dst) -> str:
    if dst == np.bool_:
        return x if src == np.bool_ else f"({x} != 0)"
    if dst.kind in "iu" and src.kind == "f":
        # XLA: truncate, saturate, NaN -> 0 (compared in float64, where the bounds are exact)
        info = np.iinfo(dst)
        t = _t(dst)
        upper, lower = float(info.max) + 1.0, float(info.min)
        return (f"({t}(0) if {x} != {x} else ({t}({info.max}) if {x} >= {upper!r} else "
                f"({t}({info.min}) if {x} < {lower!r} else {t}({x}))))")
    return _cast(x, dst)


def _integer_pow(x: str, y: int, dtype) -> str:
    t = _t(dtype)
    if y == 0:
        return f"{t}(1)"
    if y < 0 and dtype.kind != "f":
        raise Unsupported("integer_pow with a negative exponent on integers")
    # square-and-multiply, each product rounded to the dtype, as the reference does
    n, acc, base = abs(y), None, x
    while n:
        if n & 1:
            acc = base if acc is None else f"{t}({acc} * {base})"
        n >>= 1
        if n:
            base = f"{t}({base} * {base})"
    if y < 0:
        acc = f"{t}(1) / {acc}"
    return _cast(acc, dtype)


# ---------------------------------------------------------------- reductions

def _acc_dtype(dtype) -> np.dtype:
    if dtype.kind == "f":
        return np.dtype(np.float64)
    if dtype.kind == "i":
        return np.dtype(np.int64)
    if dtype.kind == "u":
        return np.dtype(np.uint64)
    return dtype


def reduction(prim, dtype) -> tuple[np.dtype, str, Callable[[str, str], str]]:
    """``(accumulator dtype, initial value source, update(acc, value) -> source)``.

    float16/bfloat16 (float32 locals, :data:`LOW_FLOATS`): sums and products accumulate in
    float64 like float32's, and the result rounds to float32 and then to the narrow format,
    as the NumPy backend's reference does (it reduces in float32 and casts); max and min
    compare the float32 locals (exact)."""
    if dtype in LOW_FLOATS:
        acc, init, update = reduction(prim, np.dtype(np.float32))
        return (acc if acc != np.float32 else dtype), init, update
    k = dtype.kind
    if prim is lax.reduce_sum_p and k != "b":
        acc = _acc_dtype(dtype)
        return acc, constant(0, acc), lambda s, v: f"{s} + {_t(acc)}({v})"
    if prim is lax.reduce_prod_p and k != "b":
        acc = _acc_dtype(dtype)
        return acc, constant(1, acc), lambda s, v: f"{s} * {_t(acc)}({v})"
    if prim in (lax.reduce_max_p, lax.reduce_min_p) and k in "fiub":
        is_max = prim is lax.reduce_max_p
        if k == "f":
            init = constant(-np.inf if is_max else np.inf, dtype)
            fn = "fmax" if is_max else "fmin"
            return dtype, init, lambda s, v: f"{fn}({s}, {v})"
        if k == "b":
            return dtype, "False" if is_max else "True", \
                (lambda s, v: f"({s} or {v})") if is_max else (lambda s, v: f"({s} and {v})")
        info = np.iinfo(dtype)
        init = constant(info.min if is_max else info.max, dtype)
        op = ">" if is_max else "<"
        return dtype, init, lambda s, v: f"({v} if {v} {op} {s} else {s})"
    if prim in (lax.reduce_and_p, lax.reduce_or_p, lax.reduce_xor_p):
        op = {lax.reduce_and_p: "&", lax.reduce_or_p: "|", lax.reduce_xor_p: "^"}[prim]
        if k == "b":
            init = "True" if prim is lax.reduce_and_p else "False"
            return dtype, init, lambda s, v: f"({s} {op} {v})"
        init = constant(-1 if prim is lax.reduce_and_p else 0, dtype)
        return dtype, init, lambda s, v: f"{_t(dtype)}({s} {op} {v})"
    raise Unsupported(f"{prim.name} on {dtype}")


# ---------------------------------------------------------------- the kernel

class _Input:
    """How one cluster input reaches the kernel."""

    def __init__(self, atom, name: str, kind: str, dtype, ndim: int = 0):
        self.atom, self.name, self.kind, self.dtype, self.ndim = atom, name, kind, dtype, ndim


def _flat_view(name: str, ndim: int) -> str:
    """The line binding ``{name}_f``, the flat view of a C-contiguous input (a rank-1 array
    is its own: numba's ``ravel``/``reshape`` is a C call, ~12 ns a step in a native loop)."""
    return f"{name}_f = {name}" if ndim == 1 else f"{name}_f = {name}.ravel()"


def plan_cluster(cluster, preallocate: bool = False, parallel: bool | None = None,
                 into: bool = False) -> KernelPlan:
    """The kernel plan of ``cluster``.

    Args:
      cluster: the fusion cluster.
      preallocate: for a large cluster (at least :data:`PARALLEL_MIN` elements), the
        wrapper allocates the array outputs with NumPy, whose large buffers are backed by
        huge pages (numba's allocator faults in 4 KiB pages: first touching a fresh 40 MB
        output cost 15 ms against 7 ms, and 1.2 ms for the loop itself). A flat cluster
        without reductions is then ``kernel(*inputs, *outputs, n)`` over 1-D arrays
        (``KernelPlan.out_params``), which also runs on chunks of its operands
        (:meth:`NumbaEmitter._emit_split`); any other takes the buffers of its array
        outputs that are not reductions as ``into`` does (``KernelPlan.given``).
      parallel: force the serial (False) or parallel (True) loop; None: by size.
      into: the caller passes the buffers of the array outputs that are not reductions
        (C-contiguous, the iteration shape), after the inputs and before the extents; the
        kernel returns only the other outputs (reductions, rank 0), or ``0`` if there are
        none. A native loop (:mod:`plax_numba.wholegen`) allocates those buffers once
        before the loop instead of once per step. Only the kernel's ``source`` is used
        (no wrapper).

    ``iota`` equations (fused as ``INDEX``, :func:`plax.lowering.find_clusters`) are
    expressions of the loop's index, never read from memory. A kernel over flat chunks
    (``out_params``) holding one takes, after ``n``, the flat position ``base`` of its first
    element (``KernelPlan.index_base``; 0 for a whole array).

    Raises:
      Unsupported: a primitive, dtype or pattern the generator does not express.
    """
    if len(cluster.eqns) == 1 and not into:
        from plax_numba import codegen_scan  # (arg-reductions, cumulative ops: their own)
        if codegen_scan.own_kernel(cluster.eqns[0]):
            return codegen_scan.plan(cluster)
    shape = tuple(cluster.shape)
    rank = len(shape)
    low = False  # float16/bfloat16 values: uint16 arrays, float32 locals (LOW_FLOATS)
    has_index = any(e.primitive is lax.iota_p for e in cluster.eqns)
    for eqn in cluster.eqns:
        for v in list(eqn.invars) + list(eqn.outvars):
            dtype = np.dtype(v.aval.dtype)
            if dtype in LOW_FLOATS:
                low = True
            elif dtype not in DTYPES:
                raise Unsupported(f"{eqn.primitive.name} on {dtype}")

    broadcast_operands = set()
    partial = set()  # broadcasts read through their index map (not as a flat array)
    flat = True
    for eqn in cluster.eqns:
        if eqn.primitive is lax.broadcast_in_dim_p:
            op = eqn.invars[0]
            broadcast_operands.add(id(op))
            dims = tuple(eqn.params["broadcast_dimensions"])
            if op.aval.shape and not (math.prod(op.aval.shape) == math.prod(shape)
                                      and list(dims) == sorted(dims)):
                flat = False
                partial.add(id(eqn))
            if eqn.params.get("sharding") is not None:
                raise Unsupported("broadcast_in_dim with a sharding")
        elif kind_of(eqn.primitive) in (REDUCTION, ARG_REDUCTION):
            if sorted(eqn.params["axes"]) != list(range(rank)):
                flat = False
        elif kind_of(eqn.primitive) == CUMULATIVE:
            flat = False  # (nested: the scan axis's index, and its loop reversed if asked)
    # A large cluster without reductions whose only obstacle to the flat loop is a partial
    # broadcast runs *indexed*: one flat loop (threaded, like a flat one) that recovers the
    # element's indices from its flat position and reads those broadcasts by them. A key
    # split's threefry over an (n, k) grid, read from (n,) and (k,) operands, was a serial
    # loop nest: flat and threaded, 33 -> 17 ms at n = 10**6 on the 2-core host.
    indexed = (not flat and rank >= 2 and math.prod(shape) >= PARALLEL_MIN
               and not any(reduces(e) for e in cluster.eqns))
    if indexed:
        flat = True

    # a flat loop without reductions may run on threads and in chunks (order-free)
    order_free = flat and rank > 0 and not any(reduces(e) for e in cluster.eqns)
    large = math.prod(shape) >= PARALLEL_MIN
    out_params = (preallocate and order_free and large and not low
                  and not broadcast_operands_partial(cluster, shape) and not into)
    if (indexed and min(shape[-1], math.prod(shape[:-1])) >= INDEXED_ROWS_MIN
            and not out_params):
        # many long rows: nested loops threaded over the rows, every array of the
        # iteration shape read and written by rows (_nested_at), never by a flat position
        # summed from the indices: numba checks such a computed index for wrap-around,
        # which kept LLVM from vectorising the row (softmax's x / sum on 1000x1000: 650 ->
        # 130 CPU us). The rows may lie along any leading axes: attention's 8x128x128
        # scores over their row sums took the flat loop, two divisions and a remainder per
        # element, 84 us nested against 10.6 ms serial and 23 ms threaded flat (load ~10),
        # so a few items along the outermost axis to share out beat it
        flat = False
    # any other large kernel writes its array outputs into buffers its wrapper allocates
    # (NumPy's, as out_params kernels'; passed as ``into`` passes them): numba allocated a
    # 64 MB output in 4 KiB pages, faulted in at first touch (softmax's exp and row sums on
    # 4000x4000 float32: 47 -> 18 ms, div 49 -> 22 ms)
    given_outputs = preallocate and not out_params and not into and large and rank > 0
    into_source = into or given_outputs

    # inputs: rank-0 operands as scalars, the others as arrays
    inputs: list[_Input] = []
    for i, atom in enumerate(cluster.inputs):
        dtype = np.dtype(atom.aval.dtype)
        nd = len(atom.aval.shape)
        if nd == 0:  # literals too: passed at run time, so kernels differing only in
            # their constants share one compiled kernel
            inputs.append(_Input(atom, f"a{i}", "scalar", dtype))
        else:
            if not isinstance(atom, (Var, Literal)):
                raise Unsupported("an operand that is neither a variable nor a literal")
            inputs.append(_Input(atom, f"a{i}", "array", dtype, 1 if out_params else nd))

    # a scalar-shaped cluster: every value is a scalar, no loop
    if rank == 0:
        flat = True
    dims = [f"n{d}" for d in range(rank)]
    idx = [f"i{d}" for d in range(rank)]
    rows: list = []    # nested loops: arrays of the iteration shape, read by rows
    reversed_dims: set = set()  # nested loops walking their dimension from its end
    helpers: list[str] = []     # functions the kernel calls, defined before it
    row_post: list[str] = []    # nested loops: after each row the innermost loop walks
    row_pre: list[str] = []     # nested loops: before each row the innermost loop walks
    # a nested loop threaded over its rows (_rows_independent; a float16 sum keeps its
    # serial loop: reassociated, it vectorises, _decoded_sums_only)
    by_rows = (not flat and _rows_independent(cluster, shape)
               and not _decoded_sums_only(cluster))
    # so threaded, a reduction along the innermost axis sums a row's values after the row,
    # from a scratch row, in the same order; the row's loop then carries no reduction and
    # vectorises (softmax's exp over 1000x1000: 4.3 -> 1.3 ms). Serial loops over rows of
    # at least ROW_WISE_MIN elements too: accumulating into the sums' array inside the row's
    # loop kept it from vectorising, each addition waiting on the last one's store (exp and
    # row sums of 128x1000 float32, serial: ~490 us against ~60 for the exp alone)
    large_rows = rank >= 2 and shape[-1] >= ROW_WISE_MIN
    row_wise = by_rows and (math.prod(shape) >= PARALLEL_MIN or large_rows)
    # ... and several rows at once: their scratch rows summed side by side, one accumulator
    # per row (each row in its own order, so bit-identical), since one row's float64 sum is a
    # chain of dependent additions, each waiting for the last (row_block)
    block = row_block(cluster, shape, math.prod(shape) >= PARALLEL_MIN) if row_wise else 1
    row_bind: list[str] = []    # blocked rows: each row's scratch row, bound per row
    block_post: list[str] = []  # blocked rows: after each block of rows
    # a flat loop reducing to scalars keeps each chunk's reduction operands in scratch and
    # accumulates them after the chunk, in the same order: the elementwise loop then carries
    # no dependency and vectorises (tanh and its sum over 1024x128 float32: the loop waited on
    # each float64 addition, 3.4 ns an element)
    # (only where the elementwise work is costly, a transcendental function: cheap work
    # overlaps the additions' latency anyway, and the scratch's store and load then add time:
    # mean(x * x) over 1M float32 646 -> 927 us chunked, sum(tanh(x)) 2470 -> 1319)
    chunked_sums = [] if (flat and rank > 0 and any(
        e.primitive in _COSTLY for e in cluster.eqns) and not any(
        kind_of(e.primitive) in (ARG_REDUCTION, CUMULATIVE) for e in cluster.eqns)) else None
    names: dict = {}   # id(atom) -> scalar expression inside the loop
    pre: list[str] = []    # before the loop
    body: list[str] = []   # inside the loop
    post: list[str] = []   # after the loop
    for inp in inputs:
        if inp.kind == "scalar":
            if inp.dtype in LOW_FLOATS:  # its bits decoded once
                pre.append(f"{inp.name}_x = {_load(inp.dtype, inp.name)}")
                names[id(inp.atom)] = f"{inp.name}_x"
            else:
                names[id(inp.atom)] = inp.name
        elif id(inp.atom) in broadcast_operands and tuple(inp.atom.aval.shape) != shape:
            pass  # read through its broadcast's index map only
        elif flat:
            pre.append(_flat_view(inp.name, inp.ndim))
            body.append(f"{inp.name}_v = {_load(inp.dtype, f'{inp.name}_f[i]')}")
            names[id(inp.atom)] = f"{inp.name}_v"
        else:
            body.append(f"{inp.name}_v = "
                        f"{_load(inp.dtype, _nested_at(inp.name, idx, rows))}")
            names[id(inp.atom)] = f"{inp.name}_v"

    in_names = {id(inp.atom): inp.name for inp in inputs}
    outputs = {id(v): j for j, v in enumerate(cluster.outputs)}
    out_exprs: list[str | None] = [None] * len(cluster.outputs)
    scalar_out: list[bool] = [False] * len(cluster.outputs)
    out_dtypes = [np.dtype(v.aval.dtype) for v in cluster.outputs]
    given: list[int] = []  # outputs whose buffers the caller passes (``into``)
    for j, v in enumerate(cluster.outputs):
        if kind_of(_defining(cluster, v).primitive) not in (REDUCTION, ARG_REDUCTION) and rank:
            t = _storage(out_dtypes[j])
            if out_params:
                pre.append(f"o{j}_f = o{j}")
                continue
            if into_source:
                given.append(j)
                if flat:  # (a view: the kernel writes through it)
                    pre.append(f"o{j}_f = o{j}" if rank == 1 else
                               f"o{j}_f = o{j}.reshape({' * '.join(dims)})")
                continue
            pre.append(f"o{j} = np.empty(({', '.join(dims)},), {t})")
            if flat:  # (a rank-1 array is its own flat view: numba's reshape is a C call)
                pre.append(f"o{j}_f = o{j}" if rank == 1 else
                           f"o{j}_f = o{j}.reshape({' * '.join(dims)})")

    for k, eqn in enumerate(cluster.eqns):
        out = eqn.outvars[0]
        local = f"t{k}"
        prim = eqn.primitive
        if len(eqn.outvars) > 1:  # every result in one statement (multiple_results clusters)
            args = [names[id(v)] if id(v) in names else _missing(v) for v in eqn.invars]
            locals_ = [f"t{k}_{r}" for r in range(len(eqn.outvars))]
            body.append(f"{', '.join(locals_)} = {multi_result(eqn, args)}")
            for r, (v, name) in enumerate(zip(eqn.outvars, locals_)):
                names[id(v)] = name
                _store(v, name, outputs, out_exprs, scalar_out, rank, flat, body, idx, rows)
            continue
        if prim is lax.broadcast_in_dim_p:
            op = eqn.invars[0]
            if id(op) in names and not op.aval.shape:
                expr = names[id(op)]
            elif tuple(op.aval.shape) == shape and id(op) in names:
                expr = names[id(op)]
            else:
                if isinstance(op, Literal) and id(op) not in in_names:
                    raise Unsupported("a broadcast literal")
                bdims = eqn.params["broadcast_dimensions"]
                if flat and id(eqn) not in partial:
                    expr = f"{in_names[id(op)]}_f[i]"
                    view = _flat_view(in_names[id(op)], len(op.aval.shape))
                    if view not in pre:
                        pre.append(view)
                else:
                    sub = [("0" if op.aval.shape[j] == 1 and shape[d] != 1 else idx[d])
                           for j, d in enumerate(bdims)]
                    expr = f"{in_names[id(op)]}[{', '.join(sub)}]"
                expr = _load(np.dtype(op.aval.dtype), expr)
            body.append(f"{local} = {expr}")
        elif kind_of(prim) in (ARG_REDUCTION, CUMULATIVE):
            from plax_numba import codegen_scan
            j = outputs.get(id(out))
            if j is None:  # (nobody reads it after the cluster: not computed)
                continue
            operand = names[id(eqn.invars[0])]
            if kind_of(prim) == ARG_REDUCTION:
                (axis,) = eqn.params["axes"]
                kept = [d for d in range(rank) if d != axis]
                lines = codegen_scan.fused_arg(
                    eqn, k, j, operand, "i" if flat else idx[axis],
                    ", ".join(idx[d] for d in kept) if kept else None,
                    ", ".join(dims[d] for d in kept),
                    row=dims[axis] if not flat and rank >= 2 and axis == rank - 1 else None)
                row_post += lines.row_post
                scalar_out[j] = not kept
                out_exprs[j] = f"r{j}"
            else:
                lines = codegen_scan.fused_cumulative(eqn, k, j, operand, idx, dims, rows)
                out_exprs[j] = f"o{j}"
                if lines.reversed_axis is not None:
                    reversed_dims.add(lines.reversed_axis)
                if lines.helpers:
                    helpers.append(lines.helpers)
                    low = low or np.dtype(out.aval.dtype) in LOW_FLOATS
            pre += lines.pre
            body += lines.body
            post += lines.post
            if lines.value is not None:  # (a sequential scan's value at this element)
                body.append(f"{local} = {lines.value}")
                names[id(out)] = local
                _store(out, local, outputs, out_exprs, scalar_out, rank, flat, body, idx, rows)
            continue
        elif fusion_kind(prim) == REDUCTION:
            operand = names[id(eqn.invars[0])]
            acc_dtype, init, update = reduction(prim, np.dtype(out.aval.dtype))
            axes = sorted(eqn.params["axes"])
            j = outputs.get(id(out))
            if j is None:  # a reduction nobody reads after the cluster: still computed
                j = len(out_exprs)
                out_exprs.append(None)
                scalar_out.append(False)
                out_dtypes.append(np.dtype(out.aval.dtype))
            odt = np.dtype(out.aval.dtype)
            if len(axes) == rank:  # to a scalar: accumulate in a local
                pre.append(f"s{k} = {init}")
                if chunked_sums is not None:   # (the operand kept, accumulated after)
                    local_t = scratch_storage(eqn.invars[0].aval.dtype)
                    pre.append(f"w{k} = np.empty({SUM_CHUNK}, {local_t})")
                    body.append(f"w{k}[i - base] = {operand}")
                    chunked_sums.append(f"s{k} = {update(f's{k}', f'w{k}[q]')}")
                else:
                    body.append(f"s{k} = {update(f's{k}', operand)}")
                # (float16/bfloat16: returned as bits, rounded through float32, reduction())
                post.append(f"r{j} = {LOW_FLOATS[odt]}_bits(np.float32(s{k}))"
                            if odt in LOW_FLOATS else f"r{j} = {_cast(f's{k}', odt)}")
                scalar_out[j] = True
            else:
                kept = [d for d in range(rank) if d not in axes]
                out_dims = ", ".join(dims[d] for d in kept)
                pre.append(f"s{k} = np.full(({out_dims},), {init})")
                at = f"s{k}[{', '.join(idx[d] for d in kept)}]" if kept else f"s{k}[()]"
                in_dtype = np.dtype(eqn.invars[0].aval.dtype)
                if row_wise and _interleaved(eqn, rank) and block > 1:
                    row_pre.append(f"row_w{k} = np.empty(({block}, {dims[-1]}), "
                                   f"{_t(in_dtype)})")
                    row_bind.append(f"row_w{k}_r = row_w{k}[{idx[-2]} - row_lo]")
                    body.append(f"row_w{k}_r[{idx[-1]}] = {operand}")
                    block_post += _block_sums(k, block, init, update, idx, dims)
                elif row_wise and _summed_after_row(eqn, rank):
                    row_pre.append(f"row_w{k} = np.empty({dims[-1]}, {_t(in_dtype)})")
                    body.append(f"row_w{k}[{idx[-1]}] = {operand}")
                    row_post += [f"row_acc{k} = {init}", f"for row_q{k} in range({dims[-1]}):",
                                 f"    row_acc{k} = "
                                 f"{update(f'row_acc{k}', f'row_w{k}[row_q{k}]')}",
                                 f"{at} = row_acc{k}"]
                else:
                    body.append(f"{at} = {update(at, operand)}")
                if odt in LOW_FLOATS:  # each result's bits, rounded through float32
                    post += [f"r{j} = np.empty(s{k}.shape, np.uint16)",
                             f"r{j}_f = r{j}.reshape(s{k}.size)",
                             f"s{k}_f = s{k}.reshape(s{k}.size)",
                             f"for q in range(s{k}.size):",
                             f"    r{j}_f[q] = {LOW_FLOATS[odt]}_bits(np.float32(s{k}_f[q]))"]
                else:
                    post.append(f"r{j} = s{k}.astype({_t(odt)})")
            out_exprs[j] = f"r{j}"
            continue
        elif prim is lax.iota_p:
            iota = _iota(eqn, shape, flat and not indexed, out_params, dims, idx)
            body.append(f"{local} = {iota}")
        else:
            args = [names[id(v)] if id(v) in names else _missing(v) for v in eqn.invars]
            body.append(f"{local} = {elementwise(eqn, args)}")
        names[id(out)] = local
        _store(out, local, outputs, out_exprs, scalar_out, rank, flat, body, idx, rows)

    params = [inp.name for inp in inputs] + dims
    if out_params:
        dims = ["n"]
        params = ([inp.name for inp in inputs] + [f"o{j}" for j in range(len(cluster.outputs))]
                  + dims + (["base"] if has_index else []))
    if into_source:
        params = [inp.name for inp in inputs] + [f"o{j}" for j in given] + dims
    # shapes are static per compiled program, so the variant is chosen here
    parallel = (order_free or by_rows) and (large if parallel is None else parallel)
    options = "_PARALLEL" if parallel else "_OPTIONS"
    if not parallel and _decoded_sums_only(cluster):
        options += ', fastmath={"reassoc"}'  # (see _decoded_sums_only)
    lines = [f"@njit(**{options})", f"def kernel({', '.join(params)}):"]
    lines += ["    " + s for s in pre]
    if rank == 0:
        lines += ["    " + s for s in body]
    elif flat and chunked_sums:   # (serial: it reduces)
        n = " * ".join(dims)
        lines += [f"    for base in range(0, {n}, {SUM_CHUNK}):",
                  f"        end = min(base + {SUM_CHUNK}, {n})",
                  "        for i in range(base, end):"]
        lines += ["            " + s for s in body]
        lines.append("        for q in range(end - base):")
        lines += ["            " + s for s in chunked_sums]
    elif flat:
        loop = "prange" if parallel else "range"
        lines.append(f"    for i in {loop}({' * '.join(dims)}):")
        if indexed:  # the indices from the flat position (never reassigning a name
            # derived from a prange index: numba's parfor pass rejects that)
            for d in range(rank):
                value = "i" if d == rank - 1 else f"i // ({' * '.join(dims[d + 1:])})"
                lines.append(f"        {idx[d]} = {value}" if d == 0 else
                             f"        {idx[d]} = {value} % {dims[d]}")
        lines += ["        " + s for s in body]
    elif indexed and parallel and rank > 2:
        # an indexed loop's rows along several leading axes: threaded as one range of rows
        # (their leading indices from the row's number, once per row), so a (2, 24, 400)
        # loop shares its 48 rows among all the threads, not its 2 outer items
        lead = dims[:-1]
        lines.append(f"    for row in prange({' * '.join(lead)}):")
        for d in range(rank - 1):
            value = "row" if d == rank - 2 else f"row // ({' * '.join(lead[d + 1:])})"
            lines.append(f"        {idx[d]} = {value}" if d == 0 else
                         f"        {idx[d]} = {value} % {dims[d]}")
        lines += ["        " + f"{r}_r = {r}[{', '.join(idx[:-1])}]" for r in rows]
        lines += ["        " + s for s in row_pre]
        lines.append(f"        for {idx[-1]} in range({dims[-1]}):")
        lines += ["            " + s for s in body]
        lines += ["        " + s for s in row_post]
    else:
        depth = 1  # (the indentation of the next line, in levels)
        for d in range(rank):
            extent = (f"{dims[d]} - 1, -1, -1" if d in reversed_dims else dims[d])
            loop = "prange" if d == 0 and parallel else "range"  # (by_rows)
            if d == rank - 2 and block > 1:  # the rows in blocks (row_block)
                at = "    " * depth
                lines += [at + f"for row_b in {loop}(({dims[d]} + {block - 1}) // {block}):",
                          f"{at}    row_lo = row_b * {block}",
                          f"{at}    row_hi = min(row_lo + {block}, {dims[d]})"]
                lines += [at + "    " + s for s in row_pre]
                block_at = at + "    "
                depth += 1
                loop, extent = "range", "row_lo, row_hi"
            lines.append("    " * depth + f"for {idx[d]} in {loop}({extent}):")
            depth += 1
            if d == rank - 2:  # the rows the innermost loop walks, bound once per row
                lines += ["    " * depth + f"{r}_r = {r}[{', '.join(idx[:-1])}]"
                          for r in rows]
                lines += ["    " * depth + s for s in (row_bind if block > 1 else row_pre)]
        lines += ["    " * depth + s for s in body]
        lines += ["    " * (depth - 1) + s for s in row_post]
        if block > 1:
            lines += [block_at + s for s in block_post]
    lines += ["    " + s for s in post]
    if into_source:
        rest = [e for j, e in enumerate(out_exprs) if j not in given]
        lines.append(f"    return ({''.join(e + ', ' for e in rest)})" if rest else "    return 0")
    else:
        lines.append("    return 0" if out_params
                     else f"    return ({''.join(e + ', ' for e in out_exprs)})")
    source = ((_LOW_IMPORT if low else "") + "".join(helpers) + "\n".join(lines) + "\n")
    if into:
        plan = KernelPlan(source, None, None, {}, [e.primitive.name for e in cluster.eqns])
        plan.given = given
        return plan
    if out_params:
        return _preallocated_plan(source, inputs, cluster, shape, out_dtypes, has_index)

    # the wrapper the lowered program calls
    arg_types: list = []
    call: list[str] = []
    for inp in inputs:
        bits = inp.dtype in LOW_FLOATS  # passed as its uint16 bit pattern
        if inp.kind == "scalar":
            call.append(f"_asa({inp.name}).view(_U16)[()]" if bits else f"{inp.name}[()]")
            arg_types.append(("scalar", np.dtype(np.uint16) if bits else inp.dtype))
        else:  # the entry point reads C-contiguous memory: a strided view is copied first
            call.append(f"_asc({inp.name}).view(_U16)" if bits else f"_asc({inp.name})")
            arg_types.append(("array", np.dtype(np.uint16) if bits else inp.dtype, inp.ndim))
    n_out = len(cluster.outputs)
    wrapper_globals = {f"_T{j}": out_dtypes[j].type for j in range(n_out)}
    wrapper_globals.update(_U16=np.uint16, _asa=np.asarray, _empty=np.empty)
    alloc = []  # given_outputs: the buffers the kernel writes, allocated here
    for j in given:
        storage = np.dtype(np.uint16) if out_dtypes[j] in LOW_FLOATS else out_dtypes[j]
        wrapper_globals[f"_S{j}"] = storage
        alloc.append(f"        _o{j} = _empty({shape!r}, _S{j})")
        call.append(f"_o{j}")
        arg_types.append(("array", storage, rank))
    call += [str(n) for n in shape]
    arg_types += [("int",)] * rank
    returned = [j for j in range(len(out_exprs)) if j not in given]  # (the kernel's tuple)
    results = []
    for j in range(n_out):
        r = f"_o{j}" if j in given else f"r[{returned.index(j)}]"
        if out_dtypes[j] in LOW_FLOATS:  # uint16 bits: viewed as the format
            wrapper_globals[f"_D{j}"] = out_dtypes[j]
            results.append(f"_asa({r}, _U16).view(_D{j})[()]" if scalar_out[j]
                           else f"{r}.view(_D{j})")
        else:
            results.append(f"_T{j}({r})" if scalar_out[j] else r)
    wrapper = "\n".join([
        f"def step({', '.join(inp.name for inp in inputs)}):",
        "    if _ready:",
        *alloc,
        f"        r = _kernel({', '.join(call)})",
        f"        return [{', '.join(results)}]",
        f"    return _interp({', '.join(inp.name for inp in inputs)})",
    ]) + "\n"
    plan = KernelPlan(source, wrapper, arg_types, wrapper_globals,
                      [e.primitive.name for e in cluster.eqns])
    plan.given = given
    return plan


#: a threaded nested loop summing along its rows (``row_wise`` in :func:`plan_cluster`) takes
#: up to this many rows at a time, and their scratch rows together at most
#: :data:`ROW_BLOCK_BYTES`: one accumulator per row in one loop, each row's additions in the
#: same order (softmax's ``exp`` and row sums on 1000x1000 float32: 770 -> 540 CPU us; the
#: sums alone were a chain of dependent float64 additions, ~0.6 ns each)
ROW_BLOCK = 8
ROW_BLOCK_BYTES = 1 << 17

#: a serial nested loop sums its rows after each row too (``row_wise`` in
#: :func:`plan_cluster`) where they have at least this many elements (shorter rows gain
#: little from a vectorised loop and pay the scratch rows' setup)
ROW_WISE_MIN = 64


def row_block(cluster, shape: tuple, threaded: bool = True) -> int:
    """How many rows (lines along the last axis) a row-wise threaded loop of ``cluster``
    over ``shape`` sums at once: :data:`ROW_BLOCK`, 4 or 2, the most whose scratch rows fit
    :data:`ROW_BLOCK_BYTES`, no more than the rows along axis -2 (a larger block would
    only ever be partial), and while blocks of the threaded axis (the outermost, for a
    matrix) still number 16 or more; 1: a row at a time, or no floating-point reduction
    along the rows (:func:`_interleaved`)."""
    widest = max((np.dtype(e.invars[0].aval.dtype).itemsize for e in cluster.eqns
                  if fusion_kind(e.primitive) == REDUCTION
                  and _interleaved(e, len(shape))), default=0)
    if not widest:  # no float row summed after the row: nothing to interleave
        return 1
    block = ROW_BLOCK
    while block > 1 and (block * shape[-1] * widest > ROW_BLOCK_BYTES
                         or block > shape[-2]
                         or (threaded and len(shape) == 2 and shape[0] < 16 * block)):
        block //= 2
    return block


def _summed_after_row(eqn, rank: int) -> bool:
    """Whether the reduction ``eqn``, in a row-wise threaded loop over ``rank`` axes
    (``row_wise`` in :func:`plan_cluster`), sums each row after the row from a scratch row:
    it reduces the last axis alone, and its operand is not float16/bfloat16 (those
    accumulate in the row's loop itself). :func:`row_block` sizes the scratch rows of these."""
    return (list(eqn.params["axes"]) == [rank - 1]
            and np.dtype(eqn.invars[0].aval.dtype) not in LOW_FLOATS)


def _interleaved(eqn, rank: int) -> bool:
    """Whether the row reduction ``eqn`` (:func:`_summed_after_row`) is summed a block of
    rows side by side: a float or complex operand, whose row is a chain of dependent
    floating-point operations, each waiting for the last; integer and bool ones (sum, any,
    all) have no such latency to hide and keep a row at a time (fewer lines to compile)."""
    return (_summed_after_row(eqn, rank)
            and np.dtype(eqn.invars[0].aval.dtype).kind in "fc")


def _block_sums(k: int, block: int, init: str, update, idx: list, dims: list) -> list[str]:
    """The lines, after a block of rows, accumulating reduction ``k``'s scratch rows
    ``row_w{k}`` (``block`` of them, the rows ``row_lo`` to ``row_hi``) into ``s{k}``: a
    full block in one loop with an accumulator per row, a last, partial one row by row.
    Either way each row is accumulated from its first element to its last."""
    kept = idx[:-2]  # (the row's own index: row_lo + r)

    def at(r: str) -> str:
        return f"s{k}[{', '.join(kept + [f'row_lo + {r}'])}]"
    acc = [f"row_c{k}_{r}" for r in range(block)]
    q = f"row_q{k}"
    full = ([f"if row_hi - row_lo == {block}:"]
            + [f"    {a} = {init}" for a in acc]
            + [f"    row_w{k}_{r} = row_w{k}[{r}]" for r in range(block)]
            + [f"    for {q} in range({dims[-1]}):"]
            + [f"        {a} = {update(a, f'row_w{k}_{r}[{q}]')}" for r, a in enumerate(acc)]
            + [f"    {at(str(r))} = {a}" for r, a in enumerate(acc)])
    rest = ["else:",
            f"    for row_t{k} in range(row_hi - row_lo):",
            f"        row_acc{k} = {init}",
            f"        for {q} in range({dims[-1]}):",
            f"            row_acc{k} = {update(f'row_acc{k}', f'row_w{k}[row_t{k}, {q}]')}",
            f"        {at(f'row_t{k}')} = row_acc{k}"]
    return full + rest


def _rows_independent(cluster, shape: tuple) -> bool:
    """Whether a nested loop's outermost dimension may run on threads: every reduction
    keeps that axis (each outer index accumulates into its own elements, in the serial
    loop's order, so the results are bit-identical) and nothing scans along it or fixes the
    order across it (arg-reductions' and cumulative ops' carries). Softmax's
    ``exp(x - max)`` and its row sums over a (1000, 1000) array was one serial loop."""
    if len(shape) < 2 or shape[0] < 2:  # (no cumulative op: no loop walks backwards)
        return False
    for eqn in cluster.eqns:
        kind = kind_of(eqn.primitive)
        if kind in (ARG_REDUCTION, CUMULATIVE):
            return False
        if kind == REDUCTION and 0 in eqn.params["axes"]:
            return False
    return True


def _decoded_sums_only(cluster) -> bool:
    """Whether ``cluster`` only decodes float16/bfloat16 values to float32/float64 and sums
    them (``jnp.sum`` of a float16 array: convert, ``reduce_sum``): its kernel may add in any
    order (``fastmath={"reassoc"}``), which lets LLVM vectorise the float64 accumulation
    (4x on a 1M-element sum). The decodes are exact and the float64 sum of float32 values
    rounds through float32 to the narrow format, so the order decides a result's bits only
    where the reference's float32 sum is itself within one unit (see :func:`reduction`).
    Nothing else in such a kernel is a float operation that reassociation could change (the
    narrow format's rounding, ``(x + c) - c`` in ``round_f16``, is never in it)."""
    sums = False
    for eqn in cluster.eqns:
        if eqn.primitive is lax.reduce_sum_p:
            sums = True
        elif eqn.primitive is lax.convert_element_type_p:
            src, dst = (np.dtype(v.aval.dtype) for v in (eqn.invars[0], eqn.outvars[0]))
            if src not in LOW_FLOATS or dst not in (np.float32, np.float64):
                return False
        else:
            return False
    return sums


def broadcast_operands_partial(cluster, shape) -> bool:
    """Whether a ``broadcast_in_dim`` of ``cluster`` reads a non-scalar operand of another
    shape than ``shape`` (a flat loop reads it raveled, which chunking cannot slice)."""
    return any(e.primitive is lax.broadcast_in_dim_p and e.invars[0].aval.shape
               and tuple(e.invars[0].aval.shape) != tuple(shape) for e in cluster.eqns)


def _preallocated_plan(source, inputs, cluster, shape, out_dtypes, index_base: bool
                       ) -> KernelPlan:
    """The plan of a kernel writing into outputs its wrapper allocates (``out_params``);
    with ``index_base``, the kernel's last argument is its first element's flat position."""
    n = math.prod(shape)
    arg_types, call = [], []
    for inp in inputs:
        if inp.kind == "scalar":
            call.append(f"{inp.name}[()]")
            arg_types.append(("scalar", inp.dtype))
        else:
            call.append(f"_asc({inp.name}).reshape({n})")
            arg_types.append(("array", inp.dtype, 1))
    n_out = len(cluster.outputs)
    alloc = [f"        _o{j} = _empty({tuple(shape)!r}, _T{j})" for j in range(n_out)]
    call += [f"_o{j}.reshape({n})" for j in range(n_out)] + [str(n)]
    arg_types += [("array", out_dtypes[j], 1) for j in range(n_out)] + [("int",)]
    if index_base:  # (the whole array: its first element is position 0)
        call.append("0")
        arg_types.append(("int",))
    wrapper_globals = {f"_T{j}": out_dtypes[j] for j in range(n_out)}
    wrapper_globals["_empty"] = np.empty
    wrapper = "\n".join([
        f"def step({', '.join(inp.name for inp in inputs)}):",
        "    if _ready:",
        *alloc,
        f"        _kernel({', '.join(call)})",
        f"        return [{', '.join(f'_o{j}' for j in range(n_out))}]",
        f"    return _interp({', '.join(inp.name for inp in inputs)})",
    ]) + "\n"
    plan = KernelPlan(source, wrapper, arg_types, wrapper_globals,
                      [e.primitive.name for e in cluster.eqns], out_params=True)
    plan.index_base = index_base
    return plan


def _iota(eqn, shape: tuple, flat: bool, out_params: bool, dims: list, idx: list) -> str:
    """``iota``'s value at the loop's current element: its index along ``dimension``. In a
    nested loop that is the loop variable; in a flat loop over ``i`` (``i + base`` over
    chunks, ``out_params``) it is recovered from the flat position, by the extents passed
    to the kernel (the source stays shared across shapes) or, where only ``n`` is passed
    (``out_params``), by the shape's own."""
    dim = int(eqn.params["dimension"])
    t = _t(eqn.outvars[0].aval.dtype)
    if not flat:
        return f"{t}({idx[dim]})"
    pos = "(i + base)" if out_params else "i"
    extents = [str(int(n)) for n in shape] if out_params else dims
    rank = len(shape)
    if rank == 1:
        return f"{t}({pos})"
    value = pos
    if dim < rank - 1:
        value = f"{value} // ({' * '.join(extents[dim + 1:])})"
    if dim > 0:
        value = f"{value} % {extents[dim]}"
    return f"{t}({value})"


def _nested_at(name: str, idx: list, rows: list) -> str:
    """Element ``idx`` of the array ``name`` (of the iteration shape) in a nested loop: of
    rank 2 and more, through the row the innermost loop walks (``{name}_r``, bound once per
    row: a contiguous 1-D view, which LLVM vectorises with one alias check per row instead
    of recomputing 2-D addresses), else by its indices."""
    if len(idx) < 2:
        return f"{name}[{', '.join(idx)}]"
    if name not in rows:
        rows.append(name)
    return f"{name}_r[{idx[-1]}]"


def _load(dtype, element: str) -> str:
    """The value of an array element (or scalar argument) of ``dtype`` in the loop: float16/
    bfloat16 bits decoded to float32 (see :data:`LOW_FLOATS`), other dtypes as they are."""
    return f"{LOW_FLOATS[dtype]}_value({element})" if dtype in LOW_FLOATS else element


def _storage(dtype) -> str:
    """The element type of a kernel-allocated output of ``dtype`` (uint16 bits for the
    16-bit floats)."""
    if dtype in LOW_FLOATS:
        return "np.uint16"
    return _t(dtype) if dtype != np.bool_ else "np.bool_"


def scratch_storage(dtype) -> str:
    """The element type of a scratch array holding a kernel's values of ``dtype`` as it
    computes them (float32 for the 16-bit floats, whose locals are float32)."""
    dtype = np.dtype(dtype)
    return "np.float32" if dtype in LOW_FLOATS else _storage(dtype)


def _store(out, local, outputs, out_exprs, scalar_out, rank, flat, body, idx, rows):
    """Stores the loop's value ``local`` of ``out`` if ``out`` is a cluster output."""
    j = outputs.get(id(out))
    if j is None:
        return
    dtype = np.dtype(out.aval.dtype)
    if dtype in LOW_FLOATS:  # written as its bit pattern
        local = f"{LOW_FLOATS[dtype]}_bits({local})"
    if rank == 0:
        out_exprs[j] = local
        scalar_out[j] = True
    elif flat:
        body.append(f"o{j}_f[i] = {local}")
        out_exprs[j] = f"o{j}"
    else:
        body.append(f"{_nested_at(f'o{j}', idx, rows)} = {local}")
        out_exprs[j] = f"o{j}"


def multi_result(eqn, a: list[str]) -> str:
    """The expression computing all of a multi-result equation's outputs as a tuple (a
    cluster of :func:`plax.lowering.find_clusters` with ``multiple_results``):
    ``threefry2x32``'s two words from its four, all twenty rounds in registers
    (:func:`plax_numba.threefry_kernels.hash_words`, bit-identical to the reference kernel)."""
    if eqn.primitive is lax.threefry2x32_p:
        return f"hash_words({', '.join(f'np.uint32({x})' for x in a)})"
    raise Unsupported(f"{eqn.primitive.name} (several results)")


def _defining(cluster, var):
    for eqn in cluster.eqns:
        if any(o is var for o in eqn.outvars):
            return eqn
    raise AssertionError(f"{var} is not defined in {cluster}")


def _missing(v):
    raise Unsupported(f"operand {v} of shape {v.aval.shape} is not readable in the loop")
