"""``conv_general_dilated`` on one BLAS thread where its products are small: the Numba
backend's kernel wrapping the reference one.

The reference kernel computes a convolution with a small window as one matrix product per
block of output rows, ``(rows, window * in features) @ (window * in features, out
features)`` over an im2col block of about ``IM2COL_BLOCK_BYTES`` (a 3x3 convolution of
8x32x32x16 -> 16 features: three products of up to 3 * 1024 rows of 144 values, 7.1M
multiply-adds each).
OpenBLAS spreads each over every core; on a host whose cores other processes hold, its
threads wait for one another (that convolution as nine per-offset products, before: 136 ms
per call threaded, 6.5 ms on one thread, medians of alternating batches at load average 12).
So where each product is at most ``kernels.BLAS_SERIAL_MAX`` multiply-adds, the kernel runs
with BLAS on one thread, as the Numba backend's small ``dot_general`` steps do; the values
are the reference kernel's (one BLAS thread instead of several: the last bits may differ, as
for those).
"""
from __future__ import annotations

import functools
import math
import sys

from plax.blas_threads import on_one_thread
from plax.core.shaped_array import ShapedArray
from plax.lowering import fresh_result

_FAMILY = "plax.lax.convolution"  # (a family plax.lax loads on first use: not imported here)

@functools.lru_cache(maxsize=256)
def madds_per_product(lhs: ShapedArray, rhs: ShapedArray, params: tuple) -> int:
    """Multiply-adds of the reference kernel's largest im2col product (one group's block of
    output rows, ``plax_numpy.impls_convolution.im2col_blocks``), or 0 for a window of more
    than ``MAX_BLOCKED_WINDOW`` offsets (one contraction of the whole window view).

    Example:
      >>> conv = lambda x, w: lax.conv_general_dilated(
      ...     x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
      >>> f32 = np.dtype("float32")
      >>> lhs, rhs = ShapedArray((8, 32, 32, 16), f32), ShapedArray((3, 3, 16, 16), f32)
      >>> eqn = plax.make_jaxpr(conv)(lhs, rhs).eqns[0]
      >>> madds_per_product(lhs, rhs, tuple(eqn.params.items()))  # 3 images x 1024 rows x 144 x 16
      7077888
    """
    from plax_numpy.impls_convolution import MAX_BLOCKED_WINDOW, im2col_blocks
    kw = dict(params)
    family = sys.modules[_FAMILY]
    _, rhs_spec, out_spec = kw["dimension_numbers"]
    window = math.prod(rhs.shape[d] for d in rhs_spec[2:])
    if window > MAX_BLOCKED_WINDOW:
        return 0
    out = family.conv_general_dilated_p.abstract_eval(lhs, rhs, **kw)
    groups = kw["feature_group_count"] * kw["batch_group_count"]
    lead = (out.shape[out_spec[0]],) + tuple(out.shape[d] for d in out_spec[2:])
    k = window * rhs.shape[rhs_spec[1]]
    if 0 in lead or k == 0:
        return 0  # (an empty result, or zeros: no product)
    axis, step = im2col_blocks(lead, k, family.conv_compute_dtype(out.dtype).itemsize)
    rows = step * math.prod(lead[axis + 1:])
    return rows * k * (rhs.shape[rhs_spec[0]] // groups)


@fresh_result
def conv_kernel(lhs, rhs, **params):
    """The reference ``conv_general_dilated`` kernel, on one BLAS thread where its products
    are small (between ``kernels.BLAS_THREADED_MIN`` and ``kernels.BLAS_SERIAL_MAX``
    multiply-adds each).

    Args:
      lhs, rhs: NumPy arrays.
      params: the primitive's parameters.

    Returns:
      The reference kernel's result.

    Example:
      >>> x, w = np.ones((1, 8, 8, 4), np.float32), np.ones((3, 3, 4, 4), np.float32)
      >>> eqn = plax.make_jaxpr(lambda x, w: lax.conv_general_dilated(
      ...     x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))(x, w).eqns[0]
      >>> conv_kernel(x, w, **eqn.params).shape
      (1, 8, 8, 4)
    """
    from plax_numba.kernels import BLAS_SERIAL_MAX, BLAS_THREADED_MIN
    reference = _reference()
    try:
        size = madds_per_product(ShapedArray(lhs.shape, lhs.dtype),
                                 ShapedArray(rhs.shape, rhs.dtype), tuple(params.items()))
    except TypeError:  # (a parameter that cannot be a cache key: BLAS's threads, as before)
        size = 0
    if BLAS_THREADED_MIN < size <= BLAS_SERIAL_MAX:
        return on_one_thread(reference)(lhs, rhs, **params)
    return reference(lhs, rhs, **params)


@functools.cache
def _reference():
    from plax_numpy import impls
    return impls()[sys.modules[_FAMILY].conv_general_dilated_p]


def kernel_for(primitive):
    """This module's kernel of ``primitive``, or None: looked up by the backend where its
    kernel table has none, so that the convolution family is not loaded to fill the table.

    Example:
      >>> kernel_for(lax.conv_general_dilated_p) is conv_kernel
      True
    """
    family = sys.modules.get(_FAMILY)  # (loaded if primitive is its primitive)
    if family is not None and primitive is family.conv_general_dilated_p:
        return conv_kernel
    return None
