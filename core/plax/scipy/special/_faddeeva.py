"""The Faddeeva function ``w(z) = exp(-z^2) erfc(-i z)`` and the Fresnel integrals built on it.

``w`` in the upper half-plane: Weideman's rational expansion (SIAM J. Numer. Anal. 31, 1994)
for ``|z| < 8`` and Laplace's continued fraction beyond; the lower half-plane follows from
``w(z) = 2 exp(-z^2) - w(-z)``, and the real axis from ``w(x) = exp(-x^2) + 2i/sqrt(pi) D(x)``
with Dawson's integral ``D`` (exact real part there). The expansion coefficients are computed
once on the host from the method's definition (an FFT of samples of ``exp(-t^2)``).
"""
from __future__ import annotations

import functools
import math

import numpy as np

import plax
from plax import lax
from plax import numpy as jnp

from ._dawsn import dawsn
from ._util import Array, ArrayLike, const, inexact

__all__ = ["fresnel", "wofz"]

_WEIDEMAN_N = 40          # terms of the rational expansion: ~1e-14 relative error for |z| < 8
_CF_ABOVE = 8.0           # |z| from which the continued fraction is used
_CF_TERMS = 24            # its depth: ~1e-14 relative error for |z| >= 8
_FRESNEL_SERIES_BELOW = 1.5
_FRESNEL_SERIES_TERMS = 24
_INV_SQRT_PI = 1 / math.sqrt(math.pi)


@functools.lru_cache(maxsize=None)
def _weideman_coefficients(n: int) -> tuple[float, tuple[float, ...]]:
    """``(L, a)`` of Weideman's expansion ``w(z) ~ 2 p(Z) / (L - iz)^2 + 1 / (sqrt(pi) (L - iz))``
    with ``Z = (L + iz) / (L - iz)`` and ``p(Z) = sum_k a_k Z^k`` (highest power first)."""
    m = 2 * n
    k = np.arange(-m + 1, m)
    big_l = math.sqrt(n / math.sqrt(2.0))
    t = big_l * np.tan(k * np.pi / (2 * m))
    f = np.concatenate([[0.0], np.exp(-t * t) * (big_l ** 2 + t * t)])
    a = np.real(np.fft.fft(np.fft.fftshift(f))) / (2 * m)
    return big_l, tuple(float(c) for c in a[1:n + 1][::-1])


def _complex(re: Array, im: Array) -> Array:
    return lax.complex(re, im)


def _w_weideman(z: Array) -> Array:
    """Weideman's expansion, for ``Im z >= 0``."""
    big_l, coeffs = _weideman_coefficients(_WEIDEMAN_N)
    iz = z * 1j
    denom = big_l - iz
    zz = (big_l + iz) / denom
    p = jnp.zeros_like(z)
    for c in coeffs:  # Horner: unrolled, so every backend sees plain elementwise arithmetic
        p = p * zz + c
    return 2 * p / (denom * denom) + _INV_SQRT_PI / denom


def _w_continued_fraction(z: Array) -> Array:
    """``w(z) = (i / sqrt(pi)) / (z - (1/2) / (z - 1 / (z - (3/2) / ...)))``, evaluated from the
    tail, for ``Im z >= 0`` and large ``|z|``."""
    t = z
    for k in range(_CF_TERMS, 0, -1):
        t = z - (k / 2) / t
    return (1j * _INV_SQRT_PI) / t


def _w_upper(z: Array) -> Array:
    """``w(z)`` for ``Im z >= 0`` (finite ``z``)."""
    far = jnp.abs(z) >= _CF_ABOVE
    one = jnp.ones_like(z)
    near_z = jnp.where(far, one, z)
    far_z = jnp.where(far, z, one * _CF_ABOVE * 1j)
    return jnp.where(far, _w_continued_fraction(far_z), _w_weideman(near_z))


@plax.custom_jvp
def _wofz(z: Array) -> Array:
    x, y = jnp.real(z), jnp.imag(z)
    lower = y < 0
    zero = jnp.zeros_like(z)
    finite = jnp.isfinite(x) & jnp.isfinite(y)
    zf = jnp.where(finite, z, zero)
    up = _w_upper(jnp.where(lower, -zf, zf))
    zl = jnp.where(lower, zf, zero)
    # 2 exp(-z^2) in polar parts, so an overflowing modulus gives signed infinities (as SciPy's)
    # rather than inf * 0 = NaN where a part is exactly zero
    sq = zl * zl
    mod = 2 * jnp.exp(-jnp.real(sq))
    cs, sn = jnp.cos(jnp.imag(sq)), -jnp.sin(jnp.imag(sq))
    growth = _complex(jnp.where(cs == 0, cs, mod * cs), jnp.where(sn == 0, sn, mod * sn))
    out = jnp.where(lower, growth - up, up)
    # On the real axis: the real part exp(-x^2) exactly, the imaginary part from Dawson.
    xr = jnp.where(y == 0, x, jnp.zeros_like(x))
    on_axis = _complex(jnp.exp(-xr * xr), const(x, 2 * _INV_SQRT_PI) * dawsn(xr))
    out = jnp.where((y == 0) & finite, on_axis, out)
    # Limits at infinity, as SciPy's: 0 along every direction but -i inf (w ~ i / (sqrt(pi) z),
    # and exp(-z^2) decays for |Re z| -> inf at finite Im z); inf along the negative imaginary
    # axis, NaN off it (exp(-z^2) oscillates without bound).
    nan = _complex(const(x, np.nan), const(x, np.nan))
    to_zero = (jnp.isposinf(y) & ~jnp.isnan(x)) | (jnp.isinf(x) & ~jnp.isnan(y) & ~jnp.isneginf(y))
    to_inf = jnp.isneginf(y) & (x == 0)
    inf_limit = jnp.where(to_zero, zero,
                          jnp.where(to_inf, _complex(const(x, np.inf), const(x, 0.0)), nan))
    return jnp.where(finite, out, inf_limit)


@_wofz.defjvp
def _wofz_jvp(primals, tangents):
    z, = primals
    t, = tangents
    w = _wofz(z)
    # w'(z) = -2 z w(z) + 2i / sqrt(pi)
    return w, (-2 * z * w + 2j * _INV_SQRT_PI) * t


def wofz(z: ArrayLike) -> Array:
    """The Faddeeva function ``w(z) = exp(-z^2) erfc(-i z)``.

    JAX-compatible :obj:`scipy.special.wofz`.

    Args:
      z: arraylike, real or complex; real and integer inputs give the matching complex dtype
        (``complex64`` for ``float32``, ``complex128`` for ``float64``).

    Returns:
      ``w(z)`` as a complex array. On the real axis ``w(x) = exp(-x^2) + 2i D(x) / sqrt(pi)``
      with Dawson's integral ``D``; in the lower half-plane ``w`` grows like ``exp(-z^2)`` and
      overflows to ``inf`` as SciPy's does. Differentiable (``w'(z) = -2 z w(z) + 2i/sqrt(pi)``).

    Example:
      >>> from plax.scipy.special import wofz
      >>> jnp.round(wofz(1.0 + 2.0j), 5)
      Array(0.21849+0.093j, dtype=complex64)
    """
    z, = inexact("wofz", z)
    if not jnp.issubdtype(z.dtype, jnp.complexfloating):
        z = _complex(z, jnp.zeros_like(z))
    return _wofz(z)


def _fresnel_series(x: Array) -> tuple[Array, Array]:
    """``S = sum_k (-1)^k (pi/2)^(2k+1) x^(4k+3) / ((2k+1)! (4k+3))`` and
    ``C = sum_k (-1)^k (pi/2)^(2k) x^(4k+1) / ((2k)! (4k+1))`` for ``|x| <= 1.5``, where the
    largest term is below 40 (under two digits lost to cancellation)."""
    half_pi = const(x, math.pi / 2)
    u = half_pi * x * x
    s_total, c_total = jnp.zeros_like(x), jnp.zeros_like(x)
    term = x  # (-1)^j u^j x / j!, j = 0, 1, 2, ...: even j feed C, odd j feed S
    for j in range(2 * _FRESNEL_SERIES_TERMS):
        if j % 2 == 0:
            c_total = c_total + term / (2 * j + 1)
        else:
            s_total = s_total + term / (2 * j + 1)
        term = term * u / (j + 1) * (-1 if j % 2 else 1)
    return s_total, c_total


def _fresnel_large(x: Array) -> tuple[Array, Array]:
    """``C + iS = (1 + i)/2 (1 - exp(i pi x^2 / 2) w((1 + i) sqrt(pi) x / 2))`` for ``x > 0``.
    The phase ``pi x^2 / 2`` is reduced modulo ``2 pi`` through ``x^2 mod 4`` computed from an
    exact split of ``x^2`` (Dekker), so large arguments keep their phase."""
    eps_bits = 27 if x.dtype == jnp.float64 else 12
    c = x * const(x, 2.0 ** eps_bits + 1)
    hi = c - (c - x)
    lo = x - hi
    four = const(x, 4.0)
    r = jnp.fmod(hi * hi, four) + jnp.fmod(2 * hi * lo, four) + lo * lo
    r = jnp.fmod(r, four)
    phase = const(x, math.pi / 2) * r
    e = _complex(jnp.cos(phase), jnp.sin(phase))
    zeta = _complex(x, x) * const(x, math.sqrt(math.pi) / 2)
    w = _w_upper(zeta)
    v = (1 + 1j) / 2 * (1 - e * w)
    return jnp.imag(v), jnp.real(v)


@plax.custom_jvp
def _fresnel(x: Array) -> tuple[Array, Array]:
    ax = jnp.abs(x)
    small = ax <= _FRESNEL_SERIES_BELOW
    # Beyond 2^(mantissa/2) the correction terms (~1/(pi x)) vanish below half an ulp of 1/2,
    # and x^2 would overflow for the largest inputs.
    huge = ax > (1e150 if x.dtype == jnp.float64 else 1e18)
    s_small, c_small = _fresnel_series(jnp.where(small, ax, jnp.zeros_like(x)))
    mid = jnp.where(small | huge | ~jnp.isfinite(ax), const(x, 2.0), ax)
    s_large, c_large = _fresnel_large(mid)
    half = const(x, 0.5)
    s = jnp.where(small, s_small, jnp.where(huge | jnp.isinf(ax), half, s_large))
    c = jnp.where(small, c_small, jnp.where(huge | jnp.isinf(ax), half, c_large))
    neg = jnp.signbit(x)  # odd functions: -0.0 gives -0.0
    s = jnp.where(jnp.isnan(x), x, jnp.where(neg, -s, s))
    c = jnp.where(jnp.isnan(x), x, jnp.where(neg, -c, c))
    return s, c


@_fresnel.defjvp
def _fresnel_jvp(primals, tangents):
    x, = primals
    t, = tangents
    s, c = _fresnel(x)
    phase = const(x, math.pi / 2) * x * x
    return (s, c), (jnp.sin(phase) * t, jnp.cos(phase) * t)


def fresnel(x: ArrayLike) -> tuple[Array, Array]:
    """The Fresnel integrals ``S(x) = int_0^x sin(pi t^2 / 2) dt`` and
    ``C(x) = int_0^x cos(pi t^2 / 2) dt``.

    JAX-compatible :obj:`scipy.special.fresnel` (real arguments only, as in JAX).

    Args:
      x: real arraylike; integers promote to floats.

    Returns:
      ``(S, C)``: both odd in ``x`` and tending to ``+-1/2`` at ``+-inf``. Power series for
      ``|x| <= 1.5``, the Faddeeva function beyond. Differentiable:
      ``S' = sin(pi x^2 / 2)``, ``C' = cos(pi x^2 / 2)``.

    Example:
      >>> from plax.scipy.special import fresnel
      >>> s, c = fresnel(1.0)
      >>> s, c
      (Array(0.43825915, dtype=float32), Array(0.7798934, dtype=float32))
    """
    x, = inexact("fresnel", x)
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise TypeError("fresnel: complex arguments are not supported (as in JAX); "
                        f"got {x.dtype}")
    return _fresnel(x)
