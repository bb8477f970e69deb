"""Reductions of plax.numpy: sum, prod, max, min, mean, var, std, any, all, argmax, argmin,
cumulative sums and products, and their NaN-ignoring variants. All take ``axis``,
``keepdims`` and (where NumPy has it) ``where``."""
from __future__ import annotations

import builtins

import numpy as np

from plax import dtypes, lax
from plax.core.trace import get_aval
from plax.transforms.jit import jit_when_traced
from plax.numpy.util import asarray_weak, canonicalize_axis_tuple, check_arraylike, reject_out


def _keep(x, shape, axes, keepdims):
    if not keepdims:
        return x
    out_shape = tuple(1 if i in axes else d for i, d in enumerate(shape))
    return lax.reshape(x, out_shape)


def _sum_dtype(dt: np.dtype, promote_integers: bool = True) -> np.dtype:
    """The accumulation dtype of sum/prod: small integers and bool widen to the default int."""
    if dt == np.bool_:
        return dtypes.default_int_dtype()
    if promote_integers and dt.kind == "i" and dt.itemsize < dtypes.default_int_dtype().itemsize:
        return dtypes.default_int_dtype()
    if promote_integers and dt.kind == "u" and dt.itemsize < dtypes.default_uint_dtype().itemsize:
        return dtypes.default_uint_dtype()
    return dt


def _reduction(name, a, axis, dtype, keepdims, where, initial, prim_fn, identity,
               result_dtype_fn=None, upcast_low_precision=False):
    check_arraylike(name, a)
    a = asarray_weak(a)
    aval = get_aval(a)
    axes = canonicalize_axis_tuple(axis, aval.ndim)
    if dtype is not None:
        dt = dtypes.check_user_dtype(dtype, name)
    elif result_dtype_fn is not None:
        dt = result_dtype_fn(aval.dtype)
    else:
        dt = aval.dtype
    compute = dt
    if upcast_low_precision and dt in (dtypes.float16, dtypes.bfloat16):
        compute = np.dtype(np.float32)
    x = lax.convert_element_type(a, compute) if (compute != aval.dtype or aval.weak_type) else a
    if where is not None:
        if identity is None:
            raise ValueError(f"reduction operation {name!r} does not have an identity, so to use "
                             "a where mask one has to specify 'initial'")
        from plax.numpy.ufuncs import where as jwhere
        from plax.numpy.util import broadcast_to
        mask = broadcast_to(asarray_weak(where), aval.shape)
        fill = identity
        if name in ("max", "min"):  # (as JAX: the reduction's identity; initial joins below)
            from plax.lax.windows import reduction_identity
            fill = reduction_identity(compute, name)
        x = jwhere(mask, x, lax.full((), fill, compute))
    if builtins.any(aval.shape[i] == 0 for i in axes) and identity is None and initial is None:
        raise ValueError(f"zero-size array to reduction operation {name} which has no identity")
    out = prim_fn(x, axes)
    if initial is not None:
        from plax.numpy.ufuncs import maximum, minimum, add, multiply
        combine = {"sum": add, "prod": multiply, "max": maximum, "min": minimum}[name]
        # JAX's op(initial, result): complex max/min keep the first operand only when it
        # wins strictly (plax.lowering.complex_extremes), so the order matters there
        out = combine(lax.full((), initial, compute), out)
    if compute != dt:
        out = lax.convert_element_type(out, dt)
    return _keep(out, aval.shape, axes, keepdims)


def sum(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None,
        promote_integers: bool = True):
    """Sum of elements over ``axis`` (all axes by default).

    Example:
      >>> jnp.sum(jnp.array([[1, 2], [3, 4]]), axis=0)
      Array([4, 6], dtype=int32)
    """
    reject_out(out, "sum")
    return _reduction("sum", a, axis, dtype, keepdims, where, initial, lax.reduce_sum, 0,
                      lambda d: _sum_dtype(d, promote_integers), upcast_low_precision=True)


def prod(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None,
         promote_integers: bool = True):
    """Product of elements over ``axis``."""
    reject_out(out, "prod")
    return _reduction("prod", a, axis, dtype, keepdims, where, initial, lax.reduce_prod, 1,
                      lambda d: _sum_dtype(d, promote_integers), upcast_low_precision=True)


def max(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None):
    """Maximum over ``axis`` (NaN propagates). ``where`` requires ``initial``."""
    reject_out(out, "max")
    return _reduction("max", a, axis, None, keepdims, where, initial, lax.reduce_max,
                      initial)


def min(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None):
    """Minimum over ``axis`` (NaN propagates). ``where`` requires ``initial``."""
    reject_out(out, "min")
    return _reduction("min", a, axis, None, keepdims, where, initial, lax.reduce_min,
                      initial)


amax, amin = max, min


def _bool_reduce(name, a, axis, keepdims, where, fn, identity):
    check_arraylike(name, a)
    a = asarray_weak(a)
    from plax.numpy.ufuncs import _as_bool
    return _reduction(name, _as_bool(a), axis, None, keepdims, where, None, fn, identity)


def all(a, axis=None, out=None, keepdims: bool = False, *, where=None):
    """Whether all elements (over ``axis``) are true."""
    reject_out(out, "all")
    return _bool_reduce("all", a, axis, keepdims, where, lax.reduce_and, True)


def any(a, axis=None, out=None, keepdims: bool = False, *, where=None):
    """Whether any element (over ``axis``) is true."""
    reject_out(out, "any")
    return _bool_reduce("any", a, axis, keepdims, where, lax.reduce_or, False)


def _count(aval, axes, where):
    if where is None:
        n = 1
        for i in axes:
            n *= aval.shape[i]
        return n
    return sum(where, axis=axes, dtype=np.int32)


def _mean_dtype(dt):
    from plax.numpy.util import to_inexact_dtype
    return to_inexact_dtype(dt)


def mean(a, axis=None, dtype=None, out=None, keepdims: bool = False, *, where=None):
    """Arithmetic mean over ``axis`` (integers average as floats).

    Example:
      >>> jnp.mean(jnp.array([1, 2]))
      Array(1.5, dtype=float32)
    """
    reject_out(out, "mean")
    check_arraylike("mean", a)
    a = asarray_weak(a)
    aval = get_aval(a)
    axes = canonicalize_axis_tuple(axis, aval.ndim)
    dt = dtypes.check_user_dtype(dtype, "mean") if dtype is not None else _mean_dtype(aval.dtype)
    compute = np.dtype(np.float32) if dt in (dtypes.float16, dtypes.bfloat16) else dt
    total = sum(a, axis=axes, dtype=compute, keepdims=keepdims, where=where)
    if where is None:
        n = _count(aval, axes, None)
        out = lax.div(total, lax.full((), n, compute))
    else:
        from plax.numpy.util import broadcast_to
        counts = sum(broadcast_to(asarray_weak(where), aval.shape), axis=axes, dtype=compute,
                     keepdims=keepdims)
        out = lax.div(total, counts)
    return lax.convert_element_type(out, dt) if compute != dt else out


_mean = mean  # for var and std, whose ``mean`` parameter (JAX's name) hides the function


@jit_when_traced(name="_var", static_argnames=("axis", "dtype", "ddof", "keepdims", "correction"))
def var(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False, *,
        where=None, mean=None, correction=None):
    """Variance over ``axis``, with ``ddof`` (or ``correction``) degrees of freedom removed.

    Args:
      a: the array.
      axis, dtype, out, ddof, keepdims, where, correction: as in NumPy (``out`` only None).
      mean: a precomputed mean to centre on, shaped as ``jnp.mean(..., keepdims=True)`` (or a
        scalar); by default the mean over ``axis``.

    Returns:
      The variance, of the real floating dtype of ``dtype`` or of ``a``.

    Example:
      >>> jnp.var(jnp.array([0., 1., 2., 3.]), mean=jnp.array(0.))
      Array(3.5, dtype=float32)
    """
    reject_out(out, "var")
    if correction is not None:
        ddof = correction
    check_arraylike("var", a)
    a = asarray_weak(a)
    aval = get_aval(a)
    axes = canonicalize_axis_tuple(axis, aval.ndim)
    dt = dtypes.check_user_dtype(dtype, "var") if dtype is not None else _mean_dtype(aval.dtype)
    compute = np.dtype(np.float32) if dt in (dtypes.float16, dtypes.bfloat16) else dt
    from plax.numpy.ufuncs import subtract
    x = lax.convert_element_type(a, compute)
    centered = subtract(x, _mean(x, axis=axes, keepdims=True, where=where) if mean is None
                        else _given_mean("var", mean, aval.ndim, compute))
    if dtypes.is_complex(compute):
        sq = lax.real(lax.mul(centered, lax.conj(centered)))
    else:
        sq = lax.mul(centered, centered)
    rdt = get_aval(sq).dtype
    if where is None:
        n = _count(aval, axes, None)
        denom = lax.full((), builtins.max(n - ddof, 0), rdt)
    else:
        from plax.numpy.util import broadcast_to
        denom = lax.sub(sum(broadcast_to(asarray_weak(where), aval.shape), axis=axes, dtype=rdt,
                            keepdims=keepdims), lax.full((), ddof, rdt))
    out = lax.div(sum(sq, axis=axes, keepdims=keepdims, where=where), denom)
    return lax.convert_element_type(out, dtypes.real_dtype(dt)) if rdt != dtypes.real_dtype(dt) else out


def _given_mean(name, m, ndim, compute):
    """A user's ``mean=`` as the centre of a variance: a scalar, or an array of ``a``'s rank
    (the keepdims shape), as JAX's lax.sub takes it."""
    check_arraylike(name, m)
    m = asarray_weak(m)
    m_ndim = get_aval(m).ndim
    if m_ndim not in (0, ndim):
        raise TypeError(f"{name}: mean must have the rank of the input ({ndim}; the shape of "
                        f"jnp.mean(..., keepdims=True)) or be a scalar, got rank {m_ndim}")
    return lax.convert_element_type(m, compute)


@jit_when_traced(name="_std", static_argnames=("axis", "dtype", "ddof", "keepdims", "correction"))
def std(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False, *,
        where=None, mean=None, correction=None):
    """Standard deviation over ``axis`` (the square root of :func:`var`; ``mean`` as there)."""
    reject_out(out, "std")
    return lax.sqrt(var(a, axis, dtype, None, ddof, keepdims, where=where, mean=mean,
                        correction=correction))


def _arg(name, fn, a, axis, out, keepdims):
    reject_out(out, name)
    check_arraylike(name, a)
    a = asarray_weak(a)
    aval = get_aval(a)
    # (complex operands reach lax's argmax/argmin, which refuses them with a TypeError, as
    # JAX 0.10's comparison in them does)
    if axis is None:
        a = lax.reshape(a, (aval.size,))
        if aval.size == 0:
            raise ValueError(f"attempt to get {name} of an empty sequence")
        res = fn(a, 0, dtypes.default_int_dtype())
        return lax.reshape(res, (1,) * aval.ndim) if keepdims else res
    from plax.numpy.util import canonicalize_axis
    ax = canonicalize_axis(axis, aval.ndim)
    if aval.shape[ax] == 0:
        raise ValueError(f"attempt to get {name} of an empty sequence along axis {ax} (shape "
                         f"{aval.shape})")
    res = fn(a, ax, dtypes.default_int_dtype())
    return lax.expand_dims(res, (ax,)) if keepdims else res


def argmax(a, axis=None, out=None, keepdims: bool = False):
    """Index of the maximum (over the flattened array when ``axis`` is None)."""
    return _arg("argmax", lax.argmax, a, axis, out, keepdims)


def argmin(a, axis=None, out=None, keepdims: bool = False):
    """Index of the minimum (over the flattened array when ``axis`` is None)."""
    return _arg("argmin", lax.argmin, a, axis, out, keepdims)


def _cumulative(name, fn, a, axis, dtype, promote):
    check_arraylike(name, a)
    a = asarray_weak(a)
    aval = get_aval(a)
    if axis is None:
        if aval.sharding is not None:  # explicit sharding: JAX's error for a split input
            from plax.sharding_types import check_replicated
            check_replicated(aval, name)
        a = lax.reshape(a, (aval.size,))
        axis = 0
    from plax.numpy.util import canonicalize_axis
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    # unlike sum, JAX's cumulative reductions keep small integer types (bool becomes int)
    dt = dtypes.check_user_dtype(dtype, name) if dtype is not None else (
        dtypes.default_int_dtype() if promote and aval.dtype == np.bool_ else aval.dtype)
    a = lax.convert_element_type(a, dt)
    return fn(a, axis)


@jit_when_traced(static_argnames=("axis", "dtype"))
def cumsum(a, axis=None, dtype=None, out=None):
    """Cumulative sum along ``axis`` (of the flattened array when ``axis`` is None).

    Staged as one ``jit`` call named ``cumsum``, as JAX stages it (lowering splices the call
    into its caller, so a producer still fuses with the scan).

    Example:
      >>> jnp.cumsum(jnp.array([1, 2, 3]))
      Array([1, 3, 6], dtype=int32)
    """
    reject_out(out, "cumsum")
    return _cumulative("cumsum", lax.cumsum, a, axis, dtype, True)


@jit_when_traced(static_argnames=("axis", "dtype"))
def cumprod(a, axis=None, dtype=None, out=None):
    """Cumulative product along ``axis``, staged as one ``jit`` call as :func:`cumsum` is.

    Example:
      >>> jnp.cumprod(jnp.array([1, 2, 3]))
      Array([1, 2, 6], dtype=int32)
    """
    reject_out(out, "cumprod")
    return _cumulative("cumprod", lax.cumprod, a, axis, dtype, True)


def _cumulative_array_api(name, fn, x, axis, dtype, include_initial, identity):
    check_arraylike(name, x)
    x = asarray_weak(x)
    aval = get_aval(x)
    if aval.ndim == 0:
        raise ValueError(f"{name}: the input must be non-scalar, got a rank-0 array; use "
                         "jnp.atleast_1d(x) first.")
    if axis is None:
        if aval.ndim > 1:
            raise ValueError(f"{name}: the input array has rank {aval.ndim}, however axis was "
                             "not set to an explicit value. The axis argument is only optional "
                             "for one-dimensional arrays.")
        axis = 0
    from plax.numpy.util import canonicalize_axis
    axis = canonicalize_axis(axis, aval.ndim)
    # as in JAX, cumulative_sum promotes small integers like sum; cumulative_prod does not
    if dtype is not None:
        dt = dtypes.check_user_dtype(dtype, name)
    elif name == "cumulative_sum" or aval.dtype == np.bool_:
        dt = _sum_dtype(aval.dtype)
    else:
        dt = aval.dtype
    out = fn(lax.convert_element_type(x, dt), axis)
    if include_initial:
        shape = list(get_aval(out).shape)
        shape[axis] = 1
        out = lax.concatenate([lax.full(tuple(shape), identity, dt), out], axis)
    return out


def cumulative_sum(x, /, *, axis: int | None = None, dtype=None, include_initial: bool = False):
    """Cumulative sum along ``axis`` (the array API's cumsum: ``axis`` is required for arrays
    of rank > 1, small integers are promoted, ``include_initial`` prepends a zero).

    Example:
      >>> jnp.cumulative_sum(jnp.array([1, 2, 3]), include_initial=True)
      Array([0, 1, 3, 6], dtype=int32)
    """
    return _cumulative_array_api("cumulative_sum", lax.cumsum, x, axis, dtype, include_initial, 0)


def cumulative_prod(x, /, *, axis: int | None = None, dtype=None, include_initial: bool = False):
    """Cumulative product along ``axis`` (the array API's cumprod; see cumulative_sum)."""
    return _cumulative_array_api("cumulative_prod", lax.cumprod, x, axis, dtype, include_initial,
                                 1)


@jit_when_traced(name="_ptp", static_argnames=("axis", "keepdims"))
def ptp(a, axis=None, out=None, keepdims: bool = False):
    """Peak to peak: ``max - min`` over ``axis``."""
    reject_out(out, "ptp")
    return lax.sub(max(a, axis, None, keepdims), min(a, axis, None, keepdims))


@jit_when_traced(static_argnames=("axis", "keepdims"))
def count_nonzero(a, axis=None, keepdims: bool = False):
    """Number of non-zero elements over ``axis``."""
    from plax.numpy.ufuncs import _as_bool
    return sum(_as_bool(a), axis=axis, keepdims=keepdims, dtype=dtypes.default_int_dtype())


def average(a, axis=None, weights=None, returned: bool = False, keepdims: bool = False):
    """Weighted average over ``axis``.

    Args:
      a: the array.
      axis: the axis or axes to average over (all by default).
      weights: None (a plain mean), an array of ``a``'s shape, or a 1-D array with one weight
        per element along a single ``axis``.
      returned: also return the sum of the weights.
      keepdims: keep the reduced axes with size one.

    Returns:
      The average (and the sum of weights if ``returned``).

    Example:
      >>> jnp.average(jnp.array([1., 2., 4.]), weights=jnp.array([1., 1., 2.]))
      Array(2.75, dtype=float32)
    """
    check_arraylike("average", a)
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        a_aval = get_aval(asarray_weak(a))
        n = _count(a_aval, canonicalize_axis_tuple(axis, a_aval.ndim), None)
        return (avg, lax.full(get_aval(avg).shape, n, get_aval(avg).dtype)) if returned else avg
    from plax.numpy.ufuncs import multiply
    from plax.numpy.util import check_arraylike as _check, to_dtype
    _check("average", weights)
    dt, weak = dtypes.result_type(a, weights, return_weak_type_flag=True)
    from plax.numpy.util import to_inexact_dtype
    dt = to_inexact_dtype(dt)
    a, w = to_dtype(asarray_weak(a), dt, weak), to_dtype(asarray_weak(weights), dt, weak)
    a_shape, w_shape = get_aval(a).shape, get_aval(w).shape
    if w_shape != a_shape:
        if axis is None:
            raise ValueError(f"average: axis must be specified when shapes of a {a_shape} and "
                             f"weights {w_shape} differ.")
        axes = canonicalize_axis_tuple(axis, len(a_shape))
        if len(w_shape) != 1 or len(axes) != 1:
            raise ValueError(f"average: 1D weights expected when shapes of a {a_shape} and "
                             f"weights {w_shape} differ.")
        if w_shape[0] != a_shape[axes[0]]:
            raise ValueError(f"average: length of weights ({w_shape[0]}) not compatible with "
                             f"specified axis {axis} of a, which has length "
                             f"{a_shape[axes[0]]}.")
        w = lax.broadcast_in_dim(w, a_shape, axes)
    wsum = sum(w, axis, keepdims=keepdims)
    avg = lax.div(sum(multiply(a, w), axis, keepdims=keepdims), wsum)
    return (avg, wsum) if returned else avg


def _nan_to(a, value):
    from plax.numpy.ufuncs import isnan, where
    a = asarray_weak(a)
    if not dtypes.is_inexact(get_aval(a).dtype):
        return a
    return where(isnan(a), lax.full((), value, get_aval(a).dtype), a)


@jit_when_traced(static_argnames=("axis", "dtype", "keepdims"))
def nansum(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None):
    """Sum treating NaN as zero."""
    return sum(_nan_to(a, 0), axis, dtype, out, keepdims, initial, where)


def nanprod(a, axis=None, dtype=None, out=None, keepdims: bool = False, initial=None, where=None):
    """Product treating NaN as one."""
    return prod(_nan_to(a, 1), axis, dtype, out, keepdims, initial, where)


def _nan_extremum(fn, a, fill, axis, out, keepdims, initial, where):
    check_arraylike("nanmax", a)
    a = asarray_weak(a)
    res = fn(_nan_to(a, fill), axis, out, keepdims, initial, where)
    if not dtypes.is_inexact(get_aval(a).dtype) or initial is not None:
        return res
    from plax.numpy.ufuncs import isnan, where as jwhere
    all_nan = all(isnan(a), axis=axis, keepdims=keepdims, where=where)  # NumPy: NaN stays
    return jwhere(all_nan, lax.full((), np.nan, get_aval(res).dtype), res)


def nanmax(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None):
    """Maximum ignoring NaNs (NaN where a slice holds only NaNs)."""
    return _nan_extremum(max, a, -np.inf, axis, out, keepdims, initial, where)


def nanmin(a, axis=None, out=None, keepdims: bool = False, initial=None, where=None):
    """Minimum ignoring NaNs (NaN where a slice holds only NaNs)."""
    return _nan_extremum(min, a, np.inf, axis, out, keepdims, initial, where)


@jit_when_traced(static_argnames=("axis", "dtype", "keepdims"))
def nanmean(a, axis=None, dtype=None, out=None, keepdims: bool = False, where=None):
    """Mean ignoring NaNs."""
    from plax.numpy.ufuncs import isnan, logical_not
    reject_out(out, "nanmean")
    a = asarray_weak(a)
    mask = logical_not(isnan(a))
    if where is not None:
        from plax.numpy.ufuncs import logical_and
        mask = logical_and(mask, where)
    return mean(_nan_to(a, 0), axis, dtype, None, keepdims, where=mask)


def nanvar(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False,
           where=None, mean=None):
    """Variance ignoring NaNs (``mean``: a precomputed centre, as in :func:`var`)."""
    from plax.numpy.ufuncs import isnan, logical_and, logical_not
    reject_out(out, "nanvar")
    a = asarray_weak(a)
    mask = logical_not(isnan(a))
    if where is not None:
        mask = logical_and(mask, where)
    return var(_nan_to(a, 0), axis, dtype, None, ddof, keepdims, where=mask, mean=mean)


def nanstd(a, axis=None, dtype=None, out=None, ddof: int = 0, keepdims: bool = False,
           where=None, mean=None):
    """Standard deviation ignoring NaNs (``mean`` as in :func:`var`)."""
    reject_out(out, "nanstd")
    return lax.sqrt(nanvar(a, axis, dtype, None, ddof, keepdims, where, mean))

