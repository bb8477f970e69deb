"""Specs of the reductions (reduce_sum/prod/max/min/and/or/xor, argmax/argmin), the cumulative
primitives (cumsum/cumprod/cummax/cummin with ``reverse``) and sort. References reduce one row
at a time in float64 or exact Python integers; max/min propagate NaN, argmax/argmin pick the
first NaN, sort puts NaN last and is stable."""
from __future__ import annotations

import functools
import math

import numpy as np

from plax import lax

from .harness import (ALL, BOOL_OR_INT, COMPLEX, INT, NUM, ORDERED, Case, GradCase, Spec, dt,
                      f64, pyints, rand, rand_bits, rand_distinct, wrap, zero_ordered_gt)
from .spec_shape import values

SPECS: list[Spec] = []

REDUCE_CONFIGS = [((2, 3), (0,)), ((2, 3), (1,)), ((2, 3), (0, 1)), ((2, 3), ()), ((), ()),
                  ((0, 3), (0,)), ((0, 3), (1,)), ((2, 3, 4), (0, 2)), ((7,), (0,))]

NANS = np.array([[1.0, np.nan, 3.0, -np.inf], [np.inf, 2.0, -1.0, 0.5], [np.nan, np.nan, 1, 2]])
# XLA orders -0 below +0 in max/min: each row and column has a zero maximum or minimum of
# either sign (the shape of NANS, so the programs compiled for it run these too)
SIGNED_ZEROS = np.array([[0.0, -0.0, -0.0, -1.0], [-0.0, -1.0, -0.0, -2.0], [0.0, 2.0, 0.0, 3.0]])


def rows(x, axes):
    """``x`` with the reduced ``axes`` flattened into one last axis (kept axes first)."""
    x = np.asarray(x)
    kept = [i for i in range(x.ndim) if i not in axes]
    moved = np.transpose(x, kept + list(axes))
    return moved.reshape(tuple(x.shape[i] for i in kept) + (math.prod(x.shape[i] for i in axes),))


def reduce_rows(x, axes, fn, out_dtype=object):
    r = rows(x, axes)
    out = np.empty(r.shape[:-1], out_dtype)
    for idx in np.ndindex(*r.shape[:-1]):
        out[idx] = fn(list(r[idx]))
    return out


def _is_nan(v) -> bool:
    return isinstance(v, (float, complex, np.floating, np.complexfloating)) and v != v


def _best(vals, better, identity):
    """The extreme of ``vals`` under ``better``; NaN wins as soon as it appears."""
    acc = identity
    for v in vals:
        if _is_nan(v):
            return v
        if better(v, acc):
            acc = v
    return acc


def _lex_gt(a, b):
    if isinstance(a, complex) or isinstance(b, complex):
        a, b = complex(a), complex(b)
        return (a.real, a.imag) > (b.real, b.imag)
    return a > b


def _lex_lt(a, b):
    return _lex_gt(b, a)


def _ordered_gt(a, b):
    """max's order: lexicographic for complex, ``-0.0 < +0.0`` for floats (argmax's
    :func:`_lex_gt` takes the zeros as equal, as JAX's argmax does)."""
    if isinstance(a, complex) or isinstance(b, complex):
        return _lex_gt(a, b)
    return zero_ordered_gt(a, b)


def _ordered_lt(a, b):
    return _ordered_gt(b, a)


def _identity_max(d):
    if d == np.bool_:
        return False
    if d.kind in "iu":
        return int(np.iinfo(d).min)
    return complex(-np.inf) if d.kind == "c" else -np.inf


def _identity_min(d):
    if d == np.bool_:
        return True
    if d.kind in "iu":
        return int(np.iinfo(d).max)
    return complex(np.inf) if d.kind == "c" else np.inf


def _scalars(x, d):
    """Python scalars for a reference: exact ints, float64/complex128 floats."""
    return pyints(x) if d.kind in "iub" else f64(x).astype(object)


def _reduce_spec(prim, dtypes, fn_of_dtype, *, lo=-3, hi=3, grads=None, nondiff=False,
                 specials=False, vmap_dtype=None):
    """``fn_of_dtype(d)`` is the row reducer over Python scalars; floats are drawn from
    ``[lo, hi)``, integers from their whole range."""
    def cases(d):
        fn = fn_of_dtype(d)
        def ref(x, axes):
            r = reduce_rows(_scalars(x, d), axes, fn)
            if d.kind in "iu":
                return wrap(r, d)
            if d == np.bool_:
                return r.astype(bool)
            return r.astype(np.complex128 if d.kind == "c" else np.float64)
        def gen(rng, s):
            return values(rng, s, d) if d.kind in "iub" else rand(rng, s, d, lo, hi)
        out = [Case({"axes": axes}, lambda rng, s=s: [gen(rng, s)],
                    (lambda axes: lambda x: ref(x, axes))(axes), f"{list(s)} axes={axes}", tol_scale=4)
               for s, axes in REDUCE_CONFIGS]
        if specials and (d.kind == "f" or d.name == "bfloat16"):
            out += [Case({"axes": axes}, lambda rng, a=a: [a.astype(d)],
                         (lambda axes: lambda x: ref(x, axes))(axes), f"{what} axes={axes}",
                         vmap=False, exact_bits=True)
                    for axes in ((0,), (1,)) for a, what in ((NANS, "NaN"),
                                                             (SIGNED_ZEROS, "signed zeros"))]
        return out
    spec = Spec(prim, dtypes, cases, grads=grads, nondiff=nondiff, vmap_dtype=vmap_dtype)
    SPECS.append(spec)
    return spec


def _sum(vals):
    return sum(vals, start=0)


def _prod(vals):
    return functools.reduce(lambda a, b: a * b, vals, 1)


def _reduce_grads(prim, configs=REDUCE_CONFIGS[:4] + REDUCE_CONFIGS[7:8], distinct=False, lo=-2, hi=2):
    def grads():
        rng = np.random.default_rng(0)
        out = []
        for s, axes in configs:
            x = rand_distinct(rng, s, np.float32, lo, hi) if distinct else rand(rng, s, np.float32, lo, hi)
            out.append(GradCase((lambda axes: lambda x: prim.bind(x, axes=axes))(axes), (x,),
                                label=f"{s} {axes}"))
        return out
    return grads


_reduce_spec(lax.reduce_sum_p, NUM, lambda d: _sum, grads=_reduce_grads(lax.reduce_sum_p))
_reduce_spec(lax.reduce_prod_p, NUM, lambda d: _prod, lo=0.5, hi=1.5,
             grads=_reduce_grads(lax.reduce_prod_p, lo=0.5, hi=1.5))


def _zeros_prod_grads():
    x = np.array([[0.0, 1.5, 2.0], [0.0, 0.0, 3.0]], np.float32)
    return GradCase(lambda x: lax.reduce_prod_p.bind(x, axes=(1,)), (x,), label="zeros")


SPECS[-1].grads = (lambda g: lambda: g() + [_zeros_prod_grads()])(SPECS[-1].grads)

_reduce_spec(lax.reduce_max_p, ORDERED + COMPLEX,
             lambda d: lambda v: _best(v, _ordered_gt, _identity_max(d)), specials=True,
             grads=_reduce_grads(lax.reduce_max_p, distinct=True))
_reduce_spec(lax.reduce_min_p, ORDERED + COMPLEX,
             lambda d: lambda v: _best(v, _ordered_lt, _identity_min(d)), specials=True,
             grads=_reduce_grads(lax.reduce_min_p, distinct=True))
_reduce_spec(lax.reduce_and_p, BOOL_OR_INT,
             lambda d: lambda v: functools.reduce(lambda a, b: a & b, v, True if d == np.bool_ else -1),
             nondiff=True, vmap_dtype="int32")
_reduce_spec(lax.reduce_or_p, BOOL_OR_INT,
             lambda d: lambda v: functools.reduce(lambda a, b: a | b, v, False if d == np.bool_ else 0),
             nondiff=True, vmap_dtype="int32")
_reduce_spec(lax.reduce_xor_p, BOOL_OR_INT,
             lambda d: lambda v: functools.reduce(lambda a, b: a ^ b, v, False if d == np.bool_ else 0),
             nondiff=True, vmap_dtype="int32")


# ------------------------------------------------------------------ argmax / argmin

ARG_CONFIGS = [((2, 3), 0, "int32"), ((2, 3), 1, "int32"), ((7,), 0, "int16"), ((0, 3), 1, "int32"),
               ((3, 4, 2), 1, "uint8"), ((1,), 0, "int32")]


def _arg_ref(better):
    def ref(x, axis, index_dtype, d):
        def pick(vals):
            best, where = None, 0
            for i, v in enumerate(vals):
                if _is_nan(v):
                    return i  # the first NaN wins
                if best is None or better(v, best):
                    best, where = v, i
            return where
        return reduce_rows(_scalars(x, d), (axis,), pick).astype(dt(index_dtype))
    return ref


def _arg_spec(prim, better):
    ref = _arg_ref(better)

    def cases(d):
        def small(rng, s):  # few distinct values, so that ties occur
            return rand(rng, s, d, -2, 2) if d.kind in "iub" else np.round(rand(rng, s, np.float64, -2, 2)).astype(d)
        out = [Case({"axes": (a,), "index_dtype": dt(idt)}, lambda rng, s=s: [small(rng, s)],
                    (lambda a, idt: lambda x: ref(x, a, idt, d))(a, idt), f"{list(s)} axis={a} {idt}")
               for s, a, idt in ARG_CONFIGS]
        if d.kind == "f" or d.name == "bfloat16":
            out += [Case({"axes": (a,), "index_dtype": dt("int32")}, lambda rng: [NANS.astype(d)],
                         (lambda a: lambda x: ref(x, a, "int32", d))(a), f"NaN axis={a}", vmap=False)
                    for a in (0, 1)]
        return out
    SPECS.append(Spec(prim, ORDERED, cases, nondiff=True))


_arg_spec(lax.argmax_p, _lex_gt)
_arg_spec(lax.argmin_p, _lex_lt)


# ------------------------------------------------------------------ cumulative

CUM_CONFIGS = [((5,), 0, False), ((5,), 0, True), ((2, 3), 1, True), ((2, 3), 0, False),
               ((0,), 0, False), ((3, 0), 0, True), ((2, 3, 2), 1, False)]


def _cum_ref(step, d):
    def ref(x, axis, reverse):
        x = np.asarray(x)
        vals = _scalars(x, d)
        moved = np.moveaxis(vals, axis, -1)
        out = np.empty(moved.shape, object)
        for idx in np.ndindex(*moved.shape[:-1]):
            row = list(moved[idx])
            order = range(len(row) - 1, -1, -1) if reverse else range(len(row))
            acc = None
            for i in order:
                acc = row[i] if acc is None else step(acc, row[i])
                out[idx + (i,)] = acc
        out = np.moveaxis(out, -1, axis)
        if d.kind in "iu":
            return wrap(out, d)
        if d == np.bool_:
            return out.astype(bool)
        return out.astype(np.complex128 if d.kind == "c" else np.float64)
    return ref


def _nan_step(better):
    def step(acc, v):
        if _is_nan(acc) or _is_nan(v):
            return acc if _is_nan(acc) else v
        return v if better(v, acc) else acc
    return step


def _cum_spec(prim, step, dtypes, *, lo=-3, hi=3, specials=False, grads=None):
    def cases(d):
        ref = _cum_ref(step, d)
        gen = (lambda rng, s: values(rng, s, d)) if d.kind in "iub" else \
            (lambda rng, s: rand(rng, s, d, lo, hi))
        out = [Case({"axis": a, "reverse": r}, lambda rng, s=s: [gen(rng, s)],
                    (lambda a, r: lambda x: ref(x, a, r))(a, r), f"{list(s)} axis={a} reverse={r}",
                    tol_scale=4) for s, a, r in CUM_CONFIGS]
        if specials and (d.kind == "f" or d.name == "bfloat16"):
            out += [Case({"axis": 1, "reverse": r}, lambda rng, a=a: [a.astype(d)],
                         (lambda r: lambda x: ref(x, 1, r))(r), f"{what} reverse={r}",
                         vmap=False, exact_bits=True)
                    for r in (False, True) for a, what in ((NANS, "NaN"),
                                                           (SIGNED_ZEROS, "signed zeros"))]
        return out

    def default_grads():
        rng = np.random.default_rng(0)
        out = []
        for s, a, r in CUM_CONFIGS[:4] + CUM_CONFIGS[6:]:
            x = rand_distinct(rng, s, np.float32, lo, hi)
            out.append(GradCase((lambda a, r: lambda x: prim.bind(x, axis=a, reverse=r))(a, r), (x,),
                                label=f"{s} axis={a} reverse={r}"))
        return out
    SPECS.append(Spec(prim, dtypes, cases, grads=grads or default_grads))


_cum_spec(lax.cumsum_p, lambda a, b: a + b, NUM)
_cum_spec(lax.cumprod_p, lambda a, b: a * b, NUM, lo=0.5, hi=1.5)
_cum_spec(lax.cummax_p, _nan_step(_ordered_gt), NUM, specials=True)
_cum_spec(lax.cummin_p, _nan_step(_ordered_lt), NUM, specials=True)


# ------------------------------------------------------------------ sort

def _sort_key(v):
    """Sort order of one key: NaN after everything (of either sign), -0.0 equal to 0.0."""
    if _is_nan(v):
        return (1, 0.0, 0.0)
    if isinstance(v, complex):
        return (0, v.real, v.imag)
    return (0, v, 0.0)


def sort_ref(*operands, dimension, num_keys, **_):
    """A stable sort of the operands along ``dimension`` by their first ``num_keys``."""
    ops = [np.moveaxis(np.asarray(o), dimension, -1) for o in operands]
    keys = [_scalars(k, k.dtype) for k in ops[:num_keys]]
    outs = [np.empty_like(o) for o in ops]
    for idx in np.ndindex(*ops[0].shape[:-1]):
        n = ops[0].shape[-1]
        order = sorted(range(n), key=lambda i: tuple(_sort_key(k[idx + (i,)]) for k in keys))
        for o, src in zip(outs, ops):
            o[idx] = src[idx][order]
    return [np.moveaxis(o, -1, dimension) for o in outs]


SORT_CONFIGS = [
    ((5,), 0, 1, 1), ((2, 3), 1, 1, 1), ((2, 3), 0, 1, 1), ((6,), 0, 2, 1), ((2, 4), 1, 3, 2),
    ((0,), 0, 1, 1), ((3, 0), 1, 2, 1), ((4, 3), 0, 2, 2),
]


def _sort_cases(d):
    out = []
    for s, dim, n_ops, n_keys in SORT_CONFIGS:
        p = dict(dimension=dim, is_stable=True, num_keys=n_keys)

        def sample(rng, s=s, n_ops=n_ops, n_keys=n_keys):
            wide = np.complex128 if d.kind == "c" else np.float64
            keys = [rand(rng, s, d, -2, 2) if d.kind in "iub" else
                    (np.round(rand(rng, s, wide, -2, 2) * 2) / 2).astype(d) for _ in range(n_keys)]
            payload = [np.arange(math.prod(s), dtype=np.int32).reshape(s)] if n_ops > n_keys else []
            extra = [values(rng, s, d) for _ in range(n_ops - n_keys - len(payload))]
            return [np.asarray(k).astype(d) for k in keys] + payload + extra
        out.append(Case(p, sample, (lambda p: lambda *ops: sort_ref(*ops, **p))(p),
                        f"{list(s)} dim={dim} operands={n_ops} keys={n_keys}", exact_bits=True))
    if d.kind == "f" or d.name == "bfloat16":
        keys = np.array([np.nan, -0.0, 0.0, -np.nan, 1.0, -np.inf, np.inf, -1.0, 0.0, np.nan])
        p = dict(dimension=0, is_stable=True, num_keys=1)
        out.append(Case(p, lambda rng: [keys.astype(d), np.arange(10, dtype=np.int32)],
                        lambda k, v: sort_ref(k, v, **p), "NaN, -0.0 and inf", vmap=False,
                        exact_bits=False))
    return out


def _sort_grads():
    rng = np.random.default_rng(0)
    out = []
    for s, dim, n_ops, n_keys in SORT_CONFIGS[:5]:
        p = dict(dimension=dim, is_stable=True, num_keys=n_keys)
        args = tuple(rand_distinct(rng, s, np.float32) for _ in range(n_ops))
        out.append(GradCase((lambda p: lambda *ops: sort_p_bind(ops, p))(p), args,
                            label=f"{s} operands={n_ops} keys={n_keys}"))
    return out


def sort_p_bind(ops, p):
    return list(lax.sort_p.bind(*ops, **p))


SPECS.append(Spec(lax.sort_p, ORDERED + COMPLEX, _sort_cases, grads=_sort_grads))
del INT, ALL, rand_bits
