"""Flat loops reducing to scalars over costly elementwise work (``sum(tanh(x))``) compute a
chunk of elements, then add the chunk's values in order (``codegen.SUM_CHUNK``): the same
additions in the same order as one loop, so the same bits, but the elementwise loop no longer
waits on each addition and vectorises. Cheap work (``mean(x * x)``) keeps one loop."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from plax import numpy as jnp

from numba_vs_numpy import compiled_source, jit_both


@pytest.mark.parametrize("n", [5, 512, 1300])
def test_sums_of_costly_values_add_in_order_after_each_chunk(n):
    x = np.random.default_rng(n).standard_normal(n).astype(np.float32)

    def f(x):
        t = jnp.tanh(x)
        return t, jnp.sum(t), jnp.max(jnp.exp(x))
    (t, total, peak), (_, want_total, want_peak) = jit_both(f, x, fallback_is_error=True)
    # the kernel's own tanh values, added one after another in float64, rounded once
    in_order = functools.reduce(lambda s, v: s + float(v), t.astype(np.float64), 0.0)
    assert total.tobytes() == np.float32(in_order).tobytes()
    np.testing.assert_allclose(total, want_total, rtol=1e-5)
    np.testing.assert_allclose(peak, want_peak, rtol=1e-6)
    source = compiled_source(f, x)
    assert "for base in range(0, " in source and "for q in range(end - base):" in source


def test_cheap_work_keeps_one_loop():
    x = np.random.default_rng(0).standard_normal(2000).astype(np.float32)
    source = compiled_source(lambda x: jnp.mean(x * x), x)
    assert "for base in range(0, " not in source
