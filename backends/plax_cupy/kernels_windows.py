"""GPU kernels of the windowed reductions (``reduce_window_sum``, ``reduce_window_max``,
``reduce_window_min``): the core's :func:`plax.lax.windows.reduce_window_array` on CuPy, as
the reference kernels (``plax_numpy.impls_windows``) run it on NumPy: the operand dilated and
padded with the reduction's identity in one strided copy, a strided window view of it (no
copy), and one CuPy reduction over the window axes. NaN propagates through max and min,
float16 reduces in float32, integers wrap.
"""
from __future__ import annotations

import cupy

from plax.lax.windows import (reduce_window_array, reduce_window_max_p, reduce_window_min_p,
                              reduce_window_sum_p)
from plax_cupy.kernels import kernel


def _reducer(which: str):
    def reduce_window(x, *, window_dimensions, window_strides, padding, base_dilation,
                      window_dilation):
        return reduce_window_array(x, which, window_dimensions=window_dimensions,
                                   window_strides=window_strides, padding=padding,
                                   base_dilation=base_dilation, window_dilation=window_dilation,
                                   xp=cupy)

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
