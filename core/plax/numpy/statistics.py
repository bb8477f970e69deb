"""Order statistics and correlations of plax.numpy: median, quantile and percentile (and their
NaN-ignoring variants, with every interpolation ``method`` JAX offers), nanargmax/nanargmin,
nancumsum/nancumprod, cov and corrcoef.

Quantiles sort along the reduced axes and gather at the interpolation points, so they are
jittable, batchable and (for the interpolating methods) differentiable, as in JAX.
"""
from __future__ import annotations

import math

import numpy as np

from plax import dtypes, lax
from plax.core.trace import get_aval
from plax.transforms.jit import jit_when_traced
from plax.numpy.util import (asarray_weak, canonicalize_axis_tuple, check_arraylike,
                             reject_out, to_dtype, to_inexact_dtype)

_METHODS = ("linear", "lower", "higher", "midpoint", "nearest", "inverted_cdf")


def _inexact(x):
    """``x`` converted to its inexact dtype (integers to float, keeping a weak type)."""
    a = get_aval(x)
    return to_dtype(x, to_inexact_dtype(a.dtype), a.weak_type)


def _to_last_axis(x, axes: tuple[int, ...]):
    """``x`` with ``axes`` moved to the end and merged into one axis (kept axes in order)."""
    shape = get_aval(x).shape
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    perm = kept + axes
    if perm != tuple(range(len(shape))):
        x = lax.transpose(x, perm)
    n = math.prod(shape[i] for i in axes)
    return lax.reshape(x, tuple(shape[i] for i in kept) + (n,))


def _gather_last(x, idx):
    """``x[..., idx[..., j]]`` along the last axis (``idx`` shares ``x``'s leading shape)."""
    from plax.numpy.shape_ops import take_along_axis
    return take_along_axis(x, idx, axis=-1)


def _quantile(name: str, a, q, axis, method: str, keepdims: bool, ignore_nan: bool,
              weights=None):
    check_arraylike(name, a, q)
    if method not in _METHODS:
        raise ValueError(f"{name}: method can only be one of {', '.join(map(repr, _METHODS))}; "
                         f"got {method!r}")
    a = _inexact(asarray_weak(a))
    aval = get_aval(a)
    if dtypes.is_complex(aval.dtype):
        raise ValueError(f"{name} does not support complex input, as the operation is poorly "
                         "defined.")
    q = asarray_weak(q)
    q_shape = get_aval(q).shape
    if len(q_shape) > 1:
        raise ValueError(f"{name}: q must be have rank <= 1, got shape {q_shape}")
    axes = canonicalize_axis_tuple(axis, aval.ndim)
    out_shape = tuple(1 if i in axes else d for i, d in enumerate(aval.shape) if keepdims
                      or i not in axes)
    dt = aval.dtype
    x = _to_last_axis(a, axes)
    batch = get_aval(x).shape[:-1]
    n = get_aval(x).shape[-1]
    nq = math.prod(q_shape)
    # q along a new last axis, beside the batch axes: (batch..., nq)
    qv = lax.broadcast_in_dim(lax.reshape(lax.convert_element_type(q, dt), (nq,)),
                              batch + (nq,), (len(batch),))
    isnan = lax.ne(x, x)
    if weights is not None:
        check_arraylike(name, weights)
        if method != "inverted_cdf":
            raise NotImplementedError(f"{name}: method {method!r} doesn't support weights. Only "
                                      "method 'inverted_cdf' supports weights.")
        w = asarray_weak(weights)
        if dtypes.is_complex(get_aval(w).dtype):
            raise ValueError("Weights cannot be complex types.")
        w = _weights_like(name, w, aval.shape, axes, axis)
        w = _to_last_axis(lax.convert_element_type(w, dt), axes)
    elif method == "inverted_cdf":
        w = lax.full(get_aval(x).shape, 1, dt)
    if method == "inverted_cdf":
        x, w = lax.sort([x, w], len(batch), num_keys=1)
        result, force_nan = _inverted_cdf(x, w, qv, lax.ne(x, x), ignore_nan)
    else:
        x = lax.sort(x, len(batch))  # NaNs sort last
        nan_row = lax.reduce_or(isnan, (len(batch),))
        if ignore_nan:
            count = lax.reduce_sum(lax.convert_element_type(lax.bitwise_not(isnan), dt),
                                   (len(batch),))
            force_nan = lax.eq(count, lax.full((), 0, dt))
        else:
            count = lax.full(batch, n, dt)
            force_nan = nan_row
        last = lax.broadcast_in_dim(lax.sub(count, lax.full((), 1, dt)), batch + (nq,),
                                    tuple(range(len(batch))))
        pos = lax.mul(qv, last)
        zero = lax.full((), 0, dt)
        lo = lax.max(zero, lax.min(lax.floor(pos), last))
        hi = lax.max(zero, lax.min(lax.ceil(pos), last))
        frac = lax.sub(pos, lax.floor(pos))
        index_dtype = dtypes.default_int_dtype()
        lo_v = _gather_last(x, lax.convert_element_type(lo, index_dtype))
        hi_v = _gather_last(x, lax.convert_element_type(hi, index_dtype))
        if method == "linear":
            result = lax.add(lax.mul(lo_v, lax.sub(lax.full((), 1, dt), frac)),
                             lax.mul(hi_v, frac))
        elif method == "lower":
            result = lo_v
        elif method == "higher":
            result = hi_v
        elif method == "nearest":  # as JAX: a tie goes to the lower neighbour
            result = lax.select(lax.le(frac, lax.full((), 0.5, dt)), lo_v, hi_v)
        else:  # midpoint
            result = lax.mul(lax.add(lo_v, hi_v), lax.full((), 0.5, dt))
    force = lax.broadcast_in_dim(force_nan, batch + (nq,), tuple(range(len(batch))))
    result = lax.select(force, lax.full(batch + (nq,), np.nan, dt), result)
    # (batch..., nq) -> q_shape + out_shape
    result = lax.transpose(result, (len(batch),) + tuple(range(len(batch))))
    result = lax.reshape(result, q_shape + out_shape)
    return lax.convert_element_type(result, dt, False)  # as JAX: never weakly typed


def _weights_like(name: str, w, shape, axes, axis):
    """``weights`` broadcast to ``a``'s shape: equal shapes, or one weight per reduced element."""
    ws = get_aval(w).shape
    if ws == shape:
        return w
    if axis is None:
        raise ValueError(f"{name}: Weights shape must match 'a' shape when axis is None.")
    if ws != tuple(shape[i] for i in axes):
        raise ValueError(f"{name}: Weights shape {ws} must match reduction axes "
                         f"{tuple(shape[i] for i in axes)}")
    return lax.broadcast_in_dim(w, shape, axes)


def _inverted_cdf(x, w, qv, isnan, ignore_nan: bool):
    """The first sorted value whose cumulative weight reaches ``q`` times the total (NumPy's
    'inverted_cdf'); negative or NaN weights give NaN. Returns (result, force_nan)."""
    dt = get_aval(x).dtype
    ax = get_aval(x).ndim - 1
    zero = lax.full((), 0, dt)
    bad = lax.bitwise_or(lax.lt(w, zero), lax.ne(w, w))
    clean = lax.select(lax.bitwise_or(bad, isnan), lax.full(get_aval(w).shape, 0, dt), w)
    cw = lax.cumsum(clean, ax)
    total = lax.slice_in_dim(cw, get_aval(cw).shape[ax] - 1, get_aval(cw).shape[ax], axis=ax)
    nq = get_aval(qv).shape[-1]
    n = get_aval(x).shape[-1]
    batch = get_aval(x).shape[:-1]
    total = lax.broadcast_in_dim(lax.reshape(total, batch), batch + (nq,), tuple(range(ax)))
    target = lax.mul(qv, total)  # (batch..., nq)
    below = lax.lt(lax.broadcast_in_dim(cw, batch + (nq, n), tuple(range(ax)) + (ax + 1,)),
                   lax.broadcast_in_dim(target, batch + (nq, n), tuple(range(ax + 1))))
    index_dtype = dtypes.default_int_dtype()
    idx = lax.reduce_sum(lax.convert_element_type(below, index_dtype), (ax + 1,))
    valid = lax.reduce_sum(lax.convert_element_type(lax.bitwise_not(isnan), index_dtype), (ax,))
    limit = lax.broadcast_in_dim(lax.sub(valid, lax.full((), 1, index_dtype)) if ignore_nan
                                 else lax.full(batch, n - 1, index_dtype), batch + (nq,),
                                 tuple(range(ax)))
    idx = lax.max(lax.full((), 0, index_dtype), lax.min(idx, limit))
    any_bad = lax.reduce_or(bad, (ax,))
    if ignore_nan:
        force = lax.bitwise_or(any_bad, lax.eq(valid, lax.full((), 0, index_dtype)))
    else:
        force = lax.bitwise_or(any_bad, lax.reduce_or(isnan, (ax,)))
    return _gather_last(x, idx), force


def _check_no_out(name: str, out, overwrite_input: bool) -> None:
    if overwrite_input or out is not None:
        raise ValueError(f"jax.numpy.{name} does not support overwrite_input=True or "
                         "out != None")


_Q_STATIC = ("axis", "overwrite_input", "keepdims", "method")


@jit_when_traced(name="quantile", static_argnames=_Q_STATIC)
def quantile(a, q, axis: int | tuple[int, ...] | None = None, out=None,
             overwrite_input: bool = False, method: str = "linear", keepdims: bool = False, *,
             weights=None):
    """The ``q``-th quantiles of ``a`` along ``axis``.

    Args:
      a: the data (integers are computed as floats; complex is rejected).
      q: a scalar or 1-D array of quantiles in ``[0, 1]``.
      axis: the axis or axes to reduce (all by default).
      out, overwrite_input: unsupported (plax arrays are immutable).
      method: ``'linear'`` (default), ``'lower'``, ``'higher'``, ``'midpoint'``, ``'nearest'``
        (ties to the lower value, as JAX) or ``'inverted_cdf'``.
      keepdims: keep the reduced axes with size one.
      weights: per-element weights (``a``'s shape or the reduced axes' shape); only with
        ``method='inverted_cdf'``.

    Returns:
      An array of shape ``q.shape + reduced shape``; NaN where a slice holds a NaN.

    Example:
      >>> jnp.quantile(jnp.array([1., 2., 3., 4.]), 0.5)
      Array(2.5, dtype=float32)
    """
    _check_no_out("quantile", out, overwrite_input)
    return _quantile("quantile", a, q, axis, method, keepdims, False, weights)


@jit_when_traced(name="nanquantile", static_argnames=_Q_STATIC)
def nanquantile(a, q, axis: int | tuple[int, ...] | None = None, out=None,
                overwrite_input: bool = False, method: str = "linear", keepdims: bool = False,
                *, weights=None):
    """The ``q``-th quantiles of ``a`` along ``axis``, ignoring NaNs (see :func:`quantile`).

    Returns:
      NaN only where a slice holds nothing but NaNs.

    Example:
      >>> jnp.nanquantile(jnp.array([1., jnp.nan, 3.]), 0.5)
      Array(2., dtype=float32)
    """
    _check_no_out("nanquantile", out, overwrite_input)
    return _quantile("nanquantile", a, q, axis, method, keepdims, True, weights)


def _percent(name: str, q):
    check_arraylike(name, q)
    q = _inexact(asarray_weak(q))
    return lax.div(q, lax.full((), 100, get_aval(q).dtype, weak_type=True))


def percentile(a, q, axis: int | tuple[int, ...] | None = None, out=None,
               overwrite_input: bool = False, method: str = "linear", keepdims: bool = False,
               *, weights=None, out_sharding=None):
    """The ``q``-th percentiles (``q`` in ``[0, 100]``) of ``a``: :func:`quantile` of ``q/100``
    (``out_sharding``: the result's explicit sharding).

    Example:
      >>> jnp.percentile(jnp.array([1., 2., 3., 4., 5.]), 25)
      Array(2., dtype=float32)
    """
    if out_sharding is not None:
        from plax.sharding_types import with_out_sharding
        return with_out_sharding(lambda: _percentile(a, q, axis, out, overwrite_input, method,
                                                     keepdims, weights=weights), out_sharding)
    return _percentile(a, q, axis, out, overwrite_input, method, keepdims, weights=weights)


@jit_when_traced(name="percentile", static_argnames=_Q_STATIC)
def _percentile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                keepdims=False, *, weights=None):
    _check_no_out("percentile", out, overwrite_input)
    check_arraylike("percentile", a)
    return _quantile("percentile", a, _percent("percentile", q), axis, method, keepdims, False,
                     weights)


@jit_when_traced(name="nanpercentile", static_argnames=_Q_STATIC)
def nanpercentile(a, q, axis: int | tuple[int, ...] | None = None, out=None,
                  overwrite_input: bool = False, method: str = "linear",
                  keepdims: bool = False, *, weights=None):
    """The ``q``-th percentiles of ``a`` ignoring NaNs: :func:`nanquantile` of ``q/100``.

    Example:
      >>> jnp.nanpercentile(jnp.array([1., jnp.nan, 3.]), 50)
      Array(2., dtype=float32)
    """
    _check_no_out("nanpercentile", out, overwrite_input)
    check_arraylike("nanpercentile", a)
    return _quantile("nanpercentile", a, _percent("nanpercentile", q), axis, method, keepdims,
                     True, weights)


@jit_when_traced(name="median", static_argnames=("axis", "overwrite_input", "keepdims"))
def median(a, axis: int | tuple[int, ...] | None = None, out=None,
           overwrite_input: bool = False, keepdims: bool = False):
    """The median of ``a`` along ``axis`` (NaN where a slice holds a NaN).

    Args:
      a: the data.
      axis: the axis or axes to reduce (all by default).
      out, overwrite_input: unsupported.
      keepdims: keep the reduced axes with size one.

    Returns:
      The middle value, or the mean of the two middle values for an even count.

    Example:
      >>> jnp.median(jnp.array([[1., 3.], [2., 8.]]), axis=0)
      Array([1.5, 5.5], dtype=float32)
    """
    _check_no_out("median", out, overwrite_input)
    return _quantile("median", a, 0.5, axis, "midpoint", keepdims, False)


@jit_when_traced(name="nanmedian", static_argnames=("axis", "overwrite_input", "keepdims"))
def nanmedian(a, axis: int | tuple[int, ...] | None = None, out=None,
              overwrite_input: bool = False, keepdims: bool = False):
    """The median of ``a`` along ``axis``, ignoring NaNs (NaN for an all-NaN slice).

    Example:
      >>> jnp.nanmedian(jnp.array([1., jnp.nan, 4.]))
      Array(2.5, dtype=float32)
    """
    _check_no_out("nanmedian", out, overwrite_input)
    return _quantile("nanmedian", a, 0.5, axis, "midpoint", keepdims, True)


def _nanarg(name: str, a, axis, out, keepdims: bool, fill: float):
    from plax.numpy import reductions
    from plax.numpy.ufuncs import isnan, where
    check_arraylike(name, a)
    reject_out(out, name)
    a = asarray_weak(a)
    arg = reductions.argmax if name == "nanargmax" else reductions.argmin
    if not dtypes.is_inexact(get_aval(a).dtype):
        return arg(a, axis=axis, keepdims=keepdims)
    mask = isnan(a)
    res = arg(where(mask, lax.full((), fill, get_aval(a).dtype), a), axis=axis,
              keepdims=keepdims)
    # as JAX: -1 marks a slice of NaNs only (NumPy raises there)
    all_nan = reductions.all(mask, axis=axis, keepdims=keepdims)
    return where(all_nan, lax.full((), -1, get_aval(res).dtype), res)


@jit_when_traced(name="nanargmax", static_argnames=("axis", "keepdims"))
def nanargmax(a, axis: int | None = None, out=None, keepdims: bool | None = None):
    """Index of the maximum of ``a``, ignoring NaNs (-1 for a slice of NaNs only, as JAX).

    Args:
      a: the array.
      axis: the axis to search (the flattened array when None).
      out: unsupported.
      keepdims: keep the reduced axis with size one.

    Returns:
      Integer indices of the default int dtype.

    Example:
      >>> jnp.nanargmax(jnp.array([1., jnp.nan, 3.]))
      Array(2, dtype=int32)
    """
    return _nanarg("nanargmax", a, axis, out, bool(keepdims), -np.inf)


@jit_when_traced(name="nanargmin", static_argnames=("axis", "keepdims"))
def nanargmin(a, axis: int | None = None, out=None, keepdims: bool | None = None):
    """Index of the minimum of ``a``, ignoring NaNs (-1 for a slice of NaNs only, as JAX).

    Example:
      >>> jnp.nanargmin(jnp.array([3., jnp.nan, 1.]))
      Array(2, dtype=int32)
    """
    return _nanarg("nanargmin", a, axis, out, bool(keepdims), np.inf)


def _nancum(name: str, a, axis, dtype, out, fill: int):
    from plax.numpy import reductions
    from plax.numpy.ufuncs import isnan, where
    check_arraylike(name, a)
    reject_out(out, name)
    a = asarray_weak(a)
    if dtypes.is_inexact(get_aval(a).dtype):
        a = where(isnan(a), lax.full((), fill, get_aval(a).dtype), a)
    # the scan itself, not the jit call cumsum stages (JAX's nancumsum holds a bare cumsum)
    fn = (reductions.cumsum if name == "nancumsum" else reductions.cumprod).__wrapped__
    return fn(a, axis=axis, dtype=dtype)


@jit_when_traced(name="nancumsum", static_argnames=("axis", "dtype"))
def nancumsum(a, axis: int | None = None, dtype=None, out=None):
    """Cumulative sum along ``axis`` treating NaNs as zero.

    Example:
      >>> jnp.nancumsum(jnp.array([1., jnp.nan, 2.]))
      Array([1., 1., 3.], dtype=float32)
    """
    return _nancum("nancumsum", a, axis, dtype, out, 0)


@jit_when_traced(name="nancumprod", static_argnames=("axis", "dtype"))
def nancumprod(a, axis: int | None = None, dtype=None, out=None):
    """Cumulative product along ``axis`` treating NaNs as one.

    Example:
      >>> jnp.nancumprod(jnp.array([2., jnp.nan, 3.]))
      Array([2., 2., 6.], dtype=float32)
    """
    return _nancum("nancumprod", a, axis, dtype, out, 1)


def _as_observations(name: str, m, transpose: bool):
    from plax.numpy.shape_ops import atleast_2d
    m = asarray_weak(m)
    if get_aval(m).ndim > 2:
        raise ValueError(f"{name}: m has more than 2 dimensions")
    m = atleast_2d(m)
    return lax.transpose(m, (1, 0)) if transpose else m


@jit_when_traced(name="cov", static_argnames=("rowvar", "bias", "ddof", "dtype"))
def cov(m, y=None, rowvar: bool = True, bias: bool = False, ddof: int | None = None,
        fweights=None, aweights=None, dtype=None):
    """Covariance matrix of the variables in ``m`` (and ``y``).

    Args:
      m: a 1-D or 2-D array; rows are variables (columns if ``rowvar`` is False).
      y: more variables, stacked below ``m``'s.
      rowvar: whether rows (True) or columns hold the variables.
      bias: normalise by N (True) rather than N - 1.
      ddof: overrides ``bias`` with N - ddof.
      fweights: integer frequency weights, one per observation.
      aweights: observation weights, one per observation.
      dtype: the float or complex dtype to compute in (default: the inputs' inexact dtype).

    Returns:
      The (variables, variables) covariance matrix, squeezed to a scalar for one variable.

    Example:
      >>> jnp.cov(jnp.array([[0., 1., 2.], [2., 1., 0.]]))
      Array([[ 1., -1.],
             [-1.,  1.]], dtype=float32)
    """
    from plax.numpy.reductions import average, sum as jsum
    from plax.numpy.ufuncs import multiply
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    check_arraylike("cov", m)
    args = [m] + ([y] if y is not None else [])
    check_arraylike("cov", *args)
    if dtype is not None:
        dt = dtypes.check_user_dtype(dtype, "cov")
        if not dtypes.is_inexact(dt):
            raise ValueError(f"cov: dtype must be a subclass of float or complex; got {dtype=}")
    else:
        dt = to_inexact_dtype(dtypes.result_type(*args))
    m = lax.convert_element_type(asarray_weak(m), dt)
    # as JAX: a 1-D m is one variable whatever rowvar says; y is transposed unless one row
    X = _as_observations("cov", m, not rowvar and get_aval(m).ndim != 1)
    if get_aval(X).shape[0] == 0:
        return lax.full((0, 0), 0, dt)
    if y is not None:
        y = lax.convert_element_type(asarray_weak(y), dt)
        from plax.numpy.shape_ops import atleast_2d
        Y = _as_observations("cov", y, not rowvar and get_aval(atleast_2d(y)).shape[0] != 1)
        X = lax.concatenate([X, Y], 0)
    if get_aval(X).shape[1] == 0:
        k = get_aval(X).shape[0]
        return lax.full(() if k == 1 else (k, k), np.nan, dt)
    if ddof is None:
        ddof = 0 if bias else 1
    n_obs = get_aval(X).shape[1]
    w = None
    if fweights is not None:
        check_arraylike("cov", fweights)
        fw = asarray_weak(fweights)
        if get_aval(fw).ndim > 1:
            raise RuntimeError("cannot handle multidimensional fweights")
        if get_aval(fw).shape[0] != n_obs:
            raise RuntimeError("incompatible numbers of samples and fweights")
        if not dtypes.is_integer(get_aval(fw).dtype):
            raise TypeError("fweights must be integer.")
        w = lax.convert_element_type(fw, dt)
    if aweights is not None:
        check_arraylike("cov", aweights)
        aw = asarray_weak(aweights)
        if get_aval(aw).ndim > 1:
            raise RuntimeError("cannot handle multidimensional aweights")
        if get_aval(aw).shape[0] != n_obs:
            raise RuntimeError("incompatible numbers of samples and aweights")
        aw = lax.convert_element_type(aw, dt)
        w = aw if w is None else multiply(w, aw)
    rdt = dtypes.real_dtype(dt)
    if w is None:
        avg = average(X, axis=1)
        w_sum = lax.full((), n_obs, rdt)
        fact = lax.sub(w_sum, lax.full((), ddof, rdt))
    else:
        avg, w_sum = average(X, axis=1, weights=w, returned=True)
        w_sum = lax.real(w_sum) if dtypes.is_complex(dt) else w_sum
        w_sum = lax.slice(w_sum, (0,), (1,))
        w_sum = lax.reshape(w_sum, ())
        if ddof == 0:
            fact = w_sum
        elif aweights is None:
            fact = lax.sub(w_sum, lax.full((), ddof, rdt))
        else:
            aw_r = lax.real(aw) if dtypes.is_complex(dt) else aw
            w_r = lax.real(w) if dtypes.is_complex(dt) else w
            fact = lax.sub(w_sum, lax.div(lax.mul(lax.full((), ddof, rdt),
                                                  jsum(multiply(w_r, aw_r))), w_sum))
    fact = lax.max(fact, lax.full((), 0, rdt))
    X = lax.sub(X, lax.broadcast_in_dim(avg, get_aval(X).shape, (0,)))
    Xw = X if w is None else lax.mul(X, lax.broadcast_in_dim(w, get_aval(X).shape, (1,)))
    Xc = lax.conj(X) if dtypes.is_complex(dt) else X
    c = lax.dot_general(Xw, Xc, (((1,), (1,)), ((), ())))
    c = lax.div(c, lax.convert_element_type(fact, dt))
    if get_aval(c).shape == (1, 1):
        c = lax.reshape(c, ())
    return c


@jit_when_traced(name="corrcoef", static_argnames=("rowvar", "dtype"))
def corrcoef(x, y=None, rowvar: bool = True, dtype=None):
    """Pearson correlation coefficients of the variables in ``x`` (and ``y``).

    Args:
      x: a 1-D or 2-D array of variables (rows, or columns if ``rowvar`` is False).
      y: more variables.
      rowvar: whether rows (True) or columns hold the variables.
      dtype: the float or complex dtype to compute in.

    Returns:
      The correlation matrix, clipped to ``[-1, 1]`` (real and imaginary parts).

    Example:
      >>> jnp.corrcoef(jnp.array([[0., 1., 2.], [2., 1., 0.]]))
      Array([[ 1., -1.],
             [-1.,  1.]], dtype=float32)
    """
    check_arraylike("corrcoef", x, *([y] if y is not None else []))
    c = cov(x, y, rowvar, dtype=dtype)
    shape = get_aval(c).shape
    if not shape:
        return lax.div(c, c)
    dt = get_aval(c).dtype
    from plax.numpy.shape_ops import diagonal
    d = diagonal(c)
    std = lax.sqrt(lax.real(d) if dtypes.is_complex(dt) else d)
    std = lax.convert_element_type(std, dt)
    c = lax.div(c, lax.broadcast_in_dim(std, shape, (0,)))
    c = lax.div(c, lax.broadcast_in_dim(std, shape, (1,)))
    rdt = dtypes.real_dtype(dt)
    lo, hi = lax.full((), -1, rdt), lax.full((), 1, rdt)
    if dtypes.is_complex(dt):
        return lax.complex(lax.clamp(lo, lax.real(c), hi), lax.clamp(lo, lax.imag(c), hi))
    return lax.clamp(lo, c, hi)
