"""Indexing and ``.at[]`` updates under transforms: gradients against finite differences
(through the indexed array and the update values), jit against eager, vmap against a Python
loop."""
from __future__ import annotations

import zlib

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.test_util import check_grads
from jnp_testutil import assert_close

RNG = np.random.default_rng(70)
X = RNG.standard_normal((4, 5)).astype(np.float32)

GET_INDICES = [
    (1, slice(None)), (slice(None, None, -2), 3), (Ellipsis, np.array([0, 2, 2])),
    (np.array([0, 0, 3]), np.array([1, 1, 4])), (X > 0.3,), (None, 2),
    (np.array([[0], [3]]), slice(1, 4)), (-1, np.array([-1, 0])), (7, slice(None)),
]


@pytest.mark.parametrize("idx", GET_INDICES, ids=[repr(i)[:30] for i in GET_INDICES])
def test_grad_of_getitem(idx):
    check_grads(lambda x: x[idx], (jnp.asarray(X),), order=2)
    # repeated and (static, clamped) indices accumulate their cotangents: the gradient of
    # sum(x[idx]) counts how often each element is read
    g = plax.grad(lambda x: jnp.sum(x[idx]))(X)
    counts = np.zeros(X.size)
    ids = np.arange(X.size).reshape(X.shape)
    from jnp_index_strategies import clamped
    np.add.at(counts, ids[clamped(idx, X.shape)].reshape(-1), 1)
    assert_close(g, counts.reshape(X.shape).astype(np.float32))


def test_grad_of_out_of_bounds_index_array_is_zero():
    # As JAX: an out-of-bounds entry of an index array reads the clamped element, but the
    # gather's transpose (a scatter-add) drops its cotangent (tests/test_gather_transpose.py
    # covers every mode)
    idx = (np.array([9, -9, 1]),)
    out = jnp.asarray(X)[idx]
    assert_close(out, X[[3, 0, 1]])
    g = plax.grad(lambda x: jnp.sum(x[idx]))(X)
    expected = np.zeros_like(X)
    expected[1] = 1
    assert_close(g, expected)


UPDATE_INDICES = [
    (1, slice(None)), (slice(1, 3), 2), (np.array([0, 2]), slice(None)),
    (np.array([0, 3, 0]), np.array([1, 4, 1])), (Ellipsis, np.array([-1])), (X > 0.5,),
    (np.array([1, 7]),),
]


def _values_for(idx):
    # A generator per index, so a test's values do not depend on which tests ran before it
    # in the same worker.
    rng = np.random.default_rng(zlib.crc32(repr(idx).encode()))
    return rng.standard_normal(X[_safe(idx)].shape).astype(np.float32)


def _away_from_ties(idx, y):
    """Update values at least 0.1 from the values they meet and from each other (repeated
    indices apply several updates to one element), so that finite differences of min/max
    never cross a kink: ``x`` plus distinct offsets of the signs ``y`` drew."""
    x_sel = X[_safe(idx)]
    offsets = (0.2 + 0.1 * np.arange(y.size, dtype=np.float32)).reshape(y.shape)
    return (x_sel + np.where(y >= x_sel, offsets, -offsets)).astype(np.float32)


def _safe(idx):
    from jnp_index_strategies import clamped
    return clamped(idx, X.shape)


def _has_array_index(idx):
    return any(isinstance(i, np.ndarray) for i in (idx if isinstance(idx, tuple) else (idx,)))


@pytest.mark.parametrize("op", ["set", "add", "multiply", "min", "max"])
@pytest.mark.parametrize("idx", UPDATE_INDICES, ids=[repr(i)[:30] for i in UPDATE_INDICES])
def test_grad_of_at_update_through_both_operands(idx, op):
    y = _values_for(idx)
    x = jnp.asarray(X)
    repeated = isinstance(idx, tuple) and len(idx) == 2 and isinstance(idx[0], np.ndarray) \
        and isinstance(idx[1], np.ndarray)
    if op == "multiply" and _has_array_index(idx):
        # As in JAX, a scatter-mul with array indices is differentiable in its operand only
        check_grads(lambda a: a.at[idx].multiply(y), (x,), order=1)
        with pytest.raises(NotImplementedError, match="unique_indices"):
            plax.grad(lambda v: jnp.sum(x.at[idx].multiply(v)))(y)
        return
    if op in ("min", "max"):
        # keep values away from ties, where min/max are not differentiable
        y = _away_from_ties(idx, y)
    if op == "set" and repeated:
        # which repeated update wins is unspecified: differentiate through x only
        check_grads(lambda a: a.at[idx].set(y), (x,), order=1)
        return
    check_grads(lambda a, v: getattr(a.at[idx], op)(v), (x, jnp.asarray(y)), order=1)


def test_grad_of_set_routes_cotangents():
    y = np.array([10.0, 20.0], np.float32)
    gx, gy = plax.grad(lambda x, v: jnp.sum(x.at[np.array([1, 3])].set(v) * np.arange(5.0)),
                       argnums=(0, 1))(np.ones(5, np.float32), y)
    assert_close(gx, np.array([0.0, 0.0, 2.0, 0.0, 4.0], np.float32))  # overwritten: no grad
    assert_close(gy, np.array([1.0, 3.0], np.float32))
    # out-of-bounds updates are dropped, so their values get no gradient
    gy = plax.grad(lambda v: jnp.sum(jnp.zeros(3).at[np.array([0, 5])].add(v)))(y)
    assert_close(gy, np.array([1.0, 0.0], np.float32))


def test_grad_with_traced_index_scalar():
    def f(x, i):
        return x[i] * 2.0 + x.at[i].add(1.0)[0]
    g = plax.grad(f)(np.arange(4.0, dtype=np.float32), 2)
    assert_close(g, np.array([1.0, 0.0, 2.0, 0.0], np.float32))


@pytest.mark.parametrize("idx", GET_INDICES[:4] + UPDATE_INDICES[2:5],
                         ids=[repr(i)[:30] for i in GET_INDICES[:4] + UPDATE_INDICES[2:5]])
def test_jit_matches_eager(idx):
    y = _values_for(idx)
    eager_get = jnp.asarray(X)[idx]
    assert_close(plax.jit(lambda x: x[idx])(X), eager_get)
    for op in ("set", "add", "max"):
        eager = getattr(jnp.asarray(X).at[idx], op)(y)
        jitted = plax.jit(lambda x, v: getattr(x.at[idx], op)(v))(X, y)
        assert_close(jitted, eager)


def test_jit_with_traced_integer_arrays():
    rows = np.array([3, 0, -1], np.int32)
    cols = np.array([4, 2, 0], np.int32)
    f = plax.jit(lambda x, r, c: (x[r, c], x.at[r, c].add(1.0), x[r], x[:, c]))
    got = f(X, rows, cols)
    ref = X.copy()
    np.add.at(ref, (rows, cols), 1.0)
    assert_close(got[0], X[rows, cols])
    assert_close(got[1], ref)
    assert_close(got[2], X[rows])
    assert_close(got[3], X[:, cols])


def test_vmap_over_array_index_and_values():
    xs = RNG.standard_normal((3, 4, 5)).astype(np.float32)
    idxs = np.array([[0, 1], [3, 3], [-1, 2]], np.int32)
    ys = RNG.standard_normal((3, 2, 5)).astype(np.float32)
    # over the array only
    out = plax.vmap(lambda x: x[np.array([2, 0])])(xs)
    assert_close(out, np.stack([x[[2, 0]] for x in xs]))
    # over the indices only
    out = plax.vmap(lambda i: jnp.asarray(X)[i])(idxs)
    assert_close(out, np.stack([X[i] for i in idxs]))
    # over everything, with .at[] updates
    out = plax.vmap(lambda x, i, y: x.at[i].add(y))(xs, idxs, ys)
    expected = []
    for x, i, y in zip(xs, idxs, ys):
        r = x.copy()
        np.add.at(r, i, y)
        expected.append(r)
    assert_close(out, np.stack(expected))
    out = plax.vmap(lambda x, i: x.at[i, 1:3].set(0.0), in_axes=(0, 0))(xs, idxs)
    expected = []
    for x, i in zip(xs, idxs):
        r = x.copy()
        r[i, 1:3] = 0.0
        expected.append(r)
    assert_close(out, np.stack(expected))


def test_vmap_of_static_updates_and_scalar_index():
    xs = RNG.standard_normal((3, 4)).astype(np.float32)
    out = plax.vmap(lambda x: x.at[0].set(5.0).at[1:3].multiply(2.0))(xs)
    ref = xs.copy()
    ref[:, 0] = 5.0
    ref[:, 1:3] *= 2.0
    assert_close(out, ref)
    i = np.array([0, 3, 2], np.int32)
    out = plax.vmap(lambda x, k: x[k])(xs, i)
    assert_close(out, xs[np.arange(3), i])


def test_grad_of_vmapped_indexing_and_jit_of_grad():
    def loss(x):
        return jnp.sum(plax.vmap(lambda row: row[np.array([0, 0, 2])])(x) ** 2)
    g = plax.jit(plax.grad(loss))(X)
    ref = np.zeros_like(X)
    ref[:, 0] = 4 * X[:, 0]
    ref[:, 2] = 2 * X[:, 2]
    assert_close(g, ref)
