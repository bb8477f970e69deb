"""Bessel functions of the first kind of integer orders 0..v, by Miller's backward recurrence."""
from __future__ import annotations

import operator

from plax import lax
from plax import numpy as jnp

from ._util import Array, ArrayLike, const, inexact

__all__ = ["bessel_jn"]


def bessel_jn(z: ArrayLike, *, v: int, n_iter: int = 50) -> Array:
    """Bessel functions of the first kind ``J_0(z), ..., J_v(z)`` for real ``z``.

    Runs the recurrence ``J_{k-1} = 2k/z J_k - J_{k+1}`` downwards from order ``n_iter + 1``
    (Miller's algorithm) and normalises with ``J_0 + 2 sum_k J_{2k} = 1``. ``n_iter`` must
    exceed ``|z|`` comfortably (about ``|z| + 30`` is accurate in float64).

    Args:
      z: real arraylike; integers promote to floats.
      v: the highest order, a concrete non-negative integer.
      n_iter: the starting order of the recurrence, a concrete integer.

    Returns:
      An array of shape ``(v + 1,) + z.shape``; at ``z == 0``, ``J_0 = 1`` and the others 0.

    Example:
      >>> from plax.scipy.special import bessel_jn
      >>> bessel_jn(1.0, v=2)   # J0(1), J1(1), J2(1)
      Array([0.7651977 , 0.44005057, 0.11490348], dtype=float32)
    """
    z, = inexact("bessel_jn", z)
    if jnp.issubdtype(z.dtype, jnp.complexfloating):
        raise ValueError("bessel_jn: complex input not supported.")
    v = operator.index(v)
    n_iter = int(n_iter)
    if v < 0:
        raise ValueError(f"bessel_jn: the order v must be non-negative; got v={v}")
    at_zero = z == 0
    zs = jnp.where(at_zero, const(z, 1.0), z)
    start = max(n_iter, v)

    rescale = const(z, 2.0 ** 60)  # keeps the growing recurrence finite (float32 included)

    def step(carry, k):
        nxt, cur, norm, level = carry  # f_{k+2}, f_{k+1}, the norm sum, rescalings so far
        f = 2 * (k + 1) / zs * cur - nxt
        norm = norm + jnp.where(jnp.fmod(k, 2) == 0, 2 * f, jnp.zeros_like(f))
        big = jnp.abs(f) > rescale
        shrink = lambda u: jnp.where(big, u / rescale, u)
        level = level + big.astype(z.dtype)
        return (shrink(cur), shrink(f), shrink(norm), level), (shrink(f), level)

    ks = jnp.arange(start, -1, -1, dtype=z.dtype)
    init = (jnp.zeros_like(zs), jnp.full_like(zs, 1e-16), jnp.zeros_like(zs), jnp.zeros_like(zs))
    (_, f0, norm, level), (fs, levels) = lax.scan(step, init, ks)
    fs, levels = jnp.flip(fs, 0)[:v + 1], jnp.flip(levels, 0)[:v + 1]
    values = fs * rescale ** (levels - level) / (norm - f0)
    orders = jnp.arange(v + 1).reshape((v + 1,) + (1,) * z.ndim)
    return jnp.where(at_zero, (orders == 0).astype(z.dtype), values)
