"""Batched ``while`` loops whose elements run independently run over their active elements
only, in blocks (plax_numba.active_blocks): the form is taken where it applies (the kernel's
source says so), not where the body mixes elements, and the values are the NumPy backend's,
bit for bit. Small blocks (16 elements, batches from 32) keep the programs cheap; a batch
that is not a multiple of the block size ends in a short block. (``random.gamma``'s nested
rejection loops in blocks: tests/numba/test_large_native_loops.py.)"""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax
from plax import numpy as jnp

from plax_numba import active_blocks
from numba_vs_numpy import assert_bits_equal, jit_both

MARK = "the while loop over its active elements, 16 at a time"


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(active_blocks, "BLOCK", 16)
    monkeypatch.setattr(active_blocks, "MIN_SIZE", 32)


def _text(f, *args) -> str:
    return plax.jit(f, backend="numba").lower(*args).compile().as_text()


def _collatz(v):  # different trip counts per element (0 for v == 1)
    def step(s):
        v, n = s
        return jnp.where(v % 2 == 0, v // 2, 3 * v + 1), n + 1
    return lax.while_loop(lambda s: s[0] != 1, step, (v, jnp.int32(0)))


def _newton(c, scale):  # cube roots: c per element (batched), scale shared (unbatched)
    def body(s):
        v, n = s
        return v - (v * v * v - c) / (3 * v * v) * scale.sum(), n + 1
    return lax.while_loop(lambda s: (jnp.abs(s[0] * s[0] * s[0] - c) > 1e-4 * c) & (s[1] < 50),
                          body, (c, 0))


def test_vmapped_collatz_runs_active_elements_in_blocks():
    x = np.arange(1, 101, dtype=np.int32)   # 100 elements: six blocks and a short one
    f = plax.vmap(_collatz)
    assert MARK in _text(f, x)
    got, want = jit_both(f, x, fallback_is_error=True)
    for g, w in zip(got, want):
        assert_bits_equal(g, w)
    assert got[1][26] == 111   # (27 takes 111 steps)


def test_vmapped_newton_with_batched_and_shared_constants():
    c = np.linspace(0.5, 80.0, 45).astype(np.float32)
    scale = np.array([0.5, 0.25, 0.25], np.float32)
    f = plax.vmap(_newton, in_axes=(0, None))
    assert MARK in _text(f, c, scale)
    got, want = jit_both(f, c, scale, fallback_is_error=True)
    for g, w in zip(got, want):
        assert_bits_equal(g, w)
    np.testing.assert_allclose(got[0], np.cbrt(c), rtol=1e-3)


def _mixing(x):  # a batched loop whose body reads a neighbour: not element by element
    return lax.while_loop(lambda s: jnp.any(s < 50.0),
                          lambda s: jnp.where(s < 50.0, s + jnp.roll(s, 1) * 0.5 + 1.0, s), x)


def test_loop_mixing_elements_keeps_the_whole_batch_form():
    x = np.linspace(0.0, 40.0, 40).astype(np.float32)
    text = _text(_mixing, x)
    assert "while True:" in text and "active elements" not in text
    got, want = jit_both(_mixing, x, fallback_is_error=True)
    assert_bits_equal(got[0], want[0])
