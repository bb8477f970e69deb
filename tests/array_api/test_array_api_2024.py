"""The Array API standard 2024.12 as plax declares it, and regression tests for what the
standard's own test suite (data-apis/array-api-tests, run by tests/array_api/run_array_api_tests.sh)
found: ``pow`` at -0 and -infinity, ``arange(n, step=s)``, ``copysign``, empty masks, ``eye``.
Each is checked against a NumPy / ``math`` reference and, where JAX is installed, against
JAX, which behaves the same."""
from __future__ import annotations

import math

import numpy as np
import pytest

import plax
from plax import numpy as jnp


def _jax_numpy():
    return pytest.importorskip("jax.numpy", reason="cross-check with JAX (not installed in CI)")


@pytest.fixture()
def x64():
    with plax.config.override("jax_enable_x64", True):
        yield


# ---------------------------------------------------------------- the declared version

# What 2024.12 added to the namespace (the standard's changelog, "Additions").
ADDED_IN_2024_12 = ["count_nonzero", "cumulative_prod", "diff", "nextafter", "reciprocal",
                    "take_along_axis"]


@pytest.mark.parametrize("name", ADDED_IN_2024_12)
def test_2024_12_additions_present(name):
    assert callable(getattr(jnp, name))


def test_capabilities_declare_max_dimensions():
    caps = jnp.__array_namespace_info__().capabilities()
    assert caps["max dimensions"] == 64


def test_version_matches_jax():
    jnp_jax = _jax_numpy()
    assert jnp.__array_api_version__ == jnp_jax.__array_api_version__ == "2024.12"


@pytest.mark.parametrize("include_initial", [False, True])
def test_cumulative_prod_include_initial(include_initial):
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    out = jnp.cumulative_prod(jnp.asarray(x), axis=1, include_initial=include_initial)
    expected = np.cumprod(x, axis=1)
    if include_initial:
        expected = np.concatenate([np.ones((2, 1), np.float32), expected], axis=1)
    np.testing.assert_allclose(np.asarray(out), expected, rtol=1e-6)


def test_count_nonzero_keepdims():
    x = np.array([[0, 1, 2], [0, 0, 3]])
    out = jnp.count_nonzero(jnp.asarray(x), axis=1, keepdims=True)
    np.testing.assert_array_equal(np.asarray(out), np.count_nonzero(x, axis=1, keepdims=True))


def test_diff_prepend_append():
    x = np.array([1.0, 4.0, 9.0], np.float32)
    out = jnp.diff(jnp.asarray(x), n=2, prepend=jnp.asarray([0.0]), append=jnp.asarray([16.0]))
    np.testing.assert_array_equal(np.asarray(out), np.diff(x, n=2, prepend=[0.0], append=[16.0]))


# ---------------------------------------------------------------- pow's special cases

# The standard (and IEEE 754's pow, and XLA): for x1 = -0 or -infinity and an x2 that is not an
# odd integer, the result is |x1| ** x2. NumPy's power computes x ** 0.5 as sqrt(x), which
# gives -0 and nan there; these exponents include 0.5 and -0.5 for that reason.
EXPONENTS = [0.5, -0.5, 2.0, 2.5, -2.5, 1e300, 3.0, -3.0]


def _pow_at_signed_edge(x1: float, x2: float) -> float:
    """The standard's pow for x1 in (-0, -inf), written from its special-case sentences."""
    odd_integer = x2 == math.floor(x2) and math.fmod(x2, 2) in (1.0, -1.0)
    magnitude = (0.0 if x2 > 0 else math.inf) if x1 == 0 else (math.inf if x2 > 0 else 0.0)
    return -magnitude if odd_integer else magnitude


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("exponent", EXPONENTS)
def test_pow_at_negative_zero_and_infinity(x64, dtype, exponent):
    x = np.array([-0.0, -np.inf], dtype)
    expected = np.array([_pow_at_signed_edge(float(v), exponent) for v in x], dtype)
    for out in (jnp.pow(jnp.asarray(x), exponent),
                jnp.asarray(x) ** exponent,
                jnp.pow(jnp.asarray(x), jnp.asarray(exponent, dtype)),
                plax.jit(lambda a: a ** exponent, backend="numpy")(jnp.asarray(x))):
        out = np.asarray(out)
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(np.signbit(out), np.signbit(expected))


@pytest.mark.parametrize("exponent", [0.5, 2.5, -0.5])
def test_pow_at_negative_zero_and_infinity_matches_jax(exponent):
    jnp_jax = _jax_numpy()
    x = np.array([-0.0, -np.inf, 4.0], np.float32)
    ours = np.asarray(jnp.asarray(x) ** exponent)
    theirs = np.asarray(jnp_jax.asarray(x) ** exponent)
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(np.signbit(ours), np.signbit(theirs))


# ---------------------------------------------------------------- arange

ARANGE_CASES = [((0,), {"step": 1.0}), ((5,), {"step": 2}), ((3,), {"step": -1}),
                ((2.5,), {"step": 0.5}), ((1, 7), {"step": 3})]


@pytest.mark.parametrize("args, kwargs", ARANGE_CASES)
def test_arange_stop_only_with_step(x64, args, kwargs):
    # arange(n, step=s) counts from 0 to n, as NumPy and JAX do
    out = jnp.arange(*args, **kwargs)
    expected = np.arange(*args, **kwargs)
    np.testing.assert_array_equal(np.asarray(out), expected)
    assert out.dtype == expected.dtype  # int64 / float64 with x64, as NumPy


@pytest.mark.parametrize("args, kwargs", ARANGE_CASES)
def test_arange_stop_only_with_step_matches_jax(args, kwargs):
    jnp_jax = _jax_numpy()
    out, theirs = jnp.arange(*args, **kwargs), jnp_jax.arange(*args, **kwargs)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(theirs))
    assert out.dtype == theirs.dtype


# ---------------------------------------------------------------- expand_dims

@pytest.mark.parametrize("axis", [3, -4, 7, (0, 4)])
def test_expand_dims_axis_out_of_bounds_is_a_plain_value_error(axis):
    # JAX's exception (the standard asks for IndexError: a suite failure plax keeps, as JAX)
    with pytest.raises(ValueError, match="out of bounds") as info:
        jnp.expand_dims(jnp.ones((2, 3)), axis)
    assert type(info.value) is ValueError


@pytest.mark.parametrize("axis", [0, 2, -1, -3, (0, 3)])
def test_expand_dims_in_bounds(axis):
    x = np.arange(6.0).reshape(2, 3)
    assert jnp.expand_dims(jnp.asarray(x), axis).shape == np.expand_dims(x, axis).shape


# ---------------------------------------------------------------- the immutable array

def test_setitem_raises_type_error_as_jax():
    # The suite's __setitem__ tests mutate arrays; plax arrays are immutable, as JAX's.
    x = jnp.zeros(3)
    with pytest.raises(TypeError, match=r"\.at\[idx\]\.set"):
        x[0] = 1.0
    with pytest.raises(TypeError, match="immutable"):
        x[jnp.asarray([True, False, True])] = 1.0


# ---------------------------------------------------------------- copysign broadcasting

@pytest.mark.parametrize("x_shape, y_shape", [((), (3,)), ((), (0,)), ((2, 1), (3,)),
                                              ((3,), ())])
def test_copysign_broadcasts_both_ways(x_shape, y_shape):
    # the suite found copysign(0-d, 1-d) failing: the sign was not broadcast to |x|'s shape
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    y = rng.standard_normal(y_shape).astype(np.float32)
    out = jnp.copysign(jnp.asarray(x), jnp.asarray(y))
    expected = np.copysign(x, y)
    assert out.shape == expected.shape
    np.testing.assert_array_equal(np.asarray(out), expected)


# ---------------------------------------------------------------- empty boolean masks

@pytest.mark.parametrize("x_shape, mask_shape", [((3,), (0,)), ((1,), (0,)), ((1, 2), (0, 2)),
                                                 ((1, 2), (0, 0)), ((2, 3, 4), (0, 3))])
def test_empty_mask_selects_nothing(x_shape, mask_shape):
    # a mask with no elements matches any axis sizes, as NumPy (the suite found x[(0,)-mask]
    # on a (1,) array raising)
    x = np.arange(math.prod(x_shape), dtype=np.float32).reshape(x_shape)
    mask = np.zeros(mask_shape, bool)
    out = jnp.asarray(x)[jnp.asarray(mask)]
    assert out.shape == x[mask].shape


def test_empty_mask_matches_jax():
    jnp_jax = _jax_numpy()
    x, mask = np.ones((1, 2), np.float32), np.zeros((0, 2), bool)
    assert jnp.asarray(x)[jnp.asarray(mask)].shape == jnp_jax.asarray(x)[mask].shape


def test_mismatched_nonempty_mask_still_raises():
    with pytest.raises(IndexError, match="boolean index did not match"):
        jnp.ones(1)[jnp.asarray([True, False])]


# ---------------------------------------------------------------- eye with a far diagonal

@pytest.mark.parametrize("n, m, k", [(0, None, -2**63 - 1), (3, None, -2**63 - 1),
                                     (3, 4, 2**70), (3, 4, 4), (3, 4, -3), (3, 4, -2)])
def test_eye_diagonal_beyond_the_matrix(n, m, k):
    # the suite found eye(0, k=-2**63-1) overflowing int32; JAX gives zeros
    out = jnp.eye(n, m, k=k)
    np.testing.assert_array_equal(np.asarray(out), np.eye(n, m, k=k))


def test_eye_far_diagonal_matches_jax():
    jnp_jax = _jax_numpy()
    np.testing.assert_array_equal(np.asarray(jnp.eye(3, k=2**40)),
                                  np.asarray(jnp_jax.eye(3, k=2**40)))
