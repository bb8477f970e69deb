"""The windowed reductions' GPU kernels (``plax_cupy.kernels_windows``) on the simulated GPU
against the NumPy backend's: strides, padding (negative too), base and window dilation, every
dtype, NaN propagation, windows wider than the operand (run by test_kernels_b_simulated.py)."""
from __future__ import annotations

import numpy as np
import pytest

from plax import lax
from test_kernels_a_simulated import dtypes_all, on_a_gpu, sample
from test_kernels_b_simulated import close

pytestmark = on_a_gpu

PRIMITIVES = [lax.reduce_window_sum_p, lax.reduce_window_max_p, lax.reduce_window_min_p]

CONFIGS = {
    "plain": dict(window_dimensions=(2, 3), window_strides=(1, 1), padding=((0, 0), (0, 0)),
                  base_dilation=(1, 1), window_dilation=(1, 1)),
    "strided padded": dict(window_dimensions=(3, 2), window_strides=(2, 3),
                           padding=((1, 2), (0, 1)), base_dilation=(1, 1), window_dilation=(1, 1)),
    "dilated": dict(window_dimensions=(2, 2), window_strides=(1, 2), padding=((1, 0), (2, 1)),
                    base_dilation=(2, 1), window_dilation=(1, 2)),
    "negative padding": dict(window_dimensions=(2, 1), window_strides=(1, 1),
                             padding=((-1, 1), (0, -2)), base_dilation=(1, 1), window_dilation=(1, 1)),
    "wider than the operand": dict(window_dimensions=(9, 1), window_strides=(1, 1),
                                   padding=((0, 0), (0, 0)), base_dilation=(1, 1),
                                   window_dilation=(1, 1)),
}


def _accepts(primitive, dtype) -> bool:
    kind = np.dtype(dtype).kind
    if primitive is lax.reduce_window_sum_p:
        return kind != "b"
    return kind != "c"


@pytest.mark.parametrize("dtype", dtypes_all(), ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("primitive", PRIMITIVES, ids=lambda p: p.name)
def test_every_dtype_and_configuration(primitive, dtype):
    if not _accepts(primitive, dtype):  # (the runner fails on any skip)
        return
    x = sample((5, 7), dtype)
    for name, params in CONFIGS.items():
        close(primitive, x, scale=8, **params)


@pytest.mark.parametrize("primitive", PRIMITIVES, ids=lambda p: p.name)
def test_nan_propagates_and_batched_3d(primitive):
    x = sample((2, 6, 5), np.float32)
    x[1, 2, 3] = np.nan
    x[0, 0, 0] = np.inf
    got = close(primitive, x, window_dimensions=(1, 2, 2), window_strides=(1, 2, 1),
                padding=((0, 0), (0, 1), (1, 1)), base_dilation=(1, 1, 1), window_dilation=(1, 1, 1))
    assert np.isnan(got[1]).any() and not np.isnan(got[0]).any()


def test_large_window_sum():
    close(lax.reduce_window_sum_p, sample((3, 40, 40), np.float32), window_dimensions=(1, 40, 40),
          window_strides=(1, 1, 1), padding=((0, 0),) * 3, base_dilation=(1, 1, 1),
          window_dilation=(1, 1, 1), scale=30)
