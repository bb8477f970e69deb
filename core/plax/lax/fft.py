"""The ``fft`` primitive: discrete Fourier transforms over the trailing axes of an array.

One primitive covers four transforms, chosen by ``fft_type`` (a :class:`FftType`), over the
last ``len(fft_lengths)`` axes:

* ``FFT`` / ``IFFT``: complex to complex, forward (unnormalised) and inverse (scaled by
  ``1 / prod(fft_lengths)``);
* ``RFFT``: real to complex; the last axis keeps the ``n // 2 + 1`` non-negative frequencies;
* ``IRFFT``: the inverse of ``RFFT``, complex (half spectrum) to real.

All four are linear, so the JVP applies the primitive to the tangent. The transposes of the
complex transforms are the transforms themselves (the DFT matrix is symmetric). The real ones
need the Hermitian weighting: ``RFFT`` stores each frequency pair ``k, n - k`` once, so the
terms other than the zero and Nyquist frequencies count twice in ``IRFFT``.
"""
from __future__ import annotations

import enum
import math
import operator
from typing import Sequence

import numpy as np

from plax import dtypes
from plax.core.primitive import Primitive
from plax.core.registry import register_rule
from plax.core.shaped_array import ShapedArray
from plax.lax.base import COMPLEX, asarray, aval_of, check_dtype
from plax.transforms.jvp import Zero, deflinear


class FftType(enum.IntEnum):
    """Which transform the ``fft`` primitive computes."""

    FFT = 0    # complex -> complex, forward
    IFFT = 1   # complex -> complex, inverse
    RFFT = 2   # real -> complex (half spectrum), forward
    IRFFT = 3  # complex (half spectrum) -> real, inverse


_BY_NAME = {t.name: t for t in FftType}

fft_p = Primitive("fft")


def _check_lengths(x: ShapedArray, fft_lengths: tuple) -> int:
    """The number of transformed axes, after checking ``fft_lengths`` against ``x``."""
    k = len(fft_lengths)
    if k == 0:
        raise ValueError("the fft primitive needs at least one fft_length (lax.fft with "
                         "fft_lengths=() returns its converted operand without binding it).")
    if any(n < 0 for n in fft_lengths):
        raise ValueError(f"fft_lengths must be non-negative, got {fft_lengths}")
    if k > x.ndim:
        raise ValueError(f"FFT input shape {x.shape} must have at least as many input "
                         f"dimensions as fft_lengths {fft_lengths}.")
    return k


@fft_p.def_abstract_eval
def _fft_abstract_eval(x, *, fft_type, fft_lengths):
    fft_type = FftType(fft_type)
    k = _check_lengths(x, fft_lengths)
    lead, minor = x.shape[:-k], x.shape[-k:]
    if fft_type == FftType.RFFT:
        if x.dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise TypeError(f"fft (RFFT) does not accept dtype {x.dtype.name} for its operand; "
                            f"it accepts float32 and float64.")
        if minor != fft_lengths:
            raise ValueError(f"RFFT input shape {x.shape} minor dimensions must be equal to "
                             f"fft_lengths {fft_lengths}")
        shape = lead + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
        return ShapedArray(shape, dtypes.complex_dtype_for(x.dtype), x.weak_type)
    check_dtype(f"fft ({fft_type.name})", x, (COMPLEX,))
    if fft_type == FftType.IRFFT:
        want = fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
        if minor != want:
            raise ValueError(f"IRFFT input shape {x.shape} minor dimensions must be {want}: "
                             f"all but the last of fft_lengths {fft_lengths}, then "
                             f"fft_lengths[-1] // 2 + 1")
        return ShapedArray(lead + fft_lengths, dtypes.real_dtype(x.dtype), x.weak_type)
    if minor != fft_lengths:
        raise ValueError(f"{fft_type.name} input shape {x.shape} minor dimensions must be "
                         f"equal to fft_lengths {fft_lengths}")
    return ShapedArray(x.shape, x.dtype, x.weak_type)


def fft_result_shape_dtype(shape: Sequence[int], dtype, fft_type, fft_lengths: Sequence[int]):
    """The shape and dtype of :data:`fft_p`'s result, for a backend's kernel (the abstract
    evaluation, on a shape and dtype rather than an abstract value).

    Args:
      shape, dtype: the operand's.
      fft_type: an :class:`FftType` (or its value).
      fft_lengths: the primitive's parameter.

    Returns:
      ``(shape, dtype)`` of the result: ``RFFT`` halves the last length (plus one) and gives
      the complex type, ``IRFFT`` gives ``fft_lengths`` and the real type.

    Example:
      >>> fft_result_shape_dtype((3, 8), np.float32, FftType.RFFT, (8,))
      ((3, 5), dtype('complex64'))
    """
    out = _fft_abstract_eval(ShapedArray(tuple(shape), np.dtype(dtype)), fft_type=fft_type,
                             fft_lengths=tuple(fft_lengths))
    return out.shape, out.dtype


def _fft_type(fft_type) -> FftType:
    if isinstance(fft_type, FftType):
        return fft_type
    if isinstance(fft_type, str):
        try:
            return _BY_NAME[fft_type.upper()]
        except KeyError:
            raise ValueError(f"Unknown FFT type {fft_type!r}; expected one of "
                             f"{', '.join(_BY_NAME)}") from None
    raise TypeError(f"Unknown FFT type value {fft_type!r}; pass an lax.FftType or its name")


def fft(x, fft_type: FftType | str, fft_lengths: Sequence[int]):
    """Discrete Fourier transform of the last ``len(fft_lengths)`` axes of ``x``.

    Args:
      x: the operand. ``RFFT`` takes real values (integers become floats); the other types
        take complex values (real inputs are converted).
      fft_type: a :class:`FftType` or its name (``"FFT"``, ``"ifft"``, ...).
      fft_lengths: the transform's sizes: equal to the trailing axes of ``x``, except for
        ``IRFFT``, whose last length ``n`` reads ``n // 2 + 1`` input values.

    Returns:
      The transform: complex for ``FFT``, ``IFFT`` and ``RFFT`` (last axis ``n // 2 + 1``
      for ``RFFT``), real for ``IRFFT``.

    Raises:
      ValueError: complex input to ``RFFT``, a float16/bfloat16 ``RFFT`` input, or trailing
        axes that do not match ``fft_lengths``.

    Example:
      >>> lax.fft(jnp.array([1.0, 0.0, 0.0, 0.0]), "RFFT", (4,))
      Array([1.+0.j, 1.+0.j, 1.+0.j], dtype=complex64)
    """
    typ = _fft_type(fft_type)
    x = asarray(x)
    dt = aval_of(x).dtype
    from plax.lax.convert import convert_element_type
    if typ == FftType.RFFT:
        if dtypes.is_complex(dt):
            raise ValueError("only real valued inputs supported for rfft")
        x = convert_element_type(x, dtypes.to_inexact_dtype(dt))
        if aval_of(x).dtype.itemsize == 2:
            raise ValueError(f"RFFT input must be float32 or float64, got {aval_of(x).dtype.name}")
    else:
        x = convert_element_type(x, dtypes.complex_dtype_for(dtypes.to_inexact_dtype(dt)))
    lengths = tuple(operator.index(n) for n in fft_lengths)
    if not lengths:
        return x
    return fft_p.bind(x, fft_type=typ, fft_lengths=lengths)


# ------------------------------------------------------------------ transpose

def _weighted(spec, fft_lengths: tuple, invert: bool):
    """``spec`` (a half spectrum) times its Hermitian weights along the last axis, divided by
    ``prod(fft_lengths)``; with ``invert``, divided by the weights and times the size.

    The weight is 1 for the zero frequency (and Nyquist, for even lengths) and 2 for the
    others, each of which stands for itself and its mirror image ``n - k``.
    """
    from plax.lax.shape import broadcast_in_dim
    n = fft_lengths[-1]
    w = np.full(n // 2 + 1, 2.0)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    size = float(math.prod(fft_lengths)) or 1.0  # an empty transform's cotangent is empty
    factor = size / w if invert else w / size
    aval = aval_of(spec)
    factor = broadcast_in_dim(asarray(factor.astype(aval.dtype)), aval.shape, (aval.ndim - 1,))
    import plax.lax.binary as B
    return B.mul(spec, factor)


def _fft_transpose(ct, x, *, fft_type, fft_lengths):
    from plax.lax.unary import conj
    if type(ct) is Zero:
        return [None]
    fft_type = FftType(fft_type)
    if fft_type == FftType.RFFT:
        # x_j = Re(sum_k c_k e^{-2 pi i jk/n}) = size * irfft(conj(c) / w)_j for the half
        # spectrum c (irfft counts each non-edge frequency twice)
        scaled = _weighted(conj(ct), fft_lengths, invert=True)
        return [fft_p.bind(scaled, fft_type=FftType.IRFFT, fft_lengths=fft_lengths)]
    if fft_type == FftType.IRFFT:
        # irfft(y)_j = Re(sum_k w_k y_k e^{2 pi i jk/n}) / size, whose transpose is
        # conj(w * rfft(ct)) / size
        spec = fft_p.bind(ct, fft_type=FftType.RFFT, fft_lengths=fft_lengths)
        return [conj(_weighted(spec, fft_lengths, invert=False))]
    return [fft_p.bind(ct, fft_type=fft_type, fft_lengths=fft_lengths)]


deflinear(fft_p, _fft_transpose)


@register_rule("batch", fft_p)
def _fft_batch(vals, dims, *, fft_type, fft_lengths):
    (x,), (d,) = vals, dims
    ndim = aval_of(x).ndim
    if d >= ndim - len(fft_lengths):  # the batch axis sits among the transformed ones
        from plax.transforms.batching import move_axis_to
        x = move_axis_to(x, d, 0, aval_of(x).shape[d])
        d = 0
    return fft_p.bind(x, fft_type=fft_type, fft_lengths=fft_lengths), d
