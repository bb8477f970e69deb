"""NumPy implementation of conv_general_dilated, channels last: one matmul per kernel offset
accumulated (small kernels), or im2col on a strided window view and one tensordot (large
kernels, such as the output cotangent in the kernel's gradient); a loop over groups. The
layout changes, dilation and padding, window view and compute dtype are the core's
array-module-generic helpers (``plax.lax.convolution``), shared with the CuPy kernel."""
from __future__ import annotations

import itertools
import math

import numpy as np

from plax.lax.convolution import (conv_compute_dtype, conv_general_dilated_p, dilate_and_pad,
                                  from_channels_last, to_channels_last, window_view)
from plax_numpy.registry import impl, quiet


# Above this many kernel offsets the im2col product (one big contraction) beats one matmul
# per offset (which avoids im2col's copy but pays a Python-level step per offset).
_MAX_SHIFTS = 32


def _group_conv(x, w, nsp, strides, rhs_dilation, out_sp):
    """One group: ``x`` (N, spatial..., C) already dilated and padded, ``w`` (window...,
    C, O); returns (N, out spatial..., O)."""
    window = w.shape[:nsp]
    n, c, o = x.shape[0], x.shape[-1], w.shape[-1]
    if math.prod(window) <= _MAX_SHIFTS:
        out = np.zeros((n * math.prod(out_sp), o), np.result_type(x, w))
        for offs in itertools.product(*(range(k) for k in window)):
            index = (slice(None),) + tuple(
                slice(k * d, k * d + (m - 1) * s + 1, s)
                for k, d, m, s in zip(offs, rhs_dilation, out_sp, strides)) + (slice(None),)
            out += x[index].reshape(-1, c) @ w[offs]
        return out.reshape((n,) + tuple(out_sp) + (o,))
    # (N, out..., C, window...)
    win = window_view(x, range(1, 1 + nsp), window, strides, rhs_dilation, out_sp)
    return np.tensordot(win, w, axes=(tuple(range(1 + nsp, 2 + 2 * nsp)),
                                      (nsp,) + tuple(range(nsp))))


@impl(conv_general_dilated_p, fresh=True)  # (from_channels_last copies)
@quiet
def _conv_general_dilated(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                          dimension_numbers, feature_group_count, batch_group_count, precision,
                          preferred_element_type):
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    out_dtype = np.dtype(preferred_element_type or lhs.dtype)
    compute = conv_compute_dtype(out_dtype)  # (NumPy has no fast float16/bfloat16 matmul)
    nsp = lhs.ndim - 2
    # channels last: x is (N, spatial..., C), w is (window..., I, O)
    x, w = to_channels_last(lhs, rhs, dimension_numbers, compute)
    x = dilate_and_pad(x, tuple(range(1, 1 + nsp)), lhs_dilation, padding, 0)
    n, c, o = x.shape[0], x.shape[-1], w.shape[-1]
    g, b = feature_group_count, batch_group_count
    spans = [(k - 1) * d + 1 for k, d in zip(w.shape[:nsp], rhs_dilation)]
    out_sp = tuple(max((x.shape[1 + i] - spans[i]) // window_strides[i] + 1, 0)
                   if x.shape[1 + i] >= spans[i] else 0 for i in range(nsp))
    if 0 in out_sp or n == 0 or o == 0 or c == 0:
        # an empty result, or a sum over no input channels: zeros, as XLA gives (a product
        # over zero channels cannot reshape its (rows, 0) operand)
        out = np.zeros((n // b,) + out_sp + (o,), compute)
    else:
        groups = g * b  # one of them is 1
        og, ng, cg = o // groups, n // b, c // g
        parts = []
        for j in range(groups):
            xj = x[j * ng:(j + 1) * ng] if b > 1 else x[..., j * cg:(j + 1) * cg]
            parts.append(_group_conv(xj, w[..., j * og:(j + 1) * og], nsp, window_strides,
                                     rhs_dilation, out_sp))
        out = parts[0] if groups == 1 else np.concatenate(parts, axis=-1)
    return from_channels_last(out, dimension_numbers, out_dtype)
