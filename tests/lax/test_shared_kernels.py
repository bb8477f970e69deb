"""The core's array-module-generic kernel pieces (called by the NumPy reference kernels and the
CuPy kernels with their module): checked here with NumPy against independent references (Python
loops, Python integers, NumPy/ml_dtypes casts). ``tests/cupy`` runs the same functions through
the CuPy kernels on the simulated GPU."""
from __future__ import annotations

import importlib
import itertools

import ml_dtypes
import numpy as np
import pytest

from plax.lax.convolution import (ConvDimensionNumbers, conv_compute_dtype, dilate_and_pad,
                                  from_channels_last, to_channels_last, window_view)
from plax.lax.extra_elementwise import clz_array, mulhi_array
from plax.lax.linalg import qr_of_empty, svd_of_empty
from plax.lax.precision import reduce_precision_array
from plax.lax.slicing import gather_fill_value
from plax.lax.top_k import top_k_by_sorting
from plax.lax.windows import reduce_window_array

fft_module = importlib.import_module("plax.lax.fft")  # (plax.lax.fft is also the function)

INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]


def _random_ints(rng, dtype, shape):
    width = np.dtype(dtype).itemsize
    raw = rng.integers(0, 2 ** 63, shape, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    out = raw.astype(f"u{width}").view(dtype)
    out.flat[:4] = np.array([0, 1, 2, 3]).astype(dtype)
    out.flat[4] = np.iinfo(dtype).max
    out.flat[5] = np.iinfo(dtype).min
    return out


# ---------------------------------------------------------------- dilate_and_pad, window_view

def _dilate_and_pad_loop(x, dilation, padding, fill):
    """1-D reference: input element i lands at lo + i * d, kept where inside [0, size)."""
    (d,), ((lo, hi),) = dilation, padding
    n = len(x)
    size = max((0 if n == 0 else (n - 1) * d + 1) + lo + hi, 0)
    out = [fill] * size
    for i, v in enumerate(x):
        if 0 <= lo + i * d < size:
            out[lo + i * d] = v
    return np.array(out, x.dtype).reshape(size)


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_dilate_and_pad_matches_a_loop(n):
    x = np.arange(1, n + 1, dtype=np.int32)
    for d, lo, hi in itertools.product((1, 2, 3), range(-6, 4), range(-6, 4)):
        got = dilate_and_pad(x, (0,), (d,), ((lo, hi),), -7)
        want = _dilate_and_pad_loop(x, (d,), ((lo, hi),), -7)
        np.testing.assert_array_equal(got, want, err_msg=f"d={d} padding={(lo, hi)}")
        assert got.dtype == x.dtype


def test_dilate_and_pad_only_cropping_is_a_view():
    x = np.arange(24.0).reshape(4, 6)
    out = dilate_and_pad(x, (0, 1), (1, 1), ((-1, 0), (-2, -1)), 0.0)
    np.testing.assert_array_equal(out, x[1:, 2:5])
    assert np.shares_memory(out, x)
    same = dilate_and_pad(x, (0, 1), (1, 1), ((0, 0), (0, 0)), 0.0)
    assert np.shares_memory(same, x) and same.shape == x.shape
    padded = dilate_and_pad(x, (0, 1), (1, 1), ((-1, 1), (0, 0)), 0.0)  # a crop and a pad
    assert not np.shares_memory(padded, x)
    np.testing.assert_array_equal(padded, np.concatenate([x[1:], np.zeros((1, 6))]))


def test_dilate_and_pad_two_axes_equals_one_at_a_time():
    x = np.arange(12.0).reshape(3, 4)
    both = dilate_and_pad(x, (0, 1), (2, 3), ((1, -1), (-2, 2)), np.inf)
    rows = dilate_and_pad(x, (0,), (2,), ((1, -1),), np.inf)
    np.testing.assert_array_equal(both, dilate_and_pad(rows, (1,), (3,), ((-2, 2),), np.inf))


@pytest.mark.parametrize("layout", ["C", "F"])
def test_window_view_matches_a_loop(layout):
    x = np.asarray(np.arange(7 * 9, dtype=np.float64).reshape(7, 9), order=layout)
    window, strides, dilation = (2, 3), (2, 1), (2, 2)
    out_sizes = tuple((n - ((w - 1) * d + 1)) // s + 1
                      for n, w, s, d in zip(x.shape, window, strides, dilation))
    v = window_view(x, (0, 1), window, strides, dilation, out_sizes)
    assert v.shape == out_sizes + window
    for i, j, a, b in itertools.product(*(range(k) for k in out_sizes + window)):
        assert v[i, j, a, b] == x[i * 2 + a * 2, j + b * 2]


# ---------------------------------------------------------------- convolution layout helpers

def test_conv_compute_dtype():
    assert conv_compute_dtype(np.bool_) == np.int64
    assert conv_compute_dtype(np.float16) == np.float32
    assert conv_compute_dtype(ml_dtypes.bfloat16) == np.float32
    assert conv_compute_dtype(np.float32) == np.float32
    assert conv_compute_dtype(np.int8) == np.int8
    assert conv_compute_dtype(np.complex64) == np.complex64


def test_channels_last_round_trip():
    rng = np.random.default_rng(0)
    # lhs stored (C, W, N, H), rhs (H, I, W, O), output (W, O, N, H)
    dn = ConvDimensionNumbers((2, 0, 3, 1), (3, 1, 0, 2), (2, 1, 3, 0))
    lhs = rng.standard_normal((3, 5, 2, 4)).astype(np.float16)
    rhs = rng.standard_normal((2, 3, 6, 7)).astype(np.float16)
    x, w = to_channels_last(lhs, rhs, dn, np.float32)
    assert x.dtype == w.dtype == np.float32
    np.testing.assert_array_equal(x, np.einsum("cwnh->nhwc", lhs).astype(np.float32))
    np.testing.assert_array_equal(w, np.einsum("hiwo->hwio", rhs).astype(np.float32))
    out = rng.standard_normal((2, 4, 5, 7)).astype(np.float32)  # (N, H, W, O)
    back = from_channels_last(out, dn, np.float16)
    assert back.dtype == np.float16 and back.flags.c_contiguous
    np.testing.assert_array_equal(back, np.einsum("nhwo->wonh", out).astype(np.float16))
    flags = from_channels_last(np.array([[[0, 2, -1]]]), ConvDimensionNumbers(
        (0, 1, 2), (0, 1, 2), (0, 1, 2)), np.bool_)
    np.testing.assert_array_equal(flags, [[[False], [True], [True]]])


# ---------------------------------------------------------------- reduce_precision_array

def test_reduce_precision_array_to_float16_and_bfloat16_equals_the_casts():
    rng = np.random.default_rng(1)
    bits = rng.integers(0, 2 ** 32, 20000, dtype=np.uint64).astype(np.uint32)
    x = bits.view(np.float32)
    x = x[np.isfinite(x)]
    # bfloat16 has float32's exponent range: the rounding alone, subnormals included
    np.testing.assert_array_equal(
        reduce_precision_array(x, 8, 7), x.astype(ml_dtypes.bfloat16).astype(np.float32))
    # float16: in its normal range the cast is the same rounding; beyond it, infinities
    normal = x[(np.abs(x) >= 2.0 ** -14) & (np.abs(x) < 65504.0)]
    np.testing.assert_array_equal(reduce_precision_array(normal, 5, 10),
                                  normal.astype(np.float16).astype(np.float32))
    big = np.array([70000.0, -1e30, 65520.0, 65519.0], np.float32)
    np.testing.assert_array_equal(reduce_precision_array(big, 5, 10),
                                  [np.inf, -np.inf, np.inf, 65504.0])
    tiny = np.array([2.0 ** -15, -2.0 ** -20], np.float32)  # below float16's smallest normal
    out = reduce_precision_array(tiny, 5, 10)
    np.testing.assert_array_equal(out, [0.0, -0.0])
    assert np.signbit(out[1])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64])
def test_reduce_precision_array_keeps_nan_and_shape_and_is_a_copy(dtype):
    x = np.array([[np.nan, 1.0, -np.inf], [0.5, -0.0, 3.0]], dtype).T  # (a strided view)
    out = reduce_precision_array(x, 2, 1)
    assert out.dtype == x.dtype and out.shape == x.shape
    assert np.isnan(out[0, 0]) and not np.shares_memory(out, x)
    np.testing.assert_array_equal(out[1:].astype(np.float64), [[1.0, -0.0], [-np.inf, 3.0]])


# ---------------------------------------------------------------- clz_array, mulhi_array

@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_clz_array_equals_bit_length(dtype):
    x = _random_ints(np.random.default_rng(2), dtype, (5, 40))
    bits = 8 * np.dtype(dtype).itemsize
    unsigned = x.view(f"u{np.dtype(dtype).itemsize}")
    want = np.array([bits - int(v).bit_length() for v in unsigned.ravel()]).reshape(x.shape)
    got = clz_array(x[:, ::2])
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.astype(np.int64), want[:, ::2])


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_mulhi_array_equals_python_integers(dtype):
    rng = np.random.default_rng(3)
    x, y = _random_ints(rng, dtype, (200,)), _random_ints(rng, dtype, (200,))
    bits = 8 * np.dtype(dtype).itemsize
    want = [(int(a) * int(b)) >> bits for a, b in zip(x, y)]  # floor shift: signed high half
    got = mulhi_array(x, y)
    assert got.dtype == x.dtype
    assert [int(v) for v in got] == want
    scalar_rhs = mulhi_array(x, y[:1].reshape(()))  # broadcasting a rank-0 operand
    assert [int(v) for v in scalar_rhs] == [(int(a) * int(y[0])) >> bits for a in x]


# ---------------------------------------------------------------- qr_of_empty, fft shapes

@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 4), (2, 4, 0), (0, 0)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_qr_of_empty_matches_numpy_conventions(shape, full_matrices):
    a = np.zeros(shape, np.float32)
    q, r = qr_of_empty(a, full_matrices)
    m, n = shape[-2:]
    k = m if full_matrices else min(m, n)
    assert q.shape == shape[:-2] + (m, k) and r.shape == shape[:-2] + (k, n)
    assert q.dtype == r.dtype == np.float32
    np.testing.assert_array_equal(q, np.broadcast_to(np.eye(m, k, dtype=np.float32), q.shape))
    if m and n == 0:  # numpy's own answer where it has one
        nq, _ = np.linalg.qr(np.zeros((m, 0)), mode="complete" if full_matrices else "reduced")
        np.testing.assert_array_equal(q, np.broadcast_to(nq, q.shape))


def test_fft_result_shape_dtype_equals_numpy_fft():
    FftType = fft_module.FftType
    shape_dtype = fft_module.fft_result_shape_dtype
    x = np.zeros((3, 4, 6), np.float32)
    assert shape_dtype(x.shape, x.dtype, FftType.RFFT, (4, 6)) == (
        np.fft.rfftn(x, axes=(1, 2)).shape, np.dtype(np.complex64))
    c = np.zeros((3, 4, 4), np.complex128)
    assert shape_dtype(c.shape, c.dtype, FftType.IRFFT, (4, 6)) == (
        np.fft.irfftn(c, s=(4, 6), axes=(1, 2)).shape, np.dtype(np.float64))
    assert shape_dtype(c.shape, c.dtype, FftType.FFT, (4, 4)) == (c.shape, c.dtype)
    with pytest.raises(ValueError, match="fft_lengths"):
        shape_dtype(c.shape, c.dtype, FftType.FFT, (5,))


@pytest.mark.parametrize("shape", [(0, 3), (3, 0), (2, 0, 4), (0, 0)])
@pytest.mark.parametrize("full_matrices", [True, False])
def test_svd_of_empty_shapes_and_values(shape, full_matrices):
    a = np.zeros(shape, np.complex64)
    s, u, vh = svd_of_empty(a, full_matrices, True)
    m, n = shape[-2:]
    k = min(m, n)
    mu, nv = (m, n) if full_matrices else (k, k)
    assert s.shape == shape[:-2] + (k,) and s.dtype == np.float32
    assert u.shape == shape[:-2] + (m, mu) and vh.shape == shape[:-2] + (nv, n)
    assert u.dtype == vh.dtype == np.complex64
    np.testing.assert_array_equal(u, np.broadcast_to(np.eye(m, mu), u.shape))
    np.testing.assert_array_equal(vh, np.broadcast_to(np.eye(nv, n), vh.shape))
    (only_s,) = svd_of_empty(a, full_matrices, False)
    assert only_s.shape == s.shape


def test_gather_fill_value_defaults_and_casts():
    half = gather_fill_value(np.float16)
    assert np.isnan(half) and half.dtype == np.float16
    assert np.isnan(gather_fill_value(ml_dtypes.bfloat16))
    assert np.isnan(gather_fill_value(np.complex64).real)
    assert gather_fill_value(np.int16) == -32768 and gather_fill_value(np.uint32) == 2 ** 32 - 1
    assert gather_fill_value(np.bool_) == True  # noqa: E712 (a NumPy bool)
    assert gather_fill_value(np.int8, 300) == np.int8(44)  # a cast, wrapping as NumPy's does
    assert gather_fill_value(np.float32, 1e300) == np.inf


@pytest.mark.parametrize("axis", [0, 1])
def test_top_k_by_sorting_against_a_loop(axis):
    rng = np.random.default_rng(4)
    x = np.round(rng.standard_normal((5, 7)) * 2)  # ties
    x[1, 3] = x[2, 2] = np.nan
    values, indices = top_k_by_sorting(x, 3, axis, lambda v: np.argsort(v, axis=-1, kind="stable"))
    assert indices.dtype == np.int32 and values.flags.c_contiguous
    for j in range(x.shape[1 - axis]):
        line = x[:, j] if axis == 0 else x[j]
        # descending, NaN largest, ties by index: sort by (not NaN, -value, index)
        want = sorted(range(len(line)), key=lambda i: (not np.isnan(line[i]),
                                                       0 if np.isnan(line[i]) else -line[i], i))[:3]
        got = indices[:, j] if axis == 0 else indices[j]
        assert list(got) == want
        np.testing.assert_array_equal(values[:, j] if axis == 0 else values[j], line[want])


@pytest.mark.parametrize("which", ["sum", "max", "min"])
def test_reduce_window_array_against_a_loop_and_layout_free(which):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 5)).astype(np.float32)
    params = dict(window_dimensions=(2, 3), window_strides=(2, 1), padding=((1, 0), (-1, 2)),
                  base_dilation=(1, 2), window_dilation=(1, 2))
    got = reduce_window_array(x, which, **params)
    # the loop: pad/dilate by hand (identity fill), then reduce each window in float64
    fill = {"sum": 0.0, "max": -np.inf, "min": np.inf}[which]
    rows = _dilate_and_pad_loop_2d(x.astype(np.float64), (1, 2), ((1, 0), (-1, 2)), fill)
    reduce = {"sum": np.sum, "max": np.max, "min": np.min}[which]
    out_shape = ((rows.shape[0] - 2) // 2 + 1, rows.shape[1] - 4)
    want = np.array([[reduce(rows[2 * i:2 * i + 2, j:j + 5:2]) for j in range(out_shape[1])]
                     for i in range(out_shape[0])])
    assert got.shape == out_shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # a transposed (F-ordered) operand gives the same bits as its C-ordered copy
    xt = np.ascontiguousarray(x.T).T
    assert not xt.flags.c_contiguous
    assert reduce_window_array(xt, which, **params).tobytes() == got.tobytes()


def _dilate_and_pad_loop_2d(x, dilation, padding, fill):
    rows = np.stack([_dilate_and_pad_loop(r, dilation[1:], padding[1:], fill) for r in x])
    return np.stack([_dilate_and_pad_loop(c, dilation[:1], padding[:1], fill)
                     for c in rows.T]).T
