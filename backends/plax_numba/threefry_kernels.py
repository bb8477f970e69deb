"""The ``numba.njit`` loops of the native ``threefry2x32`` (:mod:`plax_numba.threefry`, which
imports this module, and numba with it, only when a kernel is compiled or loaded).

One pass over the counters computes all twenty rounds in registers (uint32 arithmetic wraps
in the generated code exactly as NumPy's in-place ufuncs do), so the hash is bit-identical
to the reference kernel (``plax_numpy.impls_random``) and to JAX, and moves each element
once instead of a hundred times.

Every operand is a flat C-contiguous ``uint32`` array, so numba compiles one specialisation
of each kernel whatever the mix of scalar and array operands (there used to be one per mix,
sixteen, ~2.2 CPU s each; this one costs about what one of them did): an operand of the
output's size is read at the element's index, a rank-0 operand arrives as its
:func:`plax_numba.threefry.fill` (its value repeated over one :data:`FILL`-element block) and
is read at the index within the block. Both reads are unit-stride, so LLVM vectorises the
twenty rounds either way (a read ``a[i * step]`` with a step of 0 for a scalar does not
vectorise, and ran ten times slower). :func:`hash_parallel` splits the work over numba's
threads in :data:`CHUNK`-element work items; :func:`hash_serial` runs the same work items in
turn. The kernels are ``nogil`` and cached on disk (``cache=True``).
"""
from __future__ import annotations

import numpy as np
from numba import njit, prange

from plax.lax.random_bits import KS_PARITY, ROTATIONS
from plax_numba import threefry
from plax_numba.inlining import inlined

_U32 = np.uint32

#: Elements per parallel work item.
CHUNK = 1 << 14
#: Elements per block of a work item: the length of a scalar operand's fill (it stays in L1)
FILL = 1 << 10
# The fills are made without numba (plax_numba.threefry): the two lengths must agree.
assert FILL == threefry.FILL, (FILL, threefry.FILL)

_PARITY = _U32(KS_PARITY)


_opts = dict(cache=True, nogil=True, error_model="numpy", boundscheck=False)


@inlined(nogil=True)
def _rotl(x, r):
    return np.uint32((x << np.uint32(r)) | (x >> np.uint32(32 - r)))


@inlined(nogil=True)
def _round(x0, x1, r):
    x0 = np.uint32(x0 + x1)
    x1 = np.uint32(_rotl(x1, r) ^ x0)
    return x0, x1


@inlined(nogil=True)
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


@inlined(nogil=True)
def _block(a, b, m, n):
    """The ``m`` elements of operand ``a`` for the block at element ``b``: from ``b`` for an
    operand of the output's size ``n``, from 0 for a scalar's fill."""
    return a[b if a.size == n else 0:][:m]


# Compiled once and called by both kernels (inlined, it was compiled into each: twice the
# compilation for no measurable gain, a call per work item being nothing beside the hashing).
@njit(**_opts)
def hash_item(k0, k1, x0, x1, out0, out1, start):
    """Hashes the :data:`CHUNK`-element work item at ``start``, block by :data:`FILL`-element
    block (an operand shorter than the output is a scalar's fill,
    :func:`plax_numba.threefry.fill`). Generated kernels call it too
    (:mod:`plax_numba.threefry`'s native forms)."""
    n = out0.size
    stop = min(start + CHUNK, n)
    # A scalar key (the usual case) is read once, so LLVM hoists its share of the rounds out
    # of the loop: the general loop below, reading it from its fills, is ~15% slower there.
    scalar_key = k0.size != n and k1.size != n
    c0, c1 = k0[0], k1[0]
    for b in range(start, stop, FILL):
        m = min(FILL, n - b)
        a2, a3 = _block(x0, b, m, n), _block(x1, b, m, n)
        o0, o1 = out0[b:b + m], out1[b:b + m]
        if scalar_key:
            for t in range(m):
                o0[t], o1[t] = hash_words(c0, c1, a2[t], a3[t])
        else:
            a0, a1 = _block(k0, b, m, n), _block(k1, b, m, n)
            for t in range(m):
                o0[t], o1[t] = hash_words(a0[t], a1[t], a2[t], a3[t])


@njit(**_opts)
def hash_serial(k0, k1, x0, x1, out0, out1):
    """Hashes ``out0.size`` counter pairs into ``out0``, ``out1`` on the calling thread."""
    for c in range((out0.size + CHUNK - 1) // CHUNK):
        hash_item(k0, k1, x0, x1, out0, out1, c * CHUNK)


@njit(parallel=True, **_opts)
def hash_parallel(k0, k1, x0, x1, out0, out1):
    """:func:`hash_serial`'s :data:`CHUNK`-element work items over numba's threads."""
    for c in prange((out0.size + CHUNK - 1) // CHUNK):
        hash_item(k0, k1, x0, x1, out0, out1, c * CHUNK)
