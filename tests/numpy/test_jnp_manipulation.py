"""delete/insert/resize/rollaxis/block/trim_zeros, choose/compress/extract/select/piecewise,
place/put/put_along_axis/fill_diagonal, partition/argpartition/lexsort, diagflat, vander,
astype and apply_along_axis/apply_over_axes: values against NumPy, jit/vmap, gradients,
and JAX's errors."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.errors import ConcretizationTypeError

eq = np.testing.assert_array_equal


@pytest.mark.parametrize("obj", [1, -1, slice(0, 3, 2), [0, 2]])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_delete_insert(obj, axis):
    a = np.arange(12).reshape(3, 4)
    o = np.array(obj) if isinstance(obj, list) else obj
    eq(jnp.delete(a, o, axis=axis), np.delete(a, o, axis=axis))
    eq(jnp.insert(a, o, 99, axis=axis), np.insert(a, o, 99, axis=axis))
    eq(jnp.insert(np.arange(4), 2, np.array([7, 8])), np.insert(np.arange(4), 2, [7, 8]))
    eq(jnp.insert(a, np.array([1, 1]), np.array([[9], [8], [7]]), axis=1),
       np.insert(a, [1, 1], [[9], [8], [7]], axis=1))


def test_delete_insert_traced():
    f = plax.jit(lambda x: jnp.delete(x, x[:2], assume_unique_indices=True))
    eq(f(np.array([0, 1, 5, 6])), [5, 6])
    eq(plax.jit(lambda x: jnp.insert(x, x[0], 9))(np.array([0, 1, 5])), [9, 0, 1, 5])
    with pytest.raises(ConcretizationTypeError):
        plax.jit(lambda x: jnp.delete(x, x))(np.array([0, 1]))


def test_resize_rollaxis_block_trim_zeros():
    eq(jnp.resize(np.arange(3), (2, 4)), np.resize(np.arange(3), (2, 4)))
    x = np.zeros((2, 3, 4))
    for axis, start in [(2, 0), (0, 3), (1, -1)]:
        assert jnp.rollaxis(x, axis, start).shape == np.rollaxis(x, axis, start).shape
    blocks = [[np.ones((2, 2)), np.zeros((2, 1))], [np.full((1, 3), 2.)]]
    eq(jnp.block(blocks), np.block(blocks))
    eq(jnp.block([1, np.array([2, 3])]), np.block([1, np.array([2, 3])]))
    with pytest.raises(ValueError):
        jnp.block([[np.ones(2)], np.ones(2)])
    f = np.array([0, 0, 1, 0, 2, 0])
    for trim in ["fb", "f", "b"]:
        eq(jnp.trim_zeros(f, trim), np.trim_zeros(f, trim))
    with pytest.raises(ConcretizationTypeError):
        plax.jit(jnp.trim_zeros)(f)


def test_choose_select_piecewise():
    a = np.array([0, 1, 2, 1])
    choices = [np.arange(4), np.arange(4) * 10, np.arange(4) * 100]
    eq(jnp.choose(a, choices), np.choose(a, choices))
    bad = np.array([0, 5, -1, 1])
    eq(jnp.choose(bad, choices, mode="clip"), np.choose(bad, choices, mode="clip"))
    eq(jnp.choose(bad, choices, mode="wrap"), np.choose(bad, choices, mode="wrap"))
    with pytest.raises(ValueError):
        jnp.choose(bad, choices)
    with pytest.raises(ConcretizationTypeError, match="mode='wrap'"):
        plax.jit(lambda i: jnp.choose(i, choices))(a)
    x = np.linspace(-2, 2, 7)
    conds, vals = [x < 0, x > 1], [x ** 2, -x]
    np.testing.assert_allclose(jnp.select(conds, vals, 9.), np.select(conds, vals, 9.), rtol=1e-6)
    np.testing.assert_allclose(
        jnp.piecewise(x, [x < 0, x > 1], [lambda v: -v, lambda v: v * 2, 7.]),
        np.piecewise(x, [x < 0, x > 1], [lambda v: -v, lambda v: v * 2, 7.]), rtol=1e-6)
    g = plax.grad(lambda v: jnp.piecewise(v, [v < 0], [lambda u: u ** 2, lambda u: 3 * u]).sum())
    np.testing.assert_allclose(g(jnp.array(x)), np.where(x < 0, 2 * x, 3.), rtol=1e-6)
    with pytest.raises(ValueError):
        jnp.select([x < 0], [x, x])


def test_compress_extract():
    a = np.arange(12.).reshape(3, 4)
    c = np.array([True, False, True])
    eq(jnp.compress(c, a, axis=0), np.compress(c, a, axis=0))
    eq(jnp.compress(c, a), np.compress(c, a))
    eq(jnp.extract(a > 5, a), np.extract(a > 5, a))
    out = plax.jit(lambda m, v: jnp.extract(m, v, size=8, fill_value=-1))(a > 5, a)
    eq(out, [6, 7, 8, 9, 10, 11, -1, -1])
    with pytest.raises(ConcretizationTypeError, match="size"):
        plax.jit(jnp.extract)(a > 5, a)
    with pytest.raises(ValueError, match="out of bounds"):
        jnp.compress(np.array([True, False, True, True]), np.arange(3))


def test_functional_updates():
    eq(jnp.place(np.zeros(5), np.array([1, 0, 1, 1, 0]), np.array([1., 2.]), inplace=False),
       [1, 0, 2, 1, 0])
    eq(jnp.put(np.zeros(5), np.array([0, 7, -1]), np.array([1., 2., 3.]), inplace=False),
       [1, 0, 0, 0, 3])
    eq(jnp.put(np.zeros(5), np.array([0, 7, -1]), np.array([1., 2., 3.]), mode="wrap",
               inplace=False), [1, 0, 2, 0, 3])
    a = np.zeros((2, 3))
    idx = np.array([[1], [2]])
    ref = a.copy()
    np.put_along_axis(ref, idx, 5., axis=1)
    eq(jnp.put_along_axis(a, idx, 5., axis=1, inplace=False), ref)
    ref = np.zeros((3, 3))
    np.fill_diagonal(ref, [1., 2.])
    eq(jnp.fill_diagonal(np.zeros((3, 3)), np.array([1., 2.]), inplace=False), ref)
    for fn, args in [(jnp.place, (a, a > 0, 1.)), (jnp.put, (a, 0, 1.)),
                     (jnp.fill_diagonal, (a, 1.))]:
        with pytest.raises(ValueError, match="inplace=False"):
            fn(*args)
    g = plax.grad(lambda v: jnp.put(jnp.zeros(3), np.array([1]), v, inplace=False).sum())(2.0)
    assert float(g) == 1.0


@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_partition_and_lexsort(dtype):
    x = np.random.default_rng(5).integers(0, 20, (4, 9)).astype(dtype)
    for kth in [0, 4, -1]:
        p = np.asarray(jnp.partition(x, kth))
        k = kth % 9
        eq(p[:, k], np.sort(x, -1)[:, k])
        assert (p[:, :k] <= p[:, k:k + 1]).all() and (p[:, k + 1:] >= p[:, k:k + 1]).all()
        i = np.asarray(jnp.argpartition(x, kth % 4, axis=0))
        eq(np.take_along_axis(x, i, 0)[kth % 4], np.sort(x, 0)[kth % 4])
    keys = [x[0], x[1] % 3]
    eq(jnp.lexsort(keys), np.lexsort(keys))
    eq(jnp.lexsort(np.stack(keys), axis=0), np.lexsort(np.stack(keys), axis=0))
    with pytest.raises(ValueError):
        jnp.partition(x, 20)


def test_diagflat_vander_astype():
    v = np.array([[1, 2], [3, 4]])
    for k in [0, 1, -2]:
        eq(jnp.diagflat(v, k), np.diagflat(v, k))
    x = np.array([1., 2., 3.])
    for n, inc in [(None, False), (4, True), (0, False)]:
        np.testing.assert_allclose(jnp.vander(x, n, inc), np.vander(x, n, inc))
    g = plax.grad(lambda t: jnp.vander(t, 3).sum())(jnp.array(x))
    np.testing.assert_allclose(g, 2 * x + 1)
    out = jnp.astype(np.array([1.7, -1.2]), jnp.int32)
    eq(out, [1, -1])
    assert out.dtype == np.int32


def test_apply_along_and_over_axes():
    a = np.arange(24.).reshape(2, 3, 4)
    for axis in [0, 1, 2]:
        np.testing.assert_allclose(jnp.apply_along_axis(jnp.sum, axis, a),
                                   np.apply_along_axis(np.sum, axis, a))
        np.testing.assert_allclose(jnp.apply_along_axis(lambda v: v[::-1][:2], axis, a),
                                   np.apply_along_axis(lambda v: v[::-1][:2], axis, a))
    np.testing.assert_allclose(jnp.apply_over_axes(jnp.sum, a, [0, 2]),
                               np.apply_over_axes(np.sum, a, [0, 2]))
    out = plax.jit(lambda t: jnp.apply_along_axis(jnp.cumsum, 1, t))(a)
    np.testing.assert_allclose(out, np.cumsum(a, 1))
