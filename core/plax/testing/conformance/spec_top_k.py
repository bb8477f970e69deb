"""Spec of top_k: several axes and k, ties (lower index first) and NaN (largest), against a
stable descending sort in NumPy."""
from __future__ import annotations

import numpy as np

from plax.lax.top_k import top_k_p

from .harness import ORDERED, Case, GradCase, Spec, rand, rand_distinct

SPECS: list[Spec] = []


def top_k_ref(x, *, k, axis):
    """Values and indices of the k largest entries (NaN largest, ties by index)."""
    x = np.moveaxis(np.asarray(x), axis, -1)
    n = x.shape[-1]
    idx = np.empty(x.shape[:-1] + (k,), np.int32)
    for pos in np.ndindex(*x.shape[:-1]):
        row = x[pos]
        def key(i, row=row):
            v = row[i]
            nan = bool(v != v)
            return (0 if nan else 1, 0 if nan else -float(v), i)
        idx[pos] = sorted(range(n), key=key)[:k]
    values = np.take_along_axis(x, idx.astype(np.intp), -1)
    return [np.moveaxis(values, -1, axis), np.moveaxis(idx, -1, axis)]


CONFIGS = [((6,), 3, 0), ((3, 5), 2, 1), ((4, 3), 4, 0), ((2, 3, 4), 0, 2), ((2, 5), 5, 1)]


def _cases(d):
    out = []
    for shape, k, axis in CONFIGS:
        p = dict(k=k, axis=axis)
        # few distinct values: ties are common
        sample = (lambda s: lambda rng: [rand(rng, s, d, -2, 2)])(shape)
        out.append(Case(p, sample, (lambda p: lambda x: top_k_ref(x, **p))(p),
                        f"{list(shape)} k={k} axis={axis}", exact_bits=True))
    if d.kind == "f":
        def with_nan(rng):
            x = rand(rng, (2, 6), d)
            x[0, 2] = x[1, 5] = np.nan
            return [x]
        out.append(Case(dict(k=3, axis=1), with_nan, lambda x: top_k_ref(x, k=3, axis=1),
                        "NaN largest", exact_bits=True))
    return out


def _grads():
    rng = np.random.default_rng(0)
    return [GradCase((lambda p: lambda x: top_k_p.bind(x, **p)[0])(dict(k=k, axis=axis)),
                     (rand_distinct(rng, shape, np.float32),), label=f"{shape} k={k}")
            for shape, k, axis in CONFIGS]


SPECS.append(Spec(top_k_p, ORDERED, _cases, grads=_grads))
