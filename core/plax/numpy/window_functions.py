"""Window functions of plax.numpy: bartlett, blackman, hamming, hanning and kaiser.

The length ``M`` fixes the output shape, so it must be a static integer (a traced ``M``
raises plax's concretization error); the values are computed with lax in the default
float dtype, as JAX does.
"""
from __future__ import annotations

import operator

import numpy as np

from plax import dtypes, errors, lax
from plax.core.trace import Tracer

__all__ = ["bartlett", "blackman", "hamming", "hanning", "kaiser"]


def _length(M, name: str) -> int:
    """``M`` as a Python int; a traced ``M`` cannot set a shape."""
    if isinstance(M, Tracer):
        value = M.to_concrete_value()
        if value is None:
            raise errors.ConcretizationTypeError(
                M, f"The M argument of jnp.{name} sets the output shape, so it must be a "
                   "static integer (pass it as a static argument of jit).")
        M = value
    try:
        return operator.index(np.asarray(M).item() if hasattr(M, "shape") else M)
    except TypeError:
        raise TypeError(f"jnp.{name}: M must be an integer, got {M!r}") from None


def _centered(M: int, dt: np.dtype):
    """``n / (M - 1)`` for ``n`` in ``1-M, 3-M, ..., M-1`` (the symmetric sample points in
    ``[-1, 1]``)."""
    n = lax.sub(lax.mul(lax.iota(dt, M), lax.full((), 2, dt)), lax.full((), M - 1, dt))
    return lax.div(n, lax.full((), M - 1, dt))


def _cosine_window(name: str, M, coeffs: tuple[float, ...]):
    """``sum_k c_k cos(k pi t)`` over the centred points ``t`` (the generalised cosine
    windows)."""
    M = _length(M, name)
    dt = dtypes.default_float_dtype()
    if M < 1:
        return lax.full((0,), 0, dt)
    if M == 1:
        return lax.full((1,), 1, dt)
    t = lax.mul(_centered(M, dt), lax.full((), np.pi, dt))
    out = lax.full((M,), coeffs[0], dt)
    for k, c in enumerate(coeffs[1:], start=1):
        out = lax.add(out, lax.mul(lax.full((), c, dt), lax.cos(lax.mul(t, lax.full((), k, dt)))))
    return out


def blackman(M: int):
    """The Blackman window of length ``M``.

    Args:
      M: the number of points (static; an empty array for ``M < 1``).

    Returns:
      A float array of shape ``(M,)``, peaking at 1 in the middle.

    Example:
      >>> w = jnp.blackman(5)
      >>> jnp.round(w[1:-1], 4)  # the ends are 0 up to rounding (about -1e-08 in float32)
      Array([0.34, 1.  , 0.34], dtype=float32)
    """
    return _cosine_window("blackman", M, (0.42, 0.5, 0.08))


def hamming(M: int):
    """The Hamming window of length ``M`` (``0.54 + 0.46 cos``).

    Example:
      >>> jnp.round(jnp.hamming(3), 4)  # 0.08000001 in float32
      Array([0.08, 1.  , 0.08], dtype=float32)
    """
    return _cosine_window("hamming", M, (0.54, 0.46))


def hanning(M: int):
    """The Hann window of length ``M`` (``0.5 + 0.5 cos``).

    Example:
      >>> jnp.hanning(3)
      Array([0., 1., 0.], dtype=float32)
    """
    return _cosine_window("hanning", M, (0.5, 0.5))


def bartlett(M: int):
    """The Bartlett (triangular) window of length ``M``.

    Example:
      >>> jnp.bartlett(5)
      Array([0. , 0.5, 1. , 0.5, 0. ], dtype=float32)
    """
    M = _length(M, "bartlett")
    dt = dtypes.default_float_dtype()
    if M < 1:
        return lax.full((0,), 0, dt)
    if M == 1:
        return lax.full((1,), 1, dt)
    return lax.sub(lax.full((M,), 1, dt), lax.abs(_centered(M, dt)))


def kaiser(M: int, beta):
    """The Kaiser window of length ``M`` and shape ``beta``: ``i0(beta sqrt(1 - t**2)) /
    i0(beta)`` over the centred points ``t``.

    Args:
      M: the number of points (static).
      beta: the shape parameter (may be traced; the window is differentiable in it).

    Returns:
      A float array of shape ``(M,)``.

    Example:
      >>> jnp.kaiser(3, 0.0)
      Array([1., 1., 1.], dtype=float32)
    """
    from plax.numpy.math_extras import i0
    from plax.numpy.util import check_arraylike, to_dtype
    M = _length(M, "kaiser")
    check_arraylike("kaiser", beta)
    dt = dtypes.default_float_dtype()
    if M < 1:
        return lax.full((0,), 0, dt)
    if M == 1:
        return lax.full((1,), 1, dt)
    beta = to_dtype(beta, dt)
    t = _centered(M, dt)
    # clamp: rounding can push 1 - t**2 a hair below zero at the ends
    root = lax.sqrt(lax.max(lax.sub(lax.full((M,), 1, dt), lax.mul(t, t)), lax.full((), 0, dt)))
    return lax.div(i0(lax.mul(beta, root)), i0(beta))
