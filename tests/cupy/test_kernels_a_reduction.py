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


def test_complex_max_min_are_lexicographic():
    x = np.array([[1 + 5j, 3 + 0j, 3 + 1j, 3 + 1j], [-1 - 1j, -1 - 2j, -2 + 9j, 0j]], np.complex64)
    check(lax.reduce_max_p, x, axes=(1,))
    check(lax.reduce_min_p, x, axes=(1,))
    check(lax.reduce_max_p, x, axes=(0, 1))


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
