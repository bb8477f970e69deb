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
