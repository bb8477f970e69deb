"""Counting and binning in plax.numpy: bincount, digitize, histogram_bin_edges, histogram,
histogram2d and histogramdd.

Bins are found with searchsorted and counted with scatter-add, so everything is jittable
once the number of bins is static; ``bincount`` without ``length=`` needs concrete input
(under jit it raises the concretization error that points to ``length=``).
"""
from __future__ import annotations

import operator

import numpy as np

from plax import dtypes, errors, lax
from plax.core.trace import Tracer, get_aval
from plax.transforms.jit import jit_when_traced
from plax.numpy.util import asarray_weak, check_arraylike, to_dtype, to_inexact_dtype

__all__ = ["bincount", "digitize", "histogram_bin_edges", "histogram", "histogram2d",
           "histogramdd"]


def _static_int(value, what: str) -> int:
    """``value`` as a Python int; a traced value cannot set a shape."""
    if isinstance(value, Tracer):
        v = value.to_concrete_value()
        if v is None:
            raise errors.ConcretizationTypeError(value, f"The error occurred because of {what}.")
        value = np.asarray(v).item()
    return operator.index(value)


def _scatter_add_1d(length: int, idx, updates):
    """``zeros(length).at[idx].add(updates)``; out-of-range indices are dropped."""
    from plax.numpy.creation import zeros
    return zeros((length,), get_aval(updates).dtype).at[idx].add(updates, mode="drop")


def bincount(x, weights=None, minlength: int = 0, *, length: int | None = None,
             out_sharding=None):
    """Number of occurrences (or summed ``weights``) of each non-negative integer in ``x``.

    Args:
      x: a 1-D integer array (negative values count in bin 0, as in JAX).
      weights: per-element weights, of ``x``'s shape.
      minlength: the least number of bins.
      length: the static number of bins (values beyond it are dropped); required under
        jit and vmap, else the length is ``max(minlength, max(x) + 1)`` from concrete ``x``.
      out_sharding: the result's explicit sharding.

    Returns:
      A 1-D array of counts (default int dtype) or of summed weights (their dtype).

    Example:
      >>> jnp.bincount(jnp.array([0, 1, 1, 3]))
      Array([1, 2, 0, 1], dtype=int32)
    """
    if out_sharding is not None:
        from plax.sharding_types import with_out_sharding
        return with_out_sharding(lambda: bincount(x, weights, minlength, length=length),
                                 out_sharding)
    check_arraylike("bincount", x)
    x = asarray_weak(x)
    if get_aval(x).dtype == np.bool_:
        x = lax.convert_element_type(x, np.int32)
    if not dtypes.is_integer(get_aval(x).dtype):
        raise TypeError(f"x argument to bincount must have an integer type; got "
                        f"{get_aval(x).dtype}")
    if get_aval(x).ndim != 1:
        raise ValueError("only 1-dimensional input supported.")
    minlength = _static_int(minlength, "argument 'minlength' of jnp.bincount")
    if minlength < 0:
        raise ValueError("minlength must be non-negative")
    if length is None:
        if isinstance(x, Tracer) and x.to_concrete_value() is None:
            raise errors.ConcretizationTypeError(
                x, "The error occurred because of argument 'x' of jnp.bincount: the number of "
                   "bins depends on its values. To avoid this error, pass a static `length` "
                   "argument (like the `size=` of jnp.nonzero).")
        host = np.asarray(x.to_concrete_value() if isinstance(x, Tracer) else x)
        length = max(minlength, int(max(0, host.max())) + 1 if host.size else 0)
    else:
        length = _static_int(length, "argument 'length' of jnp.bincount")
    if weights is None:
        updates = lax.full(get_aval(x).shape, 1, dtypes.default_int_dtype())
    else:
        check_arraylike("bincount", weights)
        updates = asarray_weak(weights)
        if get_aval(updates).shape != get_aval(x).shape:
            raise ValueError("shape of weights must match shape of x.")
        a = get_aval(updates)
        updates = to_dtype(updates, a.dtype, False)
    idx = lax.max(x, lax.full((), 0, get_aval(x).dtype))  # negatives count in bin 0
    return _bincount(idx, updates, length)


@jit_when_traced(name="bincount", static_argnames=("length",))
def _bincount(idx, updates, length):
    return _scatter_add_1d(length, idx, updates)


def digitize(x, bins, right: bool = False, *, method: str | None = None):
    """Index of the bin each value of ``x`` falls in.

    Args:
      x: the values.
      bins: 1-D monotonic bin edges (increasing or decreasing).
      right: whether a bin includes its right edge rather than its left.
      method: the searchsorted algorithm (``'scan'``, ``'sort'``, ``'compare_all'``, ...).

    Returns:
      int32 indices of ``x``'s shape: ``i`` such that ``bins[i-1] <= x < bins[i]`` (for
      increasing bins and ``right=False``).

    Example:
      >>> jnp.digitize(jnp.array([0.5, 1.5, 3.]), jnp.array([0., 1., 2.]))
      Array([1, 2, 3], dtype=int32)
    """
    check_arraylike("digitize", x, bins)
    right = bool(right)
    return _digitize(x, bins, right, method)


@jit_when_traced(name="digitize", static_argnames=("right", "method"))
def _digitize(x, bins, right, method):
    from plax.numpy.searching import searchsorted
    from plax.numpy.ufuncs import where
    x, bins = asarray_weak(x), asarray_weak(bins)
    if get_aval(bins).ndim != 1:
        raise ValueError(f"digitize: bins must be a 1-dimensional array; got shape "
                         f"{get_aval(bins).shape}")
    n = get_aval(bins).shape[0]
    if n == 0:
        return lax.full(get_aval(x).shape, 0, np.int32)
    side = "left" if right else "right"
    kw = {} if method is None else {"method": method}
    up = searchsorted(bins, x, side=side, **kw)
    down = lax.sub(lax.full((), n, get_aval(up).dtype),
                   searchsorted(lax.rev(bins, (0,)), x, side=side, **kw))
    first = lax.reshape(lax.slice(bins, (0,), (1,)), ())
    last = lax.reshape(lax.slice(bins, (n - 1,), (n,)), ())
    out = where(lax.ge(last, first), up, down)
    return lax.convert_element_type(out, np.int32)


def _is_bin_count(bins) -> bool:
    if isinstance(bins, (list, tuple)):
        return False
    return np.ndim(bins) == 0 if not hasattr(bins, "aval") else get_aval(bins).ndim == 0


def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """The edges of the bins :func:`histogram` uses.

    Args:
      a: the data (flattened).
      bins: a static number of equal-width bins, or a 1-D array of edges (returned as is).
      range: ``(lower, upper)`` of the bins; ``(a.min(), a.max())`` by default (widened by
        0.5 on each side when equal).
      weights: unused (NumPy's signature).

    Returns:
      A 1-D float array of ``bins + 1`` edges.

    Example:
      >>> jnp.histogram_bin_edges(jnp.array([0., 1., 4.]), bins=4)
      Array([0., 1., 2., 3., 4.], dtype=float32)
    """
    if isinstance(bins, str):
        raise NotImplementedError("string values for `bins` not implemented.")
    check_arraylike("histogram_bin_edges", a, bins)
    a = asarray_weak(a)
    dt = to_inexact_dtype(get_aval(a).dtype)
    if not _is_bin_count(bins):
        b = asarray_weak(bins)
        if get_aval(b).ndim != 1:
            raise ValueError("`bins` must be 1d, when an array")
        return to_dtype(b, dt, False)
    nbins = _static_int(bins, "the bins argument of histogram_bin_edges (a number of bins "
                              "sets the output shape)")
    if nbins < 1:
        raise ValueError("`bins` must be positive, when an integer")
    from plax.numpy.reductions import max as jmax, min as jmin
    if range is None:
        lo, hi = jmin(a), jmax(a)
    else:
        shape = (len(range),) if isinstance(range, (list, tuple)) else np.shape(range) \
            if not hasattr(range, "aval") else get_aval(range).shape
        if tuple(shape) != (2,):
            raise ValueError(f"`range` must be either None or a sequence of scalars, got "
                             f"{range}")
        lo, hi = range[0], range[1]
    lo, hi = to_dtype(asarray_weak(lo), dt, False), to_dtype(asarray_weak(hi), dt, False)
    half = lax.full((), 0.5, dt)
    same = lax.eq(lo, hi)
    lo = lax.select(same, lax.sub(lo, half), lo)
    hi = lax.select(same, lax.add(hi, half), hi)
    from plax.numpy.creation import linspace
    return linspace(lo, hi, nbins + 1, dtype=dt)


def _bin_index(values, edges):
    """Bin of each value: 1..n for values in ``[edges[0], edges[-1]]`` (the last edge is
    inclusive), 0 below and n + 1 above."""
    from plax.numpy.searching import searchsorted
    from plax.numpy.ufuncs import where
    n = get_aval(edges).shape[0]
    idx = searchsorted(edges, values, side="right")
    last = lax.reshape(lax.slice(edges, (n - 1,), (n,)), ())
    return where(lax.eq(values, last), lax.full((), n - 1, get_aval(idx).dtype), idx)


def histogram(a, bins=10, range=None, weights=None, density=None):
    """Histogram of ``a`` (flattened).

    Args:
      a: the data.
      bins: a static number of equal-width bins or a 1-D array of edges.
      range: ``(lower, upper)`` of the bins; values outside are ignored.
      weights: per-element weights, of ``a``'s shape.
      density: normalise so that the histogram integrates to one.

    Returns:
      ``(counts, bin_edges)``: float counts (or summed weights, or densities) per bin and
      the ``len(counts) + 1`` edges.

    Example:
      >>> jnp.histogram(jnp.array([1., 2., 2., 3.]), bins=2)[0]
      Array([1., 3.], dtype=float32)
    """
    check_arraylike("histogram", a)
    a = asarray_weak(a)
    if weights is None:
        dt = to_inexact_dtype(get_aval(a).dtype)
        a = to_dtype(a, dt, False)
        w = lax.full(get_aval(a).shape, 1, dt)
    else:
        check_arraylike("histogram", weights)
        w = asarray_weak(weights)
        if get_aval(w).shape != get_aval(a).shape:
            raise ValueError("weights should have the same shape as a.")
        dt = to_inexact_dtype(dtypes.result_type(a, w))
        a, w = to_dtype(a, dt, False), to_dtype(w, dt, False)
    edges = histogram_bin_edges(a, bins, range, weights)
    return _histogram(a, w, edges, bool(density))


@jit_when_traced(name="histogram", static_argnames=("density",))
def _histogram(a, w, edges, density):
    size = get_aval(a).size
    a, w = lax.reshape(a, (size,)), lax.reshape(w, (size,))
    n = get_aval(edges).shape[0]
    counts = _scatter_add_1d(n, _bin_index(a, edges), w)
    counts = lax.slice(counts, (1,), (n,))
    if density:
        widths = lax.sub(lax.slice(edges, (1,), (n,)), lax.slice(edges, (0,), (n - 1,)))
        total = lax.reduce_sum(counts, (0,))
        counts = lax.div(lax.div(counts, widths), lax.broadcast_in_dim(total, (n - 1,), ()))
    return counts, edges


def histogramdd(sample, bins=10, range=None, weights=None, density=None):
    """Multidimensional histogram of ``N`` points in ``D`` dimensions.

    Args:
      sample: an ``(N, D)`` array of points.
      bins: a static number of bins for every dimension, or one per dimension (a number
        or a 1-D array of edges).
      range: one ``(lower, upper)`` (or None) per dimension.
      weights: one weight per point.
      density: normalise so that the histogram integrates to one.

    Returns:
      ``(counts, edges)``: a D-dimensional array (integer counts, as JAX, or floats with
      ``weights`` or ``density``) and the list of D edge arrays.

    Example:
      >>> h, edges = jnp.histogramdd(jnp.array([[0., 0.], [1., 1.], [1., 0.]]), bins=2)
      >>> h
      Array([[1, 0],
             [1, 1]], dtype=int32)
    """
    check_arraylike("histogramdd", sample)
    sample = asarray_weak(sample)
    if get_aval(sample).ndim != 2:
        raise ValueError(f"histogramdd: sample must be 2-D (N, D), got shape "
                         f"{get_aval(sample).shape}")
    num, dim = get_aval(sample).shape
    if weights is not None:
        check_arraylike("histogramdd", weights)
        w = asarray_weak(weights)
        if get_aval(w).shape != (num,):
            raise ValueError("should have one weight for each sample.")
        dt = to_inexact_dtype(dtypes.result_type(sample, w))
        w = to_dtype(w, dt, False)
    else:
        dt = to_inexact_dtype(get_aval(sample).dtype)
        w = lax.full((num,), 1, dtypes.default_int_dtype())  # integer counts, as JAX
    sample = to_dtype(sample, dt, False)
    if _is_bin_count(bins):
        bins = [bins] * dim
    elif len(bins) != dim:
        raise ValueError("should be a bin for each dimension.")
    if range is None:
        range = [None] * dim
    elif len(range) != dim:
        raise ValueError("range argument must have one entry per dimension")
    columns = [lax.reshape(lax.slice(sample, (0, i), (num, i + 1)), (num,)) for i in
               builtins_range(dim)]
    edges = [histogram_bin_edges(col, b, r) for col, b, r in zip(columns, bins, range)]
    return _histogramdd(columns, w, edges, bool(density))


builtins_range = range  # ``range`` is a parameter name above


@jit_when_traced(name="histogramdd", static_argnames=("density",))
def _histogramdd(columns, w, edges, density):
    sizes = tuple(get_aval(e).shape[0] + 1 for e in edges)  # with under/overflow bins
    idx_dt = dtypes.default_int_dtype()
    flat = None
    for col, e, size in zip(columns, edges, sizes):
        i = lax.convert_element_type(_bin_index(col, e), idx_dt)
        flat = i if flat is None else lax.add(lax.mul(flat, lax.full((), size, idx_dt)), i)
    total = int(np.prod(sizes))
    counts = lax.reshape(_scatter_add_1d(total, flat, w), sizes)
    # drop the under- and overflow bins of every dimension
    counts = lax.slice(counts, (1,) * len(sizes), tuple(s - 1 for s in sizes))
    if density:
        dt = get_aval(edges[0]).dtype
        counts = lax.convert_element_type(counts, dt)
        counts = lax.div(counts, lax.broadcast_in_dim(lax.reduce_sum(counts, tuple(
            builtins_range(len(sizes)))), get_aval(counts).shape, ()))
        for d, e in enumerate(edges):
            n = get_aval(e).shape[0]
            width = lax.sub(lax.slice(e, (1,), (n,)), lax.slice(e, (0,), (n - 1,)))
            counts = lax.div(counts, lax.broadcast_in_dim(width, get_aval(counts).shape, (d,)))
    return counts, list(edges)


def histogram2d(x, y, bins=10, range=None, weights=None, density=None):
    """2-D histogram of the points ``(x[i], y[i])``.

    Args:
      x, y: 1-D coordinates of the points.
      bins: a number of bins, a pair of numbers, an array of edges for both, or a pair of
        edge arrays.
      range: ``[[xmin, xmax], [ymin, ymax]]`` (or None).
      weights: one weight per point.
      density: normalise so that the histogram integrates to one.

    Returns:
      ``(counts, x_edges, y_edges)``.

    Example:
      >>> jnp.histogram2d(jnp.array([0., 1.]), jnp.array([0., 1.]), bins=2)[0]
      Array([[1, 0],
             [0, 1]], dtype=int32)
    """
    check_arraylike("histogram2d", x, y)
    x, y = asarray_weak(x), asarray_weak(y)
    if get_aval(x).shape != get_aval(y).shape or get_aval(x).ndim != 1:
        raise ValueError("histogram2d: x and y must be 1-D arrays of the same length")
    dt, weak = dtypes.result_type(x, y, return_weak_type_flag=True)
    x, y = to_dtype(x, dt, False), to_dtype(y, dt, False)
    sample = lax.concatenate([lax.expand_dims(x, (1,)), lax.expand_dims(y, (1,))], 1)
    if not _is_bin_count(bins):
        try:
            count = len(bins)
        except TypeError:
            count = get_aval(bins).shape[0]
        if count != 2:  # one array of edges, shared by both axes
            bins = [bins, bins]
    counts, edges = histogramdd(sample, bins, range, weights, density)
    return counts, edges[0], edges[1]
