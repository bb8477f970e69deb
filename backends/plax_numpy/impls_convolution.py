"""NumPy implementation of conv_general_dilated, channels last: one matmul per kernel offset
accumulated (small kernels), or im2col on a strided window view and one tensordot (large
kernels, such as the output cotangent in the kernel's gradient); a loop over groups."""
from __future__ import annotations

import itertools
import math

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from plax.lax.convolution import conv_general_dilated_p
from plax_numpy.registry import impl, quiet


def dilate_and_pad(x: np.ndarray, axes, dilation, padding, fill) -> np.ndarray:
    """``x`` with ``dilation - 1`` holes between elements and ``(low, high)`` padding (negative
    crops) along ``axes``; holes and padding hold ``fill``."""
    if any(d != 1 for d in dilation):
        shape = list(x.shape)
        index = [slice(None)] * x.ndim
        for a, d in zip(axes, dilation):
            shape[a] = 0 if shape[a] == 0 else (shape[a] - 1) * d + 1
            index[a] = slice(None, None, d)
        out = np.full(shape, fill, x.dtype)
        out[tuple(index)] = x
        x = out
    crop = [slice(None)] * x.ndim
    widths = [(0, 0)] * x.ndim
    for a, (lo, hi) in zip(axes, padding):
        n = x.shape[a]
        crop[a] = slice(min(max(-lo, 0), n), max(n + min(hi, 0), min(max(-lo, 0), n)))
        widths[a] = (max(lo, 0), max(hi, 0))
    x = x[tuple(crop)]
    if any(w != (0, 0) for w in widths):
        x = np.pad(x, widths, constant_values=fill)
    return x


def windows(x: np.ndarray, axes, window, strides, window_dilation):
    """A view of ``x`` of shape ``x.shape`` (with ``axes`` reduced to the output positions) +
    ``window``: element ``[..., i, ..., k]`` is ``x[..., i * stride + k * dilation, ...]``; or
    None when some axis is too short for one window."""
    spans = [(w - 1) * d + 1 for w, d in zip(window, window_dilation)]
    if any(x.shape[a] < s for a, s in zip(axes, spans)):
        return None
    v = sliding_window_view(x, spans, axis=tuple(axes))
    index = [slice(None)] * x.ndim + [slice(None, None, d) for d in window_dilation]
    for a, s in zip(axes, strides):
        index[a] = slice(None, None, s)
    return v[tuple(index)]


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
    win = windows(x, range(1, 1 + nsp), window, strides, rhs_dilation)  # N, out..., C, window...
    return np.tensordot(win, w, axes=(tuple(range(1 + nsp, 2 + 2 * nsp)),
                                      (nsp,) + tuple(range(nsp))))


@impl(conv_general_dilated_p)
@quiet
def _conv_general_dilated(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                          dimension_numbers, feature_group_count, batch_group_count, precision,
                          preferred_element_type):
    ls, rs, os_ = dimension_numbers
    lhs, rhs = np.asarray(lhs), np.asarray(rhs)
    out_dtype = np.dtype(preferred_element_type or lhs.dtype)
    compute = out_dtype
    if out_dtype == np.bool_:
        compute = np.dtype(np.int64)
    elif out_dtype.itemsize == 2 and out_dtype.kind in "fV":
        compute = np.dtype(np.float32)  # NumPy has no fast float16/bfloat16 matmul
    nsp = lhs.ndim - 2
    # channels last: x is (N, spatial..., C), w is (window..., I, O)
    x = np.transpose(lhs, (ls[0],) + tuple(ls[2:]) + (ls[1],)).astype(compute, copy=False)
    w = np.transpose(rhs, tuple(rs[2:]) + (rs[1], rs[0])).astype(compute, copy=False)
    sp = tuple(range(1, 1 + nsp))
    x = dilate_and_pad(x, sp, lhs_dilation, padding, 0)
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
    if out_dtype == np.bool_:
        out = out != 0
    perm = [0] * (nsp + 2)
    perm[os_[0]], perm[os_[1]] = 0, nsp + 1
    for i in range(nsp):
        perm[os_[2 + i]] = 1 + i
    out = np.transpose(out, perm)
    return np.ascontiguousarray(out.astype(out_dtype, copy=False))
