"""Specs of conv_general_dilated and the reduce_window primitives.

The references are direct loops: each output element sums (or takes the max or min of) the
input elements its window reaches, with coordinates mapped through padding, lhs/base
dilation (holes), window dilation and strides, in float64/complex128 or exact integers.
"""
from __future__ import annotations

import functools
import itertools

import numpy as np

from plax.lax.convolution import ConvDimensionNumbers, conv_general_dilated_p
from plax.lax.windows import reduce_window_max_p, reduce_window_min_p, reduce_window_sum_p

from .harness import BOOL, COMPLEX, NUM, ORDERED, Case, GradCase, Spec, dt, f64, pyints, rand, \
    rand_distinct, wrap, zero_ordered_max, zero_ordered_min

SPECS: list[Spec] = []
WINDOW_SPECS: list[Spec] = []


def _source(o: int, k: int, stride: int, dil: int, lo: int, base: int, n: int):
    """The input index an output index ``o`` and window offset ``k`` read, or None for
    padding or a dilation hole."""
    p = o * stride + k * dil - lo
    if p < 0 or p % base or p // base >= n:
        return None
    return p // base


# ------------------------------------------------------------------ convolution

def conv_ref(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
             dimension_numbers, feature_group_count, batch_group_count, preferred_element_type,
             **_):
    """conv_general_dilated as loops over output elements (canonical NC.../OI... layouts)."""
    ls, rs, os_ = dimension_numbers
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    d = lhs.dtype
    out_d = dt(preferred_element_type) if preferred_element_type is not None else d
    exact = d.kind in "iub"
    widen = pyints if exact else f64
    x = widen(np.transpose(lhs, ls))
    w = widen(np.transpose(rhs, rs))
    n, c = x.shape[:2]
    o, i = w.shape[:2]
    g, b = feature_group_count, batch_group_count
    from plax.lax.convolution import conv_output_shape
    canon = ConvDimensionNumbers(*(tuple(range(lhs.ndim)),) * 3)
    out_shape = conv_output_shape(x.shape, w.shape, window_strides, padding, lhs_dilation,
                                  rhs_dilation, canon, b)
    out = np.zeros(out_shape, object if exact else np.result_type(x.dtype, w.dtype))
    per_group = o // (g * b)
    for idx in itertools.product(*(range(s) for s in out_shape)):
        nn, oo, pos = idx[0], idx[1], idx[2:]
        grp = oo // per_group
        batch = (grp * (n // b) + nn) if b > 1 else nn
        total = 0
        for ci in range(i):
            cc = grp * i + ci if g > 1 else ci
            for ks in itertools.product(*(range(s) for s in w.shape[2:])):
                src = [_source(p, k, s, rd, pad[0], ld, x.shape[2 + j])
                       for j, (p, k, s, rd, pad, ld) in enumerate(
                           zip(pos, ks, window_strides, rhs_dilation, padding, lhs_dilation))]
                if None in src:
                    continue
                total = total + x[(batch, cc) + tuple(src)] * w[(oo, ci) + tuple(ks)]
        out[idx] = total
    out = np.transpose(out, np.argsort(os_))
    if d == np.bool_:
        return (out != 0) if out_d == np.bool_ else out.astype(np.float64)
    if exact and out_d.kind in "iu":
        return wrap(out, out_d)
    return out.astype(np.float64) if exact else out


def _dn(lhs: str, rhs: str, out: str) -> ConvDimensionNumbers:
    from plax.lax.convolution import conv_dimension_numbers
    return conv_dimension_numbers((0,) * len(lhs), (0,) * len(rhs), (lhs, rhs, out))


def _params(nsp, dn=None, strides=None, padding=None, ld=None, rd=None, g=1, b=1, pet=None):
    one = (1,) * nsp
    return dict(window_strides=strides or one, padding=padding or ((0, 0),) * nsp,
                lhs_dilation=ld or one, rhs_dilation=rd or one,
                dimension_numbers=dn or ConvDimensionNumbers(*(tuple(range(nsp + 2)),) * 3),
                feature_group_count=g, batch_group_count=b, precision=None,
                preferred_element_type=pet)


# (lhs shape, rhs shape, params, label)
CONV_CONFIGS = [
    ((2, 3, 6), (4, 3, 3), _params(1), "1-D valid"),
    ((1, 2, 5, 4), (3, 2, 2, 3), _params(2, strides=(2, 1), padding=((1, 1), (0, 2))),
     "2-D strided, padded"),
    ((1, 2, 4, 4), (2, 2, 2, 2), _params(2, padding=((1, -1), (2, 0)), ld=(2, 1), rd=(1, 2)),
     "dilations, negative padding"),
    ((2, 5, 4, 3), (2, 2, 3, 4), _params(2, dn=_dn("NHWC", "HWIO", "NHWC"),
                                         padding=((1, 0), (1, 1))), "NHWC/HWIO"),
    ((2, 4, 5), (6, 2, 2), _params(1, strides=(2,), g=2), "feature groups"),
    ((4, 3, 5), (4, 3, 2), _params(1, b=2, rd=(2,)), "batch groups"),
    ((1, 2, 3, 3, 3), (2, 2, 2, 1, 2), _params(3, strides=(1, 1, 2)), "3-D"),
    ((2, 5, 3), (2, 3, 2), _params(1, dn=_dn("NWC", "OIW", "CWN")), "transposed layouts"),
    ((1, 1, 2), (1, 1, 3), _params(1), "window longer than input: empty"),
]


def _pet_for(d):
    return {"int8": ("int32",), "float16": ("float32",), "bfloat16": ("float32",),
            "float32": ("float64",), "complex64": ("complex128",)}.get(d.name, ())


def _conv_cases(d):
    def sample_of(ls, rs):
        def sample(rng):
            if d.kind in "iub":
                return [rand(rng, ls, d, -3, 3), rand(rng, rs, d, -3, 3)]
            return [rand(rng, ls, d, -2, 2), rand(rng, rs, d, -2, 2)]
        return sample

    out = []
    for ls, rs, p, label in CONV_CONFIGS:
        out.append(Case(p, sample_of(ls, rs), (lambda p: lambda a, b: conv_ref(a, b, **p))(p),
                        label, tol_scale=8))
    for pet in _pet_for(d):
        ls, rs, p, label = CONV_CONFIGS[1]
        p = dict(p, preferred_element_type=dt(pet))
        out.append(Case(p, sample_of(ls, rs), (lambda p: lambda a, b: conv_ref(a, b, **p))(p),
                        f"{label} -> {pet}", tol_scale=8))
    return out


def _conv_grads():
    rng = np.random.default_rng(0)
    out = []
    for ls, rs, p, label in CONV_CONFIGS[:8]:
        out.append(GradCase((lambda p: lambda a, b: conv_general_dilated_p.bind(a, b, **p))(p),
                            (rand(rng, ls, np.float32), rand(rng, rs, np.float32)), label=label))
    ls, rs, p, _ = CONV_CONFIGS[1]
    out.append(GradCase(lambda a, b: conv_general_dilated_p.bind(a, b, **p),
                        (rand(rng, ls, np.complex64), rand(rng, rs, np.complex64)),
                        label="complex"))
    return out


SPECS.append(Spec(conv_general_dilated_p, BOOL + NUM, _conv_cases, grads=_conv_grads))


# ------------------------------------------------------------------ windows

def window_ref(x, *, which, window_dimensions, window_strides, padding, base_dilation,
               window_dilation):
    """A windowed sum/max/min as loops over output elements."""
    from plax.lax.windows import window_output_shape
    x = np.asarray(x)
    exact = x.dtype.kind in "iub"
    xs = pyints(x) if exact and which == "sum" else f64(x)
    out_shape = window_output_shape(x.shape, window_dimensions, window_strides, padding,
                                    base_dilation, window_dilation)
    out = np.zeros(out_shape, object if exact else xs.dtype)
    for idx in itertools.product(*(range(s) for s in out_shape)):
        vals = []
        for ks in itertools.product(*(range(w) for w in window_dimensions)):
            src = [_source(o, k, s, wd, pad[0], bd, n) for o, k, s, wd, pad, bd, n in zip(
                idx, ks, window_strides, window_dilation, padding, base_dilation, x.shape)]
            if None not in src:
                vals.append(xs[tuple(src)])
        if which == "sum":
            out[idx] = sum(vals, start=0)
        elif which == "prod":
            out[idx] = np.prod(vals) if vals else 1
        elif vals:
            out[idx] = _extreme(vals, which, exact)
        else:  # only padding and holes: the identity
            out[idx] = _identity(x.dtype, which)
    if exact and which == "sum":
        return wrap(out, x.dtype)
    return out.astype(x.dtype) if exact else out


def _extreme(vals, which: str, exact: bool):
    """max/min of one window: NaN propagates, ``-0.0 < +0.0`` (XLA's order); complex values
    folded from the identity by JAX's lexicographic max/min (the first only if it wins
    strictly), in the window's row-major order."""
    if isinstance(vals[0], complex) or np.iscomplexobj(vals[0]):
        acc = complex(-np.inf if which == "max" else np.inf, 0)
        for v in vals:
            a, b = (acc.real, acc.imag), (v.real, v.imag)
            wins = (a[1] > b[1] if which == "max" else a[1] < b[1]) if a[0] == b[0] else \
                (a[0] > b[0] if which == "max" else a[0] < b[0])
            acc = acc if wins else complex(v)
        return acc
    if exact:
        return max(vals) if which == "max" else min(vals)
    combine = zero_ordered_max if which == "max" else zero_ordered_min
    return float(functools.reduce(combine, vals))


def _identity(d, which):
    if d == np.bool_:
        return which == "min"
    if d.kind in "iu":
        info = np.iinfo(d)
        return int(info.min if which == "max" else info.max)
    return -np.inf if which == "max" else np.inf


def _wparams(window, strides=None, padding=None, bd=None, wd=None):
    nd = len(window)
    one = (1,) * nd
    return dict(window_dimensions=window, window_strides=strides or one,
                padding=padding or ((0, 0),) * nd, base_dilation=bd or one,
                window_dilation=wd or one)


WINDOW_CONFIGS = [
    ((6,), _wparams((2,)), "1-D"),
    ((4, 5), _wparams((2, 3), strides=(2, 1), padding=((1, 0), (1, 1))), "2-D strided, padded"),
    ((3, 4), _wparams((2, 2), padding=((0, 1), (1, -1)), wd=(2, 1)), "window dilation"),
    ((2, 3, 4), _wparams((1, 2, 2), strides=(1, 2, 1), padding=((0, 0), (1, 1), (0, 1)),
                         bd=(1, 2, 1)), "base dilation"),
    ((2, 2), _wparams((3, 1)), "window longer than input: empty"),
]
# gradient configs: every window holds at least one operand element
WINDOW_GRAD_CONFIGS = WINDOW_CONFIGS[:3] + [
    ((2, 3, 4), _wparams((1, 2, 2), strides=(1, 1, 2), padding=((0, 0), (1, 1), (0, 1)),
                         bd=(1, 1, 1)), "3-D"),
]


def _window_spec(prim, which, types):
    def cases(d):
        out = []
        for shape, p, label in WINDOW_CONFIGS:
            sample = (lambda s: lambda rng: [rand(rng, s, d, -3, 3)])(shape)
            ref = (lambda p: lambda x: window_ref(x, which=which, **p))(p)
            # complex max/min: not differentiable (JAX's JVP compares with ge)
            out.append(Case(p, sample, ref, label, tol_scale=4,
                            grad_operands=() if d.kind == "c" and which != "sum" else None))
        if which != "sum" and d.kind == "c":
            # a NaN real part, ties of real parts, padding skipped (not folded as the identity)
            p = _wparams((3,), padding=((1, 1),))
            x = np.array([complex(np.nan, 1), 1 + 2j, 1 - 2j, complex(-np.inf, -0.0), 0j], d)
            out.append(Case(p, lambda rng: [x], lambda x: window_ref(x, which=which, **p),
                            "NaN, ties, padding", vmap=False, exact_bits=True,
                            grad_operands=()))
        if which != "sum" and (d.kind == "f" or d.name == "bfloat16"):
            # windows of two whose max/min is a zero of either sign, bit for bit (the 1-D
            # case's program); and NaN, which propagates
            p = WINDOW_CONFIGS[0][1]
            x = np.array([0.0, -0.0, -0.0, 0.0, 0.0, np.nan], d)
            out.append(Case(p, lambda rng: [x], lambda x: window_ref(x, which=which, **p),
                            "signed zeros", vmap=False, exact_bits=True))
        return out

    def grads():
        rng = np.random.default_rng(1)
        out = []
        for shape, p, label in WINDOW_GRAD_CONFIGS:
            x = rand(rng, shape, np.float32) if which == "sum" else \
                rand_distinct(rng, shape, np.float32)
            out.append(GradCase((lambda p: lambda x: prim.bind(x, **p))(p), (x,), label=label))
        return out

    WINDOW_SPECS.append(Spec(prim, types, cases, grads=grads))


_window_spec(reduce_window_sum_p, "sum", NUM)
_window_spec(reduce_window_max_p, "max", ORDERED + COMPLEX)
_window_spec(reduce_window_min_p, "min", ORDERED + COMPLEX)
