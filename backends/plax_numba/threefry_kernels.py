"""The ``numba.njit`` loops of the native ``threefry2x32`` (:mod:`plax_numba.threefry`, which
imports this module, and numba with it, only when a kernel is compiled or loaded).

One pass over the counters computes all twenty rounds in registers (uint32 arithmetic wraps
in the generated code exactly as NumPy's in-place ufuncs do), so the hash is bit-identical
to the reference kernel (``plax_numpy.impls_random``) and to JAX, and moves each element
once instead of a hundred times.

Each of the four operands is a ``uint32`` scalar (a rank-0 operand, broadcast) or a flat
C-contiguous ``uint32`` array of the output's size; numba compiles one specialisation per
combination (``_at`` reads an array element or returns the scalar). :func:`hash_parallel`
splits the work over numba's threads in chunks. The kernels are ``nogil`` and cached on
disk (``cache=True``).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from plax.lax.random_bits import KS_PARITY, ROTATIONS

_U32 = np.uint32

#: Elements per parallel work item.
CHUNK = 1 << 14

_PARITY = _U32(KS_PARITY)


def _at(a, i):  # pragma: no cover - replaced by the overload inside numba
    raise NotImplementedError


@overload(_at, inline="always")
def _at_impl(a, i):
    if isinstance(a, types.Array):
        return lambda a, i: a[i]
    return lambda a, i: a


_opts = dict(cache=True, nogil=True, error_model="numpy", boundscheck=False)


@njit(inline="always", nogil=True)
def _rotl(x, r):
    return np.uint32((x << np.uint32(r)) | (x >> np.uint32(32 - r)))


@njit(inline="always", nogil=True)
def _round(x0, x1, r):
    x0 = np.uint32(x0 + x1)
    x1 = np.uint32(_rotl(x1, r) ^ x0)
    return x0, x1


@njit(inline="always", nogil=True)
def hash_words(k0, k1, x0, x1):
    """Threefry-2x32 (20 rounds) of one counter pair under one key, in uint32: ``(y0, y1)``.
    Generated kernels call it too (a cluster holding ``threefry2x32``, or a native loop)."""
    k2 = np.uint32(k0 ^ k1 ^ _PARITY)
    x0 = np.uint32(x0 + k0)
    x1 = np.uint32(x1 + k1)
    # five groups of four rounds; key injection after each (ks[(i+1)%3], ks[(i+2)%3] + i+1)
    x0, x1 = _round(x0, x1, 13)
    x0, x1 = _round(x0, x1, 15)
    x0, x1 = _round(x0, x1, 26)
    x0, x1 = _round(x0, x1, 6)
    x0 = np.uint32(x0 + k1)
    x1 = np.uint32(x1 + k2 + np.uint32(1))
    x0, x1 = _round(x0, x1, 17)
    x0, x1 = _round(x0, x1, 29)
    x0, x1 = _round(x0, x1, 16)
    x0, x1 = _round(x0, x1, 24)
    x0 = np.uint32(x0 + k2)
    x1 = np.uint32(x1 + k0 + np.uint32(2))
    x0, x1 = _round(x0, x1, 13)
    x0, x1 = _round(x0, x1, 15)
    x0, x1 = _round(x0, x1, 26)
    x0, x1 = _round(x0, x1, 6)
    x0 = np.uint32(x0 + k0)
    x1 = np.uint32(x1 + k1 + np.uint32(3))
    x0, x1 = _round(x0, x1, 17)
    x0, x1 = _round(x0, x1, 29)
    x0, x1 = _round(x0, x1, 16)
    x0, x1 = _round(x0, x1, 24)
    x0 = np.uint32(x0 + k1)
    x1 = np.uint32(x1 + k2 + np.uint32(4))
    x0, x1 = _round(x0, x1, 13)
    x0, x1 = _round(x0, x1, 15)
    x0, x1 = _round(x0, x1, 26)
    x0, x1 = _round(x0, x1, 6)
    x0 = np.uint32(x0 + k2)
    x1 = np.uint32(x1 + k0 + np.uint32(5))
    return x0, x1


# The schedule above is written out by hand (numba unrolls nothing by itself); check it
# against the primitive's constants so the two cannot drift apart.
assert ROTATIONS == ((13, 15, 26, 6), (17, 29, 16, 24)), ROTATIONS


@njit(**_opts)
def hash_serial(k0, k1, x0, x1, out0, out1):
    """Hashes ``out0.size`` counter pairs into ``out0``, ``out1`` on the calling thread."""
    for i in range(out0.size):
        y0, y1 = hash_words(_at(k0, i), _at(k1, i), _at(x0, i), _at(x1, i))
        out0[i] = y0
        out1[i] = y1


@njit(parallel=True, **_opts)
def hash_parallel(k0, k1, x0, x1, out0, out1):
    """:func:`hash_serial` split into :data:`CHUNK`-element work items over numba's threads."""
    n = out0.size
    for c in prange((n + CHUNK - 1) // CHUNK):
        start = c * CHUNK
        stop = min(start + CHUNK, n)
        for i in range(start, stop):
            y0, y1 = hash_words(_at(k0, i), _at(k1, i), _at(x0, i), _at(x1, i))
            out0[i] = y0
            out1[i] = y1
