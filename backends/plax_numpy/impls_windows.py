"""NumPy implementations of the reduce_window primitives: the core's
:func:`plax.lax.windows.reduce_window_array` (dilate and pad with the reduction's identity,
take a strided window view, reduce over the window axes), which the CuPy kernels call too."""
from __future__ import annotations

import numpy as np

from plax.lax.windows import (reduce_window_array, reduce_window_max_p, reduce_window_min_p,
                              reduce_window_sum_p)
from plax.lowering import signed_zeros
from plax_numpy.registry import impl, quiet


def _reducer(which: str):
    @quiet
    def kernel(x, **params):
        x = np.asarray(x)
        out = reduce_window_array(x, which, **params)
        if which == "sum":
            return out
        # JAX's zero sign: whether any element of a window is the preferred zero is the
        # window max of that flag (plax.lowering.signed_zeros)
        return signed_zeros.fix_reduced_zeros(
            out, x, which, lambda found: reduce_window_array(found, "max", **params))

    kernel.__name__ = f"reduce_window_{which}"
    return kernel


impl(reduce_window_sum_p, fresh=True)(_reducer("sum"))
impl(reduce_window_max_p, fresh=True)(_reducer("max"))
impl(reduce_window_min_p, fresh=True)(_reducer("min"))
