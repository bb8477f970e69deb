"""Hypothesis strategies for random NumPy index expressions (shared by the getitem and .at[]
tests), and NumPy references for JAX's out-of-bounds rules."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st


@st.composite
def shapes(draw, min_dims=0, max_dims=4):
    return tuple(draw(st.lists(st.integers(0, 5), min_size=min_dims, max_size=max_dims)))


def _draw_entries(draw, shape, dims, allow_oob, allow_bool, allow_arrays, array_shape):
    """Index entries consuming the axes ``dims`` of ``shape`` in order, with Nones mixed in.
    Returns (entries, uses_out_of_bounds_integers)."""
    entries, oob = [], False
    d, end = dims
    while d < end:
        if draw(st.integers(0, 5)) == 0:
            entries.append(None)
        kinds = ["int", "slice", "slice"] + (["array"] if allow_arrays else []) + (
            ["mask"] if allow_bool else [])
        kind = draw(st.sampled_from(kinds))
        size = shape[d]
        if kind in ("int", "array") and size == 0:
            kind = "slice"  # no valid integer index into an empty axis
        if kind == "int":
            lo, hi = (-size, size - 1) if not allow_oob else (-size - 4, size + 4)
            i = draw(st.integers(lo, hi))
            oob |= not -size <= i < size
            entries.append(i)
            d += 1
        elif kind == "slice":
            lo = draw(st.one_of(st.none(), st.integers(-8, 8)))
            hi = draw(st.one_of(st.none(), st.integers(-8, 8)))
            step = draw(st.sampled_from([None, 1, 2, 3, -1, -2, -3]))
            entries.append(slice(lo, hi, step))
            d += 1
        elif kind == "array":
            lo, hi = (-size, size - 1) if not allow_oob else (-size - 3, size + 2)
            n = int(np.prod(array_shape))
            vals = draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
            dtype = draw(st.sampled_from([np.int32, np.int64, np.int8, np.uint8]))
            arr = np.asarray(vals).reshape(array_shape)
            if dtype == np.uint8:
                arr = np.where(arr < 0, arr + size, arr).clip(0)  # unsigned: no negatives
            arr = arr.astype(dtype)
            oob |= bool(np.any((arr < -size) | (arr >= size)))
            entries.append(arr)
            d += 1
        else:
            k = draw(st.integers(1, min(2, end - d)))
            mshape = shape[d:d + k]
            n = int(np.prod(mshape))
            bits = draw(st.lists(st.booleans(), min_size=n, max_size=n))
            entries.append(np.asarray(bits, bool).reshape(mshape))
            d += k
    if draw(st.integers(0, 5)) == 0:
        entries.append(None)
    return entries, oob


@st.composite
def index_expressions(draw, shape, allow_oob=False, allow_bool=True, allow_arrays=True):
    """A random index for an array of ``shape``: ints, slices (negative steps, out-of-range
    bounds), None, at most one Ellipsis, integer arrays (negative, of several integer types,
    broadcastable, adjacent or not) and boolean masks. Returns (index, uses_oob_integers)."""
    ndim = len(shape)
    # all advanced integer arrays share a broadcastable shape family
    array_shape = draw(st.sampled_from([(), (2,), (3,), (2, 1), (1, 3), (2, 3)]))
    n_before = draw(st.integers(0, ndim))
    use_ellipsis = draw(st.booleans())
    n_after = draw(st.integers(0, ndim - n_before)) if use_ellipsis else 0
    kw = dict(allow_oob=allow_oob, allow_bool=allow_bool, allow_arrays=allow_arrays,
              array_shape=array_shape)
    before, oob1 = _draw_entries(draw, shape, (0, n_before), **kw)
    after, oob2 = _draw_entries(draw, shape, (ndim - n_after, ndim), **kw)
    entries = before + ([Ellipsis] if use_ellipsis else []) + after
    if len(entries) == 1 and draw(st.booleans()):
        return entries[0], oob1 or oob2
    return tuple(entries), oob1 or oob2


def _consumed(entries):
    n = 0
    for e in entries:
        if e is None or e is Ellipsis:
            continue
        if isinstance(e, np.ndarray) and e.dtype == bool:
            n += e.ndim
        else:
            n += 1
    return n


def valid_for_numpy(x, idx):
    try:
        x[idx]
    except IndexError:
        return False
    return True


def clamped(idx, shape):
    """``idx`` with JAX's clamping: integer indices (and integer array entries) are wrapped if
    negative and then clipped into the axis, as JAX does instead of raising."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    n_ell = sum(1 for e in idx if e is Ellipsis)
    consumed = _consumed(idx)
    out, dim = [], 0
    for e in idx:
        if e is None:
            out.append(e)
            continue
        if e is Ellipsis:
            out.append(e)
            dim += len(shape) - consumed
            continue
        if isinstance(e, np.ndarray) and e.dtype == bool:
            out.append(e)
            dim += e.ndim
            continue
        if isinstance(e, (int, np.integer)) or isinstance(e, np.ndarray):
            size = shape[dim]
            a = np.asarray(e).astype(np.int64)
            a = np.clip(np.where(a < 0, a + size, a), 0, size - 1)
            out.append(a if isinstance(e, np.ndarray) else int(a))
        else:
            out.append(e)
        dim += 1
    del n_ell
    return tuple(out)


def _sentinel_index(idx, shape, mode):
    """``idx`` rewritten for an array padded by one slot at the end of every axis: integer
    entries are wrapped if negative, then out-of-bounds ones point at the padding slot
    (mode "drop"/"fill") or are clipped into the axis (mode "clip"); slices keep their
    original extent; masks are padded with False."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    consumed = _consumed(idx)
    out, dim = [], 0
    for e in idx:
        if e is None:
            out.append(e)
            continue
        if e is Ellipsis:  # spelled out: the padded axes must keep their original extent
            n = len(shape) - consumed
            out.extend(slice(0, d) for d in shape[dim:dim + n])
            if not n:
                out.append(Ellipsis)  # still separates advanced indices
            dim += n
            continue
        if isinstance(e, np.ndarray) and e.dtype == bool:
            out.append(np.pad(e, [(0, 1)] * e.ndim, constant_values=False))
            dim += e.ndim
            continue
        size = shape[dim]
        if isinstance(e, slice):
            r = range(*e.indices(size))
            out.append(slice(r.start, None if r.stop < 0 else r.stop, r.step) if len(r)
                       else slice(0, 0))
        else:
            a = np.asarray(e).astype(np.int64)
            a = np.where(a < 0, a + size, a)
            if mode == "clip":
                a = np.clip(a, 0, size - 1)
            else:
                a = np.where((a < 0) | (a >= size), size, a)
            out.append(a if isinstance(e, np.ndarray) else int(a))
        dim += 1
    if Ellipsis not in [e for e in idx if not isinstance(e, np.ndarray)]:
        out.extend(slice(0, d) for d in shape[dim:])
    return tuple(out)


def target_positions(idx, shape, mode="drop"):
    """The flat positions ``x[idx]`` refers to under JAX's rules, with -1 where the index is
    out of bounds (dropped by updates, filled by reads in mode "fill")."""
    ids = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    padded = np.pad(ids, [(0, 1)] * len(shape), constant_values=-1)
    return padded[_sentinel_index(idx, shape, mode)]


def numpy_update(x, idx, y, op, mode="drop"):
    """NumPy reference for ``x.at[idx].<op>(y)`` (op: set/add/multiply/min/max/divide/power)
    in float64 (or int64), with out-of-bounds updates dropped or clipped. For "set" with
    repeated positions the result is ambiguous; returns (result, candidates) where candidates
    maps each repeated flat position to the values that may win it."""
    wide = np.float64 if x.dtype.kind in "fc" else np.int64
    flat = x.astype(wide).reshape(-1).copy()
    tgt = target_positions(idx, x.shape, mode)
    yb = np.broadcast_to(np.asarray(y, wide), tgt.shape).reshape(-1)
    tgt = tgt.reshape(-1)
    keep = tgt >= 0
    tgt, yb = tgt[keep], yb[keep]
    candidates = {}
    if op == "set":
        flat[tgt] = yb
        for p in np.unique(tgt):
            vals = yb[tgt == p]
            if len(vals) > 1:
                candidates[int(p)] = set(vals.tolist())
    elif op in ("divide", "power"):
        factor = np.ones_like(flat)
        np.multiply.at(factor, tgt, yb)
        flat = flat / factor if op == "divide" else flat ** factor
    else:
        ufunc = {"add": np.add, "multiply": np.multiply, "min": np.minimum,
                 "max": np.maximum}[op]
        ufunc.at(flat, tgt, yb)
    return flat.reshape(x.shape), candidates
