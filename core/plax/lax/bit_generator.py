"""``rng_bit_generator``: XLA's stateless bit generator (``jax.lax.rng_bit_generator``), bit for
bit as JAX on CPU produces it.

The state is 128 bits, given as ``uint32[4]`` (JAX's usual form, read as two little-endian
64-bit words ``s0 = k[0] | k[1] << 32``, ``s1 = k[2] | k[3] << 32``) or as ``uint64[2]``. The
result is ``(new_state, bits)``. The algorithms are XLA's (its ``RngBitGeneratorExpander``
and ``ThreeFryBitGenerator``/``PhiloxBitGenerator``), which JAX-CPU runs:

* ``RNG_THREE_FRY``: Threefry-2x32 (20 rounds) keyed by ``s0``; the counters are ``s1 +
  i``. 32-bit outputs come two per counter: the requested shape is halved along its first
  even axis (else its longest one), each half element ``i`` hashed, and its two output words
  laid side by side along that axis. 64-bit outputs are one counter each (its two words as
  one ``uint64``). ``s1`` advances by the number of counters.
* ``RNG_PHILOX`` (and ``RNG_DEFAULT``, which is Philox on XLA's CPU and GPU backends):
  Philox-4x32 (10 rounds) keyed by ``s0``; the 128-bit counter is ``(s1, s0)`` (low word
  ``s1``) plus ``i``, each giving four 32-bit outputs in order (two 64-bit ones for 64-bit
  requests). The new state is ``(s0, s1 + number of counters)``.
* 8- and 16-bit outputs are the low bits of the 32-bit ones.

The kernel, :func:`generate`, is written once over an array module (NumPy on the CPU
backends, CuPy on the GPU: the state never leaves the device).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from plax import dtypes
from plax.core.primitive import Primitive
from plax.core.shaped_array import ShapedArray
from plax.lax.base import asarray, canonicalize_shape
from plax.lax.extras import RandomAlgorithm
from plax.lax.random_bits import KS_PARITY, ROTATIONS
from plax.core import registry
from plax.transforms.jvp import defzero

__all__ = ["rng_bit_generator", "rng_bit_generator_p", "RandomAlgorithm", "generate"]

#: the dtypes rng_bit_generator produces (JAX's list)
BIT_DTYPES = tuple(np.dtype(d) for d in ("uint8", "uint16", "uint32", "uint64"))

rng_bit_generator_p = Primitive("rng_bit_generator", multiple_results=True)


@rng_bit_generator_p.def_abstract_eval
def _abstract_eval(key, *, shape, dtype, algorithm, out_sharding):
    if not ((key.dtype == np.uint32 and key.shape == (4,))
            or (key.dtype == np.uint64 and key.shape == (2,))):
        raise TypeError(f"rng_bit_generator: the key (state) must be a uint32[4] array (or "
                        f"uint64[2]), got a {key.dtype.name} array of shape {key.shape}. Make one with "
                        "jnp.array([a, b, c, d], dtype=jnp.uint32), or use plax.random.")
    if np.dtype(dtype) not in BIT_DTYPES:
        raise TypeError(f"rng_bit_generator: unsupported dtype {np.dtype(dtype)}")
    return (ShapedArray(key.shape, key.dtype, key.weak_type),
            ShapedArray(tuple(shape), np.dtype(dtype), False))


defzero(rng_bit_generator_p)  # integer outputs: zero (float0) tangents


@registry.register_rule("batch", rng_bit_generator_p)
def _batch(vals, dims, *, shape, dtype, algorithm, out_sharding):
    # JAX's rule: the first member's key makes the bits of the whole batch (one call with a
    # leading batch axis), and only that member's key advances.
    from plax import lax
    from plax.transforms.batching import move_axis_to
    (keys,), (dim,) = vals, dims
    params = dict(shape=shape, dtype=dtype, algorithm=algorithm, out_sharding=out_sharding)
    if dim is None:
        return rng_bit_generator_p.bind(keys, **params), [None, None]
    size = keys.shape[dim] if hasattr(keys, "shape") else np.shape(keys)[dim]
    keys = move_axis_to(keys, dim, 0, size)
    params["shape"] = (size, *shape)
    new_key, bits = rng_bit_generator_p.bind(lax.index_in_dim(keys, 0, keepdims=False), **params)
    new_keys = lax.dynamic_update_index_in_dim(keys, new_key, 0, 0)
    return [new_keys, bits], [0, 0]


def rng_bit_generator(key, shape, dtype=np.uint32, algorithm=RandomAlgorithm.RNG_DEFAULT,
                      *, out_sharding=None):
    """Random bits from XLA's stateless generator, and the advanced state (JAX's
    ``lax.rng_bit_generator``, bit for bit as JAX on CPU).

    Most code should use :mod:`plax.random`; this is the low-level generator.

    Args:
      key: the state, a ``uint32[4]`` array (or ``uint64[2]``).
      shape: the shape of the bits.
      dtype: ``uint8``, ``uint16``, ``uint32`` (default) or ``uint64`` (``uint32`` with a
        warning when x64 is off).
      algorithm: a :class:`RandomAlgorithm`: ``RNG_THREE_FRY``, ``RNG_PHILOX`` or
        ``RNG_DEFAULT`` (Philox).
      out_sharding: a sharding (or PartitionSpec on the current mesh) for the bits.

    Returns:
      ``(new_key, bits)``: the state to pass next, and the bits.

    Raises:
      TypeError: an unsupported dtype, or a key that is not ``uint32[4]``/``uint64[2]``.

    Example:
      >>> key = jnp.array([1, 2, 3, 4], dtype=jnp.uint32)
      >>> new_key, bits = lax.rng_bit_generator(key, (3,))
      >>> new_key
      Array([1, 2, 4, 4], dtype=uint32)
      >>> bits
      Array([ 512747620, 1298009047, 1267190206], dtype=uint32)
    """
    shape = canonicalize_shape(shape, "in rng_bit_generator")
    dtype = dtypes.check_user_dtype(dtype, "rng_bit_generator")
    if dtype not in BIT_DTYPES:
        raise TypeError(f"rng_bit_generator: unsupported dtype {dtype}")
    algorithm = RandomAlgorithm(algorithm)
    new_key, bits = rng_bit_generator_p.bind(asarray(key), shape=shape, dtype=dtype,
                                             algorithm=algorithm, out_sharding=None)
    if out_sharding is not None:
        from plax.sharding import reshard
        bits = reshard(bits, out_sharding)
    return new_key, bits


# ------------------------------------------------------------------ the kernel, for any xp

_MASK32 = 0xFFFFFFFF
_PHILOX_MUL = (0xD2511F53, 0xCD9E8D57)
_PHILOX_WEYL = (0x9E3779B9, 0xBB67AE85)


def generate(xp: Any, key, shape: tuple, dtype, algorithm) -> list:
    """``[new_key, bits]`` of ``rng_bit_generator`` computed with the array module ``xp``
    (``numpy``, or ``cupy`` on device buffers): the kernel of every backend.

    Args:
      xp: the array module of ``key``.
      key: the state buffer, ``uint32[4]`` or ``uint64[2]``.
      shape, dtype, algorithm: the primitive's parameters.

    Returns:
      The new state (as ``key``'s dtype and shape) and the bits.

    Example:
      >>> generate(np, np.array([1, 2, 3, 4], np.uint32), (2,), np.uint32,
      ...          RandomAlgorithm.RNG_THREE_FRY)[1]
      array([1576285164, 2249660814], dtype=uint32)
    """
    dtype = np.dtype(dtype)
    u64 = xp.uint64
    wide = key.astype(u64)  # words kept as 1-element arrays: array arithmetic wraps silently
    if key.dtype == np.uint32:
        s0 = wide[0:1] | (wide[1:2] << u64(32))
        s1 = wide[2:3] | (wide[3:4] << u64(32))
    else:
        s0, s1 = wide[0:1], wide[1:2]
    word_dtype = np.dtype(np.uint64) if dtype == np.uint64 else np.dtype(np.uint32)
    if RandomAlgorithm(algorithm) == RandomAlgorithm.RNG_THREE_FRY:
        bits, advance = _threefry_bits(xp, s0, s1, shape, word_dtype)
    else:  # RNG_PHILOX, and RNG_DEFAULT as XLA's CPU and GPU backends choose it
        bits, advance = _philox_bits(xp, s0, s1, shape, word_dtype)
    bits = bits.astype(dtype)  # 8 and 16 bits: the low bits of the 32-bit words
    s1 = s1 + u64(advance)
    if key.dtype == np.uint32:
        new_key = xp.concatenate([s0 & u64(_MASK32), s0 >> u64(32), s1 & u64(_MASK32),
                                  s1 >> u64(32)]).astype(xp.uint32)
    else:
        new_key = xp.concatenate([s0, s1])
    return [new_key, bits]


def _words(xp, x):
    """The low and high 32-bit words of uint64 ``x``."""
    u64 = xp.uint64
    return (x & u64(_MASK32)).astype(xp.uint32), (x >> u64(32)).astype(xp.uint32)


def _join(xp, lo, hi):
    """uint64 from 32-bit words."""
    return lo.astype(xp.uint64) | (hi.astype(xp.uint64) << xp.uint64(32))


def _threefry2x32(xp, k0, k1, x0, x1):
    u32 = xp.uint32
    ks = (k0, k1, k0 ^ k1 ^ u32(KS_PARITY))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for block in range(5):
        for r in ROTATIONS[block % 2]:
            x0 = x0 + x1
            x1 = ((x1 << u32(r)) | (x1 >> u32(32 - r))) ^ x0
        x0 = x0 + ks[(block + 1) % 3]
        x1 = x1 + ks[(block + 2) % 3] + u32(block + 1)
    return x0, x1


def _halved(shape: tuple) -> tuple[int, int]:
    """Where XLA halves a shape for 32-bit Threefry output: the first even axis, else the
    longest (first of equals); returns (axis, half length)."""
    axis = next((i for i, d in enumerate(shape) if d % 2 == 0), None)
    if axis is None:
        axis = max(range(len(shape)), key=lambda i: (shape[i], -i))
    return axis, -(-shape[axis] // 2)


def _threefry_bits(xp, s0, s1, shape: tuple, word_dtype: np.dtype):
    k0, k1 = _words(xp, s0)
    if word_dtype == np.uint64:  # one counter per element, both words kept
        n = math.prod(shape)
        y0, y1 = _threefry2x32(xp, k0, k1, *_words(xp, s1 + xp.arange(n, dtype=xp.uint64)))
        return _join(xp, y0, y1).reshape(shape), n
    if not shape:  # a scalar: one counter, its first word
        y0, _ = _threefry2x32(xp, k0, k1, *_words(xp, s1 + xp.zeros(1, dtype=xp.uint64)))
        return y0.reshape(()), 1
    axis, half = _halved(shape)
    half_shape = shape[:axis] + (half, 1) + shape[axis + 1:]
    n = math.prod(half_shape)
    counters = (s1 + xp.arange(n, dtype=xp.uint64)).reshape(half_shape)
    y0, y1 = _threefry2x32(xp, k0, k1, *_words(xp, counters))
    both = xp.concatenate([y0, y1], axis=axis + 1)  # the two words side by side
    padded = shape[:axis] + (2 * half,) + shape[axis + 1:]
    out = both.reshape(padded)
    if padded[axis] != shape[axis]:
        out = out[(slice(None),) * axis + (slice(0, shape[axis]),)]
    return out, n


def _philox4x32(xp, words, k0, k1):
    u32, u64 = xp.uint32, xp.uint64
    x0, x1, x2, x3 = words
    for _ in range(10):
        p0 = x0.astype(u64) * u64(_PHILOX_MUL[0])
        p1 = x2.astype(u64) * u64(_PHILOX_MUL[1])
        lo0, hi0 = _words(xp, p0)
        lo1, hi1 = _words(xp, p1)
        x0, x1, x2, x3 = hi1 ^ x1 ^ k0, lo1, hi0 ^ x3 ^ k1, lo0
        k0, k1 = k0 + u32(_PHILOX_WEYL[0]), k1 + u32(_PHILOX_WEYL[1])
    return x0, x1, x2, x3


def _philox_bits(xp, s0, s1, shape: tuple, word_dtype: np.dtype):
    n = math.prod(shape)
    per_counter = 2 if word_dtype == np.uint64 else 4
    counters = -(-n // per_counter)
    step = xp.arange(counters, dtype=xp.uint64)
    lo = s1 + step  # the 128-bit counter (s1 low, s0 high) plus i, carried
    hi = s0 + (lo < s1).astype(xp.uint64)
    k0, k1 = _words(xp, s0)
    out = _philox4x32(xp, (*_words(xp, lo), *_words(xp, hi)), k0, k1)
    if word_dtype == np.uint64:
        out = (_join(xp, out[0], out[1]), _join(xp, out[2], out[3]))
    flat = xp.stack(out, axis=1).reshape(-1)[:n]  # each counter's outputs in order
    return flat.reshape(shape), counters
