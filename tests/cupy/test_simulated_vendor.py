"""The simulated CuPy's library answers (``fake_cupy_vendor``) are CuPy's on a GPU where they
differ from NumPy's: CUB's bit order for a 1-d float sort, other phases of eigen- and singular
vectors (others again for a batch) -- and still valid answers."""
from __future__ import annotations

import numpy as np
import pytest

import fake_cupy_vendor as vendor

#: the keys of the H200's failing sort (issue 24) and the order CuPy gave them there
KEYS = [np.nan, -0.0, 0.0, -np.nan, 1.0, -np.inf, np.inf, -1.0, 0.0, np.nan]
H200_ORDER = [3, 5, 7, 1, 2, 8, 4, 6, 0, 9]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_1d_float_sort_is_cubs_radix_order(dtype):
    keys = np.array(KEYS, dtype)
    np.testing.assert_array_equal(vendor.argsort(keys), H200_ORDER)
    out = vendor.sort(keys)
    np.testing.assert_array_equal(out.view(f"u{keys.itemsize}"),
                                  keys[H200_ORDER].view(f"u{keys.itemsize}"))  # bits kept
    # -0.0 ties with 0.0 (CUB takes -0.0 as 0.0): stable either way round
    np.testing.assert_array_equal(vendor.argsort(np.array([0.0, -0.0, 0.0], dtype)), [0, 1, 2])


def test_other_sorts_are_numpys_stable_order():
    keys = np.array(KEYS, np.float32)
    stable = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(vendor.argsort(keys.astype(np.float16)), stable)
    np.testing.assert_array_equal(vendor.argsort(keys.reshape(1, 10))[0], stable)
    np.testing.assert_array_equal(vendor.argsort(keys.reshape(10, 1), axis=0)[:, 0], stable)
    with pytest.raises(ValueError, match="kind"):
        vendor.argsort(keys, kind="quicksort")
    with pytest.raises(NotImplementedError):
        vendor.sort_in_place(np.zeros((3, 4), np.float32)[:, ::2])


@pytest.mark.parametrize("dtype", [np.float32, np.complex128])
def test_eigen_and_singular_vectors_come_in_other_valid_phases(dtype):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 4, 4)).astype(dtype)
    if np.dtype(dtype).kind == "c":
        a = a + 1j * rng.standard_normal((2, 4, 4))
    h = (a + np.conj(np.swapaxes(a, -1, -2))).astype(dtype)
    w, v = vendor.eigh(h)
    w0, v0 = np.linalg.eigh(h)
    np.testing.assert_allclose(w, w0, rtol=1e-5)
    np.testing.assert_allclose(h @ v, v * w[..., None, :], atol=1e-4)  # eigenvectors
    assert not np.allclose(v, v0, atol=1e-3)                           # in other phases
    single = vendor.eigh(h[0])[1]
    assert not np.allclose(single, v[0], atol=1e-3)  # a batch's phases are not a matrix's
    np.testing.assert_allclose(np.abs(single), np.abs(v[0]), atol=1e-5)
    for full in (True, False):
        u, s, vh = vendor.svd(a[:, :, :3], full_matrices=full)
        u0 = np.linalg.svd(a[:, :, :3], full_matrices=full)[0]
        assert not np.allclose(u, u0, atol=1e-3)
        np.testing.assert_allclose((u[..., :3] * s[..., None, :]) @ vh[..., :3, :], a[:, :, :3],
                                   atol=1e-4)


def test_the_solvers_raise_nothing_as_with_cupys_default_error_state():
    a = np.array([[4.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # second pivot 0
    low = vendor.cholesky(np.stack([a, np.eye(3)]))
    assert low[0, 1, 1] == 0 and low[0, 0, 0] == 2 and low[0, 1, 0] == 1
    np.testing.assert_array_equal(low[1], np.eye(3))
    singular = np.array([[2.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
    x = vendor.solve_triangular(singular, np.ones(3), lower=True)
    assert x[0] == 0.5 and np.isinf(x[1])
    np.testing.assert_allclose(vendor.solve_triangular(np.eye(3) * 2, np.ones((3, 2)), trans="T"),
                               np.full((3, 2), 0.5))
