"""Refs batched along any axis under ``vmap`` (``in_axes=1``, ``2``, ``-1`` for a ref passed in,
or a ref made inside from a value batched along that axis): reads, writes and accumulations
with static, integer-array, batched and dynamic-slice indices, checked against a Python loop
over the examples on NumPy arrays, and beside JAX 0.10.2 where installed."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp

_IDX = np.array([[0, 1], [1, 0], [0, 0]], np.int32)

# name -> (per-example program on a ref r (shape (2, 4) or (2, 3, 4) per example) and the
# batched index array i (or None), NumPy reference on an example array a and its i)
_READS = {
    "int_and_slice": (lambda r, i: (r[1], r[:, 1:3]), lambda a, i: (a[1], a[:, 1:3])),
    "int_array_unbatched": (lambda r, i: r[np.array([1, 0, 1])],
                            lambda a, i: a[np.array([1, 0, 1])]),
    "int_array_batched": (lambda r, i: r[i], lambda a, i: a[i]),
    "non_adjacent_arrays": (lambda r, i: r[i, 1:3, np.array([0, 3])] if r.ndim == 3 else r[i],
                            lambda a, i: a[i, 1:3, np.array([0, 3])] if a.ndim == 3 else a[i]),
    "adjacent_after_slice": (lambda r, i: r[:, i] if r.ndim == 2 else r[:, i, 2],
                             lambda a, i: a[:, i] if a.ndim == 2 else a[:, i, 2]),
    "dynamic_slice": (lambda r, i: r[..., plax.ds(1, 2)], lambda a, i: a[..., 1:3]),
}


def _index_batch(n):
    return np.resize(_IDX, (n, 2)).astype(np.int32) % 2


def _loop_reads(ref_np, axis, name, idx):
    _, ref_fn = _READS[name]
    examples = np.moveaxis(ref_np, axis, 0)
    outs = [ref_fn(examples[k], idx[k]) for k in range(examples.shape[0])]
    return [np.stack(parts) for parts in zip(*outs)] if isinstance(outs[0], tuple) \
        else np.stack(outs)


@pytest.mark.parametrize("axis", [1, 2, -1])
@pytest.mark.parametrize("rank", [3, 4])
@pytest.mark.parametrize("name", sorted(_READS))
def test_reads_of_a_ref_passed_in(name, rank, axis):
    if rank == 3 and axis == 2:
        pytest.skip("axis 2 is -1 for rank 3")
    shape = (2, 5, 4) if rank == 3 else (2, 3, 5, 4)
    host = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    n = host.shape[axis]
    idx = _index_batch(n)
    fn, _ = _READS[name]
    got = plax.vmap(fn, in_axes=(axis, 0))(plax.new_ref(jnp.asarray(host)), jnp.asarray(idx))
    want = _loop_reads(host, axis, name, idx)
    for g, w in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, list) else (want,)):
        np.testing.assert_array_equal(np.asarray(g), w)


_WRITES = {
    "row_from_row": (lambda r, v, i: r.__setitem__(1, r[0] * 10 + v),
                     lambda a, v, i: a.__setitem__(1, a[0] * 10 + v)),
    "accumulate_all": (lambda r, v, i: r.__setitem__(Ellipsis, r[...] + v),
                       lambda a, v, i: a.__setitem__(Ellipsis, a + v)),
    "batched_index_set": (lambda r, v, i: r.__setitem__(i[0], v),
                          lambda a, v, i: a.__setitem__(i[0], v)),
    "addupdate_slice": (lambda r, v, i: r.addupdate(v[1:3], (0, plax.ds(1, 2))),
                        lambda a, v, i: a.__setitem__((0, slice(1, 3)), a[0, 1:3] + v[1:3])),
    "array_index_add": (lambda r, v, i: r.addupdate(jnp.stack([v, v]), np.array([1, 0])),
                        lambda a, v, i: a.__setitem__(np.array([1, 0]),
                                                      a[np.array([1, 0])] + np.stack([v, v]))),
}


@pytest.mark.parametrize("jitted", [False, True])
@pytest.mark.parametrize("axis", [1, -1])
@pytest.mark.parametrize("name", sorted(_WRITES))
def test_writes_into_a_ref_passed_in(name, axis, jitted):
    host = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)  # examples (2, 4) on axis 2
    axis_pos = axis % 3
    if axis_pos == 1:
        host = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    n = host.shape[axis_pos]
    vals = np.arange(n * 4, dtype=np.float32).reshape(n, 4) / 8
    idx = _index_batch(n)
    fn, ref_fn = _WRITES[name]
    mapped = plax.vmap(lambda r, v, i: fn(r, v, i), in_axes=(axis, 0, 0))
    if jitted:
        mapped = plax.jit(mapped)
    r = plax.new_ref(jnp.asarray(host))
    mapped(r, jnp.asarray(vals), jnp.asarray(idx))
    want = host.copy()
    examples = np.moveaxis(want, axis_pos, 0).copy()
    for k in range(n):
        ref_fn(examples[k], vals[k], idx[k])
    np.testing.assert_array_equal(np.asarray(plax.freeze(r)), np.moveaxis(examples, 0, axis_pos))


def test_ref_made_inside_from_a_value_batched_along_axis_1():
    def f(v):
        r = plax.new_ref(v)
        r[1] = r[0] * 10
        r[...] += 1.0
        return r[...], r[2]
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got, row = plax.vmap(f, in_axes=1)(jnp.asarray(x))
    want = np.stack([np.array([c[0] + 1, c[0] * 10 + 1, c[2] + 1]) for c in x.T])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(row, x[2] + 1)


def test_loops_over_a_ref_batched_along_axis_1():
    # JAX 0.10.2 fails here (AttributeError: 'Ref' object has no attribute 'transpose'); the
    # loop body sees the ref batched along axis 1 as the vmapped function does
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    r = plax.new_ref(jnp.asarray(x))

    def body(r):
        def step(k, c):
            r[0] = r[0] + 1.0
            return c
        return plax.lax.fori_loop(0, 2, step, 0)
    plax.vmap(body, in_axes=1)(r)
    want = x.copy()
    want[0] += 2
    np.testing.assert_array_equal(np.asarray(plax.freeze(r)), want)


def test_gradient_through_refs_made_under_vmap_along_axis_1():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)

    def per_column(u):
        r = plax.new_ref(u)
        r[0] = r[1] * r[0]
        return r[...].sum()
    g = plax.grad(lambda v: plax.vmap(per_column, in_axes=1)(v).sum())(jnp.asarray(x))
    want = np.stack([x[1], x[0] + 1, np.ones(4)])  # d/du of u1*u0 + u1 + u2
    np.testing.assert_array_equal(g, want)


_JAX_PROGRAMS = {
    "passed_axis1": lambda jx, x: (lambda r: (jx.vmap(
        lambda r: r.__setitem__(1, r[0] * 10), in_axes=1)(r), jx.freeze(r))[1])(jx.new_ref(x)),
    "batched_index_axis1": lambda jx, x: jx.vmap(lambda r, i: r[i], in_axes=(1, 0))(
        jx.new_ref(x), jx.numpy.array([0, 1, 2, 0])),
    "axis2_slices": lambda jx, x: jx.vmap(lambda r: (r[:, 1:3], r[1]), in_axes=-1)(
        jx.new_ref(x.reshape(3, 2, 2))),
}


@pytest.mark.parametrize("name", sorted(_JAX_PROGRAMS))
def test_beside_jax(name):
    jax = pytest.importorskip("jax", reason="compared with JAX where installed")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    ours = plax.tree_util.tree_leaves(_JAX_PROGRAMS[name](plax, jnp.asarray(x)))
    theirs = jax.tree_util.tree_leaves(_JAX_PROGRAMS[name](jax, jax.numpy.asarray(x)))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_writing_a_wrong_shape_is_jax_value_error():
    r = plax.new_ref(jnp.zeros((2, 3, 4)))
    with pytest.raises(ValueError, match="Invalid shape for `swap`"):
        plax.vmap(lambda r: r.__setitem__((0, slice(None)), jnp.ones(3)), in_axes=1)(r)


@pytest.mark.parametrize("axis", [0, 1])
def test_returning_a_ref_from_vmap_is_a_clear_error(axis):
    # JAX 0.10.2 fails here with an internal AttributeError ('Ref' has no 'transpose')
    x = jnp.arange(12.0).reshape(3, 4)
    with pytest.raises(ValueError, match="returned a mutable array reference of type "
                                         r"Ref\{float32\[\d\]\}, but mutable array references "
                                         "cannot be returned"):
        plax.vmap(lambda v: plax.new_ref(v), in_axes=axis)(x)
    with pytest.raises(ValueError, match="cannot be returned"):
        plax.vmap(lambda r: r, in_axes=axis)(plax.new_ref(x))
