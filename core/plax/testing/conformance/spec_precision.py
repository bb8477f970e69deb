"""Specs of reduce_precision (against NumPy/ml_dtypes casts to float16 and bfloat16, with
their subnormals flushed to zero where the exponent range shrinks, and the identity for a
format's own widths) and
cumlogsumexp (against shifted prefix sums in float64)."""
from __future__ import annotations

import numpy as np

from plax import dtypes
from plax.lax.cumlogsumexp import cumlogsumexp_p
from plax.lax.precision import reduce_precision_p

from .harness import FLOAT, Case, GradCase, Spec, f64, rand

SPECS: list[Spec] = []

_OWN = {"float16": (5, 10), "bfloat16": (8, 7), "float32": (8, 23), "float64": (11, 52)}
_SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e5, -1e5, 1e-6, -1e-6, 1.0009765625]


def reduce_precision_ref(x, *, exponent_bits, mantissa_bits):
    """Casts to the emulated format (round to nearest even, overflow to inf), flushes its
    subnormals to signed zeros when the exponent range shrinks, and casts back."""
    x = np.asarray(x)
    if (exponent_bits, mantissa_bits) == _OWN[x.dtype.name]:
        return x
    target, tiny = {(5, 10): (np.float16, 2.0 ** -14),
                    (8, 7): (dtypes.bfloat16, 2.0 ** -126)}[(exponent_bits, mantissa_bits)]
    with np.errstate(over="ignore"):
        y = x.astype(target).astype(x.dtype)
    if _OWN[x.dtype.name][0] <= exponent_bits:  # the exponent range is not reduced
        return y
    return np.where(np.abs(y) < tiny, np.copysign(np.zeros_like(y), y), y)


def _rp_cases(d):
    def sample(rng):
        x = rand(rng, (4, 5), d)
        if d.itemsize >= 4:
            x.reshape(-1)[:len(_SPECIAL)] = _SPECIAL
        return [x]

    params = [_OWN[d.name]]
    if d.itemsize >= 4:
        params += [(5, 10), (8, 7)]
    return [Case(dict(exponent_bits=e, mantissa_bits=m), sample,
                 (lambda e, m: lambda x: reduce_precision_ref(x, exponent_bits=e,
                                                              mantissa_bits=m))(e, m),
                 f"({e}, {m})", exact_bits=True) for e, m in params]


def _rp_grads():
    rng = np.random.default_rng(0)
    ident = dict(exponent_bits=8, mantissa_bits=23)
    fine = dict(exponent_bits=11, mantissa_bits=40)
    return [GradCase(lambda x: reduce_precision_p.bind(x, **ident) ** 2,
                     (rand(rng, (3, 4), np.float32),), label="identity widths"),
            GradCase(lambda x: reduce_precision_p.bind(x, **fine) ** 2,
                     (rand(rng, (3, 4), np.float64),), x64=True, label="40 mantissa bits")]


SPECS.append(Spec(reduce_precision_p, FLOAT, _rp_cases, grads=_rp_grads))


def cumlogsumexp_ref(x, *, axis, reverse):
    """Each prefix's log-sum-exp, shifted by its maximum, in float64."""
    x = np.moveaxis(f64(x), axis, -1)
    if reverse:
        x = x[..., ::-1]
    out = np.empty_like(x)
    for i in range(x.shape[-1]):
        head = x[..., :i + 1]
        m = np.max(head, axis=-1, keepdims=True)
        m = np.where(np.isfinite(m), m, 0)
        with np.errstate(divide="ignore"):  # log(0) = -inf for all -inf prefixes
            out[..., i] = (np.log(np.sum(np.exp(head - m), axis=-1, keepdims=True)) + m)[..., 0]
    if reverse:
        out = out[..., ::-1]
    return np.moveaxis(out, -1, axis)


_CL_CONFIGS = [((6,), 0, False), ((3, 5), 1, True), ((4, 3), 0, True), ((2, 3, 4), 2, False)]


def _cl_cases(d):
    out = []
    for shape, axis, reverse in _CL_CONFIGS:
        p = dict(axis=axis, reverse=reverse)
        out.append(Case(p, (lambda s: lambda rng: [rand(rng, s, d, -4, 4)])(shape),
                        (lambda p: lambda x: cumlogsumexp_ref(x, **p))(p),
                        f"{list(shape)} axis={axis} reverse={reverse}", tol_scale=4))

    def extremes(rng):
        x = rand(rng, (2, 5), d, -4, 4)
        x[0, :2] = -np.inf
        x[1, 0] = 60.0
        return [x]
    out.append(Case(dict(axis=1, reverse=False), extremes,
                    lambda x: cumlogsumexp_ref(x, axis=1, reverse=False), "-inf and large",
                    tol_scale=4))
    return out


def _cl_grads():
    rng = np.random.default_rng(0)
    return [GradCase((lambda p: lambda x: cumlogsumexp_p.bind(x, **p))(dict(axis=a, reverse=r)),
                     (rand(rng, s, np.float32, -2, 2),), label=f"{s} axis={a} reverse={r}")
            for s, a, r in _CL_CONFIGS]


SPECS.append(Spec(cumlogsumexp_p, FLOAT, _cl_cases, grads=_cl_grads))
