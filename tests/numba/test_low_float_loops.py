"""float16 and bfloat16 carries and per-step inputs in the Numba backend's native loops
(:mod:`plax_numba.wholegen`): ``scan``, ``fori_loop`` and ``while_loop`` over them compile as
one njit function instead of the Python loop around compiled bodies. Arrays of them live as
uint16 bit patterns and rank-0 values as float32 locals, and every operation rounds once to
the narrow format, so each step's carry is the NumPy backend's bit for bit (the reference
rounds at every step too; a loop that kept float32 carries would drift from it within a few
steps, which the long accumulations below would show).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import plax
from plax import lax, numpy as jnp
from plax.dtypes import bfloat16
from plax.lowering import PlaxFallbackWarning

from numba_vs_numpy import assert_bits_equal

LOW = [np.dtype(np.float16), np.dtype(bfloat16)]
_NAME = {np.dtype(np.float16): "f16", np.dtype(bfloat16): "bf16"}


def _run_both(f, *args):
    """``f`` jitted on the Numba backend (no fallback or not-native warning allowed) and on
    the NumPy backend: the leaves of each, and the Numba program's text."""
    jf = plax.jit(f, backend="numba")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaxFallbackWarning)
        warnings.filterwarnings("error", message=".*native.*")
        got = jf(*args)
    want = plax.jit(f, backend="numpy")(*args)
    leaves = plax.tree_util.tree_leaves
    return ([np.asarray(x) for x in leaves(got)], [np.asarray(x) for x in leaves(want)],
            jf.lower(*args).compile().as_text())


def _same(got, want):
    for g, w in zip(got, want):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        if g.dtype == bfloat16:  # (kind "V": compared through float32, which holds it exactly)
            g, w = g.astype(np.float32), w.astype(np.float32)
        assert_bits_equal(g, w)


def _cell(carry, x):
    h, s = carry
    h = jnp.tanh(h * 0.75 + x) * 1.5        # array carry, rounded each step
    s = s + x.sum() * 0.01 + 0.1            # scalar carry: a reduction and a long sum
    return (h, s), (h * 2.0, s)             # a stacked array and a stacked scalar


@pytest.mark.parametrize("dtype,reverse", [(LOW[0], False), (LOW[1], True)], ids=str)
def test_scan_with_narrow_carries_is_native_and_bit_equal(dtype, reverse):
    xs = np.random.default_rng(0).standard_normal((300, 8)).astype(dtype)
    h, s = np.zeros(8, dtype), np.asarray(0.5, dtype)

    def f(h, s, xs):
        return lax.scan(_cell, (h, s), xs, reverse=reverse)
    got, want, text = _run_both(f, h, s, xs)
    assert "for it" in text and "def kernel" in text, text  # one native loop
    assert f"{_NAME[dtype]}_bits(" in text and "np.uint16" in text
    _same(got, want)


@pytest.mark.parametrize("dtype", [LOW[0]], ids=str)  # (bfloat16 loops: the scan tests)
def test_fori_and_while_loops_with_narrow_carries(dtype):
    def f(x, t):
        def body(i, c):
            v, acc = c
            # (int32 -> float16 is one rounding through float32; bfloat16 would round
            # twice above 2**24, so it converts from int16)
            k = i if v.dtype == jnp.float16 else i.astype(jnp.int16)
            v = v * 0.5 + jnp.sin(v) + k.astype(v.dtype) * 0.125
            return v, acc + v.max() * 0.01
        v, acc = lax.fori_loop(0, 200, body, (x, t))

        def cond(c):
            return c[1] < 300.0

        def grow(c):
            return c[0] * 1.01, c[1] * 1.1 + 1.0
        w, u = lax.while_loop(cond, grow, (v, acc))
        return v, acc, w, u
    x = np.linspace(-2, 2, 16).astype(dtype)
    got, want, text = _run_both(f, x, np.asarray(0.0, dtype))
    assert "while True:" in text and "for it" in text, text
    _same(got, want)


@pytest.mark.parametrize("dtype", [LOW[1]], ids=str)
def test_scan_structural_ops_on_narrow_arrays(dtype):
    # slices, concatenation, padding, reshapes and dynamic slices of uint16 bit arrays, a
    # scalar pulled out of an array and broadcast back, an iota of the format
    def f(c, xs):
        def step(c, x):
            r = jnp.concatenate([c[1:], c[:1] * 2.0])
            r = r + lax.dynamic_slice(x, (1,), (6,))
            r = r + jnp.pad(x[2:6], (1, 1), constant_values=0.25) + jnp.arange(6, dtype=dtype)
            first = r.reshape(2, 3)[0, 0]
            return r.reshape(2, 3).T.reshape(6) * 0.5 + first, first
        return lax.scan(step, c, xs)
    xs = np.random.default_rng(1).standard_normal((40, 8)).astype(dtype)
    got, want, text = _run_both(f, np.ones(6, dtype), xs)
    assert "for it" in text
    _same(got, want)


@pytest.mark.parametrize("dtype", [LOW[1]], ids=str)  # (float16: the fori/while test)
def test_cond_on_narrow_scalars(dtype):
    # only rank-0 values: the kernel rounds (round_f16/round_bf16) but never converts bits,
    # and still imports the conversions
    def f(x, y):
        return lax.cond(x > y, lambda a, b: a * 3.0 - b, lambda a, b: (a - 1.0) / b, x, y)
    for x in (np.asarray(1.3, dtype), np.asarray(-0.7, dtype)):
        got, want, text = _run_both(f, x, np.asarray(0.1, dtype))
        assert "if " in text, text
        _same(got, want)


def test_round_f16_equals_the_bit_form_everywhere():
    # round_f16 rounds in float32 arithmetic (fast in loops that do not vectorise): the same
    # bits as NumPy's float16 cast on every float16 value, the midpoints between neighbours
    # and the float32s next to them, random float32 patterns and the specials
    from numba import njit
    from plax_numba.scalar import round_f16

    @njit(error_model="numpy")
    def run(x):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = round_f16(x[i])
        return out
    exact = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)
    fin = np.sort(exact[np.isfinite(exact)])
    mid = ((fin[:-1].astype(np.float64) + fin[1:]) / 2).astype(np.float32)
    rnd = np.random.default_rng(1).integers(0, 1 << 32, 500_000, dtype=np.uint64)
    x = np.concatenate([exact, mid, np.nextafter(mid, np.float32(np.inf)),
                        np.nextafter(mid, -np.float32(np.inf)),
                        rnd.astype(np.uint32).view(np.float32),
                        np.float32([65519.99, 65520.0, -65520.0, 65536.0, 3.4e38, -3.4e38,
                                    np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45])])
    got = run(x)
    with np.errstate(all="ignore"):
        want = x.astype(np.float16).astype(np.float32)
    assert_bits_equal(got, want)
