"""Conformance specs of the PRNG primitives: threefry2x32 and random_gamma_grad.

The threefry reference is an independent pure-Python Threefry-2x32 (20 rounds) on Python
ints; the random_gamma_grad reference is implicit differentiation of the gamma CDF with
SciPy in float64: d sample / d a = -(dP/da) / (dP/dx), P the regularised incomplete gamma.
"""
from __future__ import annotations

import math

import numpy as np
import scipy.special as sps

from plax import lax

from .harness import FLOAT, Case, Spec, as_dtype, f64, rand

SPECS: list[Spec] = []

_MASK = 0xFFFFFFFF
_ROT = ((13, 15, 26, 6), (17, 29, 16, 24))


def _rotl(v: int, r: int) -> int:
    return ((v << r) | (v >> (32 - r))) & _MASK


def _threefry_one(k1: int, k2: int, x1: int, x2: int) -> tuple[int, int]:
    ks = (k1, k2, k1 ^ k2 ^ 0x1BD11BDA)
    x1, x2 = (x1 + ks[0]) & _MASK, (x2 + ks[1]) & _MASK
    for block in range(5):
        for r in _ROT[block % 2]:
            x1 = (x1 + x2) & _MASK
            x2 = _rotl(x2, r) ^ x1
        x1 = (x1 + ks[(block + 1) % 3]) & _MASK
        x2 = (x2 + ks[(block + 2) % 3] + block + 1) & _MASK
    return x1, x2


def _threefry_ref(k1, k2, x1, x2):
    k1, k2, x1, x2 = np.broadcast_arrays(*(np.asarray(a, np.uint32) for a in (k1, k2, x1, x2)))
    y1 = np.zeros(k1.shape, np.uint32)
    y2 = np.zeros(k1.shape, np.uint32)
    for idx in np.ndindex(k1.shape):
        y1[idx], y2[idx] = _threefry_one(int(k1[idx]), int(k2[idx]), int(x1[idx]), int(x2[idx]))
    return [y1, y2]


def _threefry_cases(d):
    def full_range(rng, shape):
        return rng.integers(0, 2**32, size=shape, dtype=np.uint64).astype(np.uint32)

    cases = []
    for kshape, xshape in (((), ()), ((), (5,)), ((2, 3), (2, 3)), ((), (0,)), ((4,), ())):
        cases.append(Case({}, lambda rng, ks=kshape, xs=xshape: [
            full_range(rng, ks), full_range(rng, ks), full_range(rng, xs), full_range(rng, xs)],
            _threefry_ref, f"keys{list(kshape)} counters{list(xshape)}", exact_bits=True))
    # the Random123 known-answer vectors
    kat = [np.array([0, 0xFFFFFFFF, 0x13198A2E], np.uint32),
           np.array([0, 0xFFFFFFFF, 0x03707344], np.uint32),
           np.array([0, 0xFFFFFFFF, 0x243F6A88], np.uint32),
           np.array([0, 0xFFFFFFFF, 0x85A308D3], np.uint32)]
    cases.append(Case({}, lambda rng: kat, _threefry_ref, "Random123 vectors", exact_bits=True,
                      vmap=False))
    return cases


SPECS.append(Spec(lax.threefry2x32_p, ("uint32",), _threefry_cases, nondiff=True,
                  vmap_dtype="uint32"))


def _gamma_grad_ref(a, x):
    a, x = f64(a), f64(x)
    h = 1e-6 * np.maximum(a, 1.0)
    dP_da = (sps.gammainc(a + h, x) - sps.gammainc(a - h, x)) / (2 * h)
    dP_dx = np.exp((a - 1) * np.log(x) - x - sps.gammaln(a))
    return -dP_da / dP_dx


def _gamma_grad_cases(d):
    # the reference differentiates SciPy's gammainc numerically: about 1e-8 relative accuracy
    tol = {"float16": 8, "bfloat16": 8, "float64": 2e4}.get(np.dtype(d).name, 50)
    cases = []
    for shape_a, shape_x in (((), ()), ((6,), (6,)), ((), (2, 3)), ((0,), (0,))):
        cases.append(Case({}, lambda rng, sa=shape_a, sx=shape_x: [
            rand(rng, sa, d, 0.6, 5.0), rand(rng, sx, d, 0.2, 6.0)],
            lambda a, x: as_dtype(_gamma_grad_ref(a, x), d),
            f"a{list(shape_a)} x{list(shape_x)}", tol_scale=tol))
    return cases


SPECS.append(Spec(lax.random_gamma_grad_p, FLOAT, _gamma_grad_cases, no_jvp=True))

del math


# ------------------------------------------------------------------ rng_bit_generator
# The reference computes each output element on its own with Python ints, from XLA's
# description of its generators (the layout of outputs over counters, not the kernel's
# reshapes): Threefry-2x32 keyed by s0 over counters s1 + i, Philox-4x32 (10 rounds) keyed
# by s0 over the 128-bit counter (s0:s1) + i.

_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def _philox_one(k0: int, k1: int, x: tuple) -> tuple:
    x0, x1, x2, x3 = x
    for _ in range(10):
        p0, p1 = x0 * _PHILOX_M[0], x2 * _PHILOX_M[1]
        x0, x1, x2, x3 = ((p1 >> 32) ^ x1 ^ k0, p1 & _MASK, (p0 >> 32) ^ x3 ^ k1, p0 & _MASK)
        k0, k1 = (k0 + _PHILOX_W[0]) & _MASK, (k1 + _PHILOX_W[1]) & _MASK
    return x0, x1, x2, x3


def _rbg_ref(key, *, shape, dtype, algorithm):
    k = [int(v) for v in np.asarray(key)]
    s0, s1 = (k[0] | k[1] << 32, k[2] | k[3] << 32) if len(k) == 4 else (k[0], k[1])
    dtype = np.dtype(dtype)
    wide = dtype.itemsize == 8
    n = int(np.prod(shape, dtype=np.int64))
    out = np.zeros(shape, dtype)
    if algorithm == lax.RandomAlgorithm.RNG_THREE_FRY:
        tf = lambda c: _threefry_one(s0 & _MASK, s0 >> 32, c & _MASK, (c >> 32) & _MASK)
        if wide:
            for f, idx in enumerate(np.ndindex(*shape)):
                y = tf((s1 + f) % 2**64)
                out[idx] = y[0] | y[1] << 32
            advance = n
        elif not shape:
            out[()] = tf(s1)[0] & (2 ** (8 * dtype.itemsize) - 1)
            advance = 1
        else:
            axis = next((i for i, d in enumerate(shape) if d % 2 == 0),
                        max(range(len(shape)), key=lambda i: (shape[i], -i)))
            half = list(shape)
            half[axis] = -(-shape[axis] // 2)
            for idx in np.ndindex(*shape):
                h = list(idx)
                h[axis] //= 2
                c = int(np.ravel_multi_index(h, half)) if n else 0
                out[idx] = tf((s1 + c) % 2**64)[idx[axis] % 2] & (2 ** (8 * dtype.itemsize) - 1)
            advance = int(np.prod(half, dtype=np.int64))
    else:  # Philox, RNG_DEFAULT included
        per = 2 if wide else 4
        base = s0 << 64 | s1
        for f, idx in enumerate(np.ndindex(*shape)):
            c = (base + f // per) % 2**128
            lo, hi = c & (2**64 - 1), c >> 64
            w = _philox_one(s0 & _MASK, s0 >> 32, (lo & _MASK, lo >> 32, hi & _MASK, hi >> 32))
            if wide:
                out[idx] = w[2 * (f % 2)] | w[2 * (f % 2) + 1] << 32
            else:
                out[idx] = w[f % 4] & (2 ** (8 * dtype.itemsize) - 1)
        advance = -(-n // per)
    s1 = (s1 + advance) % 2**64
    if len(k) == 4:
        new = np.array([s0 & _MASK, s0 >> 32, s1 & _MASK, s1 >> 32], np.uint32)
    else:
        new = np.array([s0, s1], np.uint64)
    return [new, out]


def _rbg_cases(d):
    def key_sampler(carry: bool):
        def sample(rng):
            key = rng.integers(0, 2**32, size=4, dtype=np.uint64).astype(np.uint32)
            if carry:  # the counter word at its maximum: Philox's 128-bit carry
                key[2:] = 0xFFFFFFFF
            return [key]
        return sample

    cases = []
    for algorithm in lax.RandomAlgorithm:
        for bits in ("uint8", "uint16", "uint32"):
            for shape in ((), (5,), (4, 3), (3, 5), (3, 1, 5), (2, 0)):
                params = dict(shape=shape, dtype=np.dtype(bits), algorithm=algorithm,
                              out_sharding=None)
                cases.append(Case(params, key_sampler(shape == (3, 5)),
                                  lambda k, p=params: _rbg_ref(
                                      k, shape=p["shape"], dtype=p["dtype"],
                                      algorithm=p["algorithm"]),
                                  f"{algorithm.name} {bits}{list(shape)}", exact_bits=True,
                                  vmap=False))  # JAX's vmap rule is not a loop (tests/lax)
    return cases


SPECS.append(Spec(lax.rng_bit_generator_p, ("uint32",), _rbg_cases, nondiff=True,
                  vmap_dtype="uint32"))
