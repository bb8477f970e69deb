"""plax.numpy.fft: NumPy's discrete Fourier transforms, on the ``fft`` primitive.

Every transform moves the requested axes to the end, crops or zero-pads them to the
requested sizes, binds :func:`plax.lax.fft` once and applies the ``norm`` scaling:

* ``"backward"`` (default): forward transforms unscaled, inverse ones scaled by ``1/n``;
* ``"ortho"``: both scaled by ``1/sqrt(n)``;
* ``"forward"``: forward transforms scaled by ``1/n``, inverse ones unscaled.

Result dtypes follow JAX: complex64 (complex128 with x64 from 64-bit inputs) for complex
results, float32/float64 for ``irfft`` and ``hfft``; ``rfft`` of a complex input and of a
float16/bfloat16 input raise ValueError, as in JAX.
"""
from __future__ import annotations

import math
import operator
from typing import Sequence

import numpy as np

from plax import dtypes
from plax import lax
from plax.core.trace import get_aval
from plax.lax.fft import FftType
from plax.lax.fft import fft as lax_fft
from plax.numpy.util import asarray_weak, canonicalize_axis, check_arraylike

__all__ = ["fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "rfft2", "irfft2", "fftn", "ifftn",
           "rfftn", "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]

_NORMS = (None, "backward", "ortho", "forward")
_SWAPPED = {None: "forward", "backward": "forward", "ortho": "ortho", "forward": "backward"}


def _check_norm(norm) -> None:
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or '
                         f'"forward".')


def _scale(x, fft_type: FftType, lengths: tuple, norm):
    """Applies the ``norm`` convention to a transform computed with lax's ("backward")."""
    if norm in (None, "backward"):
        return x
    n = float(math.prod(lengths))
    inverse = fft_type in (FftType.IFFT, FftType.IRFFT)
    if norm == "ortho":
        factor = math.sqrt(n) if inverse else 1.0 / math.sqrt(n) if n else 1.0
    else:  # "forward"
        factor = n if inverse else 1.0 / n if n else 1.0
    return lax.mul(x, lax.full((), factor, get_aval(x).dtype))


def _fftn_core(name: str, fft_type: FftType, a, s, axes, norm):
    full_name = f"jnp.fft.{name}"
    check_arraylike(full_name, a)
    _check_norm(norm)
    arr = asarray_weak(a)
    ndim = get_aval(arr).ndim
    if s is not None:
        s = tuple(operator.index(n) for n in s)  # a traced size raises a concretization error
        if any(n <= 0 for n in s):
            raise ValueError(f"Shape should be positive: {full_name} got s={s}.")
    if s is not None and axes is not None and len(s) != len(axes):
        raise ValueError(f"Shape and axes have different lengths: {full_name} got s={s} and "
                         f"axes={tuple(axes)}.")
    if axes is None:
        count = ndim if s is None else len(s)
        if count > ndim:
            raise ValueError(f"{full_name}: s={s} has more entries than the input has "
                             f"dimensions (shape {get_aval(arr).shape}).")
        axes = tuple(range(ndim - count, ndim))
    else:
        axes = tuple(canonicalize_axis(ax, ndim) for ax in axes)
    if len(set(axes)) != len(axes):
        raise ValueError(f"{full_name} does not support repeated axes. Got axes {axes}.")
    k = len(axes)
    # the transformed axes go last, in the order given
    perm = tuple(i for i in range(ndim) if i not in axes) + axes
    moved = lax.transpose(arr, perm) if perm != tuple(range(ndim)) else arr
    shape = get_aval(moved).shape
    if s is None:
        lengths = tuple(shape[ndim - k:])
        if fft_type == FftType.IRFFT and k:
            lengths = lengths[:-1] + (max(0, 2 * (lengths[-1] - 1)),)
    else:
        lengths = s
    if fft_type == FftType.RFFT and k and lengths[-1] == 0:
        raise ValueError(f"Invalid number of FFT data points (0) for {full_name} of an array "
                         f"of shape {get_aval(arr).shape} along axis {axes[-1]}.")
    # crop or zero-pad each transformed axis to the size the transform reads
    want = list(lengths)
    if fft_type == FftType.IRFFT and k:
        want[-1] = want[-1] // 2 + 1
    moved = _fit(moved, ndim - k, want)
    out = lax_fft(moved, fft_type, lengths)
    out = _scale(out, fft_type, lengths, norm)
    if perm != tuple(range(ndim)):
        out = lax.transpose(out, tuple(int(i) for i in np.argsort(perm)))
    return out


def _fit(x, first: int, sizes: Sequence[int]):
    """``x`` with axes ``first, first + 1, ...`` cropped or zero-padded to ``sizes``."""
    shape = get_aval(x).shape
    if tuple(shape[first:]) == tuple(sizes):
        return x
    limits = list(shape)
    for i, n in enumerate(sizes):
        limits[first + i] = min(n, shape[first + i])
    if tuple(limits) != tuple(shape):
        x = lax.slice(x, (0,) * len(shape), tuple(limits))
    pads = [(0, 0, 0)] * len(shape)
    for i, n in enumerate(sizes):
        pads[first + i] = (0, max(0, n - shape[first + i]), 0)
    if any(hi for _, hi, _ in pads):
        x = lax.pad(x, lax.full((), 0, get_aval(x).dtype), pads)
    return x


def _check_1d_axis(name: str, axis) -> None:
    if isinstance(axis, (list, tuple)):
        raise ValueError(f"jnp.fft.{name} does not support multiple axes. Please use "
                         f"jnp.fft.{name}n. Got axis = {axis!r}.")


def _fft_1d(name: str, fft_type: FftType, a, n, axis, norm):
    _check_1d_axis(name, axis)
    return _fftn_core(name, fft_type, a, None if n is None else (n,), (axis,), norm)


def _fft_2d(name: str, fft_type: FftType, a, s, axes, norm):
    if len(axes) != 2:
        raise ValueError(f"jnp.fft.{name} only supports 2 axes. Got axes = {axes!r}.")
    return _fftn_core(name, fft_type, a, s, axes, norm)


def fft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """One-dimensional discrete Fourier transform (``numpy.fft.fft``).

    Args:
      a: input array (real inputs are converted to complex).
      n: length of the transform: ``a`` is cropped or zero-padded along ``axis`` to ``n``
        (default: its length).
      axis: the axis to transform.
      norm: ``"backward"`` (default), ``"ortho"`` or ``"forward"``.

    Returns:
      The complex transform, ``n`` long along ``axis``.

    Example:
      >>> jnp.fft.fft(jnp.array([1.0, 2.0, 3.0, 4.0]))
      Array([10.+0.j, -2.+2.j, -2.+0.j, -2.-2.j], dtype=complex64)
    """
    return _fft_1d("fft", FftType.FFT, a, n, axis, norm)


def ifft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """One-dimensional inverse discrete Fourier transform (``numpy.fft.ifft``).

    Args and returns as :func:`fft`; with the default norm the result is scaled by ``1/n``.

    Example:
      >>> jnp.fft.ifft(jnp.array([10.0, -2.0 + 2.0j, -2.0, -2.0 - 2.0j]))
      Array([1.+0.j, 2.+0.j, 3.+0.j, 4.+0.j], dtype=complex64)
    """
    return _fft_1d("ifft", FftType.IFFT, a, n, axis, norm)


def rfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """Discrete Fourier transform of a real input, non-negative frequencies only
    (``numpy.fft.rfft``).

    Args:
      a: real input (complex raises ValueError).
      n: length of the transform (crop or zero-pad along ``axis``).
      axis: the axis to transform.
      norm: ``"backward"`` (default), ``"ortho"`` or ``"forward"``.

    Returns:
      The complex half spectrum, ``n // 2 + 1`` long along ``axis``.

    Example:
      >>> jnp.fft.rfft(jnp.array([1.0, 2.0, 3.0, 4.0]))
      Array([10.+0.j, -2.+2.j, -2.+0.j], dtype=complex64)
    """
    return _fft_1d("rfft", FftType.RFFT, a, n, axis, norm)


def irfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """Inverse of :func:`rfft`: a real signal from its half spectrum (``numpy.fft.irfft``).

    Args:
      a: the half spectrum.
      n: length of the output along ``axis`` (default ``2 * (m - 1)`` for ``m`` input
        values); the input is cropped or zero-padded to ``n // 2 + 1``.
      axis: the axis to transform.
      norm: ``"backward"`` (default), ``"ortho"`` or ``"forward"``.

    Returns:
      The real signal (float32, or float64 from complex128).

    Example:
      >>> jnp.fft.irfft(jnp.array([10.0, -2.0 + 2.0j, -2.0]))
      Array([1., 2., 3., 4.], dtype=float32)
    """
    return _fft_1d("irfft", FftType.IRFFT, a, n, axis, norm)


def hfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """Transform of a signal with Hermitian symmetry, given its first half: a real spectrum
    (``numpy.fft.hfft``).

    Args:
      a: the first half of the Hermitian-symmetric signal.
      n: length of the output (default ``2 * (m - 1)``).
      axis: the axis to transform.
      norm: ``"backward"`` (default), ``"ortho"`` or ``"forward"``.

    Returns:
      The real transform, ``n`` long along ``axis``.

    Example:
      >>> jnp.fft.hfft(jnp.array([1.0, 2.0, 3.0]))
      Array([ 8., -2.,  0., -2.], dtype=float32)
    """
    _check_1d_axis("hfft", axis)
    check_arraylike("jnp.fft.hfft", a)
    # hfft is irfft of the conjugate with the scaling conventions swapped
    arr = asarray_weak(a)
    cdt = dtypes.complex_dtype_for(dtypes.to_inexact_dtype(get_aval(arr).dtype))
    conj_a = lax.conj(lax.convert_element_type(arr, cdt))
    return _fftn_core("hfft", FftType.IRFFT, conj_a, None if n is None else (n,), (axis,),
                      _SWAPPED[norm] if norm in _NORMS else norm)


def ihfft(a, n: int | None = None, axis: int = -1, norm: str | None = None):
    """Inverse of :func:`hfft`: the half spectrum of a real signal, conjugated and scaled
    (``numpy.fft.ihfft``).

    Args:
      a: real input.
      n: length of the transform (crop or zero-pad along ``axis``).
      axis: the axis to transform.
      norm: ``"backward"`` (default), ``"ortho"`` or ``"forward"``.

    Returns:
      The complex result, ``n // 2 + 1`` long along ``axis``.

    Example:
      >>> jnp.fft.ihfft(jnp.array([8.0, -2.0, 0.0, -2.0]))
      Array([1.-0.j, 2.-0.j, 3.-0.j], dtype=complex64)
    """
    _check_1d_axis("ihfft", axis)
    out = _fftn_core("ihfft", FftType.RFFT, a, None if n is None else (n,), (axis,),
                     _SWAPPED[norm] if norm in _NORMS else norm)
    return lax.conj(out)


def fft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
         norm: str | None = None):
    """Two-dimensional discrete Fourier transform (``numpy.fft.fft2``): :func:`fftn` over two
    axes.

    Example:
      >>> jnp.fft.fft2(jnp.ones((2, 2)))
      Array([[4.+0.j, 0.+0.j],
             [0.+0.j, 0.+0.j]], dtype=complex64)
    """
    return _fft_2d("fft2", FftType.FFT, a, s, axes, norm)


def ifft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None):
    """Two-dimensional inverse transform (``numpy.fft.ifft2``): :func:`ifftn` over two axes.

    Example:
      >>> jnp.fft.ifft2(jnp.array([[4.0, 0.0], [0.0, 0.0]]))
      Array([[1.+0.j, 1.+0.j],
             [1.+0.j, 1.+0.j]], dtype=complex64)
    """
    return _fft_2d("ifft2", FftType.IFFT, a, s, axes, norm)


def rfft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
          norm: str | None = None):
    """Two-dimensional transform of a real input (``numpy.fft.rfft2``): :func:`rfftn` over
    two axes.

    Example:
      >>> jnp.fft.rfft2(jnp.ones((2, 2)))
      Array([[4.+0.j, 0.+0.j],
             [0.+0.j, 0.+0.j]], dtype=complex64)
    """
    return _fft_2d("rfft2", FftType.RFFT, a, s, axes, norm)


def irfft2(a, s: Sequence[int] | None = None, axes: Sequence[int] = (-2, -1),
           norm: str | None = None):
    """Inverse of :func:`rfft2` (``numpy.fft.irfft2``): :func:`irfftn` over two axes.

    Example:
      >>> jnp.fft.irfft2(jnp.array([[4.0, 0.0], [0.0, 0.0]]))
      Array([[1., 1.],
             [1., 1.]], dtype=float32)
    """
    return _fft_2d("irfft2", FftType.IRFFT, a, s, axes, norm)


def fftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str | None = None):
    """N-dimensional discrete Fourier transform (``numpy.fft.fftn``).

    Args:
      a: input array (real inputs are converted to complex).
      s: the transform's size along each of ``axes`` (crop or zero-pad); default: the sizes
        of ``a``.
      axes: the axes to transform; default: the last ``len(s)`` axes, or all.
      norm: ``"backward"`` (default), ``"ortho"`` or ``"forward"``.

    Returns:
      The complex transform.

    Example:
      >>> jnp.fft.fftn(jnp.ones((2, 3)), s=(2, 2))
      Array([[4.+0.j, 0.+0.j],
             [0.+0.j, 0.+0.j]], dtype=complex64)
    """
    return _fftn_core("fftn", FftType.FFT, a, s, axes, norm)


def ifftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None):
    """N-dimensional inverse discrete Fourier transform (``numpy.fft.ifftn``); arguments as
    :func:`fftn`.

    Example:
      >>> jnp.fft.ifftn(jnp.array([[4.0, 0.0], [0.0, 0.0]]))
      Array([[1.+0.j, 1.+0.j],
             [1.+0.j, 1.+0.j]], dtype=complex64)
    """
    return _fftn_core("ifftn", FftType.IFFT, a, s, axes, norm)


def rfftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str | None = None):
    """N-dimensional transform of a real input (``numpy.fft.rfftn``): the last of ``axes``
    keeps ``s[-1] // 2 + 1`` frequencies; arguments as :func:`fftn`.

    Example:
      >>> jnp.fft.rfftn(jnp.ones((2, 4))).shape
      (2, 3)
    """
    return _fftn_core("rfftn", FftType.RFFT, a, s, axes, norm)


def irfftn(a, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str | None = None):
    """Inverse of :func:`rfftn` (``numpy.fft.irfftn``): the last of ``axes`` is read as a half
    spectrum, giving ``s[-1]`` real values (default ``2 * (m - 1)``).

    Example:
      >>> jnp.fft.irfftn(jnp.fft.rfftn(jnp.ones((2, 4)))).shape
      (2, 4)
    """
    return _fftn_core("irfftn", FftType.IRFFT, a, s, axes, norm)


def _freq_args(name: str, n, d):
    if isinstance(n, (list, tuple)):
        raise ValueError(f"The n argument of jnp.fft.{name} only takes an int. Got "
                         f"n = {list(n)}.")
    if isinstance(d, (list, tuple)):
        raise ValueError(f"The d argument of jnp.fft.{name} only takes a single value. "
                         f"Got d = {list(d)}.")
    try:
        return operator.index(n)
    except TypeError:
        raise TypeError(f"The n argument of jnp.fft.{name} must be an integer, got "
                        f"{n!r}") from None


def fftfreq(n: int, d=1.0, *, dtype=None, device=None):
    """Sample frequencies of :func:`fft`: ``[0, 1, ..., n//2 - 1 (or n//2), -n//2, ..., -1]
    / (d * n)`` (``numpy.fft.fftfreq``).

    Args:
      n: the transform length.
      d: the sample spacing.
      dtype: the result dtype (default float32, float64 with x64).
      device: where to place the result.

    Returns:
      The ``n`` frequencies.

    Example:
      >>> jnp.fft.fftfreq(4)
      Array([ 0.  ,  0.25, -0.5 , -0.25], dtype=float32)
    """
    n = _freq_args("fftfreq", n, d)
    k = np.concatenate([np.arange(0, (n - 1) // 2 + 1), np.arange(-(n // 2), 0)])
    out_dtype = dtypes.canonicalize_dtype(dtype if dtype is not None
                                          else dtypes.default_float_dtype())
    # computed in the real inexact type, then cast (an integer dtype truncates, as in JAX)
    work = dtypes.real_dtype(dtypes.to_inexact_dtype(out_dtype))
    return lax.convert_element_type(_freqs(k, n, d, work, device), out_dtype)


def rfftfreq(n: int, d=1.0, *, dtype=None, device=None):
    """Sample frequencies of :func:`rfft`: ``[0, 1, ..., n//2] / (d * n)``
    (``numpy.fft.rfftfreq``).

    Args: as :func:`fftfreq`.

    Returns:
      The ``n // 2 + 1`` non-negative frequencies.

    Example:
      >>> jnp.fft.rfftfreq(4)
      Array([0.  , 0.25, 0.5 ], dtype=float32)
    """
    n = _freq_args("rfftfreq", n, d)
    # as in JAX, the result is inexact even for an integer dtype (a true division)
    work = dtypes.to_inexact_dtype(dtypes.canonicalize_dtype(
        dtype if dtype is not None else dtypes.default_float_dtype()))
    return _freqs(np.arange(0, n // 2 + 1), n, d, work, device)


def _freqs(k: np.ndarray, n: int, d, work: np.dtype, device):
    """``k / (d * n)`` in dtype ``work`` (``d`` may be an array, traced or not)."""
    from plax.array import from_host
    ks = from_host(k.astype(work), device=device, committed=device is not None, dtype=work)
    if isinstance(d, (int, float, np.number)):
        denom = lax.full((), d * n, work)
    else:
        denom = lax.mul(lax.convert_element_type(asarray_weak(d), work), lax.full((), n, work))
    return lax.div(ks, denom)


def _shifts(name: str, x, axes, sign: int):
    check_arraylike(f"jnp.fft.{name}", x)
    from plax.numpy.shape_ops import roll
    x = asarray_weak(x)
    shape = get_aval(x).shape
    if axes is None:
        axes = tuple(range(len(shape)))
    elif isinstance(axes, int):
        axes = (axes,)
    axes = tuple(canonicalize_axis(ax, len(shape)) for ax in axes)
    if not axes:
        return x
    return roll(x, tuple(sign * (shape[ax] // 2) for ax in axes), axes)


def fftshift(x, axes: int | Sequence[int] | None = None):
    """Moves the zero frequency to the centre: rolls each of ``axes`` (default all) by half its
    length (``numpy.fft.fftshift``).

    Example:
      >>> jnp.fft.fftshift(jnp.fft.fftfreq(4))
      Array([-0.5 , -0.25,  0.  ,  0.25], dtype=float32)
    """
    return _shifts("fftshift", x, axes, 1)


def ifftshift(x, axes: int | Sequence[int] | None = None):
    """Inverse of :func:`fftshift` (``numpy.fft.ifftshift``): rolls each of ``axes`` back by
    half its length.

    Example:
      >>> jnp.fft.ifftshift(jnp.array([-0.5, -0.25, 0.0, 0.25]))
      Array([ 0.  ,  0.25, -0.5 , -0.25], dtype=float32)
    """
    return _shifts("ifftshift", x, axes, -1)
