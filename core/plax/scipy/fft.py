"""plax.scipy.fft: the discrete cosine transform of type 2 and its inverse (``dct``, ``idct``,
``dctn``, ``idctn``), as ``jax.scipy.fft`` offers them.

Computed through one complex FFT of the reordered input (Makhoul, IEEE Trans. ASSP 28, 1980):
``v = (x[0], x[2], ..., x[3], x[1])``, ``y_k = 2 Re(exp(-i pi k / 2N) FFT(v)_k)``; the inverse
runs the same steps backwards. Only type 2 exists here, as in JAX.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

import numpy as np

from plax import numpy as jnp

Array = Any

__all__ = ["dct", "dctn", "idct", "idctn"]

_NORMS = (None, "backward", "ortho", "forward")


def _check(type: int, norm: Optional[str], name: str) -> None:
    if type != 2:
        raise NotImplementedError(f"{name}: only DCT type 2 is implemented (as in JAX), got "
                                  f"type={type}")
    if norm not in _NORMS:
        raise ValueError(f"{name}: norm must be one of {_NORMS}, got {norm!r}")


def _resize(x: Array, n: Optional[int], axis: int) -> Array:
    """``x`` truncated or zero-padded to length ``n`` along ``axis``."""
    if n is None or n == x.shape[axis]:
        return x
    if n < 1:
        raise ValueError(f"invalid number of data points ({n}) specified")
    if n < x.shape[axis]:
        return jnp.take(x, jnp.arange(n), axis=axis)
    pad = [(0, 0)] * x.ndim
    pad[axis] = (0, n - x.shape[axis])
    return jnp.pad(x, pad)


def _makhoul_perm(n: int) -> np.ndarray:
    evens = np.arange(0, n, 2)
    odds = np.arange(1, n, 2)[::-1]
    return np.concatenate([evens, odds])


def _scales(n: int, norm: Optional[str], dtype) -> Array:
    """Per-coefficient factors applied to the unnormalised DCT-II (``2 sum x cos(...)``)."""
    if norm == "ortho":
        f = np.full(n, math.sqrt(1 / (2 * n)))
        f[0] = math.sqrt(1 / (4 * n))
    elif norm == "forward":
        f = np.full(n, 1 / (2 * n))
    else:
        f = np.ones(n)
    return jnp.asarray(f, dtype=dtype)


def _real_dtype(x: Array):
    return jnp.finfo(x.dtype).dtype if jnp.issubdtype(x.dtype, jnp.complexfloating) else x.dtype


def _dct_last(x: Array, norm: Optional[str]) -> Array:
    n = x.shape[-1]
    v = x[..., _makhoul_perm(n)]
    k = np.arange(n)
    twiddle = jnp.asarray(np.exp(-1j * np.pi * k / (2 * n)),
                          dtype=jnp.result_type(x.dtype, jnp.complex64))
    spec = jnp.fft.fft(v, axis=-1) * twiddle
    y = 2 * (jnp.real(spec) if not jnp.issubdtype(x.dtype, jnp.complexfloating) else spec.real)
    return y * _scales(n, norm, y.dtype)


def _idct_last(y: Array, norm: Optional[str]) -> Array:
    n = y.shape[-1]
    y = y / _scales(n, norm, y.dtype)            # back to the unnormalised coefficients
    k = np.arange(n)
    # V_k = (1/2) exp(i pi k / 2N) (y_k - i y_{N-k}), with y_N = 0
    flipped = jnp.concatenate([jnp.zeros_like(y[..., :1]), jnp.flip(y[..., 1:], -1)], axis=-1)
    twiddle = jnp.asarray(np.exp(1j * np.pi * k / (2 * n)),
                          dtype=jnp.result_type(y.dtype, jnp.complex64))
    spec = 0.5 * twiddle * (y - 1j * flipped)
    v = jnp.real(jnp.fft.ifft(spec, axis=-1))
    inv = np.argsort(_makhoul_perm(n))
    return v[..., inv]


def _along(fn, x: Array, axis: int) -> Array:
    x = jnp.moveaxis(x, axis, -1)
    return jnp.moveaxis(fn(x), -1, axis)


def _prepare(x, name):
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    if jnp.issubdtype(x.dtype, jnp.complexfloating):
        raise TypeError(f"{name}: complex input is not supported")
    return x


def dct(x: Array, type: int = 2, n: Optional[int] = None, axis: int = -1,
        norm: Optional[str] = None) -> Array:
    """The discrete cosine transform of type 2 along ``axis``:
    ``y_k = 2 sum_n x_n cos(pi k (2n + 1) / (2N))`` (scaled per ``norm``), as
    :obj:`scipy.fft.dct`.

    Args:
      x: real array.
      type: 2 (the only type implemented, as in JAX).
      n: transform length (``x`` truncated or zero-padded).
      axis: the axis.
      norm: None/"backward" (no scaling), "ortho" (orthonormal) or "forward" (``1/(2N)``).

    Returns:
      The real transform.

    Example:
      >>> from plax.scipy.fft import dct
      >>> jnp.round(dct(jnp.array([1.0, 2.0, 3.0, 4.0])), 4)
      Array([20.    , -6.3086,  0.    , -0.4483], dtype=float32)
    """
    _check(type, norm, "dct")
    x = _prepare(x, "dct")
    axis = axis % x.ndim if x.ndim else 0
    return _along(lambda v: _dct_last(v, norm), _resize(x, n, axis), axis)


def idct(x: Array, type: int = 2, n: Optional[int] = None, axis: int = -1,
         norm: Optional[str] = None) -> Array:
    """The inverse of :func:`dct` of type 2 (a DCT of type 3, scaled per ``norm``), as
    :obj:`scipy.fft.idct`.

    Example:
      >>> from plax.scipy.fft import dct, idct
      >>> jnp.round(idct(dct(jnp.array([1.0, 2.0, 3.0]))), 4)
      Array([1., 2., 3.], dtype=float32)
    """
    _check(type, norm, "idct")
    x = _prepare(x, "idct")
    axis = axis % x.ndim if x.ndim else 0
    return _along(lambda v: _idct_last(v, norm), _resize(x, n, axis), axis)


def _axes_and_sizes(x, s, axes):
    if axes is None:
        axes = list(range(x.ndim)) if s is None else list(range(x.ndim - len(s), x.ndim))
    axes = [a % x.ndim for a in axes]
    if s is None:
        s = [None] * len(axes)
    if len(s) != len(axes):
        raise ValueError(f"shape and axes have different lengths: {len(s)} and {len(axes)}")
    return axes, s


def dctn(x: Array, type: int = 2, s: Optional[Sequence[int]] = None,
         axes: Optional[Sequence[int]] = None, norm: Optional[str] = None) -> Array:
    """The multidimensional :func:`dct` over ``axes`` (all by default), with sizes ``s``.

    Example:
      >>> from plax.scipy.fft import dctn
      >>> dctn(jnp.ones((2, 2)))
      Array([[16.,  0.],
             [ 0.,  0.]], dtype=float32)
    """
    _check(type, norm, "dctn")
    x = _prepare(x, "dctn")
    axes, s = _axes_and_sizes(x, s, axes)
    for a, n in zip(axes, s):
        x = dct(x, n=n, axis=a, norm=norm)
    return x


def idctn(x: Array, type: int = 2, s: Optional[Sequence[int]] = None,
          axes: Optional[Sequence[int]] = None, norm: Optional[str] = None) -> Array:
    """The multidimensional :func:`idct` over ``axes`` (all by default), with sizes ``s``.

    Example:
      >>> from plax.scipy.fft import dctn, idctn
      >>> jnp.round(idctn(dctn(jnp.arange(4.0).reshape(2, 2))), 4)
      Array([[0., 1.],
             [2., 3.]], dtype=float32)
    """
    _check(type, norm, "idctn")
    x = _prepare(x, "idctn")
    axes, s = _axes_and_sizes(x, s, axes)
    for a, n in zip(axes, s):
        x = idct(x, n=n, axis=a, norm=norm)
    return x
