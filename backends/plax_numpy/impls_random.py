"""NumPy implementation of ``threefry2x32``: the Threefry-2x32 hash (20 rounds) on uint32 arrays.

The hash is about a hundred elementwise passes (add, rotate, xor) over the
counters. To keep those passes in cache, large inputs are processed in chunks
of :data:`CHUNK` elements with in-place ufuncs into preallocated scratch
buffers, so no pass allocates and each chunk's working set stays in L2.
"""
from __future__ import annotations

import numpy as np

from plax import lax
from plax.lax.random_bits import KS_PARITY, ROTATIONS
from plax_numpy.registry import impl

# Elements per chunk: 4 live uint32 arrays of this size (~256 KiB) fit in a typical L2 cache.
CHUNK = 1 << 14

_U32 = np.uint32


def _rounds_schedule(ks0, ks1, ks2):
    """The five (rotation group, key-word-for-x1, key-word-for-x2, injection count) steps."""
    ks = (ks0, ks1, ks2)
    return [(ROTATIONS[i % 2], ks[(i + 1) % 3], ks[(i + 2) % 3], _U32(i + 1)) for i in range(5)]


def _hash_chunk(x0, x1, tmp, schedule, ks0, ks1) -> None:
    """Hashes counter words ``x0``, ``x1`` in place (all three arrays have one length)."""
    add, xor, lsh, rsh, or_ = np.add, np.bitwise_xor, np.left_shift, np.right_shift, np.bitwise_or
    add(x0, ks0, out=x0)
    add(x1, ks1, out=x1)
    for rots, inj0, inj1, count in schedule:
        for r in rots:
            add(x0, x1, out=x0)
            # x1 = rotl(x1, r) ^ x0
            lsh(x1, _U32(r), out=tmp)
            rsh(x1, _U32(32 - r), out=x1)
            or_(x1, tmp, out=x1)
            xor(x1, x0, out=x1)
        add(x0, inj0, out=x0)
        add(x1, inj1, out=x1)
        add(x1, count, out=x1)


@impl(lax.threefry2x32_p)
def threefry2x32(k1, k2, x1, x2):
    """Threefry-2x32 of counters ``(x1, x2)`` under key ``(k1, k2)``; operands broadcast."""
    k1, k2, x1, x2 = (np.asarray(a, _U32) for a in (k1, k2, x1, x2))
    shape = np.broadcast_shapes(k1.shape, k2.shape, x1.shape, x2.shape)
    with np.errstate(over="ignore"):
        if k1.ndim == 0 and k2.ndim == 0:
            return _hash_scalar_key(k1[()], k2[()], x1, x2, shape)
        return _hash_broadcast(k1, k2, x1, x2, shape)


def _hash_scalar_key(k1, k2, x1, x2, shape):
    ks2 = _U32(k1 ^ k2 ^ _U32(KS_PARITY))
    schedule = _rounds_schedule(k1, k2, ks2)
    n = int(np.prod(shape, dtype=np.int64))
    out0 = np.empty(n, _U32)
    out1 = np.empty(n, _U32)
    flat0 = np.broadcast_to(x1, shape).reshape(-1)
    flat1 = np.broadcast_to(x2, shape).reshape(-1)
    tmp = np.empty(min(n, CHUNK), _U32)
    for start in range(0, n, CHUNK):
        stop = min(start + CHUNK, n)
        a, b = out0[start:stop], out1[start:stop]
        a[...] = flat0[start:stop]
        b[...] = flat1[start:stop]
        _hash_chunk(a, b, tmp[:stop - start], schedule, k1, k2)
    return out0.reshape(shape), out1.reshape(shape)


def _hash_broadcast(k1, k2, x1, x2, shape):
    # Keys vary per element (e.g. a batch of keys under vmap): key words become arrays.
    k1, k2 = (np.ascontiguousarray(np.broadcast_to(k, shape)).reshape(-1) for k in (k1, k2))
    ks2 = k1 ^ k2 ^ _U32(KS_PARITY)
    schedule = _rounds_schedule(k1, k2, ks2)
    a = np.array(np.broadcast_to(x1, shape), _U32).reshape(-1)
    b = np.array(np.broadcast_to(x2, shape), _U32).reshape(-1)
    tmp = np.empty_like(a)
    _hash_chunk(a, b, tmp, schedule, k1, k2)
    return a.reshape(shape), b.reshape(shape)
