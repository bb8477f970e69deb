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

__all__ = ["convolve", "correlate", "fftconvolve", "convolve2d", "correlate2d", "detrend", "csd",
           "welch", "stft", "istft"]

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


# ------------------------------------------------------------------ spectral analysis

def _window(window: Any, nperseg: int, dtype) -> Array:
    """A periodic ("DFT-even") window of length ``nperseg``, as scipy.signal.get_window gives
    for spectral analysis; an array is used as given."""
    import numpy as np
    if not isinstance(window, (str, tuple)):
        win = jnp.asarray(window)
        if win.ndim != 1 or win.shape[0] != nperseg:
            raise ValueError(f"window must be 1-D of length nperseg={nperseg}, got shape "
                             f"{win.shape}")
        return win.astype(dtype)
    name = window if isinstance(window, str) else window[0]
    n = np.arange(nperseg)
    m = nperseg  # periodic: the symmetric window of length nperseg + 1, last point dropped
    cosines = {"hann": (0.5, 0.5), "hanning": (0.5, 0.5), "hamming": (0.54, 0.46)}
    if isinstance(window, str) and name in cosines:
        a0, a1 = cosines[name]
        w = a0 - a1 * np.cos(2 * np.pi * n / m)
    elif isinstance(window, str) and name == "blackman":
        w = 0.42 - 0.5 * np.cos(2 * np.pi * n / m) + 0.08 * np.cos(4 * np.pi * n / m)
    elif isinstance(window, str) and name in ("boxcar", "box", "ones", "rect", "rectangular"):
        w = np.ones(nperseg)
    elif isinstance(window, str) and name in ("bartlett", "triangle", "barthann") and \
            name == "bartlett":
        w = 1 - np.abs(2 * n / m - 1)
    else:
        try:
            from scipy.signal import get_window  # other windows: SciPy's table, if installed
        except ImportError:
            raise ValueError(f"window {window!r} needs SciPy (plax knows hann, hamming, "
                             "blackman, boxcar and bartlett itself)") from None
        w = get_window(window, nperseg)
    if nperseg == 1:
        w = np.ones(1)
    return jnp.asarray(w, dtype=dtype)


def _segments(x: Array, nperseg: int, noverlap: int) -> Array:
    """``x`` (signal on the last axis) cut into overlapping segments: ``(..., nseg, nperseg)``."""
    import numpy as np
    step = nperseg - noverlap
    nseg = (x.shape[-1] - noverlap) // step
    idx = np.arange(nseg)[:, None] * step + np.arange(nperseg)[None, :]
    return x[..., idx]


def _detrend_segments(seg: Array, detrend: Any) -> Array:
    if detrend is False or detrend is None:
        return seg
    if callable(detrend):
        return detrend(seg)
    return globals()["detrend"](seg, axis=-1, type=detrend)


def _spectral(x: Array, y: Array, fs, window, nperseg, noverlap, nfft, detrend_type,
              return_onesided, scaling, mode, name):
    """The windowed, detrended segment spectra shared by csd, welch and stft: returns
    ``(freqs, spectra (..., freqs, segments), nperseg, noverlap)``."""
    import numpy as np
    if scaling not in ("density", "spectrum"):
        raise ValueError(f"{name}: unknown scaling {scaling!r}")
    win = _window(window, nperseg, jnp.finfo(x.dtype).dtype
                  if jnp.issubdtype(x.dtype, jnp.complexfloating) else x.dtype)
    nfft = nperseg if nfft is None else int(nfft)
    if nfft < nperseg:
        raise ValueError(f"{name}: nfft must be at least nperseg")
    if scaling == "density":
        scale = 1.0 / (fs * jnp.sum(win * win))
    else:
        scale = 1.0 / jnp.sum(win) ** 2
    if mode == "stft":
        scale = jnp.sqrt(scale)
    complex_in = jnp.issubdtype(x.dtype, jnp.complexfloating) or (
        y is not None and jnp.issubdtype(y.dtype, jnp.complexfloating))
    onesided = return_onesided and not complex_in

    def transform(sig):
        seg = _detrend_segments(_segments(sig, nperseg, noverlap), detrend_type) * win
        if onesided:
            return jnp.fft.rfft(seg, n=nfft, axis=-1)
        return jnp.fft.fft(seg, n=nfft, axis=-1)

    fx = transform(x)
    if mode == "stft":
        spec = fx * scale
    else:
        spec = jnp.conj(fx) * transform(y) * scale
        if onesided:
            # fold the negative frequencies in: double all but DC (and Nyquist for even nfft)
            last = -1 if nfft % 2 == 0 else None
            inner = spec[..., 1:last] * 2
            spec = jnp.concatenate([spec[..., :1], inner] + ([spec[..., -1:]] if last else []),
                                   axis=-1)
    freqs = (np.fft.rfftfreq(nfft, 1 / fs) if onesided else np.fft.fftfreq(nfft, 1 / fs))
    return jnp.asarray(freqs, dtype=jnp.finfo(spec.dtype).dtype), jnp.swapaxes(spec, -1, -2)


def _nperseg(n: int, nperseg, noverlap, default: int) -> tuple:
    nperseg = min(default, n) if nperseg is None else int(nperseg)
    if nperseg > n:
        nperseg = n
    if nperseg < 1:
        raise ValueError("nperseg must be a positive integer")
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    return nperseg, noverlap


def csd(x: ArrayLike, y: ArrayLike, fs: ArrayLike = 1.0, window: Any = "hann",
        nperseg: int | None = None, noverlap: int | None = None, nfft: int | None = None,
        detrend: Any = "constant", return_onesided: bool = True, scaling: str = "density",
        axis: int = -1, average: str = "mean") -> tuple:
    """The cross power spectral density of ``x`` and ``y`` by Welch's method: averaged
    ``conj(X) Y`` over windowed, detrended, overlapping segments (as
    :obj:`scipy.signal.csd`).

    Args:
      x, y: signals along ``axis`` (broadcast together; ``y=None`` means ``x``).
      fs: the sampling frequency.
      window: ``"hann"`` (default), ``"hamming"``, ``"blackman"``, ``"boxcar"``,
        ``"bartlett"``, another SciPy window name (needs SciPy) or an array.
      nperseg: segment length (default 256, at most the signal's length).
      noverlap: overlap (default ``nperseg // 2``).
      nfft: FFT length (default ``nperseg``).
      detrend: ``"constant"``, ``"linear"``, False or a function of a segment.
      return_onesided: one-sided spectrum for real data.
      scaling: ``"density"`` (V**2/Hz) or ``"spectrum"`` (V**2).
      axis: the time axis.
      average: ``"mean"`` or ``"median"`` (bias-corrected, as SciPy).

    Returns:
      ``(freqs, Pxy)``.

    Example:
      >>> from plax.scipy.signal import csd
      >>> f, p = csd(jnp.ones(16), jnp.ones(16), nperseg=8)
      >>> f.shape, p.shape
      ((5,), (5,))
    """
    import numpy as np
    x = jnp.asarray(x)
    same = y is None
    y = x if same else jnp.asarray(y)
    dt = jnp.result_type(x, y, float) if not jnp.issubdtype(jnp.result_type(x, y), jnp.inexact) \
        else jnp.result_type(x, y)
    x, y = x.astype(dt), y.astype(dt)
    x, y = jnp.moveaxis(x, axis, -1), jnp.moveaxis(y, axis, -1)
    if not same:
        batch = np.broadcast_shapes(x.shape[:-1], y.shape[:-1])
        n = max(x.shape[-1], y.shape[-1])
        # the shorter signal is zero-padded to the longer one's length (as SciPy)
        x = jnp.broadcast_to(jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, n - x.shape[-1])]),
                             batch + (n,))
        y = jnp.broadcast_to(jnp.pad(y, [(0, 0)] * (y.ndim - 1) + [(0, n - y.shape[-1])]),
                             batch + (n,))
    nperseg, noverlap = _nperseg(x.shape[-1], nperseg, noverlap, 256)
    freqs, spec = _spectral(x, y, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                            scaling, "psd", "csd")
    if spec.shape[-1] > 1:
        if average == "median":
            # the median of k chi-square(2) values underestimates their mean by this factor
            k = spec.shape[-1]
            evens = 2 * np.arange(1.0, (k - 1) // 2 + 1)
            bias = float(1 + np.sum(1.0 / (evens + 1) - 1.0 / evens))
            if jnp.issubdtype(spec.dtype, jnp.complexfloating):
                spec = (jnp.median(jnp.real(spec), axis=-1)
                        + 1j * jnp.median(jnp.imag(spec), axis=-1)) / bias
            else:
                spec = jnp.median(spec, axis=-1) / bias
        elif average == "mean":
            spec = jnp.mean(spec, axis=-1)
        else:
            raise ValueError(f"average must be 'median' or 'mean', got {average!r}")
    else:
        spec = spec[..., 0]
    return freqs, jnp.moveaxis(spec, -1, axis) if spec.ndim > 1 else spec


def welch(x: ArrayLike, fs: ArrayLike = 1.0, window: Any = "hann", nperseg: int | None = None,
          noverlap: int | None = None, nfft: int | None = None, detrend: Any = "constant",
          return_onesided: bool = True, scaling: str = "density", axis: int = -1,
          average: str = "mean") -> tuple:
    """The power spectral density of ``x`` by Welch's method (as :obj:`scipy.signal.welch`):
    :func:`csd` of ``x`` with itself, real.

    Example:
      >>> from plax.scipy.signal import welch
      >>> f, p = welch(jnp.sin(jnp.arange(64.0)), nperseg=16)
      >>> int(jnp.argmax(p))   # 1 rad/sample is 16/(2 pi) ~ 2.5 bins of 1/16
      3
    """
    freqs, pxx = csd(x, None, fs, window, nperseg, noverlap, nfft, detrend, return_onesided,
                     scaling, axis, average)
    return freqs, jnp.real(pxx)


def stft(x: ArrayLike, fs: ArrayLike = 1.0, window: Any = "hann", nperseg: int = 256,
         noverlap: int | None = None, nfft: int | None = None, detrend: Any = False,
         return_onesided: bool = True, boundary: str | None = "zeros", padded: bool = True,
         axis: int = -1) -> tuple:
    """The short-time Fourier transform (as :obj:`scipy.signal.stft`).

    Args:
      x: the signal along ``axis``.
      fs, window, nperseg, noverlap, nfft, detrend, return_onesided: as in :func:`csd`
        (``nperseg`` defaults to 256; spectra are scaled by ``1 / sum(window)``).
      boundary: extend the signal by ``nperseg // 2`` samples at both ends: ``"zeros"``,
        ``"even"``, ``"odd"``, ``"constant"`` or None.
      padded: zero-pad the end so the last segment is whole.
      axis: the time axis.

    Returns:
      ``(freqs, times, Zxx)``: ``Zxx`` has the frequency and segment axes last.

    Example:
      >>> from plax.scipy.signal import stft
      >>> f, t, z = stft(jnp.ones(32), nperseg=8)
      >>> z.shape
      (5, 9)
    """
    import numpy as np
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.inexact):
        x = x.astype(jnp.result_type(float))
    x = jnp.moveaxis(x, axis, -1)
    nperseg, noverlap = _nperseg(x.shape[-1], nperseg, noverlap, nperseg)
    if boundary is not None:
        half = nperseg // 2
        pad = [(0, 0)] * (x.ndim - 1) + [(half, half)]
        if boundary == "zeros":
            x = jnp.pad(x, pad)
        elif boundary == "constant":
            x = jnp.pad(x, pad, mode="edge")
        elif boundary == "even":
            x = jnp.pad(x, pad, mode="reflect")
        elif boundary == "odd":
            # odd extension: points reflected through the end values
            left = 2 * x[..., :1] - jnp.flip(x[..., 1:half + 1], -1)
            right = 2 * x[..., -1:] - jnp.flip(x[..., -half - 1:-1], -1)
            x = jnp.concatenate([left, x, right], axis=-1)
        else:
            raise ValueError(f"stft: unknown boundary option {boundary!r}")
    if padded:
        step = nperseg - noverlap
        extra = (-(x.shape[-1] - nperseg) % step) % nperseg
        x = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, extra)])
    freqs, spec = _spectral(x, None, fs, window, nperseg, noverlap, nfft, detrend,
                            return_onesided, "spectrum", "stft", "stft")
    step = nperseg - noverlap
    times = np.arange(nperseg / 2, x.shape[-1] - nperseg / 2 + 1, step) / fs
    if boundary is not None:
        times = times - (nperseg / 2) / fs
    times = jnp.asarray(times[:spec.shape[-1]], dtype=jnp.finfo(spec.dtype).dtype)
    # frequency and segment axes last, the time axis's position given to them (as SciPy)
    if axis not in (-1, x.ndim - 1):
        spec = jnp.moveaxis(spec, (-2, -1), (axis if axis >= 0 else axis - 1, -1))
    return freqs, times, spec


def istft(Zxx: ArrayLike, fs: ArrayLike = 1.0, window: Any = "hann", nperseg: int | None = None,
          noverlap: int | None = None, nfft: int | None = None, input_onesided: bool = True,
          boundary: bool = True, time_axis: int = -1, freq_axis: int = -2) -> tuple:
    """The inverse short-time Fourier transform (as :obj:`scipy.signal.istft`): inverse FFT of
    each segment, windowed overlap-add, normalised by the summed squared window.

    Args:
      Zxx: the STFT, with frequency axis ``freq_axis`` and segment axis ``time_axis``.
      fs, window, nperseg, noverlap, nfft: as given to :func:`stft` (``nperseg`` defaults to
        the length implied by the frequency axis).
      input_onesided: ``Zxx`` holds a one-sided spectrum.
      boundary: remove the ``nperseg // 2`` samples :func:`stft` added at each end.

    Returns:
      ``(times, x)``.

    Example:
      >>> from plax.scipy.signal import istft, stft
      >>> x = jnp.arange(16.0)
      >>> _, _, z = stft(x, nperseg=8)
      >>> _, y = istft(z, nperseg=8)
      >>> bool(jnp.allclose(y[:16], x, atol=1e-4))
      True
    """
    import numpy as np
    z = jnp.asarray(Zxx)
    if not jnp.issubdtype(z.dtype, jnp.complexfloating):
        z = z.astype(jnp.result_type(z.dtype, jnp.complex64))
    nd = z.ndim
    z = jnp.moveaxis(z, (freq_axis % nd, time_axis % nd), (nd - 2, nd - 1))
    nfreq, nseg = z.shape[-2], z.shape[-1]
    if nperseg is None:
        nperseg = 2 * (nfreq - 1) if input_onesided else nfreq
    nperseg = int(nperseg)
    nfft = nperseg if nfft is None else int(nfft)
    noverlap = nperseg // 2 if noverlap is None else int(noverlap)
    if noverlap >= nperseg:
        raise ValueError("noverlap must be less than nperseg.")
    step = nperseg - noverlap
    real_dtype = jnp.finfo(z.dtype).dtype
    win = _window(window, nperseg, real_dtype)
    spec = jnp.swapaxes(z, -1, -2)                      # (..., segments, freqs)
    if input_onesided:
        segs = jnp.fft.irfft(spec, n=nfft, axis=-1)[..., :nperseg]
    else:
        segs = jnp.fft.ifft(spec, n=nfft, axis=-1)[..., :nperseg]
    segs = segs * jnp.sum(win) * win                    # undo stft's 1/sum(win), window again
    length = nperseg + (nseg - 1) * step
    # overlap-add as one scatter-add of every segment sample to its output position
    pos = (np.arange(nseg)[:, None] * step + np.arange(nperseg)[None, :]).ravel()
    flat = segs.reshape(segs.shape[:-2] + (nseg * nperseg,))
    out = jnp.zeros(segs.shape[:-2] + (length,), segs.dtype).at[..., pos].add(flat)
    norm = np.zeros(length)
    np.add.at(norm, pos, np.tile(np.asarray(win, dtype=np.float64) ** 2, nseg))
    if boundary:
        half = nperseg // 2
        out, norm = out[..., half:length - half], norm[half:length - half]
    norm_safe = np.where(norm > 1e-10, norm, 1.0)
    out = out / jnp.asarray(norm_safe, dtype=real_dtype)
    times = jnp.asarray(np.arange(out.shape[-1]) / fs, dtype=real_dtype)
    return times, out
