"""r_/c_/s_/index_exp/mgrid/ogrid/ix_, the *_indices functions, ravel_multi_index and
unravel_index: values against NumPy, jit, and JAX's errors."""
from __future__ import annotations

import numpy as np
import pytest

import plax
import plax.numpy as jnp
from plax.errors import ConcretizationTypeError


def test_concatenators():
    x = np.array([7, 8])
    np.testing.assert_array_equal(jnp.r_[1:4, 0, jnp.array(x)], np.r_[1:4, 0, x])
    np.testing.assert_allclose(jnp.r_[0:1:5j], np.r_[0:1:5j], rtol=1e-6)
    np.testing.assert_array_equal(jnp.r_["0,2,0", [1, 2], [3, 4]], np.r_["0,2,0", [1, 2], [3, 4]])
    np.testing.assert_array_equal(jnp.r_["-1", np.ones((2, 2)), np.zeros((2, 1))],
                                  np.r_["-1", np.ones((2, 2)), np.zeros((2, 1))])
    np.testing.assert_array_equal(jnp.r_["r", [1, 2]], [[1, 2]])
    np.testing.assert_array_equal(jnp.c_[x, x + 1], np.c_[x, x + 1])
    np.testing.assert_array_equal(jnp.c_[np.ones((2, 2)), x], np.c_[np.ones((2, 2)), x])


def test_index_expressions():
    assert jnp.s_[1:2, ...] == np.s_[1:2, ...]
    assert jnp.index_exp[1] == (1,)


def test_grids():
    for key in [(slice(0, 2), slice(0, 3)), (slice(0, 1, 3j), slice(1, 3))]:
        np.testing.assert_allclose(jnp.mgrid[key], np.mgrid[key], rtol=1e-6)
        for a, b in zip(jnp.ogrid[key], np.ogrid[key]):
            np.testing.assert_allclose(a, b, rtol=1e-6)
    assert jnp.mgrid[0:2, 0:3].dtype == np.int32 and jnp.mgrid[0:1:3j].dtype == np.float32


def test_ix_():
    a = np.arange(12).reshape(3, 4)
    rows, cols = np.array([0, 2]), np.array([3, 1, 0])
    np.testing.assert_array_equal(jnp.asarray(a)[jnp.ix_(rows, cols)], a[np.ix_(rows, cols)])
    with pytest.raises(NotImplementedError):
        jnp.ix_(np.array([True, False]))
    with pytest.raises(ValueError):
        jnp.ix_(np.ones((2, 2), np.int32))


@pytest.mark.parametrize("n,k,m", [(3, 0, None), (4, 1, 5), (4, -2, 3)])
def test_triangle_indices(n, k, m):
    for ours, ref in [(jnp.tril_indices(n, k, m), np.tril_indices(n, k, m)),
                      (jnp.triu_indices(n, k, m), np.triu_indices(n, k, m))]:
        for a, b in zip(ours, ref):
            np.testing.assert_array_equal(a, b)
    arr = np.zeros((n, n if m is None else m))
    for a, b in zip(jnp.tril_indices_from(arr, k), np.tril_indices_from(arr, k)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(jnp.triu_indices_from(arr, k), np.triu_indices_from(arr, k)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError):
        jnp.tril_indices_from(np.zeros(3))


def test_diag_and_mask_indices():
    for a, b in zip(jnp.diag_indices(3, 3), np.diag_indices(3, 3)):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(jnp.diag_indices_from(np.zeros((2, 2))), np.diag_indices(2)):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError):
        jnp.diag_indices_from(np.zeros((2, 3)))
    for a, b in zip(jnp.mask_indices(3, jnp.triu, 1), np.mask_indices(3, np.triu, 1)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dims", [(2, 3), (4, 1, 5)])
@pytest.mark.parametrize("order", ["C", "F"])
def test_ravel_unravel(dims, order):
    rng = np.random.default_rng(2)
    idx = tuple(rng.integers(0, d, 6) for d in dims)
    ref = np.ravel_multi_index(idx, dims, order=order)
    np.testing.assert_array_equal(jnp.ravel_multi_index(idx, dims, order=order), ref)
    if order == "C":
        for a, b in zip(jnp.unravel_index(ref, dims), np.unravel_index(ref, dims)):
            np.testing.assert_array_equal(a, b)
    jitted = plax.jit(lambda *i: jnp.ravel_multi_index(i, dims, mode="clip", order=order))
    np.testing.assert_array_equal(jitted(*idx), ref)


def test_ravel_modes_and_errors():
    idx = (np.array([0, 1, 5]), np.array([2, -1, 1]))
    np.testing.assert_array_equal(jnp.ravel_multi_index(idx, (2, 3), mode="clip"),
                                  np.ravel_multi_index(idx, (2, 3), mode="clip"))
    np.testing.assert_array_equal(jnp.ravel_multi_index(idx, (2, 3), mode="wrap"),
                                  np.ravel_multi_index(idx, (2, 3), mode="wrap"))
    with pytest.raises(ValueError, match="invalid entry"):
        jnp.ravel_multi_index(idx, (2, 3))
    with pytest.raises(ConcretizationTypeError, match="mode='wrap'"):
        plax.jit(lambda i: jnp.ravel_multi_index((i, i), (2, 3)))(np.array([1]))
    # out-of-range flat indices clip, negative ones count from the end (JAX's rule)
    out = jnp.unravel_index(np.array([-1, 5, 30, -30]), (2, 3))
    np.testing.assert_array_equal(out[0], [1, 1, 1, 0])
    np.testing.assert_array_equal(out[1], [2, 2, 2, 0])
    out = plax.vmap(lambda i: jnp.unravel_index(i, (2, 3))[1])(np.arange(6))
    np.testing.assert_array_equal(out, np.arange(6) % 3)
