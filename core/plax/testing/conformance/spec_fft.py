"""Spec of the ``fft`` primitive: FFT, IFFT and IRFFT on complex operands, RFFT on real ones,
over one to three trailing axes, with odd and even lengths, length-1 axes and empty batches.
The reference is ``numpy.fft`` in float64/complex128."""
from __future__ import annotations

import numpy as np

from plax import lax
from plax.lax.fft import FftType

from .harness import Case, GradCase, Spec, f64, rand

SPECS: list[Spec] = []

# (operand shape, fft_lengths) per transform type
RFFT_CONFIGS = [((8,), (8,)), ((3, 7), (7,)), ((2, 3, 5), (3, 5)), ((1,), (1,)),
                ((2, 4), (2, 4)), ((0, 4), (4,)), ((2, 2, 3, 4), (2, 3, 4))]
C2C_CONFIGS = [((8,), (8,)), ((5,), (5,)), ((2, 3, 4), (3, 4)), ((2, 3), (2, 3)), ((0,), (0,)),
               ((3, 0, 2), (2,)), ((1, 2, 3, 2), (2, 3, 2))]
IRFFT_CONFIGS = [((5,), (8,)), ((3, 4), (7,)), ((2, 3, 3), (3, 4)), ((1,), (1,)), ((1,), (0,)),
                 ((2, 2), (2, 3)), ((0, 3), (4,))]

_NUMPY = {FftType.FFT: np.fft.fftn, FftType.IFFT: np.fft.ifftn, FftType.RFFT: np.fft.rfftn,
          FftType.IRFFT: np.fft.irfftn}


def fft_ref(x, *, fft_type, fft_lengths):
    """The transform of the trailing axes in float64/complex128 (empty results as zeros)."""
    x = f64(x)
    k = len(fft_lengths)
    lead = x.shape[:x.ndim - k]
    if fft_type == FftType.RFFT:
        shape = lead + fft_lengths[:-1] + (fft_lengths[-1] // 2 + 1,)
    elif fft_type == FftType.IRFFT:
        shape = lead + tuple(fft_lengths)
    else:
        shape = x.shape
    real_out = fft_type == FftType.IRFFT
    if 0 in shape or 0 in x.shape:
        return np.zeros(shape, np.float64 if real_out else np.complex128)
    axes = tuple(range(x.ndim - k, x.ndim))
    return _NUMPY[fft_type](x, s=fft_lengths, axes=axes)


def _case(fft_type, shape, lengths, d):
    params = dict(fft_type=fft_type, fft_lengths=lengths)
    return Case(params, lambda rng: [rand(rng, shape, d, -2, 2)],
                lambda x: fft_ref(x, **params), f"{fft_type.name} {list(shape)} {lengths}",
                tol_scale=8)


def _fft_cases(d):
    if d.kind == "f":
        return [_case(FftType.RFFT, s, n, d) for s, n in RFFT_CONFIGS]
    return ([_case(FftType.FFT, s, n, d) for s, n in C2C_CONFIGS]
            + [_case(FftType.IFFT, s, n, d) for s, n in C2C_CONFIGS]
            + [_case(FftType.IRFFT, s, n, d) for s, n in IRFFT_CONFIGS])


def _fft_grads():
    rng = np.random.default_rng(0)
    out = []
    for typ, shape, lengths, dtype in [
            (FftType.RFFT, (8,), (8,), np.float32), (FftType.RFFT, (2, 3, 5), (3, 5), np.float32),
            (FftType.IRFFT, (5,), (8,), np.complex64), (FftType.IRFFT, (3, 4), (3, 7), np.complex64),
            (FftType.FFT, (2, 4), (4,), np.complex64), (FftType.IFFT, (3, 4), (3, 4), np.complex64)]:
        params = dict(fft_type=typ, fft_lengths=lengths)
        out.append(GradCase((lambda p: lambda x: lax.fft_p.bind(x, **p))(params),
                            (rand(rng, shape, dtype, -1, 1),), label=f"{typ.name} {lengths}"))
    return out


SPECS.append(Spec(lax.fft_p, ("float32", "float64", "complex64", "complex128"), _fft_cases,
                  grads=_fft_grads, vmap_dtype="complex64"))
