"""``gather`` and the ``scatter`` family inside native loops on the Numba backend
(:mod:`plax_numba.wholegen_indexing`): a loop body indexing with traced positions
(``x.at[i].set``, ``x.at[idx].add``, ``take_along_axis``, ``vmap``'s batched forms) is one
native loop, and its values are the NumPy backend's bit for bit: every scatter mode, repeated
and out-of-range indices, an integer combiner, float16 writes.

One program holds every form, so the file compiles one kernel (numba compiles slowly here).
"""
from __future__ import annotations

import warnings

import numpy as np

import plax
from plax import lax
from plax import numpy as jnp


def _program(x, ints, halves, idx, pairs, v):
    def body(i, c):
        x, ints, halves, acc = c
        k = idx[i]
        x = x.at[k].add(v[i])                                       # dropped when out of range
        x = x.at[idx].multiply(1.0001, mode="clip")                 # repeated, clamped
        x = x.at[pairs[:, 0], pairs[:, 1]].set(x[i % 8, 0])         # an index vector of two
        x = x.at[:, k % 3].set(-x[:, 0], mode="promise_in_bounds")  # a later axis, windowed
        ints = ints.at[idx].max(ints[::-1][:6] - i)                 # integer max, repeated
        halves = halves.at[k % 4].set(halves[3] * 2)                # float16 bits written
        rows = jnp.take(x, idx + i, axis=0, mode="fill", fill_value=-7.0)
        batched = plax.vmap(lambda r, j: r[j])(x[:6], (idx + i) % 3)  # batching dims
        return x, ints, halves, acc + rows.sum() + batched.sum()
    return lax.fori_loop(0, idx.shape[0], body, (x, ints, halves, jnp.float32(0)))


def test_gather_and_scatter_forms_in_a_loop_are_native_with_the_reference_bits():
    from plax.lowering import PlaxFallbackWarning
    rng = np.random.default_rng(5)
    args = (rng.standard_normal((8, 3)).astype(np.float32),
            rng.integers(-50, 50, 8).astype(np.int32),
            rng.standard_normal(4).astype(np.float16),
            np.array([1, 7, 9, -3, 2, 1], np.int32),               # 9, -3: out of range
            np.array([[0, 1], [7, 2], [0, 1], [3, 5]], np.int32),  # (3, 5): out of range
            rng.standard_normal((6, 3)).astype(np.float32))
    native = plax.jit(_program, backend="numba")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PlaxFallbackWarning)  # PlaxNativeLoopWarning included
        got = native(*args)
    text = native.lower(*args).compile().as_text()
    assert "while" in text or "for it" in text, text
    want = plax.jit(_program, backend="numpy")(*args)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
