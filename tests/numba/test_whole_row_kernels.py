"""The Numba backend's whole-row gather and scatter-add (``plax_numba.kernels_rows``): an
embedding lookup and its gradient, with the reference kernels' bits (duplicate rows summed
in index order, out-of-range rows clamped by the gather and dropped by the scatter). Eager
calls and kernel calls only: no numba kernel is compiled."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax
from plax_numba import kernels_rows
from plax_numpy import impls


def _embedding_eqns(table, ids):
    """The gather and scatter-add equations of an embedding lookup's VJP."""
    def lookup_vjp(t, ct):
        return plax.vjp(lambda t: t[ids], t)[1](ct)
    ct = np.zeros(ids.shape + table.shape[1:], table.dtype)
    eqns = plax.make_jaxpr(lookup_vjp)(table, ct).eqns
    found = {}

    def walk(eqns):
        for e in eqns:
            if e.primitive in (lax.gather_p, lax.scatter_add_p):
                found[e.primitive] = e
            for sub in e.params.values():
                if hasattr(sub, "eqns"):
                    walk(sub.eqns)
                elif hasattr(sub, "jaxpr") and hasattr(sub.jaxpr, "eqns"):
                    walk(sub.jaxpr.eqns)
    walk(eqns)
    return found[lax.gather_p], found[lax.scatter_add_p]


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@pytest.mark.parametrize("mode", list(lax.GatherScatterMode))
def test_same_bits_as_the_reference_kernels(dtype, mode):
    rng = np.random.default_rng(3)
    table = (rng.standard_normal((40, 3, 2)) * 100).astype(dtype)
    ids = rng.integers(0, 40, (6, 9)).astype(np.int32)
    gather, scatter = _embedding_eqns(table.astype(np.float32), ids)  # (its parameters)
    rows = rng.integers(-4, 44, ids.shape + (1,)).astype(np.int32)  # duplicates, out of range
    updates = (rng.standard_normal(ids.shape + (3, 2)) * 100).astype(dtype)
    gp = dict(gather.params, mode=mode)
    sp = dict(scatter.params, mode=mode)
    pairs = [(kernels_rows.gather_kernel(table, rows, **gp),
              impls()[lax.gather_p](table, rows, **gp)),
             (kernels_rows.scatter_add_kernel(table, rows, updates, **sp),
              impls()[lax.scatter_add_p](table, rows, updates, **sp))]
    for got, want in pairs:
        assert got.shape == want.shape and got.dtype == want.dtype
        assert np.array_equal(np.ascontiguousarray(got).view(np.uint8),
                              np.ascontiguousarray(want).view(np.uint8))


def test_many_updates_of_few_rows_add_in_index_order():
    """500 float32 updates into 7 of 9 rows, each row receiving from 1 to ~150 (the passes
    over the rows still receiving one, most first): the reference's bits."""
    rng = np.random.default_rng(8)
    table = (rng.standard_normal((9, 5)) * 1e3).astype(np.float32)
    rows = np.concatenate([rng.choice([0, 2, 3, 5], 450), [8, 7, 7], rng.integers(0, 9, 47)])
    rows = rows.astype(np.int32)[:, None]
    updates = (rng.standard_normal((rows.shape[0], 5)) * 1e3).astype(np.float32)
    dn = lax.ScatterDimensionNumbers((1,), (0,), (0,))
    params = dict(dimension_numbers=dn, indices_are_sorted=False, unique_indices=False,
                  mode=lax.GatherScatterMode.FILL_OR_DROP)
    got = kernels_rows.scatter_add_kernel(table, rows, updates, **params)
    want = impls()[lax.scatter_add_p](table, rows, updates, **params)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    assert not np.array_equal(got, table)


def test_embedding_gradient_eagerly_on_the_numba_backend(monkeypatch):
    """The backend's table serves both; whole rows never reach the reference kernels, a
    column gather does; the gradient equals float32 sums in index order."""
    backend = plax.plugins.registry().get_backend("numba")
    assert backend.eager_impl(lax.gather_p) is kernels_rows.gather_kernel
    assert backend.eager_impl(lax.scatter_add_p) is kernels_rows.scatter_add_kernel
    referenced = []
    real = kernels_rows._reference
    monkeypatch.setattr(kernels_rows, "_reference",
                        lambda *p: (referenced.append(p), real(*p))[1])
    rng = np.random.default_rng(4)
    table = rng.standard_normal((20, 5)).astype(np.float32)
    ids = np.array([3, 7, 3, 19, 3, 0, 7], np.int32)
    ct = rng.standard_normal((7, 5)).astype(np.float32)
    with plax.default_device(plax.devices("cpu", backend="numba")[0]):
        looked_up, pullback = plax.vjp(lambda t: t[ids], plax.numpy.asarray(table))
        (grad,) = pullback(plax.numpy.asarray(ct))
        assert referenced == []
        np.asarray(plax.numpy.asarray(table)[:, np.array([1, 2])])  # columns: not whole rows
    assert referenced == [(lax.gather_p,)]
    want = np.zeros_like(table)
    for i, r in enumerate(ids):
        want[r] = want[r] + ct[i]
    np.testing.assert_array_equal(np.asarray(looked_up), table[ids])
    np.testing.assert_array_equal(np.asarray(grad), want)


def test_no_rows_to_add():
    table = np.ones((4, 3), np.float32)
    _, scatter = _embedding_eqns(table, np.zeros((0,), np.int32))
    got = kernels_rows.scatter_add_kernel(table, np.zeros((0, 1), np.int32),
                                          np.zeros((0, 3), np.float32), **scatter.params)
    np.testing.assert_array_equal(got, table)
    assert got is not table


@pytest.mark.parametrize("mode", list(lax.GatherScatterMode))
def test_uint64_rows_past_int64_as_the_reference_kernels(mode):
    """A uint64 row index of 2**63 or more is out of range (clamped or dropped as the
    reference kernels do), not a negative row."""
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    gather, scatter = _embedding_eqns(table, np.zeros((2,), np.int32))
    rows = np.array([[2**63 + 3], [1]], np.uint64)
    updates = np.full((2, 3), 100, np.float32)
    gp, sp = dict(gather.params, mode=mode), dict(scatter.params, mode=mode)
    pairs = [(kernels_rows.gather_kernel(table, rows, **gp),
              impls()[lax.gather_p](table, rows, **gp)),
             (kernels_rows.scatter_add_kernel(table, rows, updates, **sp),
              impls()[lax.scatter_add_p](table, rows, updates, **sp))]
    for got, want in pairs:
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def _scatter_add_eqn(f, *args):
    """The one ``scatter-add`` equation of ``f``'s jaxpr (sub-jaxprs included)."""
    found = []

    def walk(eqns):
        for e in eqns:
            if e.primitive is lax.scatter_add_p:
                found.append(e)
            for sub in e.params.values():
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    walk(inner.eqns)
    walk(plax.make_jaxpr(f)(*args).eqns)
    (eqn,) = found
    return eqn


def _take_along_rows_vjp(x, y, ct):
    """The gradient of ``take_along_axis`` along the rows: a batched single-element
    scatter-add (a cross-entropy's gradient)."""
    pick = lambda x: plax.numpy.take_along_axis(x, y[:, None], axis=1)  # noqa: E731
    return plax.vjp(pick, x)[1](ct)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.complex64])
@pytest.mark.parametrize("mode", list(lax.GatherScatterMode))
def test_single_element_scatter_adds_have_the_reference_bits(dtype, mode):
    """Single-element scatter-adds (no update window), batched (``take_along_axis``'s
    gradient) and not (one into the flattened table, as the flat-position plan of ``.at[]``
    scatters, and ``x.at[i, j].add(v)``'s over two axes), with duplicate positions and
    indices out of range on both sides: the reference kernel's bits in every mode."""
    rng = np.random.default_rng(8)
    table = (rng.standard_normal((6, 50)) * 100).astype(dtype)
    cols = rng.integers(-3, 53, (6, 4, 1)).astype(np.int32)
    updates = (rng.standard_normal((6, 4)) * 100).astype(dtype)
    y = np.zeros(6, np.int32)
    batched = _scatter_add_eqn(_take_along_rows_vjp, np.zeros(table.shape, np.float32), y,
                               np.zeros((6, 1), np.float32))
    assert batched.params["dimension_numbers"].operand_batching_dims == (0,)
    i, j = np.zeros(9, np.int32), np.zeros(9, np.int32)
    two_axes = _scatter_add_eqn(lambda x, i, j, v: x.at[i, j].add(v), table, i, j,
                                np.zeros(9, dtype)).params
    assert two_axes["dimension_numbers"].scatter_dims_to_operand_dims == (0, 1)
    at = rng.integers(-3, 303, (9, 1)).astype(np.int32)
    ij = np.stack([rng.integers(-2, 8, 9), rng.integers(-3, 53, 9)], -1).astype(np.int32)
    at[3], at[7], ij[3], ij[7] = at[1], at[1], ij[1], ij[1]  # an element three times
    flat = dict(two_axes, dimension_numbers=lax.ScatterDimensionNumbers(
        update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,)))
    u9 = updates.reshape(-1)[:9]
    for operand, params, indices, u in ((table, batched.params, cols, updates),
                                        (table.reshape(-1), flat, at, u9),
                                        (table, two_axes, ij, u9)):
        assert not params["dimension_numbers"].update_window_dims
        p = dict(params, mode=mode)
        got = kernels_rows.scatter_add_kernel(operand, indices, u, **p)
        want = impls()[lax.scatter_add_p](operand, indices, u, **p)
        assert got.shape == want.shape and got.dtype == want.dtype and got is not operand
        assert np.array_equal(got.view(np.uint8), np.ascontiguousarray(want).view(np.uint8))


def test_take_along_axis_gradient_skips_the_reference_kernel(monkeypatch):
    """The backend's scatter-add kernel takes a cross-entropy's ``take_along_axis`` gradient
    without the reference kernel, and gives a Python loop's sums (a zero table, each row's
    cotangent at its label); a uint64 column past int64 is dropped, not negative."""
    backend = plax.plugins.registry().get_backend("numba")
    assert backend.eager_impl(lax.scatter_add_p) is kernels_rows.scatter_add_kernel
    referenced = []
    real = kernels_rows._reference
    monkeypatch.setattr(kernels_rows, "_reference",
                        lambda *p: (referenced.append(p), real(*p))[1])
    rng = np.random.default_rng(9)
    x = rng.standard_normal((16, 30)).astype(np.float32)
    y = rng.integers(0, 30, 16).astype(np.int32)
    ct = rng.standard_normal((16, 1)).astype(np.float32)
    scatter = _scatter_add_eqn(_take_along_rows_vjp, x, y, ct)
    grad = kernels_rows.scatter_add_kernel(np.zeros_like(x), y.reshape(16, 1, 1), ct,
                                           **scatter.params)
    want = np.zeros_like(x)
    for r in range(16):
        want[r, y[r]] += ct[r, 0]
    np.testing.assert_array_equal(grad, want)
    far = np.array([[[2**63 + 1]], [[3]]], np.uint64)
    got = kernels_rows.scatter_add_kernel(x[:2], far, np.ones((2, 1), np.float32),
                                          **scatter.params)
    assert referenced == []
    np.testing.assert_array_equal(got, impls()[lax.scatter_add_p](
        x[:2], far, np.ones((2, 1), np.float32), **scatter.params))
