"""The reduction family's GPU kernels (``plax_cupy.kernels_reduction``) on the simulated GPU
against the NumPy backend's: every reduction and cumulative op on the dtypes it takes, several
axes, empty axes, NaN (run by test_kernels_a_simulated.py)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from plax import lax
from plax.lax.cumlogsumexp import cumlogsumexp_p
from test_kernels_a_simulated import check, on_a_gpu, sample

pytestmark = on_a_gpu

INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
COMPLEX = [np.complex64, np.complex128]
IDS = lambda d: np.dtype(d).name  # noqa: E731


def _with_nan(x):
    x = x.copy()
    if x.dtype.kind in "fcV" or x.dtype == ml_dtypes.bfloat16:
        x.reshape(-1)[3] = np.nan
    return x


def _rtol(dtype):
    dtype = np.dtype(dtype)
    return {2: 1e-2, 4: 1e-5}.get(dtype.itemsize if dtype.kind != "c" else dtype.itemsize // 2, 1e-12)


@pytest.mark.parametrize("dtype", INTS + FLOATS + COMPLEX, ids=IDS)
def test_reductions(dtype):
    x = sample((3, 4, 5), dtype)
    for axes in [(0,), (1, 2), (0, 1, 2), ()]:
        check(lax.reduce_sum_p, x, axes=axes, rtol=_rtol(dtype))
        check(lax.reduce_prod_p, x, axes=axes, rtol=_rtol(dtype))
        check(lax.reduce_max_p, x, axes=axes)
        check(lax.reduce_min_p, x, axes=axes)
    check(lax.reduce_max_p, _with_nan(x), axes=(1, 2))
    check(lax.reduce_min_p, _with_nan(x), axes=(0,))
    check(lax.reduce_max_p, x[:, :0], axes=(1,))   # the identity
    check(lax.reduce_min_p, x[:, :0], axes=(1, 2))
    check(lax.reduce_sum_p, x[:, :0], axes=(1,))
    if np.dtype(dtype).kind != "c":
        for axes in [(0,), (2,)]:
            check(lax.argmax_p, _with_nan(x), axes=axes, index_dtype=np.dtype(np.int32))
            check(lax.argmin_p, x, axes=axes, index_dtype=np.dtype(np.int64))


def _complex_rows(dtype, n):
    """Rows of complex values built to catch a fold out of order: zeros of every sign (ties:
    the later wins), NaN in either part (never wins; the next element replaces it), repeated
    extremes, over ``n`` elements (longer than a block)."""
    rng = np.random.default_rng(3)
    nan = np.nan
    special = np.array([complex(0.0, 0.0), complex(-0.0, 0.0), complex(0.0, -0.0),
                        complex(-0.0, -0.0), complex(nan, 0), complex(0, nan), complex(nan, nan),
                        complex(1, 0), complex(1, -0.0), complex(-1, 0), complex(1, nan)])
    rows = special[rng.integers(0, len(special), (6, n))]
    rows[1, n // 2] = complex(9, 9)        # a clear maximum, then NaN after it
    rows[1, n - 3] = complex(nan, 1)
    rows[2, :] = special[rng.integers(0, 4, n)]   # zeros only
    rows[3, -1] = complex(0, nan)          # the last element NaN
    return rows.astype(dtype)


def _same_bits(got, want, name):
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    assert got.shape == want.shape and got.dtype == want.dtype, (name, got.shape, want.shape)
    words = np.uint32 if got.dtype == np.complex64 else np.uint64
    np.testing.assert_array_equal(got.view(words), want.view(words), err_msg=name)


@pytest.mark.parametrize("fold_max_row", [4096, 8])
@pytest.mark.parametrize("dtype", COMPLEX, ids=IDS)
def test_complex_extremes_fold_as_jax_bit_for_bit(dtype, fold_max_row, monkeypatch):
    """JAX 0.10.2's complex max/min (plax.lowering.complex_extremes: a tie gives the later
    operand with its zeros' signs, a NaN never wins), not associative, so folded in order:
    reductions (rows of 700, past a block; several axes; empty) by a thread a row or, rows
    past ``COMPLEX_FOLD_MAX_ROW``, whole-array operations; cummax/cummin forward and
    reverse (each suffix folded from its own start), on both axes: the reference's bits."""
    from plax_cupy import kernels_reduction
    from test_kernels_a_simulated import run_kernel, reference
    monkeypatch.setattr(kernels_reduction, "COMPLEX_FOLD_MAX_ROW", fold_max_row)
    x = _complex_rows(dtype, 700)
    for prim in (lax.reduce_max_p, lax.reduce_min_p):
        for operand, axes in ((x, (1,)), (x, (0,)), (x[:, :40].reshape(6, 8, 5), (0, 2)),
                              (x[:, :0], (1,))):
            _same_bits(run_kernel(prim, operand, axes=axes),
                       reference(prim, operand, axes=axes), f"{prim.name} {axes}")
    for prim in (lax.cummax_p, lax.cummin_p):
        for operand, axis in ((x, 1), (x[:, :40].T.copy(), 0)):
            for reverse in (False, True):
                _same_bits(run_kernel(prim, operand, axis=axis, reverse=reverse),
                           reference(prim, operand, axis=axis, reverse=reverse),
                           f"{prim.name} axis {axis} reverse {reverse}")


def test_complex_extremes_in_a_jit_program_run_apart_quietly():
    """In a compiled program the fusion cluster holding a complex reduce_max/reduce_min runs
    its elementwise part as one generated kernel and the reduction after it (the in-order
    fold, by design: no fallback warning), the reference's bits."""
    import warnings
    import plax
    x = _complex_rows(np.complex64, 40)

    def f(x):
        y = x * 2
        return (lax.reduce_max(y, (1,)), lax.reduce_min(y, (0,)), lax.max(y, y[:, ::-1]),
                lax.cummax(y, axis=1, reverse=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = plax.jit(f)(plax.device_put(x, plax.devices("gpu")[0]))
        got = [np.asarray(g) for g in got]
    want = [np.asarray(w) for w in plax.jit(f, backend="numpy")(x)]
    for g, w in zip(got, want, strict=True):
        _same_bits(g, w, "jit")


@pytest.mark.parametrize("dtype", [np.bool_] + INTS, ids=IDS)
def test_bitwise_reductions(dtype):
    x = sample((3, 7, 5), dtype)
    for axes in [(1,), (0, 2), (0, 1, 2), ()]:
        check(lax.reduce_and_p, x, axes=axes)
        check(lax.reduce_or_p, x, axes=axes)
        check(lax.reduce_xor_p, x, axes=axes)
    check(lax.reduce_and_p, x[:0], axes=(0,))     # the identities
    check(lax.reduce_or_p, x[:0], axes=(0, 1))
    check(lax.reduce_xor_p, x[:, :0], axes=(1,))


@pytest.mark.parametrize("dtype", INTS + FLOATS + COMPLEX, ids=IDS)
def test_cumulative(dtype):
    x = sample((4, 9), dtype)
    kind = np.dtype(dtype).kind
    # the reference rounds half-precision running sums and products at every step, in XLA's
    # CPU order (lax.cumulative.blocked_scan); the GPU kernel accumulates in float32 and rounds
    # once: up to one rounding per step apart (9 steps of bfloat16's 2**-8)
    rtol = 4e-2 if np.dtype(dtype).itemsize == 2 and kind in "fV" else _rtol(dtype)
    for axis in (0, 1):
        for reverse in (False, True):
            check(lax.cumsum_p, x, axis=axis, reverse=reverse, rtol=rtol)
            check(lax.cumprod_p, x, axis=axis, reverse=reverse, rtol=rtol)
            check(lax.cummax_p, _with_nan(x), axis=axis, reverse=reverse)
            check(lax.cummin_p, x, axis=axis, reverse=reverse)
            if kind in "fV":
                check(cumlogsumexp_p, _with_nan(x), axis=axis, reverse=reverse, rtol=_rtol(dtype))
    check(lax.cumsum_p, x[:, :0], axis=1, reverse=True)
    check(lax.cummax_p, x[:1], axis=0, reverse=False)
