"""plax.scipy.signal: N-dimensional convolution and cross-correlation (``jax.scipy.signal``).

The direct method lowers to ``lax.conv_general_dilated`` (one batch, one feature); the FFT
method multiplies spectra from ``plax.numpy.fft``. Inputs promote to an inexact dtype.
"""
from __future__ import annotations

from typing import Any, Sequence

import plax
from plax import lax
from plax import numpy as jnp
from plax.numpy.util import canonicalize_axis, check_arraylike

Array = Any
ArrayLike = Any

__all__ = ["convolve", "correlate", "fftconvolve", "convolve2d", "correlate2d", "detrend"]

_MODES = ("full", "same", "valid")


def _inexact(name: str, in1: ArrayLike, in2: ArrayLike) -> tuple[Array, Array]:
    from plax.scipy.stats._util import promote_dtypes_inexact
    check_arraylike(name, in1, in2)
    in1, in2 = promote_dtypes_inexact(jnp.asarray(in1), jnp.asarray(in2))
    return in1, in2


def _check_mode(mode: str) -> None:
    if mode not in _MODES:
        raise ValueError(f"mode must be one of {list(_MODES)}; got mode={mode!r}")


def _ordered(name: str, in1: Array, in2: Array) -> tuple[Array, Array, bool]:
    """The pair with the larger array first, and whether they were swapped; raises unless one
    input is at least as large as the other along every axis."""
    bigger = all(a >= b for a, b in zip(in1.shape, in2.shape))
    smaller = all(a <= b for a, b in zip(in1.shape, in2.shape))
    if not (bigger or smaller):
        raise ValueError(f"{name}: one input must be at least as large as the other in every "
                         f"dimension; got shapes {in1.shape} and {in2.shape}")
    return (in2, in1, True) if smaller and not bigger else (in1, in2, False)


def _center(full: Array, out_shape: Sequence[int]) -> Array:
    """The centred ``out_shape`` block of ``full`` (SciPy's choice of centre)."""
    starts = [(f - o) // 2 for f, o in zip(full.shape, out_shape)]
    return lax.slice(full, starts, [s + o for s, o in zip(starts, out_shape)])


def _direct(name: str, in1: Array, in2: Array, mode: str, precision: Any = None) -> Array:
    """Full/same/valid convolution as a single-channel ``conv_general_dilated``."""
    _check_mode(mode)
    if in1.ndim != in2.ndim:
        raise ValueError(f"{name}: in1 and in2 must have the same number of dimensions; got "
                         f"{in1.ndim} and {in2.ndim}")
    if in1.size == 0 or in2.size == 0:
        raise ValueError(f"{name}: zero-size arrays are not supported; got shapes {in1.shape} "
                         f"and {in2.shape}")
    kept_shape = in2.shape
    big, small, _ = _ordered(name, in1, in2)
    if mode == "valid":
        pads = [(0, 0)] * small.ndim
    elif mode == "same":
        pads = [(k - 1 - (o - 1) // 2, k - o + (o - 1) // 2)
                for k, o in zip(small.shape, kept_shape)]
    else:
        pads = [(k - 1, k - 1) for k in small.shape]
    kernel = jnp.flip(small)
    out = lax.conv_general_dilated(big[None, None], kernel[None, None], (1,) * big.ndim, pads,
                                   precision=precision)
    return out[0, 0]


def _fft_unbatched(in1: Array, in2: Array, mode: str) -> Array:
    full_shape = tuple(a + b - 1 for a, b in zip(in1.shape, in2.shape))
    if mode == "valid":
        in1, in2, _ = _ordered("fftconvolve", in1, in2)
    if all(a == 1 or b == 1 for a, b in zip(in1.shape, in2.shape)):
        full = in1 * in2
    elif jnp.iscomplexobj(in1):
        full = jnp.fft.ifftn(jnp.fft.fftn(in1, full_shape) * jnp.fft.fftn(in2, full_shape),
                             full_shape)
    else:
        full = jnp.fft.irfftn(jnp.fft.rfftn(in1, full_shape) * jnp.fft.rfftn(in2, full_shape),
                              full_shape)
    if mode == "full":
        return full
    out_shape = in1.shape if mode == "same" else tuple(
        a - b + 1 for a, b in zip(in1.shape, in2.shape))
    return _center(full, out_shape)


def fftconvolve(in1: ArrayLike, in2: ArrayLike, mode: str = "full",
                axes: Sequence[int] | None = None) -> Array:
    """Convolution of two N-dimensional arrays through the FFT (``scipy.signal.fftconvolve``).

    Args:
      in1: the first input.
      in2: the second input, with ``in1``'s number of dimensions.
      mode: ``"full"`` (every overlap), ``"same"`` (centred, ``in1``'s shape) or ``"valid"``
        (only full overlaps).
      axes: the axes to convolve over (default all); along the others the two inputs must
        have equal lengths and are paired elementwise.

    Returns:
      The convolution, of the promoted inexact dtype.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.signal import fftconvolve
      >>> [round(float(v), 4) for v in fftconvolve(jnp.array([1., 2., 3.]), jnp.array([1., 1.]))]
      [1.0, 3.0, 5.0, 3.0]
    """
    in1, in2 = _inexact("fftconvolve", in1, in2)
    if in1.ndim != in2.ndim:
        raise ValueError(f"fftconvolve: in1 and in2 should have the same dimensionality; got "
                         f"{in1.ndim} and {in2.ndim}")
    _check_mode(mode)
    fn = lambda a, b: _fft_unbatched(a, b, mode)
    if axes is None:
        return fn(in1, in2)
    axes = (axes,) if isinstance(axes, int) else tuple(axes)
    axes = {canonicalize_axis(ax, in1.ndim) for ax in axes}
    mapped = [ax for ax in range(in1.ndim) if ax not in axes]
    if any(in1.shape[ax] != in2.shape[ax] for ax in mapped):
        raise ValueError(f"fftconvolve: mapped axes must have the same length; got "
                         f"in1.shape={in1.shape}, in2.shape={in2.shape}, axes={sorted(axes)}")
    for ax in mapped:
        fn = plax.vmap(fn, in_axes=ax, out_axes=ax)
    return fn(in1, in2)


def convolve(in1: ArrayLike, in2: ArrayLike, mode: str = "full", method: str = "auto",
             precision: Any = None) -> Array:
    """Convolution of two N-dimensional arrays (``scipy.signal.convolve``).

    Args:
      in1: the first input.
      in2: the second input, with ``in1``'s number of dimensions; one of the two must be at
        least as large as the other along every axis.
      mode: ``"full"``, ``"same"`` (centred, ``in1``'s shape) or ``"valid"``.
      method: ``"direct"`` (``lax.conv_general_dilated``), ``"fft"``, or ``"auto"``, which
        is ``"direct"`` as in JAX.
      precision: passed to ``lax.conv_general_dilated``.

    Returns:
      The convolution, of the promoted inexact dtype.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.signal import convolve
      >>> convolve(jnp.array([1., 2., 3.]), jnp.array([0., 1., 0.5]), mode="same")
      Array([1. , 2.5, 4. ], dtype=float32)
    """
    if method == "fft":
        return fftconvolve(in1, in2, mode=mode)
    if method not in ("auto", "direct"):
        raise ValueError(f"Got method={method!r}; expected 'auto', 'fft', or 'direct'.")
    in1, in2 = _inexact("convolve", in1, in2)
    return _direct("convolve", in1, in2, mode, precision)


def correlate(in1: ArrayLike, in2: ArrayLike, mode: str = "full", method: str = "auto",
              precision: Any = None) -> Array:
    """Cross-correlation of two N-dimensional arrays (``scipy.signal.correlate``): the
    convolution of ``in1`` with ``in2`` reversed and conjugated.

    Args:
      in1: the first input.
      in2: the second input, with ``in1``'s number of dimensions.
      mode: ``"full"``, ``"same"`` (centred, ``in1``'s shape) or ``"valid"``.
      method: ``"auto"``/``"direct"`` or ``"fft"``, as in :func:`convolve`.
      precision: passed to ``lax.conv_general_dilated``.

    Returns:
      The cross-correlation, of the promoted inexact dtype.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.signal import correlate
      >>> correlate(jnp.array([1., 2., 3.]), jnp.array([0., 1., 0.5]))
      Array([0.5, 2. , 3.5, 3. , 0. ], dtype=float32)
    """
    in1, in2 = _inexact("correlate", in1, in2)
    return convolve(in1, jnp.flip(jnp.conj(in2)), mode, method=method, precision=precision)


def _check_2d(name: str, in1: ArrayLike, in2: ArrayLike, boundary: str, fillvalue: Any) -> None:
    if boundary != "fill" or fillvalue != 0:
        raise NotImplementedError(f"{name}() only supports boundary='fill', fillvalue=0")
    if jnp.ndim(in1) != 2 or jnp.ndim(in2) != 2:
        raise ValueError(f"{name}() only supports 2-dimensional inputs; got "
                         f"{jnp.ndim(in1)} and {jnp.ndim(in2)} dimensions")


def convolve2d(in1: ArrayLike, in2: ArrayLike, mode: str = "full", boundary: str = "fill",
               fillvalue: Any = 0, precision: Any = None) -> Array:
    """Convolution of two 2-D arrays (``scipy.signal.convolve2d``, zero fill only).

    Args:
      in1: the first 2-D input.
      in2: the second 2-D input.
      mode: ``"full"``, ``"same"`` or ``"valid"``.
      boundary: only ``"fill"``.
      fillvalue: only 0.
      precision: passed to ``lax.conv_general_dilated``.

    Returns:
      The 2-D convolution.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.signal import convolve2d
      >>> convolve2d(jnp.ones((2, 2)), jnp.ones((2, 2))).tolist()
      [[1.0, 2.0, 1.0], [2.0, 4.0, 2.0], [1.0, 2.0, 1.0]]
    """
    _check_2d("convolve2d", in1, in2, boundary, fillvalue)
    in1, in2 = _inexact("convolve2d", in1, in2)
    return _direct("convolve2d", in1, in2, mode, precision)


def correlate2d(in1: ArrayLike, in2: ArrayLike, mode: str = "full", boundary: str = "fill",
                fillvalue: Any = 0, precision: Any = None) -> Array:
    """Cross-correlation of two 2-D arrays (``scipy.signal.correlate2d``, zero fill only).

    Args:
      in1: the first 2-D input.
      in2: the second 2-D input.
      mode: ``"full"``, ``"same"`` or ``"valid"`` (SciPy's orientation when ``in2`` is the
        larger input).
      boundary: only ``"fill"``.
      fillvalue: only 0.
      precision: passed to ``lax.conv_general_dilated``.

    Returns:
      The 2-D cross-correlation.

    Example:
      >>> import plax.numpy as jnp
      >>> from plax.scipy.signal import correlate2d
      >>> correlate2d(jnp.array([[1., 2.], [3., 4.]]), jnp.array([[1.]])).tolist()
      [[1.0, 2.0], [3.0, 4.0]]
    """
    _check_2d("correlate2d", in1, in2, boundary, fillvalue)
    in1, in2 = _inexact("correlate2d", in1, in2)
    swapped = all(a <= b for a, b in zip(in1.shape, in2.shape))
    if mode == "same":
        return jnp.flip(_direct("correlate2d", jnp.flip(in1), jnp.conj(in2), mode, precision))
    if mode == "valid" and swapped and in1.shape != in2.shape:
        return _direct("correlate2d", jnp.flip(in2), jnp.conj(in1), mode, precision)
    return _direct("correlate2d", in1, jnp.flip(jnp.conj(in2)), mode, precision)


def detrend(data: ArrayLike, axis: int = -1, type: str = "linear", bp: Any = 0,
            overwrite_data: None = None) -> Array:
    """Removes the mean (``type="constant"``) or the least-squares line (``"linear"``) from
    ``data`` along ``axis``, as :obj:`scipy.signal.detrend`.

    Args:
      data: the signal(s).
      axis: the axis along which to detrend.
      type: ``"linear"`` (default) or ``"constant"``.
      bp: ``"linear"`` only: static breakpoints; each segment between them gets its own line.
      overwrite_data: ignored (as in JAX).

    Returns:
      The detrended data (a float array).

    Raises:
      ValueError: for an unknown ``type`` or breakpoints outside the axis.

    Example:
      >>> from plax.scipy.signal import detrend
      >>> jnp.round(detrend(jnp.array([1.0, 2.0, 3.0, 5.0])), 4)
      Array([ 0.2, -0.1, -0.4,  0.3], dtype=float32)
    """
    import numpy as np
    from plax.numpy.util import promote_args_inexact
    if type not in ("linear", "l", "constant", "c"):
        raise ValueError(f"detrend: trend type must be 'linear' or 'constant', got {type!r}")
    data, = promote_args_inexact("detrend", data)
    x = jnp.moveaxis(data, axis, -1)
    n = x.shape[-1]
    if type in ("constant", "c"):
        return jnp.moveaxis(x - jnp.mean(x, axis=-1, keepdims=True), -1, axis)
    points = np.unique(np.concatenate([[0], np.atleast_1d(np.asarray(bp, dtype=np.int64)),
                                       [n]]))
    if points[0] < 0 or points[-1] > n:
        raise ValueError(f"detrend: breakpoints must lie within [0, {n}], got {bp!r}")
    pieces = []
    for lo, hi in zip(points[:-1], points[1:]):
        seg = x[..., lo:hi]
        m = hi - lo
        t = jnp.arange(m, dtype=seg.dtype) - (m - 1) / 2   # centred: slope and mean decouple
        denom = float(np.sum((np.arange(m) - (m - 1) / 2) ** 2)) or 1.0
        slope = jnp.sum(seg * t, axis=-1, keepdims=True) / denom
        pieces.append(seg - jnp.mean(seg, axis=-1, keepdims=True) - slope * t)
    out = jnp.concatenate(pieces, axis=-1) if len(pieces) > 1 else pieces[0]
    return jnp.moveaxis(out, -1, axis)
