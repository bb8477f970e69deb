"""The Numba backend's ``top_k`` kernel (``plax_numba.kernels_select``): selection for small
``k``, the same bits as the NumPy backend's full sort (NaN largest, ties and -0/+0 by index),
eager and in a compiled program. No numba kernel is compiled: ``top_k`` is a host step."""
from __future__ import annotations

import numpy as np
import pytest

import plax
from plax import lax
from plax_numba import kernels_select
from plax_numpy import impls


def _with_ties_and_nans(rng, shape, dtype):
    x = rng.integers(0, 4, shape).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x[rng.random(shape) < 0.1] = np.nan
        x[rng.random(shape) < 0.1] = -0.0
        x[rng.random(shape) < 0.05] = -np.inf
    return x


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.bool_])
@pytest.mark.parametrize("shape,axis,k", [((6, 64), 1, 3), ((40, 2, 3), 0, 5), ((64,), 0, 1),
                                          ((2, 80, 3), 1, 10)])
def test_same_bits_as_the_numpy_backend(dtype, shape, axis, k):
    rng = np.random.default_rng(len(shape) * 10 + k)
    x = _with_ties_and_nans(rng, shape, dtype)
    assert k * kernels_select.SELECT_MAX_FRACTION <= shape[axis]  # the selection path
    got = plax.jit(lambda v: lax.top_k(v, k, axis=axis), backend="numba")(x)
    want = plax.jit(lambda v: lax.top_k(v, k, axis=axis), backend="numpy")(x)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape
        assert np.array_equal(g.view(np.uint8), w.view(np.uint8))


def test_which_path_serves_it(monkeypatch):
    """The backend's table serves top_k (eager and compiled); selection for small k, the
    reference's sort for a k near the axis' length, with the same values."""
    backend = plax.plugins.registry().get_backend("numba")
    assert backend.eager_impl(lax.top_k_p) is kernels_select.top_k_kernel
    sorted_by = []
    real = kernels_select.top_k_by_sorting
    monkeypatch.setattr(kernels_select, "top_k_by_sorting",
                        lambda v, k, *a: (sorted_by.append(v.shape), real(v, k, *a))[1])
    x = _with_ties_and_nans(np.random.default_rng(1), (3, 32), np.float32)
    step = plax.jit(lambda v, k=2: lax.top_k(v, k), backend="numba")
    np.asarray(step(x)[0])
    assert sorted_by == [(3, 2)]  # only the 2 selected entries of each row were sorted
    ref = plax.jit(lambda v: lax.top_k(v, 30), backend="numpy")(x)
    got = plax.jit(lambda v: lax.top_k(v, 30), backend="numba")(x)
    assert sorted_by[1:] == [(3, 32)]  # k = 30 of 32: the full sort
    assert all(np.array_equal(np.asarray(g), np.asarray(w), equal_nan=g.dtype.kind == "f")
               for g, w in zip(got, ref))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_distinct_rows_and_rows_with_ties_at_the_kth(dtype):
    """Rows whose k largest are distinct take one comparison pass (no NaN among any row's k
    largest, each row exactly k entries at or above its k-th); a row with ties at its k-th
    (-0 beside +0 too), or a NaN among its k largest, sends the call to the general pass:
    the NumPy backend's bits either way."""
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((9, 96)) * 1000).astype(dtype)
    cases = [x]
    tied = x.copy()
    tied[3, :5] = tied[3].max()           # five equal largest, k = 4: ties at the k-th
    cases.append(tied)
    if np.dtype(dtype).kind == "f":
        zeros = x.copy()
        zeros[5] = -np.abs(zeros[5])
        zeros[5, [7, 2, 40]] = [0.0, -0.0, 0.0]   # the k-th largest is a zero, of both signs
        nan = x.copy()
        nan[8, 50] = np.nan                # a NaN: the largest of its row
        cases += [zeros, nan]
    for case in cases:
        got = kernels_select.top_k_kernel(case, k=4, axis=1)
        want = impls()[lax.top_k_p](case, k=4, axis=1)   # (the reference kernel, any dtype)
        for g, w in zip(got, want):
            assert np.array_equal(np.asarray(g).view(np.uint8), np.asarray(w).view(np.uint8))
