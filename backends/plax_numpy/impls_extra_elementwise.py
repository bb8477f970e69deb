"""Kernels of plax.lax.extra_elementwise: square, clz, mulhi (the last two are the core's
array-module-generic :func:`~plax.lax.extra_elementwise.clz_array` and
:func:`~plax.lax.extra_elementwise.mulhi_array`, which the CuPy kernels call too)."""
from __future__ import annotations

import numpy as np

from plax.lax.extra_elementwise import clz_array, clz_p, mulhi_array, mulhi_p, square_p
from plax_numpy.registry import impl, quiet


@impl(square_p, fresh=True)
@quiet
def _square(x):
    return np.multiply(x, x, dtype=x.dtype)


@impl(clz_p, fresh=True)  # (ends in astype)
def _clz(x):
    return clz_array(np.asarray(x))


@impl(mulhi_p, fresh=True)  # (new products, astype or a view of a new array)
@quiet
def _mulhi(x, y):
    return mulhi_array(np.asarray(x), np.asarray(y))
