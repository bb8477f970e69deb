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
