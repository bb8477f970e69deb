"""Specs of the indexing primitives: slice, dynamic_slice, dynamic_update_slice, gather and the
scatter family. References are element-by-element loops over XLA's definitions (index vectors
in the last axis of the indices, start indices clamped in CLIP mode, out-of-bounds windows
filled or dropped in FILL_OR_DROP mode)."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax.lax import GatherDimensionNumbers as GDN
from plax.lax import GatherScatterMode as Mode
from plax.lax import ScatterDimensionNumbers as SDN

from .harness import ALL, NUM, Case, GradCase, Spec, dt, f64, pyints, rand, wrap
from .spec_shape import values

SPECS: list[Spec] = []


# ------------------------------------------------------------------ slice

SLICE_CONFIGS = [
    ((5,), (1,), (4,), None), ((5,), (0,), (5,), (2,)), ((3, 4), (0, 1), (3, 4), (2, 2)),
    ((3, 4), (1, 0), (3, 2), None), ((5,), (2,), (2,), None), ((0, 3), (0, 1), (0, 3), (1, 2)),
    ((), (), (), None), ((7,), (1,), (7,), (3,)),
]


def _slice_cases(d):
    return [Case(dict(start_indices=lo, limit_indices=hi, strides=st),
                 lambda rng, s=s: [values(rng, s, d)],
                 (lambda lo, hi, st: lambda x: np.asarray(x)[tuple(
                     slice(a, b, c) for a, b, c in zip(lo, hi, st or (1,) * len(lo)))])(lo, hi, st),
                 f"{list(s)}[{lo}:{hi}:{st}]", exact_bits=True)
            for s, lo, hi, st in SLICE_CONFIGS]


def _slice_grads():
    rng = np.random.default_rng(0)
    return [GradCase((lambda p: lambda x: lax.slice_p.bind(x, **p))(
        dict(start_indices=lo, limit_indices=hi, strides=st)), (rand(rng, s, np.float32),),
        label=f"{lo}:{hi}:{st}") for s, lo, hi, st in SLICE_CONFIGS[:4]]


SPECS.append(Spec(lax.slice_p, ALL, _slice_cases, grads=_slice_grads))


# ------------------------------------------------------------------ dynamic_slice / dynamic_update_slice

def _clamp_start(start, dim, size):
    return min(max(int(start), 0), dim - size)


# (operand shape, slice sizes, start index choices per axis, index dtype)
DS_CONFIGS = [
    ((5,), (2,), [(0, 1, 3, 4, -1, 7)], "int32"),
    ((4, 5), (2, 3), [(0, 3, -2), (1, 2, 4)], "int32"),
    ((4, 5), (4, 0), [(0, 1), (0, 5)], "int8"),
    ((6,), (3,), [(1, 5, 200)], "uint8"),
    ((), (), [], "int32"),
    ((3, 2), (1, 2), [(2, -5), (1,)], "int64"),
]


def _starts(rng, choices, idx_dtype):
    return [np.asarray(rng.choice(np.asarray(c)), dt(idx_dtype)) for c in choices]


def _ds_ref(x, *starts, slice_sizes):
    lo = [_clamp_start(s, d, n) for s, d, n in zip(starts, np.shape(x), slice_sizes)]
    return np.asarray(x)[tuple(slice(a, a + n) for a, n in zip(lo, slice_sizes))]


def _ds_cases(d):
    return [Case({"slice_sizes": sizes},
                 lambda rng, s=s, c=c, idt=idt: [values(rng, s, d)] + _starts(rng, c, idt),
                 (lambda sizes: lambda x, *st: _ds_ref(x, *st, slice_sizes=sizes))(sizes),
                 f"{list(s)} sizes={sizes} idx {idt}", exact_bits=True)
            for s, sizes, c, idt in DS_CONFIGS]


def _ds_grads():
    rng = np.random.default_rng(0)
    out = []
    for s, sizes, c, idt in DS_CONFIGS[:2]:
        starts = _starts(rng, c, "int32")
        out.append(GradCase((lambda st, sizes: lambda x: lax.dynamic_slice_p.bind(
            x, *st, slice_sizes=sizes))(starts, sizes), (rand(rng, s, np.float32),),
            label=f"{s} {sizes}"))
    return out


SPECS.append(Spec(lax.dynamic_slice_p, ALL, _ds_cases, grads=_ds_grads))


def _dus_ref(x, u, *starts):
    out = np.array(x, copy=True)
    lo = [_clamp_start(s, dd, n) for s, dd, n in zip(starts, out.shape, np.shape(u))]
    out[tuple(slice(a, a + n) for a, n in zip(lo, np.shape(u)))] = u
    return out


def _dus_cases(d):
    return [Case({}, lambda rng, s=s, sizes=sizes, c=c, idt=idt:
                 [values(rng, s, d), values(rng, sizes, d)] + _starts(rng, c, idt),
                 _dus_ref, f"{list(s)} update {sizes} idx {idt}", exact_bits=True)
            for s, sizes, c, idt in DS_CONFIGS]


def _dus_grads():
    rng = np.random.default_rng(0)
    out = []
    for s, sizes, c, idt in DS_CONFIGS[:2]:
        starts = _starts(rng, c, "int32")
        out.append(GradCase((lambda st: lambda x, u: lax.dynamic_update_slice_p.bind(x, u, *st))(
            starts), (rand(rng, s, np.float32), rand(rng, sizes, np.float32)), label=f"{s} {sizes}"))
    return out


SPECS.append(Spec(lax.dynamic_update_slice_p, ALL, _dus_cases, grads=_dus_grads))


# ------------------------------------------------------------------ gather

def fill_value_of(d, fill_value):
    """The value of out-of-bounds slices in FILL_OR_DROP mode (JAX's defaults)."""
    d = dt(d)
    if fill_value is not None:
        return np.asarray(fill_value).astype(d)
    if d.kind in "fc" or d.name == "bfloat16":
        return np.asarray(np.nan).astype(d)
    if d.kind == "i":
        return np.asarray(np.iinfo(d).min, d)
    if d.kind == "u":
        return np.asarray(np.iinfo(d).max, d)
    return np.asarray(True)


def gather_ref(operand, indices, *, dimension_numbers, slice_sizes, mode, fill_value=None,
               **_):
    """XLA's gather, one output element at a time."""
    dn = dimension_numbers
    operand, indices = np.asarray(operand), np.asarray(indices)
    batch_shape = indices.shape[:-1]
    dropped = set(dn.collapsed_slice_dims) | set(dn.operand_batching_dims)
    window_dims = [i for i in range(operand.ndim) if i not in dropped]
    out_rank = len(batch_shape) + len(window_dims)
    batch_pos = [i for i in range(out_rank) if i not in dn.offset_dims]
    shape = [0] * out_rank
    for p, n in zip(batch_pos, batch_shape):
        shape[p] = n
    for p, od in zip(dn.offset_dims, window_dims):
        shape[p] = slice_sizes[od]
    out = np.empty(shape, operand.dtype)
    for idx in np.ndindex(*shape):
        b = tuple(idx[p] for p in batch_pos)
        start = [0] * operand.ndim
        for k, od in enumerate(dn.start_index_map):
            start[od] = int(indices[b + (k,)])
        for od, idim in zip(dn.operand_batching_dims, dn.start_indices_batching_dims):
            start[od] = b[idim]
        in_bounds = all(0 <= s <= operand.shape[i] - slice_sizes[i] for i, s in enumerate(start))
        if mode == Mode.FILL_OR_DROP and not in_bounds:
            out[idx] = fill_value_of(operand.dtype, fill_value)
            continue
        start = [min(max(s, 0), operand.shape[i] - slice_sizes[i]) for i, s in enumerate(start)]
        pos = list(start)
        for p, od in zip(dn.offset_dims, window_dims):
            pos[od] += idx[p]
        out[idx] = operand[tuple(pos)]
    return out


def _gdn(offset, collapsed, start_map, obatch=(), ibatch=()):
    return GDN(offset_dims=offset, collapsed_slice_dims=collapsed, start_index_map=start_map,
               operand_batching_dims=obatch, start_indices_batching_dims=ibatch)


# (operand shape, indices shape, index value range, dimension numbers, slice sizes, mode, fill)
GATHER_CONFIGS = [
    ("rows", (5, 3), (4, 1), (0, 5), _gdn((1,), (0,), (0,)), (1, 3), Mode.PROMISE_IN_BOUNDS, None),
    ("rows offset first", (5, 3), (4, 1), (0, 5), _gdn((0,), (0,), (0,)), (1, 3), Mode.CLIP, None),
    ("windows clip", (6,), (3, 1), (-2, 8), _gdn((1,), (), (0,)), (2,), Mode.CLIP, None),
    ("windows fill", (6,), (3, 1), (-2, 8), _gdn((1,), (), (0,)), (2,), Mode.FILL_OR_DROP, None),
    ("fill value", (6,), (4, 1), (3, 9), _gdn((1,), (), (0,)), (3,), Mode.FILL_OR_DROP, 7),
    ("points", (4, 5), (2, 3, 2), (0, 4), _gdn((), (0, 1), (0, 1)), (1, 1), Mode.CLIP, None),
    ("swapped map", (4, 5), (3, 2), (0, 4), _gdn((1,), (1,), (1, 0)), (2, 1), Mode.CLIP, None),
    ("batching", (3, 4), (3, 1), (0, 4), _gdn((), (1,), (1,), (0,), (0,)), (1, 1), Mode.CLIP, None),
    ("batching windows", (2, 5, 3), (2, 4, 1), (0, 4), _gdn((2, 3), (), (1,), (0,), (0,)),
     (1, 2, 3), Mode.FILL_OR_DROP, None),
    ("no batch", (5, 3), (1,), (0, 5), _gdn((0,), (0,), (0,)), (1, 3), Mode.CLIP, None),
    ("empty indices", (5, 3), (0, 1), (0, 5), _gdn((1,), (0,), (0,)), (1, 3), Mode.CLIP, None),
    ("empty operand", (0, 3), (2, 1), (0, 1), _gdn((1, 2), (), (0,)), (0, 3), Mode.CLIP, None),
]


def _gather_params(dn, sizes, mode, fill):
    return dict(dimension_numbers=dn, slice_sizes=sizes, indices_are_sorted=False,
                unique_indices=False, mode=mode, fill_value=fill)


def _gather_cases(d):
    out = []
    for label, s, ishape, (lo, hi), dn, sizes, mode, fill in GATHER_CONFIGS:
        p = _gather_params(dn, sizes, mode, fill)
        out.append(Case(p, lambda rng, s=s, ishape=ishape, lo=lo, hi=hi: [
            values(rng, s, d), rng.integers(lo, max(hi, lo + 1), size=ishape).astype(np.int32)],
            (lambda p: lambda x, i: gather_ref(x, i, **p))(p), label, exact_bits=True))
    return out


def _gather_grads():
    rng = np.random.default_rng(0)
    out = []
    for label, s, ishape, (lo, hi), dn, sizes, mode, fill in GATHER_CONFIGS[:9]:
        idx = rng.integers(lo, hi, size=ishape).astype(np.int32)
        if mode == Mode.FILL_OR_DROP and fill is None:
            fill = 0.5  # finite differences of the default NaN fill would be NaN
        p = _gather_params(dn, sizes, mode, fill)
        out.append(GradCase((lambda p, idx: lambda x: lax.gather_p.bind(x, idx, **p))(p, idx),
                            (rand(rng, s, np.float32),), label=label))
    return out


SPECS.append(Spec(lax.gather_p, ALL, _gather_cases, grads=_gather_grads))


# ------------------------------------------------------------------ scatter

def scatter_ref(combine, operand, indices, updates, *, dimension_numbers, mode, **_):
    """XLA's scatter, one update element at a time; a window out of bounds is dropped whole in
    FILL_OR_DROP mode and its start clamped in CLIP mode."""
    dn = dimension_numbers
    out = np.array(operand, copy=True)
    indices, updates = np.asarray(indices), np.asarray(updates)
    dropped = set(dn.inserted_window_dims) | set(dn.operand_batching_dims)
    window_dims = [i for i in range(out.ndim) if i not in dropped]
    scatter_axes = [i for i in range(updates.ndim) if i not in dn.update_window_dims]
    window = [1] * out.ndim
    for ud, od in zip(dn.update_window_dims, window_dims):
        window[od] = updates.shape[ud]
    if out.size == 0:  # nothing lands (a CLIP start would aim below 0 on an empty axis)
        return out
    for uidx in np.ndindex(*updates.shape):
        b = tuple(uidx[a] for a in scatter_axes)
        start = [0] * out.ndim
        for k, od in enumerate(dn.scatter_dims_to_operand_dims):
            start[od] = int(indices[b + (k,)])
        for od, idim in zip(dn.operand_batching_dims, dn.scatter_indices_batching_dims):
            start[od] = b[idim]
        in_bounds = all(0 <= s <= out.shape[i] - window[i] for i, s in enumerate(start))
        if mode == Mode.FILL_OR_DROP and not in_bounds:
            continue
        start = [min(max(s, 0), out.shape[i] - window[i]) for i, s in enumerate(start)]
        pos = list(start)
        for ud, od in zip(dn.update_window_dims, window_dims):
            pos[od] += uidx[ud]
        pos = tuple(pos)
        out[pos] = combine(out[pos], updates[uidx])
    return out


def _sdn(window, inserted, to_operand, obatch=(), ibatch=()):
    return SDN(update_window_dims=window, inserted_window_dims=inserted,
               scatter_dims_to_operand_dims=to_operand, operand_batching_dims=obatch,
               scatter_indices_batching_dims=ibatch)


# (label, operand shape, indices shape, updates shape, index range, dnums, mode, unique)
SCATTER_CONFIGS = [
    ("rows", (5, 3), (4, 1), (4, 3), (0, 5), _sdn((1,), (0,), (0,)), Mode.FILL_OR_DROP, False),
    ("elements", (6,), (4, 1), (4,), (0, 6), _sdn((), (0,), (0,)), Mode.FILL_OR_DROP, False),
    ("drop", (6,), (5, 1), (5, 2), (-2, 8), _sdn((1,), (), (0,)), Mode.FILL_OR_DROP, False),
    ("clip", (6,), (5, 1), (5, 2), (-2, 8), _sdn((1,), (), (0,)), Mode.CLIP, False),
    ("points", (4, 5), (2, 3, 2), (2, 3), (0, 4), _sdn((), (0, 1), (0, 1)), Mode.CLIP, False),
    ("batching", (3, 4), (3, 1), (3,), (0, 4), _sdn((), (1,), (1,), (0,), (0,)), Mode.CLIP, False),
    ("window first", (5, 3), (2, 1), (3, 2), (0, 5), _sdn((0,), (0,), (0,)), Mode.CLIP, False),
    ("unique rows", (5, 3), (3, 1), (3, 3), None, _sdn((1,), (0,), (0,)), Mode.FILL_OR_DROP, True),
    ("empty", (5, 3), (0, 1), (0, 3), (0, 5), _sdn((1,), (0,), (0,)), Mode.FILL_OR_DROP, False),
    # into an empty operand nothing lands, in every mode (XLA returns the operand)
    ("empty operand clip", (0, 3), (2, 1), (2, 3), (-1, 2), _sdn((1,), (0,), (0,)), Mode.CLIP,
     False),
    ("empty operand drop", (0,), (2, 1), (2,), (-1, 2), _sdn((), (0,), (0,)), Mode.FILL_OR_DROP,
     False),
    ("empty operand promise", (0,), (2, 1), (2,), (0, 1), _sdn((), (0,), (0,)),
     Mode.PROMISE_IN_BOUNDS, False),
]


def _scatter_indices(rng, ishape, rng_range, unique, operand_shape):
    if unique:  # distinct rows: a permutation prefix
        n = ishape[0]
        return rng.permutation(operand_shape[0])[:n].reshape(ishape).astype(np.int32)
    lo, hi = rng_range
    return rng.integers(lo, hi, size=ishape).astype(np.int32)


def _scatter_params(dn, mode, unique):
    return dict(dimension_numbers=dn, indices_are_sorted=False, unique_indices=unique, mode=mode)


def _scatter_spec(prim, combine, dtypes, *, unique_only=False, grads=None, small=False):
    def cases(d):
        out = []
        for label, s, ishape, ushape, rr, dn, mode, unique in SCATTER_CONFIGS:
            if unique_only and not unique and not label.startswith("empty") and \
                    label != "batching":
                continue
            p = _scatter_params(dn, mode, unique)

            def sample(rng, s=s, ishape=ishape, ushape=ushape, rr=rr, unique=unique):
                if small and d.kind not in "b":
                    x, u = rand(rng, s, d, -2, 2), rand(rng, ushape, d, -2, 2)
                else:
                    x, u = values(rng, s, d), values(rng, ushape, d)
                return [x, _scatter_indices(rng, ishape, rr, unique, s), u]

            def ref(x, i, u, p=p):
                if d.kind in "iu":  # exact integer arithmetic, wrapped into the dtype at the end
                    return wrap(scatter_ref(combine, pyints(x), i, pyints(u), **p), d)
                wide = scatter_ref(combine, f64(x), i, f64(u), **p)
                return wide.astype(np.float64 if d.kind not in "c" else np.complex128) \
                    if d != np.bool_ else wide
            # scatter-mul is differentiable in its updates only with unique indices (as in JAX)
            grad_operands = (0,) if prim is lax.scatter_mul_p and not unique else None
            if label.startswith("empty operand"):
                # the updates' cotangent is a gather from an empty operand, which JAX refuses
                # as plax does (tests/lax/test_scatter_empty.py); nothing else to linearize
                grad_operands = ()
            out.append(Case(p, sample, ref, label, tol_scale=4, grad_operands=grad_operands))
        return out
    spec = Spec(prim, dtypes, cases, grads=grads)
    SPECS.append(spec)
    return spec


def _scatter_grad_cases(prim, labels, distinct=False):
    def grads():
        rng = np.random.default_rng(0)
        out = []
        for label, s, ishape, ushape, rr, dn, mode, unique in SCATTER_CONFIGS:
            if label not in labels:
                continue
            idx = _scatter_indices(rng, ishape, rr, unique, s)
            p = _scatter_params(dn, mode, unique)
            if distinct:
                x = rand_distinct_pair(rng, s, ushape)
            else:
                x = (rand(rng, s, np.float32, 0.5, 2), rand(rng, ushape, np.float32, 0.5, 2))
            out.append(GradCase((lambda p, idx: lambda a, u: prim.bind(a, idx, u, **p))(p, idx),
                                x, label=label))
        return out
    return grads


def rand_distinct_pair(rng, s1, s2):
    from .harness import rand_distinct
    n1 = int(np.prod(s1))
    both = rand_distinct(rng, (n1 + int(np.prod(s2)),), np.float32)
    return both[:n1].reshape(s1), both[n1:].reshape(s2)


_scatter_spec(lax.scatter_p, lambda old, new: new, ALL, unique_only=True,
              grads=_scatter_grad_cases(lax.scatter_p, ("unique rows",)))
# scatter with repeated indices: only the set of written positions is deterministic, so the
# values test uses unique indices; the JVP's repeated-index path is checked in test_indexing.
_scatter_spec(lax.scatter_add_p, lambda a, b: a + b, NUM,
              grads=_scatter_grad_cases(lax.scatter_add_p, ("rows", "drop", "clip", "batching",
                                                            "window first")))
_scatter_spec(lax.scatter_mul_p, lambda a, b: a * b, NUM, small=True,
              grads=_scatter_grad_cases(lax.scatter_mul_p, ("unique rows",)))
def _lexicographic(x):
    """Sort key: complex numbers order by real part, then imaginary part (as XLA compares them)."""
    return (x.real, x.imag) if isinstance(x, complex) else x


_scatter_spec(lax.scatter_min_p, lambda a, b: min(a, b, key=_lexicographic), ALL,
              grads=_scatter_grad_cases(lax.scatter_min_p, ("rows", "drop", "batching"), True))
_scatter_spec(lax.scatter_max_p, lambda a, b: max(a, b, key=_lexicographic), ALL,
              grads=_scatter_grad_cases(lax.scatter_max_p, ("rows", "clip", "elements"), True))
