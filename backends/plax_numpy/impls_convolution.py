"""NumPy implementation of conv_general_dilated, channels last: im2col a block of output rows
at a time, each block one matrix product (small kernels), or im2col of the whole strided
window view and one tensordot (large kernels, such as the output cotangent in the kernel's
gradient); a loop over groups. The layout changes, dilation and padding, window view and
compute dtype are the core's array-module-generic helpers (``plax.lax.convolution``), shared
with the CuPy kernel."""
from __future__ import annotations

import math

import numpy as np

from plax.lax.convolution import (conv_compute_dtype, conv_general_dilated_p, dilate_and_pad,
                                  from_channels_last, to_channels_last, window_view)
from plax_numpy.registry import impl, quiet


#: windows of at most this many offsets are contracted a block of output rows at a time
#: (:func:`_blocked_im2col`); larger ones (a kernel gradient's window is the whole image, its
#: rows few) as one contraction of the whole window view
MAX_BLOCKED_WINDOW = 32
#: bytes of one block of im2col rows: the block is written and read again while in cache,
#: and a large input is never copied whole once per window offset
IM2COL_BLOCK_BYTES = 1 << 21


def _group_conv(x, w, nsp, strides, rhs_dilation, out_sp):
    """One group: ``x`` (N, spatial..., C) already dilated and padded, ``w`` (window...,
    C, O); returns (N, out spatial..., O)."""
    window = w.shape[:nsp]
    # (N, out..., C, window...)
    win = window_view(x, range(1, 1 + nsp), window, strides, rhs_dilation, out_sp)
    if math.prod(window) <= MAX_BLOCKED_WINDOW:
        return _blocked_im2col(win, w, nsp)
    return np.tensordot(win, w, axes=(tuple(range(1 + nsp, 2 + 2 * nsp)),
                                      (nsp,) + tuple(range(nsp))))


def im2col_blocks(lead: tuple, k: int, itemsize: int) -> tuple[int, int]:
    """How :func:`_blocked_im2col` splits its output rows: it blocks axis ``axis`` of the
    leading (batch and output spatial) axes ``lead`` in runs of ``step`` indices, looping over
    the axes before it; a block's rows of ``k`` values of ``itemsize`` bytes take at most
    about :data:`IM2COL_BLOCK_BYTES` (one index of the last axis, at least), in blocks of
    nearly equal size (``step`` is at most ``lead[axis]``).

    Args:
      lead: the leading axes' sizes, ``(N, out spatial...)``, none of them 0.
      k: values per row (window offsets times input features of a group).
      itemsize: bytes per value.

    Returns:
      ``(axis, step)``.

    Example:
      >>> im2col_blocks((8, 32, 32), 144, 4)  # 590 KB an image: three images a block
      (0, 3)
    """
    per_index = [math.prod(lead[a + 1:]) * k * itemsize for a in range(len(lead))]
    axis = next((a for a, size in enumerate(per_index) if size <= IM2COL_BLOCK_BYTES),
                len(lead) - 1)
    # blocks of nearly equal size (a last block of a few rows would cost a product's set-up)
    blocks = -(-per_index[axis] * lead[axis] // IM2COL_BLOCK_BYTES)
    return axis, -(-lead[axis] // blocks)


def _blocked_im2col(win, w, nsp):
    """``win`` (N, out..., C, window...) contracted with ``w`` (window..., C, O) a block of
    output rows at a time (:func:`im2col_blocks`): each block's windows copied into one buffer
    as rows of ``window * C`` values (a window offset's features together, as ``w``'s rows are
    ordered), then one matrix product into the result. One product per block instead of one
    per window offset (a 3x3 kernel's nine products of ``C`` terms each, and nine
    accumulations), for the same copying (an offset's shifted rows were a copy too); a 5x5
    kernel over one input feature, 25 products of one term each before, took 16x as long.
    Every output element sums its ``window * C`` products in one product, whatever the
    block."""
    window, c, o = w.shape[:nsp], w.shape[nsp], w.shape[-1]
    k = math.prod(window) * c
    rows = np.moveaxis(win, 1 + nsp, -1)  # (N, out..., window..., C)
    lead = rows.shape[:1 + nsp]
    out = np.empty(lead + (o,), np.result_type(win, w))
    kernel = w.reshape(k, o)
    axis, step = im2col_blocks(lead, k, out.itemsize)
    buffer = np.empty((step,) + rows.shape[axis + 1:], out.dtype)
    for outer in np.ndindex(*lead[:axis]):
        for start in range(0, lead[axis], step):
            block = outer + (slice(start, min(start + step, lead[axis])),)
            cols = buffer[:block[-1].stop - start]
            np.copyto(cols, rows[block])
            # (out's block is C-contiguous: the reshape is a view, written in place)
            np.matmul(cols.reshape(-1, k), kernel, out=out[block].reshape(-1, o))
    return out


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
    if 0 in out_sp or n == 0 or o == 0 or c == 0 or 0 in w.shape[:nsp]:
        # an empty result, or a sum over no input channels or window offsets: zeros, as XLA
        # gives (a product over no terms cannot reshape its (rows, 0) operand)
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
