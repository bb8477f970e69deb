"""The Array API 2023.12 type-promotion rules, pair by pair, through plax.numpy.

The standard's table (``TABLE`` below, written from its "Type Promotion Rules" section) fixes
the result dtype for two arrays of the same kind (bool, signed, unsigned, the mixed signed /
unsigned pairs it lists, and the inexact kinds among themselves, real with complex included);
mixed-kind pairs it leaves to the library (plax follows JAX there, checked against the
recorded JAX table elsewhere). Each listed pair is checked on ``result_type``, on arithmetic
functions, on operators and on a comparison's operands, in both orders. The rules for Python
scalars with arrays come last."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import plax
from plax import numpy as jnp

B = "bool"
I8, I16, I32, I64 = "int8", "int16", "int32", "int64"
U8, U16, U32, U64 = "uint8", "uint16", "uint32", "uint64"
F32, F64, C64, C128 = "float32", "float64", "complex64", "complex128"

SIGNED = [I8, I16, I32, I64]
UNSIGNED = [U8, U16, U32, U64]
INEXACT = [F32, F64, C64, C128]


def _table() -> dict:
    t = {(B, B): B}
    width = {d: int(d.lstrip("uint")) for d in SIGNED + UNSIGNED}
    for a, b in itertools.product(SIGNED, SIGNED):
        t[a, b] = max(a, b, key=width.get)
    for a, b in itertools.product(UNSIGNED, UNSIGNED):
        t[a, b] = max(a, b, key=width.get)
    # mixed signed/unsigned: the smallest signed type holding both (none for uint64)
    for u, i in itertools.product([U8, U16, U32], SIGNED):
        need = max(2 * width[u], width[i])
        if need <= 64:
            t[u, i] = t[i, u] = f"int{need}"
    real_bits = {F32: 32, F64: 64, C64: 32, C128: 64}
    for a, b in itertools.product(INEXACT, INEXACT):
        bits = max(real_bits[a], real_bits[b])
        complex_ = a.startswith("complex") or b.startswith("complex")
        t[a, b] = (f"complex{2 * bits}" if complex_ else f"float{bits}")
    return t


TABLE = _table()


@pytest.fixture(autouse=True)
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


def test_table_matches_the_standard_examples():
    # spot checks of the standard's own table entries
    assert TABLE[U8, I8] == I16 and TABLE[U16, I8] == I32 and TABLE[U32, I64] == I64
    assert TABLE[F32, C128] == C128 and TABLE[F64, C64] == C128 and TABLE[I16, I64] == I64
    assert (U64, I8) not in TABLE
    assert len(TABLE) == 1 + 16 + 16 + 2 * 12 + 16   # bool, signed, unsigned, mixed, inexact


@pytest.mark.parametrize("pair", sorted(TABLE), ids=lambda p: f"{p[0]}+{p[1]}")
def test_array_array_promotion(pair):
    a, b = pair
    want = np.dtype(TABLE[pair])
    assert jnp.result_type(jnp.dtype(a), jnp.dtype(b)) == want
    x = jnp.ones((2,), dtype=a)
    y = jnp.ones((2,), dtype=b)
    assert jnp.result_type(x, y) == want
    if a != B or b != B:
        assert jnp.add(x, y).dtype == want
        assert jnp.multiply(y, x).dtype == want
        assert (x - y).dtype == want if want != np.dtype(bool) else True
        assert (y * x).dtype == want
    else:
        assert jnp.logical_and(x, y).dtype == want
        assert (x & y).dtype == want
    assert jnp.equal(x, y).dtype == np.dtype(bool)
    assert jnp.maximum(x, y).dtype == want if a != B else True
    assert jnp.where(jnp.asarray([True, False]), x, y).dtype == want
    if jnp.issubdtype(want, jnp.inexact):
        assert jnp.divide(x, y).dtype == want
        assert jnp.pow(x, y).dtype == want


SCALARS = [
    # (array dtype, Python scalar, result dtype): the array's dtype wins within its kind
    (I8, 1, I8), (U16, 2, U16), (I64, 3, I64), (F32, 1.5, F32), (F64, 2, F64),
    (F32, 1, F32), (C64, 1.5, C64), (C128, 2, C128), (B, True, B), (C64, 1j, C64),
    (C128, 1j, C128),
    # 2023.12: a Python complex with a real floating array gives the complex dtype of the
    # array's precision
    (F32, 1j, C64), (F64, 1j, C128),
]


@pytest.mark.parametrize("dtype,scalar,want", SCALARS,
                         ids=[f"{d}+{type(s).__name__}" for d, s, _ in SCALARS])
def test_array_scalar_promotion(dtype, scalar, want):
    x = jnp.ones((3,), dtype=dtype)
    if dtype == B:
        assert (x & scalar).dtype == np.dtype(want)
        assert jnp.logical_or(x, scalar).dtype == np.dtype(want)
        return
    assert (x + scalar).dtype == np.dtype(want)
    assert (scalar * x).dtype == np.dtype(want)
    assert jnp.add(x, scalar).dtype == np.dtype(want)
    assert (x == scalar).dtype == np.dtype(bool)
