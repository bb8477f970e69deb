"""Spherical harmonics ``Y_n^m(theta, phi)`` (SciPy's ``sph_harm_y`` convention: ``theta`` the
polar angle, Condon-Shortley phase included)."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np

from plax import lax
from plax import numpy as jnp

from ._util import Array, ArrayLike, const, inexact

__all__ = ["sph_harm_y"]


def _normalized_legendre(n: Array, mm: Array, x: Array, s: Array, n_max: int) -> Array:
    """``sqrt((2n+1)/(4 pi) (n-m)!/(n+m)!) P_n^m(x)`` (with the Condon-Shortley phase) for
    ``0 <= m <= n <= n_max``, ``x = cos theta``, ``s = sin theta``, by the stable recurrences on
    the normalized functions: up the diagonal ``m = n`` first, then in ``n`` at fixed ``m``."""
    dtype = x.dtype
    mmf = mm.astype(dtype)

    def diagonal(k, p):
        kf = lax.convert_element_type(k, dtype)
        step = -jnp.sqrt((2 * kf + 1) / (2 * kf)) * s * p
        return jnp.where(kf <= mmf, step, p)

    p_mm = lax.fori_loop(1, n_max + 1, diagonal, jnp.full_like(x, 1 / math.sqrt(4 * math.pi)))
    p_next = jnp.sqrt(2 * mmf + 3) * x * p_mm

    def upward(j, carry):
        prev2, prev1 = carry  # P_(l-2), P_(l-1) with l = m + j
        l = mmf + lax.convert_element_type(j, dtype)
        a_l = jnp.sqrt((4 * l * l - 1) / jnp.maximum(l * l - mmf * mmf, const(x, 1.0)))
        lm1 = l - 1
        a_prev = jnp.sqrt((4 * lm1 * lm1 - 1) / jnp.maximum(lm1 * lm1 - mmf * mmf, const(x, 1.0)))
        cur = a_l * (x * prev1 - prev2 / a_prev)
        active = l <= n.astype(dtype)
        return jnp.where(active, prev1, prev2), jnp.where(active, cur, prev1)

    # after the loop, prev1 holds P_n^m wherever n >= m + 1
    _, p_n = lax.fori_loop(2, n_max + 1, upward, (p_mm, p_next))
    return jnp.where(n == mm, p_mm, p_n)


def sph_harm_y(n: ArrayLike, m: ArrayLike, theta: ArrayLike, phi: ArrayLike,
               diff_n: Optional[int] = None, n_max: Optional[int] = None) -> Array:
    """The spherical harmonic ``Y_n^m(theta, phi) = N_n^m P_n^m(cos theta) exp(i m phi)``.

    JAX-compatible :obj:`scipy.special.sph_harm_y`: ``theta`` is the polar (colatitudinal)
    angle, ``phi`` the azimuth, ``N_n^m = sqrt((2n+1)/(4 pi) (n-m)!/(n+m)!)`` (orthonormal on the
    sphere) and the Condon-Shortley phase ``(-1)^m`` is part of ``P_n^m``. Negative orders use
    ``Y_n^-m = (-1)^m conj(Y_n^m)``.

    Args:
      n: integer degrees, ``n >= 0``.
      m: integer orders; ``|m| > n`` gives 0.
      theta: polar angles in ``[0, pi]``.
      phi: azimuthal angles. All four broadcast together (JAX accepts only 1-D arrays).
      diff_n: derivatives are not supported (as in JAX); only ``None`` or 0.
      n_max: a static bound on ``n``; degrees above it are clipped to it. Required under
        ``jit`` (where ``max(n)`` cannot be read); by default ``max(n)``.

    Returns:
      Complex values (``complex64`` for ``float32`` angles, ``complex128`` for ``float64``),
      differentiable in ``theta`` and ``phi``.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.special import sph_harm_y
      >>> y = sph_harm_y(jnp.array([2]), jnp.array([1]), jnp.array([0.3]), jnp.array([0.7]))
      >>> y.dtype, round(float(y.real[0]), 5), round(float(y.imag[0]), 5)
      (dtype('complex64'), -0.16682, -0.14051)
    """
    if diff_n not in (None, 0):
        raise NotImplementedError("sph_harm_y: diff_n (derivatives of Y) is not supported, "
                                  "as in JAX")
    n = jnp.asarray(n)
    m = jnp.asarray(m)
    for name, v in (("n", n), ("m", m)):
        if not (jnp.issubdtype(v.dtype, jnp.integer) or jnp.issubdtype(v.dtype, jnp.floating)):
            raise TypeError(f"sph_harm_y: {name} must hold integers, got {v.dtype}")
    theta, phi = inexact("sph_harm_y", theta, phi)
    if n_max is None:
        try:
            n_max = int(np.max(np.asarray(n))) if n.size else 0
        except Exception as e:  # a tracer: the bound must be given
            raise type(e)(f"{e}\nsph_harm_y: under jit, pass the static bound n_max= "
                          "(the largest degree n)") from None
    n_max = max(int(n_max), 0)
    n, m, theta, phi = jnp.broadcast_arrays(n, m, theta, phi)
    n = jnp.clip(n.astype(jnp.int32), 0, n_max)
    m = m.astype(jnp.int32)
    mm = jnp.abs(m)
    valid = mm <= n
    mm_safe = jnp.where(valid, mm, 0)
    x, s = jnp.cos(theta), jnp.sin(theta)
    p = _normalized_legendre(n, mm_safe, x, s, n_max)
    p = jnp.where(valid, p, jnp.zeros_like(p))
    angle = mm_safe.astype(phi.dtype) * phi
    y = lax.complex(p * jnp.cos(angle), p * jnp.sin(angle))
    # Y_n^-m = (-1)^m conj(Y_n^m)
    sign = jnp.where(mm_safe % 2 == 1, const(theta, -1.0), const(theta, 1.0))
    return jnp.where(m < 0, lax.complex(sign, jnp.zeros_like(sign)) * jnp.conj(y), y)
