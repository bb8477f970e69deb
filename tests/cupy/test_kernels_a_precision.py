"""The precision family's GPU kernels (``plax_cupy.kernels_precision``: conversions, bitcasts,
reduce_precision, nextafter, clz, mulhi, select_n, clamp, complex/real/imag/conj) on the
simulated GPU against the NumPy backend's (run by test_kernels_a_simulated.py)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from plax import lax
from plax.lax.extra_elementwise import clz_p, mulhi_p, square_p
from plax.lax.precision import reduce_precision_p
from test_kernels_a_simulated import (check, dtypes_all, on_a_gpu,
                                      run_kernel, sample)

pytestmark = on_a_gpu

IDS = lambda d: np.dtype(d).name  # noqa: E731
INTS = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
HALF_AND_UP = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]


def _edges(dtype):
    """Floats with NaN, infinities, signed zeros, subnormals, huge and tie values."""
    v = [0.0, -0.0, 1.0, -1.5, 2.5, np.nan, np.inf, -np.inf, 1e-40, 6e-8, 65504.0, 70000.0,
         3e38, -1e300, 2.0 ** 63, -2.0 ** 63, 2.0 ** 64, 255.5, -128.5, 1.0 + 2.0 ** -11]
    with np.errstate(all="ignore"):
        return np.array(v, np.float64).astype(dtype)


@pytest.mark.parametrize("src", dtypes_all(), ids=IDS)
def test_convert_element_type_every_pair(src):
    x = _edges(src) if np.dtype(src).kind in "fV" else sample((20,), src)
    if np.dtype(src).kind == "c":
        with np.errstate(all="ignore"):
            x = (_edges(np.float64) + 1j * np.roll(_edges(np.float64), 2)).astype(src)
    for dst in dtypes_all():
        dst = np.dtype(dst)
        if dst == ml_dtypes.bfloat16 or np.dtype(src) == ml_dtypes.bfloat16:
            continue  # the backend converts bfloat16 around the kernel (test below)
        check(lax.convert_element_type_p, x, new_dtype=dst, weak_type=False)


def test_convert_through_bfloat16():
    for src in (np.float32, np.float64, np.int32, np.float16):
        x = _edges(src) if np.dtype(src).kind == "f" else sample((20,), src)
        check(lax.convert_element_type_p, x, new_dtype=np.dtype(ml_dtypes.bfloat16), weak_type=False)
    b = _edges(ml_dtypes.bfloat16)
    for dst in (np.int8, np.uint32, np.int64, np.float16, np.float32, np.bool_, np.complex64):
        check(lax.convert_element_type_p, b, new_dtype=np.dtype(dst), weak_type=False)


@pytest.mark.parametrize("src", [np.int8, np.uint16, np.int32, np.float32, np.float64, np.int64,
                                 np.complex64, np.float16], ids=IDS)
def test_bitcast_convert_type(src):
    x = sample((3, 8), src)
    for dst in [np.int8, np.uint8, np.int16, np.float16, np.uint32, np.float32, np.int64,
                np.float64, np.complex64, np.complex128]:
        old, new = np.dtype(src).itemsize, np.dtype(dst).itemsize
        y = x if new <= old else x[:, : (8 // (new // old)) * (new // old)].reshape(3, -1, new // old)
        check(lax.bitcast_convert_type_p, y, new_dtype=np.dtype(dst))


def test_bitcast_bfloat16_bits_every_width():
    b = _edges(ml_dtypes.bfloat16)[:8].reshape(4, 2)
    for dst in (np.int16, np.uint16, np.float16):
        check(lax.bitcast_convert_type_p, b, new_dtype=np.dtype(dst))
    check(lax.bitcast_convert_type_p, b, new_dtype=np.dtype(np.float32))      # pairs join
    check(lax.bitcast_convert_type_p, b[0], new_dtype=np.dtype(np.int32))     # to a scalar
    bf16 = np.dtype(ml_dtypes.bfloat16)
    check(lax.bitcast_convert_type_p, np.float32(-2.5), new_dtype=bf16)       # a scalar splits
    check(lax.bitcast_convert_type_p, sample((3,), np.uint16), new_dtype=bf16)
    check(lax.bitcast_convert_type_p, sample((3,), np.float64), new_dtype=bf16)


@pytest.mark.parametrize("dtype", HALF_AND_UP, ids=IDS)
def test_reduce_precision(dtype):
    x = _edges(dtype)
    for exponent_bits, mantissa_bits in [(5, 10), (8, 7), (8, 23), (4, 3), (5, 2), (11, 52), (2, 1)]:
        check(reduce_precision_p, x, exponent_bits=exponent_bits, mantissa_bits=mantissa_bits)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64], ids=IDS)
def test_nextafter(dtype):
    x = _edges(dtype)
    for y in (np.roll(x, 3), np.zeros_like(x), -x, x):
        check(lax.nextafter_p, x, y)


def test_nextafter_bfloat16_on_the_bits():
    # the backend hands nextafter bfloat16 operands as bits (bf16 == "bits"); widened to
    # float32 the step of one bfloat16 unit would round back to x
    import cupy
    from plax_cupy import kernels
    from plax_cupy.backend import Bf16Buffer
    fn = kernels.impls()[lax.nextafter_p]
    assert fn.bf16 == "bits"
    x = _edges(ml_dtypes.bfloat16)
    y = np.roll(x, 5)
    bits = lambda a: Bf16Buffer(cupy.asarray(a.view(np.uint16)))  # noqa: E731
    out = fn(bits(x), bits(y))
    from test_kernels_a_simulated import reference
    want = np.asarray(reference(lax.nextafter_p, x, y))
    np.testing.assert_array_equal(out.bits.get(), want.view(np.uint16))


@pytest.mark.parametrize("dtype", INTS, ids=IDS)
def test_clz_and_mulhi(dtype):
    info = np.iinfo(dtype)
    x = np.array([0, 1, 2, 3, info.max, info.min, info.max // 3, info.min + 1, 7, 100], dtype)
    check(clz_p, x)
    check(mulhi_p, x, np.roll(x, 1))
    check(mulhi_p, x, x)


@pytest.mark.parametrize("dtype", dtypes_all(), ids=IDS)
def test_select_n_and_clamp(dtype):
    cases = [sample((4, 5), dtype, s) for s in range(3)]
    which = sample((4, 5), np.bool_)
    check(lax.select_n_p, which, cases[0], cases[1])
    check(lax.select_n_p, which, cases[0])
    check(lax.select_n_p, (sample((4, 5), np.int32) % 3 + 3) % 3, *cases)
    check(lax.select_n_p, np.bool_(True), cases[0], cases[1])
    if np.dtype(dtype).kind not in "bc":
        check(lax.clamp_p, sample((), dtype, 5), cases[1], sample((), dtype, 6))
        check(lax.clamp_p, cases[0], cases[1], cases[2])


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=IDS)
def test_complex_parts(dtype):
    x, y = _edges(dtype), np.roll(_edges(dtype), 4)
    z = check(lax.complex_p, x, y)
    check(lax.complex_p, x[:1].reshape(()), y[:1].reshape(()))
    for prim in (lax.real_p, lax.imag_p, lax.conj_p):
        check(prim, z)
    check(lax.conj_p, x)


def test_select_n_bfloat16():
    values = run_kernel(lax.select_n_p, np.array([True, False]),
                        np.array([1, 2], ml_dtypes.bfloat16), np.array([3, 4], ml_dtypes.bfloat16))
    np.testing.assert_array_equal(values.astype(np.float32), [3, 2])


@pytest.mark.parametrize("dtype", [d for d in dtypes_all() if np.dtype(d).kind != "b"], ids=IDS)
def test_square(dtype):
    x = sample((3, 7), dtype)
    if np.dtype(dtype).kind in "iu":
        x = x * np.asarray(np.iinfo(dtype).max // 50, dtype)  # wraps
    check(square_p, x, rtol=None if np.dtype(dtype).kind in "iu" else 1e-6)
