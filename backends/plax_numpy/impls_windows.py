"""NumPy implementations of the reduce_window primitives: dilate and pad with the
reduction's identity, take a strided window view, reduce over the window axes."""
from __future__ import annotations

import numpy as np

from plax.lax.convolution import dilate_and_pad, window_view
from plax.lax.windows import (reduce_window_max_p, reduce_window_min_p, reduce_window_sum_p,
                              reduction_identity,
                              window_output_shape)
from plax_numpy.registry import impl, quiet


def _reducer(which: str):
    reduce = {"sum": np.sum, "max": np.max, "min": np.min}[which]

    @quiet
    def kernel(x, *, window_dimensions, window_strides, padding, base_dilation,
               window_dilation):
        x = np.asarray(x)
        dtype = x.dtype
        compute = np.float32 if dtype.itemsize == 2 and dtype.kind in "fV" else dtype
        x = x.astype(compute, copy=False)
        fill = reduction_identity(compute, which)
        axes = tuple(range(x.ndim))
        x = dilate_and_pad(x, axes, base_dilation, padding, fill)
        shape = window_output_shape(x.shape, window_dimensions, window_strides,
                                    ((0, 0),) * x.ndim, (1,) * x.ndim, window_dilation)
        if x.ndim == 0:
            return x.astype(dtype, copy=True)
        if 0 in shape:  # some axis is shorter than one window: an empty result
            return np.zeros(shape, dtype)
        v = window_view(x, axes, window_dimensions, window_strides, window_dilation, shape)
        w_axes = tuple(range(x.ndim, 2 * x.ndim))
        if which == "sum":
            out = reduce(v, axis=w_axes, dtype=compute)
        else:
            out = reduce(v, axis=w_axes)
        return np.ascontiguousarray(np.asarray(out).astype(dtype, copy=False))

    kernel.__name__ = f"reduce_window_{which}"
    return kernel


impl(reduce_window_sum_p)(_reducer("sum"))
impl(reduce_window_max_p)(_reducer("max"))
impl(reduce_window_min_p)(_reducer("min"))
