"""``scatter`` of whole slices along one axis (``x.at[:, cols].set(v)``, ``x.at[rows].set(v)``):
the NumPy backend's kernel assigns the slices to a view with that axis first, each position's
last update only. Checked against a Python loop applying the updates in order, for every
axis of a 3-D operand, repeated and out-of-range positions in each mode, several dtypes, and
on every installed backend."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax
from plax import numpy as jnp


def _loop(x, axis, positions, values, mode):
    """The updates applied one by one, in order (the reference's meaning)."""
    out = np.array(x, copy=True)
    n = x.shape[axis]
    for k, p in enumerate(positions):
        p = p + n if p < 0 else p   # (negative positions count from the end, as in NumPy)
        if mode == "clip":
            p = min(max(p, 0), n - 1)
        elif not 0 <= p < n:
            continue   # (dropped: fill / promise_in_bounds as the kernel drops it)
        index = [slice(None)] * x.ndim
        index[axis] = p
        out[tuple(index)] = np.take(values, k, axis=axis)
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.complex64])
@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("mode", ["fill", "clip", "promise_in_bounds"])
def test_slices_along_one_axis_as_a_loop(dtype, axis, mode):
    rng = np.random.default_rng(axis)
    shape = (5, 6, 7)
    x = (rng.standard_normal(shape) * 10).astype(dtype)
    positions = np.array([1, 3, 1, -1, 4, 9, 3, 0, 1], np.int32)   # repeats; -1 the last; 9 out
    vshape = list(shape)
    vshape[axis] = positions.shape[0]
    values = (rng.standard_normal(vshape) * 10).astype(dtype)
    index = [slice(None)] * 3
    index[axis] = positions
    want = _loop(x, axis, positions, values, mode)
    if mode == "promise_in_bounds":  # (out-of-range positions are the caller's error there)
        keep = (positions >= 0) & (positions < shape[axis])
        positions = positions[keep]
        values = np.compress(keep, values, axis=axis)
        index[axis] = positions
        want = _loop(x, axis, positions, values, mode)
    f = lambda x, v: x.at[tuple(index)].set(v, mode=mode)
    got = plax.jit(f, backend="numpy")(x, values)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_every_backend_agrees_and_the_jaxpr_is_one_scatter(backend_name):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 48)).astype(np.float32)
    cols = rng.integers(-48, 48, 300).astype(np.int32)    # negative positions count from the end
    v = rng.standard_normal((64, 300)).astype(np.float32)
    f = lambda x, v: x.at[:, cols].set(v)
    jaxpr = plax.make_jaxpr(f)(x, v).jaxpr
    assert [e.primitive for e in jaxpr.eqns].count(lax.scatter_p) == 1
    want = _loop(x, 1, cols, v, "fill")
    got = plax.jit(f, backend=backend_name)(x, v)
    np.testing.assert_array_equal(np.asarray(got), want)
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(x), jnp.asarray(v))), want)
