"""NumPy's own loops, called from generated kernels through numba's object mode, where a
kernel must give exactly NumPy's bits.

``log1p`` is one (:func:`plax_numba.codegen.reference_only`): NumPy's loops (SIMD on
AVX-512 machines) have no reproducible scalar equivalent in numba, and the samplers of
:mod:`plax.random` compute the inverse error function from ``log1p``, so a native loop
holding a sampler (``random.gamma``'s rejection loop) calls NumPy's ``log1p`` here and stays
bit-identical to the NumPy backend and to its own reference tier. One call per array (the
loop body works on whole batches), ~1-3 us of object-mode overhead each.

Arrays are passed flat (C-contiguous, rank 1: the caller ravels and reshapes, which are
views); rank-0 values as scalars.
"""
from __future__ import annotations

import numpy as np
from numba import njit, objmode

# (no ``nogil``: object mode holds the GIL, and numba warns about the combination; the
# kernels calling these keep theirs)


@njit(cache=True)
def log1p_f32(x):
    """NumPy's ``log1p`` of a flat float32 array."""
    with objmode(y="float32[::1]"):
        y = np.ascontiguousarray(np.log1p(x))
    return y


@njit(cache=True)
def log1p_f64(x):
    """NumPy's ``log1p`` of a flat float64 array."""
    with objmode(y="float64[::1]"):
        y = np.ascontiguousarray(np.log1p(x))
    return y


@njit(cache=True)
def log1p_scalar_f32(x):
    """NumPy's ``log1p`` of a float32 scalar."""
    with objmode(y="float32"):
        y = np.log1p(np.float32(x))
    return y


@njit(cache=True)
def log1p_scalar_f64(x):
    """NumPy's ``log1p`` of a float64 scalar."""
    with objmode(y="float64"):
        y = np.log1p(np.float64(x))
    return y
