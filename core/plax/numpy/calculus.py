"""Discrete calculus of plax.numpy: diff, ediff1d, gradient, trapezoid, unwrap and interp.

All are slices and elementwise arithmetic (interp adds a searchsorted), so they are
jittable, batchable and differentiable as in JAX.
"""
from __future__ import annotations

import operator
from typing import Sequence

import numpy as np

from plax import dtypes, lax
from plax.core.trace import get_aval
from plax.transforms.jit import jit_when_traced
from plax.numpy.util import (asarray_weak, broadcast_to, canonicalize_axis, check_arraylike,
                             promote_args_inexact, promote_dtypes, to_dtype, to_inexact_dtype)

__all__ = ["diff", "ediff1d", "gradient", "trapezoid", "unwrap", "interp"]


def _slice(x, start, stop, axis: int):
    """``x`` sliced along ``axis`` with Python's start/stop conventions (negatives allowed)."""
    n = get_aval(x).shape[axis]
    start, stop, _ = slice(start, stop).indices(n)
    return lax.slice_in_dim(x, start, max(start, stop), axis=axis)


def _concat(parts, axis: int):
    parts = [p for p in parts if p is not None]
    return parts[0] if len(parts) == 1 else lax.concatenate(parts, axis)


def _edge(name: str, value, like, axis: int):
    """``prepend``/``append`` of diff: a scalar becomes one slice along ``axis``."""
    check_arraylike(name, value)
    value = asarray_weak(value)
    shape = get_aval(like).shape
    if get_aval(value).ndim == 0:
        edge_shape = shape[:axis] + (1,) + shape[axis + 1:]
        value = broadcast_to(value, edge_shape)
    return value


@jit_when_traced(name="diff", static_argnames=("n", "axis"))
def diff(a, n: int = 1, axis: int = -1, prepend=None, append=None):
    """The ``n``-th discrete difference ``a[1:] - a[:-1]`` along ``axis``.

    Args:
      a: the array (at least 1-D).
      n: how many times to difference (static, non-negative).
      axis: the axis.
      prepend, append: values (scalars or arrays) joined to ``a`` along ``axis`` first.

    Returns:
      An array whose ``axis`` is ``n`` shorter; booleans difference as ``!=``.

    Example:
      >>> jnp.diff(jnp.array([1, 4, 9, 16]), n=2)
      Array([2, 2], dtype=int32)
    """
    check_arraylike("diff", a)
    a = asarray_weak(a)
    n = operator.index(n)
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n}")
    if n == 0:
        return a
    if get_aval(a).ndim == 0:
        raise ValueError(f"diff requires input that is at least one dimensional; got {a}")
    axis = canonicalize_axis(axis, get_aval(a).ndim)
    if prepend is not None or append is not None:
        pre = _edge("diff", prepend, a, axis) if prepend is not None else None
        post = _edge("diff", append, a, axis) if append is not None else None
        parts = promote_dtypes(*[p for p in (pre, a, post) if p is not None])
        a = _concat(parts, axis)
    is_bool = get_aval(a).dtype == np.bool_
    for _ in range(n):
        if get_aval(a).shape[axis] == 0:
            break
        hi, lo = _slice(a, 1, None, axis), _slice(a, None, -1, axis)
        a = lax.ne(hi, lo) if is_bool else lax.sub(hi, lo)
    return a


@jit_when_traced(name="ediff1d")
def ediff1d(ary, to_end=None, to_begin=None):
    """Differences between consecutive elements of the flattened ``ary``.

    Args:
      ary: the array (flattened).
      to_end: values appended to the differences.
      to_begin: values prepended to the differences.

    Returns:
      A 1-D array of ``ary``'s dtype.

    Example:
      >>> jnp.ediff1d(jnp.array([1, 2, 4, 7]), to_begin=-99)
      Array([-99,   1,   2,   3], dtype=int32)
    """
    check_arraylike("ediff1d", ary)
    a = asarray_weak(ary)
    a = lax.reshape(a, (get_aval(a).size,))
    out = lax.sub(_slice(a, 1, None, 0), _slice(a, None, -1, 0))
    dt, weak = get_aval(out).dtype, get_aval(out).weak_type
    parts = [out]
    if to_begin is not None:
        check_arraylike("ediff1d", to_begin)
        b = to_dtype(asarray_weak(to_begin), dt, weak)
        parts.insert(0, lax.reshape(b, (get_aval(b).size,)))
    if to_end is not None:
        check_arraylike("ediff1d", to_end)
        e = to_dtype(asarray_weak(to_end), dt, weak)
        parts.append(lax.reshape(e, (get_aval(e).size,)))
    return _concat(parts, 0)


def _gradient_along(f, h, axis: int):
    """Second-order central differences inside, first-order ones at the two ends."""
    def sl(lo, hi):
        return _slice(f, lo, hi, axis)

    first = lax.sub(sl(1, 2), sl(0, 1))
    last = lax.sub(sl(-1, None), sl(-2, -1))
    dt = get_aval(f).dtype
    h_aval = get_aval(h)
    if h_aval.ndim == 0:
        h = lax.convert_element_type(h, dt)
        half = lax.full((), 0.5, dt)
        inner = lax.div(lax.mul(lax.sub(sl(2, None), sl(None, -2)), half), h)
        return lax.concatenate([lax.div(first, h), inner, lax.div(last, h)], axis)
    if h_aval.ndim != 1:
        raise ValueError("Spacing arrays must be 1D arrays or scalars.")
    shape = get_aval(f).shape
    if h_aval.shape[0] != shape[axis]:
        raise ValueError("Spacing arrays must have the same length as the dimension along "
                         "which the gradient is calculated.")
    h = lax.convert_element_type(h, dt)

    def hs(lo, hi):
        part = _slice(h, lo, hi, 0)
        target = shape[:axis] + (get_aval(part).shape[0],) + shape[axis + 1:]
        return lax.broadcast_in_dim(part, target, (axis,))

    d1 = lax.sub(hs(1, -1), hs(0, -2))  # left step of each interior point
    d2 = lax.sub(hs(2, None), hs(1, -1))  # right step
    # the unequal-step central difference: weights of f[i-1], f[i], f[i+1]
    w_lo = lax.neg(lax.div(d2, lax.mul(d1, lax.add(d1, d2))))
    w_mid = lax.div(lax.sub(d2, d1), lax.mul(d1, d2))
    w_hi = lax.div(d1, lax.mul(d2, lax.add(d1, d2)))
    inner = lax.add(lax.add(lax.mul(w_lo, sl(0, -2)), lax.mul(w_mid, sl(1, -1))),
                    lax.mul(w_hi, sl(2, None)))
    first = lax.div(first, lax.sub(hs(1, 2), hs(0, 1)))
    last = lax.div(last, lax.sub(hs(-1, None), hs(-2, -1)))
    return lax.concatenate([first, inner, last], axis)


def gradient(f, *varargs, axis: int | Sequence[int] | None = None, edge_order: int | None = None):
    """The gradient of sampled values ``f``: central differences inside, one-sided ones at
    the boundaries.

    Args:
      f: the samples (at least 2 along each differentiated axis).
      *varargs: the spacing: none (1), one scalar or coordinate array for all axes, or one
        per axis (scalars or 1-D coordinate arrays).
      axis: the axis or axes (all by default).
      edge_order: unsupported (JAX raises NotImplementedError), as only first-order edges
        are computed.

    Returns:
      One array per axis (a list), or a single array for one axis.

    Example:
      >>> jnp.gradient(jnp.array([1., 2., 4., 7.]))
      Array([1. , 1.5, 2.5, 3. ], dtype=float32)
    """
    if edge_order is not None:
        raise NotImplementedError("The 'edge_order' argument to jnp.gradient is not supported.")
    check_arraylike("gradient", f, *varargs)
    f, *spacing = promote_args_inexact("gradient", f, *varargs) if not varargs else \
        _promote_each(f, *varargs)
    ndim = get_aval(f).ndim
    if axis is None:
        axes = tuple(range(ndim))
    else:
        axes = tuple(canonicalize_axis(i, ndim) for i in
                     (axis if isinstance(axis, (tuple, list)) else (axis,)))
    if not axes:
        return []
    if min(get_aval(f).shape[i] for i in axes) < 2:
        raise ValueError("Shape of array too small to calculate a numerical gradient, at least "
                         "2 elements are required.")
    if not spacing:
        spacing = [lax.full((), 1.0, get_aval(f).dtype)] * len(axes)
    elif len(spacing) == 1:
        spacing = spacing * len(axes)
    elif len(spacing) != len(axes):
        raise TypeError(f"Invalid number of spacing arguments {len(spacing)} for axis={axis}")
    out = [_gradient_along(f, h, ax) for ax, h in zip(axes, spacing)]
    return out[0] if len(axes) == 1 else out


def _promote_each(f, *varargs):
    """f and the spacings to one inexact dtype, shapes untouched (spacings may be 1-D)."""
    dt, weak = dtypes.result_type(f, *varargs, return_weak_type_flag=True)
    dt = to_inexact_dtype(dt)
    return [to_dtype(asarray_weak(v), dt, weak) for v in (f,) + varargs]


@jit_when_traced(name="trapezoid", static_argnames=("axis",))
def trapezoid(y, x=None, dx=1.0, axis: int = -1):
    """Integral of ``y`` along ``axis`` by the trapezoidal rule.

    Args:
      y: the samples.
      x: sample points (1-D of ``y``'s length along ``axis``, or ``y``'s shape); spacing
        ``dx`` when None.
      dx: the uniform spacing when ``x`` is None.
      axis: the axis to integrate along.

    Returns:
      ``y`` integrated over ``axis`` (a float array of rank one less).

    Example:
      >>> jnp.trapezoid(jnp.array([1., 2., 3.]), dx=0.5)
      Array(2., dtype=float32)
    """
    from plax.numpy.reductions import sum as jsum
    if x is None:
        check_arraylike("trapezoid", y, dx)
        y, dx_arr = _promote_each(y, dx)
        axis = canonicalize_axis(axis, get_aval(y).ndim)
    else:
        check_arraylike("trapezoid", y, x)
        y, x = _promote_each(y, x)
        axis = canonicalize_axis(axis, get_aval(y).ndim)
        if get_aval(x).ndim == 1:
            n = get_aval(x).shape[0]
            x = lax.broadcast_in_dim(x, get_aval(y).shape[:axis] + (n,) + get_aval(y).shape[axis + 1:],
                                     (axis,))
        else:
            x = broadcast_to(x, get_aval(y).shape)
        dx_arr = diff(x, axis=axis)
    from plax.numpy.ufuncs import multiply
    mids = lax.add(_slice(y, 1, None, axis), _slice(y, None, -1, axis))
    total = jsum(multiply(dx_arr, mids), axis=axis)
    return lax.mul(total, lax.full((), 0.5, get_aval(total).dtype))


@jit_when_traced(name="unwrap", static_argnames=("axis",))
def unwrap(p, discont=None, axis: int = -1, period=2 * np.pi):
    """Unwraps the phase ``p`` along ``axis``: jumps larger than ``discont`` are replaced by
    their complement modulo ``period``.

    Args:
      p: the phases (real).
      discont: the largest jump kept as is (default ``period / 2``).
      axis: the axis along which to unwrap.
      period: the period of the phase (``2 pi`` by default).

    Returns:
      The unwrapped phases, of ``p`` and ``period``'s promoted dtype.

    Example:
      >>> jnp.unwrap(jnp.array([0., 3., 6.5]), period=4.)
      Array([ 0. , -1. , -1.5], dtype=float32)
    """
    check_arraylike("unwrap", p)
    p, period = promote_dtypes(asarray_weak(p), period)
    dt = get_aval(p).dtype
    if dtypes.is_complex(dt):
        raise ValueError("jnp.unwrap does not support complex inputs.")
    axis = canonicalize_axis(axis, get_aval(p).ndim)
    if get_aval(p).shape[axis] == 0:
        return p
    from plax.numpy.reductions import cumsum
    from plax.numpy.ufuncs import (abs as jabs, add, divide, equal, floor_divide, greater, less,
                                   logical_and, negative, remainder, subtract, where)
    half = floor_divide(period, 2) if dtypes.is_integer(dt) else divide(period, 2)
    if discont is None:
        discont = divide(period, 2)
    dd = diff(p, axis=axis)
    wrapped = subtract(remainder(add(dd, half), period), half)
    # a jump of exactly +period/2 stays positive (NumPy's rule)
    wrapped = where(logical_and(equal(wrapped, negative(half)), greater(dd, 0)), half, wrapped)
    correction = where(less(jabs(dd), discont), 0, subtract(wrapped, dd))
    return lax.concatenate([_slice(p, 0, 1, axis),
                            add(_slice(p, 1, None, axis), cumsum(correction, axis=axis))], axis)


def interp(x, xp, fp, left=None, right=None, period=None):
    """Piecewise-linear interpolation of the points ``(xp, fp)`` at ``x``.

    Args:
      x: where to evaluate.
      xp: increasing 1-D sample points (any order when ``period`` is given).
      fp: 1-D sample values, like ``xp``.
      left: the value for ``x < xp[0]`` (default ``fp[0]``), or ``'extrapolate'``.
      right: the value for ``x > xp[-1]`` (default ``fp[-1]``), or ``'extrapolate'``.
      period: the period of the x-coordinates, for angular data (``left``/``right`` unused).

    Returns:
      The interpolated values, of ``x``'s shape and ``fp``'s inexact dtype.

    Example:
      >>> jnp.interp(jnp.array([0.5, 3.]), jnp.array([0., 1., 2.]), jnp.array([0., 10., 5.]))
      Array([5., 5.], dtype=float32)
    """
    check_arraylike("interp", x, xp, fp)
    for side, v in (("left", left), ("right", right)):
        if isinstance(v, str) and v != "extrapolate":
            raise ValueError(f"the only valid string value of `{side}` is 'extrapolate', but "
                             f"got: {v!r}")
    return _interp(x, xp, fp, left, right, period)


@jit_when_traced(name="interp")
def _interp(x, xp, fp, left, right, period):
    from plax.numpy.searching import searchsorted
    from plax.numpy.ufuncs import abs as jabs, remainder, where, less, greater
    from plax.numpy.shape_ops import take
    xp_a, fp_a = asarray_weak(xp), asarray_weak(fp)
    if get_aval(xp_a).shape != get_aval(fp_a).shape or get_aval(xp_a).ndim != 1:
        raise ValueError("xp and fp must be one-dimensional arrays of equal size")
    x, xp = _promote_each(x, xp)
    (fp,) = promote_args_inexact("interp", fp)
    if dtypes.is_complex(get_aval(x).dtype):
        raise ValueError("jnp.interp: complex x values not supported.")
    if period is not None:
        check_arraylike("interp", period)
        if get_aval(asarray_weak(period)).ndim != 0:
            raise ValueError(f"period must be a scalar; got {period}")
        period = jabs(period)
        x, xp = remainder(x, period), remainder(xp, period)
        xp, fp = lax.sort([xp, fp], 0, num_keys=1)
        from plax.numpy.ufuncs import add, subtract
        xp = lax.concatenate([subtract(_slice(xp, -1, None, 0), period), xp,
                              add(_slice(xp, 0, 1, 0), period)], 0)
        fp = lax.concatenate([_slice(fp, -1, None, 0), fp, _slice(fp, 0, 1, 0)], 0)
    n = get_aval(xp).shape[0]
    if n == 1:  # a single sample: a constant function (NumPy's answer)
        xp = lax.concatenate([xp, xp], 0)
        fp = lax.concatenate([fp, fp], 0)
        n = 2
    idx_dt = dtypes.default_int_dtype()
    i = lax.clamp(lax.full((), 1, idx_dt),
                  lax.convert_element_type(searchsorted(xp, x, side="right"), idx_dt),
                  lax.full((), n - 1, idx_dt))
    im1 = lax.sub(i, lax.full((), 1, idx_dt))
    fp_i, fp_im1 = take(fp, i), take(fp, im1)
    xp_i, xp_im1 = take(xp, i), take(xp, im1)
    df = lax.sub(fp_i, fp_im1)
    dx = lax.sub(xp_i, xp_im1)
    delta = lax.sub(x, xp_im1)
    # a zero-width step would give 0/0 and poison gradients: use the left value there
    xdt = get_aval(dx).dtype
    eps = np.spacing(np.finfo(xdt).eps).astype(xdt)  # static: from the dtype only
    flat = lax.le(lax.abs(dx), lax.full((), eps, xdt))
    from plax.numpy.ufuncs import add, multiply, divide
    slope_pos = divide(delta, where(flat, lax.full((), 1, xdt), dx))
    f = where(flat, fp_im1, add(fp_im1, multiply(slope_pos, df)))
    if period is None:
        if not isinstance(left, str):
            lv = _slice(fp, 0, 1, 0)[0] if left is None else left
            f = where(less(x, _slice(xp, 0, 1, 0)[0]), lv, f)
        if not isinstance(right, str):
            rv = _slice(fp, -1, None, 0)[0] if right is None else right
            f = where(greater(x, _slice(xp, -1, None, 0)[0]), rv, f)
    return f
