"""The indexing family's GPU kernels (``plax_cupy.kernels_indexing``: slice, dynamic_slice,
dynamic_update_slice, gather, the scatters) on the simulated GPU against the NumPy backend's,
with out-of-bounds starts in every mode (run by test_kernels_a_simulated.py)."""
from __future__ import annotations

import numpy as np
import pytest

import plax.numpy as jnp
from plax import lax
from test_kernels_a_simulated import (check, check_program, dtypes_all, on_a_gpu,
                                      sample)

pytestmark = on_a_gpu

DTYPES = dtypes_all()
IDS = lambda d: np.dtype(d).name  # noqa: E731


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_slices_of_every_dtype(dtype):
    x = sample((5, 6), dtype)
    check(lax.slice_p, x, start_indices=(1, 0), limit_indices=(4, 6), strides=None)
    check(lax.slice_p, x, start_indices=(0, 1), limit_indices=(5, 6), strides=(2, 3))
    for starts in [(1, 2), (-3, 4), (4, 100), (np.iinfo(np.int32).min, 0)]:
        s = [np.int32(v) for v in starts]
        check(lax.dynamic_slice_p, x, *s, slice_sizes=(2, 3))
        check(lax.dynamic_update_slice_p, x, sample((2, 3), dtype, 1), *s)
    check(lax.dynamic_slice_p, x, np.uint8(250), np.uint8(1), slice_sizes=(5, 0))
    check(lax.dynamic_update_slice_p, x, sample((5, 6), dtype, 2), np.int16(3), np.int16(-3))


def test_box_starts_of_every_integer_type_clamp_as_numpy():
    # the box kernels clamp each start to [0, dim - size]: unsigned ones of 2**63 and more to
    # the top (not wrapped negative), signed ones from their lowest to their highest value
    x, update = sample((5, 7), np.float32), sample((2, 3), np.float32, 1)
    starts = {np.uint64: [(2**63, 0), (2**64 - 1, 2**63 + 5), (1, 2)],
              np.uint32: [(2**31, 0), (2**32 - 1, 5)],
              np.int8: [(-128, 127), (-1, 2)],
              np.int64: [(-2**63, 2**63 - 1), (2**62, -2**62)]}
    for dtype, rows in starts.items():
        for row in rows:
            s = [dtype(v) for v in row]
            check(lax.dynamic_slice_p, x, *s, slice_sizes=(2, 3))
            check(lax.dynamic_update_slice_p, x, update, *s)


@pytest.mark.parametrize("mode", ["clip", "fill", "promise_in_bounds"])
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_gather_and_scatter_modes(dtype, mode):
    x = sample((5, 3), dtype)
    idx = np.array([0, 4, 7, -1, 2, 2], np.int32)   # out of bounds both ways, a duplicate
    upd = sample((6, 3), dtype, 3)
    progs = [lambda x, i: x.at[i].get(mode=mode),
             lambda x, i: x.at[i].get(mode=mode, fill_value=1),
             lambda x, i, u: x.at[i].set(u, mode=mode)]
    if dtype not in (np.complex64, np.complex128):
        progs += [lambda x, i, u: x.at[i].min(u, mode=mode),
                  lambda x, i, u: x.at[i].max(u, mode=mode)]
    if np.dtype(dtype).kind != "b":  # (add and multiply refuse booleans, as in JAX)
        progs += [lambda x, i, u: x.at[i].add(u, mode=mode),
                  lambda x, i, u: x.at[i].multiply(u, mode=mode)]
    rtol = 1e-2 if np.dtype(dtype).itemsize <= 2 and np.dtype(dtype).kind in "fV" else 1e-6
    names = {"gather", "scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max"}
    for prog in progs:
        args = (x, idx) if prog.__code__.co_argcount == 2 else (x, idx, upd)
        assert check_program(prog, *args, primitives=names, rtol=rtol) >= 1


def test_gather_windows_batching_and_scalars():
    x = sample((4, 5, 6), np.float32)
    i = np.array([[0, 1], [3, 4], [2, -2], [1, 9]], np.int32)
    names = {"gather", "scatter-add", "dynamic_slice"}
    assert check_program(lambda x, i: x[i[:, 0], :, i[:, 1]], x, i, primitives=names) == 1
    assert check_program(lambda x, i: x[:, i[:, 0]], x, i, primitives=names) == 1
    assert check_program(lambda x, i: jnp.take_along_axis(x, i, axis=0),
                         x, (np.abs(x[:2]) * 3).astype(np.int32) % 4, primitives=names) == 1
    # vmap of dynamic_slice: a gather with batching dimensions
    import plax
    f = plax.vmap(lambda row, s: lax.dynamic_slice(row, (s,), (3,)))
    assert check_program(f, x[:, 0], i[:, 1], primitives=names) == 1
    g = plax.vmap(lambda row, s, u: row.at[s].add(u))
    assert check_program(g, x[:, :, 0], i[:, 0], x[:, 0, 0], primitives=names) >= 1
    # a rank-0 operand and zero index vectors
    assert check_program(lambda v, i: jnp.broadcast_to(v, (3,))[i], np.float32(2.5), i[:0, 0],
                         primitives=names) >= 1


def test_scatter_combines_duplicates_in_order():
    # many updates of one element: integers wrap exactly, NaN wins min/max, the last set wins
    x = np.zeros(3, np.int8)
    i = np.array([1] * 40 + [0, 2, 1], np.int32)
    u = np.arange(43, dtype=np.int8) * 7
    for prog in (lambda x, i, u: x.at[i].add(u), lambda x, i, u: x.at[i].multiply(u + 1),
                 lambda x, i, u: x.at[i].set(u), lambda x, i, u: x.at[i].min(u)):
        assert check_program(prog, x, i, u, primitives={"scatter", "scatter-add", "scatter-mul",
                                                        "scatter-min"}) == 1
    f = np.array([1.0, np.nan, -np.inf, 3.0, np.nan], np.float32)
    j = np.array([0, 0, 1, 1, 2], np.int32)
    for prog in (lambda x, i, u: x.at[i].min(u), lambda x, i, u: x.at[i].max(u)):
        assert check_program(prog, np.zeros(3, np.float32), j, f,
                             primitives={"scatter-min", "scatter-max"}) == 1


@pytest.mark.parametrize("dtype", [np.float16, "bfloat16", np.float32], ids=str)
def test_scatter_max_min_order_negative_zero_below_positive(dtype):
    """XLA's rule (-0 < +0) in the scatter's combine, float16/bfloat16 (their own select) as
    float32 (``plax_max``): the sign bits of the zeros equal the NumPy backend's."""
    import ml_dtypes
    import plax
    from test_kernels_a_simulated import reference, run_kernel
    dt = np.dtype(ml_dtypes.bfloat16 if dtype == "bfloat16" else dtype)
    operand = np.array([0.0, -0.0, 0.0, -0.0], dt)
    updates = np.array([-0.0, 0.0, -0.0, 0.0, -0.0, -0.0], dt)
    idx = np.array([0, 1, 2, 3, 2, 1], np.int32)
    for fn in (lambda x, i, u: x.at[i].max(u), lambda x, i, u: x.at[i].min(u)):
        closed = plax.make_jaxpr(fn)(operand, idx, updates)
        (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name.startswith("scatter")]
        args = [operand, np.asarray(idx).reshape(-1, 1), updates]
        got = np.asarray(run_kernel(eqn.primitive, *args, **eqn.params))
        want = np.asarray(reference(eqn.primitive, *args, **eqn.params))
        assert np.signbit(got.astype(np.float32)).tolist() == \
            np.signbit(want.astype(np.float32)).tolist(), (eqn.primitive.name, got, want)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=IDS)
def test_complex_scatter_max_min_apply_updates_in_order_as_jax(dtype):
    """JAX's complex max/min (plax.lowering.complex_extremes) applied update after update in
    order: a tie gives the update (its zeros' signs), a NaN never wins, so a NaN held is
    replaced by the next update and the order of repeated targets matters: the reference's
    bits."""
    import plax
    from test_kernels_a_simulated import reference, run_kernel
    nan = np.nan
    operand = np.array([0j, complex(-0.0, 0.0), complex(nan, 0), complex(1, nan), 2 + 0j], dtype)
    updates = np.array([complex(-0.0, -0.0), complex(0.0, 0.0), complex(3, 0), complex(nan, 1),
                        complex(0, 0), complex(1, 5), complex(1, nan), complex(2, -0.0),
                        complex(nan, nan), complex(-1, 0)], dtype)
    idx = np.array([0, 1, 2, 2, 2, 3, 3, 4, 4, 4], np.int32)
    for fn in (lambda x, i, u: x.at[i].max(u), lambda x, i, u: x.at[i].min(u)):
        closed = plax.make_jaxpr(fn)(operand, idx, updates)
        (eqn,) = [e for e in closed.jaxpr.eqns if e.primitive.name.startswith("scatter")]
        args = [operand, idx.reshape(-1, 1), updates]
        got = np.asarray(run_kernel(eqn.primitive, *args, **eqn.params))
        want = np.asarray(reference(eqn.primitive, *args, **eqn.params))
        words = np.uint32 if got.dtype == np.complex64 else np.uint64
        np.testing.assert_array_equal(got.view(words), want.view(words), err_msg=eqn.primitive.name)


@pytest.mark.parametrize("index_dtype", [np.uint8, np.int16, np.int64, np.uint64], ids=IDS)
def test_index_dtypes_and_window_scatters(index_dtype):
    # unsigned indices far out of bounds are dropped or clamped, never wrapped to negatives;
    # the extremes (and 2^62 / 2^63, whose offsets would overflow) too
    x = sample((4, 6, 3), np.float32)
    info = np.iinfo(index_dtype)
    i = np.array([1, 3, info.max, 0, 2, info.min, info.max // 2 + 1], index_dtype)
    names = {"gather", "scatter", "scatter-add", "scatter-max"}
    for mode in ("clip", "fill", "promise_in_bounds"):
        assert check_program(lambda x, i: x.at[:, i].get(mode=mode), x, i, primitives=names) == 1
        assert check_program(lambda x, i, u: x.at[:, i].add(u, mode=mode), x, i,
                             sample((4, 7, 3), np.float32, 1), primitives=names, rtol=1e-6) >= 1
        assert check_program(lambda x, i, u: x.at[i % 4, :, 1].max(u, mode=mode), x, i,
                             sample((7, 6), np.float32, 2), primitives=names) >= 1


def test_bfloat16_scatter_rounds_per_step_as_the_reference():
    # scatters take bfloat16 as bits and round after every combination, as ml_dtypes does:
    # equal to the reference bit for bit, not just close
    import ml_dtypes
    x = np.array([1.0, 256.0, -3.0], ml_dtypes.bfloat16)
    i = np.array([1, 1, 1, 1, 0, 2, 2], np.int32)
    u = np.array([0.5, 0.5, 0.5, 0.5, 1e-3, 7.0, -0.1], ml_dtypes.bfloat16)
    for prog in (lambda x, i, u: x.at[i].add(u), lambda x, i, u: x.at[i].multiply(u + 1)):
        assert check_program(prog, x, i, u, primitives={"scatter-add", "scatter-mul"}) == 1
