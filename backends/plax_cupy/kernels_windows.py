"""GPU kernels of the windowed reductions (``reduce_window_sum``, ``reduce_window_max``,
``reduce_window_min``): the operand dilated and padded with the reduction's identity in one
strided copy, a strided window view of it (no copy), and one CuPy reduction over the window
axes. The values are the reference kernel's (``plax_numpy.impls_windows``): NaN propagates
through max and min, float16 reduces in float32, integers wrap.
"""
from __future__ import annotations

import numpy as np

import cupy

from plax.lax.convolution import dilate_and_pad, window_view
from plax.lax.windows import (reduce_window_max_p, reduce_window_min_p, reduce_window_sum_p,
                              reduction_identity,
                              window_output_shape)
from plax_cupy.kernels import kernel


def _reducer(which: str):
    def reduce_window(x, *, window_dimensions, window_strides, padding, base_dilation,
                      window_dilation):
        dtype = np.dtype(x.dtype)
        compute = np.dtype(np.float32) if dtype.itemsize == 2 and dtype.kind == "f" else dtype
        x = x.astype(compute, copy=False)
        axes = tuple(range(x.ndim))
        x = dilate_and_pad(x, axes, base_dilation, padding, reduction_identity(compute, which),
                           xp=cupy)
        shape = window_output_shape(x.shape, window_dimensions, window_strides,
                                    ((0, 0),) * x.ndim, (1,) * x.ndim, window_dilation)
        if 0 in shape or x.ndim == 0:
            if x.ndim == 0:
                return x.astype(dtype, copy=True)
            return cupy.zeros(shape, dtype)
        view = window_view(x, axes, window_dimensions, window_strides, window_dilation, shape,
                           xp=cupy)
        w_axes = tuple(range(x.ndim, 2 * x.ndim))
        if which == "sum":
            out = view.sum(axis=w_axes, dtype=compute)
        elif which == "max":
            out = view.max(axis=w_axes)
        else:
            out = view.min(axis=w_axes)
        return cupy.ascontiguousarray(out.astype(dtype, copy=False))

    reduce_window.__name__ = f"reduce_window_{which}"
    reduce_window.__doc__ = f"""The {which} of each window of a device array.

    Args:
      x: device array; the other parameters are the primitive's (window dimensions, strides,
        ``(low, high)`` padding, base and window dilation, one per axis).

    Returns:
      One {which} per window position, of ``x``'s dtype.

    Example:
      >>> reduce_window_{which}(cupy.arange(4.0), window_dimensions=(2,), window_strides=(2,),
      ...                      padding=((0, 0),), base_dilation=(1,), window_dilation=(1,))
    """
    return reduce_window


reduce_window_sum = kernel(reduce_window_sum_p)(_reducer("sum"))
reduce_window_max = kernel(reduce_window_max_p)(_reducer("max"))
reduce_window_min = kernel(reduce_window_min_p)(_reducer("min"))
