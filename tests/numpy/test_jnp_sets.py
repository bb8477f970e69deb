"""Set operations and the Array API unique_* functions: values against NumPy, ``size=``
padding as JAX, jit/vmap, and the concretization error that points to ``size=``."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.errors import ConcretizationTypeError

SET_FNS = {"union1d": np.union1d, "intersect1d": np.intersect1d, "setdiff1d": np.setdiff1d,
           "setxor1d": np.setxor1d}


@pytest.mark.parametrize("name", sorted(SET_FNS))
@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.uint8])
@pytest.mark.parametrize("shapes", [((7,), (5,)), ((2, 3), (4,)), ((0,), (3,))])
def test_set_ops_match_numpy(name, dtype, shapes):
    rng = np.random.default_rng(hash((name, shapes)) % 2**32)
    a = rng.integers(0, 6, shapes[0]).astype(dtype)
    b = rng.integers(0, 6, shapes[1]).astype(dtype)
    np.testing.assert_array_equal(getattr(jnp, name)(a, b), SET_FNS[name](a, b))


@pytest.mark.parametrize("name", sorted(SET_FNS))
def test_set_ops_size_under_jit(name):
    a, b = np.array([5, 1, 3, 3, 7]), np.array([3, 4, 5])
    ref = SET_FNS[name](a, b)
    fn = plax.jit(lambda x, y: getattr(jnp, name)(x, y, size=6, fill_value=-1))
    out = np.asarray(fn(a, b))
    np.testing.assert_array_equal(out[:len(ref)], ref)
    assert (out[len(ref):] == -1).all()
    with pytest.raises(ConcretizationTypeError, match="size"):
        plax.jit(getattr(jnp, name))(a, b)


def test_size_default_fill_values_as_jax():
    a, b = jnp.array([5, 1, 3, 3, 7]), jnp.array([3, 4, 5])
    np.testing.assert_array_equal(jnp.setdiff1d(a, b, size=4), [1, 7, 0, 0])
    np.testing.assert_array_equal(jnp.union1d(a, b, size=6), [1, 3, 4, 5, 7, 1])
    np.testing.assert_array_equal(jnp.intersect1d(a, b, size=3), [3, 5, 3])
    np.testing.assert_array_equal(jnp.setxor1d(a, b, size=4), [1, 4, 7, 1])


def test_intersect1d_return_indices():
    a, b = np.array([5, 1, 3, 3, 7]), np.array([3, 4, 5])
    v, i1, i2 = jnp.intersect1d(a, b, return_indices=True)
    rv, ri1, ri2 = np.intersect1d(a, b, return_indices=True)
    for x, y in [(v, rv), (i1, ri1), (i2, ri2)]:
        np.testing.assert_array_equal(x, y)
    v, i1, i2 = jnp.intersect1d(a, b, return_indices=True, size=4)
    np.testing.assert_array_equal(i1, [2, 0, 5, 5])  # padded with len(ar1), as JAX
    np.testing.assert_array_equal(i2, [0, 2, 3, 3])


@pytest.mark.parametrize("shape", [(6,), (2, 5), (3, 1, 2)])
@pytest.mark.parametrize("dtype", [np.int8, np.float32])
def test_isin(shape, dtype):
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5, shape).astype(dtype)
    t = rng.integers(0, 5, (2, 2)).astype(dtype)
    np.testing.assert_array_equal(jnp.isin(x, t), np.isin(x, t))
    np.testing.assert_array_equal(jnp.isin(x, t, invert=True), np.isin(x, t, invert=True))
    np.testing.assert_array_equal(plax.jit(jnp.isin)(x, t), np.isin(x, t))
    out = plax.vmap(jnp.isin, in_axes=(0, None))(x.reshape(shape[0], -1), t)
    np.testing.assert_array_equal(out, np.isin(x.reshape(shape[0], -1), t))
    assert not bool(jnp.isin(jnp.array(np.nan), jnp.array([np.nan])))


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
@pytest.mark.parametrize("shape", [(9,), (3, 4)])
def test_unique_functions(dtype, shape):
    x = np.random.default_rng(4).integers(0, 5, shape).astype(dtype)
    values, index, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                               return_counts=True)
    res = jnp.unique_all(x)
    np.testing.assert_array_equal(res.values, values)
    np.testing.assert_array_equal(res.indices, index)
    np.testing.assert_array_equal(res.inverse_indices, inverse.reshape(shape))
    np.testing.assert_array_equal(res.counts, counts)
    np.testing.assert_array_equal(jnp.unique_values(x), values)
    np.testing.assert_array_equal(jnp.unique_counts(x).counts, counts)
    np.testing.assert_array_equal(jnp.unique_inverse(x).inverse_indices, inverse.reshape(shape))


def test_unique_nans_are_distinct_and_size_pads():
    x = jnp.array([3., np.nan, 1., 3., np.nan, 2.])
    np.testing.assert_array_equal(jnp.unique_values(x), [1., 2., 3., np.nan, np.nan])
    res = plax.jit(lambda v: jnp.unique_all(v, size=6, fill_value=-1))(x)
    np.testing.assert_array_equal(res.values, [1., 2., 3., np.nan, np.nan, -1.])
    np.testing.assert_array_equal(res.indices, [2, 5, 0, 1, 4, 2])
    np.testing.assert_array_equal(res.counts, [1, 1, 2, 1, 1, 0])
    out = plax.vmap(lambda v: jnp.unique_values(v, size=3))(jnp.array([[1, 1, 2], [3, 3, 3]]))
    np.testing.assert_array_equal(out, [[1, 2, 1], [3, 3, 3]])
    with pytest.raises(ConcretizationTypeError, match="size"):
        plax.jit(jnp.unique_counts)(x)


@pytest.mark.parametrize("size", [2, 5])
def test_unique_with_size_under_jvp_differentiates_the_values(size):
    """``jnp.unique(x, size=...)`` under ``jvp`` is computed by primitives, as JAX computes
    it, so the values carry the tangent of the first element of each run (in sorted order),
    and the counts are truncated or padded with 0 as NumPy's counts are."""
    x = np.array([3., 1., 3., 5., 5., 5.], np.float32)
    t = np.array([1., 2., 3., 4., 5., 6.], np.float32)
    (values, counts), (dvalues, _) = plax.jvp(
        lambda v: jnp.unique(v, return_counts=True, size=size), (jnp.asarray(x),),
        (jnp.asarray(t),))
    want_values, first, want_counts = np.unique(x, return_index=True, return_counts=True)
    pad = size - len(want_values)
    fill = lambda a, v: np.concatenate([a, np.full(max(pad, 0), v, a.dtype)])[:size]
    np.testing.assert_array_equal(values, fill(want_values, want_values[0]))
    np.testing.assert_array_equal(counts, fill(want_counts, 0))
    np.testing.assert_array_equal(dvalues, fill(t[first], t[first[0]]))


def _unique_all(x, **kw):
    return [np.asarray(r).tolist() for r in jnp.unique(jnp.asarray(x), return_index=True,
                                                        return_inverse=True,
                                                        return_counts=True, **kw)]


def test_unique_size_of_no_elements_as_jax():
    """An input of no elements: only the values are padded to ``size`` (with the needed
    ``fill_value``); an axis of empty slices has one unique slice, counted once per slice."""
    with pytest.raises(ValueError, match="fill_value must be specified"):
        jnp.unique(jnp.zeros((0,)), size=3)
    with pytest.raises(ValueError, match="fill_value must be specified"):
        jnp.unique_counts(jnp.zeros((0,)), size=3)
    assert _unique_all(np.zeros((0,), np.float32), size=3, fill_value=7.0) == \
        [[7.0, 7.0, 7.0], [], [], []]
    assert _unique_all(np.zeros((0,), np.float32), size=0) == [[], [], [], []]
    assert _unique_all(np.zeros((0, 2), np.float32), size=2, fill_value=5.0, axis=0) == \
        [[[5.0, 5.0], [5.0, 5.0]], [], [], []]
    # two columns of no elements: one unique column (first index 0), counted twice
    assert _unique_all(np.zeros((0, 2), np.float32), size=2, fill_value=5.0, axis=1) == \
        [[], [0], [0, 0], [2]]
    counts = plax.jit(lambda v: jnp.unique_all(v, size=2, fill_value=1.0).counts)(
        jnp.zeros((0, 2)))
    assert counts.shape == (0,)


def test_unique_size_pads_the_index_with_the_first_values_index():
    # (the padding repeats the first unique value, so its first index too, as JAX pads)
    x = np.array([3.0, 1.0, 3.0], np.float32)
    assert _unique_all(x, size=5) == [[1.0, 3.0, 1.0, 1.0, 1.0], [1, 0, 1, 1, 1],
                                      [1, 0, 1], [1, 2, 0, 0, 0]]
    m = np.array([[1.0, 2.0, 1.0], [4.0, 5.0, 4.0]], np.float32)   # columns 0 and 2 equal
    assert _unique_all(m, size=3, fill_value=0.0, axis=1) == \
        [[[1.0, 2.0, 0.0], [4.0, 5.0, 0.0]], [0, 1, 0], [0, 1, 0], [2, 1, 0]]


def test_unique_size_as_jax():
    jax = pytest.importorskip("jax")
    nan = np.float32(np.nan)
    cases = [(np.array([3.0, 1.0, 3.0, nan, nan], np.float32), None, {"size": 4}),
             (np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 5.0]], np.float32), 0,
              {"size": 3, "fill_value": 9.0}),
             (np.zeros((0, 2), np.float32), 1, {"size": 3, "fill_value": 9.0}),
             (np.zeros((2, 0), np.float32), 0, {"size": 2}),
             (np.zeros((0, 0), np.float32), 0, {})]
    for x, axis, kw in cases:
        want = jax.numpy.unique(x, return_index=True, return_inverse=True,
                                return_counts=True, axis=axis, **kw)
        got = jnp.unique(jnp.asarray(x), return_index=True, return_inverse=True,
                         return_counts=True, axis=axis, **kw)
        for g, w in zip(got, want):   # (NaNs compare equal here)
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w),
                                          err_msg=f"{x.shape} {axis} {kw}")
            assert g.shape == w.shape


_NAN_ROWS = np.array([[1, np.nan], [0, 2], [1, np.nan], [np.nan, np.nan], [0, 2],
                      [np.nan, np.nan], [1, 3]], np.float32)


def _assert_unique_all(got, want):
    for g, w in zip(got, want, strict=True):   # (NaNs compare equal here)
        np.testing.assert_array_equal(np.asarray(g, np.float64), np.asarray(w, np.float64))


def test_unique_along_an_axis_merges_nan_slices_with_equal_nan():
    """NumPy ignores ``equal_nan`` given an axis; JAX merges slices equal but for NaNs in
    the same places (each kept at its first occurrence), and keeps them apart without it."""
    _assert_unique_all(_unique_all(_NAN_ROWS, axis=0), [
        [[0.0, 2.0], [1.0, 3.0], [1.0, np.nan], [np.nan, np.nan]], [1, 6, 0, 3],
        [2, 0, 2, 3, 0, 3, 1], [2, 1, 2, 2]])
    _assert_unique_all(_unique_all(_NAN_ROWS.T, axis=1, size=5, fill_value=-1.0), [
        [[0.0, 1.0, 1.0, np.nan, -1.0], [2.0, 3.0, np.nan, np.nan, -1.0]], [1, 6, 0, 3, 1],
        [2, 0, 2, 3, 0, 3, 1], [2, 1, 2, 2, 0]])
    assert _unique_all(_NAN_ROWS, axis=0, equal_nan=False)[3] == [2, 1, 1, 1, 1, 1]
    # a 3-d input along its middle axis; a signed zero equals its opposite (the first kept)
    z = np.array([[[np.nan, 1.0], [np.nan, 1.0], [-0.0, 1.0], [0.0, 1.0]]], np.float32)
    values, _, inverse, counts = jnp.unique(z, axis=1, return_index=True,
                                            return_inverse=True, return_counts=True)
    assert values.shape == (1, 2, 2) and np.signbit(np.asarray(values)[0, 0, 0])
    assert inverse.tolist() == [1, 1, 0, 0] and counts.tolist() == [2, 2]


def test_unique_along_an_axis_with_equal_nan_as_jax():
    jax = pytest.importorskip("jax")
    c = (_NAN_ROWS[:, :1] + 1j * _NAN_ROWS[:, 1:]).astype(np.complex64)
    cases = [(_NAN_ROWS, 0, {}), (_NAN_ROWS.T, 1, {"size": 6}), (_NAN_ROWS, 0, {"size": 2}),
             (_NAN_ROWS.reshape(7, 1, 2), 0, {}), (c, 0, {})]
    for x, axis, kw in cases:
        want = jax.numpy.unique(x, return_index=True, return_inverse=True,
                                return_counts=True, axis=axis, equal_nan=True, **kw)
        got = jnp.unique(jnp.asarray(x), return_index=True, return_inverse=True,
                         return_counts=True, axis=axis, equal_nan=True, **kw)
        for g, w in zip(got, want):   # (NaNs compare equal here)
            np.testing.assert_array_equal(np.asarray(g), np.asarray(w),
                                          err_msg=f"{x.shape} {axis} {kw}")
            assert g.shape == w.shape and g.dtype == w.dtype
