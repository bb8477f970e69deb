"""Shared helpers of the CuPy backend's CPU-side tests: equations and programs to generate
kernels for, NVRTC batches, and running the generated per-element code on the host.

Nothing here needs a GPU. NVRTC needs CuPy and the ``nvidia-cuda-nvrtc-cu12`` wheel; the host
check needs a C++ compiler (g++).
"""
from __future__ import annotations

import ctypes
import re
import shutil

import ml_dtypes
import numpy as np

from plax.core.jaxpr import Jaxpr, JaxprEqn, Literal, Var
from plax.core.shaped_array import ShapedArray
from plax.lowering import Cluster, HorizontalGroup, call_body, fusion_units

from plax_cupy import codegen

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(t) for t in (np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                                np.uint16, np.uint32, np.uint64, np.float16, ml_dtypes.bfloat16,
                                np.float32, np.float64, np.complex64, np.complex128)]
SHAPE = (7, 9)

HAVE_CXX = shutil.which("g++") is not None


def aval(shape, dtype) -> ShapedArray:
    return ShapedArray(tuple(shape), np.dtype(dtype))


def make_eqn(prim, invars, **params) -> JaxprEqn:
    """An equation of ``prim`` on ``invars`` (Vars or Literals), its output typed by the
    primitive's abstract evaluation (which raises for dtypes the primitive does not take)."""
    out = prim.abstract_eval(*[v.aval for v in invars], **params)
    if isinstance(out, (list, tuple)):
        out = out[0]
    return JaxprEqn(prim, list(invars), [Var(out)], params)


# ---------------------------------------------------------------- the equations to cover

def _fusible():
    from plax.lowering import fusion
    # (multi-result primitives, threefry2x32, fuse only where an emitter asks for them,
    # Emitter.fuses_multiple_results; the CuPy generator does not; structural ones only inside
    # a cluster that reads through them: test_codegen_structural.py)
    return sorted(((p, k) for p, k in fusion.fusible_primitives().items()
                   if not p.multiple_results and k != fusion.STRUCTURAL),
                  key=lambda kv: kv[0].name)


UNARY_PARAMS = {"round": [dict(rounding_method=0), dict(rounding_method=1)],
                "integer_pow": [dict(y=y) for y in (0, 1, 2, 3, 5, -1, -2)]}


def primitive_cases():
    """``(case id, equation, expect_supported)`` for every fusible primitive, dtype and
    parameter variant the primitive accepts."""
    from plax.lowering import BROADCAST, INDEX, REDUCTION
    cases = []
    for prim, kind in _fusible():
        name = prim.name
        for d in DTYPES:
            variants = []
            if kind == INDEX:  # iota along each dimension: no operands
                variants = [([], dict(dtype=d, shape=SHAPE, dimension=dim))
                            for dim in range(len(SHAPE))]
            elif kind == REDUCTION:
                variants = [([Var(aval(SHAPE, d))], dict(axes=axes)) for axes in ((0, 1), (0,), (1,))]
            elif kind == BROADCAST:
                variants = [([Var(aval((9,), d))], dict(shape=SHAPE, broadcast_dimensions=(1,))),
                            ([Var(aval((7, 1), d))], dict(shape=SHAPE, broadcast_dimensions=(0, 1))),
                            ([Var(aval((), d))], dict(shape=SHAPE, broadcast_dimensions=()))]
            elif name == "convert_element_type":
                variants = [([Var(aval(SHAPE, d))], dict(new_dtype=t, weak_type=False))
                            for t in DTYPES]
            elif name == "bitcast_convert_type":
                variants = [([Var(aval(SHAPE, d))], dict(new_dtype=t)) for t in DTYPES
                            if t.itemsize == d.itemsize]
            elif name == "select_n":
                variants = [([Var(aval(SHAPE, np.bool_)), Var(aval(SHAPE, d)), Var(aval(SHAPE, d))], {}),
                            ([Var(aval(SHAPE, np.int32))] + [Var(aval(SHAPE, d)) for _ in range(3)], {})]
            elif name == "clamp":
                variants = [([Var(aval(SHAPE, d)) for _ in range(3)], {})]
            elif name == "complex":
                variants = [([Var(aval(SHAPE, d)), Var(aval(SHAPE, d))], {})]
            else:
                arity = _arity(prim)
                for params in UNARY_PARAMS.get(name, [{}]):
                    variants.append(([Var(aval(SHAPE, d)) for _ in range(arity)], params))
                if arity == 2 and d in (np.float32, np.int32):  # a literal operand, by value
                    lit = Literal(np.asarray(2, d)[()], aval((), d))
                    variants.append(([Var(aval(SHAPE, d)), lit], {}))
            for k, (invars, params) in enumerate(variants):
                try:
                    eqn = make_eqn(prim, invars, **params)
                except (TypeError, ValueError):
                    continue  # the primitive does not take this dtype
                supported = _expect_supported(eqn)
                cases.append((f"{name}-{d}-{k}", eqn, supported))
    return cases


BINARY = {"add", "add_any", "sub", "mul", "div", "rem", "pow", "max", "min", "atan2", "nextafter",
          "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "shift_left",
          "shift_right_logical", "shift_right_arithmetic", "complex"}


#: the special functions of more than one operand
SPECIAL_ARITY = {"igamma": 2, "igammac": 2, "igamma_grad_a": 2, "random_gamma_grad": 2,
                 "zeta": 2, "polygamma": 2, "regularized_incomplete_beta": 3, "fma": 3}


def _arity(prim) -> int:
    return 2 if prim.name in BINARY else SPECIAL_ARITY.get(prim.name, 1)


#: complex primitives the generator declines: the max/min reductions, whose JAX order (a tie
#: gives the later operand, NaN never wins) is not associative, so they fold in element order
#: in the kernel table's kernels (``codegen.Reduction.folds_in_order``); every other fusible
#: primitive takes complex values, the inverse trigonometric/hyperbolic functions included
COMPLEX_DECLINED: set = {"reduce_max", "reduce_min"}


def _expect_supported(eqn) -> bool:
    """Whether the generator must handle ``eqn``: every fusible primitive on every dtype it
    takes (:data:`COMPLEX_DECLINED` lists the exceptions on complex values,
    ``plax_cupy.codegen.WITHOUT_DEVICE_FORM`` the primitives with no device form yet)."""
    from plax_cupy.codegen import WITHOUT_DEVICE_FORM
    if eqn.primitive.name in WITHOUT_DEVICE_FORM:
        return False
    dts = [np.dtype(v.aval.dtype) for v in list(eqn.invars) + list(eqn.outvars)]
    if any(d.kind == "c" for d in dts) and eqn.primitive.name in COMPLEX_DECLINED:
        return False
    return True


# ---------------------------------------------------------------- programs

def inline_calls(jaxpr: Jaxpr) -> Jaxpr:
    """``jaxpr`` with every call equation (``jit``) replaced by its body, as the lowering
    driver does for calls the emitter declines (the CuPy emitter declines them all)."""
    eqns: list = []
    env: dict = {}

    def sub(v):
        return env.get(v, v) if isinstance(v, Var) else v

    def add(eqn):
        body = call_body(eqn)
        if body is None:
            eqns.append(JaxprEqn(eqn.primitive, [sub(v) for v in eqn.invars], eqn.outvars, eqn.params))
            return
        inner = body.jaxpr
        local = {v: Literal(c, v.aval) for v, c in zip(inner.constvars, body.consts)}
        local.update(zip(inner.invars, [sub(v) for v in eqn.invars]))
        for ie in inner.eqns:
            outs = [Var(v.aval) for v in ie.outvars]
            ins = [local.get(v, v) if isinstance(v, Var) else v for v in ie.invars]
            local.update(zip(ie.outvars, outs))
            add(JaxprEqn(ie.primitive, ins, outs, ie.params))
        for outer, out in zip(eqn.outvars, inner.outvars):
            env[outer] = sub(local.get(out, out)) if isinstance(out, Var) else out

    for e in jaxpr.eqns:
        add(e)
    return Jaxpr(jaxpr.constvars, jaxpr.invars, [sub(v) for v in jaxpr.outvars], eqns)


def units_of(jaxpr: Jaxpr) -> list:
    """The clusters and lone equations of ``jaxpr`` as the lowering hands them to the CuPy
    emitter (:func:`plax.lowering.fusion_units`, calls inlined first), each horizontal group
    replaced by its units (what the lowering runs where a group is declined;
    :func:`groups_of` gives the groups)."""
    out: list = []
    for unit in _fusion_units(jaxpr):
        out.extend(unit.units if isinstance(unit, HorizontalGroup) else [unit])
    return out


def clusters_of(jaxpr: Jaxpr) -> list:
    """The fusion clusters of ``jaxpr`` as the lowering forms them for the CuPy emitter
    (:func:`units_of`), a horizontal group's member clusters included."""
    return [u for u in units_of(jaxpr) if isinstance(u, Cluster)]


def groups_of(jaxpr: Jaxpr) -> list:
    """The horizontal groups (:class:`plax.lowering.HorizontalGroup`) the lowering forms in
    ``jaxpr`` for the CuPy emitter."""
    return [u for u in _fusion_units(jaxpr) if isinstance(u, HorizontalGroup)]


def _fusion_units(jaxpr: Jaxpr) -> list:
    from plax_cupy.emitter import CupyEmitter
    return fusion_units(inline_calls(jaxpr), CupyEmitter)


# ---------------------------------------------------------------- batching for NVRTC / g++

_ENTRY = re.compile(r"\b(plax_elem(?:_m\d+)?|plax_epilogue|plax_elementwise|plax_reduce|plax_multi|plax_host)\b")


def batch_source(sources: list[str]) -> tuple[str, list[str]]:
    """One translation unit holding many generated kernels: the shared preamble once, each
    kernel's own names suffixed ``_k<i>``. Returns the source and each kernel's suffix."""
    parts, suffixes = [codegen.PREAMBLE], []
    for i, src in enumerate(sources):
        assert src.startswith(codegen.PREAMBLE)
        body = src[len(codegen.PREAMBLE):]
        parts.append(_ENTRY.sub(lambda m: f"{m.group(1)}_k{i}", body))
        suffixes.append(f"_k{i}")
    return "\n".join(parts), suffixes


# ---------------------------------------------------------------- running plax_host

_CTYPES = {np.dtype(np.bool_): ctypes.c_bool, np.dtype(np.int8): ctypes.c_int8,
           np.dtype(np.int16): ctypes.c_int16, np.dtype(np.int32): ctypes.c_int32,
           np.dtype(np.int64): ctypes.c_int64, np.dtype(np.uint8): ctypes.c_uint8,
           np.dtype(np.uint16): ctypes.c_uint16, np.dtype(np.uint32): ctypes.c_uint32,
           np.dtype(np.uint64): ctypes.c_uint64, np.dtype(np.float32): ctypes.c_float,
           np.dtype(np.float64): ctypes.c_double}


def run_host(plan: codegen.ClusterKernel, fn, operands: list) -> list:
    """Runs ``plax_host`` (``fn``, from the g++-built library) of ``plan`` on NumPy operands
    (one per cluster input); returns the cluster's outputs as NumPy arrays."""
    args, argtypes, keep, outs = [], [], [], []
    _member_args(plan, operands, args, argtypes, keep, outs)
    if not plan.reductions:
        args.append(plan.n)
        argtypes.append(ctypes.c_longlong)
    else:
        for j in plan.final_outputs:
            outs[j] = np.empty(plan.out_shapes[j], plan.out_dtypes[j])
            args.append(outs[j].ctypes.data)
            argtypes.append(ctypes.c_void_p)
        args += [plan.n_out, plan.n_red]
        argtypes += [ctypes.c_longlong, ctypes.c_longlong]
    fn.argtypes = argtypes
    fn.restype = None
    fn(*args)
    return outs


def run_group_host(plan: codegen.GroupKernel, fn, operands: list) -> list:
    """Runs ``plax_host`` (``fn``) of a multi-tensor kernel on NumPy operands (per member, one
    per member input); returns every member's outputs, member after member."""
    args, argtypes, keep, outs = [], [], [], []
    for member, ops in zip(plan.members, operands):
        _member_args(member, ops, args, argtypes, keep, outs)
    args.append(plan.n)
    argtypes.append(ctypes.c_longlong)
    fn.argtypes = argtypes
    fn.restype = None
    fn(*args)
    return outs


def _member_args(plan, operands, args, argtypes, keep, outs) -> None:
    """Appends the host arguments of ``plan``'s inputs and elementwise outputs (made here and
    appended to ``outs``, indexed as the cluster's outputs)."""
    for inp, x in zip(plan.inputs, operands):
        x = np.asarray(x, inp.dtype)
        if inp.kind == "literal":
            args.append(_CTYPES[inp.dtype](np.asarray(inp.value, inp.dtype)[()].item()))
            argtypes.append(_CTYPES[inp.dtype])
        else:
            a = np.ascontiguousarray(x).reshape(-1) if x.size else np.zeros(1, inp.dtype)
            keep.append(a)
            args.append(a.ctypes.data)
            argtypes.append(ctypes.c_void_p)
    mine = [None] * len(plan.out_dtypes)
    for j in plan.elem_outputs:
        mine[j] = np.empty(plan.out_shapes[j], plan.out_dtypes[j])
        args.append(mine[j].ctypes.data)
        argtypes.append(ctypes.c_void_p)
    outs.extend(mine)


# ---------------------------------------------------------------- operands and comparison

def operand(rng, shape, dtype, role: str = "x") -> np.ndarray:
    """Random values of ``dtype`` with the special values mixed in (zeros, -1, extremes;
    NaN, infinities, signed zeros and ties for floats). ``role="shift"`` gives shift amounts
    around the bit width, ``"which"`` valid select indices."""
    dtype = np.dtype(dtype)
    size = int(np.prod(shape))
    if role == "which":
        return rng.integers(0, 3 if dtype != np.bool_ else 2, size=shape).astype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if role == "shift" and dtype.kind in "iu":
        bits = dtype.itemsize * 8
        lo = -2 if dtype.kind == "i" else 0
        return rng.integers(lo, bits + 3, size=shape).astype(dtype)
    if dtype.kind == "c":
        # parts from the real generator, made finite: pow, division and products follow their
        # formulas, not C99 Annex G, for infinite and NaN parts (codegen's module doc; the
        # functions' special values are checked in test_codegen_types.py)
        part = np.dtype(np.float32 if dtype == np.complex64 else np.float64)
        re, im = (np.nan_to_num(operand(rng, shape, part, role), nan=0.5, posinf=3.0, neginf=-2.0)
                  for _ in range(2))
        re, im = (np.where(np.abs(p) > 1e20, p * 1e-28, p).astype(part) for p in (re, im))
        out = np.empty(shape, dtype)
        out.real, out.imag = re, im
        return out
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        vals = rng.integers(info.min, info.max, size=size, dtype=dtype, endpoint=True)
        small = rng.integers(max(info.min, -6), 7, size=size).astype(dtype)
        vals = np.where(rng.random(size) < 0.5, small, vals)
        specials = np.array([0, 1, info.max, info.min] + ([-1] if dtype.kind == "i" else []), dtype)
        return _scatter(rng, vals, specials).reshape(shape)
    vals = rng.uniform(-4, 4, size).astype(dtype)
    vals = np.where(rng.random(size) < 0.2, (rng.integers(-8, 9, size) / 2).astype(dtype), vals)
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -2.5, 1.0, -1.0, 1e30, -1e-30]
    if dtype.itemsize == 2:  # float16/bfloat16: their own extremes and subnormals
        fi = ml_dtypes.finfo(dtype)
        specials += [float(fi.max), -float(fi.smallest_subnormal), float(fi.smallest_normal)]
    with np.errstate(over="ignore"):  # 1e30 is infinite in float16
        specials = np.array(specials, np.float64).astype(dtype)
    return _scatter(rng, vals, specials).reshape(shape)


def _scatter(rng, vals, specials):
    """``vals`` with the ``specials`` written at random places (so two operands pair different
    special values)."""
    n = min(len(specials), vals.size)
    if n:
        vals[rng.choice(vals.size, size=n, replace=False)] = specials[:n]
    return vals


def operands_for(eqn, rng) -> list:
    name = eqn.primitive.name
    if name in SPECIAL_ARITY:
        return _special_operands(eqn)
    out = []
    for k, v in enumerate(eqn.invars):
        if isinstance(v, Literal):
            out.append(np.asarray(v.val, v.aval.dtype))
            continue
        role = "x"
        if name.startswith("shift") and k == 1:
            role = "shift"
        if name == "select_n" and k == 0:
            role = "which"
        out.append(operand(rng, v.aval.shape, v.aval.dtype, role))
    return out


def _special_operands(eqn) -> list:
    """Operands of the special functions of several operands: :func:`operand`'s, magnitudes
    above 1e6 brought to 1e6 (NaN, infinities, zeros and signs kept). Beyond, the float32 and
    half-type reference kernels overflow inside their own iterations (a gamma derivative of
    3e38 is 0 there); tests/cupy/test_codegen_special_iterative.py checks those edges against
    float64. Their own generator, so the other primitives' operands stay as they were."""
    rng = np.random.default_rng(len(eqn.invars))
    out = []
    for v in eqn.invars:
        if isinstance(v, Literal):
            out.append(np.asarray(v.val, v.aval.dtype))
            continue
        x = operand(rng, v.aval.shape, v.aval.dtype).astype(np.float64)
        with np.errstate(invalid="ignore"):
            x = np.where(np.isfinite(x) & (np.abs(x) > 1e6), np.copysign(1e6, x), x)
        out.append(x.astype(v.aval.dtype))
    return out


def reference(eqn, operands):
    """The NumPy backend's kernel of ``eqn`` on ``operands``."""
    import plax_numpy
    fn = plax_numpy.impls()[eqn.primitive]
    with np.errstate(all="ignore"):
        return np.asarray(fn(*operands, **eqn.params))


#: float32 tolerance per primitive where libm implementations legitimately differ by more
#: than a few ulps (near poles and zeros)
LOOSE = {"lgamma": 1e-4, "tan": 1e-5, "pow": 1e-5, "erfc": 1e-5, "acosh": 1e-5, "atanh": 1e-5,
         "expm1": 1e-5, "cbrt": 1e-6, "erf_inv": 1e-5}


#: relative tolerance per dtype: a few ulps (float16 and bfloat16 results are float32 results
#: rounded to the type, so a float32 ulp of difference may become one of theirs)
RTOL = {np.dtype(np.float16): 2e-3, BF16: 1.6e-2, np.dtype(np.float32): 3e-6,
        np.dtype(np.float64): 1e-13, np.dtype(np.complex64): 1e-5, np.dtype(np.complex128): 1e-12}


def assert_matches(got, want, name: str, dtype) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, got.dtype, want.shape, want.dtype)
    if got.dtype.kind == "c":
        _assert_complex_close(got, want, name)
        return
    if got.dtype.kind != "f" and got.dtype != BF16:
        np.testing.assert_array_equal(got, want, err_msg=name)
        return
    if got.dtype.itemsize == 2:
        rtol = max(RTOL[got.dtype], LOOSE.get(name, 0.0))
        tiny = float(ml_dtypes.finfo(got.dtype).smallest_normal) * 2
        np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=rtol,
                                   atol=tiny, equal_nan=True, err_msg=name)
        return
    rtol = 3e-6 if got.dtype == np.float32 else 1e-13
    rtol = max(rtol, LOOSE.get(name, 0.0) if got.dtype == np.float32 else LOOSE.get(name, 0.0) * 1e-7)
    tiny = np.finfo(got.dtype).tiny * 16
    np.testing.assert_allclose(got, want, rtol=rtol, atol=tiny, equal_nan=True, err_msg=name)


def _assert_complex_close(got, want, name: str) -> None:
    """Complex results: finite ones within a few ulps of the value's magnitude (a part much
    smaller than the other may differ relatively more, as between C libraries), non-finite
    ones part by part (equal infinities, NaN where NaN)."""
    rtol = max(RTOL[got.dtype], LOOSE.get(name, 0.0) if got.dtype == np.complex64 else 0.0)
    atol = np.finfo(got.real.dtype).tiny * 16
    finite = np.isfinite(want)
    err = np.abs(got[finite].astype(np.complex128) - want[finite])
    bound = rtol * np.abs(want[finite].astype(np.complex128)) + atol
    bad = ~(err <= bound)
    assert not bad.any(), (f"{name}: {bad.sum()} of {bad.size} differ: got {got[finite][bad][:5]}, "
                           f"want {want[finite][bad][:5]}")
    for part in (np.real, np.imag):  # (a finite part beside an infinite one: to rtol)
        g, w = part(got[~finite]), part(want[~finite])
        np.testing.assert_array_equal(np.isfinite(g), np.isfinite(w), err_msg=name)
        np.testing.assert_array_equal(g[~np.isfinite(w)], w[~np.isfinite(w)], err_msg=name)
        np.testing.assert_allclose(g[np.isfinite(w)], w[np.isfinite(w)], rtol=rtol, atol=atol,
                                   err_msg=name)
