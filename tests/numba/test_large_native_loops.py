"""Native loops over large bodies (issue 26, item 3): a cluster over a grid read through
partial broadcasts is one flat threaded loop that recovers its indices (``indexed``), the
slices of a concatenate read only by slices copy from its parts (it is never built),
slices' buffers are allocated once before a loop, and the samplers' rejection loops run over
their active elements in blocks. Values and bits equal the NumPy backend's."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax, random
from plax import numpy as jnp

from numba_vs_numpy import assert_bits_equal, compiled_source, jit_both


def _grid(a, b):
    # an (n, k) grid from an (n,) and a (k,) operand: partial broadcasts
    return jnp.sin(a[:, None] * 1.5 + b[None, :]) - b[None, :]


@pytest.mark.parametrize("n", [7, 20_000])
def test_grid_of_partial_broadcasts_equals_numpy(n):
    # 20,000 x 3: large, so indexed (flat, prange); 7 x 3: the loop nest
    a = np.linspace(-2, 2, n).astype(np.float32)
    b = np.array([0.25, -1.0, 3.0], np.float32)
    source = compiled_source(_grid, a, b)
    if n > 1000:
        assert "prange(n0 * n1)" in source and "i1 = i % n1" in source, source
    else:
        assert "prange(" not in source
    got, want = jit_both(_grid, a, b, fallback_is_error=True)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-6, atol=1e-6)  # (sin_f32: 1 ulp)


def _sliced_concat_loop(x):
    def body(i, c):
        ab = jnp.concatenate([c[:, :2] * 2, c[:, 2:] + 1, c[:, :1], c[:, 1:2]], axis=1)  # (n, 5)
        # slices across parts, within one part, and of every part
        return ab[:, 1:4] - ab[:, 0:3] + ab[:, 2:5] * 0.5
    return lax.fori_loop(0, 4, body, x)


def test_slices_of_a_concatenate_in_a_loop_equal_numpy():
    x = np.arange(3 * 40_000, dtype=np.float32).reshape(40_000, 3) % 7
    text = plax.jit(_sliced_concat_loop, backend="numba").lower(x).compile().as_text()
    kernel = text[text.rindex("def kernel(a0"):]  # (after its cluster kernels)
    assert "for it" in kernel and "np.concatenate(" not in kernel, kernel
    got, want = jit_both(_sliced_concat_loop, x, fallback_is_error=True)
    assert_bits_equal(got[0], want[0])


def test_gamma_loops_run_in_blocks_and_never_concatenate():
    # 20,000 samples: the rejection loops run over their active elements in blocks
    # (plax_numba.active_blocks), the key split's (n, 3, 2) concatenate is never built, the
    # slices' buffers are made before the loops, the hashed words' (n, 3, 1) forms for the
    # concatenate are views, not copying kernels; the bits are the NumPy backend's
    from plax_numba.active_blocks import BLOCK
    f = lambda key: random.gamma(key, np.float32(2.0), (20_000,))  # noqa: E731
    text = plax.jit(f, backend="numba").lower(random.PRNGKey(4)).compile().as_text()
    assert f"the while loop over its active elements, {BLOCK} at a time" in text
    assert "np.concatenate(" not in text
    at = text.index("while na")
    head = text[text.rindex("def kernel(", 0, at):at]  # the native loop's kernel, before it
    assert f"np.empty(({BLOCK}, 1), np.uint32)" in head  # a slice's buffer, before the loop
    assert f".reshape(({BLOCK}, 3, 1))" in text[at:]
    got, want = jit_both(f, random.PRNGKey(4), fallback_is_error=True)
    assert_bits_equal(got[0], want[0])


def test_native_loop_has_no_size_limit_by_default(monkeypatch):
    from plax_numba.emitter import NATIVE_LOOP_MAX, native_loop_max
    monkeypatch.delenv("PLAX_NUMBA_NATIVE_LOOP_MAX", raising=False)
    assert NATIVE_LOOP_MAX is None and native_loop_max() is None
