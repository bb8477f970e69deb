"""Broadcasts of literals made once when the program is built (issue 26, item 1's scan row):
``scan(f, zeros(64), xs)``'s carry init is a read-only constant the program hands to the
native loop, not a NumPy ``full`` per call. Values equal the NumPy backend's."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax
from plax import numpy as jnp

from numba_vs_numpy import assert_bits_equal, jit_both
from plax_numba.emitter import CONSTANT_MAX, constant_step


def _scan_tanh(xs):
    return lax.scan(lambda c, x: (jnp.tanh(c * 0.9 + x), c), jnp.zeros(64), xs)


def _eqns(f, *args):
    return plax.make_jaxpr(f)(*args).jaxpr.eqns


def test_literal_broadcast_is_one_read_only_constant():
    xs = np.ones((5, 64), np.float32)
    (init,) = [e for e in _eqns(_scan_tanh, xs) if e.primitive is lax.broadcast_in_dim_p]
    step = constant_step(init)
    assert step is not None
    a, b = step(None), step(None)
    assert a is b and not a.flags.writeable
    assert a.dtype == np.float32 and a.shape == (64,) and not a.any()


def test_other_broadcasts_are_not_constants():
    x = np.float32(2.0)
    (operand,) = _eqns(lambda x: jnp.broadcast_to(x, (8,)), x)  # a variable, not a literal
    assert constant_step(operand) is None
    n = CONSTANT_MAX + 1
    (big,) = _eqns(lambda: jnp.full((n,), 3.0, np.float32))  # too large to keep
    assert constant_step(big) is None


@pytest.mark.parametrize("steps", [7, 300])
def test_scan_from_zeros_equals_numpy(steps):
    xs = np.random.default_rng(1).standard_normal((steps, 64)).astype(np.float32)
    text = plax.jit(_scan_tanh, backend="numba").lower(xs).compile().as_text()
    assert "for it" in text  # the native loop
    for _ in range(2):  # (the second call reads the same constant: not written by the first)
        got, want = jit_both(_scan_tanh, xs, fallback_is_error=True)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-6, atol=2e-6)  # (tanh_f32: 5 ulp)


def test_constant_output_is_returned_unchanged():
    f = lambda x: (jnp.zeros(3, np.int32), x + jnp.ones(3, np.int32))  # noqa: E731
    x = np.arange(3, dtype=np.int32)
    for _ in range(2):
        got, want = jit_both(f, x, fallback_is_error=True)
        for g, w in zip(got, want):
            assert_bits_equal(g, w)
