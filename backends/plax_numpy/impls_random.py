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

# Elements per chunk: the three live uint32 arrays of a chunk (384 KiB) stay in L2 cache
# (measured fastest between 2**15 and 2**16; an unchunked pass over 10M elements is 2x slower).
CHUNK = 1 << 15

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


# Below this many elements, Python integers beat a hundred tiny NumPy passes (key splitting,
# fold_in and small samples are all this size).
SMALL = 16


def _hash_pair(k1: int, k2: int, x1: int, x2: int) -> tuple[int, int]:
    """Threefry-2x32 of one counter pair with Python integers."""
    mask = 0xFFFFFFFF
    ks = (k1, k2, k1 ^ k2 ^ KS_PARITY)
    x1, x2 = (x1 + k1) & mask, (x2 + k2) & mask
    for i in range(5):
        for r in ROTATIONS[i % 2]:
            x1 = (x1 + x2) & mask
            x2 = (((x2 << r) | (x2 >> (32 - r))) & mask) ^ x1
        x1 = (x1 + ks[(i + 1) % 3]) & mask
        x2 = (x2 + ks[(i + 2) % 3] + i + 1) & mask
    return x1, x2


def _hash_small(k1, k2, x1, x2, shape):
    k1, k2, x1, x2 = (np.broadcast_to(a, shape).reshape(-1).tolist() for a in (k1, k2, x1, x2))
    pairs = [_hash_pair(*args) for args in zip(k1, k2, x1, x2)]
    out0 = np.array([p[0] for p in pairs], _U32).reshape(shape)
    out1 = np.array([p[1] for p in pairs], _U32).reshape(shape)
    return out0, out1


@impl(lax.threefry2x32_p, fresh=True)
def threefry2x32(k1, k2, x1, x2):
    """Threefry-2x32 of counters ``(x1, x2)`` under key ``(k1, k2)``; operands broadcast."""
    k1, k2, x1, x2 = (np.asarray(a, _U32) for a in (k1, k2, x1, x2))
    shape = np.broadcast_shapes(k1.shape, k2.shape, x1.shape, x2.shape)
    if int(np.prod(shape, dtype=np.int64)) <= SMALL:
        return _hash_small(k1, k2, x1, x2, shape)
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


# ------------------------------------------------------------------ random_gamma_grad

_CF_MAX_TERMS = 2000  # JAX's cap on continued-fraction terms


def _series_sample_derivative(a, x, live):
    """Power series in ``x`` (used where ``x <= max(1, a)``), iterated while any term matters."""
    eps = np.finfo(a.dtype).eps
    r, c, ans = a.copy(), np.ones_like(a), np.ones_like(a)
    dc_da, dans_da = np.zeros_like(a), np.zeros_like(a)
    live = live.copy()
    while live.any():
        i = np.nonzero(live)[0]
        r_i = r[i] + 1
        x_over_r = x[i] / r_i
        dc = dc_da[i] * x_over_r - (c[i] * x[i]) / (r_i * r_i)
        dans = dans_da[i] + dc
        c_i = c[i] * x_over_r
        r[i], dc_da[i], dans_da[i], c[i], ans[i] = r_i, dc, dans, c_i, ans[i] + c_i
        live[i] = np.abs(dc / dans) > eps
    dlogax_da = np.log(x) - _digamma(a + 1)
    return -(dans_da + ans * dlogax_da) * x / a


def _cf_sample_derivative(a, x, live):
    """Continued fraction (used where ``x > max(1, a)``), at most 2000 terms like JAX.

    Returns the derivative itself (JAX's helper returns its negation and the caller flips it).
    """
    eps = np.finfo(a.dtype).eps
    y = 1 - a
    z = x + y + 1
    pkm2, qkm2 = np.ones_like(x), x.copy()
    pkm1, qkm1 = x + 1, z * x
    ans = pkm1 / qkm1
    dpkm2, dqkm2, dpkm1 = np.zeros_like(x), np.zeros_like(x), np.zeros_like(x)
    dqkm1 = -x
    dans = (dpkm1 - ans * dqkm1) / qkm1
    live = live.copy()
    for count in range(1, _CF_MAX_TERMS + 1):
        if not live.any():
            break
        i = np.nonzero(live)[0]
        y[i] += 1
        z[i] += 2
        yc = y[i] * count
        pk = pkm1[i] * z[i] - pkm2[i] * yc
        qk = qkm1[i] * z[i] - qkm2[i] * yc
        nonzero = qk != 0
        safe_qk = np.where(nonzero, qk, 1)
        ans_i = np.where(nonzero, pk / safe_qk, ans[i])
        dpk = dpkm1[i] * z[i] - pkm1[i] - dpkm2[i] * yc + pkm2[i] * count
        dqk = dqkm1[i] * z[i] - qkm1[i] - dqkm2[i] * yc + qkm2[i] * count
        dans_i = np.where(nonzero, (dpk - ans_i * dqk) / safe_qk, dans[i])
        change = np.where(nonzero, np.abs(dans_i - dans[i]), 1)
        pkm2[i], pkm1[i], qkm2[i], qkm1[i] = pkm1[i], pk, qkm1[i], qk
        dpkm2[i], dqkm2[i], dpkm1[i], dqkm1[i] = dpkm1[i], dqkm1[i], dpk, dqk
        rescale = np.abs(pk) > 1 / eps
        for arr in (pkm2, pkm1, qkm2, qkm1, dpkm2, dqkm2, dpkm1, dqkm1):
            arr[i] = np.where(rescale, arr[i] * eps, arr[i])
        ans[i], dans[i] = ans_i, dans_i
        live[i] = change > eps
    dlogax_da = np.log(x) - _digamma(a)
    return (dans + ans * dlogax_da) * x


def _digamma(v):
    import scipy.special
    return scipy.special.psi(v).astype(v.dtype)


@impl(lax.random_gamma_grad_p, fresh=True)
def random_gamma_grad(a, x):
    """d(sample)/d(a) of gamma samples, by JAX's series / continued fraction, to convergence."""
    import scipy.special
    a, x = np.broadcast_arrays(np.asarray(a), np.asarray(x))
    shape, dtype = a.shape, a.dtype
    compute = np.float32 if dtype.itemsize < 4 else dtype
    a = a.astype(compute).reshape(-1)
    x = x.astype(compute).reshape(-1)
    with np.errstate(all="ignore"):
        is_nan = np.isnan(a) | np.isnan(x)
        x_is_zero = x == 0
        domain_error = (x < 0) | (a <= 0)
        use_cf = (x > 1) & (x > a)
        ax = a * np.log(x) - x - scipy.special.gammaln(a).astype(compute)
        underflow = ax < -np.log(np.finfo(compute).max)
        enabled = ~(x_is_zero | domain_error | underflow | is_nan)
        safe_x = np.where(enabled, x, 1).astype(compute)
        safe_a = np.where(enabled, a, 1).astype(compute)
        out = np.zeros_like(a)
        cf = enabled & use_cf
        series = enabled & ~use_cf
        if cf.any():
            out[cf] = _cf_sample_derivative(safe_a[cf], safe_x[cf], np.ones(cf.sum(), bool))
        if series.any():
            out[series] = _series_sample_derivative(safe_a[series], safe_x[series],
                                                    np.ones(series.sum(), bool))
        # disabled (underflowing) elements keep JAX's value: the formulas at their initial state
        rest = ~enabled & ~x_is_zero & ~domain_error & ~is_nan
        if rest.any():
            out[rest] = _initial_value(a[rest], x[rest], use_cf[rest])
        out = np.where(domain_error | is_nan, np.nan, out)
    return out.astype(dtype).reshape(shape)


def _initial_value(a, x, use_cf):
    """The derivative formulas evaluated without any iteration (for underflowing elements)."""
    none = np.zeros(a.shape, bool)
    series = _series_sample_derivative(a, x, none)
    cf = _cf_sample_derivative(a, x, none)
    return np.where(use_cf, cf, series)
