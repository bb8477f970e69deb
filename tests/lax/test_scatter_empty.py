"""Scatters that write nothing: into an empty operand, or with no updates (an empty index
array). JAX 0.10.2 returns the operand unchanged for every scatter kind and every mode
(clip, fill/drop, promise_in_bounds), eager, jitted, vmapped and through ``x.at[idx]``; the
reference kernels raised ``IndexError`` for clip into an empty operand (the clamp aimed at -1).
The conformance kit's "empty operand" scatter cases check the same on every backend."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as pnp
from plax import lax as plax_lax

MODES = ("CLIP", "FILL_OR_DROP", "PROMISE_IN_BOUNDS")
KINDS = ("scatter", "scatter_add", "scatter_mul", "scatter_min", "scatter_max")

# (label, operand, indices, updates, (update_window_dims, inserted_window_dims, to_operand))
CASES = [
    ("empty operand", np.zeros((0,), np.float32), np.array([[0], [1]], np.int32),
     np.array([1.0, 2.0], np.float32), ((), (0,), (0,))),
    ("empty operand rows", np.zeros((0, 3), np.float32), np.array([[0], [-1]], np.int32),
     np.ones((2, 3), np.float32), ((1,), (0,), (0,))),
    ("empty operand columns", np.zeros((2, 0), np.float32), np.array([[1], [0]], np.int32),
     np.ones((2, 0), np.float32), ((1,), (0,), (0,))),
    ("no updates", np.arange(3, dtype=np.float32), np.zeros((0, 1), np.int32),
     np.zeros((0,), np.float32), ((), (0,), (0,))),
]
IDS = [c[0] for c in CASES]


def _scatter(lax, kind, mode, dnums):
    window, inserted, to_operand = dnums
    dn = lax.ScatterDimensionNumbers(update_window_dims=window, inserted_window_dims=inserted,
                                     scatter_dims_to_operand_dims=to_operand)
    op, mode = getattr(lax, kind), getattr(lax.GatherScatterMode, mode)
    return lambda x, i, u: op(x, i, u, dn, mode=mode)


@pytest.mark.parametrize("label,x,idx,upd,dnums", CASES, ids=IDS)
def test_scatter_that_writes_nothing_returns_the_operand(label, x, idx, upd, dnums):
    for kind in KINDS:
        for mode in MODES:
            f = _scatter(plax_lax, kind, mode, dnums)
            # jitted beside a non-empty output, so the program is compiled and run (a program
            # whose outputs are all empty is skipped: plax.empty_programs)
            g = plax.jit(lambda x, i, u, f=f: (f(x, i, u), u.sum() + 1))
            for got in (f(x, idx, upd), g(x, idx, upd)[0]):
                assert got.shape == x.shape and got.dtype == x.dtype, (kind, mode)
                np.testing.assert_array_equal(np.asarray(got), x, err_msg=f"{kind} {mode}")


@pytest.mark.parametrize("label,x,idx,upd,dnums", CASES[::3], ids=IDS[::3])
def test_scatter_that_writes_nothing_as_jax(label, x, idx, upd, dnums):
    jax = pytest.importorskip("jax")
    # every kind and every mode, each kind in one mode (JAX compiles each call)
    for kind, mode in zip(KINDS, MODES * 2):
        want = _scatter(jax.lax, kind, mode, dnums)(x, idx, upd)
        got = _scatter(plax_lax, kind, mode, dnums)(x, idx, upd)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


AT_METHODS = ("set", "add", "multiply", "min", "max")


@pytest.mark.parametrize("mode", ["clip", "drop", "fill", "promise_in_bounds", None])
def test_at_methods_into_an_empty_operand(mode):
    x = pnp.zeros((0, 3), np.float32)
    idx = pnp.array([0, 1])
    for method in AT_METHODS:
        update = lambda x, m=method: getattr(x.at[idx], m)(1.0, mode=mode)
        for got in (update(x), plax.jit(lambda x: (update(x), idx.sum()))(x)[0]):
            assert got.shape == (0, 3) and got.dtype == np.float32, method
        # one empty operand per row of a batch; each row's loop reference is its operand
        xs = np.zeros((4, 0), np.float32)
        got = plax.vmap(lambda r: getattr(r.at[idx], method)(1.0, mode=mode))(xs)
        assert got.shape == (4, 0), method
    # no updates: the operand comes back, values and all
    y = np.arange(3, dtype=np.float32)
    for method in AT_METHODS:
        got = getattr(pnp.asarray(y).at[pnp.zeros((0,), np.int32)], method)(
            pnp.zeros((0,), np.float32), mode=mode)
        np.testing.assert_array_equal(np.asarray(got), y)


def test_gradient_into_an_empty_operand():
    # the operand's cotangent passes through (JAX: an empty float32 array)
    x = np.zeros((0,), np.float32)
    for mode in MODES:
        f = _scatter(plax_lax, "scatter_add", mode, ((), (0,), (0,)))
        g = plax.grad(lambda x: f(x, np.array([[0]], np.int32), np.ones((1,), np.float32)).sum())(x)
        assert g.shape == (0,) and g.dtype == np.float32


def test_updates_gradient_into_an_empty_operand_is_refused_as_jax():
    # the updates' cotangent is a gather of one element from an empty array, which JAX refuses
    # with TypeError ("Slice size at index 0 in gather op is out of range"); so does plax
    x, idx, u = np.zeros((0,), np.float32), np.array([[0], [1]], np.int32), np.ones(2, np.float32)
    for mode in MODES:
        f = _scatter(plax_lax, "scatter_add", mode, ((), (0,), (0,)))
        with pytest.raises(TypeError, match=r"Slice size at index 0 in gather op is out of range"):
            plax.grad(lambda u: f(x, idx, u).sum())(u)


def test_no_backend_is_handed_a_scatter_into_an_empty_operand():
    from plax.core.passes import prepare_for_backend
    idx, upd = np.array([[0]], np.int32), np.ones((1,), np.float32)
    f = _scatter(plax_lax, "scatter_add", "CLIP", ((), (0,), (0,)))
    names = lambda x: [e.primitive.name for e in
                       prepare_for_backend(plax.make_jaxpr(f)(x, idx, upd))[0].eqns]
    # staged as JAX stages it, then erased before compilation; kept where it writes
    assert "scatter-add" in str(plax.make_jaxpr(f)(np.zeros((0,), np.float32), idx, upd))
    assert "scatter-add" not in names(np.zeros((0,), np.float32))
    assert "scatter-add" in names(np.zeros((2,), np.float32))
