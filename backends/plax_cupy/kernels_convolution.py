"""GPU kernel of ``conv_general_dilated``, built from CuPy operations that run on the device:
the operand dilated and padded in one strided copy, then matrix products on cuBLAS.

Layout: channels last (``x`` is ``(N, spatial..., C)``, ``w`` is ``(window..., I, O)``), and
the feature groups (or batch groups) as a leading batch axis of ``cupy.matmul``, so one product
serves every group. Small kernels (at most :data:`MAX_SHIFTS` offsets) accumulate one batched
product per kernel offset, over a strided slice of the input (no im2col copy); larger ones
(the kernel's gradient, whose "window" is the output's spatial extent) build the im2col matrix
from a strided window view (:func:`plax.lax.convolution.window_view`) and contract it in one
product. The values are the reference kernel's (``plax_numpy.impls_convolution``): the layout
changes, the dilation and padding and the compute dtype (float16/bfloat16 multiply in float32,
booleans in int64) are the core's array-module-generic helpers in ``plax.lax.convolution``,
which both backends call.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

import cupy

from plax.lax.convolution import (conv_compute_dtype, conv_general_dilated_p, dilate_and_pad,
                                  from_channels_last, to_channels_last, window_view)
from plax_cupy.kernels import kernel
from plax_cupy.kernels_elementwise import accumulate

#: above this many kernel offsets, one im2col product replaces one product per offset
MAX_SHIFTS = 32


def _grouped_conv(xg, wg, nsp, strides, rhs_dilation, out_sp):
    """Every group at once: ``xg`` ``(G, N, spatial..., C)`` already dilated and padded, ``wg``
    ``(G, window..., C, O)``; returns ``(G, N * prod(out_sp), O)``."""
    groups, n, c, o = xg.shape[0], xg.shape[1], xg.shape[-1], wg.shape[-1]
    window = wg.shape[1:1 + nsp]
    rows = n * math.prod(out_sp)
    if math.prod(window) <= MAX_SHIFTS:
        out = None
        for offs in itertools.product(*(range(k) for k in window)):
            index = (slice(None), slice(None)) + tuple(
                slice(k * d, k * d + (m - 1) * s + 1, s)
                for k, d, m, s in zip(offs, rhs_dilation, out_sp, strides)) + (slice(None),)
            patch = xg[index].reshape(groups, rows, c)
            product = cupy.ascontiguousarray(cupy.matmul(patch, wg[(slice(None),) + offs]))
            if out is None:
                out = product
            elif out.dtype.kind in "fc":
                # plax-compiled: CuPy's own += flushes float32 subnormals of the partial sums
                accumulate(out, product)
            else:
                out += product   # (integers: nothing to flush)
        return out if out is not None else cupy.zeros((groups, rows, o), xg.dtype)
    # im2col: (G, N, out..., C) + window -> (G, rows, window..., C) in one copy, one product
    view = window_view(xg, tuple(range(2, 2 + nsp)), window, strides, rhs_dilation, out_sp,
                       xp=cupy)
    last = view.ndim - 1 - nsp  # C's axis in the view, before the window axes
    cols = cupy.moveaxis(view, last, -1).reshape(groups, rows, math.prod(window) * c)
    return cupy.matmul(cols, wg.reshape(groups, math.prod(window) * c, o))


@kernel(conv_general_dilated_p)
def conv_general_dilated(lhs: "cupy.ndarray", rhs: "cupy.ndarray", *, window_strides,
                         padding, lhs_dilation, rhs_dilation, dimension_numbers,
                         feature_group_count: int, batch_group_count: int, precision,
                         preferred_element_type) -> "cupy.ndarray":
    """A general dilated convolution on the device (any dimension numbers, strides, padding,
    lhs and rhs dilation, feature and batch groups), by matrix products on cuBLAS.

    Args:
      lhs, rhs: device arrays laid out as ``dimension_numbers`` says; the other parameters are
        the primitive's (``plax.lax.conv_general_dilated``).

    Returns:
      The convolution, laid out as the output spec of ``dimension_numbers``, of dtype
      ``preferred_element_type`` (else ``lhs``'s).

    Example:
      >>> conv_general_dilated(x, w, window_strides=(1, 1), padding=((0, 0), (0, 0)), ...)
    """
    del precision  # float32 products are float32 (TF32 off), as dot_general's
    out_dtype = np.dtype(preferred_element_type or lhs.dtype)
    compute = conv_compute_dtype(out_dtype)
    nsp = lhs.ndim - 2
    x, w = to_channels_last(lhs, rhs, dimension_numbers, compute, xp=cupy)
    x = dilate_and_pad(x, tuple(range(1, 1 + nsp)), lhs_dilation, padding, 0, xp=cupy)
    n, c, o = x.shape[0], x.shape[-1], w.shape[-1]
    g, b = feature_group_count, batch_group_count
    groups = g * b  # one of them is 1
    window = w.shape[:nsp]
    spans = [(k - 1) * d + 1 for k, d in zip(window, rhs_dilation)]
    out_sp = tuple((x.shape[1 + i] - spans[i]) // window_strides[i] + 1
                   if x.shape[1 + i] >= spans[i] else 0 for i in range(nsp))
    ng, og = n // b, o // groups
    if 0 in out_sp or ng == 0 or o == 0:
        out = cupy.zeros((ng,) + out_sp + (o,), compute)
    else:
        if b > 1:  # batch groups: group j holds the batch entries j * ng ... (j + 1) * ng - 1
            xg = x.reshape((b, ng) + x.shape[1:])
        else:      # feature groups: group j holds the channels j * cg ... (j + 1) * cg - 1
            xg = cupy.moveaxis(x.reshape(x.shape[:-1] + (g, c // g)), -2, 0)
        # group j's outputs are the features j * og ... (j + 1) * og - 1
        wg = cupy.moveaxis(w.reshape(window + (w.shape[-2], groups, og)), -2, 0)
        xg = cupy.ascontiguousarray(xg)
        wg = cupy.ascontiguousarray(wg)
        flat = _grouped_conv(xg, wg, nsp, window_strides, rhs_dilation, out_sp)
        out = cupy.moveaxis(flat.reshape((groups, ng) + out_sp + (og,)), 0, -2)
        out = out.reshape((ng,) + out_sp + (o,))
    return from_channels_last(out, dimension_numbers, out_dtype, xp=cupy)
