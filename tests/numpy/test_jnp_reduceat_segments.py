"""``add``/``multiply``/``maximum``/``minimum.reduceat`` with indices that do not decrease run
as one segment reduction (``ufunc_fast_methods.segment_reduceat``), the others through the
generic loop: values against NumPy's ``reduceat`` in float64 and int64 (last index, repeated
and decreasing indices, every axis), eager, jitted (traced indices: the choice made by a
``cond``) and against the generic loop itself."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp

NAMES = ["add", "multiply", "maximum", "minimum"]
INDICES = [[0, 3, 3, 7], [2, 5, 8], [0], [8], [4, 4, 4], [1, 2, 3, 4, 5, 6, 7, 8],
           [0, 4, 1, 5], [6, 2, 2, 0], [0, 8]]  # (the last three but one: decreasing)


def _operand(dtype):
    rng = np.random.default_rng(3)
    # small magnitudes keep the products of int64 in range and the float64 sums exact enough
    return rng.uniform(-2, 2, (9, 3, 4)).astype(dtype) if dtype == np.float64 else \
        rng.integers(-3, 4, (9, 3, 4)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
@pytest.mark.parametrize("name", NAMES)
def test_reduceat_against_numpy(name, dtype):
    with plax.enable_x64(True):
        a = _operand(dtype)
        uf, ref = getattr(jnp, name), getattr(np, name)
        jitted = plax.jit(lambda a, i, axis: uf.reduceat(a, i, axis=axis), static_argnums=2)
        for axis in (0, -1):
            for k, idx in enumerate(INDICES):
                idx = np.array(idx) % a.shape[axis]
                want = ref.reduceat(a, idx, axis=axis)
                results = [uf.reduceat(a, jnp.asarray(idx), axis=axis)]
                if k in (0, 3, 6):  # traced indices (each length compiles once)
                    results.append(jitted(a, jnp.asarray(idx), axis))
                for got in results:
                    assert got.dtype == want.dtype
                    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-13,
                                               err_msg=f"{name}.reduceat({idx}, axis={axis})")


@pytest.mark.parametrize("name", NAMES)
def test_segments_agree_with_the_generic_loop(name):
    a = _operand(np.float64).astype(np.float32)
    uf = getattr(jnp, name)
    for idx in ([0, 3, 3, 7], [1, 8], [0, 0]):
        idx = jnp.asarray(np.array(idx, np.int32))
        fast = uf.reduceat(a, idx, axis=0)
        loop = uf._reduceat_loop(jnp.asarray(a), idx, axis=0, dtype=None)
        np.testing.assert_allclose(np.asarray(fast), np.asarray(loop), rtol=1e-6)


def test_rising_indices_stage_a_segment_reduction_and_no_loop():
    a, idx = np.ones((16, 2), np.float32), np.array([0, 5, 9], np.int32)
    text = str(plax.make_jaxpr(lambda a: jnp.add.reduceat(a, idx))(a))
    assert "scatter-add" in text and "scan" not in text and "while" not in text
    # traced indices: a cond picks the segment reduction or the loop when they are known
    text = str(plax.make_jaxpr(lambda a, i: jnp.add.reduceat(a, i))(a, idx))
    assert "cond[" in text


def test_booleans_keep_the_generic_loop():
    flags = np.array([True, False, False, True, False])
    got = jnp.add.reduceat(flags, jnp.array([0, 2, 4]))
    np.testing.assert_array_equal(np.asarray(got), np.add.reduceat(flags, [0, 2, 4]))
