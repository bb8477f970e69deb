"""Loops threaded over rows: nested loops whose reductions keep the outermost axis, indexed
loops over many rows, and lone max/min reductions NumPy walks slowly (a 2x2 max-pool)."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import numpy as jnp

from numba_vs_numpy import compiled_source, jit_both as both


def _reduction_eqn(shape, axes, op=jnp.max, dtype=np.float32):
    x = np.zeros(shape, dtype)
    (eqn,) = plax.make_jaxpr(lambda x: op(x, axes))(x).jaxpr.eqns
    return eqn


@pytest.mark.parametrize("shape, axes, compiled", [
    ((500, 2, 500, 2), (1, 3), True),    # a 2x2 max-pool: reduced and kept alternate
    ((500, 2, 500, 2), (0, 2), True),    # the innermost kept run is 2 long
    ((500, 2, 500, 2), (3,), True),
    ((500, 2, 500, 2), (1,), False),     # innermost run (kept) 1000 long: NumPy is fast
    ((500, 2, 500, 2), (2, 3), False),   # the trailing axes: one contiguous run
    ((1000, 1000), (0,), False),
    ((1000, 1000), (1,), False),
    ((1000, 1000), (0, 1), False),       # one run: a full reduction
    ((8, 1, 4), (2,), True),             # unit axes join no run
])
def test_strided_extreme_selects_short_innermost_runs(shape, axes, compiled):
    from plax_numba.emitter import strided_extreme
    assert strided_extreme(_reduction_eqn(shape, axes)) is compiled
    assert not strided_extreme(_reduction_eqn(shape, axes, jnp.sum))  # sums keep NumPy's
    assert not strided_extreme(_reduction_eqn(shape, axes, jnp.max, np.complex64))


def test_max_pool_runs_as_a_kernel_bit_identical(monkeypatch):
    """A 2x2 max-pool's ``reduce_max`` over axes (1, 3) is compiled (the size threshold
    lowered so a small array takes the path) and equals the reference bit for bit, NaN
    and infinities included; ``reduce_min`` over the other axes too."""
    from plax_numba import emitter
    monkeypatch.setattr(emitter, "LONE_KERNEL_MIN", 1)
    x = np.random.default_rng(0).standard_normal((8, 2, 6, 2)).astype(np.float32)
    x[1, 0, 2, 1] = np.nan
    x[3, 1, 4, 0], x[5, 0, 0, 0] = np.inf, -np.inf

    for pool in (lambda x: jnp.max(x, (1, 3)), lambda x: jnp.min(x, (0, 2))):
        source = compiled_source(pool, x)
        assert source.count("# ---- fused kernel") == 1, source
        (got,), (want,) = both(pool, x, fallback_is_error=True)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_row_reductions_and_broadcasts_thread_over_rows(monkeypatch):
    """Above ``codegen.PARALLEL_MIN`` elements (lowered here), softmax's ``exp(x - max)``
    with its row sums threads its outer loop (``prange`` over rows, each row summed in the
    serial order), and its ``x / sum`` runs nested loops over rows instead of dividing the
    flat position; the values match the reference within softmax's tolerance."""
    from plax_numba import codegen
    monkeypatch.setattr(codegen, "PARALLEL_MIN", 64)
    monkeypatch.setattr(codegen, "INDEXED_ROWS_MIN", 8)
    x = np.random.default_rng(1).standard_normal((24, 8)).astype(np.float32)

    def softmax(x):
        return plax.nn.softmax(x, -1)
    kernels = compiled_source(softmax, x).split("# ---- fused kernel")[1:]
    summed = [k for k in kernels if "reduce_sum" in k]
    divided = [k for k in kernels if "div" in k.splitlines()[1]]
    assert len(summed) == 1 and "for i0 in prange(n0):" in summed[0]
    assert len(divided) == 1 and "for i0 in prange(n0):" in divided[0]
    assert " // " not in divided[0]
    assert "row_w3[i1] = t2" in summed[0]  # the row's exps kept, summed after the row
    (got,), (want,) = both(softmax, x, fallback_is_error=True)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-7)

    def int_rows(z):  # two innermost-axis reductions of int32 values, an input named a1
        return jnp.sum(z * 3, -1) + jnp.max(z - 1, -1)
    z = np.random.default_rng(2).integers(-50, 50, (20, 9)).astype(np.int32)
    (got,), (want,) = both(int_rows, z, fallback_is_error=True)
    np.testing.assert_array_equal(got, want)
