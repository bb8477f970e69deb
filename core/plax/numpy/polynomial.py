"""Polynomials as coefficient arrays (highest degree first) in plax.numpy: poly, polyadd,
polysub, polymul, polydiv, polyder, polyint, polyval, polyfit and roots.

Shapes depend only on the input shapes (leading zeros are kept unless asked otherwise, as in
JAX), so everything is jittable; trimming zeros needs concrete values.
"""
from __future__ import annotations

import operator

import numpy as np

from plax import dtypes, errors, lax
from plax.core.trace import Tracer, get_aval
from plax.lax.slicing import dynamic_update_slice_unchecked
from plax.transforms.jit import jit_when_traced
from plax.numpy.util import (asarray_weak, check_arraylike, promote_args_inexact,
                             promote_dtypes, to_dtype, to_inexact_dtype)

__all__ = ["poly", "polyadd", "polysub", "polymul", "polydiv", "polyder", "polyint", "polyval",
           "polyfit", "roots"]


def _promote_inexact(*args) -> list:
    """``args`` converted to their common inexact dtype, strongly typed, shapes untouched."""
    dt = to_inexact_dtype(dtypes.result_type(*args))
    return [to_dtype(asarray_weak(a), dt, False) for a in args]


def _check_1d(name: str, *ps):
    for p in ps:
        if get_aval(p).ndim != 1:
            raise ValueError(f"jnp.{name} requires 1-D coefficient arrays, got shape "
                             f"{get_aval(p).shape}")


def _concrete(x, name: str) -> np.ndarray:
    """The host value of ``x``; a traced ``x`` raises the concretization error naming the
    option that avoids it."""
    if isinstance(x, Tracer):
        v = x.to_concrete_value()
        if v is None:
            raise errors.ConcretizationTypeError(
                x, f"jnp.{name} trims leading zeros, which makes the output shape depend on "
                   f"values; pass {'strip_zeros' if name == 'roots' else 'trim_leading_zeros'}"
                   f"={'False' if name == 'roots' else 'False (the default)'} to use it under "
                   "jit or vmap.")
        return np.asarray(v)
    return np.asarray(x)


def _trim_leading(p, name: str):
    host = _concrete(p, name)
    nz = np.flatnonzero(host)
    start = int(nz[0]) if nz.size else max(host.shape[0] - 1, 0)
    return lax.slice_in_dim(p, start, get_aval(p).shape[0], axis=0)


def _pad_front(p, n: int):
    m = get_aval(p).shape[0]
    if m == n:
        return p
    return lax.pad(p, lax.full((), 0, get_aval(p).dtype), [(n - m, 0, 0)])


def _convolve_full(a, b):
    from plax.numpy.products import convolve
    return convolve(a, b, mode="full")


@jit_when_traced(name="poly")
def poly(seq_of_zeros):
    """The coefficients of the monic polynomial with the given roots.

    Args:
      seq_of_zeros: a 1-D array of roots, or a square matrix (its eigenvalues are used).

    Returns:
      ``n + 1`` coefficients, highest degree first (complex for complex roots or a matrix).

    Example:
      >>> jnp.poly(jnp.array([1., 2.]))
      Array([ 1., -3.,  2.], dtype=float32)
    """
    check_arraylike("poly", seq_of_zeros)
    (z,) = promote_args_inexact("poly", seq_of_zeros)
    z = to_dtype(z, get_aval(z).dtype, False)
    shape = get_aval(z).shape
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] > 0:
        from plax.numpy.linalg import eigvals
        z = eigvals(z)
    elif len(shape) != 1 and shape != ():
        raise ValueError("input must be 1d or non-empty square 2d array.")
    if get_aval(z).ndim == 0:
        return lax.full((1,), 1, get_aval(z).dtype)
    dt = get_aval(z).dtype
    coeffs = lax.full((1,), 1, dt)
    for k in range(get_aval(z).shape[0]):
        root = lax.slice_in_dim(z, k, k + 1, axis=0)
        coeffs = _convolve_full(coeffs, lax.concatenate([lax.full((1,), 1, dt),
                                                         lax.neg(root)], 0))
    return coeffs


def _add_like(name: str, a1, a2, op):
    check_arraylike(name, a1, a2)
    a1, a2 = promote_dtypes(asarray_weak(a1), asarray_weak(a2))
    _check_1d(name, a1, a2)
    n = max(get_aval(a1).shape[0], get_aval(a2).shape[0])
    return op(_pad_front(a1, n), _pad_front(a2, n))


@jit_when_traced(name="polyadd")
def polyadd(a1, a2):
    """Sum of two polynomials (the shorter one padded with leading zeros).

    Example:
      >>> jnp.polyadd(jnp.array([1, 2]), jnp.array([3, 4, 5]))
      Array([3, 5, 7], dtype=int32)
    """
    return _add_like("polyadd", a1, a2, lax.add)


@jit_when_traced(name="polysub")
def polysub(a1, a2):
    """Difference ``a1 - a2`` of two polynomials.

    Example:
      >>> jnp.polysub(jnp.array([3, 4, 5]), jnp.array([1, 2]))
      Array([3, 3, 3], dtype=int32)
    """
    return _add_like("polysub", a1, a2, lax.sub)


def polymul(a1, a2, *, trim_leading_zeros: bool = False):
    """Product of two polynomials (the convolution of their coefficients).

    Args:
      a1, a2: 1-D coefficient arrays.
      trim_leading_zeros: strip the inputs' leading zeros first, as NumPy does (needs
        concrete inputs).

    Returns:
      The product's coefficients, as floats.

    Example:
      >>> jnp.polymul(jnp.array([1., 1.]), jnp.array([1., -1.]))
      Array([ 1.,  0., -1.], dtype=float32)
    """
    check_arraylike("polymul", a1, a2)
    a1, a2 = _promote_inexact(a1, a2)
    _check_1d("polymul", a1, a2)
    if trim_leading_zeros and (get_aval(a1).shape[0] > 1 or get_aval(a2).shape[0] > 1):
        a1, a2 = _trim_leading(a1, "polymul"), _trim_leading(a2, "polymul")
    if get_aval(a1).shape[0] == 0:
        a1 = lax.full((1,), 0, get_aval(a1).dtype)
    if get_aval(a2).shape[0] == 0:
        a2 = lax.full((1,), 0, get_aval(a2).dtype)
    return _convolve_full(a1, a2)


def polydiv(u, v, *, trim_leading_zeros: bool = False):
    """Quotient and remainder of polynomial division ``u / v``.

    Args:
      u: the dividend's coefficients.
      v: the divisor's coefficients (its leading coefficient must be non-zero, else the
        results hold infinities and NaNs, as in NumPy).
      trim_leading_zeros: strip the remainder's leading zeros (needs concrete values).

    Returns:
      ``(quotient, remainder)``, as floats; the remainder has ``u``'s length.

    Example:
      >>> jnp.polydiv(jnp.array([1., 0., -1.]), jnp.array([1., 1.]))
      (Array([ 1., -1.], dtype=float32), Array([0., 0., 0.], dtype=float32))
    """
    check_arraylike("polydiv", u, v)
    u, v = _promote_inexact(u, v)
    _check_1d("polydiv", u, v)
    m, n = get_aval(u).shape[0] - 1, get_aval(v).shape[0] - 1
    dt = get_aval(u).dtype
    scale = lax.div(lax.full((), 1, dt), lax.reshape(lax.slice_in_dim(v, 0, 1, axis=0), ()))
    q = lax.full((max(m - n + 1, 1),), 0, dt)
    r = u
    # long division, one quotient coefficient per step (static count)
    for k in range(0, m - n + 1):
        d = lax.mul(scale, lax.reshape(lax.slice_in_dim(r, k, k + 1, axis=0), ()))
        q = dynamic_update_slice_unchecked(q, lax.reshape(d, (1,)), (k,))
        sub = lax.mul(lax.broadcast_in_dim(d, (n + 1,), ()), v)
        sub = lax.pad(sub, lax.full((), 0, dt), [(k, m - n - k, 0)])
        r = lax.sub(r, sub)
    if trim_leading_zeros:
        r = _trim_leading(r, "polydiv")
    return q, r


@jit_when_traced(name="polyder", static_argnames=("m",))
def polyder(p, m: int = 1):
    """The ``m``-th derivative of a polynomial.

    Example:
      >>> jnp.polyder(jnp.array([1., 2., 3.]))
      Array([2., 2.], dtype=float32)
    """
    check_arraylike("polyder", p)
    m = operator.index(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive")
    (p,) = promote_args_inexact("polyder", p)
    p = to_dtype(p, get_aval(p).dtype, False)
    _check_1d("polyder", p)
    dt = get_aval(p).dtype
    for _ in range(m):
        n = get_aval(p).shape[0]
        if n <= 1:
            return lax.full((0,), 0, dt)
        powers = lax.sub(lax.full((n - 1,), n - 1, dt), lax.iota(dt, n - 1))
        p = lax.mul(lax.slice_in_dim(p, 0, n - 1, axis=0), powers)
    return p


@jit_when_traced(name="polyint", static_argnames=("m",))
def polyint(p, m: int = 1, k=None):
    """The ``m``-th antiderivative of a polynomial, with integration constants ``k``.

    Args:
      p: the coefficients.
      m: the order of integration (static, non-negative).
      k: the constants (a scalar, used for every integration, or ``m`` values, the first
        for the first integration); zeros by default.

    Example:
      >>> jnp.polyint(jnp.array([3., 2., 1.]), k=5.)
      Array([1., 1., 1., 5.], dtype=float32)
    """
    check_arraylike("polyint", p)
    m = operator.index(m)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    (p,) = promote_args_inexact("polyint", p)
    p = to_dtype(p, get_aval(p).dtype, False)
    _check_1d("polyint", p)
    dt = get_aval(p).dtype
    if m == 0:
        return p
    if k is None:
        k = lax.full((m,), 0, dt)
    else:
        check_arraylike("polyint", k)
        k = to_dtype(asarray_weak(k), dt, False)
        if get_aval(k).ndim == 0:
            k = lax.broadcast_in_dim(k, (m,), ())
        if get_aval(k).shape != (m,):
            raise ValueError("k must be a scalar or a rank-1 array of length 1 or m.")
    for i in range(m):
        n = get_aval(p).shape[0]
        divisors = lax.sub(lax.full((n,), n, dt), lax.iota(dt, n))
        p = lax.concatenate([lax.div(p, divisors), lax.slice_in_dim(k, i, i + 1, axis=0)], 0)
    return p


@jit_when_traced(name="polyval", static_argnames=("unroll",))
def polyval(p, x, *, unroll: int = 16):
    """The polynomial ``p`` evaluated at ``x`` by Horner's rule.

    Args:
      p: 1-D coefficients, highest degree first.
      x: the points (any shape).
      unroll: how many Horner steps each loop iteration does (a speed knob).

    Returns:
      An array of ``x``'s shape and the promoted dtype of ``p`` and ``x``.

    Example:
      >>> jnp.polyval(jnp.array([1, 0, -1]), jnp.array([2, 3]))
      Array([3, 8], dtype=int32)
    """
    check_arraylike("polyval", p, x)
    p, x = promote_dtypes(asarray_weak(p), asarray_weak(x))
    _check_1d("polyval", p)
    x_aval = get_aval(x)
    init = lax.full(x_aval.shape, 0, x_aval.dtype)  # strong, as JAX's result
    p = to_dtype(p, x_aval.dtype, False)
    x = to_dtype(x, x_aval.dtype, False)

    def step(y, c):
        return lax.add(lax.mul(y, x), lax.broadcast_in_dim(c, x_aval.shape, ())), None

    y, _ = lax.scan(step, init, p, unroll=unroll)
    return y


def _vander(x, deg: int):
    """Columns ``x**deg, ..., x, 1``."""
    cols = [lax.integer_pow(x, k) if k > 1 else (x if k == 1 else
                                                 lax.full(get_aval(x).shape, 1, get_aval(x).dtype))
            for k in range(deg, -1, -1)]
    return lax.concatenate([lax.expand_dims(c, (1,)) for c in cols], 1)


def polyfit(x, y, deg: int, rcond=None, full: bool = False, w=None, cov=False):
    """Least-squares fit of a degree ``deg`` polynomial to the points ``(x, y)``.

    Args:
      x: 1-D sample points.
      y: the values, 1-D or 2-D (one fit per column).
      deg: the degree (static).
      rcond: the singular value cutoff (default ``len(x) * eps``).
      full: also return residuals, rank, singular values and rcond.
      w: weights applied to the unsquared residuals.
      cov: also return the covariance of the coefficients (``'unscaled'`` skips the
        residual scaling).

    Returns:
      The coefficients, highest degree first (shape ``(deg + 1,)`` or ``(deg + 1, K)``), and
      the extras asked for.

    Example:
      >>> jnp.polyfit(jnp.array([0., 1., 2.]), jnp.array([1., 3., 5.]), 1).round(4)
      Array([2., 1.], dtype=float32)
    """
    from plax.numpy.linalg import inv, lstsq
    from plax.numpy.reductions import sum as jsum
    check_arraylike("polyfit", x, y)
    deg = operator.index(deg)
    if deg < 0:
        raise ValueError("expected deg >= 0")
    x, y = _promote_inexact(x, y)
    if get_aval(x).ndim != 1:
        raise TypeError("expected 1D vector for x")
    if get_aval(x).shape[0] == 0:
        raise TypeError("expected non-empty vector for x")
    if get_aval(y).ndim not in (1, 2):
        raise TypeError("expected 1D or 2D array for y")
    if get_aval(x).shape[0] != get_aval(y).shape[0]:
        raise TypeError("expected x and y to have same length")
    dt = get_aval(x).dtype
    n = get_aval(x).shape[0]
    order = deg + 1
    if rcond is None:
        rcond = n * float(np.finfo(dtypes.real_dtype(dt)).eps)
    lhs = _vander(x, deg)
    rhs = y
    if w is not None:
        check_arraylike("polyfit", w)
        (w,) = promote_args_inexact("polyfit", w)
        w = to_dtype(w, dt, False)
        if get_aval(w).ndim != 1:
            raise TypeError("expected a 1-d array for weights")
        if get_aval(w).shape[0] != n:
            raise TypeError("expected w and y to have the same length")
        lhs = lax.mul(lhs, lax.broadcast_in_dim(w, get_aval(lhs).shape, (0,)))
        rhs = lax.mul(rhs, w if get_aval(rhs).ndim == 1 else
                      lax.broadcast_in_dim(w, get_aval(rhs).shape, (0,)))
    # scale the columns to unit norm for conditioning, then undo it on the coefficients
    scale = lax.sqrt(jsum(lax.mul(lhs, lhs), axis=0))
    lhs = lax.div(lhs, lax.broadcast_in_dim(scale, get_aval(lhs).shape, (1,)))
    c, resids, rank, s = lstsq(lhs, rhs, rcond)
    c = lax.div(c, scale if get_aval(c).ndim == 1 else
                lax.broadcast_in_dim(scale, get_aval(c).shape, (0,)))
    if full:
        return c, resids, rank, s, lax.full((), rcond, dt, weak_type=True)
    if cov:
        vbase = inv(lax.dot_general(lhs, lhs, (((0,), (0,)), ((), ()))))
        outer = lax.mul(lax.broadcast_in_dim(scale, (order, order), (0,)),
                        lax.broadcast_in_dim(scale, (order, order), (1,)))
        vbase = lax.div(vbase, outer)
        if cov == "unscaled":
            fac = lax.full((), 1, dt)
        else:
            if n <= order:
                raise ValueError("the number of data points must exceed order to scale the "
                                 "covariance matrix")
            fac = lax.div(resids, lax.full((), n - order, get_aval(resids).dtype))
        if get_aval(y).ndim == 1:
            fac = lax.reshape(fac, ()) if get_aval(fac).shape else fac
            return c, lax.mul(vbase, fac)
        # as NumPy and JAX: one matrix per column of y, or a single one (…, 1) when unscaled
        k = get_aval(y).shape[1] if get_aval(fac).ndim else 1
        if get_aval(fac).ndim == 0:
            fac = lax.reshape(fac, (1,))
        return c, lax.mul(lax.broadcast_in_dim(vbase, (order, order, k), (0, 1)),
                          lax.broadcast_in_dim(fac, (order, order, k), (2,)))
    return c


def roots(p, *, strip_zeros: bool = True):
    """The roots of a polynomial: the eigenvalues of its companion matrix.

    Args:
      p: 1-D coefficients, highest degree first.
      strip_zeros: strip leading zeros first, as NumPy (needs concrete ``p``). Set False
        to use ``roots`` under jit: a leading zero then gives NaN roots.

    Returns:
      A complex array of the roots (in no particular order).

    Example:
      >>> jnp.sort_complex(jnp.roots(jnp.array([1., -3., 2.])))
      Array([1.+0.j, 2.+0.j], dtype=complex64)
    """
    check_arraylike("roots", p)
    (p,) = promote_args_inexact("roots", p)
    p = to_dtype(p, get_aval(p).dtype, False)
    _check_1d("roots", p)
    if strip_zeros:
        p = _trim_leading(p, "roots")
    return _roots(p)


@jit_when_traced(name="roots")
def _roots(p):
    from plax.numpy.linalg import eigvals
    n = get_aval(p).shape[0]
    dt = get_aval(p).dtype
    cdt = dtypes.canonicalize_dtype(np.promote_types(
        np.float32 if dt == dtypes.bfloat16 else dt, np.complex64))
    if n < 2:
        return lax.full((0,), 0, cdt)
    lead = lax.slice_in_dim(p, 0, 1, axis=0)
    top = lax.neg(lax.div(lax.slice_in_dim(p, 1, n, axis=0),
                          lax.broadcast_in_dim(lax.reshape(lead, ()), (n - 1,), ())))
    # companion matrix: the normalised coefficients on top, ones on the subdiagonal
    sub = lax.convert_element_type(
        lax.eq(lax.broadcasted_iota(np.int32, (n - 2, n - 1), 0),
               lax.broadcasted_iota(np.int32, (n - 2, n - 1), 1)), dt)
    comp = lax.concatenate([lax.expand_dims(top, (0,)), sub], 0)
    return lax.convert_element_type(eigvals(comp), cdt)
