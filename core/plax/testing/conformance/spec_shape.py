"""Specs of the shape primitives: broadcast_in_dim, reshape, transpose, squeeze, expand_dims, rev,
pad, concatenate, stack, unstack, split and iota. They move values without arithmetic, so every
dtype must come back bit for bit; references are written as index loops (or plain NumPy indexing)."""
from __future__ import annotations

import math

import numpy as np

from plax import lax

from .harness import ALL, FLOAT, COMPLEX, INT, Case, GradCase, Spec, dt, rand, rand_bits

SPECS: list[Spec] = []


def values(rng, shape, d) -> np.ndarray:
    """Operand values covering the dtype (whole integer range, signed floats)."""
    d = dt(d)
    return rand_bits(rng, shape, d) if d.kind in "iub" else rand(rng, shape, d)


def _unary_shape_spec(prim, configs, ref, grads=None):
    """A one-operand shape primitive; ``configs`` is a list of (operand shape, params)."""
    def cases(d):
        return [Case(p, lambda rng, s=s: [values(rng, s, d)], (lambda p: lambda x: ref(x, **p))(p),
                     f"{list(s)} {p}", exact_bits=True) for s, p in configs]

    def default_grads():
        out = []
        for s, p in configs[:3]:
            x = rand(np.random.default_rng(0), s, np.float32)
            out.append(GradCase((lambda p: lambda x: prim.bind(x, **p))(p), (x,), label=str(p)))
        return out
    spec = Spec(prim, ALL, cases, grads=grads or default_grads)
    SPECS.append(spec)
    return spec


# ------------------------------------------------------------------ broadcast_in_dim

def _broadcast_ref(x, *, shape, broadcast_dimensions):
    out = np.empty(shape, x.dtype)
    for idx in np.ndindex(*shape):
        src = tuple(idx[d] if x.shape[i] != 1 else 0 for i, d in enumerate(broadcast_dimensions))
        out[idx] = x[src]
    return out


_unary_shape_spec(lax.broadcast_in_dim_p, [
    ((3,), dict(shape=(2, 3), broadcast_dimensions=(1,))),
    ((), dict(shape=(2, 3), broadcast_dimensions=())),
    ((1, 3), dict(shape=(2, 3), broadcast_dimensions=(0, 1))),
    ((2, 1), dict(shape=(2, 4, 3), broadcast_dimensions=(0, 2))),
    ((3,), dict(shape=(3, 2), broadcast_dimensions=(0,))),
    ((0,), dict(shape=(2, 0), broadcast_dimensions=(1,))),
    ((1,), dict(shape=(0, 4), broadcast_dimensions=(1,))),
    ((), dict(shape=(), broadcast_dimensions=())),
], _broadcast_ref)


# ------------------------------------------------------------------ reshape / transpose / squeeze / expand_dims / rev

def _reshape_ref(x, *, new_sizes, dimensions=None):
    """NumPy's reshape, after the transposition ``dimensions`` (JAX's folded transpose)."""
    x = np.asarray(x)
    return (x if dimensions is None else np.transpose(x, dimensions)).reshape(new_sizes)


_unary_shape_spec(lax.reshape_p, [
    ((2, 3), dict(new_sizes=(3, 2))), ((2, 3), dict(new_sizes=(6,))),
    ((2, 3, 4), dict(new_sizes=(4, 6), dimensions=(2, 0, 1))),
    ((6,), dict(new_sizes=(1, 6, 1))), ((), dict(new_sizes=(1, 1))), ((1, 1), dict(new_sizes=())),
    ((0, 3), dict(new_sizes=(3, 0))), ((2, 3, 4), dict(new_sizes=(4, 6))),
    ((2, 3), dict(new_sizes=(3, 2, 1), dimensions=(1, 0))),
    ((1, 1), dict(new_sizes=(), dimensions=(1, 0))),
    ((0, 3), dict(new_sizes=(3, 0), dimensions=(1, 0))),
], _reshape_ref)

_unary_shape_spec(lax.transpose_p, [
    ((2, 3, 4), dict(permutation=(2, 0, 1))), ((2, 3), dict(permutation=(1, 0))),
    ((), dict(permutation=())), ((0, 2), dict(permutation=(1, 0))),
    ((2, 3), dict(permutation=(0, 1))),
], lambda x, permutation: np.transpose(x, permutation))

_unary_shape_spec(lax.squeeze_p, [
    ((1, 3, 1), dict(dimensions=(0, 2))), ((1,), dict(dimensions=(0,))),
    ((2, 1, 0), dict(dimensions=(1,))), ((3, 1), dict(dimensions=(1,))),
], lambda x, dimensions: np.asarray(x).reshape(
    tuple(s for i, s in enumerate(np.shape(x)) if i not in dimensions)))


def _expand_ref(x, dimensions):
    shape = list(np.shape(x))
    for d in sorted(dimensions):
        shape.insert(d, 1)
    return np.asarray(x).reshape(shape)


_unary_shape_spec(lax.expand_dims_p, [
    ((3,), dict(dimensions=(0,))), ((3,), dict(dimensions=(1,))), ((), dict(dimensions=(0,))),
    ((2, 3), dict(dimensions=(0, 3))), ((0,), dict(dimensions=(1,))),
], _expand_ref)


def _rev_ref(x, dimensions):
    x = np.asarray(x)
    return x[tuple(slice(None, None, -1) if i in dimensions else slice(None) for i in range(x.ndim))]


_unary_shape_spec(lax.rev_p, [
    ((5,), dict(dimensions=(0,))), ((2, 3), dict(dimensions=(0,))), ((2, 3), dict(dimensions=(1,))),
    ((2, 3), dict(dimensions=(0, 1))), ((0, 3), dict(dimensions=(1,))), ((), dict(dimensions=())),
], _rev_ref)


# ------------------------------------------------------------------ pad

def pad_ref(x, pv, padding_config):
    """Padding by placing element i of each axis at ``lo + i * (interior + 1)`` in an array of
    the padding value (negative ``lo``/``hi`` crop)."""
    x = np.asarray(x)
    shape = [lo + hi + d + max(d - 1, 0) * it for d, (lo, hi, it) in zip(x.shape, padding_config)]
    out = np.full(shape, pv, x.dtype)
    for idx in np.ndindex(*x.shape):
        pos = tuple(lo + i * (it + 1) for i, (lo, _, it) in zip(idx, padding_config))
        if all(0 <= p < n for p, n in zip(pos, shape)):
            out[pos] = x[idx]
    return out


PAD_CONFIGS = [
    ((4,), [(1, 2, 0)]), ((4,), [(0, 0, 2)]), ((4,), [(-1, 1, 1)]), ((4,), [(-2, -3, 1)]),
    ((2, 3), [(1, -1, 1), (2, 0, 0)]), ((2, 3), [(0, 0, 0), (-1, -1, 3)]),
    ((0,), [(1, 1, 2)]), ((0, 2), [(1, 0, 1), (0, 1, 0)]), ((), []), ((3,), [(-3, 0, 0)]),
]


def _pad_cases(d):
    return [Case({"padding_config": tuple(map(tuple, cfg))},
                 lambda rng, s=s: [values(rng, s, d), values(rng, (), d)],
                 (lambda cfg: lambda x, pv: pad_ref(x, pv, cfg))(cfg), f"{list(s)} {cfg}",
                 exact_bits=True)
            for s, cfg in PAD_CONFIGS]


def _pad_grads():
    rng = np.random.default_rng(0)
    out = []
    for s, cfg in (PAD_CONFIGS[2], PAD_CONFIGS[4], PAD_CONFIGS[3]):
        p = {"padding_config": tuple(map(tuple, cfg))}
        out.append(GradCase((lambda p: lambda x, pv: lax.pad_p.bind(x, pv, **p))(p),
                            (rand(rng, s, np.float32), np.float32(0.7)), label=str(cfg)))
    return out


SPECS.append(Spec(lax.pad_p, ALL, _pad_cases, grads=_pad_grads))


# ------------------------------------------------------------------ concatenate

CONCAT_CONFIGS = [
    ([(2,), (3,)], 0), ([(2, 3), (1, 3), (4, 3)], 0), ([(2, 1), (2, 3)], 1),
    ([(2, 0), (2, 3), (2, 0)], 1), ([(0, 3), (0, 3)], 0), ([(3,)], 0),
]


def _concat_cases(d):
    return [Case({"dimension": dim}, lambda rng, shapes=shapes: [values(rng, s, d) for s in shapes],
                 (lambda dim: lambda *xs: np.concatenate(xs, axis=dim))(dim),
                 f"{shapes} dim={dim}", exact_bits=True) for shapes, dim in CONCAT_CONFIGS]


def _concat_grads():
    rng = np.random.default_rng(0)
    return [GradCase((lambda dim: lambda *xs: lax.concatenate_p.bind(*xs, dimension=dim))(dim),
                     tuple(rand(rng, s, np.float32) for s in shapes), label=str(shapes))
            for shapes, dim in CONCAT_CONFIGS[:3]]


SPECS.append(Spec(lax.concatenate_p, ALL, _concat_cases, grads=_concat_grads))


# ------------------------------------------------------------------ stack / unstack

#: (operand shape, number of operands or of slices, axis)
STACK_CONFIGS = [((3,), 2, 0), ((3,), 3, 1), ((2, 3), 2, 1), ((2, 3), 1, 2), ((), 4, 0),
                 ((0, 2), 2, 1)]


def _stack_ref(*xs, axis):
    """Slice ``i`` along ``axis`` of the result is operand ``i`` (written by indexing)."""
    shape = list(xs[0].shape)
    shape.insert(axis, len(xs))
    out = np.empty(shape, xs[0].dtype)
    for i, x in enumerate(xs):
        out[(slice(None),) * axis + (i,)] = x
    return out


def _stack_cases(d):
    return [Case({"axis": axis}, lambda rng, s=s, n=n: [values(rng, s, d) for _ in range(n)],
                 (lambda axis: lambda *xs: _stack_ref(*xs, axis=axis))(axis),
                 f"{n} x {list(s)} axis={axis}", exact_bits=True) for s, n, axis in STACK_CONFIGS]


def _stack_grads():
    rng = np.random.default_rng(0)
    return [GradCase((lambda axis: lambda *xs: lax.stack_p.bind(*xs, axis=axis))(axis),
                     tuple(rand(rng, s, np.float32) for _ in range(n)), label=f"{n} x {s}")
            for s, n, axis in STACK_CONFIGS[:3]]


SPECS.append(Spec(lax.stack_p, ALL, _stack_cases, grads=_stack_grads))


def _unstack_ref(x, *, axis):
    return [x[(slice(None),) * axis + (i,)] for i in range(x.shape[axis])]


def _unstack_cases(d):
    return [Case({"axis": axis}, lambda rng, s=s, n=n, axis=axis: [values(rng, _with(s, axis, n), d)],
                 (lambda axis: lambda x: _unstack_ref(x, axis=axis))(axis),
                 f"{list(_with(s, axis, n))} axis={axis}", exact_bits=True)
            for s, n, axis in STACK_CONFIGS]


def _with(shape, axis, n) -> tuple:
    """``shape`` with an axis of length ``n`` inserted at ``axis``."""
    return tuple(shape[:axis]) + (n,) + tuple(shape[axis:])


def _unstack_grads():
    rng = np.random.default_rng(0)
    return [GradCase((lambda axis: lambda x: list(lax.unstack_p.bind(x, axis=axis)))(axis),
                     (rand(rng, _with(s, axis, n), np.float32),), label=f"{s} axis={axis}")
            for s, n, axis in STACK_CONFIGS[:3]]


SPECS.append(Spec(lax.unstack_p, ALL, _unstack_cases, grads=_unstack_grads))


# ------------------------------------------------------------------ split

#: (operand shape, sizes, axis)
SPLIT_CONFIGS = [((6,), (2, 4), 0), ((2, 5), (1, 0, 4), 1), ((3, 2, 2), (1, 2), 0),
                 ((2, 3), (3,), 1), ((0, 2), (0, 0), 0), ((2, 0), (), 1)]


def _split_ref(x, *, sizes, axis):
    """Piece ``i`` is the run of ``sizes[i]`` slices along ``axis`` after the earlier pieces."""
    starts = np.cumsum((0,) + tuple(sizes))
    return [x[(slice(None),) * axis + (slice(a, a + n),)] for a, n in zip(starts, sizes)]


def _split_cases(d):
    return [Case({"sizes": sizes, "axis": axis}, lambda rng, s=s: [values(rng, s, d)],
                 (lambda sizes, axis: lambda x: _split_ref(x, sizes=sizes, axis=axis))(sizes, axis),
                 f"{list(s)} sizes={sizes} axis={axis}", exact_bits=True)
            for s, sizes, axis in SPLIT_CONFIGS]


def _split_grads():
    rng = np.random.default_rng(0)
    return [GradCase((lambda sizes, axis: lambda x: list(lax.split_p.bind(x, sizes=sizes,
                                                                          axis=axis)))(sizes, axis),
                     (rand(rng, s, np.float32),), label=f"{s} sizes={sizes} axis={axis}")
            for s, sizes, axis in SPLIT_CONFIGS[:3]]


SPECS.append(Spec(lax.split_p, ALL, _split_cases, grads=_split_grads))


# ------------------------------------------------------------------ iota

def _iota_cases(d):
    out = []
    for shape, dim in (((5,), 0), ((2, 3), 1), ((2, 3), 0), ((0,), 0), ((3, 0, 2), 2)):
        def ref(shape=shape, dim=dim):
            line = np.arange(shape[dim]).reshape([-1 if i == dim else 1 for i in range(len(shape))])
            return np.broadcast_to(line, shape).astype(np.float64 if d.kind in "fcV" else d)
        out.append(Case({"dtype": d, "shape": shape, "dimension": dim}, lambda rng: [], ref,
                        f"{list(shape)} dim={dim}"))
    return out


SPECS.append(Spec(lax.iota_p, INT + FLOAT + COMPLEX, _iota_cases, nondiff=True, no_operands=True))
del math
