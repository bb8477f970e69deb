"""The sort family's GPU kernels (``plax_cupy.kernels_sort``: sort with several operands and
keys, top_k) on the simulated GPU against the NumPy backend's: stable ties, NaN last, complex
keys (run by test_kernels_a_simulated.py)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from plax import lax
from plax.lax.top_k import top_k_p
from test_kernels_a_simulated import check, dtypes_all, on_a_gpu, sample

pytestmark = on_a_gpu

IDS = lambda d: np.dtype(d).name  # noqa: E731


def _keys(dtype, shape, seed=0):
    """Values with many ties (and NaN, -0.0 and inf for floats)."""
    x = sample(shape, dtype, seed)
    if np.dtype(dtype).kind in "iu":
        return (x % 3).astype(dtype)
    if np.dtype(dtype).kind in "fcV":
        x = np.round(x.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64) / 4)
        flat = x.reshape(-1)
        flat[1], flat[4], flat[6] = np.nan, -0.0, np.inf
        return x.astype(dtype)
    return x


@pytest.mark.parametrize("dtype", dtypes_all(), ids=IDS)
def test_sort_one_key_stable_with_payload(dtype):
    keys = _keys(dtype, (3, 11))
    payload = np.arange(33, dtype=np.int32).reshape(3, 11)
    for dimension in (0, 1):
        check(lax.sort_p, keys, dimension=dimension, is_stable=True, num_keys=1)
        check(lax.sort_p, keys, payload, dimension=dimension, is_stable=True, num_keys=1)


def test_sort_several_keys_of_different_dtypes():
    a = _keys(np.int8, (2, 13), 1)
    b = _keys(np.float32, (2, 13), 2)
    c = _keys(np.complex64, (2, 13), 3)
    payload = sample((2, 13), ml_dtypes.bfloat16, 4)
    check(lax.sort_p, a, b, payload, dimension=1, is_stable=True, num_keys=2)
    check(lax.sort_p, c, a, b, dimension=1, is_stable=False, num_keys=3)
    check(lax.sort_p, b, c, dimension=0, is_stable=True, num_keys=2)


@pytest.mark.parametrize("dtype", [d for d in dtypes_all() if np.dtype(d).kind not in "bc"], ids=IDS)
def test_top_k(dtype):
    x = _keys(dtype, (4, 9))
    if np.dtype(dtype) == ml_dtypes.bfloat16:
        # the NumPy backend's top_k sorts bfloat16 with ml_dtypes' comparisons, which do not
        # order NaN (it is found first with JAX; test_top_k_nan_first_as_jax checks that)
        wide = x.astype(np.float32)
        x = np.where(np.isnan(wide), np.float32(2.0), wide).astype(dtype)
    for k in (0, 1, 4, 9):
        check(top_k_p, x, k=k, axis=1)
    check(top_k_p, x, k=2, axis=0)


def _top_k_nan_first(row: np.ndarray, k: int) -> np.ndarray:
    """Indices of ``row``'s k largest values in JAX's order: NaN above +inf, ties by index."""
    w = row.astype(np.float64)
    nan = np.isnan(w)
    order = np.lexsort((np.arange(w.size), -np.where(nan, 0.0, w), -nan.astype(np.int8)))
    return order[:k]


def test_top_k_nan_first_as_jax():
    # JAX's top_k orders NaN first (checked against jax.lax.top_k when this was written);
    # the reference is a NumPy lexsort so the test runs where JAX is not installed (CI)
    from test_kernels_a_simulated import run_kernel
    for dtype in (np.float16, ml_dtypes.bfloat16, np.float32):
        x = np.array([[0.0, np.nan, 1.0, -0.0, np.inf, 1.0, np.nan]], dtype)
        values, idx = run_kernel(top_k_p, x, k=5, axis=1)
        want_idx = _top_k_nan_first(x[0], 5)
        np.testing.assert_array_equal(np.asarray(idx)[0], want_idx)
        np.testing.assert_array_equal(values.astype(np.float64)[0], x[0, want_idx].astype(np.float64))


#: the H200's failing keys (issue 24): NaN of both signs, -0.0 and infinities
SIGNED_NAN_KEYS = [np.nan, -0.0, 0.0, -np.nan, 1.0, -np.inf, np.inf, -1.0, 0.0, np.nan]


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64],
                         ids=IDS)
def test_sort_of_a_1d_key_puts_nan_of_either_sign_last(dtype):
    # CuPy radix-sorts a 1-d float32/float64 array on its bits, where a NaN with the sign bit
    # set comes first (the H200 returned [nan, -inf, ...]); the kernel canonicalises its keys,
    # so every NaN is last and -0.0 ties with 0.0 (stable), as in JAX and the NumPy backend
    keys = np.array(SIGNED_NAN_KEYS, dtype)
    payload = np.arange(keys.size, dtype=np.int32)
    _, order = check(lax.sort_p, keys, payload, dimension=0, is_stable=True, num_keys=1)
    np.testing.assert_array_equal(order, [5, 7, 1, 2, 8, 4, 6, 0, 3, 9])
    # (the NumPy backend's top_k does not order bfloat16 NaN: see test_top_k)
    from test_kernels_a_simulated import run_kernel
    _, idx = run_kernel(top_k_p, keys, k=4, axis=0)
    np.testing.assert_array_equal(idx, [0, 3, 9, 6])  # NaN first, then inf


def test_sort_of_a_1d_complex_key_orders_nan_parts_of_either_sign_last():
    re = np.array([1.0, -np.nan, 1.0, 0.0, np.nan, -0.0])
    im = np.array([-np.nan, 2.0, 0.5, -0.0, 1.0, 3.0])
    keys = (re + 1j * im).astype(np.complex64)
    keys.real, keys.imag = re, im  # (the multiplication would make NaN parts spread)
    check(lax.sort_p, keys, np.arange(6, dtype=np.int32), dimension=0, is_stable=True,
          num_keys=1)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.complex64,
                                   np.complex128], ids=IDS)
def test_canonical_float_key_is_one_launch_on_the_bits(dtype):
    # every NaN (either sign, any payload) the positive quiet NaN, -0.0 as 0.0, every other
    # value's bits unchanged (a float32 subnormal too: no flush), in one launch for the key
    # (both parts of a complex one); bfloat16 keys reach it widened (the sort tests above)
    import cupy
    from plax_cupy.kernels_sort import canonical_float_key
    real = np.dtype(dtype).kind == "f"
    part = np.dtype(dtype) if real else np.dtype(f"f{np.dtype(dtype).itemsize // 2}")
    u = np.dtype(f"u{part.itemsize}")
    sign, quiet = u.type(1 << (8 * part.itemsize - 1)), np.asarray(np.nan, part).view(u)[()]
    values = np.array([np.nan, -0.0, 0.0, 1.0, -np.inf, np.inf, -2.5, np.finfo(part).tiny / 4],
                      part)
    bits = values.view(u).copy()
    bits[0] |= sign | u.type(1)                    # a negative NaN with a payload
    bits = np.concatenate([bits, [quiet | u.type(2)]]).astype(u)   # a positive one
    host = bits.view(part)
    if not real:   # the same words, paired into complex numbers (one part NaN in some)
        host = np.concatenate([host, host[::-1]]).view(dtype)
    key = cupy.asarray(host)
    counts = lambda: fake_counts(cupy)   # noqa: E731
    before = counts()
    out = canonical_float_key(key)
    assert counts() - before == 1
    assert out.dtype == key.dtype and out.shape == key.shape
    got = cupy.asnumpy(out).view(part).view(u)
    words = host.view(part).view(u)
    magnitude = words & u.type(~sign)
    want = np.where(magnitude > np.asarray(np.inf, part).view(u)[()], quiet,
                    np.where(magnitude == 0, u.type(0), words)).astype(u)
    np.testing.assert_array_equal(got, want)
    assert (want != words).sum() == (3 if real else 6)   # the two NaN and -0.0 changed


def fake_counts(cupy) -> int:
    """CuPy operations and raw kernel launches so far (each one launch on a GPU): on the
    simulated GPU its counters; on a GPU, plax's launch count (raw kernels only)."""
    counts = getattr(cupy, "COUNTS", None)
    if counts is not None:
        return counts["operations"] + counts["kernel_launches"]
    import plax_cupy
    return plax_cupy.counters().launches
