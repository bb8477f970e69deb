"""Spec of dot_general: contracting and batch dimensions in any position, empty contractions,
rank-0 operands, operands of two dtypes (int8/float16/bfloat16 x float32), and
``preferred_element_type`` (integer accumulation wraps in the preferred
type). The reference is an exact Python-integer or float64/complex128 batched matmul."""
from __future__ import annotations

import math

import numpy as np

from plax import lax
from plax.lax.dot import dot_result_dtype

from .harness import BOOL, NUM, Case, GradCase, Spec, dt, f64, pyints, rand, wrap

SPECS: list[Spec] = []

# (lhs shape, rhs shape, ((lhs_contract, rhs_contract), (lhs_batch, rhs_batch)))
DOT_CONFIGS = [
    ((2, 3), (3, 4), (((1,), (0,)), ((), ()))),
    ((3,), (3,), (((0,), (0,)), ((), ()))),
    ((2, 3, 4), (2, 4, 5), (((2,), (1,)), ((0,), (0,)))),
    ((2, 3, 4), (4, 3, 5), (((1, 2), (1, 0)), ((), ()))),
    ((2, 3), (4,), (((), ()), ((), ()))),
    ((), (3,), (((), ()), ((), ()))),
    ((2, 0), (0, 3), (((1,), (0,)), ((), ()))),
    ((3, 2, 4), (4, 5, 3), (((2,), (0,)), ((0,), (2,)))),
    ((4, 3), (4,), (((0,), (0,)), ((), ()))),
    ((0, 3), (3, 2), (((1,), (0,)), ((), ()))),
]


def _free(ndim, contract, batch):
    return [i for i in range(ndim) if i not in contract and i not in batch]


def dot_ref(lhs, rhs, *, dimension_numbers, preferred_element_type, **_):
    """dot_general as a batched matmul over exact integers or float64/complex128."""
    (lc, rc), (lb, rb) = dimension_numbers
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    d = dot_result_dtype(lhs.dtype, rhs.dtype)  # operands of two dtypes: the wider one's
    out_d = dt(preferred_element_type) if preferred_element_type is not None else d
    lf, rf = _free(lhs.ndim, lc, lb), _free(rhs.ndim, rc, rb)
    nb = math.prod(lhs.shape[i] for i in lb)
    m, k = math.prod(lhs.shape[i] for i in lf), math.prod(lhs.shape[i] for i in lc)
    n = math.prod(rhs.shape[i] for i in rf)
    exact = d.kind in "iub"
    widen = pyints if exact else f64
    a = widen(np.transpose(lhs, list(lb) + lf + list(lc))).reshape(nb, m, k)
    b = widen(np.transpose(rhs, list(rb) + list(rc) + rf)).reshape(nb, k, n)
    out = np.empty((nb, m, n), object if exact else np.result_type(a.dtype, b.dtype))
    for i in range(nb):
        for j in range(m):
            for l in range(n):
                out[i, j, l] = sum((a[i, j, t] * b[i, t, l] for t in range(k)), start=0)
    shape = [lhs.shape[i] for i in lb] + [lhs.shape[i] for i in lf] + [rhs.shape[i] for i in rf]
    out = out.reshape(shape)
    if d == np.bool_:
        return (out != 0) if out_d == np.bool_ else out.astype(np.float64)
    if d.kind == "c" and out_d.kind != "c":  # a real preferred type: the real part (JAX 0.10)
        return out.real
    if exact and out_d.kind in "iu":
        return wrap(out, out_d)
    return out.astype(np.float64) if exact else out


def _pet_for(d):
    """Wider preferred element types that are valid for operand dtype ``d``."""
    return {"int8": ("int32",), "uint8": ("uint32",), "int16": ("int32", "float32"),
            "float16": ("float32",), "bfloat16": ("float32",), "float32": ("float64",),
            "complex64": ("complex128", "float32"), "complex128": ("float64",)}.get(d.name, ())


def _dot_cases(d):
    def sample_of(ls, rs):
        def sample(rng):
            if d.kind in "iub":
                return [rand(rng, ls, d, -4, 4), rand(rng, rs, d, -4, 4)]
            return [rand(rng, ls, d, -2, 2), rand(rng, rs, d, -2, 2)]
        return sample

    out = []
    for ls, rs, dn in DOT_CONFIGS:
        p = dict(dimension_numbers=dn, precision=None, preferred_element_type=None)
        out.append(Case(p, sample_of(ls, rs), (lambda p: lambda a, b: dot_ref(a, b, **p))(p),
                        f"{list(ls)}x{list(rs)} {dn}", tol_scale=4))
    for pet in _pet_for(d):
        for ls, rs, dn in DOT_CONFIGS[:3]:
            p = dict(dimension_numbers=dn, precision=None, preferred_element_type=dt(pet))
            # complex operands, a real result: JAX's transpose keeps the real part of the
            # cotangent product too, not the adjoint of taking a real part, so the
            # linearization check (which assumes one) is left out; tests/lax/
            # test_dot_complex_real.py checks the cotangents beside JAX instead
            drop_real = d.kind == "c" and dt(pet).kind != "c"
            out.append(Case(p, sample_of(ls, rs), (lambda p: lambda a, b: dot_ref(a, b, **p))(p),
                            f"{list(ls)}x{list(rs)} -> {pet}", tol_scale=4,
                            grad_operands=() if drop_real else None))
    if d == np.float32:  # operands of two dtypes, as JAX accepts: both converted
        for other in ("int8", "float16", "bfloat16"):
            for ls, rs, dn in DOT_CONFIGS[:3]:
                p = dict(dimension_numbers=dn, precision=None, preferred_element_type=None)
                o = dt(other)
                out.append(Case(p, (lambda ls, rs, o: lambda rng: [
                    rand(rng, ls, o, -2, 2), rand(rng, rs, d, -2, 2)])(ls, rs, o),
                    (lambda p: lambda a, b: dot_ref(a, b, **p))(p),
                    f"{other}{list(ls)}x{d.name}{list(rs)}", tol_scale=4,
                    grad_operands=(1,)))  # a 16-bit cotangent is rounded: checked in float32
    if d.kind in "iu":  # wrap-around accumulation: large values
        ls, rs, dn = DOT_CONFIGS[0]
        p = dict(dimension_numbers=dn, precision=None, preferred_element_type=None)
        big = np.iinfo(d).max // 3
        out.append(Case(p, lambda rng: [rand(rng, ls, d, big // 2, big), rand(rng, rs, d, 2, 5)],
                        lambda a, b: dot_ref(a, b, **p), "overflow wraps"))
    return out


def _dot_grads():
    rng = np.random.default_rng(0)
    out = []
    for ls, rs, dn in DOT_CONFIGS[:6] + DOT_CONFIGS[7:9]:
        p = dict(dimension_numbers=dn, precision=None, preferred_element_type=None)
        out.append(GradCase((lambda p: lambda a, b: lax.dot_general_p.bind(a, b, **p))(p),
                            (rand(rng, ls, np.float32), rand(rng, rs, np.float32)), label=str(dn)))
    p = dict(dimension_numbers=DOT_CONFIGS[0][2], precision=None, preferred_element_type=dt("float64"))
    out.append(GradCase(lambda a, b: lax.dot_general_p.bind(a, b, **p),
                        (rand(rng, (2, 3), np.float32), rand(rng, (3, 4), np.float32)), x64=True,
                        label="preferred float64"))
    out.append(GradCase(lambda a, b: lax.dot_general_p.bind(a, b, **dict(p, preferred_element_type=None)),
                        (rand(rng, (2, 3), np.complex64), rand(rng, (3, 4), np.complex64)),
                        label="complex"))
    return out


SPECS.append(Spec(lax.dot_general_p, BOOL + NUM, _dot_cases, grads=_dot_grads))
